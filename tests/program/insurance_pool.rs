//! The insurance pool: every slash lands in it, never with the job's owner
//! or whoever reported the failure; `compensate_owner` by the admin is the
//! only way out, to the owner of a job that ended unfinished after its
//! providers failed it, never more than that owner paid.

use mcjs::errors::McjsError;
use mcjs::events::*;
use mcjs::state::*;
use mcjs_client::{Pubkey, ix, pda};
use solana_keypair::Keypair;
use solana_signer::Signer;

use crate::harness::*;

/// 4 USDC an hour: a 15-minute checkpoint pays 1 USDC.
const PRICE: u64 = USDC;

/// A job of `owner` with `restart_budget`, running on `provider`'s node 0,
/// with `checkpoints` attested 15 minutes apart.
fn job_with_checkpoints(
    env: &mut Env,
    owner: &Wallet,
    provider: &ProviderActor,
    job_id: u64,
    restart_budget: u8,
    checkpoints: u64,
) -> Pubkey {
    let mut args = job_args(job_id, 100 * USDC);
    args.terms.restart_budget = restart_budget;
    let job = env.submit(owner, args).unwrap();
    env.assign(&job, provider, 0).unwrap();
    env.start(&job, provider, 0).unwrap();
    let generation = env.job(&job).generation;
    for step in 1..=checkpoints {
        env.warp(900);
        env.attest(&job, provider, 0, generation, 0, step).unwrap();
    }
    job
}

/// The owner cancels its queued job: it ends unfinished.
fn give_up(env: &mut Env, owner: &Wallet, job: &Pubkey) {
    let cancel = ix::cancel_job(&owner.key(), job, &owner.token, &env.mint);
    env.send(&[cancel], &[&owner.kp]).expect("cancel");
}

fn reported(logs: &[String]) -> FailureReported {
    let mut all = events::<FailureReported>(logs);
    assert_eq!(all.len(), 1);
    all.remove(0)
}

#[test]
fn an_infrastructure_failure_slashes_into_the_pool_and_neither_the_owner_nor_the_reporter_gains() {
    for (cause, reporter) in [
        (FailureCause::NodeLost, "scheduler"),
        (FailureCause::ContainerDied, "stranger"),
        (FailureCause::CheckpointOverdue, "owner"),
    ] {
        let mut env = Env::new();
        let owner = env.wallet(1_000 * USDC);
        let stranger = env.wallet(10 * USDC);
        let provider = env.provider_with_nodes(200 * USDC, &[a100_80gb()], PRICE);
        let job = job_with_checkpoints(&mut env, &owner, &provider, 1, 2, 1);
        // Stalled: anyone may report.
        env.warp(3 * 900);
        let signer = match reporter {
            "scheduler" => env.scheduler.insecure_clone(),
            "stranger" => stranger.kp.insecure_clone(),
            _ => owner.kp.insecure_clone(),
        };
        let (owner_before, stranger_before) =
            (env.balance(&owner.token), env.balance(&stranger.token));
        let logs = env
            .report(&signer, &job, &owner.token, &provider, 0, cause)
            .unwrap();
        let event = reported(&logs);
        assert_eq!(event.slashed, 5 * USDC, "{cause:?} by the {reporter}");
        assert_eq!(event.slashed_to, pda::insurance_pool());
        assert_eq!(event.refund, 0, "the job is queued again");
        assert_eq!(env.pool(), 5 * USDC);
        assert_eq!(env.balance(&pda::vault(&provider.pda)), 195 * USDC);
        assert_eq!(env.provider(&provider.pda).slashed_total, 5 * USDC);
        assert_eq!(
            env.balance(&owner.token),
            owner_before,
            "{cause:?} by the {reporter}: the owner gains nothing"
        );
        assert_eq!(env.balance(&stranger.token), stranger_before);
        let state = env.job(&job);
        assert!(matches!(state.state, JobState::Recovering { .. }));
        assert_eq!(state.last_failure, Some(cause));
        env.assert_invariants();
    }
}

/// A provider's failure queues the job again whatever its restart budget
/// (here none): it uses none of it. An owner who then gives up gets back
/// only the bond it did not spend.
#[test]
fn a_job_its_provider_failed_refunds_only_its_unspent_bond_when_its_owner_gives_up() {
    let mut env = Env::new();
    let owner = env.wallet(1_000 * USDC);
    let provider = env.provider_with_nodes(200 * USDC, &[a100_80gb()], PRICE);
    let job = job_with_checkpoints(&mut env, &owner, &provider, 1, 0, 2);
    env.warp(3 * 900);
    let owner_before = env.balance(&owner.token);
    // The owner reports its own stalled job: the slash still is not its.
    let reporter = owner.kp.insecure_clone();
    let logs = env
        .report(
            &reporter,
            &job,
            &owner.token,
            &provider,
            0,
            FailureCause::NodeLost,
        )
        .unwrap();
    let event = reported(&logs);
    assert!(!event.job_failed, "a provider's failure uses no restart");
    assert_eq!(event.restarts_used, 0);
    assert_eq!(event.slashed, 5 * USDC);
    assert_eq!(event.refund, 0);
    assert_eq!(env.balance(&owner.token), owner_before);
    give_up(&mut env, &owner, &job);
    assert!(matches!(env.job(&job).state, JobState::Cancelled { .. }));
    assert_eq!(
        env.balance(&owner.token),
        owner_before + 98 * USDC,
        "the bond less two checkpoints"
    );
    assert_eq!(env.balance(&owner.token), 1_000 * USDC - 2 * USDC);
    assert_eq!(env.pool(), 5 * USDC);
    env.assert_invariants();
}

#[test]
fn a_job_error_a_yield_or_a_fatal_error_slashes_nothing() {
    for cause in [
        FailureCause::JobError,
        FailureCause::JobYielded,
        FailureCause::JobFatal,
    ] {
        let mut env = Env::new();
        let owner = env.wallet(1_000 * USDC);
        let provider = env.provider_with_nodes(200 * USDC, &[a100_80gb()], PRICE);
        let job = job_with_checkpoints(&mut env, &owner, &provider, 1, 2, 1);
        let scheduler = env.scheduler.insecure_clone();
        let logs = env
            .report(&scheduler, &job, &owner.token, &provider, 0, cause)
            .unwrap();
        let event = reported(&logs);
        assert_eq!(event.slashed, 0, "{cause:?}");
        assert_eq!(env.pool(), 0, "{cause:?}");
        let p = env.provider(&provider.pda);
        assert_eq!(
            (p.stake, p.slashed_total, p.failures),
            (200 * USDC, 0, 0),
            "{cause:?}"
        );
        assert_eq!(env.balance(&pda::vault(&provider.pda)), 200 * USDC);
        assert_eq!(env.node(&provider.nodes[0]).status, NodeStatus::Available);
        env.assert_invariants();
    }
}

#[test]
fn the_admin_compensates_the_owner_of_a_job_its_provider_failed_up_to_what_the_owner_paid() {
    let mut env = Env::new();
    let owner = env.wallet(1_000 * USDC);
    let stranger = env.wallet(0);
    let provider = env.provider_with_nodes(200 * USDC, &[a100_80gb()], PRICE);
    let job = job_with_checkpoints(&mut env, &owner, &provider, 1, 0, 2);
    let scheduler = env.scheduler.insecure_clone();
    env.report(
        &scheduler,
        &job,
        &owner.token,
        &provider,
        0,
        FailureCause::ContainerDied,
    )
    .unwrap();
    // Queued again (a provider's failure uses no restart); not compensable
    // while it may still finish.
    assert_eq!(env.job(&job).compensable(), 0);
    give_up(&mut env, &owner, &job);
    let failed = env.job(&job);
    assert!(matches!(failed.state, JobState::Cancelled { .. }));
    assert_eq!((failed.paid, failed.compensated), (2 * USDC, 0));
    assert_eq!(failed.compensable(), 2 * USDC);
    assert_eq!(env.pool(), 5 * USDC);
    let other_owner_account = env.token_account(&env.mint.clone(), &owner.key());
    let admin = env.admin.insecure_clone();

    let before = env.snapshot();
    expect_error(
        env.compensate(&stranger.kp, &job, &owner.token, USDC),
        McjsError::NotAdmin,
    );
    expect_error(
        env.compensate(&owner.kp, &job, &owner.token, USDC),
        McjsError::NotAdmin,
    );
    expect_error(
        env.compensate(&admin, &job, &stranger.token, USDC),
        McjsError::WrongTokenAccount,
    );
    expect_error(
        env.compensate(&admin, &job, &other_owner_account, USDC),
        McjsError::WrongTokenAccount,
    );
    expect_error(
        env.compensate(&admin, &job, &owner.token, 0),
        McjsError::ZeroAmount,
    );
    expect_error(
        env.compensate(&admin, &job, &owner.token, 2 * USDC + 1),
        McjsError::CompensationTooLarge,
    );
    env.assert_unchanged(&before);

    let owner_before = env.balance(&owner.token);
    let logs = env
        .compensate(&admin, &job, &owner.token, 3 * USDC / 2)
        .unwrap();
    let paid = &events::<OwnerCompensated>(&logs)[0];
    assert_eq!(
        (paid.job, paid.owner_token, paid.by),
        (job, owner.token, admin.pubkey())
    );
    assert_eq!(
        (paid.amount, paid.compensated, paid.pool_balance),
        (3 * USDC / 2, 3 * USDC / 2, 7 * USDC / 2)
    );
    assert_eq!(env.balance(&owner.token), owner_before + 3 * USDC / 2);
    assert_eq!(env.pool(), 7 * USDC / 2);
    assert_eq!(env.job(&job).compensated, 3 * USDC / 2);
    env.assert_invariants();

    // The cap is cumulative: what is left is what was paid, less what was compensated.
    let before = env.snapshot();
    expect_error(
        env.compensate(&admin, &job, &owner.token, USDC / 2 + 1),
        McjsError::CompensationTooLarge,
    );
    env.assert_unchanged(&before);
    env.compensate(&admin, &job, &owner.token, USDC / 2)
        .unwrap();
    assert_eq!(env.job(&job).compensated, 2 * USDC);
    let before = env.snapshot();
    expect_error(
        env.compensate(&admin, &job, &owner.token, 1),
        McjsError::NotCompensable,
    );
    env.assert_unchanged(&before);
    assert_eq!(env.balance(&owner.token), owner_before + 2 * USDC);
    assert_eq!(env.pool(), 3 * USDC);
    // Made whole for what it paid, never richer than before it submitted.
    assert_eq!(env.balance(&owner.token), 1_000 * USDC);
    env.assert_invariants();
}

#[test]
fn compensation_is_limited_by_what_the_pool_holds() {
    let mut env = Env::with_params(ConfigParams {
        slash_amount: USDC / 2,
        ..default_params()
    });
    let owner = env.wallet(1_000 * USDC);
    let provider = env.provider_with_nodes(200 * USDC, &[a100_80gb()], PRICE);
    let job = job_with_checkpoints(&mut env, &owner, &provider, 1, 0, 2);
    let scheduler = env.scheduler.insecure_clone();
    env.report(
        &scheduler,
        &job,
        &owner.token,
        &provider,
        0,
        FailureCause::NodeLost,
    )
    .unwrap();
    give_up(&mut env, &owner, &job);
    assert_eq!(env.pool(), USDC / 2);
    let admin = env.admin.insecure_clone();
    let before = env.snapshot();
    expect_error(
        env.compensate(&admin, &job, &owner.token, USDC),
        McjsError::InsufficientPool,
    );
    env.assert_unchanged(&before);
    env.compensate(&admin, &job, &owner.token, USDC / 2)
        .unwrap();
    assert_eq!(env.pool(), 0);
    assert_eq!(env.job(&job).compensable(), 3 * USDC / 2);
    env.assert_invariants();
}

#[test]
fn compensation_is_refused_for_a_job_not_failed_by_its_providers() {
    let mut env = Env::new();
    let owner = env.wallet(1_000 * USDC);
    let first = env.provider_with_nodes(200 * USDC, &[a100_80gb()], PRICE);
    let second = env.provider_with_nodes(200 * USDC, &[a100_80gb()], PRICE);
    let scheduler = env.scheduler.insecure_clone();
    let admin = env.admin.insecure_clone();

    // Lost once (the pool now holds a slash), then completed elsewhere.
    let completed = job_with_checkpoints(&mut env, &owner, &first, 1, 2, 1);
    env.report(
        &scheduler,
        &completed,
        &owner.token,
        &first,
        0,
        FailureCause::NodeLost,
    )
    .unwrap();
    assert_eq!(env.pool(), 5 * USDC);
    let recovering = env.job(&completed);
    assert!(matches!(recovering.state, JobState::Recovering { .. }));
    assert_eq!(recovering.last_failure, Some(FailureCause::NodeLost));
    let before = env.snapshot();
    expect_error(
        env.compensate(&admin, &completed, &owner.token, 1),
        McjsError::NotCompensable,
    );
    env.assert_unchanged(&before);
    env.assign(&completed, &second, 0).unwrap();
    env.start(&completed, &second, 0).unwrap();
    env.warp(900);
    env.attest(&completed, &second, 0, 3, 0, 2).unwrap();
    env.complete(&completed, &owner.token, &second, 0, 3)
        .unwrap();

    // Failed by its own error, at once or with the budget spent.
    let by_error = job_with_checkpoints(&mut env, &owner, &second, 2, 0, 1);
    env.report(
        &scheduler,
        &by_error,
        &owner.token,
        &second,
        0,
        FailureCause::JobError,
    )
    .unwrap();
    // Fatal on two providers' nodes, with restarts to spare.
    let by_fatal = job_with_checkpoints(&mut env, &owner, &second, 3, 2, 1);
    let third = env.provider_with_nodes(200 * USDC, &[a100_80gb()], PRICE);
    for on in [&second, &third] {
        if on.pda == third.pda {
            env.assign(&by_fatal, on, 0).unwrap();
            env.start(&by_fatal, on, 0).unwrap();
        }
        env.report(
            &scheduler,
            &by_fatal,
            &owner.token,
            on,
            0,
            FailureCause::JobFatal,
        )
        .unwrap();
    }
    let cancelled = env.submit(&owner, job_args(4, 10 * USDC)).unwrap();
    let cancel = ix::cancel_job(&owner.key(), &cancelled, &owner.token, &env.mint);
    env.send(&[cancel], &[&owner.kp]).unwrap();

    let before = env.snapshot();
    for job in [completed, by_error, by_fatal, cancelled] {
        let state = env.job(&job);
        assert!(state.state.is_terminal());
        assert_eq!(state.compensable(), 0);
        expect_error(
            env.compensate(&admin, &job, &owner.token, 1),
            McjsError::NotCompensable,
        );
    }
    env.assert_unchanged(&before);
    assert_eq!(env.pool(), 5 * USDC);
    env.assert_invariants();
}

#[test]
fn nobody_but_compensate_owner_takes_tokens_out_of_the_pool() {
    // The pool's authority is the Config, a PDA no key signs for.
    let mut env = Env::new();
    let owner = env.wallet(1_000 * USDC);
    let provider = env.provider_with_nodes(200 * USDC, &[a100_80gb()], PRICE);
    let job = job_with_checkpoints(&mut env, &owner, &provider, 1, 2, 1);
    let scheduler = env.scheduler.insecure_clone();
    env.report(
        &scheduler,
        &job,
        &owner.token,
        &provider,
        0,
        FailureCause::NodeLost,
    )
    .unwrap();
    let before = env.snapshot();
    for signer in [
        env.admin.insecure_clone(),
        scheduler,
        owner.kp.insecure_clone(),
        Keypair::new(),
    ] {
        env.svm.airdrop(&signer.pubkey(), 1_000_000_000).unwrap();
        let take = anchor_spl::token::spl_token::instruction::transfer(
            &anchor_spl::token::spl_token::ID,
            &pda::insurance_pool(),
            &owner.token,
            &signer.pubkey(),
            &[],
            USDC,
        )
        .unwrap();
        expect_failure(env.send(&[take], &[&signer]));
    }
    env.assert_unchanged(&before);
    assert_eq!(env.pool(), 5 * USDC);
}
