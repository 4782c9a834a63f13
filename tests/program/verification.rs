//! Verified progress: held segment payments, the sampling draw, two-of-three
//! verification, and what each outcome moves.

use mcjs::errors::McjsError;
use mcjs::events::*;
use mcjs::state::*;
use mcjs_client::{Pubkey, decode, ix, pda};
use solana_signer::Signer;

use crate::harness::*;

/// A job with every interval drawn, on provider A; B and C check it.
struct World {
    env: Env,
    owner: Wallet,
    a: ProviderActor,
    b: ProviderActor,
    c: ProviderActor,
    job: Pubkey,
}

const INTERVAL: i64 = 900;

/// What `secs` bill at the job's rate (4 GPUs at 2 USDC), as one accrual.
fn cost(secs: i64) -> u64 {
    8 * USDC * secs as u64 / 3_600
}

/// A checker's fee on an interval paid `amount`: 20% of the 5% commission.
fn fee_of(amount: u64) -> u64 {
    amount * 500 / 10_000 * 2_000 / 10_000
}

fn verified_args(job_id: u64, ppm: u32) -> mcjs::instructions::SubmitJobArgs {
    let mut args = job_args(job_id, 100 * USDC);
    args.verification_ppm = ppm;
    args
}

fn world(ppm: u32) -> World {
    let mut env = Env::new();
    let owner = env.wallet(1_000 * USDC);
    let a = env.provider_with_nodes(200 * USDC, &[a100_80gb(), a100_80gb()], 2 * USDC);
    let b = env.provider_with_nodes(200 * USDC, &[a100_80gb()], 2 * USDC);
    let c = env.provider_with_nodes(200 * USDC, &[a100_80gb()], 2 * USDC);
    let job = env.submit(&owner, verified_args(1, ppm)).unwrap();
    env.assign(&job, &a, 0).unwrap();
    env.start(&job, &a, 0).unwrap();
    World {
        env,
        owner,
        a,
        b,
        c,
        job,
    }
}

fn checkers(w: &World) -> ix::Checkers {
    ix::Checkers {
        verifier_node: w.b.nodes[0],
        verifier_provider: w.b.pda,
        referee_node: w.c.nodes[0],
        referee_provider: w.c.pda,
    }
}

impl World {
    /// Attests the checkpoint at `step` one interval after the last
    /// progress, then lets two slots pass (the draw's slot, and the one
    /// that records its hash).
    fn attest(&mut self, step: u64) {
        self.env.warp(INTERVAL - 2);
        let generation = self.env.job(&self.job).generation;
        self.env
            .attest(&self.job, &self.a, 0, generation, 0, step)
            .unwrap();
        self.env.warp(1);
        self.env.warp(1);
    }

    /// Attests a made-up hash for the checkpoint at `step`, one interval
    /// after the last progress, then lets two slots pass.
    fn lie(&mut self, step: u64) {
        self.env.warp(INTERVAL - 2);
        let operator = self.a.operator(0).insecure_clone();
        let lie = ix::attest_checkpoint(
            &operator.pubkey(),
            &self.job,
            &self.a.nodes[0],
            &self.a.pda,
            &self.a.payout,
            &self.env.deployment(),
            mcjs::instructions::AttestCheckpointArgs {
                generation: self.env.job(&self.job).generation,
                epoch: 0,
                step,
                checkpoint_hash: [0x5a; 32],
            },
        );
        let lie = ix::with_segment(lie, self.env.segment_of(&self.job));
        self.env.send(&[lie], &[&operator]).unwrap();
        self.env.warp(1);
        self.env.warp(1);
    }

    fn open_with(&mut self, checkers: &ix::Checkers) -> Outcome {
        let state = self.env.job(&self.job);
        let generation = state.last_checkpoint.unwrap().generation;
        let ix = ix::open_verification(
            &self.env.scheduler.pubkey(),
            &self.job,
            generation,
            state.checkpoint_count,
            checkers,
        );
        let scheduler = self.env.scheduler.insecure_clone();
        self.env.send(&[ix], &[&scheduler])
    }

    fn open(&mut self) -> Pubkey {
        let c = checkers(self);
        self.open_with(&c).expect("open verification");
        pda::verification(&self.job, self.env.job(&self.job).checkpoint_count)
    }

    fn verification(&self, key: &Pubkey) -> Verification {
        decode::verification(&self.env.account(key).unwrap().data).unwrap()
    }

    fn segment(&self, generation: u32) -> Option<Segment> {
        self.env
            .account(&pda::segment(&self.job, generation))
            .map(|a| decode::segment(&a.data).unwrap())
    }

    fn check(&mut self, who: &ProviderActor, verification: &Pubkey, hash: [u8; 32]) -> Outcome {
        let operator = who.operator(0);
        let ix = ix::attest_verification(&operator.pubkey(), &who.nodes[0], verification, hash);
        self.env.send(&[ix], &[operator])
    }

    fn resolve(
        &mut self,
        verification: &Pubkey,
        loser: Option<Pubkey>,
        current: Option<ix::CurrentAssignment>,
    ) -> Outcome {
        let v = self.verification(verification);
        let ix = ix::resolve_verification(
            &self.owner.key(),
            &self.job,
            &v,
            &self.owner.token,
            &self.env.deployment(),
            loser,
            current,
        );
        let kp = self.owner.kp.insecure_clone();
        self.env.send(&[ix], &[&kp])
    }

    fn release(&mut self, generation: u32) -> Outcome {
        let segment = self.segment(generation).expect("segment");
        let ix = ix::release_segment(
            &self.owner.key(),
            &self.job,
            &segment,
            &self.env.deployment(),
        );
        let kp = self.owner.kp.insecure_clone();
        self.env.send(&[ix], &[&kp])
    }

    fn complete(&mut self) -> Outcome {
        let generation = self.env.job(&self.job).generation;
        let token = self.owner.token;
        self.env.complete(&self.job, &token, &self.a, 0, generation)
    }
}

#[test]
fn a_verified_jobs_payment_is_held_until_its_window_passes() {
    let mut w = world(PPM);
    w.env.warp(2); // the first interval is then a whole one
    w.attest(100);
    w.attest(200);
    w.env.warp(INTERVAL - 2);
    w.complete().unwrap();
    let job = w.env.job(&w.job);
    // Three intervals billed at 8 USDC/h, held in the vault for the segment.
    let gross = 3 * cost(INTERVAL);
    assert_eq!(job.held, gross);
    assert_eq!(
        w.env.balance(&w.a.payout),
        0,
        "nothing paid before the window"
    );
    let segment = w.segment(1).unwrap();
    assert_eq!(segment.gross, gross);
    let release_at = w.env.now() + default_params().challenge_window_secs as i64;
    assert_eq!(segment.state, SegmentState::Held { release_at });
    w.env.assert_invariants();

    // Not before the window, and the owner cannot sweep it by closing.
    let before = w.env.snapshot();
    expect_error(w.release(1), McjsError::SegmentNotReleasable);
    let kp = w.owner.kp.insecure_clone();
    expect_error(
        w.env.close(&kp, &w.job, &w.owner.token),
        McjsError::SegmentNotReleasable,
    );
    w.env.assert_unchanged(&before);

    w.env.set_time(release_at);
    let treasury = w.env.balance(&w.env.treasury);
    let scheduler_lamports = w.env.svm.get_balance(&w.env.scheduler.pubkey()).unwrap();
    let logs = w.release(1).unwrap();
    let released = events::<SegmentReleased>(&logs);
    assert_eq!(released.len(), 1);
    let commission = gross * 500 / 10_000;
    assert_eq!(released[0].commission, commission);
    assert_eq!(w.env.balance(&w.a.payout), gross - commission);
    assert_eq!(w.env.balance(&w.env.treasury), treasury + commission);
    assert!(w.segment(1).is_none(), "the segment closed");
    assert!(
        w.env.svm.get_balance(&w.env.scheduler.pubkey()).unwrap() > scheduler_lamports,
        "the segment's rent went back to the scheduler that paid it"
    );
    assert_eq!(w.env.job(&w.job).held, 0);
    w.env.close(&kp, &w.job, &w.owner.token).unwrap();
    w.env.assert_invariants();
}

#[test]
fn a_job_without_verification_is_paid_at_once_and_cannot_be_verified() {
    let mut w = world(0);
    w.attest(100);
    assert!(w.segment(1).is_none(), "no segment for an unverified job");
    let before = w.env.snapshot();
    let c = checkers(&w);
    let failure = expect_failure(w.open_with(&c));
    // The segment account does not exist, so Anchor refuses it first.
    assert!(failure.custom_code().is_some());
    w.env.assert_unchanged(&before);
    w.env.warp(INTERVAL);
    w.complete().unwrap();
    assert!(w.env.balance(&w.a.payout) > 0, "paid at completion");
    w.env.assert_invariants();
}

#[test]
fn the_draw_needs_the_next_slot_and_picks_by_rate() {
    // Drawn at the attestation's own slot: the slot hash does not exist yet.
    let mut w = world(PPM);
    w.env.warp(INTERVAL);
    w.env.attest(&w.job, &w.a, 0, 1, 0, 100).unwrap();
    let c = checkers(&w);
    // In the attestation's slot, and in the next (whose hash is not
    // recorded until it ends), the draw cannot be made.
    for _ in 0..2 {
        let before = w.env.snapshot();
        expect_error(w.open_with(&c), McjsError::DrawUnavailable);
        w.env.assert_unchanged(&before);
        w.env.warp(1);
    }
    let v = w.open();
    let attest_slot = w.env.slot() - 2;
    assert_eq!(w.verification(&v).draw_slot, attest_slot + 1);

    // One in a million: this interval is not drawn (the harness's slot
    // hashes are fixed, so this is deterministic).
    let mut rare = world(1);
    rare.attest(100);
    let before = rare.env.snapshot();
    let c = checkers(&rare);
    expect_error(rare.open_with(&c), McjsError::NotSampled);
    rare.env.assert_unchanged(&before);
}

#[test]
fn checkers_must_be_two_other_providers_with_fitting_nodes() {
    let mut w = world(PPM);
    w.attest(100);
    let before = w.env.snapshot();
    let good = checkers(&w);
    let own = ix::Checkers {
        verifier_node: w.a.nodes[1],
        verifier_provider: w.a.pda,
        ..good
    };
    let same = ix::Checkers {
        referee_node: w.b.nodes[0],
        referee_provider: w.b.pda,
        ..good
    };
    expect_error(w.open_with(&own), McjsError::InvalidChecker);
    expect_error(w.open_with(&same), McjsError::InvalidChecker);
    w.env.assert_unchanged(&before);
    let weak = w.env.provider_with_nodes(200 * USDC, &[k80()], USDC);
    let before = w.env.snapshot();
    let small = ix::Checkers {
        verifier_node: weak.nodes[0],
        verifier_provider: weak.pda,
        ..good
    };
    expect_error(w.open_with(&small), McjsError::InvalidChecker);
    // Only the scheduler opens verifications.
    let state = w.env.job(&w.job);
    let stranger = w.env.wallet(0);
    let ix = ix::open_verification(&stranger.key(), &w.job, 1, state.checkpoint_count, &good);
    assert!(w.env.send(&[ix], &[&stranger.kp]).is_err());
    w.env.assert_unchanged(&before);

    // One verification per interval.
    w.open();
    let before = w.env.snapshot();
    assert!(w.open_with(&good).is_err(), "the interval's PDA exists");
    w.env.assert_unchanged(&before);
}

#[test]
fn a_confirmed_interval_pays_its_verifier_from_the_commission() {
    let mut w = world(PPM);
    w.env.warp(2);
    w.attest(100);
    let v = w.open();
    let opened = w.verification(&v);
    assert_eq!(opened.from, None, "the first interval starts from scratch");
    assert_eq!(opened.to.step, 100);
    // While it is open the job cannot complete.
    w.attest(200);
    let v2 = w.open();
    w.env.warp(INTERVAL - 2);
    let before = w.env.snapshot();
    expect_error(w.complete(), McjsError::VerificationOpen);
    w.env.assert_unchanged(&before);

    // Only the named verifier, then only the referee after a dispute.
    let a = w.a.fork();
    expect_error(
        w.check(&a, &v, checkpoint_hash(0, 100)),
        McjsError::NotVerifierTurn,
    );
    let c = w.c.fork();
    expect_error(
        w.check(&c, &v, checkpoint_hash(0, 100)),
        McjsError::NotVerifierTurn,
    );
    let b = w.b.fork();
    w.check(&b, &v, checkpoint_hash(0, 100)).unwrap();
    w.check(&b, &v2, checkpoint_hash(0, 200)).unwrap();
    assert_eq!(
        w.verification(&v).state,
        VerificationState::Decided {
            outcome: VerificationOutcome::Confirmed
        }
    );
    expect_error(
        w.check(&b, &v, checkpoint_hash(0, 100)),
        McjsError::NotVerifierTurn,
    );
    let logs = w.resolve(&v, None, None).unwrap();
    w.resolve(&v2, None, None).unwrap();
    let resolved = events::<VerificationResolved>(&logs);
    // 900 s at 8 USDC/h = 2 USDC; 5% commission = 0.1; 20% of it = 0.02.
    assert_eq!(resolved[0].fees, 20_000);
    assert_eq!(fee_of(cost(INTERVAL)), 20_000);
    assert_eq!(w.env.balance(&w.b.payout), 40_000, "two fees");
    let resolved_twice = w.resolve(&v, None, None);
    expect_error(resolved_twice, McjsError::VerificationUndecided);

    w.complete().unwrap();
    let release_at = w.env.now() + default_params().challenge_window_secs as i64;
    w.env.set_time(release_at);
    let treasury = w.env.balance(&w.env.treasury);
    w.release(1).unwrap();
    let gross = 3 * cost(INTERVAL);
    let commission = gross * 500 / 10_000;
    assert_eq!(
        w.env.balance(&w.a.payout),
        gross - commission,
        "the provider's share is untouched by the fees"
    );
    assert_eq!(
        w.env.balance(&w.env.treasury) - treasury,
        commission - 40_000,
        "the fees came out of the commission"
    );
    assert_eq!(w.env.provider(&w.a.pda).slashed_total, 0);
    w.env.assert_invariants();
}

#[test]
fn a_provider_proven_wrong_is_slashed_the_owner_refunded_and_the_job_rolled_back() {
    let mut w = world(PPM);
    w.env.warp(2);
    w.attest(100);
    let v1 = w.open();
    let b = w.b.fork();
    w.check(&b, &v1, checkpoint_hash(0, 100)).unwrap();
    w.resolve(&v1, None, None).unwrap();
    // The second interval's hash is made up.
    w.lie(200);
    let v2 = w.open();
    let c = w.c.fork();
    w.check(&b, &v2, checkpoint_hash(0, 200)).unwrap();
    assert_eq!(w.verification(&v2).state, VerificationState::Disputed);
    w.check(&c, &v2, checkpoint_hash(0, 200)).unwrap();
    assert_eq!(
        w.verification(&v2).state,
        VerificationState::Decided {
            outcome: VerificationOutcome::ProviderWrong
        }
    );

    let current = ix::CurrentAssignment {
        node: w.a.nodes[0],
        provider: None,
        provider_payout: w.a.payout,
        segment: None,
    };
    // The wrong loser, no assignment accounts, or the loser's account passed
    // twice (its second copy would undo the slash) is refused.
    let before = w.env.snapshot();
    let twice = ix::CurrentAssignment {
        provider: Some(w.a.pda),
        ..current
    };
    expect_anchor_error(
        w.resolve(&v2, Some(w.a.pda), Some(twice)),
        anchor_lang::error::ErrorCode::ConstraintDuplicateMutableAccount,
    );
    let same_segment = ix::CurrentAssignment {
        segment: Some(pda::segment(&w.job, 1)),
        ..current
    };
    expect_anchor_error(
        w.resolve(&v2, Some(w.a.pda), Some(same_segment)),
        anchor_lang::error::ErrorCode::ConstraintDuplicateMutableAccount,
    );
    expect_error(
        w.resolve(&v2, Some(w.b.pda), Some(current)),
        McjsError::WrongProvider,
    );
    expect_error(
        w.resolve(&v2, Some(w.a.pda), None),
        McjsError::WrongAssignment,
    );
    w.env.assert_unchanged(&before);

    let owner_before = w.env.balance(&w.owner.token);
    let stake_before = w.env.provider(&w.a.pda).stake;
    let pool_before = w.env.pool();
    let (b_before, c_before) = (w.env.balance(&w.b.payout), w.env.balance(&w.c.payout));
    let logs = w.resolve(&v2, Some(w.a.pda), Some(current)).unwrap();
    let resolved = events::<VerificationResolved>(&logs);
    let slash = default_params().slash_amount;
    assert_eq!(resolved[0].slashed, slash);
    assert!(resolved[0].rolled_back);
    assert_eq!(resolved[0].restore_point.map(|c| c.step), Some(100));
    // Two intervals billed at 8 USDC/h, less the first one's fee.
    let gross = 2 * cost(INTERVAL) - fee_of(cost(INTERVAL));
    assert_eq!(resolved[0].refund, gross);
    assert_eq!(w.env.balance(&w.owner.token) - owner_before, gross);
    assert_eq!(w.env.provider(&w.a.pda).stake, stake_before - slash);
    let fee = fee_of(cost(INTERVAL));
    assert_eq!(w.env.balance(&w.b.payout) - b_before, fee);
    assert_eq!(w.env.balance(&w.c.payout) - c_before, fee);
    assert_eq!(w.env.pool() - pool_before, slash - 2 * fee);

    let job = w.env.job(&w.job);
    assert!(matches!(job.state, JobState::Recovering { .. }));
    assert_eq!(
        job.last_checkpoint.unwrap().step,
        100,
        "back to the checked checkpoint"
    );
    assert_eq!(
        job.restarts_used, 0,
        "the job's restart budget is untouched"
    );
    assert_eq!(job.held, 0);
    assert_eq!(w.env.node(&w.a.nodes[0]).status, NodeStatus::Offline);
    assert_eq!(w.segment(1).unwrap().state, SegmentState::Refunded);
    assert_eq!(w.env.provider(&w.a.pda).active_assignments, 0);

    // The refunded segment only closes; the job goes on elsewhere from 100,
    // never on the liar's nodes again.
    w.release(1).unwrap();
    assert_eq!(w.env.balance(&w.a.payout), 0, "the liar is paid nothing");
    assert_eq!(w.env.job(&w.job).barred_provider, Some(w.a.pda));
    let a = w.a.fork();
    let before = w.env.snapshot();
    expect_error(w.env.assign(&w.job, &a, 1), McjsError::ProviderBarred);
    w.env.assert_unchanged(&before);
    let b2 = w.b.fork();
    w.env.assign(&w.job, &b2, 0).unwrap();
    w.env.start(&w.job, &b2, 0).unwrap();
    w.env.warp(INTERVAL);
    w.env.attest(&w.job, &b2, 0, 3, 0, 200).unwrap();
    w.env.assert_invariants();
}

#[test]
fn a_verifier_proven_wrong_is_slashed_and_the_job_goes_on() {
    let mut w = world(PPM);
    w.attest(100);
    let v = w.open();
    let (b, c) = (w.b.fork(), w.c.fork());
    w.check(&b, &v, [7; 32]).unwrap();
    w.check(&c, &v, checkpoint_hash(0, 100)).unwrap();
    let before = w.env.snapshot();
    expect_error(w.resolve(&v, Some(w.a.pda), None), McjsError::WrongProvider);
    w.env.assert_unchanged(&before);
    let c_before = w.env.balance(&w.c.payout);
    w.resolve(&v, Some(w.b.pda), None).unwrap();
    let slash = default_params().slash_amount;
    assert_eq!(w.env.provider(&w.b.pda).slashed_total, slash);
    let interval_amount = w.verification(&v).interval_amount;
    assert_eq!(
        w.env.balance(&w.c.payout) - c_before,
        fee_of(interval_amount)
    );
    assert_eq!(w.env.provider(&w.a.pda).slashed_total, 0);
    assert!(matches!(w.env.job(&w.job).state, JobState::Running { .. }));
    w.env.warp(INTERVAL);
    w.complete().unwrap();
    w.env.assert_invariants();
}

#[test]
fn a_silent_or_split_verification_slashes_nobody() {
    let mut w = world(PPM);
    w.attest(100);
    let v = w.open();
    let before = w.env.snapshot();
    expect_error(w.resolve(&v, None, None), McjsError::VerificationUndecided);
    w.env.assert_unchanged(&before);
    w.env
        .warp(default_params().challenge_window_secs as i64 + 1);
    let logs = w.resolve(&v, None, None).unwrap();
    assert_eq!(
        events::<VerificationResolved>(&logs)[0].outcome,
        VerificationOutcome::Inconclusive
    );

    // Three different hashes.
    let mut w = world(PPM);
    w.attest(100);
    let v = w.open();
    let (b, c) = (w.b.fork(), w.c.fork());
    w.check(&b, &v, [1; 32]).unwrap();
    w.check(&c, &v, [2; 32]).unwrap();
    w.resolve(&v, None, None).unwrap();
    for p in [&w.a, &w.b, &w.c] {
        assert_eq!(w.env.provider(&p.pda).slashed_total, 0);
    }
    w.env.warp(INTERVAL);
    w.complete().unwrap();
    w.env.assert_invariants();
}

#[test]
fn a_verified_jobs_attestations_and_completion_keep_the_draw_gap() {
    let mut w = world(PPM);
    w.attest(100);
    // Two slots (2 s) passed since the attestation: one second short.
    let gap = i64::from(default_params().draw_secs);
    w.env.warp(gap - 3);
    let before = w.env.snapshot();
    expect_error(
        w.env.attest(&w.job, &w.a, 0, 1, 0, 200),
        McjsError::AttestationTooSoon,
    );
    expect_error(w.complete(), McjsError::AttestationTooSoon);
    w.env.assert_unchanged(&before);
    w.env.warp(1);
    w.env.attest(&w.job, &w.a, 0, 1, 0, 200).unwrap();
}

#[test]
fn a_held_segment_needs_its_segment_account_to_leave_the_node() {
    let mut w = world(PPM);
    w.attest(100);
    w.env.warp(INTERVAL);
    let operator = w.a.operator(0).insecure_clone();
    let bare = bare_complete(&w, &operator);
    let before = w.env.snapshot();
    expect_error(
        w.env.send(&[bare], &[&operator]),
        McjsError::SegmentRequired,
    );
    w.env.assert_unchanged(&before);
    // Another job's segment is not this one's.
    let owner = w.owner.fork();
    let other = w.env.submit(&owner, verified_args(2, PPM)).unwrap();
    let a = w.a.fork();
    w.env.assign(&other, &a, 1).unwrap();
    let before = w.env.snapshot();
    let wrong = ix::with_segment(bare_complete(&w, &operator), Some(pda::segment(&other, 1)));
    expect_error(w.env.send(&[wrong], &[&operator]), McjsError::WrongSegment);
    w.env.assert_unchanged(&before);
}

fn bare_complete(w: &World, operator: &solana_keypair::Keypair) -> mcjs_client::Instruction {
    ix::complete_job(
        &operator.pubkey(),
        &w.job,
        &w.a.nodes[0],
        &w.a.pda,
        &w.a.payout,
        &w.owner.token,
        &w.env.deployment(),
        mcjs::instructions::CompleteJobArgs {
            generation: 1,
            output_hash: [1; 32],
        },
    )
}

#[test]
fn a_liars_unchecked_checkpoints_are_not_trusted_after_it_is_proven_wrong() {
    // Interval 1 (to step 100) is attested but never checked; interval 2 is
    // proven wrong: step 100 came from the same liar, so the job goes back
    // to where the liar's segment began (the job's start), not to 100.
    let mut w = world(PPM);
    w.attest(100);
    w.lie(200);
    let v = w.open();
    let (b, c) = (w.b.fork(), w.c.fork());
    w.check(&b, &v, checkpoint_hash(0, 200)).unwrap();
    w.check(&c, &v, checkpoint_hash(0, 200)).unwrap();
    let current = ix::CurrentAssignment {
        node: w.a.nodes[0],
        provider: None,
        provider_payout: w.a.payout,
        segment: None,
    };
    let logs = w.resolve(&v, Some(w.a.pda), Some(current)).unwrap();
    let resolved = events::<VerificationResolved>(&logs);
    assert!(resolved[0].rolled_back);
    assert_eq!(
        resolved[0].restore_point, None,
        "the segment began at the job's start"
    );
    let job = w.env.job(&w.job);
    assert_eq!(job.last_checkpoint, None);
    assert!(matches!(job.state, JobState::Recovering { .. }));
    w.env.assert_invariants();
}
