//! The protocol end to end on the CPU backend: an honest node, and each way of lying about
//! a GPU that the challenge is meant to catch. Claims are 128 KiB (a 192-wide product of
//! 194 rows) so that every test runs in seconds.

use std::time::{Duration, Instant};

use crate::adversary::{Missing, OtherSeed, PartialWork, ShortMemory};
use crate::bounds::{self, BoundsTable, Entry, Figures, TimeBound};
use crate::verify::{Answer, Draws, Failure, Phase, PhaseTimes, ProvenClass, Verdict, judge};
use crate::{Backend, Claim, CpuBackend, Params, Prover, Sizing};

const TEST_MODEL: &str = "mcjs-test";
const CLAIM_BYTES: u64 = 128 << 10;
pub(crate) const DRAWS: Draws = Draws {
    held_seed: [0x4e; 32],
    open_seed: [0x0e; 32],
};

/// Figures so low that any honest run on any machine is within them.
const GENEROUS: BoundsTable<'static> = BoundsTable {
    entries: &[Entry {
        model: TEST_MODEL,
        figures: Figures::Measured {
            commit_macs_per_s: 1_000,
            held_bytes_per_s: 1_000,
        },
        source: "tests: generous on purpose",
    }],
    slack_percent: 150,
    chain_allowance: Duration::ZERO,
};

fn params_in(table: &BoundsTable<'_>, model: &str, seed: u8) -> Params {
    Params::for_claim_in(
        table,
        &Sizing::STANDARD,
        &Claim::new(model, CLAIM_BYTES),
        [seed; 32],
    )
    .expect("a claim large enough")
}

pub(crate) fn params() -> Params {
    params_in(&GENEROUS, TEST_MODEL, 1)
}

/// A node answering all three phases with `backend`, timed by the test's clock (standing in
/// for the chain's: from each seed to each answer).
pub(crate) fn answer<B: Backend>(params: &Params, backend: B) -> (Answer, Prover<B>) {
    let started = Instant::now();
    let mut prover = Prover::commit(params.clone(), backend).expect("the node computes");
    let commit = started.elapsed();
    let started = Instant::now();
    let held_digest = prover.hold(&DRAWS.held_seed).expect("the node holds");
    let held = started.elapsed();
    let opening = prover.open(&DRAWS.open_seed).expect("the node opens");
    let answer = Answer {
        commitment: prover.commitment(),
        held_digest,
        times: PhaseTimes { commit, held },
        opening,
    };
    (answer, prover)
}

fn honest_answer(params: &Params) -> Answer {
    answer(params, CpuBackend::new()).0
}

#[test]
fn an_honest_node_passes_and_proves_its_claim() {
    let params = params();
    let verdict = judge(&params, &DRAWS, &honest_answer(&params));
    let Verdict::Passed(profile) = &verdict else {
        panic!("{verdict:?}");
    };
    assert_eq!(profile.model, TEST_MODEL);
    assert_eq!(profile.claimed_memory_bytes, CLAIM_BYTES);
    assert_eq!(profile.held_bytes, params.held_bytes());
    // A device of exactly the claimed memory holds it.
    let device = CpuBackend::new().with_memory(CLAIM_BYTES);
    let verdict_on_device = judge(&params, &DRAWS, &answer(&params, device).0);
    assert!(
        matches!(verdict_on_device, Verdict::Passed(_)),
        "{verdict_on_device:?}"
    );
    assert_eq!(verdict.proven_class(), ProvenClass::Proven(profile.clone()));
}

#[test]
fn the_same_seeds_give_the_same_answers_on_any_number_of_threads() {
    let params = params();
    let one = answer(&params, CpuBackend::new().with_threads(1)).0;
    let three = answer(&params, CpuBackend::new().with_threads(3)).0;
    assert_eq!(one.commitment, three.commitment);
    assert_eq!(one.held_digest, three.held_digest);
    assert_eq!(one.opening, three.opening);
    let other = honest_answer(&params_in(&GENEROUS, TEST_MODEL, 2));
    assert_ne!(one.commitment, other.commitment);
}

#[test]
fn a_node_with_half_the_claimed_memory_cannot_hold_the_challenge() {
    let params = params();
    let device = CpuBackend::new().with_memory(CLAIM_BYTES / 2);
    let refused = Prover::commit(params, device).err().expect("out of memory");
    assert!(
        matches!(
            refused,
            crate::ProverError::Backend(crate::BackendError::OutOfMemory { .. })
        ),
        "{refused:?}"
    );
    // It never commits: the program records no commitment, and the verdict is this one.
    let verdict = Verdict::Failed(Failure::Unanswered {
        phase: Phase::Commit,
    });
    assert_eq!(verdict.proven_class(), ProvenClass::Lowest);
}

#[test]
fn a_node_with_half_the_claimed_memory_that_makes_up_the_rest_fails_the_held_check() {
    let params = params();
    let device = ShortMemory::new(CLAIM_BYTES / 2, Missing::MakeUp);
    let (answer, prover) = answer(&params, device);
    assert!(prover.backend().kept_rows() < params.rows * 6 / 10);
    let verdict = judge(&params, &DRAWS, &answer);
    assert!(
        matches!(verdict, Verdict::Failed(Failure::HeldMismatch { row, .. }) if row >= prover.backend().kept_rows()),
        "{verdict:?}"
    );
}

/// Wall-clock: the bound is calibrated on this machine from an honest node's held phase
/// (the fastest of three), as the table's figures are calibrated on the model itself.
#[test]
fn a_node_with_half_the_claimed_memory_that_recomputes_the_rest_is_late() {
    let params = params();
    let mut honest = Prover::commit(params.clone(), CpuBackend::new()).unwrap();
    let fastest = (0..3u8)
        .map(|i| {
            let started = Instant::now();
            honest.hold(&[i; 32]).unwrap();
            started.elapsed()
        })
        .min()
        .unwrap();
    let held_bytes_per_s =
        (u128::from(params.passes) * u128::from(params.held_bytes()) * 1_000_000_000
            / fastest.as_nanos().max(1)) as u64;
    let entries = [Entry {
        model: TEST_MODEL,
        figures: Figures::Measured {
            commit_macs_per_s: 1_000,
            held_bytes_per_s,
        },
        source: "calibrated by this test",
    }];
    let calibrated = BoundsTable {
        entries: &entries,
        ..GENEROUS
    };
    let params = params_in(&calibrated, TEST_MODEL, 1);

    let device = ShortMemory::new(CLAIM_BYTES / 2, Missing::Recompute);
    let (answer, _) = answer(&params, device);
    let verdict = judge(&params, &DRAWS, &answer);
    assert!(
        matches!(
            verdict,
            Verdict::Failed(Failure::Late {
                phase: Phase::Held,
                ..
            })
        ),
        "{verdict:?} (honest held phase {fastest:?})"
    );
    // Its answers are right: only the time gives it away.
    let untimed = Answer {
        times: PhaseTimes {
            commit: Duration::ZERO,
            held: Duration::ZERO,
        },
        ..answer
    };
    assert!(matches!(
        judge(&params, &DRAWS, &untimed),
        Verdict::Passed(_)
    ));
}

#[test]
fn a_product_computed_for_another_seed_fails_freivalds() {
    let params = params();
    let (answer, _) = answer(&params, OtherSeed::new([0x99; 32]));
    let first = params.rows_to_open(&DRAWS.open_seed)[0].row;
    assert_eq!(
        judge(&params, &DRAWS, &answer),
        Verdict::Failed(Failure::FreivaldsMismatch { row: first })
    );
}

#[test]
fn an_answer_after_the_bound_is_late_and_one_at_the_bound_is_not() {
    let params = params();
    let TimeBound::Measured { commit, held } = params.bound else {
        panic!("measured");
    };
    let on_time = honest_answer(&params);
    let at = |commit, held| Answer {
        times: PhaseTimes { commit, held },
        ..on_time.clone()
    };
    let tick = Duration::from_nanos(1);
    assert!(matches!(
        judge(&params, &DRAWS, &at(commit, held)),
        Verdict::Passed(_)
    ));
    assert_eq!(
        judge(&params, &DRAWS, &at(commit + tick, held)),
        Verdict::Failed(Failure::Late {
            phase: Phase::Commit,
            took: commit + tick,
            bound: commit
        })
    );
    assert_eq!(
        judge(&params, &DRAWS, &at(commit, held + tick)),
        Verdict::Failed(Failure::Late {
            phase: Phase::Held,
            took: held + tick,
            bound: held
        })
    );
}

/// A node that skipped m of R rows escapes only when none of the k distinct opened rows is
/// one of them: C(R-m, k) / C(R, k). Over 400 open seeds the share caught is within 0.08
/// (over four standard deviations) of 1 minus that.
#[test]
fn a_node_that_skipped_rows_is_caught_as_often_as_the_draw_says() {
    let params = params();
    let (r, k) = (params.rows, u64::from(params.rows_opened));
    let skipped: Vec<u64> = (0..6).map(|i| i * (r / 6) + 3).collect();
    assert!(skipped.iter().all(|&row| row < r));
    let m = skipped.len() as u64;
    let escapes: f64 = (0..k)
        .map(|i| (r - m - i) as f64 / (r - i) as f64)
        .product();
    let expected = 1.0 - escapes;
    let with_replacement = 1.0 - (1.0 - m as f64 / r as f64).powi(k as i32);
    assert!(
        expected >= with_replacement,
        "distinct rows catch at least as often"
    );

    let (first, mut prover) = answer(&params, PartialWork::new(skipped.clone()));
    let trials = 400;
    let mut caught = 0;
    for t in 0u32..trials {
        let draws = Draws {
            open_seed: crate::hash::sha256(&[b"trial", &t.to_le_bytes()]),
            ..DRAWS
        };
        let answer = Answer {
            opening: prover.open(&draws.open_seed).unwrap(),
            ..first.clone()
        };
        match judge(&params, &draws, &answer) {
            Verdict::Passed(_) => {}
            Verdict::Failed(Failure::FreivaldsMismatch { row }) => {
                assert!(skipped.contains(&row));
                caught += 1;
            }
            other => panic!("{other:?}"),
        }
    }
    let share = f64::from(caught) / f64::from(trials);
    assert!(
        (share - expected).abs() < 0.08,
        "caught {share}, expected {expected}"
    );
}

#[test]
fn a_tampered_opening_fails_and_says_where() {
    let params = params();
    let good = honest_answer(&params);
    let row = good.opening.rows[3].index;
    let pass = good.opening.rows[3].pass;
    let tampered = |f: &dyn Fn(&mut Answer)| {
        let mut a = good.clone();
        f(&mut a);
        judge(&params, &DRAWS, &a)
    };
    let failed = |f| Verdict::Failed(f);

    assert_eq!(
        tampered(&|a| a.opening.rows[3].proof.siblings[2][5] ^= 1),
        failed(Failure::BadProof { row })
    );
    assert_eq!(
        tampered(&|a| a.opening.rows[3].values[7] += 1),
        failed(Failure::BadProof { row })
    );
    assert_eq!(
        tampered(&|a| a.commitment[0] ^= 1),
        failed(Failure::HeldChainMismatch),
        "the held keys start from the commitment"
    );
    assert_eq!(
        tampered(&|a| a.opening.rows[3].held_proof.siblings[0][0] ^= 1),
        failed(Failure::HeldMismatch { row, pass })
    );
    assert_eq!(
        tampered(&|a| a.opening.held_roots[0][0] ^= 1),
        failed(Failure::HeldChainMismatch)
    );
    assert!(matches!(
        tampered(&|a| a.opening.rows.swap(0, 1)),
        Verdict::Failed(Failure::Malformed(_))
    ));
    assert!(matches!(
        tampered(&|a| drop(a.opening.rows.pop())),
        Verdict::Failed(Failure::Malformed(_))
    ));
    assert!(matches!(
        tampered(&|a| a.opening.rows[0].values.push(0)),
        Verdict::Failed(Failure::Malformed(_))
    ));
}

#[test]
fn an_unmeasured_model_is_not_promoted_however_well_it_answers() {
    let params = params_in(&bounds::MEASURED, "NVIDIA A100-SXM4-80GB", 1);
    assert_eq!(params.bound, TimeBound::Unmeasured);
    let verdict = judge(&params, &DRAWS, &honest_answer(&params));
    assert_eq!(verdict, Verdict::Unbounded);
    assert_eq!(verdict.proven_class(), ProvenClass::Lowest);

    let (wrong, _) = answer(&params, OtherSeed::new([0x99; 32]));
    assert!(matches!(judge(&params, &DRAWS, &wrong), Verdict::Failed(_)));
}

/// A backend that, before computing, tells the others it started and waits for all of
/// them to have started: only GPUs that work at once get past it.
struct Rendezvous {
    inner: CpuBackend,
    started: std::sync::mpsc::Sender<()>,
    others: std::sync::Arc<std::sync::Mutex<std::sync::mpsc::Receiver<()>>>,
    gpus: usize,
}

impl Backend for Rendezvous {
    fn compute(&mut self, params: &Params) -> Result<Vec<crate::Digest>, crate::BackendError> {
        self.started.send(()).expect("the test holds the receiver");
        // Every GPU's thread passes once all have announced themselves; a node that worked
        // through its GPUs in turn would wait here for ever, so the wait is bounded.
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let seen = {
                let others = self.others.lock().expect("not poisoned");
                let mut seen = 0;
                while others.try_recv().is_ok() {
                    seen += 1;
                }
                seen
            };
            // Put back what was taken, for the other threads to see too.
            for _ in 0..seen {
                self.started.send(()).expect("the test holds the receiver");
            }
            if seen >= self.gpus {
                break;
            }
            if Instant::now() > deadline {
                return Err(crate::BackendError::Device(format!(
                    "only {seen} of {} GPUs started together",
                    self.gpus
                )));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        self.inner.compute(params)
    }

    fn held_leaves(
        &mut self,
        key: &crate::Digest,
    ) -> Result<Vec<crate::Digest>, crate::BackendError> {
        self.inner.held_leaves(key)
    }

    fn row(&mut self, index: u64) -> Result<Vec<i32>, crate::BackendError> {
        self.inner.row(index)
    }
}

#[test]
fn a_nodes_gpus_work_at_once_and_answer_as_each_alone() {
    let gpus = 3;
    let params: Vec<Params> = (0..gpus)
        .map(|i| params_in(&GENEROUS, TEST_MODEL, 10 + i as u8))
        .collect();
    let (started, others) = std::sync::mpsc::channel();
    let others = std::sync::Arc::new(std::sync::Mutex::new(others));
    let mut node = crate::NodeProver::commit(params.clone(), |_| Rendezvous {
        inner: CpuBackend::new().with_threads(1),
        started: started.clone(),
        others: others.clone(),
        gpus,
    })
    .expect("every GPU started while the others had");
    node.hold(&DRAWS.held_seed).expect("held");
    let opening = node.open(&DRAWS.open_seed).expect("opened");
    for (gpu, p) in opening.gpus.iter().zip(&params) {
        let alone = honest_answer(p);
        assert_eq!(gpu.commitment, alone.commitment);
        assert_eq!(gpu.held_digest, alone.held_digest);
        assert_eq!(gpu.opening, alone.opening);
    }
}

/// What a GPU backend must reproduce byte for byte: the seeded inputs, the commitment's
/// leaves and root, the held key chain. Changing any of these values changes the protocol.
#[test]
fn the_definitions_are_pinned() {
    let params = params();
    let inputs = crate::matrix::Inputs::new(&params);
    let mut a = vec![0i8; params.width_usize()];
    inputs.a_rows(5, &mut a);
    let answer = honest_answer(&params);
    let hex = |d: &[u8]| d.iter().map(|b| format!("{b:02x}")).collect::<String>();
    let a_bytes: Vec<u8> = a[..8].iter().map(|&v| v as u8).collect();
    let pinned = [
        hex(&params.digest()),
        hex(&a_bytes),
        hex(&crate::hash::row_leaf(
            answer.opening.rows[0].index,
            &answer.opening.rows[0].values,
        )),
        hex(&answer.commitment),
        hex(&answer.held_digest),
    ];
    assert_eq!(pinned, PINNED, "{pinned:#?}");
}

const PINNED: [&str; 5] = [
    "a60f165761b8465fca9e1821ca767bd76a13ffcfe5eb7fb5f9efc260b27aa424",
    "942401f3b783bf5c",
    "2e665e92d13834436875020affe076255ed1f496c831e3f12b52b6cff13e9acf",
    "a27a141a167fef47783b5090dcbac30a5474eb24ef89844bddf6e3644d6be63f",
    "b28ae6d5c35b90cc08978eecb882ce9b98b9c453ab30cec455a70c95e5133e3b",
];
