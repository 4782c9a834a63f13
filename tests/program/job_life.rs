//! A job's life through every instruction, with balances and events checked.

use mcjs::errors::McjsError;
use mcjs::events::*;
use mcjs::instructions::*;
use mcjs::state::*;
use mcjs_client::ix;
use solana_signer::Signer;

use crate::harness::*;

#[test]
fn a_job_runs_checkpoints_completes_and_settles() {
    let mut env = Env::new();
    let owner = env.wallet(1_000 * USDC);
    let provider = env.provider_with_nodes(200 * USDC, &[a100_80gb()], 2 * USDC);
    let job = env.submit(&owner, job_args(1, 100 * USDC)).unwrap();
    assert_eq!(env.balance(&owner.token), 900 * USDC);
    assert!(matches!(env.job(&job).state, JobState::Pending { since } if since == START_TIME));

    let logs = env.assign(&job, &provider, 0).unwrap();
    let assigned = events::<JobAssigned>(&logs);
    assert_eq!(assigned.len(), 1);
    assert_eq!(assigned[0].generation, 1);
    assert_eq!(assigned[0].rate_per_hour, 8 * USDC, "2 USDC × 4 GPUs");
    assert_eq!(env.node(&provider.nodes[0]).status, NodeStatus::Busy);
    // Clients filter jobs by owner, state and node at fixed offsets.
    let raw = env.account(&job).unwrap().data;
    assert_eq!(
        &raw[Job::OWNER_OFFSET..Job::OWNER_OFFSET + 32],
        owner.key().as_ref()
    );
    assert_eq!(raw[Job::STATE_OFFSET], 1, "Assigned is the second variant");
    assert_eq!(raw[Job::NODE_OFFSET], 1, "Some");
    assert_eq!(
        &raw[Job::NODE_OFFSET + 1..Job::NODE_OFFSET + 33],
        provider.nodes[0].as_ref()
    );

    env.warp(120); // staging data: never billed
    env.start(&job, &provider, 0).unwrap();
    let mut records = Vec::new();
    for (epoch, step) in [(0u32, 100u64), (1, 200), (2, 300)] {
        env.warp(900);
        let logs = env.attest(&job, &provider, 0, 1, epoch, step).unwrap();
        let attested = events::<CheckpointAttested>(&logs);
        assert_eq!(attested.len(), 1, "one event per attestation");
        records.push((1, epoch, step, checkpoint_hash(epoch, step)));
        assert_eq!(attested[0].chain, chain_of(&records));
    }
    let state = env.job(&job);
    assert_eq!(state.checkpoint_count, 3);
    assert_eq!(state.checkpoint_chain, chain_of(&records));
    assert_eq!(state.accrued, 6 * USDC, "45 minutes at 8 USDC/h");

    env.warp(600);
    let logs = env.complete(&job, &owner.token, &provider, 0, 1).unwrap();
    if std::env::var("MCJS_SHOW_LOGS").is_ok() {
        eprintln!("{logs:#?}");
    }
    let completed = events::<JobCompleted>(&logs);
    assert_eq!(completed.len(), 1);
    let settled = events::<SegmentSettled>(&logs);
    // 55 minutes at 8 USDC/h = 7.333333 USDC; 5% commission.
    let paid = 7_333_333;
    let commission = paid * 500 / 10_000;
    assert_eq!(settled[0].provider_amount + settled[0].commission, paid);
    assert_eq!(env.balance(&provider.payout), paid - commission);
    assert_eq!(env.balance(&env.treasury.clone()), commission);
    assert_eq!(env.balance(&owner.token), 1_000 * USDC - paid);
    assert_eq!(completed[0].refund, 100 * USDC - paid);

    let done = env.job(&job);
    assert!(matches!(done.state, JobState::Completed { .. }));
    assert_eq!(done.bond, 0);
    assert_eq!(done.output_hash, Some([0xee; 32]));
    // Where `mcjs job output` looks for the output: the completing generation.
    assert_eq!(done.completed_generation(), Some(completed[0].generation));
    assert_eq!(env.node(&provider.nodes[0]).status, NodeStatus::Available);
    let p = env.provider(&provider.pda);
    assert_eq!((p.jobs_completed, p.active_assignments), (1, 0));
    env.assert_invariants();
}

#[test]
fn submit_refuses_impossible_requests_and_moves_no_tokens() {
    let mut env = Env::new();
    let owner = env.wallet(1_000 * USDC);
    let before = env.snapshot();
    let cases: Vec<(Box<dyn Fn(&mut SubmitJobArgs)>, McjsError)> = vec![
        (
            Box::new(|a| a.requirements.gpu_count = 0),
            McjsError::InvalidGpuCount,
        ),
        (
            Box::new(|a| a.requirements.gpu_models = vec!["a".into(); 5]),
            McjsError::InvalidGpuModelList,
        ),
        (
            Box::new(|a| a.requirements.gpu_models = vec![String::new()]),
            McjsError::InvalidGpuModelList,
        ),
        (
            Box::new(|a| a.terms.checkpoint_interval_secs = 0),
            McjsError::InvalidCheckpointInterval,
        ),
        (
            Box::new(|a| a.terms.checkpoint_interval_secs = a.terms.max_duration_secs + 1),
            McjsError::InvalidCheckpointInterval,
        ),
        (
            Box::new(|a| a.terms.deadline = Some(START_TIME)),
            McjsError::DeadlineInPast,
        ),
        (
            Box::new(|a| a.terms.max_price_per_gpu_hour = 0),
            McjsError::InvalidMaxPrice,
        ),
        // One 15-minute interval at 4 × 2 USDC/h is 2 USDC.
        (Box::new(|a| a.bond = 2 * USDC - 1), McjsError::BondTooSmall),
        (
            Box::new(|a| {
                a.requirements.gpu_count = 255;
                a.terms.max_price_per_gpu_hour = u64::MAX;
            }),
            McjsError::Overflow,
        ),
    ];
    for (mutate, expected) in cases {
        let mut args = job_args(1, 100 * USDC);
        mutate(&mut args);
        expect_error(env.submit(&owner, args).map(|_| vec![]), expected);
    }
    // More than the wallet holds: the token program refuses, nothing moves.
    expect_failure(
        env.submit(&owner, job_args(1, 1_001 * USDC))
            .map(|_| vec![]),
    );
    env.assert_unchanged(&before);
    assert!(
        env.account(&mcjs_client::pda::job(&owner.key(), 1))
            .is_none()
    );
    // The minimum bond itself is accepted.
    env.submit(&owner, job_args(1, 2 * USDC)).unwrap();
    env.assert_invariants();
}

#[test]
fn assign_checks_the_node_against_the_requirements() {
    let mut env = Env::new();
    let owner = env.wallet(1_000 * USDC);
    let mut few_gpus = a100_80gb();
    few_gpus.gpu_count = 2;
    let mut small_vram = a100_80gb();
    small_vram.vram_per_gpu_mib = 40_960;
    let mut old = a100_80gb();
    old.compute_capability = 70;
    let mut other_model = a100_80gb();
    other_model.gpu_model = "h100-sxm5-80gb".into();
    let mut look_alike = a100_80gb();
    look_alike.gpu_model = "a1000".into();
    let mut slow_disk = a100_80gb();
    slow_disk.checkpoint_write_mibps = 59;
    let provider = env.provider_with_nodes(
        500 * USDC,
        &[
            few_gpus,
            small_vram,
            old,
            other_model,
            look_alike,
            slow_disk,
            a100_80gb(),
        ],
        2 * USDC,
    );
    let pricey = env.provider_with_nodes(500 * USDC, &[a100_80gb()], 2 * USDC + 1);
    let job = env.submit(&owner, job_args(1, 100 * USDC)).unwrap();
    let before = env.snapshot();
    for (node, expected) in [
        (0, McjsError::NodeTooFewGpus),
        (1, McjsError::NodeVramTooSmall),
        (2, McjsError::NodeComputeCapabilityTooLow),
        (3, McjsError::NodeGpuModelNotAllowed),
        (4, McjsError::NodeGpuModelNotAllowed),
        (5, McjsError::NodeCheckpointBandwidthTooLow),
    ] {
        expect_error(env.assign(&job, &provider, node), expected);
    }
    expect_error(env.assign(&job, &pricey, 0), McjsError::NodePriceTooHigh);
    env.assert_unchanged(&before);

    // Only the scheduler assigns.
    let stranger = env.wallet(0);
    let ix = ix::assign_job(
        &stranger.key(),
        &job,
        &provider.nodes[6],
        &provider.pda,
        None,
    );
    expect_error(env.send(&[ix], &[&stranger.kp]), McjsError::NotScheduler);

    env.assign(&job, &provider, 6).unwrap();
    // Neither the job nor the node can be assigned twice.
    expect_error(env.assign(&job, &provider, 6), McjsError::JobNotQueued);
    let other = env.submit(&owner, job_args(2, 100 * USDC)).unwrap();
    expect_error(
        env.assign(&other, &provider, 6),
        McjsError::NodeNotAvailable,
    );
    env.assert_invariants();
}

#[test]
fn an_offline_node_or_an_understaked_provider_gets_no_job() {
    let mut env = Env::new();
    let owner = env.wallet(1_000 * USDC);
    let provider = env.provider_with_nodes(100 * USDC, &[a100_80gb(), a100_80gb()], USDC);
    let job = env.submit(&owner, job_args(1, 100 * USDC)).unwrap();
    let offline = ix::set_node_status(&provider.key(), &provider.pda, 0, NodeStatus::Offline);
    env.send(&[offline], &[&provider.wallet.kp]).unwrap();
    expect_error(env.assign(&job, &provider, 0), McjsError::NodeNotAvailable);
    // A pending withdrawal takes the stake below the minimum.
    let request = ix::request_withdrawal(&provider.key(), USDC);
    env.send(&[request], &[&provider.wallet.kp]).unwrap();
    expect_error(env.assign(&job, &provider, 1), McjsError::StakeBelowMinimum);
}

#[test]
fn start_needs_the_assigned_provider_and_the_current_generation() {
    let mut env = Env::new();
    let owner = env.wallet(1_000 * USDC);
    let provider = env.provider_with_nodes(200 * USDC, &[a100_80gb()], USDC);
    let rival = env.provider_with_nodes(200 * USDC, &[a100_80gb()], USDC);
    let job = env.submit(&owner, job_args(1, 100 * USDC)).unwrap();
    expect_error(
        env.start(&job, &provider, 0),
        McjsError::NotAssignedProvider,
    );
    env.assign(&job, &provider, 0).unwrap();
    expect_error(env.start(&job, &rival, 0), McjsError::NotAssignedProvider);
    let operator = provider.operator(0);
    let stale = ix::start_job(
        &operator.pubkey(),
        &job,
        &provider.nodes[0],
        &provider.pda,
        0,
    );
    expect_error(env.send(&[stale], &[operator]), McjsError::StaleGeneration);
    let logs = env.start(&job, &provider, 0).unwrap();
    assert_eq!(events::<JobStarted>(&logs)[0].generation, 1);
    assert_eq!(env.job(&job).first_running_at, Some(START_TIME));
    expect_error(env.start(&job, &provider, 0), McjsError::JobNotAssigned);
}

#[test]
fn attestations_must_advance_and_bill_at_most_the_liveness_window() {
    let mut env = Env::new();
    let owner = env.wallet(1_000 * USDC);
    let provider = env.provider_with_nodes(200 * USDC, &[a100_80gb()], 2 * USDC);
    let job = env.submit(&owner, job_args(1, 100 * USDC)).unwrap();
    env.assign(&job, &provider, 0).unwrap();
    expect_error(
        env.attest(&job, &provider, 0, 1, 0, 1),
        McjsError::JobNotRunning,
    );
    env.start(&job, &provider, 0).unwrap();
    env.warp(900);
    env.attest(&job, &provider, 0, 1, 1, 10).unwrap();
    let before = env.snapshot();
    expect_error(
        env.attest(&job, &provider, 0, 1, 1, 10),
        McjsError::CheckpointNotAdvancing,
    );
    expect_error(
        env.attest(&job, &provider, 0, 1, 0, 99),
        McjsError::CheckpointNotAdvancing,
    );
    expect_error(
        env.attest(&job, &provider, 0, 0, 2, 20),
        McjsError::StaleGeneration,
    );
    expect_error(
        env.attest(&job, &provider, 0, 2, 2, 20),
        McjsError::StaleGeneration,
    );
    env.assert_unchanged(&before);
    // Ten hours of silence bill at most 3 × 15 minutes.
    env.warp(10 * HOUR);
    env.attest(&job, &provider, 0, 1, 1, 11).unwrap();
    assert_eq!(
        env.job(&job).accrued,
        2 * USDC + 6 * USDC,
        "15 min + 45 min at 8 USDC/h"
    );
    assert_eq!(env.job(&job).billed_secs, 900 + 2_700);
}

#[test]
fn billing_stops_at_the_maximum_duration() {
    let mut env = Env::new();
    let owner = env.wallet(1_000 * USDC);
    let provider = env.provider_with_nodes(200 * USDC, &[a100_80gb()], 2 * USDC);
    let mut args = job_args(1, 100 * USDC);
    args.terms.max_duration_secs = 1_800;
    let job = env.submit(&owner, args).unwrap();
    env.assign(&job, &provider, 0).unwrap();
    env.start(&job, &provider, 0).unwrap();
    for step in 1..=2 {
        env.warp(900);
        env.attest(&job, &provider, 0, 1, 0, step).unwrap();
    }
    // At the cap: nothing more is attested (it would bill nothing).
    env.warp(900);
    let before = env.snapshot();
    expect_error(
        env.attest(&job, &provider, 0, 1, 0, 3),
        McjsError::DurationCapReached,
    );
    env.assert_unchanged(&before);
    let state = env.job(&job);
    assert_eq!(state.billed_secs, 1_800);
    assert_eq!(state.accrued, 4 * USDC);
}

#[test]
fn a_bond_that_runs_out_pauses_the_job_until_topped_up() {
    let mut env = Env::new();
    let owner = env.wallet(1_000 * USDC);
    let provider = env.provider_with_nodes(200 * USDC, &[a100_80gb()], 2 * USDC);
    // 3 USDC buys 22.5 minutes at 8 USDC/h.
    let job = env.submit(&owner, job_args(1, 3 * USDC)).unwrap();
    env.assign(&job, &provider, 0).unwrap();
    env.start(&job, &provider, 0).unwrap();
    env.warp(900);
    // 2 USDC for 15 minutes: the bond covers it, no settlement accounts.
    assert!(!env.attest_needs_settlement(&job));
    env.attest(&job, &provider, 0, 1, 0, 1).unwrap();
    env.warp(900);
    // This attestation exhausts the bond: it pauses the job, which needs
    // the settlement accounts. Without them it is refused, nothing changed.
    assert!(env.attest_needs_settlement(&job));
    let before = env.snapshot();
    expect_error(
        env.attest_settling(&job, &provider, 0, 1, 0, 2, false),
        McjsError::SettlementAccountsRequired,
    );
    env.assert_unchanged(&before);
    // With them but the node read-only (the pause releases it): refused too.
    let operator = provider.operator(0).insecure_clone();
    let mut read_only_node = provider
        .assignment(&job, 0, &job, 1, env.deployment())
        .attest(&operator.pubkey(), true, 0, 2, checkpoint_hash(0, 2));
    for meta in &mut read_only_node.accounts {
        if meta.pubkey == provider.nodes[0] {
            meta.is_writable = false;
        }
    }
    expect_error(
        env.send(&[read_only_node], &[&operator]),
        McjsError::SettlementAccountsRequired,
    );
    env.assert_unchanged(&before);
    let logs = env.attest(&job, &provider, 0, 1, 0, 2).unwrap();
    let paused = events::<JobPaused>(&logs);
    assert_eq!(paused[0].reason, PauseReason::InsufficientBond);
    let state = env.job(&job);
    assert!(matches!(
        state.state,
        JobState::Paused {
            reason: PauseReason::InsufficientBond,
            ..
        }
    ));
    assert_eq!(state.bond, 0, "the whole bond paid for attested progress");
    assert_eq!(state.checkpoint_count, 2, "the checkpoint still counts");
    assert_eq!(state.generation, 2, "the node is fenced");
    assert_eq!(env.node(&provider.nodes[0]).status, NodeStatus::Available);
    assert_eq!(
        env.balance(&provider.payout) + env.balance(&env.treasury.clone()),
        3 * USDC
    );
    // The fenced node can no longer attest.
    expect_error(
        env.attest(&job, &provider, 0, 1, 0, 3),
        McjsError::WrongNode,
    );

    let resume = ix::resume_job(&owner.key(), &job);
    expect_error(
        env.send(&[resume.clone()], &[&owner.kp]),
        McjsError::BondTooSmall,
    );
    let top_up = ix::top_up(&owner.key(), &job, &owner.token, &env.mint, 10 * USDC);
    let logs = env.send(&[top_up], &[&owner.kp]).unwrap();
    assert_eq!(events::<BondToppedUp>(&logs)[0].bond, 10 * USDC);
    let logs = env.send(&[resume], &[&owner.kp]).unwrap();
    assert_eq!(events::<JobResumed>(&logs).len(), 1);
    assert!(matches!(env.job(&job).state, JobState::Recovering { .. }));
    env.assign(&job, &provider, 0).unwrap();
    assert_eq!(env.job(&job).generation, 3);
    env.assert_invariants();
}

#[test]
fn complete_needs_the_current_generation_and_the_owners_token_account() {
    let mut env = Env::new();
    let owner = env.wallet(1_000 * USDC);
    let thief = env.wallet(0);
    let provider = env.provider_with_nodes(200 * USDC, &[a100_80gb()], USDC);
    let job = env.running_job(&owner, &provider, 1);
    env.warp(900);
    let before = env.snapshot();
    expect_error(
        env.complete(&job, &owner.token, &provider, 0, 0),
        McjsError::StaleGeneration,
    );
    expect_error(
        env.complete(&job, &thief.token, &provider, 0, 1),
        McjsError::WrongTokenAccount,
    );
    env.assert_unchanged(&before);
    env.complete(&job, &owner.token, &provider, 0, 1).unwrap();
    expect_error(
        env.complete(&job, &owner.token, &provider, 0, 1),
        McjsError::NotAssignedProvider,
    );
    env.assert_invariants();
}

#[test]
fn the_scheduler_reports_a_failure_the_node_is_fenced_and_the_job_recovers_elsewhere() {
    let mut env = Env::new();
    let owner = env.wallet(1_000 * USDC);
    let first = env.provider_with_nodes(200 * USDC, &[a100_80gb()], 2 * USDC);
    let second = env.provider_with_nodes(200 * USDC, &[a100_80gb()], USDC);
    let job = env.running_job(&owner, &first, 1);
    let assigned_at = env.node(&first.nodes[0]).status_since;
    env.warp(900);
    env.attest(&job, &first, 0, 1, 0, 100).unwrap();
    env.warp(600); // ten minutes of work lost: never billed
    let scheduler = env.scheduler.insecure_clone();
    let logs = env
        .report(
            &scheduler,
            &job,
            &owner.token,
            &first,
            0,
            FailureCause::NodeLost,
        )
        .unwrap();
    let reported = &events::<FailureReported>(&logs)[0];
    assert_eq!(reported.failed_generation, 1);
    assert_eq!(reported.slashed, 5 * USDC);
    assert!(!reported.job_failed);
    let state = env.job(&job);
    assert!(matches!(state.state, JobState::Recovering { .. }));
    assert_eq!(
        (state.generation, state.restarts_used),
        (2, 0),
        "a provider's failure uses no restart"
    );
    assert_eq!(
        env.balance(&first.payout),
        2 * USDC * 95 / 100,
        "15 attested minutes"
    );
    assert_eq!(
        env.balance(&owner.token),
        900 * USDC,
        "the slash does not go to the owner"
    );
    assert_eq!(env.pool(), 5 * USDC, "the slash goes to the insurance pool");
    assert_eq!(reported.slashed_to, mcjs_client::pda::insurance_pool());
    let p = env.provider(&first.pda);
    assert_eq!(
        (p.stake, p.failures, p.slashed_total),
        (195 * USDC, 1, 5 * USDC)
    );
    assert_eq!(env.node(&first.nodes[0]).status, NodeStatus::Offline);
    // The node's own record: one failure, and the time it held the job.
    let record = env.node(&first.nodes[0]);
    assert_eq!(
        (record.failures, record.service_secs),
        (1, (env.now() - assigned_at) as u64)
    );
    assert!(record.service_secs >= 1_500);
    let first_secs = record.service_secs;

    // The old node is fenced: it can neither attest nor complete.
    expect_error(env.attest(&job, &first, 0, 1, 0, 200), McjsError::WrongNode);
    env.assign(&job, &second, 0).unwrap();
    expect_error(env.attest(&job, &first, 0, 3, 0, 200), McjsError::WrongNode);
    env.start(&job, &second, 0).unwrap();
    env.warp(900);
    env.attest(&job, &second, 0, 3, 0, 200).unwrap();
    let state = env.job(&job);
    assert_eq!(
        state.checkpoint_chain,
        chain_of(&[
            (1, 0, 100, checkpoint_hash(0, 100)),
            (3, 0, 200, checkpoint_hash(0, 200)),
        ])
    );
    let second_since = env.node(&second.nodes[0]).status_since;
    env.complete(&job, &owner.token, &second, 0, 3).unwrap();
    // A completion adds service time, never a failure.
    let record = env.node(&second.nodes[0]);
    assert_eq!(
        (record.failures, record.service_secs),
        (0, (env.now() - second_since) as u64)
    );
    assert!(record.service_secs >= 900);
    assert_eq!(
        env.node(&first.nodes[0]).service_secs,
        first_secs,
        "nothing more for a node the job left"
    );
    env.assert_invariants();
}

#[test]
fn anyone_may_report_a_stalled_job_but_only_once_it_has_stalled() {
    let mut env = Env::new();
    let owner = env.wallet(1_000 * USDC);
    let provider = env.provider_with_nodes(200 * USDC, &[a100_80gb()], USDC);
    let job = env.running_job(&owner, &provider, 1);
    let stranger = env.wallet(0);
    env.warp(3 * 900 - 1);
    let before = env.snapshot();
    expect_error(
        env.report(
            &stranger.kp,
            &job,
            &owner.token,
            &provider,
            0,
            FailureCause::CheckpointOverdue,
        ),
        McjsError::JobNotStalled,
    );
    env.warp(1);
    expect_error(
        env.report(
            &stranger.kp,
            &job,
            &owner.token,
            &provider,
            0,
            FailureCause::JobError,
        ),
        McjsError::JobErrorNeedsScheduler,
    );
    env.assert_unchanged(&before);
    env.report(
        &stranger.kp,
        &job,
        &owner.token,
        &provider,
        0,
        FailureCause::CheckpointOverdue,
    )
    .unwrap();
    assert!(matches!(env.job(&job).state, JobState::Recovering { .. }));
    env.assert_invariants();
}

#[test]
fn an_assigned_job_that_never_starts_can_be_reported_by_anyone() {
    let mut env = Env::new();
    let owner = env.wallet(1_000 * USDC);
    let provider = env.provider_with_nodes(200 * USDC, &[a100_80gb()], USDC);
    let job = env.submit(&owner, job_args(1, 100 * USDC)).unwrap();
    env.assign(&job, &provider, 0).unwrap();
    let stranger = env.wallet(0);
    // Staging gets its grace on top of the liveness window.
    env.warp(2_700 + STAGING_GRACE_SECS);
    env.report(
        &stranger.kp,
        &job,
        &owner.token,
        &provider,
        0,
        FailureCause::NodeLost,
    )
    .unwrap();
    let state = env.job(&job);
    assert!(matches!(state.state, JobState::Recovering { .. }));
    assert_eq!(
        state.restarts_used, 0,
        "the provider's failure, not the job's"
    );
}

#[test]
fn a_job_error_uses_the_restart_budget_without_slashing_and_ends_failed() {
    let mut env = Env::new();
    let owner = env.wallet(1_000 * USDC);
    let provider = env.provider_with_nodes(200 * USDC, &[a100_80gb()], USDC);
    let mut args = job_args(1, 100 * USDC);
    args.terms.restart_budget = 1;
    let job = env.submit(&owner, args).unwrap();
    let scheduler = env.scheduler.insecure_clone();
    let mut paid = 0;
    for round in 0..2 {
        env.assign(&job, &provider, 0).unwrap();
        env.start(&job, &provider, 0).unwrap();
        env.warp(900);
        let generation = env.job(&job).generation;
        env.attest(&job, &provider, 0, generation, round, 1)
            .unwrap();
        paid += USDC; // 15 minutes at 4 × 1 USDC/h
        let logs = env
            .report(
                &scheduler,
                &job,
                &owner.token,
                &provider,
                0,
                FailureCause::JobError,
            )
            .unwrap();
        let reported = &events::<FailureReported>(&logs)[0];
        assert_eq!(reported.slashed, 0);
        assert_eq!(reported.job_failed, round == 1);
        assert_eq!(env.node(&provider.nodes[0]).status, NodeStatus::Available);
    }
    let state = env.job(&job);
    assert!(matches!(state.state, JobState::Failed { .. }));
    assert_eq!(state.bond, 0);
    assert_eq!(
        env.balance(&owner.token),
        1_000 * USDC - paid,
        "the rest is refunded"
    );
    assert_eq!(env.provider(&provider.pda).stake, 200 * USDC);
    env.assert_invariants();
}

#[test]
fn the_owner_pauses_resumes_tops_up_and_cancels() {
    let mut env = Env::new();
    let owner = env.wallet(1_000 * USDC);
    let stranger = env.wallet(10 * USDC);
    let provider = env.provider_with_nodes(200 * USDC, &[a100_80gb()], USDC);
    let job = env.running_job(&owner, &provider, 1);
    env.warp(900);
    env.attest(&job, &provider, 0, 1, 0, 1).unwrap();
    let d = env.deployment();
    let pause = provider.assignment(&job, 0, &job, 0, d).pause(&owner.key());
    let mut foreign = pause.clone();
    ix::tamper::substitute_account(&mut foreign, &owner.key(), &stranger.key());
    expect_failure(env.send(&[foreign], &[&stranger.kp]));
    let logs = env.send(&[pause.clone()], &[&owner.kp]).unwrap();
    assert_eq!(events::<JobPaused>(&logs)[0].reason, PauseReason::Owner);
    assert_eq!(
        events::<SegmentSettled>(&logs)[0].provider_amount
            + events::<SegmentSettled>(&logs)[0].commission,
        USDC
    );
    assert_eq!(env.job(&job).generation, 2);
    expect_error(
        env.send(&[pause], &[&owner.kp]),
        McjsError::NotAssignedProvider,
    );

    let top_up = ix::top_up(&owner.key(), &job, &owner.token, &env.mint, 0);
    expect_error(env.send(&[top_up], &[&owner.kp]), McjsError::ZeroAmount);
    let resume = ix::resume_job(&owner.key(), &job);
    env.send(&[resume.clone()], &[&owner.kp]).unwrap();
    expect_error(env.send(&[resume], &[&owner.kp]), McjsError::JobNotPaused);

    let cancel = ix::cancel_job(&owner.key(), &job, &owner.token, &env.mint);
    let logs = env.send(&[cancel.clone()], &[&owner.kp]).unwrap();
    assert_eq!(events::<JobCancelled>(&logs)[0].refund, 99 * USDC);
    assert_eq!(env.balance(&owner.token), 999 * USDC);
    expect_error(
        env.send(&[cancel], &[&owner.kp]),
        McjsError::InvalidJobState,
    );
    let top_up = ix::top_up(&owner.key(), &job, &owner.token, &env.mint, USDC);
    expect_error(
        env.send(&[top_up], &[&owner.kp]),
        McjsError::InvalidJobState,
    );
    env.assert_invariants();
}

#[test]
fn a_running_job_cannot_be_cancelled() {
    let mut env = Env::new();
    let owner = env.wallet(1_000 * USDC);
    let provider = env.provider_with_nodes(200 * USDC, &[a100_80gb()], USDC);
    let job = env.running_job(&owner, &provider, 1);
    let cancel = ix::cancel_job(&owner.key(), &job, &owner.token, &env.mint);
    expect_error(
        env.send(&[cancel], &[&owner.kp]),
        McjsError::InvalidJobState,
    );
}

#[test]
fn anyone_expires_a_queued_job_past_its_deadline_refunding_its_owner() {
    let mut env = Env::new();
    let owner = env.wallet(1_000 * USDC);
    let caller = env.wallet(0);
    let provider = env.provider_with_nodes(200 * USDC, &[a100_80gb()], USDC);
    let mut args = job_args(1, 100 * USDC);
    args.terms.deadline = Some(START_TIME + HOUR);
    let job = env.submit(&owner, args).unwrap();
    let undated = env.submit(&owner, job_args(2, 100 * USDC)).unwrap();
    let expire = ix::expire_job(&caller.key(), &job, &owner.token, &env.mint);
    expect_error(
        env.send(&[expire.clone()], &[&caller.kp]),
        McjsError::DeadlineNotPassed,
    );
    let expire_undated = ix::expire_job(&caller.key(), &undated, &owner.token, &env.mint);
    env.warp(HOUR + 1);
    expect_error(
        env.send(&[expire_undated], &[&caller.kp]),
        McjsError::DeadlineNotPassed,
    );
    expect_error(env.assign(&job, &provider, 0), McjsError::DeadlinePassed);
    let to_caller = ix::expire_job(&caller.key(), &job, &caller.token, &env.mint);
    expect_error(
        env.send(&[to_caller], &[&caller.kp]),
        McjsError::WrongTokenAccount,
    );
    let logs = env.send(&[expire.clone()], &[&caller.kp]).unwrap();
    assert_eq!(events::<JobExpired>(&logs)[0].refund, 100 * USDC);
    assert_eq!(env.balance(&owner.token), 900 * USDC);
    expect_error(env.send(&[expire], &[&caller.kp]), McjsError::JobNotQueued);
    env.assert_invariants();
}

#[test]
fn a_finished_job_is_closed_and_its_rent_returned() {
    let mut env = Env::new();
    let owner = env.wallet(1_000 * USDC);
    let job = env.submit(&owner, job_args(1, 100 * USDC)).unwrap();
    let close = ix::close_job(&owner.key(), &job, &owner.token, &env.mint);
    expect_error(
        env.send(&[close.clone()], &[&owner.kp]),
        McjsError::JobNotFinished,
    );
    let cancel = ix::cancel_job(&owner.key(), &job, &owner.token, &env.mint);
    env.send(&[cancel], &[&owner.kp]).unwrap();
    let stranger = env.wallet(0);
    let mut foreign = close.clone();
    ix::tamper::substitute_account(&mut foreign, &owner.key(), &stranger.key());
    expect_failure(env.send(&[foreign], &[&stranger.kp]));
    let lamports_before = env.svm.get_account(&owner.key()).unwrap().lamports;
    let rent = env.account(&job).unwrap().lamports
        + env
            .account(&mcjs_client::pda::vault(&job))
            .unwrap()
            .lamports;
    let logs = env.send(&[close.clone()], &[&owner.kp]).unwrap();
    assert_eq!(events::<JobClosed>(&logs).len(), 1);
    assert!(env.account(&job).is_none());
    assert!(env.account(&mcjs_client::pda::vault(&job)).is_none());
    let lamports_after = env.svm.get_account(&owner.key()).unwrap().lamports;
    assert_eq!(
        lamports_after,
        lamports_before + rent - 5_000,
        "rent back, less the fee"
    );
    expect_failure(env.send(&[close], &[&owner.kp]));
    env.assert_invariants();
}

/// How many bumps `find_program_address` tries for `seeds` (from 255 down):
/// the program pays `compute::BUMP_TRY` for each.
fn bump_tries(seeds: &[&[u8]]) -> u32 {
    let (_, bump) = mcjs_client::Pubkey::find_program_address(seeds, &mcjs::ID);
    256 - u32::from(bump)
}

/// An owner key whose first job's three searched addresses (its job
/// counter, the job, the job's vault) take at least `extra` more bump tries
/// than one each.
fn owner_with_slow_addresses(extra: u32) -> solana_keypair::Keypair {
    use mcjs::state::seeds::{SEED_JOB, SEED_JOBS, SEED_PREFIX, SEED_VAULT};
    loop {
        let kp = solana_keypair::Keypair::new();
        let owner = kp.pubkey();
        let job = mcjs_client::pda::job(&owner, 0);
        let tries = bump_tries(&[SEED_PREFIX, owner.as_ref(), SEED_JOBS])
            + bump_tries(&[SEED_PREFIX, owner.as_ref(), SEED_JOB, &0u64.to_le_bytes()])
            + bump_tries(&[SEED_PREFIX, job.as_ref(), SEED_VAULT]);
        if tries >= 3 + extra {
            return kp;
        }
    }
}

#[test]
fn a_job_whose_addresses_take_many_bump_tries_is_submitted_within_its_limit() {
    // A job's addresses are fixed by its owner's key and its id, and so is
    // the number of bumps the program tries to find them: an owner whose
    // first job's addresses take 22 more tries than one each (about one key in
    // 120,000) is still granted enough compute units by the client's limit.
    let mut env = Env::new();
    env.record_cu = false;
    let kp = owner_with_slow_addresses(22);
    let owner = env.wallet_of(kp, 1_000 * USDC);
    let args = job_args(0, 100 * USDC);
    let ix = ix::submit_job(&owner.key(), &owner.token, &env.mint, args.clone());
    let limit = mcjs_client::compute::instruction_limit(&ix);
    let logs = env
        .send(&[ix], &[&owner.kp])
        .unwrap_or_else(|failed| panic!("submit within a limit of {limit}: {failed:?}"));
    let job = env.job(&mcjs_client::pda::job(&owner.key(), 0));
    assert!(
        matches!(job.state, JobState::Pending { .. }),
        "{:?}",
        job.state
    );
    if mcjs_svm::program_elf_from_env().is_some() {
        // As bytecode (the native builtin logs no units): within the limit,
        // and costlier than any submission the suite measured. (The
        // measured maximum itself carries the extra tries of the suite's
        // random keys, a few more or less each run, so whether its margin
        // alone would cover this owner varies; the searches' allowance is
        // what is sure to.)
        let used = crate::cu_log::units_from_logs(&logs);
        assert_eq!(used.len(), 1, "{logs:?}");
        assert!(u64::from(limit) > used[0], "{} of {limit}", used[0]);
        let max = mcjs_client::compute::measured_max("submit_job").unwrap();
        assert!(used[0] > u64::from(max), "{} vs {max}", used[0]);
    }
}
