//! The scheduler lease: several schedulers may run, the program takes
//! decisions from the one that holds the lease, and a scheduler that lost
//! it is fenced like a stale generation.

use mcjs::errors::McjsError;
use mcjs::events::*;
use mcjs::instructions::*;
use mcjs::state::*;
use mcjs_client::{Pubkey, ix};
use solana_keypair::Keypair;
use solana_signer::Signer;

use crate::harness::*;

/// An environment with one standby named, its key funded.
fn with_standby() -> (Env, Keypair) {
    let mut env = Env::new();
    let standby = Keypair::new();
    env.svm.airdrop(&standby.pubkey(), 10_000_000_000).unwrap();
    let admin = env.admin.insecure_clone();
    let set = ix::set_schedulers(
        &admin.pubkey(),
        SetSchedulersArgs {
            standbys: vec![standby.pubkey()],
            lease_slots: 25,
        },
    );
    let logs = env.send(&[set], &[&admin]).expect("set schedulers");
    let set: Vec<SchedulersSet> = events(&logs);
    assert_eq!(set.len(), 1);
    assert_eq!(set[0].standbys, vec![standby.pubkey()]);
    (env, standby)
}

fn hold(env: &mut Env, who: &Keypair) -> Outcome {
    env.send(&[ix::hold_lease(&who.pubkey())], &[who])
}

#[test]
fn the_configs_scheduler_holds_the_lease_from_initialisation() {
    let env = Env::new();
    let lease = env.lease();
    assert_eq!(lease.holder, env.scheduler.pubkey());
    assert_eq!(lease.term, 1);
    assert_eq!(lease.lease_slots, DEFAULT_LEASE_SLOTS);
    assert!(lease.expires_slot > env.slot());
    assert!(lease.standbys.iter().all(|k| *k == Pubkey::default()));
}

#[test]
fn a_standby_cannot_take_a_running_lease_and_a_stranger_never_can() {
    let (mut env, standby) = with_standby();
    let stranger = Keypair::new();
    env.svm.airdrop(&stranger.pubkey(), 1_000_000_000).unwrap();
    let before = env.snapshot();
    expect_error(hold(&mut env, &standby), McjsError::LeaseHeld);
    expect_error(hold(&mut env, &stranger), McjsError::NotScheduler);
    env.assert_unchanged(&before);
    // Expired, the lease still cannot go to a stranger.
    env.advance_slots(30);
    expect_error(hold(&mut env, &stranger), McjsError::NotScheduler);
    assert_eq!(env.lease().holder, env.scheduler.pubkey());
}

#[test]
fn the_holder_renews_and_a_renewed_lease_stays_with_it() {
    let (mut env, standby) = with_standby();
    let scheduler = env.scheduler.insecure_clone();
    for _ in 0..3 {
        env.advance_slots(20);
        let logs = hold(&mut env, &scheduler).expect("renew");
        assert!(
            events::<LeaseTaken>(&logs).is_empty(),
            "a renewal is no new term"
        );
        assert_eq!(env.lease().expires_slot, env.slot() + 25);
        expect_error(hold(&mut env, &standby), McjsError::LeaseHeld);
    }
    assert_eq!(env.lease().term, 1);
}

#[test]
fn a_deposed_scheduler_cannot_assign_report_or_open_a_verification() {
    let (mut env, standby) = with_standby();
    let owner = env.wallet(1_000 * USDC);
    let provider = env.provider_with_nodes(200 * USDC, &[a100_80gb(), a100_80gb()], 2 * USDC);
    let running = env.running_job(&owner, &provider, 1);
    let queued = env.submit(&owner, job_args(2, 100 * USDC)).expect("submit");

    env.advance_slots(26);
    let logs = hold(&mut env, &standby).expect("take the expired lease");
    let taken: Vec<LeaseTaken> = events(&logs);
    assert_eq!(taken.len(), 1);
    assert_eq!(
        (
            taken[0].holder,
            taken[0].previous,
            taken[0].ended_term,
            taken[0].term
        ),
        (standby.pubkey(), env.scheduler.pubkey(), 1, 2)
    );
    let lease = env.lease();
    assert_eq!((lease.holder, lease.term), (standby.pubkey(), 2));

    // The old leader: its assignment and its reports are refused while the
    // new leader's lease lives (it alone reports), and nothing changes.
    let before = env.snapshot();
    expect_error(env.assign(&queued, &provider, 1), McjsError::NotLeaseHolder);
    let old = env.scheduler.insecure_clone();
    for cause in [FailureCause::NodeLost, FailureCause::JobError] {
        expect_error(
            env.report_live(&old, &running, &owner.token, &provider, 0, cause),
            McjsError::SchedulerLive,
        );
    }
    expect_error(hold(&mut env, &old), McjsError::LeaseHeld);
    env.assert_unchanged(&before);

    // The new leader acts.
    let state = env.job(&queued);
    let new_segment =
        ix::assignment_holds_payment(&state, &env.config().params).then_some(state.generation);
    let assign = ix::assign_job(
        &standby.pubkey(),
        &queued,
        &provider.nodes[1],
        &provider.pda,
        new_segment,
    );
    env.send(&[assign], &[&standby])
        .expect("the holder assigns");
    assert_eq!(env.job(&queued).node, Some(provider.nodes[1]));
    env.report(
        &standby,
        &running,
        &owner.token,
        &provider,
        0,
        FailureCause::NodeLost,
    )
    .expect("the holder reports");
    env.assert_invariants();

    // Once the new leader's lease runs out, the old one may take it back.
    env.advance_slots(26);
    let logs = hold(&mut env, &old).expect("take it back");
    assert_eq!(events::<LeaseTaken>(&logs)[0].term, 3);
}

#[test]
fn a_holder_removed_from_the_members_is_replaced_at_once() {
    let (mut env, standby) = with_standby();
    env.advance_slots(26);
    hold(&mut env, &standby).expect("take");
    let other = Keypair::new();
    env.svm.airdrop(&other.pubkey(), 1_000_000_000).unwrap();
    let admin = env.admin.insecure_clone();
    let set = ix::set_schedulers(
        &admin.pubkey(),
        SetSchedulersArgs {
            standbys: vec![other.pubkey()],
            lease_slots: 50,
        },
    );
    env.send(&[set], &[&admin]).expect("replace the standby");
    // The lease is fresh, but its holder is no longer a member: it acts no
    // more, and the Config's scheduler takes over without waiting.
    let owner = env.wallet(1_000 * USDC);
    let provider = env.provider_with_nodes(200 * USDC, &[a100_80gb()], 2 * USDC);
    let job = env.submit(&owner, job_args(1, 100 * USDC)).expect("submit");
    let assign = ix::assign_job(
        &standby.pubkey(),
        &job,
        &provider.nodes[0],
        &provider.pda,
        None,
    );
    expect_error(env.send(&[assign], &[&standby]), McjsError::NotScheduler);
    let scheduler = env.scheduler.insecure_clone();
    hold(&mut env, &scheduler).expect("the Config's scheduler takes over");
    assert_eq!(env.lease().expires_slot, env.slot() + 50);
    env.assign(&job, &provider, 0).expect("assign");
}

#[test]
fn only_the_admin_names_standbys_and_bad_lists_are_refused() {
    let (mut env, standby) = with_standby();
    let scheduler = env.scheduler.pubkey();
    let admin = env.admin.insecure_clone();
    let before = env.snapshot();
    let args = |standbys: Vec<Pubkey>, lease_slots| SetSchedulersArgs {
        standbys,
        lease_slots,
    };
    expect_error(
        env.send(
            &[ix::set_schedulers(
                &standby.pubkey(),
                args(vec![standby.pubkey()], 1_000),
            )],
            &[&standby],
        ),
        McjsError::NotAdmin,
    );
    let five: Vec<Pubkey> = (0..5).map(|_| Keypair::new().pubkey()).collect();
    let k = Keypair::new().pubkey();
    for bad in [
        args(five, 25),
        args(vec![k, k], 25),
        args(vec![Pubkey::default()], 25),
        args(vec![scheduler], 25),
        args(vec![k], 0),
    ] {
        expect_error(
            env.send(&[ix::set_schedulers(&admin.pubkey(), bad)], &[&admin]),
            McjsError::InvalidLease,
        );
    }
    env.assert_unchanged(&before);
}
