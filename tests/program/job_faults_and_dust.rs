//! The job's own faults (a yield, a fatal error) and stray tokens ("dust")
//! in a vault: neither may cost anyone what the job contract does not say.

use mcjs::errors::McjsError;
use mcjs::events::*;
use mcjs::state::*;
use mcjs_client::{Pubkey, ix, pda};

use crate::harness::*;

/// 4 × 1 USDC an hour: a 15-minute checkpoint pays 1 USDC.
const PRICE: u64 = USDC;

/// A job with `restart_budget` running on `provider`'s node 0, one checkpoint attested.
fn running_with_a_checkpoint(
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
    env.warp(900);
    let generation = env.job(&job).generation;
    env.attest(&job, provider, 0, generation, 0, 1).unwrap();
    job
}

#[test]
fn a_yielded_job_is_queued_again_without_using_its_restart_budget() {
    let mut env = Env::new();
    let owner = env.wallet(1_000 * USDC);
    let provider = env.provider_with_nodes(200 * USDC, &[a100_80gb()], PRICE);
    // No restarts at all: a yield must not need one.
    let job = running_with_a_checkpoint(&mut env, &owner, &provider, 0);
    let scheduler = env.scheduler.insecure_clone();
    for round in 0..3u32 {
        let generation = env.job(&job).generation;
        let logs = env
            .report(
                &scheduler,
                &job,
                &owner.token,
                &provider,
                0,
                FailureCause::JobYielded,
            )
            .unwrap();
        let reported = &events::<FailureReported>(&logs)[0];
        assert_eq!((reported.slashed, reported.refund), (0, 0));
        assert!(!reported.job_failed);
        let state = env.job(&job);
        assert!(
            matches!(state.state, JobState::Recovering { .. }),
            "round {round}"
        );
        assert_eq!(state.restarts_used, 0);
        assert_eq!(state.generation, generation + 1, "the node is fenced");
        assert_eq!(state.last_failure, Some(FailureCause::JobYielded));
        assert_eq!(env.node(&provider.nodes[0]).status, NodeStatus::Available);
        // Back on the same node at once.
        env.assign(&job, &provider, 0).unwrap();
        env.start(&job, &provider, 0).unwrap();
        env.warp(900);
        let generation = env.job(&job).generation;
        env.attest(&job, &provider, 0, generation, 0, 100 + u64::from(round))
            .unwrap();
    }
    let state = env.job(&job);
    assert_eq!(state.paid, 3 * USDC, "each yield settled its attested work");
    assert_eq!(env.provider(&provider.pda).stake, 200 * USDC);
    assert_eq!(env.pool(), 0);
    assert_eq!(
        env.balance(&owner.token),
        900 * USDC,
        "a yield refunds nothing: the job goes on"
    );
    env.assert_invariants();
}

#[test]
fn a_yield_without_a_checkpoint_on_its_assignment_uses_the_restart_budget() {
    let mut env = Env::new();
    let owner = env.wallet(1_000 * USDC);
    let provider = env.provider_with_nodes(200 * USDC, &[a100_80gb()], PRICE);
    let job = running_with_a_checkpoint(&mut env, &owner, &provider, 1);
    let scheduler = env.scheduler.insecure_clone();
    // A yield with progress on this assignment is free.
    env.report(
        &scheduler,
        &job,
        &owner.token,
        &provider,
        0,
        FailureCause::JobYielded,
    )
    .unwrap();
    assert_eq!(env.job(&job).restarts_used, 0);
    // Back on the node, it yields again without checkpointing: that costs a
    // restart, so a job cannot hold nodes forever for free.
    env.assign(&job, &provider, 0).unwrap();
    env.start(&job, &provider, 0).unwrap();
    env.report(
        &scheduler,
        &job,
        &owner.token,
        &provider,
        0,
        FailureCause::JobYielded,
    )
    .unwrap();
    let state = env.job(&job);
    assert!(matches!(state.state, JobState::Recovering { .. }));
    assert_eq!(state.restarts_used, 1);
    // And once the budget is spent, it fails, refunded, nobody slashed.
    env.assign(&job, &provider, 0).unwrap();
    let logs = env
        .report(
            &scheduler,
            &job,
            &owner.token,
            &provider,
            0,
            FailureCause::JobYielded,
        )
        .unwrap();
    let reported = &events::<FailureReported>(&logs)[0];
    assert!(reported.job_failed);
    assert_eq!(reported.slashed, 0);
    assert!(matches!(env.job(&job).state, JobState::Failed { .. }));
    assert_eq!(env.provider(&provider.pda).stake, 200 * USDC);
    env.assert_invariants();
}

/// "Cannot succeed anywhere" is one node's word: a provider could say it to
/// end any job unslashed. The first says it costs the job one restart, as
/// an error; the job fails, the rest of its bond refunded, when another
/// provider's node says it too. The same provider saying it again is one
/// more error, so a job that is fatal everywhere still ends within its
/// budget.
#[test]
fn a_fatal_job_error_fails_the_job_only_when_a_second_provider_says_so() {
    let mut env = Env::new();
    let owner = env.wallet(1_000 * USDC);
    let liar = env.provider_with_nodes(200 * USDC, &[a100_80gb()], PRICE);
    let other = env.provider_with_nodes(200 * USDC, &[a100_80gb()], PRICE);
    let job = running_with_a_checkpoint(&mut env, &owner, &liar, 3);
    env.warp(600); // unattested work: never billed
    let scheduler = env.scheduler.insecure_clone();
    let fatal = |env: &mut Env, on: &ProviderActor| {
        let logs = env
            .report(
                &scheduler,
                &job,
                &owner.token,
                on,
                0,
                FailureCause::JobFatal,
            )
            .unwrap();
        let r = &events::<FailureReported>(&logs)[0];
        (r.job_failed, r.slashed, r.refund, r.restarts_used)
    };
    let first = fatal(&mut env, &liar);
    assert_eq!(first, (false, 0, 0, 1), "one provider's word ends nothing");
    let state = env.job(&job);
    assert!(matches!(state.state, JobState::Recovering { .. }));
    assert_eq!(state.fatal_claim, Some(liar.pda));
    assert_eq!(state.bond, 99 * USDC, "the bond stays the job's");
    // Back on the same provider, which says it again: one more error.
    env.assign(&job, &liar, 0).unwrap();
    env.start(&job, &liar, 0).unwrap();
    let again = fatal(&mut env, &liar);
    assert_eq!(
        again,
        (false, 0, 0, 2),
        "the same word twice is still one provider's"
    );
    // Another provider's node says it too: the job fails now, with a
    // restart to spare, the rest of the bond refunded, nobody slashed.
    env.assign(&job, &other, 0).unwrap();
    env.start(&job, &other, 0).unwrap();
    let second = fatal(&mut env, &other);
    assert_eq!(second, (true, 0, 99 * USDC, 2));
    let state = env.job(&job);
    assert!(matches!(state.state, JobState::Failed { .. }));
    assert_eq!(state.restarts_used, 2, "failed with restarts to spare");
    assert_eq!((state.bond, state.paid), (0, USDC));
    assert_eq!(state.last_failure, Some(FailureCause::JobFatal));
    assert_eq!(env.balance(&owner.token), 999 * USDC);
    assert_eq!(env.balance(&pda::vault(&job)), 0);
    assert_eq!(env.balance(&liar.payout), USDC * 95 / 100);
    for p in [&liar, &other] {
        assert_eq!(env.provider(&p.pda).stake, 200 * USDC);
        assert_eq!(env.node(&p.nodes[0]).status, NodeStatus::Available);
    }
    assert_eq!(env.pool(), 0);
    env.assert_invariants();
}

/// Progress after a node called the job fatal answers that node: a later
/// fatal stop is a new claim, and a second provider must confirm it anew.
/// A job out of restarts fails on the first word, as on any error.
#[test]
fn progress_after_a_fatal_claim_answers_it_and_the_budget_still_bounds_the_claims() {
    let mut env = Env::new();
    let owner = env.wallet(1_000 * USDC);
    let a = env.provider_with_nodes(200 * USDC, &[a100_80gb()], PRICE);
    let b = env.provider_with_nodes(200 * USDC, &[a100_80gb()], PRICE);
    let job = running_with_a_checkpoint(&mut env, &owner, &a, 1);
    let scheduler = env.scheduler.insecure_clone();
    env.report(
        &scheduler,
        &job,
        &owner.token,
        &a,
        0,
        FailureCause::JobFatal,
    )
    .unwrap();
    assert_eq!(env.job(&job).fatal_claim, Some(a.pda));
    env.assign(&job, &b, 0).unwrap();
    env.start(&job, &b, 0).unwrap();
    env.warp(900);
    let generation = env.job(&job).generation;
    env.attest(&job, &b, 0, generation, 0, 2).unwrap();
    assert_eq!(env.job(&job).fatal_claim, None, "the job went on past it");
    // B now says fatal: a first word again, but the budget (1) is spent.
    let logs = env
        .report(
            &scheduler,
            &job,
            &owner.token,
            &b,
            0,
            FailureCause::JobFatal,
        )
        .unwrap();
    let reported = &events::<FailureReported>(&logs)[0];
    assert!(reported.job_failed, "out of restarts");
    assert_eq!(reported.slashed, 0);
    assert_eq!(env.job(&job).restarts_used, 1);
    env.assert_invariants();
}

#[test]
fn only_the_scheduler_may_report_a_yield_or_a_fatal_error() {
    let mut env = Env::new();
    let owner = env.wallet(1_000 * USDC);
    let stranger = env.wallet(0);
    let provider = env.provider_with_nodes(200 * USDC, &[a100_80gb()], PRICE);
    let job = running_with_a_checkpoint(&mut env, &owner, &provider, 2);
    // Long stalled: anyone may report an infrastructure failure, but not these.
    env.warp(10 * HOUR);
    let before = env.snapshot();
    let operator = provider.operator(0).insecure_clone();
    let reporters = [
        stranger.kp.insecure_clone(),
        owner.kp.insecure_clone(),
        operator,
        provider.wallet.kp.insecure_clone(),
        env.admin.insecure_clone(),
    ];
    for reporter in &reporters {
        for cause in [FailureCause::JobYielded, FailureCause::JobFatal] {
            expect_error(
                env.report(reporter, &job, &owner.token, &provider, 0, cause),
                McjsError::JobErrorNeedsScheduler,
            );
        }
    }
    env.assert_unchanged(&before);
    assert!(matches!(env.job(&job).state, JobState::Running { .. }));
}

#[test]
fn dust_in_a_finished_jobs_vault_does_not_block_close_and_goes_to_the_owner() {
    let mut env = Env::new();
    let owner = env.wallet(1_000 * USDC);
    let stranger = env.wallet(0);
    let provider = env.provider_with_nodes(200 * USDC, &[a100_80gb()], PRICE);

    // Dust after the end.
    let cancelled = env.submit(&owner, job_args(1, 10 * USDC)).unwrap();
    let cancel = ix::cancel_job(&owner.key(), &cancelled, &owner.token, &env.mint);
    env.send(&[cancel], &[&owner.kp]).unwrap();
    env.send_stray(&pda::vault(&cancelled), 1);
    assert_eq!(env.balance(&pda::vault(&cancelled)), 1);
    env.assert_invariants();
    // The sweep goes only to an account the owner holds.
    let before = env.snapshot();
    expect_error(
        env.close(&owner.kp.insecure_clone(), &cancelled, &stranger.token),
        McjsError::WrongTokenAccount,
    );
    env.assert_unchanged(&before);
    // Any USDC account of the owner's, not only the bond's source.
    let savings = env.token_account(&env.mint.clone(), &owner.key());
    let owner_before = env.balance(&owner.token);
    let logs = env
        .close(&owner.kp.insecure_clone(), &cancelled, &savings)
        .unwrap();
    assert_eq!(events::<JobClosed>(&logs)[0].swept, 1);
    assert_eq!(env.balance(&savings), 1);
    assert_eq!(env.balance(&owner.token), owner_before);
    assert!(env.account(&cancelled).is_none());
    assert!(env.account(&pda::vault(&cancelled)).is_none());
    env.assert_invariants();

    // Dust while it ran: completion refunds the bond, the dust stays for close.
    let job = env.running_job(&owner, &provider, 2);
    env.send_stray(&pda::vault(&job), 1);
    env.warp(900);
    env.attest(&job, &provider, 0, 1, 0, 1).unwrap();
    env.assert_invariants();
    let logs = env.complete(&job, &owner.token, &provider, 0, 1).unwrap();
    assert_eq!(events::<JobCompleted>(&logs)[0].refund, 99 * USDC);
    assert_eq!(env.balance(&pda::vault(&job)), 1);
    env.assert_invariants();
    let owner_before = env.balance(&owner.token);
    let logs = env
        .close(&owner.kp.insecure_clone(), &job, &owner.token)
        .unwrap();
    assert_eq!(events::<JobClosed>(&logs)[0].swept, 1);
    assert_eq!(env.balance(&owner.token), owner_before + 1);
    assert!(env.account(&job).is_none());
    env.assert_invariants();
}

#[test]
fn a_finished_job_without_dust_closes_sweeping_nothing() {
    let mut env = Env::new();
    let owner = env.wallet(100 * USDC);
    let job = env.submit(&owner, job_args(1, 10 * USDC)).unwrap();
    let cancel = ix::cancel_job(&owner.key(), &job, &owner.token, &env.mint);
    env.send(&[cancel], &[&owner.kp]).unwrap();
    let logs = env
        .close(&owner.kp.insecure_clone(), &job, &owner.token)
        .unwrap();
    assert_eq!(events::<JobClosed>(&logs)[0].swept, 0);
    assert_eq!(env.balance(&owner.token), 100 * USDC);
    env.assert_invariants();
}

#[test]
fn dust_in_a_stake_vault_does_not_block_withdraw_stake_and_leaves_with_it() {
    let mut env = Env::new();
    let provider = env.provider_with_nodes(150 * USDC, &[], PRICE);
    let vault = pda::vault(&provider.pda);

    // A partial withdrawal takes the dust along; the stake stays exact.
    env.send_stray(&vault, 1);
    env.assert_invariants();
    let request = ix::request_withdrawal(&provider.key(), 50 * USDC);
    env.send(&[request], &[&provider.wallet.kp]).unwrap();
    env.warp(86_400);
    let wallet_before = env.balance(&provider.wallet.token);
    let logs = env.withdraw(&provider).unwrap();
    let withdrawn = &events::<StakeWithdrawn>(&logs)[0];
    assert_eq!(
        (withdrawn.amount, withdrawn.swept, withdrawn.stake),
        (50 * USDC, 1, 100 * USDC)
    );
    assert_eq!(
        env.balance(&provider.wallet.token),
        wallet_before + 50 * USDC + 1
    );
    assert_eq!(env.balance(&vault), 100 * USDC);
    env.assert_invariants();

    // Withdrawing everything empties the vault, dust included.
    env.send_stray(&vault, 1);
    env.send_stray(&vault, 2 * USDC);
    let request = ix::request_withdrawal(&provider.key(), 100 * USDC);
    env.send(&[request], &[&provider.wallet.kp]).unwrap();
    env.warp(86_400);
    let wallet_before = env.balance(&provider.wallet.token);
    let logs = env.withdraw(&provider).unwrap();
    let withdrawn = &events::<StakeWithdrawn>(&logs)[0];
    assert_eq!(
        (withdrawn.amount, withdrawn.swept, withdrawn.stake),
        (100 * USDC, 2 * USDC + 1, 0)
    );
    assert_eq!(
        env.balance(&provider.wallet.token),
        wallet_before + 102 * USDC + 1
    );
    assert_eq!(env.balance(&vault), 0);
    assert_eq!(env.provider(&provider.pda).stake, 0);
    env.assert_invariants();
}
