//! The hardware challenge duties (`challenges`), pure: which nodes are challenged, which
//! answered challenges are judged, which are recorded unanswered.

use std::collections::{HashMap, HashSet};

mod common;
use common::*;

use mcjs::state::*;
use mcjs_client::Pubkey;
use mcjs_scheduler_daemon::challenges::{
    ChallengeAction, ChallengeObservation, ChallengePolicy, challenge_duties, standard_sizing,
};

/// The SlotHashes sysvar's data for `slots`, newest first, each slot's hash `[slot; 32]`.
fn slot_hashes(slots: &[u64]) -> Vec<u8> {
    let mut data = (slots.len() as u64).to_le_bytes().to_vec();
    for slot in slots {
        data.extend(slot.to_le_bytes());
        data.extend([*slot as u8; 32]);
    }
    data
}

fn policy() -> ChallengePolicy {
    ChallengePolicy {
        enabled: true,
        answer_secs: 60,
        retry_secs: 3_600,
        recheck_secs: 0,
        ..Default::default()
    }
}

fn duties(
    now: i64,
    nodes: &[(Pubkey, Node)],
    alive: &[Pubkey],
    hashes: &[u8],
    policy: &ChallengePolicy,
) -> Vec<ChallengeAction> {
    duties_after(now, nodes, alive, hashes, policy, &HashMap::new())
}

/// As [`duties`], with the times this scheduler last requested each node.
fn duties_after(
    now: i64,
    nodes: &[(Pubkey, Node)],
    alive: &[Pubkey],
    hashes: &[u8],
    policy: &ChallengePolicy,
    requested_at: &HashMap<Pubkey, i64>,
) -> Vec<ChallengeAction> {
    let alive: HashSet<Pubkey> = alive.iter().copied().collect();
    challenge_duties(&ChallengeObservation {
        now,
        nodes,
        alive: &alive,
        slot_hashes: hashes,
        policy,
        requested_at,
    })
}

fn in_flight(requested_slot: u64, at: i64) -> HardwareChallenge {
    HardwareChallenge::new(standard_sizing(0), requested_slot, at)
}

fn step(slot: u64, at: i64) -> ChallengeStepRecord {
    ChallengeStepRecord {
        seed: SlotDraw {
            slot: slot - 1,
            hash: [1; 32],
        },
        answer: [2; 32],
        slot,
        at,
    }
}

#[test]
fn a_live_free_node_never_challenged_is_challenged_and_no_other() {
    let p = key(30);
    let (fresh, busy_node, silent) = (key(20), key(21), key(22));
    let nodes = [
        (fresh, node(p, 81_920)),
        (busy_node, busy(node(p, 81_920), key(10))),
        (silent, node(p, 81_920)),
    ];
    let hashes = slot_hashes(&[9, 8]);
    let live = [fresh, busy_node];
    assert_eq!(
        duties(T0, &nodes, &live, &hashes, &policy()),
        vec![ChallengeAction::Request { node: fresh }]
    );
    // Off: nothing is requested.
    let off = ChallengePolicy {
        enabled: false,
        ..policy()
    };
    assert!(duties(T0, &nodes, &live, &hashes, &off).is_empty());
    // At most `max_in_flight` at once, fleet-wide.
    let mut flying = node(p, 81_920);
    flying.challenge.in_flight = Some(in_flight(5, T0));
    let full = ChallengePolicy {
        max_in_flight: 1,
        ..policy()
    };
    let nodes = [(fresh, node(p, 81_920)), (key(23), flying)];
    assert!(duties(T0, &nodes, &[fresh, key(23)], &hashes, &full).is_empty());
}

#[test]
fn a_verdict_that_proved_nothing_is_retried_after_its_time_and_a_proof_at_random() {
    let p = key(30);
    let n = key(20);
    let hashes = slot_hashes(&[9]);
    let mut failed = node(p, 81_920);
    failed.challenge.last = Some(ChallengeResult::Failed(ChallengeFailure::Late));
    failed.challenge.last_at = T0;
    let nodes = [(n, failed)];
    assert!(duties(T0 + 3_599, &nodes, &[n], &hashes, &policy()).is_empty());
    assert_eq!(
        duties(T0 + 3_600, &nodes, &[n], &hashes, &policy()),
        vec![ChallengeAction::Request { node: n }]
    );

    let mut proven = node(p, 81_920);
    proven.challenge.last = Some(ChallengeResult::Passed);
    proven.challenge.last_at = T0;
    let nodes = [(n, proven)];
    // No re-checks: never again.
    assert!(duties(T0 + 1_000_000, &nodes, &[n], &hashes, &policy()).is_empty());
    // A re-check drawn every round on average (recheck = round): always drawn.
    let every_round = ChallengePolicy {
        recheck_secs: 1,
        round_secs: 1,
        ..policy()
    };
    assert_eq!(
        duties(T0 + 1, &nodes, &[n], &hashes, &every_round),
        vec![ChallengeAction::Request { node: n }]
    );
    // One in a thousand rounds: over many slot hashes, about that share is drawn.
    let rare = ChallengePolicy {
        recheck_secs: 1_000,
        round_secs: 1,
        ..policy()
    };
    let drawn = (0..20_000u64)
        .filter(|slot| {
            let mut data = 1u64.to_le_bytes().to_vec();
            data.extend(slot.to_le_bytes());
            let mut hash = [0u8; 32];
            hash[..8].copy_from_slice(&slot.to_le_bytes());
            data.extend(hash);
            !duties(T0 + 1, &nodes, &[n], &data, &rare).is_empty()
        })
        .count();
    assert!(
        (5..=40).contains(&drawn),
        "{drawn} of 20,000 rounds drew a re-check"
    );
}

/// Re-checks are drawn by provider: a drawn provider's proven, free, live nodes are all
/// challenged in the same round (past `max_in_flight`, which would otherwise let one card
/// answer for them in turn), its busy node is not, and another provider is drawn apart.
#[test]
fn a_drawn_providers_proven_nodes_are_rechecked_all_at_once() {
    let (a, b) = (key(30), key(31));
    let proven = |provider| {
        let mut n = node(provider, 81_920);
        n.challenge.last = Some(ChallengeResult::Passed);
        n.challenge.last_at = T0;
        n
    };
    let a_nodes = [key(20), key(21), key(22)];
    let (b_node, a_busy) = (key(23), key(24));
    let nodes = [
        (a_nodes[0], proven(a)),
        (b_node, proven(b)),
        (a_nodes[1], proven(a)),
        (a_busy, busy(proven(a), key(10))),
        (a_nodes[2], proven(a)),
    ];
    let live = [a_nodes[0], a_nodes[1], a_nodes[2], b_node, a_busy];
    let rare = ChallengePolicy {
        recheck_secs: 50,
        round_secs: 1,
        max_in_flight: 1,
        ..policy()
    };
    let (mut a_rounds, mut b_rounds, mut apart) = (0, 0, 0);
    for slot in 0..4_000u64 {
        let mut data = 1u64.to_le_bytes().to_vec();
        data.extend(slot.to_le_bytes());
        let mut hash = [0u8; 32];
        hash[..8].copy_from_slice(&slot.to_le_bytes());
        data.extend(hash);
        let asked: HashSet<Pubkey> = duties(T0 + 1, &nodes, &live, &data, &rare)
            .iter()
            .map(ChallengeAction::node)
            .collect();
        let of_a = a_nodes.iter().filter(|k| asked.contains(k)).count();
        assert!(
            of_a == 0 || of_a == 3,
            "round {slot}: {of_a} of the provider's 3 nodes asked"
        );
        assert!(!asked.contains(&a_busy), "a busy node is not challenged");
        let b_asked = asked.contains(&b_node);
        a_rounds += usize::from(of_a == 3);
        b_rounds += usize::from(b_asked);
        apart += usize::from((of_a == 3) != b_asked);
    }
    // About 80 rounds of 4,000 each (1 in 50).
    assert!((40..=130).contains(&a_rounds), "{a_rounds}");
    assert!((40..=130).contains(&b_rounds), "{b_rounds}");
    assert!(apart > 60, "providers are drawn apart: {apart}");
}

#[test]
fn an_answered_challenge_is_judged_once_its_open_slot_exists_and_a_silent_one_recorded() {
    let p = key(30);
    let n = key(20);
    let unanswered = ChallengeAction::Record {
        node: n,
        verdict: ChallengeVerdict::Failed(ChallengeFailure::Unanswered),
    };
    // Requested, no commitment: waits its time, then is recorded unanswered (even with
    // requests off: a challenge in flight is always seen to its end).
    let mut asked = node(p, 81_920);
    asked.challenge.in_flight = Some(in_flight(5, T0));
    let nodes = [(n, asked)];
    let hashes = slot_hashes(&[9, 8, 7, 6]);
    let off = ChallengePolicy {
        enabled: false,
        ..policy()
    };
    assert!(duties(T0 + 60, &nodes, &[n], &hashes, &off).is_empty());
    assert_eq!(
        duties(T0 + 61, &nodes, &[n], &hashes, &off),
        vec![unanswered.clone()]
    );

    // Both answers in; the open seed is the first slot hash after the held digest's.
    let mut answered = in_flight(5, T0);
    answered.commit = Some(step(6, T0 + 2));
    answered.hold = Some(step(8, T0 + 4));
    let mut held = node(p, 81_920);
    held.challenge.in_flight = Some(answered);
    let nodes = [(n, held)];
    assert_eq!(
        duties(T0 + 5, &nodes, &[n], &hashes, &policy()),
        vec![ChallengeAction::Judge {
            node: n,
            challenge: answered,
            open_seed: [9; 32],
            overdue: false,
        }]
    );
    // Its open slot not recorded yet: wait; past the time with none: unanswered.
    let early = slot_hashes(&[8, 7]);
    assert!(duties(T0 + 5, &nodes, &[n], &early, &policy()).is_empty());
    assert_eq!(
        duties(T0 + 65, &nodes, &[n], &early, &policy()),
        vec![unanswered]
    );
    // Overdue with the seed there: judged if the opening came, else unanswered (the shell).
    assert_eq!(
        duties(T0 + 65, &nodes, &[n], &hashes, &policy()),
        vec![ChallengeAction::Judge {
            node: n,
            challenge: answered,
            open_seed: [9; 32],
            overdue: true,
        }]
    );
}

/// A node that sheds its challenge by changing its profile (the program then clears the
/// challenge and the last verdict, so the node is due again at once) is asked again only
/// after the policy's spacing: it cannot make the scheduler pay a request every round.
#[test]
fn a_node_is_asked_at_most_once_per_spacing_whatever_it_does_between() {
    let n = key(20);
    let nodes = [(n, node(key(30), 81_920))];
    let hashes = slot_hashes(&[9]);
    let asked = HashMap::from([(n, T0)]);
    let policy = ChallengePolicy {
        request_spacing_secs: 600,
        ..policy()
    };
    assert!(duties_after(T0 + 599, &nodes, &[n], &hashes, &policy, &asked).is_empty());
    assert_eq!(
        duties_after(T0 + 600, &nodes, &[n], &hashes, &policy, &asked),
        vec![ChallengeAction::Request { node: n }]
    );
}

/// An attestation of the cards `ids` (the rest of its slots empty).
fn gpu_attestation(ids: &[u64]) -> GpuAttestation {
    let mut attestation = GpuAttestation {
        chip: *b"GH100\0\0\0",
        device_ids: [0; MAX_ATTESTED_GPUS],
        evidence: [0; 32],
    };
    attestation.device_ids[..ids.len()].copy_from_slice(ids);
    attestation
}

/// A node of `provider` whose standing proof attests the cards `ids`.
fn proven(provider: Pubkey, ids: &[u64]) -> Node {
    let mut n = node(provider, 81_920);
    n.challenge.proven = Some(ProvenHardware {
        gpu_count: 2,
        vram_per_gpu_mib: 81_920,
        held_kib_per_gpu: 1,
        memory_shift: 0,
        commit_secs: 1,
        held_secs: 1,
        at: T0,
        attestation: Some(gpu_attestation(ids)),
    });
    n
}

/// The cards other nodes' standing proofs hold, read from their accounts as the scheduler
/// reads them before judging (`attested_cards`): a proof's non-zero device ids, none from a
/// node without a proof or a proof without attestation.
#[test]
fn the_cards_attested_are_read_from_the_nodes_standing_proofs() {
    let p = key(30);
    let attested = |ids: &[u64]| proven(p, ids);
    let mut unattested = attested(&[0x99]);
    unattested.challenge.proven.as_mut().unwrap().attestation = None;
    let mut unproven = attested(&[0x98]);
    unproven.challenge.proven = None;
    let nodes = [
        (key(20), attested(&[0xA1, 0, 0xA2])),
        (key(21), attested(&[0, 0xB1])),
        (key(22), unattested),
        (key(23), unproven),
    ];
    let cards = mcjs_client::challenge::attested_cards(nodes.iter().map(|(k, n)| (k, n)));
    assert_eq!(
        cards,
        HashMap::from([(0xA1, key(20)), (0xA2, key(20)), (0xB1, key(21))])
    );
}

mod plan {
    //! The challenge duties as transactions (`transactions::plan_challenges`): what each
    //! round sends for a challenge answered, judged or not, and what it leaves and why.

    use super::*;
    use mcjs_challenge::NodeOpening;
    use mcjs_client::ix;
    use mcjs_scheduler_daemon::challenges::Openings;
    use mcjs_scheduler_daemon::transactions::duties::{
        ChallengePlan, ChallengeRead, Duty, Judgement, Left,
    };
    use mcjs_scheduler_daemon::transactions::plan_challenges;

    const SCHEDULER: u8 = 250;
    const PASSED: ChallengeVerdict = ChallengeVerdict::Passed {
        held_kib_per_gpu: 1,
    };
    const UNANSWERED: ChallengeVerdict = ChallengeVerdict::Failed(ChallengeFailure::Unanswered);

    fn plan_at(
        now: i64,
        nodes: &[(Pubkey, Node)],
        openings: &Openings,
        judges: &HashMap<Pubkey, (u64, Judgement)>,
    ) -> ChallengePlan {
        let alive: HashSet<Pubkey> = nodes.iter().map(|(k, _)| *k).collect();
        plan_challenges(&ChallengeRead {
            scheduler: key(SCHEDULER),
            observation: ChallengeObservation {
                now,
                nodes,
                alive: &alive,
                slot_hashes: &slot_hashes(&[9, 8, 7, 6]),
                policy: &policy(),
                requested_at: &HashMap::new(),
            },
            openings,
            judges,
        })
    }

    /// A transaction's duty: (instruction, node, verdict, attestation, judged).
    type Sent = (
        &'static str,
        Pubkey,
        Option<ChallengeVerdict>,
        Option<GpuAttestation>,
        bool,
    );

    /// Each transaction's duty, its instruction checked against the client's builder.
    fn sent(plan: &ChallengePlan) -> Vec<Sent> {
        let me = key(SCHEDULER);
        plan.planned
            .iter()
            .map(|p| {
                assert!(p.fallback.is_none(), "one try");
                let [duty] = &p.actions[..] else {
                    panic!("one duty a transaction")
                };
                let (built, row) = match duty {
                    Duty::Request { node } => (
                        ix::request_challenge(&me, node, policy().sizing),
                        (duty.name(), *node, None, None, false),
                    ),
                    Duty::Record {
                        node,
                        verdict,
                        attestation,
                        judged,
                    } => (
                        ix::record_challenge(&me, node, *verdict, *attestation),
                        (duty.name(), *node, Some(*verdict), *attestation, *judged),
                    ),
                    Duty::Check(action) => panic!("a verification duty: {action:?}"),
                };
                assert_eq!(p.instructions, vec![built]);
                row
            })
            .collect()
    }

    /// Node 20's challenge requested at slot 5, both answers in by `T0 + 4`: its open seed
    /// exists (slot 9), its opening is due by `T0 + 64`.
    fn answered() -> (HardwareChallenge, Node) {
        let mut challenge = in_flight(5, T0);
        challenge.commit = Some(step(6, T0 + 2));
        challenge.hold = Some(step(8, T0 + 4));
        let mut held = node(key(30), 81_920);
        held.challenge.in_flight = Some(challenge);
        (challenge, held)
    }

    #[test]
    fn an_answered_challenge_is_judged_off_the_round_and_its_verdict_recorded_once_judged() {
        let n = key(20);
        let (_, held) = answered();
        let nodes = [(n, held)];
        let opened = {
            let mut o = Openings::default();
            o.insert(n, 5, NodeOpening { gpus: vec![] });
            o
        };
        let none = Openings::default();
        let judge = |slot, j| HashMap::from([(n, (slot, j))]);
        let done = Judgement::Done((PASSED, Some(gpu_attestation(&[0xA1]))));
        // (now, openings, judges, sent, to judge, judges taken, left)
        type Row<'a> = (
            i64,
            &'a Openings,
            HashMap<Pubkey, (u64, Judgement)>,
            Vec<Sent>,
            Vec<Pubkey>,
            Vec<Pubkey>,
            Vec<(Pubkey, Left)>,
        );
        let table: Vec<Row> = vec![
            // No opening yet, time left: wait for it.
            (
                T0 + 64,
                &none,
                HashMap::new(),
                vec![],
                vec![],
                vec![],
                vec![(n, Left::AwaitingOpening)],
            ),
            // No opening past its time: unanswered, as judged.
            (
                T0 + 65,
                &none,
                HashMap::new(),
                vec![("record_challenge", n, Some(UNANSWERED), None, true)],
                vec![],
                vec![],
                vec![],
            ),
            // The opening came: judged off the round, nothing sent yet.
            (
                T0 + 10,
                &opened,
                HashMap::new(),
                vec![],
                vec![n],
                vec![],
                vec![(n, Left::Judging)],
            ),
            // Being judged (even past its time): not judged twice.
            (
                T0 + 65,
                &opened,
                judge(5, Judgement::Running),
                vec![],
                vec![],
                vec![],
                vec![(n, Left::Judging)],
            ),
            // Judged: the verdict recorded with the cards it proves.
            (
                T0 + 10,
                &opened,
                judge(5, done.clone()),
                vec![(
                    "record_challenge",
                    n,
                    Some(PASSED),
                    Some(gpu_attestation(&[0xA1])),
                    true,
                )],
                vec![],
                vec![n],
                vec![],
            ),
            // The judge failed: taken, and the opening judged again next round.
            (
                T0 + 10,
                &opened,
                judge(5, Judgement::Failed("panicked".into())),
                vec![],
                vec![],
                vec![n],
                vec![(n, Left::JudgeFailed("panicked".into()))],
            ),
            // A judge of an earlier challenge counts for nothing: this one is judged.
            (
                T0 + 10,
                &opened,
                judge(4, done),
                vec![],
                vec![n],
                vec![],
                vec![(n, Left::Judging)],
            ),
        ];
        for (i, (now, openings, judges, sent_, to_judge, collected, left)) in
            table.into_iter().enumerate()
        {
            let plan = plan_at(now, &nodes, openings, &judges);
            assert_eq!(sent(&plan), sent_, "row {i}: sent");
            let judging: Vec<Pubkey> = plan.to_judge.iter().map(|j| j.node).collect();
            assert_eq!(judging, to_judge, "row {i}: to judge");
            assert_eq!(plan.collected, collected, "row {i}: judges taken");
            assert_eq!(plan.left, left, "row {i}: left");
            assert!(plan.uncredited.is_empty(), "row {i}");
        }
    }

    /// What a round sends besides verdicts: a request for a node due one, and an
    /// unanswered step recorded as such (not as judged).
    #[test]
    fn a_request_and_an_unanswered_step_are_one_transaction_each() {
        let (asked_key, due_key) = (key(20), key(21));
        let mut asked = node(key(30), 81_920);
        asked.challenge.in_flight = Some(in_flight(5, T0));
        let nodes = [(asked_key, asked), (due_key, node(key(31), 81_920))];
        let plan = plan_at(T0 + 61, &nodes, &Openings::default(), &HashMap::new());
        assert_eq!(
            sent(&plan),
            vec![
                ("record_challenge", asked_key, Some(UNANSWERED), None, false),
                ("request_challenge", due_key, None, None, false),
            ]
        );
        assert!(plan.to_judge.is_empty() && plan.left.is_empty());
    }

    /// Two nodes judged at once that prove one card: the first recorded is credited it,
    /// the second is recorded without its attestation; a card another node's standing
    /// proof holds is credited to no one else. What to judge carries the cards the other
    /// nodes' proofs hold.
    #[test]
    fn a_card_is_credited_to_one_node_only() {
        let (a, b, c, holder) = (key(20), key(21), key(22), key(23));
        let (_, held) = answered();
        let mut holding = proven(key(31), &[0xC1]);
        holding.challenge.last = Some(ChallengeResult::Passed);
        let nodes = [
            (a, held.clone()),
            (b, held.clone()),
            (c, held),
            (holder, holding),
        ];
        let judged = |cards: &[u64]| (5, Judgement::Done((PASSED, Some(gpu_attestation(cards)))));
        let judges = HashMap::from([
            (a, judged(&[0xA1])),
            (b, judged(&[0xA1])),
            (c, judged(&[0xC1])),
        ]);
        let plan = plan_at(T0 + 10, &nodes, &Openings::default(), &judges);
        assert_eq!(
            sent(&plan),
            vec![
                (
                    "record_challenge",
                    a,
                    Some(PASSED),
                    Some(gpu_attestation(&[0xA1])),
                    true
                ),
                ("record_challenge", b, Some(PASSED), None, true),
                ("record_challenge", c, Some(PASSED), None, true),
            ]
        );
        assert_eq!(plan.uncredited, vec![(b, 0xA1, a), (c, 0xC1, holder)]);
        assert_eq!(plan.collected, vec![a, b, c]);

        let mut opened = Openings::default();
        opened.insert(a, 5, NodeOpening { gpus: vec![] });
        let plan = plan_at(T0 + 10, &nodes, &opened, &HashMap::new());
        let [to_judge] = &plan.to_judge[..] else {
            panic!("one to judge: {:?}", plan.to_judge)
        };
        assert_eq!(to_judge.node, a);
        assert_eq!(to_judge.elsewhere, HashMap::from([(0xC1, holder)]));
    }
}
