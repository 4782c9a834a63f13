//! The hardware challenge on chain: the scheduler requests it, the node's operator answers
//! with real answers of the challenge's core (`mcjs_challenge`, CPU backend, honest and
//! dishonest), the test judges them as the scheduler does and records the verdict; the
//! program keeps the draws and times, what each node proved, and refuses a job that needs
//! the claimed class on a node that did not prove it.

use anchor_lang::compat::solana_sysvar::slot_hashes;
use mcjs::errors::McjsError;
use mcjs::instructions::SubmitJobArgs;
use mcjs::state::*;
use mcjs_challenge::adversary::{Missing, OtherSeed, ShortMemory};
use mcjs_challenge::bounds::MEASURED;
use mcjs_challenge::{Backend, CpuBackend, NodeProver, Sizing, judge_node};
use mcjs_client::challenge::{
    answers_of, params_of, seed_for_commit, seed_for_hold, seed_for_open, sizing_on_chain,
    verdict_on_chain,
};
use mcjs_client::{Pubkey, ix};
use solana_keypair::Keypair;
use solana_signer::Signer;

use crate::harness::*;

/// Two GPUs of the one measured model (the CPU reference), 16 MiB each, sized at 1/16: a
/// challenge the test's CPU answers in a few hundred milliseconds.
fn cpu_node() -> HardwareProfile {
    HardwareProfile {
        gpu_model: "cpu-reference".into(),
        gpu_count: 2,
        vram_per_gpu_mib: 16,
        compute_capability: 80,
        cpu_cores: 8,
        ram_mib: 64 * 1024,
        disk_gib: 500,
        checkpoint_write_mibps: 1_500,
    }
}

fn sizing() -> ChallengeSizing {
    sizing_on_chain(
        &Sizing {
            fill_percent: 85,
            max_width: 256,
            passes: 8,
            rows_opened: 16,
        },
        4,
    )
}

fn params() -> ConfigParams {
    ConfigParams {
        require_proven_hardware: true,
        ..default_params()
    }
}

/// A job that names the node's model and memory.
fn job_for_cpu_node(job_id: u64) -> SubmitJobArgs {
    let mut args = job_args(job_id, 100 * USDC);
    args.requirements = JobRequirements {
        gpu_count: 2,
        min_vram_mib: 16,
        min_compute_capability: 80,
        gpu_models: vec!["cpu-reference".into()],
        min_checkpoint_write_mibps: 60,
        attested: false,
    };
    args
}

/// A job that names no model and no memory floor.
fn job_for_any_node(job_id: u64) -> SubmitJobArgs {
    let mut args = job_for_cpu_node(job_id);
    args.requirements.gpu_models.clear();
    args.requirements.min_vram_mib = 0;
    args
}

fn in_flight(env: &Env, node: &Pubkey) -> HardwareChallenge {
    env.node(node)
        .challenge
        .in_flight
        .expect("a challenge in flight")
}

fn slot_hash_data(env: &Env) -> Vec<u8> {
    env.account(&slot_hashes::ID).expect("SlotHashes").data
}

fn request(env: &mut Env, node: &Pubkey) -> Outcome {
    let scheduler = env.scheduler.insecure_clone();
    env.send(
        &[ix::request_challenge(&scheduler.pubkey(), node, sizing())],
        &[&scheduler],
    )
}

fn answer(env: &mut Env, operator: &Keypair, node: &Pubkey, step: ChallengeStep) -> Outcome {
    env.send(
        &[ix::answer_challenge(&operator.pubkey(), node, step)],
        &[operator],
    )
}

/// How a node answers: its backends, and how long it takes over each phase.
struct Behaviour {
    backend: fn(usize, u64) -> Box<dyn Backend + Send>,
    commit_secs: i64,
}

fn honest(_: usize, _: u64) -> Box<dyn Backend + Send> {
    Box::new(CpuBackend::new())
}

/// A card of half the memory the challenge fills, making up the held leaves it lacks.
fn half_memory(_: usize, device_bytes: u64) -> Box<dyn Backend + Send> {
    Box::new(ShortMemory::new(device_bytes / 2, Missing::MakeUp))
}

/// Answers with the product of another seed (one it computed before the request).
fn other_seed(gpu: usize, _: u64) -> Box<dyn Backend + Send> {
    Box::new(OtherSeed::new([gpu as u8 + 1; 32]))
}

/// Runs one challenge of `node` to its verdict, as the node and the scheduler would: the
/// request, the node's two answers, each after the program's seed exists, its opening, and
/// the scheduler's judgement recorded on chain. Returns the verdict recorded.
fn challenge(
    env: &mut Env,
    provider: &ProviderActor,
    index: usize,
    behaviour: Behaviour,
) -> ChallengeVerdict {
    let (verdict, recorded) = challenge_recorded(env, provider, index, behaviour, None);
    recorded.expect("record the verdict");
    verdict
}

/// [`challenge`], the verdict sent with `attestation`: the verdict, and whether it landed.
fn challenge_recorded(
    env: &mut Env,
    provider: &ProviderActor,
    index: usize,
    behaviour: Behaviour,
    attestation: Option<GpuAttestation>,
) -> (ChallengeVerdict, Outcome) {
    let node = provider.nodes[index];
    let operator = provider.operator(index).insecure_clone();
    request(env, &node).expect("request a challenge");
    // The seed is the hash of the first slot after the request's.
    env.advance_slots(2);
    let record = env.node(&node);
    let challenge = in_flight(env, &node);
    let seed = seed_for_commit(&challenge, &slot_hash_data(env)).expect("the seed slot");
    let gpu_params = params_of(&MEASURED, &node, &record, &challenge, &seed).unwrap();
    let mut prover = NodeProver::commit(gpu_params.clone(), |gpu| {
        (behaviour.backend)(gpu, gpu_params[gpu].device_bytes())
    })
    .expect("the product");
    env.warp(behaviour.commit_secs);
    let commitment = prover.commitment();
    answer(env, &operator, &node, ChallengeStep::Commit { commitment }).expect("commit");
    env.advance_slots(2);
    let challenge = in_flight(env, &node);
    let held_seed = seed_for_hold(&challenge, &slot_hash_data(env)).expect("the held seed");
    let held_digest = prover.hold(&held_seed).expect("the held passes");
    answer(env, &operator, &node, ChallengeStep::Hold { held_digest }).expect("hold");
    env.advance_slots(2);
    // The scheduler's side: everything from the chain but the opening.
    let challenge = in_flight(env, &node);
    assert_eq!(challenge.commit.unwrap().seed.hash, seed);
    assert_eq!(challenge.hold.unwrap().seed.hash, held_seed);
    let open_seed = seed_for_open(&challenge, &slot_hash_data(env)).expect("the open seed");
    let opening = prover.open(&open_seed).expect("the opening");
    let seed_on_chain = challenge.commit.unwrap().seed.hash;
    let params = params_of(
        &MEASURED,
        &node,
        &env.node(&node),
        &challenge,
        &seed_on_chain,
    )
    .unwrap();
    let (draws, answers) = answers_of(&challenge, open_seed).expect("both answers");
    let verdict = verdict_on_chain(&judge_node(&params, &draws, &answers, &opening));
    let recorded = send_record(env, &node, verdict, attestation);
    (verdict, recorded)
}

fn send_record(
    env: &mut Env,
    node: &Pubkey,
    verdict: ChallengeVerdict,
    attestation: Option<GpuAttestation>,
) -> Outcome {
    let scheduler = env.scheduler.insecure_clone();
    env.send(
        &[ix::record_challenge(
            &scheduler.pubkey(),
            node,
            verdict,
            attestation,
        )],
        &[&scheduler],
    )
}

fn honest_node() -> Behaviour {
    Behaviour {
        backend: honest,
        commit_secs: 0,
    }
}

#[test]
fn an_honest_node_proves_its_class_and_liars_are_left_in_the_lowest() {
    let mut env = Env::with_params(params());
    let provider = env.provider_with_nodes(
        200 * USDC,
        &[cpu_node(), cpu_node(), cpu_node(), cpu_node()],
        USDC,
    );

    // Honest: every check holds within the CPU reference's measured bounds.
    let verdict = challenge(&mut env, &provider, 0, honest_node());
    let ChallengeVerdict::Passed { held_kib_per_gpu } = verdict else {
        panic!("the honest node failed: {verdict:?}");
    };
    let record = env.node(&provider.nodes[0]).challenge;
    let proven = record.proven.expect("the honest node's class is proven");
    assert_eq!(
        (
            proven.gpu_count,
            proven.vram_per_gpu_mib,
            proven.memory_shift
        ),
        (2, 16, 4)
    );
    // 85% of the scaled 1 MiB, less B (256² bytes).
    assert_eq!(held_kib_per_gpu, proven.held_kib_per_gpu);
    assert!(
        (600..=870).contains(&held_kib_per_gpu),
        "held {held_kib_per_gpu} KiB"
    );
    assert_eq!(record.last, Some(ChallengeResult::Passed));
    assert!(record.in_flight.is_none());
    assert_eq!((record.requested, record.failed), (1, 0));

    // Claims twice its memory: it holds half of what the challenge fills and makes up the
    // rest. Answers with the product of another seed. Right, but after the bound (the
    // product's time at the reference's rate × 1.5, plus the chain's 8 s).
    let liars: [(
        usize,
        fn(usize, u64) -> Box<dyn Backend + Send>,
        i64,
        ChallengeFailure,
    ); 3] = [
        (1, half_memory, 0, ChallengeFailure::HeldMismatch),
        (2, other_seed, 0, ChallengeFailure::FreivaldsMismatch),
        (3, honest, 30, ChallengeFailure::Late),
    ];
    for (index, backend, commit_secs, failure) in liars {
        let verdict = challenge(
            &mut env,
            &provider,
            index,
            Behaviour {
                backend,
                commit_secs,
            },
        );
        assert_eq!(verdict, ChallengeVerdict::Failed(failure), "node {index}");
    }
    for (index, failure) in [
        (1, ChallengeFailure::HeldMismatch),
        (2, ChallengeFailure::FreivaldsMismatch),
        (3, ChallengeFailure::Late),
    ] {
        let record = env.node(&provider.nodes[index]).challenge;
        assert_eq!(record.proven, None, "node {index} proved nothing");
        assert_eq!(record.last, Some(ChallengeResult::Failed(failure)));
        assert_eq!((record.requested, record.failed), (1, 1));
    }

    // Placement: a job that names the model and memory goes to the proven node only.
    let owner = env.wallet(1_000 * USDC);
    for (id, index) in [(1, 1), (2, 2), (3, 3)] {
        let job = env.submit(&owner, job_for_cpu_node(id)).unwrap();
        expect_error(
            env.assign(&job, &provider, index),
            McjsError::UnprovenHardware,
        );
        assert!(env.node(&provider.nodes[index]).current_job.is_none());
    }
    let job = env.submit(&owner, job_for_cpu_node(4)).unwrap();
    env.assign(&job, &provider, 0)
        .expect("the proven node takes the job that names its class");
    // The lowest class still takes a job that names no model and no memory.
    let job = env.submit(&owner, job_for_any_node(5)).unwrap();
    env.assign(&job, &provider, 1)
        .expect("an unproven node takes a job that asks for no class");
    env.assert_invariants();
}

fn attestation(chip: &[u8], ids: &[u64]) -> GpuAttestation {
    let mut record = GpuAttestation {
        chip: [0; MAX_CHIP_NAME],
        device_ids: [0; MAX_ATTESTED_GPUS],
        evidence: [9; 32],
    };
    record.chip[..chip.len()].copy_from_slice(chip);
    record.device_ids[..ids.len()].copy_from_slice(ids);
    record
}

/// The checker records what NVIDIA's attestation proved with a pass, and only a well-formed
/// record with a pass: anything else is refused and the challenge stays as it was, to be
/// recorded again.
#[test]
fn a_pass_keeps_the_cards_attested_and_a_bad_attestation_changes_nothing() {
    let mut env = Env::with_params(params());
    let provider = env.provider_with_nodes(200 * USDC, &[cpu_node(), cpu_node()], USDC);
    let node = provider.nodes[0];
    let (verdict, recorded) = challenge_recorded(
        &mut env,
        &provider,
        0,
        honest_node(),
        // A card for a third GPU of a two-GPU node.
        Some(attestation(b"GH100", &[0, 0x48B0_2D92_494B_ADF4, 7])),
    );
    assert!(matches!(verdict, ChallengeVerdict::Passed { .. }));
    expect_error(recorded, McjsError::InvalidAttestation);
    let before = env.node(&node).challenge;
    for bad in [
        attestation(b"GH100", &[5, 5]),  // one card named for both GPUs
        attestation(b"GH100", &[]),      // no card at all
        attestation(b"GH-100", &[5]),    // not letters and digits
        attestation(b"", &[5]),          // no chip
        attestation(b"GH\x00100", &[5]), // padding that is not all zero
    ] {
        expect_error(
            send_record(&mut env, &node, verdict, Some(bad)),
            McjsError::InvalidAttestation,
        );
        assert_eq!(
            env.node(&node).challenge,
            before,
            "a refused record changes nothing"
        );
    }
    assert!(before.in_flight.is_some() && before.proven.is_none());

    let good = attestation(b"GH100", &[0x48B0_2D92_494B_ADF4, 0x1234]);
    send_record(&mut env, &node, verdict, Some(good)).expect("a pass with its cards");
    let proven = env.node(&node).challenge.proven.expect("proven");
    assert_eq!(proven.attestation, Some(good));
    assert_eq!(good.attested(), 2);

    // A failed verdict carries no attestation: refused with one, recorded without.
    let liar = provider.nodes[1];
    let (verdict, recorded) = challenge_recorded(
        &mut env,
        &provider,
        1,
        Behaviour {
            backend: other_seed,
            commit_secs: 0,
        },
        Some(attestation(b"GH100", &[0x77])),
    );
    assert_eq!(
        verdict,
        ChallengeVerdict::Failed(ChallengeFailure::FreivaldsMismatch)
    );
    expect_error(recorded, McjsError::InvalidAttestation);
    send_record(&mut env, &liar, verdict, None).expect("the failure without it");
    assert_eq!(env.node(&liar).challenge.proven, None);
    env.assert_invariants();
}

/// A job that asks for attested hardware goes only to a node whose standing proof has every
/// one of its GPUs attested, whether or not the Config requires proven hardware; a refused
/// assignment changes nothing, and a job that does not ask is placed as before.
#[test]
fn a_job_that_asks_for_attested_hardware_goes_only_to_a_fully_attested_node() {
    // The Config does not require proven hardware: the user's ask is enough.
    let mut env = Env::with_params(default_params());
    let provider = env.provider_with_nodes(300 * USDC, &[cpu_node(), cpu_node(), cpu_node()], USDC);
    let (verdict, recorded) = challenge_recorded(
        &mut env,
        &provider,
        0,
        honest_node(),
        Some(attestation(b"GH100", &[0x48B0_2D92_494B_ADF4, 0x1234])),
    );
    assert!(matches!(verdict, ChallengeVerdict::Passed { .. }));
    recorded.expect("both cards attested");
    // One of its two GPUs attested.
    let (_, recorded) = challenge_recorded(
        &mut env,
        &provider,
        1,
        honest_node(),
        Some(attestation(b"GH100", &[0x5678, 0])),
    );
    recorded.expect("one card attested");
    // Node 2 is never challenged.
    assert!(env.node(&provider.nodes[0]).all_gpus_attested());
    assert!(!env.node(&provider.nodes[1]).all_gpus_attested());
    assert!(!env.node(&provider.nodes[2]).all_gpus_attested());

    let owner = env.wallet(1_000 * USDC);
    let mut asks = job_for_any_node(1);
    asks.requirements.attested = true;
    let job = env.submit(&owner, asks).unwrap();
    assert!(env.job(&job).requirements.attested);
    for index in [2, 1] {
        let data = |env: &Env, key: &Pubkey| env.account(key).expect("the account").data;
        let node = provider.nodes[index];
        let (job_before, node_before) = (data(&env, &job), data(&env, &node));
        expect_error(
            env.assign(&job, &provider, index),
            McjsError::UnattestedHardware,
        );
        assert_eq!(
            data(&env, &job),
            job_before,
            "node {index}: the job is as it was"
        );
        assert_eq!(data(&env, &node), node_before, "node {index} is as it was");
    }
    env.assign(&job, &provider, 0)
        .expect("the node whose every GPU is attested takes it");
    assert_eq!(env.node(&provider.nodes[0]).current_job, Some(job));

    // A job that does not ask goes to the unattested nodes as before.
    let job = env.submit(&owner, job_for_any_node(2)).unwrap();
    env.assign(&job, &provider, 2)
        .expect("a job that asks for no attestation");
    env.assert_invariants();
}

#[test]
fn a_new_profile_voids_the_proof_and_a_node_mid_challenge_takes_no_job() {
    let mut env = Env::with_params(params());
    let provider = env.provider_with_nodes(200 * USDC, &[cpu_node()], USDC);
    let node = provider.nodes[0];
    challenge(&mut env, &provider, 0, honest_node());
    assert!(env.node(&node).challenge.proven.is_some());

    // The operator reports the same profile: nothing changes.
    let operator = provider.operator(0).insecure_clone();
    let update = |hardware: HardwareProfile| {
        ix::update_node(
            &operator.pubkey(),
            &provider.pda,
            0,
            mcjs::instructions::UpdateNodeArgs {
                hardware: Some(hardware),
                ..Default::default()
            },
        )
    };
    env.send(&[update(cpu_node())], &[&operator]).unwrap();
    assert!(env.node(&node).challenge.proven.is_some());
    // A different profile is a new claim: the proof is void.
    let mut bigger = cpu_node();
    bigger.vram_per_gpu_mib = 32;
    env.send(&[update(bigger)], &[&operator]).unwrap();
    let record = env.node(&node).challenge;
    assert_eq!((record.proven, record.last), (None, None));
    assert_eq!(record.requested, 1);

    // Mid-challenge the node takes no job and no second challenge.
    request(&mut env, &node).unwrap();
    let owner = env.wallet(1_000 * USDC);
    let job = env.submit(&owner, job_for_any_node(1)).unwrap();
    expect_error(env.assign(&job, &provider, 0), McjsError::ChallengeInFlight);
    env.advance_slots(1);
    expect_error(request(&mut env, &node), McjsError::ChallengeInFlight);
}

#[test]
fn only_the_lease_holder_judges_and_only_the_operator_answers_in_turn() {
    let mut env = Env::with_params(params());
    let provider = env.provider_with_nodes(200 * USDC, &[cpu_node()], USDC);
    let node = provider.nodes[0];
    let before = env.node(&node).challenge;

    // Not the scheduler: refused, nothing recorded.
    let stranger = Keypair::new();
    env.svm.airdrop(&stranger.pubkey(), 1_000_000_000).unwrap();
    expect_error(
        env.send(
            &[ix::request_challenge(&stranger.pubkey(), &node, sizing())],
            &[&stranger],
        ),
        McjsError::NotScheduler,
    );
    // A sizing out of range.
    let scheduler = env.scheduler.insecure_clone();
    let mut bad = sizing();
    bad.max_width = 100;
    expect_error(
        env.send(
            &[ix::request_challenge(&scheduler.pubkey(), &node, bad)],
            &[&scheduler],
        ),
        McjsError::InvalidChallengeSizing,
    );
    // No challenge: no answer, no verdict.
    let operator = provider.operator(0).insecure_clone();
    expect_error(
        answer(
            &mut env,
            &operator,
            &node,
            ChallengeStep::Commit {
                commitment: [1; 32],
            },
        ),
        McjsError::NoChallenge,
    );
    assert_eq!(env.node(&node).challenge, before);

    request(&mut env, &node).unwrap();
    // Before its seed slot exists, the commitment cannot be taken.
    expect_error(
        answer(
            &mut env,
            &operator,
            &node,
            ChallengeStep::Commit {
                commitment: [1; 32],
            },
        ),
        McjsError::DrawUnavailable,
    );
    env.advance_slots(2);
    // Only the node's operator answers; the held digest only after the commitment.
    expect_error(
        answer(
            &mut env,
            &stranger,
            &node,
            ChallengeStep::Commit {
                commitment: [1; 32],
            },
        ),
        McjsError::NotNodeOperator,
    );
    expect_error(
        answer(
            &mut env,
            &operator,
            &node,
            ChallengeStep::Hold {
                held_digest: [2; 32],
            },
        ),
        McjsError::ChallengeOutOfTurn,
    );
    answer(
        &mut env,
        &operator,
        &node,
        ChallengeStep::Commit {
            commitment: [1; 32],
        },
    )
    .unwrap();
    env.advance_slots(1);
    expect_error(
        answer(
            &mut env,
            &operator,
            &node,
            ChallengeStep::Commit {
                commitment: [3; 32],
            },
        ),
        McjsError::ChallengeOutOfTurn,
    );
    // A pass needs both answers; a stranger cannot record; the scheduler records the node
    // unanswered.
    expect_error(
        env.send(
            &[ix::record_challenge(
                &scheduler.pubkey(),
                &node,
                ChallengeVerdict::Passed {
                    held_kib_per_gpu: 1,
                },
                None,
            )],
            &[&scheduler],
        ),
        McjsError::InvalidChallengeVerdict,
    );
    expect_error(
        env.send(
            &[ix::record_challenge(
                &stranger.pubkey(),
                &node,
                ChallengeVerdict::Failed(ChallengeFailure::Unanswered),
                None,
            )],
            &[&stranger],
        ),
        McjsError::NotScheduler,
    );
    env.send(
        &[ix::record_challenge(
            &scheduler.pubkey(),
            &node,
            ChallengeVerdict::Failed(ChallengeFailure::Unanswered),
            None,
        )],
        &[&scheduler],
    )
    .unwrap();
    let record = env.node(&node).challenge;
    assert_eq!(
        record.last,
        Some(ChallengeResult::Failed(ChallengeFailure::Unanswered))
    );
    assert!(record.in_flight.is_none() && record.proven.is_none());
}

/// A verdict recorded after the slot hash that draws the opening has left
/// the SlotHashes sysvar (about 512 slots after the held digest) cannot be
/// judged. It used to be refused forever, leaving the node mid-challenge
/// and unassignable; the challenge now lapses: nothing is proven or failed
/// by it, and the node takes jobs and challenges again.
#[test]
fn a_verdict_too_late_to_draw_the_opening_lapses_the_challenge() {
    let mut env = Env::with_params(params());
    let provider = env.provider_with_nodes(200 * USDC, &[cpu_node()], USDC);
    let node = provider.nodes[0];
    let operator = provider.operator(0).insecure_clone();
    challenge(&mut env, &provider, 0, honest_node());
    assert!(env.node(&node).challenge.proven.is_some());
    env.advance_slots(2);
    request(&mut env, &node).unwrap();
    env.advance_slots(2);
    let commitment = [1; 32];
    answer(
        &mut env,
        &operator,
        &node,
        ChallengeStep::Commit { commitment },
    )
    .unwrap();
    env.advance_slots(2);
    let held_digest = [2; 32];
    answer(
        &mut env,
        &operator,
        &node,
        ChallengeStep::Hold { held_digest },
    )
    .unwrap();
    let held_slot = in_flight(&env, &node).hold.unwrap().slot;
    for _ in 0..520 {
        env.advance_slots(1);
    }
    let before = env.node(&node).challenge;
    let logs = send_record(
        &mut env,
        &node,
        ChallengeVerdict::Failed(ChallengeFailure::BadProof),
        None,
    )
    .expect("a late verdict lapses the challenge");
    let lapsed = events::<mcjs::events::ChallengeLapsed>(&logs);
    assert_eq!(lapsed.len(), 1);
    assert_eq!((lapsed[0].node, lapsed[0].held_slot), (node, held_slot));
    assert!(events::<mcjs::events::ChallengeRecorded>(&logs).is_empty());
    let after = env.node(&node).challenge;
    assert_eq!(after.in_flight, None);
    assert_eq!(
        (after.failed, after.proven, after.last, after.last_at),
        (before.failed, before.proven, before.last, before.last_at),
        "nothing proven or failed by a lapsed challenge: the earlier proof stands"
    );
    assert!(after.proven.is_some());
    // The node takes a job again.
    let owner = env.wallet(1_000 * USDC);
    let job = env.submit(&owner, job_for_any_node(1)).unwrap();
    env.assign(&job, &provider, 0).unwrap();
}
