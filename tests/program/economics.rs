//! The economics under participants who play to win (docs/job-contract.md,
//! "What each participant is guaranteed"): each test plays one attack an
//! owner, a provider or a stranger could make, and checks that it takes
//! nothing from anyone.

use mcjs::errors::McjsError;
use mcjs::state::*;
use mcjs_client::{Pubkey, ix};
use solana_signer::Signer;

use crate::harness::*;

/// The liveness window of `job_args`' jobs: 3 intervals of 15 minutes.
const WINDOW: i64 = 3 * 900;

/// A job queued with `restart_budget`, on `provider`'s node 0 and started.
fn running_with_budget(
    env: &mut Env,
    owner: &Wallet,
    provider: &ProviderActor,
    restart_budget: u8,
) -> Pubkey {
    let mut args = job_args(1, 100 * USDC);
    args.terms.restart_budget = restart_budget;
    let job = env.submit(owner, args).unwrap();
    env.assign(&job, provider, 0).unwrap();
    env.start(&job, provider, 0).unwrap();
    job
}

/// A provider's failure — its node lost, its container dead, its
/// attestations overdue — slashes the provider and moves the job on, but
/// uses none of the owner's restart budget: on unreliable hardware a job
/// would otherwise die after a few providers failed it, through no fault
/// of its own.
#[test]
fn a_providers_failure_uses_none_of_the_owners_restart_budget() {
    let mut env = Env::new();
    let owner = env.wallet(1_000 * USDC);
    let providers: Vec<ProviderActor> = (0..4)
        .map(|_| env.provider_with_nodes(200 * USDC, &[a100_80gb()], USDC))
        .collect();
    let job = running_with_budget(&mut env, &owner, &providers[0], 0);
    let scheduler = env.scheduler.insecure_clone();
    let causes = [
        FailureCause::NodeLost,
        FailureCause::ContainerDied,
        FailureCause::CheckpointOverdue,
    ];
    for (i, cause) in causes.into_iter().enumerate() {
        if i > 0 {
            env.assign(&job, &providers[i], 0).unwrap();
            env.start(&job, &providers[i], 0).unwrap();
        }
        env.warp(600);
        let stake = env.provider(&providers[i].pda).stake;
        env.report(&scheduler, &job, &owner.token, &providers[i], 0, cause)
            .unwrap();
        let state = env.job(&job);
        assert!(
            matches!(state.state, JobState::Recovering { .. }),
            "after {cause:?}: {:?}",
            state.state
        );
        assert_eq!(state.restarts_used, 0, "after {cause:?}");
        assert_eq!(
            env.provider(&providers[i].pda).stake,
            stake - 5 * USDC,
            "the provider is slashed for {cause:?}"
        );
        env.assert_invariants();
    }
    // The job's own error still uses the budget: with none left, it ends.
    env.assign(&job, &providers[3], 0).unwrap();
    env.start(&job, &providers[3], 0).unwrap();
    env.report(
        &scheduler,
        &job,
        &owner.token,
        &providers[3],
        0,
        FailureCause::JobError,
    )
    .unwrap();
    assert!(matches!(env.job(&job).state, JobState::Failed { .. }));
    env.assert_invariants();
}

/// The program, not only the spec checker, holds a job to checkpoints at
/// least a minute apart: an owner who submits a shorter interval directly
/// would otherwise make its providers reportable seconds after assignment.
#[test]
fn an_interval_under_the_floor_is_refused_and_moves_nothing() {
    let mut env = Env::new();
    let owner = env.wallet(1_000 * USDC);
    for secs in [1, 3, MIN_CHECKPOINT_INTERVAL_SECS - 1] {
        let mut args = job_args(u64::from(secs), 100 * USDC);
        args.terms.checkpoint_interval_secs = secs;
        let before = env.snapshot();
        expect_error(
            env.submit(&owner, args).map(|_| vec![]),
            McjsError::InvalidCheckpointInterval,
        );
        env.assert_unchanged(&before);
    }
    let mut args = job_args(100, 100 * USDC);
    args.terms.checkpoint_interval_secs = MIN_CHECKPOINT_INTERVAL_SECS;
    env.submit(&owner, args).expect("an interval at the floor");
    assert_eq!(MIN_CHECKPOINT_INTERVAL_SECS, 60, "the spec's floor");
    env.assert_invariants();
}

/// An assigned job is staging its inputs: no stranger may report it until
/// the staging grace has passed on top of the liveness window (the
/// scheduler, which sees the agent staging, reports a node that never
/// starts sooner).
#[test]
fn a_stranger_cannot_report_a_job_still_staging_before_the_staging_grace() {
    let mut env = Env::new();
    let owner = env.wallet(1_000 * USDC);
    let provider = env.provider_with_nodes(200 * USDC, &[a100_80gb()], USDC);
    let job = env.submit(&owner, job_args(1, 100 * USDC)).unwrap();
    env.assign(&job, &provider, 0).unwrap();
    let stranger = env.wallet(0);
    env.warp(WINDOW + STAGING_GRACE_SECS - 1);
    let before = env.snapshot();
    expect_error(
        env.report(
            &stranger.kp,
            &job,
            &owner.token,
            &provider,
            0,
            FailureCause::NodeLost,
        ),
        McjsError::JobNotStalled,
    );
    env.assert_unchanged(&before);
    env.warp(1);
    env.report(
        &stranger.kp,
        &job,
        &owner.token,
        &provider,
        0,
        FailureCause::NodeLost,
    )
    .expect("a node that never started, reported once staging is over");
    assert!(matches!(env.job(&job).state, JobState::Recovering { .. }));
    env.assert_invariants();
}

/// A job capped at one interval, on `provider`'s node 0, that has been
/// billed its whole cap: 15 minutes, attested.
fn capped_at_one_interval(env: &mut Env, owner: &Wallet, provider: &ProviderActor) -> Pubkey {
    let mut args = job_args(1, 100 * USDC);
    args.terms.max_duration_secs = 900;
    let job = env.submit(owner, args).unwrap();
    env.assign(&job, provider, 0).unwrap();
    env.start(&job, provider, 0).unwrap();
    env.warp(900);
    env.attest(&job, provider, 0, 1, 0, 1).unwrap();
    let state = env.job(&job);
    assert!(state.at_cap(), "billed {} s", state.billed_secs);
    job
}

/// An owner who declares a cap of one interval and keeps training gets no
/// more of its provider's work on chain: attestations past the cap are
/// refused (they would bill nothing), the node stops being late, and the
/// job ends — by the scheduler's report or, a liveness window after its
/// last attestation, by anyone's — Expired, nobody slashed, the provider
/// paid for the interval and the owner refunded the rest.
#[test]
fn a_job_at_its_cap_attests_nothing_more_and_ends_without_a_slash() {
    for reporter in ["scheduler", "stranger"] {
        let mut env = Env::new();
        let owner = env.wallet(1_000 * USDC);
        let provider = env.provider_with_nodes(200 * USDC, &[a100_80gb()], USDC);
        let stranger = env.wallet(0);
        let job = capped_at_one_interval(&mut env, &owner, &provider);
        env.warp(900);
        let before = env.snapshot();
        expect_error(
            env.attest(&job, &provider, 0, 1, 0, 2),
            McjsError::DurationCapReached,
        );
        env.assert_unchanged(&before);
        let signer = match reporter {
            "scheduler" => env.scheduler.insecure_clone(),
            _ => {
                // A stranger waits the liveness window after the last
                // attestation, as for any stalled job.
                env.warp(WINDOW - 900);
                stranger.kp.insecure_clone()
            }
        };
        let (owner_before, payout_before) =
            (env.balance(&owner.token), env.balance(&provider.payout));
        env.report(
            &signer,
            &job,
            &owner.token,
            &provider,
            0,
            FailureCause::CheckpointOverdue,
        )
        .expect("a job at its cap is ended");
        let state = env.job(&job);
        assert!(
            matches!(state.state, JobState::Expired { .. }),
            "{reporter}: {:?}",
            state.state
        );
        assert_eq!(state.billed_secs, 900);
        assert_eq!(env.provider(&provider.pda).slashed_total, 0, "{reporter}");
        assert_eq!(env.pool(), 0, "{reporter}");
        assert_eq!(
            env.node(&provider.nodes[0]).status,
            NodeStatus::Available,
            "the node is not failed"
        );
        assert_eq!(
            env.balance(&provider.payout),
            payout_before + USDC * 95 / 100,
            "{reporter}: the provider is paid the attested interval, less the commission"
        );
        assert_eq!(
            env.balance(&owner.token),
            owner_before + 100 * USDC - USDC,
            "{reporter}: the owner paid the one interval (4 GPUs at 1 USDC for 15 min)"
        );
        env.assert_invariants();
    }
}

/// The honest way out at the cap: the provider's agent completes the job
/// with the output it has; nothing more is billed.
#[test]
fn a_job_at_its_cap_completes_with_the_output_it_has() {
    let mut env = Env::new();
    let owner = env.wallet(1_000 * USDC);
    let provider = env.provider_with_nodes(200 * USDC, &[a100_80gb()], USDC);
    let job = capped_at_one_interval(&mut env, &owner, &provider);
    env.warp(300);
    let before = env.job(&job);
    env.complete(&job, &owner.token, &provider, 0, 1)
        .expect("complete at the cap");
    let state = env.job(&job);
    assert!(matches!(state.state, JobState::Completed { .. }));
    assert_eq!(
        (state.paid, state.billed_secs),
        (before.paid + before.accrued, 900),
        "what was attested is paid, nothing past the cap"
    );
    env.assert_invariants();
}

/// A job paused at its cap and resumed can never be placed again: the
/// scheduler's assignment is refused, and anyone may end it.
#[test]
fn a_queued_job_at_its_cap_is_never_assigned_and_anyone_may_expire_it() {
    let mut env = Env::new();
    let owner = env.wallet(1_000 * USDC);
    let provider = env.provider_with_nodes(200 * USDC, &[a100_80gb()], USDC);
    let stranger = env.wallet(0);
    let job = capped_at_one_interval(&mut env, &owner, &provider);
    let pause = provider
        .assignment(&job, 0, &job, 0, env.deployment())
        .pause(&owner.key());
    env.send(&[pause], &[&owner.kp]).expect("pause");
    env.send(&[ix::resume_job(&owner.key(), &job)], &[&owner.kp])
        .expect("resume");
    let before = env.snapshot();
    expect_error(
        env.assign(&job, &provider, 0),
        McjsError::DurationCapReached,
    );
    env.assert_unchanged(&before);
    let owner_before = env.balance(&owner.token);
    let expire = ix::expire_job(&stranger.key(), &job, &owner.token, &env.mint);
    env.send(&[expire], &[&stranger.kp])
        .expect("expire at the cap");
    assert!(matches!(env.job(&job).state, JobState::Expired { .. }));
    assert_eq!(env.balance(&owner.token), owner_before + 99 * USDC);
    env.assert_invariants();
}

/// The store is down, or the scheduler's side of the network: the
/// scheduler, which knows, excuses the lateness, and while it holds a live
/// lease no stranger may report the stalled job either (the program cannot
/// tell an outage from a dead node). Once the lease lapses — no scheduler
/// acts — anyone may, as before.
#[test]
fn while_a_scheduler_holds_its_lease_no_stranger_may_report_a_stalled_job() {
    let mut env = Env::new();
    let owner = env.wallet(1_000 * USDC);
    let provider = env.provider_with_nodes(200 * USDC, &[a100_80gb()], USDC);
    let stranger = env.wallet(0);
    let job = env.running_job(&owner, &provider, 1);
    // Three liveness windows without an attestation; the scheduler renews
    // its lease all along.
    for _ in 0..3 {
        env.warp(WINDOW);
        let scheduler = env.scheduler.insecure_clone();
        env.send(&[ix::hold_lease(&scheduler.pubkey())], &[&scheduler])
            .expect("renew the lease");
    }
    let before = env.snapshot();
    for cause in [
        FailureCause::NodeLost,
        FailureCause::ContainerDied,
        FailureCause::CheckpointOverdue,
    ] {
        for reporter in [&stranger.kp, &owner.kp] {
            expect_error(
                env.report_live(reporter, &job, &owner.token, &provider, 0, cause),
                McjsError::SchedulerLive,
            );
        }
    }
    env.assert_unchanged(&before);
    assert_eq!(env.provider(&provider.pda).slashed_total, 0);
    // The scheduler stops renewing: its lease lapses, and the stalled job
    // may be reported by anyone.
    env.lapse_lease();
    env.report_live(
        &stranger.kp,
        &job,
        &owner.token,
        &provider,
        0,
        FailureCause::NodeLost,
    )
    .expect("no scheduler acts: anyone reports");
    assert_eq!(env.provider(&provider.pda).slashed_total, 5 * USDC);
    env.assert_invariants();
}

/// The owner empties and closes its refund account while its job runs,
/// hoping to keep the node busy (no completion, no report could refund it)
/// and to report the stall later: the job completes all the same, the
/// provider is paid, and the refund waits in the vault until the owner
/// closes the job to an account of its own.
#[test]
fn an_owner_closing_its_refund_account_stops_no_job_from_ending() {
    let mut env = Env::new();
    let owner = env.wallet(1_000 * USDC);
    let provider = env.provider_with_nodes(200 * USDC, &[a100_80gb()], USDC);
    let job = env.running_job(&owner, &provider, 1);
    env.warp(900);
    env.attest(&job, &provider, 0, 1, 0, 1).unwrap();
    let spare = env.close_token_account(&owner.token, &owner.kp);
    let payout_before = env.balance(&provider.payout);
    env.complete(&job, &owner.token, &provider, 0, 1)
        .expect("the provider completes whatever the owner closed");
    let state = env.job(&job);
    assert!(matches!(state.state, JobState::Completed { .. }));
    assert_eq!(
        env.balance(&provider.payout),
        payout_before + USDC * 95 / 100,
        "the provider is paid the attested interval"
    );
    assert_eq!(
        env.node(&provider.nodes[0]).status,
        NodeStatus::Available,
        "the node is free"
    );
    assert_eq!(state.bond, 99 * USDC, "the refund waits in the vault");
    env.assert_invariants();
    // The owner takes it back to an account of its own.
    let spare_before = env.balance(&spare);
    env.close(&owner.kp, &job, &spare).expect("close the job");
    assert_eq!(env.balance(&spare), spare_before + 99 * USDC);
    env.assert_invariants();

    // A job that ends by a report (a fatal error, no restart left) refunds
    // nothing either, and ends all the same.
    let owner2 = env.wallet(1_000 * USDC);
    let mut args = job_args(2, 100 * USDC);
    args.terms.restart_budget = 0;
    let job2 = env.submit(&owner2, args).unwrap();
    env.assign(&job2, &provider, 0).unwrap();
    env.start(&job2, &provider, 0).unwrap();
    env.close_token_account(&owner2.token, &owner2.kp);
    let scheduler = env.scheduler.insecure_clone();
    env.report(
        &scheduler,
        &job2,
        &owner2.token,
        &provider,
        0,
        FailureCause::JobFatal,
    )
    .expect("the report ends the job");
    let state = env.job(&job2);
    assert!(matches!(state.state, JobState::Failed { .. }));
    assert_eq!(state.bond, 100 * USDC, "kept for the owner");
    env.assert_invariants();
}

/// A provider that closes its payout account, hoping no report can take
/// its job off its node (and so escape the slash) and its owner cannot
/// pause: both go through; what the provider would have been paid goes
/// back to the owner's bond.
#[test]
fn a_provider_closing_its_payout_account_escapes_no_report_and_blocks_no_pause() {
    let mut env = Env::new();
    let owner = env.wallet(1_000 * USDC);
    let provider = env.provider_with_nodes(200 * USDC, &[a100_80gb()], USDC);
    let job = env.running_job(&owner, &provider, 1);
    env.warp(900);
    env.attest(&job, &provider, 0, 1, 0, 1).unwrap();
    env.close_token_account(&provider.payout, &provider.wallet.kp);
    // The owner pauses: the interval's commission is paid, the provider's
    // share goes back to the bond.
    let pause = provider
        .assignment(&job, 0, &job, 0, env.deployment())
        .pause(&owner.key());
    env.send(&[pause], &[&owner.kp])
        .expect("the owner pauses whatever the provider closed");
    let state = env.job(&job);
    assert!(matches!(state.state, JobState::Paused { .. }));
    assert_eq!(
        (state.bond, state.paid),
        (100 * USDC - USDC / 20, USDC / 20),
        "only the commission left the bond"
    );
    env.assert_invariants();
    // Resumed on the same provider, it stalls: the scheduler's report goes
    // through and slashes it.
    env.send(&[ix::resume_job(&owner.key(), &job)], &[&owner.kp])
        .expect("resume");
    env.assign(&job, &provider, 0).unwrap();
    env.start(&job, &provider, 0).unwrap();
    env.warp(WINDOW);
    let scheduler = env.scheduler.insecure_clone();
    env.report(
        &scheduler,
        &job,
        &owner.token,
        &provider,
        0,
        FailureCause::NodeLost,
    )
    .expect("the report goes through");
    assert_eq!(env.provider(&provider.pda).slashed_total, 5 * USDC);
    assert!(matches!(env.job(&job).state, JobState::Recovering { .. }));
    env.assert_invariants();
}

/// A provider attests `(u32::MAX, u64::MAX)` and leaves, hoping that no
/// later checkpoint can ever go past it (every later provider's
/// attestations refused, each slashed as overdue in turn). Labels are the
/// job's own and ordered within an assignment only: the next provider's
/// first checkpoint, whatever its label, is attested; within its
/// assignment its labels must still grow.
#[test]
fn a_made_up_huge_step_binds_no_later_assignment() {
    let mut env = Env::new();
    let owner = env.wallet(1_000 * USDC);
    let liar = env.provider_with_nodes(200 * USDC, &[a100_80gb()], USDC);
    let next = env.provider_with_nodes(200 * USDC, &[a100_80gb()], USDC);
    let job = running_with_budget(&mut env, &owner, &liar, 1);
    env.warp(900);
    env.attest(&job, &liar, 0, 1, 0, 100).unwrap();
    env.warp(900);
    env.attest(&job, &liar, 0, 1, u32::MAX, u64::MAX).unwrap();
    let scheduler = env.scheduler.insecure_clone();
    env.warp(600);
    env.report(
        &scheduler,
        &job,
        &owner.token,
        &liar,
        0,
        FailureCause::NodeLost,
    )
    .unwrap();

    env.assign(&job, &next, 0).unwrap();
    env.start(&job, &next, 0).unwrap();
    let generation = env.job(&job).generation;
    env.warp(900);
    let stake = env.provider(&next.pda).stake;
    env.attest(&job, &next, 0, generation, 0, 200).unwrap();
    let state = env.job(&job);
    let last = state.last_checkpoint.unwrap();
    assert_eq!(
        (last.epoch, last.step, last.generation),
        (0, 200, generation)
    );
    assert_eq!(state.checkpoint_count, 3);
    // Within the assignment the labels still grow.
    env.warp(900);
    let before = env.snapshot();
    expect_error(
        env.attest(&job, &next, 0, generation, 0, 200),
        McjsError::CheckpointNotAdvancing,
    );
    env.assert_unchanged(&before);
    env.attest(&job, &next, 0, generation, 0, 300).unwrap();
    assert_eq!(env.provider(&next.pda).stake, stake, "nobody slashed it");
    env.assert_invariants();
}
