//! Verified progress: held segment payments, the sampling draw, sealed and
//! revealed answers that must be earned, and what each outcome moves.

use mcjs::errors::McjsError;
use mcjs::events::*;
use mcjs::instructions::CheckerStep;
use mcjs::state::*;
use mcjs_client::{Instruction, Pubkey, decode, ix, pda};
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
    // Their agents enter their nodes in the checker pool: with A the
    // attester, the draw names B and C.
    for p in [&a, &b, &c] {
        env.enter_pool(p, 0).expect("enter the checker pool");
    }
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

/// Each actor's commitment salt.
fn salt(who: &ProviderActor) -> [u8; 32] {
    who.nodes[0].to_bytes()
}

/// The harness's stand-in for a checkpoint's bytes at `step` (the real
/// digest is over files: orchestrator/runtime `hash_possessed_checkpoint_in`).
fn bytes_at(step: u64) -> Vec<u8> {
    [b"checkpoint bytes at step ".as_slice(), &step.to_le_bytes()].concat()
}

/// A possession digest of `bytes` under the verification's key.
fn possession(v: &Verification, bytes: &[u8]) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest([v.possession_key.as_slice(), bytes].concat()).into()
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
        let generation = self.env.job(&self.job).generation;
        let lie = self
            .env
            .job_accounts(&self.job, &self.a, 0, &self.job, generation)
            .attest(
                &operator.pubkey(),
                self.env.attest_needs_settlement(&self.job),
                0,
                step,
                [0x5a; 32],
            );
        self.env.send(&[lie], &[&operator]).unwrap();
        self.env.warp(1);
        self.env.warp(1);
    }

    /// How the pool's draw reaches the named checkers of the latest
    /// interval (nobody passed over where the draw cannot be made).
    fn first_round_proof(&self) -> ix::DrawProof {
        self.env
            .first_round_draw(&self.job)
            .map(|(_, proof)| proof)
            .unwrap_or_else(|| ix::DrawProof::of(&a100_80gb().gpu_model))
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
            &self.first_round_proof(),
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

    /// `who`'s node 0 seals `answer` to `verification`.
    fn seal(&mut self, who: &ProviderActor, verification: &Pubkey, answer: CheckAnswer) -> Outcome {
        let operator = who.operator(0).insecure_clone();
        let commitment = check_commitment(verification, &who.nodes[0], &answer, &salt(who));
        let ix = ix::attest_verification(
            &operator.pubkey(),
            &who.nodes[0],
            verification,
            CheckerStep::Seal { commitment },
        );
        self.env.send(&[ix], &[&operator])
    }

    /// `who`'s node 0 reveals `answer` to `verification`.
    fn reveal(
        &mut self,
        who: &ProviderActor,
        verification: &Pubkey,
        answer: CheckAnswer,
    ) -> Outcome {
        let operator = who.operator(0).insecure_clone();
        let ix = ix::attest_verification(
            &operator.pubkey(),
            &who.nodes[0],
            verification,
            CheckerStep::Reveal {
                answer,
                salt: salt(who),
            },
        );
        self.env.send(&[ix], &[&operator])
    }

    /// The verifier (B) and the referee (C) seal what they are given (none:
    /// silent), then, if both sealed, reveal it.
    fn answer(
        &mut self,
        verification: &Pubkey,
        verifier: Option<CheckAnswer>,
        referee: Option<CheckAnswer>,
    ) {
        let (b, c) = (self.b.fork(), self.c.fork());
        let parties = [(&b, verifier), (&c, referee)];
        for (who, answer) in &parties {
            if let Some(answer) = answer {
                self.seal(who, verification, *answer).expect("seal");
            }
        }
        if verifier.is_none() || referee.is_none() {
            return;
        }
        for (who, answer) in &parties {
            if let Some(answer) = answer {
                self.reveal(who, verification, *answer).expect("reveal");
            }
        }
    }

    /// What an honest node holds (or reproduces) at `step` of the job.
    fn honest(&self, verification: &Pubkey, step: u64) -> CheckAnswer {
        CheckAnswer::Reproduced {
            hash: checkpoint_hash(0, step),
            possession: possession(&self.verification(verification), &bytes_at(step)),
        }
    }

    /// A checker that runs nothing: the claimed hash, copied from the
    /// chain, and a "possession digest" made from everything it can read
    /// there (the key, the claimed hash, the draw's slot hash).
    fn copied(&self, verification: &Pubkey) -> CheckAnswer {
        use sha2::Digest;
        let v = self.verification(verification);
        let guess: [u8; 32] = sha2::Sha256::digest(
            [
                v.possession_key.as_slice(),
                &v.to.hash,
                &slot_hash(v.draw_slot),
            ]
            .concat(),
        )
        .into();
        CheckAnswer::Reproduced {
            hash: v.to.hash,
            possession: guess,
        }
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

    /// The scheduler's `replace_checker`: `by`'s node 0 as `role` of
    /// `verification`, in place of a checker that has not sealed.
    fn replacement(&self, verification: &Pubkey, role: Party, by: &ProviderActor) -> Instruction {
        let v = self.verification(verification);
        let proof = self
            .env
            .replacement_draw(verification)
            .map(|(_, proof)| proof)
            .unwrap_or_else(|| ix::DrawProof::of(&a100_80gb().gpu_model));
        ix::replace_checker(
            &self.env.scheduler.pubkey(),
            verification,
            &self.job,
            &v.segment,
            role,
            &by.nodes[0],
            &by.pda,
            &proof,
        )
    }

    /// The scheduler's `open_second_round`: `verifier`'s and `referee`'s
    /// node 0 check `verification` again.
    fn second_round(
        &self,
        verification: &Pubkey,
        verifier: &ProviderActor,
        referee: &ProviderActor,
    ) -> Instruction {
        let v = self.verification(verification);
        let proof = self
            .env
            .second_round_draw(verification)
            .map(|(_, proof)| proof)
            .unwrap_or_else(|| ix::DrawProof::of(&a100_80gb().gpu_model));
        ix::open_second_round(
            &self.env.scheduler.pubkey(),
            verification,
            &self.job,
            &v.segment,
            &ix::Checkers {
                verifier_node: verifier.nodes[0],
                verifier_provider: verifier.pda,
                referee_node: referee.nodes[0],
                referee_provider: referee.pda,
            },
            &proof,
        )
    }

    /// Each of `answers` seals, then each reveals (in order), where its
    /// answer is given; `reveal: false` stops after the seals.
    fn answer_as(
        &mut self,
        verification: &Pubkey,
        answers: &[(&ProviderActor, CheckAnswer)],
        reveal: bool,
    ) {
        for (who, answer) in answers {
            self.seal(who, verification, *answer).expect("seal");
        }
        if reveal {
            for (who, answer) in answers {
                self.reveal(who, verification, *answer).expect("reveal");
            }
        }
    }

    /// A's node is lost (reported by the scheduler) and the job moves on to
    /// `to`'s node 0, which attests step 300 an interval later; the new
    /// generation.
    fn move_to(&mut self, to: &ProviderActor) -> u32 {
        let scheduler = self.env.scheduler.insecure_clone();
        let (token, a) = (self.owner.token, self.a.fork());
        self.env
            .report(&scheduler, &self.job, &token, &a, 0, FailureCause::NodeLost)
            .unwrap();
        self.env.assign(&self.job, to, 0).unwrap();
        self.env.start(&self.job, to, 0).unwrap();
        self.env.warp(INTERVAL);
        let generation = self.env.job(&self.job).generation;
        self.env
            .attest(&self.job, to, 0, generation, 0, 300)
            .unwrap();
        generation
    }

    /// The job's assignment on A's node 0, when A (the loser, passed as
    /// such) is proven wrong while the job runs there.
    fn on_the_liar(&self) -> ix::CurrentAssignment {
        ix::CurrentAssignment {
            node: self.a.nodes[0],
            provider: None,
            provider_payout: self.a.payout,
            segment: None,
        }
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

    /// A's node sends `complete_job`: a verified job's first attests its
    /// output (the run's last interval), a later one completes it.
    fn complete_call(&mut self) -> Outcome {
        let generation = self.env.job(&self.job).generation;
        let token = self.owner.token;
        self.env.complete(&self.job, &token, &self.a, 0, generation)
    }

    /// A's node attests the output (the first `complete_job`), then two
    /// slots pass (the draw's, and the one that records its hash).
    fn attest_output(&mut self) {
        self.complete_call().expect("the output's attestation");
        assert!(self.env.job(&self.job).output_attested());
        self.env.warp(1);
        self.env.warp(1);
    }

    /// A verified job's completion as its node makes it: the output
    /// attested, then, once the draw has had its time, the job completed.
    fn complete(&mut self) -> Outcome {
        self.complete_call()?;
        if !self.env.job(&self.job).output_attested() {
            return Ok(vec![]);
        }
        self.env.warp(i64::from(default_params().draw_secs));
        self.complete_call()
    }
}

/// A provider that starts a verified job, waits and completes with a
/// made-up output is caught as a liar is: its output is the run's last
/// interval, attested, billed, held and drawn like any other, and a check
/// runs the job from its last checkpoint to its exit and hashes the output.
/// Until the draw has had its time and no check is open the job attests
/// nothing more, is neither reported nor paused, and does not complete.
#[test]
fn a_made_up_output_is_an_interval_a_check_proves_wrong() {
    let mut w = world(PPM);
    w.env.warp(2);
    w.attest(100);
    let v1 = w.open();
    let honest = w.honest(&v1, 100);
    w.answer(&v1, Some(honest), Some(honest));
    w.resolve(&v1, None, None).unwrap();
    // Most of an interval later, a completion with a made-up output.
    w.env.warp(INTERVAL - 3);
    let accrued = w.env.job(&w.job).accrued;
    let logs = w.complete_call().expect("the output's attestation");
    let attested = events::<OutputAttested>(&logs);
    assert_eq!(attested.len(), 1);
    assert_eq!(
        (attested[0].interval, attested[0].output_hash),
        (2, [0xee; 32])
    );
    assert_eq!(
        events::<CheckpointAttested>(&logs).len(),
        1,
        "announced as an attestation: the history recomputes the hash chain"
    );
    let job = w.env.job(&w.job);
    assert!(matches!(job.state, JobState::Running { .. }) && job.output_attested());
    assert_eq!(job.checkpoint_count, 2);
    assert_eq!(
        job.accrued - accrued,
        cost(INTERVAL - 1),
        "billed as an interval"
    );

    // Nothing more is attested; nobody reports or pauses it; it completes
    // neither before the draw gap nor with another output.
    let before = w.env.snapshot();
    expect_error(w.complete_call(), McjsError::AttestationTooSoon);
    w.env.assert_unchanged(&before);
    w.env.warp(i64::from(default_params().draw_secs));
    let before = w.env.snapshot();
    let generation = job.generation;
    let (a, token, scheduler) = (w.a.fork(), w.owner.token, w.env.scheduler.insecure_clone());
    expect_error(
        w.env.attest(&w.job, &a, 0, generation, 0, 300),
        McjsError::JobFinishing,
    );
    expect_error(
        w.env
            .report_live(&scheduler, &w.job, &token, &a, 0, FailureCause::NodeLost),
        McjsError::JobFinishing,
    );
    w.env.assert_unchanged(&before);

    // The draw reaches it: a check of the output, from step 100.
    w.env.warp(1);
    let v = w.open();
    let opened = w.verification(&v);
    assert!(opened.output, "the checkers run the job to its exit");
    assert_eq!(opened.from.map(|c| c.step), Some(100));
    assert_eq!(opened.to.hash, [0xee; 32]);
    let before = w.env.snapshot();
    expect_error(w.complete_call(), McjsError::VerificationOpen);
    w.env.assert_unchanged(&before);
    let real = CheckAnswer::Reproduced {
        hash: [0x0d; 32],
        possession: possession(&opened, b"the job's real output"),
    };
    w.answer(&v, Some(real), Some(real));
    let owner_before = w.env.balance(&w.owner.token);
    let stake_before = w.env.provider(&w.a.pda).stake;
    let current = w.on_the_liar();
    let logs = w.resolve(&v, Some(w.a.pda), Some(current)).unwrap();
    let resolved = events::<VerificationResolved>(&logs);
    assert_eq!(resolved[0].outcome, VerificationOutcome::ProviderWrong);
    assert_eq!(resolved[0].restore_point.map(|c| c.step), Some(100));
    assert_eq!(resolved[0].refund, cost(INTERVAL - 1), "the output's pay");
    assert_eq!(
        w.env.balance(&w.owner.token) - owner_before,
        cost(INTERVAL - 1)
    );
    let slash = default_params().slash_amount;
    assert_eq!(w.env.provider(&w.a.pda).stake, stake_before - slash);
    let job = w.env.job(&w.job);
    assert!(matches!(job.state, JobState::Recovering { .. }));
    assert_eq!(job.output_hash, None, "the made-up output is not the job's");
    assert_eq!(job.last_checkpoint.map(|c| c.step), Some(100));
    w.env.assert_invariants();
}

/// The honest case: the output is attested, confirmed by a check, and the
/// job completes by anyone's call (its node may be gone), paid to its
/// output's attestation and nothing after.
#[test]
fn an_attested_output_completes_by_anyones_call_once_checked() {
    let mut w = world(PPM);
    w.env.warp(2);
    w.attest(100);
    w.env.warp(i64::from(default_params().draw_secs));
    w.attest_output();
    let v = w.open();
    let answer = CheckAnswer::Reproduced {
        hash: [0xee; 32],
        possession: possession(&w.verification(&v), b"the job's output"),
    };
    w.answer(&v, Some(answer), Some(answer));
    w.resolve(&v, None, None).unwrap();
    let billed = w.env.job(&w.job).billed_secs;
    // A stranger completes it, an hour on; a different output is refused.
    w.env.warp(3_600);
    let stranger = w.env.wallet(0);
    let generation = w.env.job(&w.job).generation;
    let complete = |output_hash| {
        complete_by(
            &w,
            &stranger.key(),
            generation,
            output_hash,
            w.env.segment_of(&w.job),
        )
    };
    let (other, right) = (complete([0xef; 32]), complete([0xee; 32]));
    let kp = stranger.kp.insecure_clone();
    let before = w.env.snapshot();
    expect_error(w.env.send(&[other], &[&kp]), McjsError::OutputMismatch);
    w.env.assert_unchanged(&before);
    w.env.send(&[right], &[&kp]).unwrap();
    let job = w.env.job(&w.job);
    assert!(matches!(job.state, JobState::Completed { .. }));
    assert_eq!(job.output_hash, Some([0xee; 32]));
    assert_eq!(job.billed_secs, billed, "the wait is not billed");
    assert_eq!(w.env.node(&w.a.nodes[0]).status, NodeStatus::Available);
    w.env.assert_invariants();
}

#[test]
fn a_verified_jobs_payment_is_held_until_its_window_passes() {
    let mut w = world(PPM);
    w.env.warp(2); // the first interval is then a whole one
    w.attest(100);
    w.attest(200);
    // The job's last checkpoint is at its end; its output is attested once
    // the draw has had its time, and it completes once that draw has too.
    w.attest(300);
    let gap = i64::from(default_params().draw_secs);
    w.env.warp(gap);
    w.complete().unwrap();
    let job = w.env.job(&w.job);
    // Three intervals billed at 8 USDC/h and the output's (the draw gap the
    // node was held for), held in the vault for the segment.
    let gross = 3 * cost(INTERVAL) + cost(gap + 2);
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
    let ix = ix::open_verification(
        &stranger.key(),
        &w.job,
        1,
        state.checkpoint_count,
        &good,
        &w.first_round_proof(),
    );
    assert!(w.env.send(&[ix], &[&stranger.kp]).is_err());
    w.env.assert_unchanged(&before);

    // A node of another GPU model fits the job but is not of the attester's
    // hardware class: bitwise results differ across models.
    let mut pcie = a100_80gb();
    pcie.gpu_model = "a100-pcie-80gb".into();
    let other_model = w.env.provider_with_nodes(200 * USDC, &[pcie], 2 * USDC);
    let before = w.env.snapshot();
    let class = ix::Checkers {
        referee_node: other_model.nodes[0],
        referee_provider: other_model.pda,
        ..good
    };
    expect_error(w.open_with(&class), McjsError::CheckerHardwareClass);
    w.env.assert_unchanged(&before);

    // One verification per interval, even once it is resolved and closed.
    let v = w.open();
    let before = w.env.snapshot();
    assert!(w.open_with(&good).is_err(), "the interval's PDA exists");
    w.env.assert_unchanged(&before);
    let honest = w.honest(&v, 100);
    w.answer(&v, Some(honest), Some(honest));
    w.resolve(&v, None, None).unwrap();
    assert!(
        w.env.account(&v).is_none(),
        "a resolved verification closes"
    );
    let before = w.env.snapshot();
    expect_error(w.open_with(&good), McjsError::IntervalNotOpenToVerification);
    w.env.assert_unchanged(&before);
}

/// The provider of `key` among `among`.
fn actor_of<'a>(among: &[&'a ProviderActor], key: &Pubkey) -> &'a ProviderActor {
    among
        .iter()
        .find(|p| p.pda == *key)
        .expect("one of the world's providers")
}

/// The checkers are the pool's draw, not the scheduler's choice: of B, C
/// and D in the pool (A attests), the scheduler names the two drawn, in
/// either role; the third, as fit as they are, is refused, and the refusal
/// changes nothing.
#[test]
fn the_checkers_are_the_pools_draw_and_no_other() {
    let mut w = world(PPM);
    let d = w
        .env
        .provider_with_nodes(200 * USDC, &[a100_80gb()], 2 * USDC);
    w.env.enter_pool(&d, 0).unwrap();
    assert_eq!(
        w.env
            .checker_pool(&a100_80gb().gpu_model)
            .unwrap()
            .members
            .len(),
        4
    );
    w.env.warp(2);
    w.attest(100);
    let (drawn, proof) = w.env.first_round_draw(&w.job).expect("a draw");
    assert!(proof.passed_over.is_empty(), "everyone drawn can check");
    let (b, c) = (w.b.fork(), w.c.fork());
    let all = [&b, &c, &d];
    let left_out = all
        .iter()
        .find(|p| p.pda != drawn.verifier_provider && p.pda != drawn.referee_provider)
        .unwrap();
    let before = w.env.snapshot();
    for not_drawn in [
        ix::Checkers {
            referee_node: left_out.nodes[0],
            referee_provider: left_out.pda,
            ..drawn
        },
        ix::Checkers {
            verifier_node: left_out.nodes[0],
            verifier_provider: left_out.pda,
            ..drawn
        },
    ] {
        expect_error(w.open_with(&not_drawn), McjsError::CheckerNotDrawn);
    }
    w.env.assert_unchanged(&before);
    let swapped = ix::Checkers {
        verifier_node: drawn.referee_node,
        verifier_provider: drawn.referee_provider,
        referee_node: drawn.verifier_node,
        referee_provider: drawn.verifier_provider,
    };
    w.open_with(&swapped)
        .expect("the drawn pair, in either role");
    let state = w.verification(&pda::verification(
        &w.job,
        w.env.job(&w.job).checkpoint_count,
    ));
    assert_eq!(
        (state.verifier_provider, state.referee_provider),
        (drawn.referee_provider, drawn.verifier_provider)
    );
}

/// A drawn member that cannot check (here its node went offline after it
/// entered the pool) is passed over only by showing its accounts, in the
/// order drawn; naming the next ones without them, or "showing" a member
/// that can check, is refused and changes nothing.
#[test]
fn a_drawn_member_that_cannot_check_is_passed_over_only_by_showing_it() {
    let mut w = world(PPM);
    let d = w
        .env
        .provider_with_nodes(200 * USDC, &[a100_80gb()], 2 * USDC);
    w.env.enter_pool(&d, 0).unwrap();
    w.env.warp(2);
    w.attest(100);
    let (first, _) = w.env.first_round_draw(&w.job).expect("a draw");
    let (b, c) = (w.b.fork(), w.c.fork());
    let all = [&b, &c, &d];
    let gone = actor_of(&all, &first.verifier_provider);
    let offline = ix::set_node_status(&gone.key(), &gone.pda, 0, NodeStatus::Offline);
    let kp = gone.wallet.kp.insecure_clone();
    w.env.send(&[offline], &[&kp]).unwrap();
    let (next, proof) = w.env.first_round_draw(&w.job).expect("a draw past it");
    assert_eq!(proof.passed_over, vec![(gone.nodes[0], gone.pda)]);
    assert!(next.verifier_provider != gone.pda && next.referee_provider != gone.pda);

    let state = w.env.job(&w.job);
    let (scheduler_key, job) = (w.env.scheduler.pubkey(), w.job);
    let open = |proof: &ix::DrawProof| {
        ix::open_verification(
            &scheduler_key,
            &job,
            1,
            state.checkpoint_count,
            &next,
            proof,
        )
    };
    let scheduler = w.env.scheduler.insecure_clone();
    let before = w.env.snapshot();
    let unshown = ix::DrawProof::of(&a100_80gb().gpu_model);
    expect_error(
        w.env.send(&[open(&unshown)], &[&scheduler]),
        McjsError::CheckerNotDrawn,
    );
    let fit = actor_of(&all, &next.referee_provider);
    let false_proof = ix::DrawProof {
        passed_over: vec![(fit.nodes[0], fit.pda)],
        ..proof.clone()
    };
    expect_error(
        w.env.send(&[open(&false_proof)], &[&scheduler]),
        McjsError::CheckerNotDrawn,
    );
    let extra = ix::DrawProof {
        passed_over: vec![(gone.nodes[0], gone.pda), (fit.nodes[0], fit.pda)],
        ..proof.clone()
    };
    expect_error(
        w.env.send(&[open(&extra)], &[&scheduler]),
        McjsError::UnexpectedAccounts,
    );
    w.env.assert_unchanged(&before);
    w.env
        .send(&[open(&proof)], &[&scheduler])
        .expect("the draw past the offline member");
}

/// A node enters its model's pool by its operator key alone, online and
/// backed by the minimum stake; renewing replaces its provider's entry
/// (one per provider) with its stake now. The pool grows by the entrant's
/// place, paid by it.
#[test]
fn a_node_enters_its_models_pool_by_its_operator_once_per_provider() {
    let mut env = Env::new();
    let a = env.provider_with_nodes(200 * USDC, &[a100_80gb(), a100_80gb()], 2 * USDC);
    let model = a100_80gb().gpu_model;
    let stranger = env.wallet(0);
    let ix = ix::enter_checker_pool(&stranger.key(), &a.nodes[0], &a.pda, &model);
    expect_error(env.send(&[ix], &[&stranger.kp]), McjsError::NotNodeOperator);
    assert!(env.checker_pool(&model).is_none());
    env.enter_pool(&a, 0).unwrap();
    let pool = env.checker_pool(&model).unwrap();
    assert_eq!(pool.gpu_model, model);
    assert_eq!(pool.members.len(), 1);
    assert_eq!(
        (pool.members[0].node, pool.members[0].weight),
        (a.nodes[0], 200 * USDC)
    );
    let small = env.account(&pda::checker_pool(&model)).unwrap().data.len();
    assert_eq!(small, CheckerPool::space(1));
    // Its other node takes its provider's place; more stake, more weight.
    let kp = a.wallet.kp.insecure_clone();
    let stake = ix::add_stake(&a.key(), &a.wallet.token, &env.mint, 50 * USDC);
    env.send(&[stake], &[&kp]).unwrap();
    env.enter_pool(&a, 1).unwrap();
    let pool = env.checker_pool(&model).unwrap();
    assert_eq!(pool.members.len(), 1);
    assert_eq!(
        (pool.members[0].node, pool.members[0].weight),
        (a.nodes[1], 250 * USDC)
    );
    // An offline node does not enter.
    let offline = ix::set_node_status(&a.key(), &a.pda, 0, NodeStatus::Offline);
    env.send(&[offline], &[&kp]).unwrap();
    let before = env.snapshot();
    expect_error(env.enter_pool(&a, 0), McjsError::InvalidChecker);
    env.assert_unchanged(&before);
    let b = env.provider_with_nodes(200 * USDC, &[a100_80gb()], 2 * USDC);
    env.enter_pool(&b, 0).unwrap();
    assert_eq!(
        env.account(&pda::checker_pool(&model)).unwrap().data.len(),
        CheckerPool::space(2)
    );
}

/// A provider that sees its interval drawn (the slot hash is public) and
/// renames its node's GPU model, so that no checker of the new model
/// exists, escapes nothing: the checkers are of the model its node had
/// when it was assigned, which its Segment keeps.
#[test]
fn renaming_the_attesters_gpu_does_not_change_who_may_check_it() {
    let mut w = world(PPM);
    w.lie(100);
    let mut renamed = a100_80gb();
    renamed.gpu_model = "a100-pcie-80gb".into();
    let operator = w.a.operator(0).insecure_clone();
    let rename = ix::update_node(
        &operator.pubkey(),
        &w.a.pda,
        0,
        mcjs::instructions::UpdateNodeArgs {
            hardware: Some(renamed.clone()),
            ..Default::default()
        },
    );
    w.env
        .send(&[rename], &[&operator])
        .expect("the operator updates its profile");
    assert_eq!(
        w.env.node(&w.a.nodes[0]).hardware.gpu_model,
        "a100-pcie-80gb"
    );
    // A checker of the new model is not of the class the interval ran on.
    let accomplice = w.env.provider_with_nodes(200 * USDC, &[renamed], 2 * USDC);
    let good = checkers(&w);
    let before = w.env.snapshot();
    let class = ix::Checkers {
        referee_node: accomplice.nodes[0],
        referee_provider: accomplice.pda,
        ..good
    };
    expect_error(w.open_with(&class), McjsError::CheckerHardwareClass);
    w.env.assert_unchanged(&before);
    // Checkers of the model it was assigned as are; the lie is caught.
    let v = w.open();
    let honest = w.honest(&v, 100);
    w.answer(&v, Some(honest), Some(honest));
    let a = w.a.pda;
    let current = w.on_the_liar();
    w.resolve(&v, Some(a), Some(current)).expect("resolve");
    assert_eq!(w.env.job(&w.job).barred_provider, Some(a));
    w.env.assert_invariants();
}

/// A checker that closes its payout account, hoping to freeze the checked
/// provider's held pay (no resolution could pay its fee), freezes nothing:
/// the check resolves, the other checker is paid, and its own fee stays
/// with the segment.
#[test]
fn a_checker_closing_its_payout_account_freezes_no_check() {
    let mut w = world(PPM);
    w.env.warp(2);
    w.attest(100);
    let v = w.open();
    let honest = w.honest(&v, 100);
    w.answer(&v, Some(honest), Some(honest));
    let c_wallet = w.c.wallet.kp.insecure_clone();
    let c_payout = w.c.payout;
    w.env.close_token_account(&c_payout, &c_wallet);
    let logs = w.resolve(&v, None, None).expect("the check resolves");
    let resolved = events::<VerificationResolved>(&logs);
    assert_eq!(resolved[0].outcome, VerificationOutcome::Confirmed);
    assert_eq!(resolved[0].fees, 20_000, "the verifier's fee only");
    assert_eq!(w.env.balance(&w.b.payout), 20_000);
    assert!(w.env.account(&v).is_none(), "resolved and closed");
    w.env.assert_invariants();
}

#[test]
fn a_confirmed_interval_pays_both_checkers_from_the_commission() {
    let mut w = world(PPM);
    w.env.warp(2);
    w.attest(100);
    let v = w.open();
    let opened = w.verification(&v);
    assert_eq!(opened.from, None, "the first interval starts from scratch");
    assert_eq!(opened.to.step, 100);
    assert_eq!(opened.node, w.a.nodes[0]);
    // While it is open the job cannot complete.
    w.attest(200);
    let v2 = w.open();
    w.env.warp(INTERVAL - 2);
    // Its output is attested, but it does not complete while a check is open.
    w.attest_output();
    w.env.warp(i64::from(default_params().draw_secs));
    let before = w.env.snapshot();
    expect_error(w.complete_call(), McjsError::VerificationOpen);
    w.env.assert_unchanged(&before);

    for (verification, step) in [(v, 100), (v2, 200)] {
        let honest = w.honest(&verification, step);
        w.answer(&verification, Some(honest), Some(honest));
        assert_eq!(
            w.verification(&verification).state,
            VerificationState::Decided {
                outcome: VerificationOutcome::Confirmed
            }
        );
    }
    let scheduler_lamports = w.env.svm.get_balance(&w.env.scheduler.pubkey()).unwrap();
    let logs = w.resolve(&v, None, None).unwrap();
    w.resolve(&v2, None, None).unwrap();
    let resolved = events::<VerificationResolved>(&logs);
    // 900 s at 8 USDC/h = 2 USDC; 5% commission = 0.1; 20% of it = 0.02,
    // to each checker.
    assert_eq!(fee_of(cost(INTERVAL)), 20_000);
    assert_eq!(resolved[0].fees, 40_000);
    assert_eq!(w.env.balance(&w.b.payout), 40_000, "two fees");
    assert_eq!(w.env.balance(&w.c.payout), 40_000, "two fees");
    assert!(w.env.account(&v).is_none() && w.env.account(&v2).is_none());
    assert!(
        w.env.svm.get_balance(&w.env.scheduler.pubkey()).unwrap() > scheduler_lamports,
        "the closed verifications' rent went back to the scheduler"
    );

    w.complete().unwrap();
    let release_at = w.env.now() + default_params().challenge_window_secs as i64;
    w.env.set_time(release_at);
    let treasury = w.env.balance(&w.env.treasury);
    w.release(1).unwrap();
    // The two attested intervals and the output's: nothing after it.
    let gross = 3 * cost(INTERVAL);
    let commission = gross * 500 / 10_000;
    assert_eq!(
        w.env.balance(&w.a.payout),
        gross - commission,
        "the provider's share is untouched by the fees"
    );
    assert_eq!(
        w.env.balance(&w.env.treasury) - treasury,
        commission - 80_000,
        "the fees came out of the commission"
    );
    assert_eq!(w.env.provider(&w.a.pda).slashed_total, 0);
    w.env.assert_invariants();
}

#[test]
fn answers_are_sealed_by_the_named_checkers_then_revealed_as_sealed() {
    let mut w = world(PPM);
    w.attest(100);
    let v = w.open();
    let honest = w.honest(&v, 100);
    let (a, b, c) = (w.a.fork(), w.b.fork(), w.c.fork());
    let stranger = w
        .env
        .provider_with_nodes(200 * USDC, &[a100_80gb()], 2 * USDC);
    // Only the named checkers answer: not the attesting provider, not a
    // stranger.
    let before = w.env.snapshot();
    expect_error(w.seal(&a, &v, honest), McjsError::NotVerifierTurn);
    expect_error(w.seal(&stranger, &v, honest), McjsError::NotVerifierTurn);
    w.env.assert_unchanged(&before);
    // Nothing is revealed before both checkers sealed; one seal each.
    w.seal(&b, &v, honest).unwrap();
    let before = w.env.snapshot();
    expect_error(w.reveal(&b, &v, honest), McjsError::NotVerifierTurn);
    expect_error(w.seal(&b, &v, honest), McjsError::NotVerifierTurn);
    w.env.assert_unchanged(&before);
    w.seal(&c, &v, honest).unwrap();
    assert_eq!(w.verification(&v).state, VerificationState::Revealing);
    // A reveal must open its checker's own seal.
    let other = CheckAnswer::Reproduced {
        hash: checkpoint_hash(0, 100),
        possession: [9; 32],
    };
    let before = w.env.snapshot();
    expect_error(w.reveal(&b, &v, other), McjsError::CommitmentMismatch);
    expect_error(
        w.reveal(&c, &v, CheckAnswer::StartUnavailable),
        McjsError::CommitmentMismatch,
    );
    w.env.assert_unchanged(&before);
    w.reveal(&b, &v, honest).unwrap();
    expect_error(w.reveal(&b, &v, honest), McjsError::NotVerifierTurn);
    w.reveal(&c, &v, honest).unwrap();
    assert_eq!(
        w.verification(&v).state,
        VerificationState::Decided {
            outcome: VerificationOutcome::Confirmed
        }
    );

    // Past the window no answer is taken.
    w.attest(200);
    let v2 = w.open();
    let honest2 = w.honest(&v2, 200);
    w.seal(&b, &v2, honest2).unwrap();
    w.env
        .warp(default_params().challenge_window_secs as i64 + 1);
    let before = w.env.snapshot();
    expect_error(w.seal(&c, &v2, honest2), McjsError::NotVerifierTurn);
    w.env.assert_unchanged(&before);
}

/// The attack this protocol exists for: a provider attests a made-up
/// checkpoint, and a checker answers with what it can read on chain (the
/// claimed hash, the key, the slot hash) instead of running the interval.
/// Whatever the other checker does (runs it, copies another way, stays
/// silent), the made-up interval is never paid.
#[test]
fn a_checker_that_copies_the_claimed_hash_never_gets_a_made_up_checkpoint_paid() {
    #[derive(Clone, Copy, Debug)]
    enum Other {
        Honest,
        Copies,
        /// Copies with the same software: the same guess.
        CopiesAlike,
        Silent,
    }
    for other in [
        Other::Honest,
        Other::Copies,
        Other::CopiesAlike,
        Other::Silent,
    ] {
        {
            let mut w = world(PPM);
            w.env.warp(2);
            w.attest(100);
            w.lie(200);
            let v = w.open();
            let copied = w.copied(&v);
            let real = w.honest(&v, 200);
            let referee = match other {
                Other::Honest => Some(real),
                Other::Copies => {
                    // Another guess from the chain: the key and the hash.
                    let vv = w.verification(&v);
                    Some(CheckAnswer::Reproduced {
                        hash: vv.to.hash,
                        possession: possession(&vv, &vv.to.hash),
                    })
                }
                Other::CopiesAlike => Some(copied),
                Other::Silent => None,
            };
            w.answer(&v, Some(copied), referee);
            if w.verification(&v).state == VerificationState::Disputed {
                // No second round here (see
                // `a_checker_vouching_for_a_liar_is_outvoted_by_a_second_round`):
                // once its time has passed, the first round's answers decide.
                w.env
                    .warp(default_params().challenge_window_secs as i64 / 2 + 1);
            }
            if matches!(other, Other::Silent) {
                // Decided on what was revealed once its window has passed.
                w.env
                    .warp(default_params().challenge_window_secs as i64 + 1);
            }
            let outcome = w.verification(&v).decide();
            // Two checkers copying alike agree: the limit of any check by
            // comparison (docs/verification.md); drawn by stake, one seat
            // per provider, both seats cost a share of the stake squared.
            if matches!(other, Other::CopiesAlike) {
                assert_eq!(outcome, VerificationOutcome::Confirmed);
                continue;
            }
            assert_eq!(outcome, VerificationOutcome::Inconclusive, "{other:?}");
            let owner_before = w.env.balance(&w.owner.token);
            let logs = w.resolve(&v, None, None).unwrap();
            let resolved = events::<VerificationResolved>(&logs);
            assert_eq!(resolved[0].outcome, VerificationOutcome::Inconclusive);
            assert_eq!(resolved[0].fees, 0, "the copier earns nothing");
            // Still on its node: the made-up interval's pay leaves what the
            // assignment accrued and stays in the bond.
            assert_eq!(resolved[0].refund, 0);
            assert_eq!(w.env.balance(&w.owner.token), owner_before);
            let job = w.env.job(&w.job);
            assert_eq!(
                job.accrued,
                cost(INTERVAL),
                "{other:?}: only the honest interval is owed"
            );
            assert_eq!(
                job.bond,
                100 * USDC,
                "the made-up interval's pay is back in the bond"
            );
            if matches!(other, Other::Silent) {
                // (Completing an hour later bills the wait: see the note in
                // docs/verification.md.)
                continue;
            }
            // Complete (the draw gap has passed) and release: the liar is
            // paid the honest interval and its output's stretch, itself
            // open to a check, billed at most one interval past the lie
            // (what follows is the check's wait), not the made-up interval.
            let gap = i64::from(default_params().draw_secs);
            w.env.warp(gap);
            w.attest_output();
            let output = w.env.job(&w.job).last_interval_amount;
            assert!(output <= cost(INTERVAL), "{other:?}: the wait was billed");
            w.env.warp(gap);
            w.complete_call().unwrap();
            let gross = w.segment(1).unwrap().gross;
            assert_eq!(
                gross,
                cost(INTERVAL) + output,
                "{other:?}: the made-up interval was paid"
            );
            let release_at = w.env.now() + default_params().challenge_window_secs as i64;
            w.env.set_time(release_at);
            w.release(1).unwrap();
            assert_eq!(w.env.balance(&w.a.payout), gross - gross * 500 / 10_000);
            w.env.assert_invariants();
        }
    }
}

/// The same escape with the job's pay already held (the liar's assignment
/// ended): the interval's amount goes back to the owner.
#[test]
fn an_inconclusive_check_of_a_held_segment_refunds_the_interval() {
    let mut w = world(PPM);
    w.env.warp(2);
    w.attest(100);
    w.lie(200);
    let v = w.open();
    w.env.warp(INTERVAL - 2);
    let copied = w.copied(&v);
    w.answer(&v, Some(copied), None);
    w.env
        .warp(default_params().challenge_window_secs as i64 + 1);
    let held_before = w.env.job(&w.job).held;
    assert_eq!(held_before, 0, "still on its node");
    // Pause it (the owner's choice): the segment's pay moves to held.
    let kp = w.owner.kp.insecure_clone();
    let pause = w
        .env
        .job_accounts(&w.job, &w.a, 0, &w.job, 0)
        .pause(&kp.pubkey());
    w.env.send(&[pause], &[&kp]).unwrap();
    let held = w.env.job(&w.job).held;
    assert!(held > 0);
    let owner_before = w.env.balance(&w.owner.token);
    let logs = w.resolve(&v, None, None).unwrap();
    let resolved = events::<VerificationResolved>(&logs);
    let amount = w.env.job(&w.job).held;
    assert_eq!(resolved[0].refund, held - amount);
    assert_eq!(
        resolved[0].refund,
        cost(INTERVAL),
        "the drawn interval's amount"
    );
    assert_eq!(w.env.balance(&w.owner.token) - owner_before, cost(INTERVAL));
    w.env.assert_invariants();
}

#[test]
fn a_provider_proven_wrong_is_slashed_refunds_only_unconfirmed_work_and_the_job_rolls_back() {
    let mut w = world(PPM);
    w.env.warp(2);
    w.attest(100);
    let v1 = w.open();
    let honest = w.honest(&v1, 100);
    w.answer(&v1, Some(honest), Some(honest));
    w.resolve(&v1, None, None).unwrap();
    // The second interval's hash is made up; both checkers reproduce the
    // real checkpoint.
    w.lie(200);
    let v2 = w.open();
    let real = w.honest(&v2, 200);
    w.answer(&v2, Some(real), Some(real));
    assert_eq!(
        w.verification(&v2).state,
        VerificationState::Decided {
            outcome: VerificationOutcome::ProviderWrong
        }
    );

    let current = w.on_the_liar();
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
    // The owner gets back the disproven interval's pay, not the confirmed
    // one's: the job keeps its progress to step 100, so that stays paid.
    assert_eq!(resolved[0].refund, cost(INTERVAL));
    assert_eq!(w.env.balance(&w.owner.token) - owner_before, cost(INTERVAL));
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
    // The first interval's pay, less its two checkers' fees, stays held.
    let kept = cost(INTERVAL) - 2 * fee_of(cost(INTERVAL));
    assert_eq!(job.held, kept);
    assert_eq!(w.env.node(&w.a.nodes[0]).status, NodeStatus::Offline);
    let segment = w.segment(1).unwrap();
    assert!(matches!(segment.state, SegmentState::Held { .. }));
    assert!(segment.disproven);
    assert_eq!(segment.gross, kept);
    assert_eq!(w.env.provider(&w.a.pda).active_assignments, 0);

    // The segment is released as usual once its window passes: the liar is
    // paid the confirmed interval (less the commission, out of which the
    // fees came), nothing for the disproven one; the job goes on elsewhere
    // from 100, never on the liar's nodes again.
    let SegmentState::Held { release_at } = segment.state else {
        unreachable!()
    };
    w.env.set_time(release_at);
    w.release(1).unwrap();
    let confirmed = cost(INTERVAL);
    assert_eq!(
        w.env.balance(&w.a.payout),
        confirmed - confirmed * 500 / 10_000,
        "the liar is paid its confirmed interval only"
    );
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

/// The job names, at every step, the checkpoint a lie found in its latest
/// interval would send it back to (`Job::restore_floor`), so that the
/// store can keep it however many checkpoints follow: the assignment's
/// start until a check confirms one of its intervals, that confirmed end
/// after, the restore point after a roll-back, and the same for the next
/// assignment. Each time a verdict sends the job back, it goes exactly
/// there.
#[test]
fn the_job_names_where_a_lie_would_send_it_back_and_a_verdict_goes_there() {
    let mut w = world(PPM);
    w.env.warp(2);
    w.attest(100);
    assert_eq!(w.env.job(&w.job).restore_floor, None, "from the start");
    let v1 = w.open();
    let honest = w.honest(&v1, 100);
    w.answer(&v1, Some(honest), Some(honest));
    w.resolve(&v1, None, None).unwrap();
    let confirmed = w.env.job(&w.job).last_checkpoint;
    assert_eq!(w.env.job(&w.job).restore_floor, confirmed);
    // Three more intervals pass unchecked (never opened): the floor stays
    // at the confirmed end however many checkpoints follow it.
    for step in [200, 300, 400] {
        w.attest(step);
        assert_eq!(w.env.job(&w.job).restore_floor, confirmed);
    }
    w.lie(500);
    let v2 = w.open();
    let real = w.honest(&v2, 500);
    w.answer(&v2, Some(real), Some(real));
    let floor = w.env.job(&w.job).restore_floor;
    let current = w.on_the_liar();
    let logs = w.resolve(&v2, Some(w.a.pda), Some(current)).unwrap();
    let resolved = events::<VerificationResolved>(&logs);
    assert!(resolved[0].rolled_back);
    assert_eq!(
        resolved[0].restore_point, floor,
        "the verdict went to the floor"
    );
    let job = w.env.job(&w.job);
    assert_eq!((job.last_checkpoint, job.restore_floor), (floor, floor));

    // The next assignment starts from the floor; its first attestation
    // makes that start its floor, and a lie in its first interval goes
    // back there.
    let b = w.b.fork();
    w.env.assign(&w.job, &b, 0).unwrap();
    w.env.start(&w.job, &b, 0).unwrap();
    w.env.warp(INTERVAL);
    let generation = w.env.job(&w.job).generation;
    w.env.attest(&w.job, &b, 0, generation, 0, 200).unwrap();
    let job = w.env.job(&w.job);
    assert_eq!(job.restore_floor, floor);
    assert_eq!(job.prev_checkpoint, floor);
    w.env.warp(INTERVAL);
    w.env.attest(&w.job, &b, 0, generation, 0, 300).unwrap();
    assert_eq!(w.env.job(&w.job).restore_floor, floor, "still unconfirmed");
    w.env.assert_invariants();
}

/// A confirmed interval that starts from a disproven one proves nothing:
/// the job goes back to the segment's start, the owner is refunded the
/// whole segment, and the liar is slashed once for both.
#[test]
fn a_wrong_interval_before_a_confirmed_one_refunds_the_whole_segment() {
    let mut w = world(PPM);
    w.env.warp(2);
    w.lie(100);
    let v1 = w.open();
    w.attest(200);
    let v2 = w.open();
    let later = w.honest(&v2, 200);
    w.answer(&v2, Some(later), Some(later));
    w.resolve(&v2, None, None).unwrap();
    assert_eq!(w.segment(1).unwrap().verified_to.map(|c| c.step), Some(200));
    let real = w.honest(&v1, 100);
    w.answer(&v1, Some(real), Some(real));
    let current = w.on_the_liar();
    let owner_before = w.env.balance(&w.owner.token);
    let logs = w.resolve(&v1, Some(w.a.pda), Some(current)).unwrap();
    let resolved = events::<VerificationResolved>(&logs);
    assert_eq!(resolved[0].slashed, default_params().slash_amount);
    assert!(resolved[0].rolled_back);
    assert_eq!(resolved[0].restore_point, None, "back to the job's start");
    // Both intervals, less the fees the confirmed one paid its checkers.
    let all = 2 * cost(INTERVAL) - 2 * fee_of(cost(INTERVAL));
    assert_eq!(resolved[0].refund, all);
    assert_eq!(w.env.balance(&w.owner.token) - owner_before, all);
    let segment = w.segment(1).unwrap();
    assert_eq!((segment.state, segment.gross), (SegmentState::Refunded, 0));
    assert_eq!(w.env.job(&w.job).last_checkpoint, None);
    assert_eq!(w.env.job(&w.job).held, 0);
    w.env.assert_invariants();
}

/// A checker that has not sealed by half the challenge window (busy with
/// paid work, offline, or colluding with the liar by its silence) would
/// leave the check Inconclusive: the liar unslashed, the job going on from
/// a made-up checkpoint. The scheduler names another checker in its place,
/// of a provider other than the attester's and the two named; the other
/// checker's seal stands, the window starts again, and the lie is caught.
/// A replacement too early, of a checker that sealed, of a provider already
/// involved, or by anyone but the lease holder changes nothing.
#[test]
fn a_checker_silent_past_half_the_window_is_replaced_and_the_lie_is_still_caught() {
    let mut w = world(PPM);
    let d = w
        .env
        .provider_with_nodes(200 * USDC, &[a100_80gb()], 2 * USDC);
    w.env.warp(2);
    w.lie(100);
    let v = w.open();
    w.env.enter_pool(&d, 0).unwrap();
    let real = w.honest(&v, 100);
    let b = w.b.fork();
    w.seal(&b, &v, real).expect("the verifier seals");
    // C, the referee, stays silent.
    let window = i64::from(default_params().challenge_window_secs);
    let scheduler = w.env.scheduler.insecure_clone();
    let before = w.env.snapshot();
    let opened_at = w.verification(&v).opened_at;
    w.env.set_time(opened_at + window / 2);
    let too_early = w.replacement(&v, Party::Referee, &d);
    expect_error(
        w.env.send(&[too_early], &[&scheduler]),
        McjsError::CheckerNotReplaceable,
    );
    w.env.set_time(opened_at + window / 2 + 1);
    let sealed = w.replacement(&v, Party::Verifier, &d);
    expect_error(
        w.env.send(&[sealed], &[&scheduler]),
        McjsError::CheckerNotReplaceable,
    );
    for involved in [&w.a, &w.b, &w.c] {
        let ix = w.replacement(&v, Party::Referee, involved);
        expect_error(w.env.send(&[ix], &[&scheduler]), McjsError::InvalidChecker);
    }
    let stranger = w.env.wallet(0).kp;
    let mut by_stranger = w.replacement(&v, Party::Referee, &d);
    by_stranger.accounts[0].pubkey = stranger.pubkey();
    expect_error(
        w.env.send(&[by_stranger], &[&stranger]),
        McjsError::NotScheduler,
    );
    w.env.assert_unchanged(&before);

    let now = w.env.now();
    let logs = w
        .env
        .send(&[w.replacement(&v, Party::Referee, &d)], &[&scheduler])
        .expect("the silent referee is replaced");
    let replaced = events::<CheckerReplaced>(&logs);
    assert_eq!(replaced[0].replaced_node, w.c.nodes[0]);
    assert_eq!(replaced[0].node, d.nodes[0]);
    let state = w.verification(&v);
    assert_eq!(
        (
            state.referee_node,
            state.referee_provider,
            state.referee_payout
        ),
        (d.nodes[0], d.pda, d.payout)
    );
    assert_eq!((state.opened_at, state.replacements), (now, 1));
    assert_eq!(state.verifier_commitment.is_some(), true, "B's seal stands");
    // The replaced checker can no longer answer; the new one can, past the
    // first window's end, since the window started again.
    let c = w.c.fork();
    expect_error(w.seal(&c, &v, real), McjsError::NotVerifierTurn);
    w.env.set_time(opened_at + window + 10);
    w.seal(&d, &v, real).expect("the new referee seals");
    w.reveal(&b, &v, real).expect("reveal");
    w.reveal(&d, &v, real).expect("reveal");
    assert_eq!(
        w.verification(&v).state,
        VerificationState::Decided {
            outcome: VerificationOutcome::ProviderWrong
        }
    );
    let current = w.on_the_liar();
    let (d_before, c_before) = (w.env.balance(&d.payout), w.env.balance(&w.c.payout));
    let logs = w.resolve(&v, Some(w.a.pda), Some(current)).unwrap();
    let resolved = events::<VerificationResolved>(&logs);
    assert_eq!(resolved[0].slashed, default_params().slash_amount);
    assert!(
        w.env.balance(&d.payout) > d_before,
        "the new referee is paid its fee"
    );
    assert_eq!(
        w.env.balance(&w.c.payout),
        c_before,
        "the silent one nothing"
    );
    w.env.assert_invariants();
}

/// A check is held open at most `MAX_CHECKER_REPLACEMENTS` replacements
/// long, and never past its window: then it ends on what it has.
#[test]
fn a_check_replaces_at_most_twice_and_never_past_its_window() {
    let mut w = world(PPM);
    let d = w
        .env
        .provider_with_nodes(200 * USDC, &[a100_80gb()], 2 * USDC);
    let e = w
        .env
        .provider_with_nodes(200 * USDC, &[a100_80gb()], 2 * USDC);
    w.env.warp(2);
    w.attest(100);
    let v = w.open();
    for p in [&d, &e] {
        w.env.enter_pool(p, 0).unwrap();
    }
    let window = i64::from(default_params().challenge_window_secs);
    let scheduler = w.env.scheduler.insecure_clone();
    // Past the window: too late, the check ends on what it has.
    let opened_at = w.verification(&v).opened_at;
    w.env.set_time(opened_at + window + 1);
    let before = w.env.snapshot();
    expect_error(
        w.env
            .send(&[w.replacement(&v, Party::Verifier, &d)], &[&scheduler]),
        McjsError::CheckerNotReplaceable,
    );
    w.env.assert_unchanged(&before);
    // Within it, both silent checkers are replaced, one after the other,
    // each by the pool's draw among the providers the check does not name.
    w.env.set_time(opened_at + window / 2 + 1);
    let everyone = [w.a.fork(), w.b.fork(), w.c.fork(), d.fork(), e.fork()];
    let drawn = |w: &World| {
        let (member, _) = w.env.replacement_draw(&v).expect("a replacement is drawn");
        everyone
            .iter()
            .find(|p| p.pda == member.provider)
            .expect("one of the world's providers")
            .fork()
    };
    let first = drawn(&w);
    w.env
        .send(&[w.replacement(&v, Party::Verifier, &first)], &[&scheduler])
        .unwrap();
    let opened_at = w.verification(&v).opened_at;
    w.env.set_time(opened_at + window / 2 + 1);
    let second = drawn(&w);
    w.env
        .send(&[w.replacement(&v, Party::Referee, &second)], &[&scheduler])
        .unwrap();
    let opened_at = w.verification(&v).opened_at;
    w.env.set_time(opened_at + window / 2 + 1);
    let before = w.env.snapshot();
    let c = w.c.fork();
    expect_error(
        w.env
            .send(&[w.replacement(&v, Party::Verifier, &c)], &[&scheduler]),
        McjsError::CheckerNotReplaceable,
    );
    w.env.assert_unchanged(&before);
    let state = w.verification(&v);
    assert_eq!(state.replacements, MAX_CHECKER_REPLACEMENTS);
    assert_eq!(
        (state.verifier_node, state.referee_node),
        (first.nodes[0], second.nodes[0])
    );
    w.env.assert_invariants();
}

/// What a checker in league with a liar reveals: the claimed hash, with a
/// real possession digest of the made-up bytes the liar shared with it.
fn vouching(w: &World, verification: &Pubkey) -> CheckAnswer {
    let v = w.verification(verification);
    CheckAnswer::Reproduced {
        hash: v.to.hash,
        possession: possession(&v, b"the liar's made-up bytes"),
    }
}

/// Two more providers with a node that fits the world's job (a second
/// round's checkers).
fn two_more(w: &mut World) -> (ProviderActor, ProviderActor) {
    let d = w
        .env
        .provider_with_nodes(200 * USDC, &[a100_80gb()], 2 * USDC);
    let e = w
        .env
        .provider_with_nodes(200 * USDC, &[a100_80gb()], 2 * USDC);
    (d, e)
}

/// A world where A lies at step 100 and the check is open, B (the
/// verifier) vouching for the lie and C (the referee) honest: both sealed,
/// and revealed where `reveal` says so; D and E are two more providers for
/// a second round.
fn a_lie_vouched_for(reveal: bool) -> (World, Pubkey, ProviderActor, ProviderActor) {
    let mut w = world(PPM);
    let (d, e) = two_more(&mut w);
    w.env.warp(2);
    w.lie(100);
    let v = w.open();
    for p in [&d, &e] {
        w.env.enter_pool(p, 0).unwrap();
    }
    let (b, c) = (w.b.fork(), w.c.fork());
    let (vouch, real) = (vouching(&w, &v), w.honest(&v, 100));
    w.answer_as(&v, &[(&b, vouch), (&c, real)], reveal);
    (w, v, d, e)
}

/// A checker in league with the liar vouches for its made-up checkpoint,
/// bytes and all, against an honest one: two answers cannot tell who is
/// right, so the check goes to a second round of two checkers of providers
/// it has not involved, under a fresh key. They catch the lie: the liar is
/// slashed and barred, the second round's checkers are paid, and the first
/// round's nothing; the vouching checker, proven wrong by the second round,
/// is slashed too (and no resolver can leave its accounts out). The second
/// round is the scheduler's alone, for fresh fitting providers, within half
/// a window of the dispute.
#[test]
fn a_checker_vouching_for_a_liar_is_outvoted_by_a_second_round() {
    let (mut w, v, d, e) = a_lie_vouched_for(true);
    let (b, vouch, real) = (w.b.fork(), vouching(&w, &v), w.honest(&v, 100));
    let disputed = w.verification(&v);
    assert_eq!(disputed.state, VerificationState::Disputed);
    assert_eq!(disputed.opened_at, w.env.now(), "its time counts from here");
    assert_eq!(disputed.decide(), VerificationOutcome::Inconclusive);
    expect_error(
        w.resolve(&v, Some(w.a.pda), Some(w.on_the_liar())),
        McjsError::VerificationUndecided,
    );

    let scheduler = w.env.scheduler.insecure_clone();
    let before = w.env.snapshot();
    for (verifier, referee) in [(&w.a, &d), (&d, &w.b), (&w.c, &e), (&d, &d)] {
        let ix = w.second_round(&v, verifier, referee);
        expect_error(w.env.send(&[ix], &[&scheduler]), McjsError::InvalidChecker);
    }
    let stranger = w.env.wallet(0).kp;
    let mut by_stranger = w.second_round(&v, &d, &e);
    by_stranger.accounts[0].pubkey = stranger.pubkey();
    expect_error(
        w.env.send(&[by_stranger], &[&stranger]),
        McjsError::NotScheduler,
    );
    w.env.assert_unchanged(&before);

    let logs = w
        .env
        .send(&[w.second_round(&v, &d, &e)], &[&scheduler])
        .expect("the scheduler opens the second round");
    let opened = events::<SecondRoundOpened>(&logs);
    assert_eq!(opened.len(), 1);
    assert_eq!(opened[0].first_round.verifier_answer, Some(vouch));
    assert_eq!(opened[0].first_round.referee_answer, Some(real));
    let round = w.verification(&v);
    assert_eq!(round.state, VerificationState::Open);
    assert_eq!(
        (round.verifier_node, round.referee_node),
        (d.nodes[0], e.nodes[0])
    );
    assert_eq!(
        (round.verifier_payout, round.referee_payout),
        (d.payout, e.payout)
    );
    assert_ne!(
        round.possession_key, disputed.possession_key,
        "no first-round digest can be replayed"
    );
    assert_eq!(round.first_round.unwrap().verifier_node, w.b.nodes[0]);
    // The first round's checkers have no seat any more.
    expect_error(w.seal(&b, &v, vouch), McjsError::NotVerifierTurn);

    let real = w.honest(&v, 100);
    w.answer_as(&v, &[(&d, real), (&e, real)], true);
    assert_eq!(
        w.verification(&v).state,
        VerificationState::Decided {
            outcome: VerificationOutcome::ProviderWrong
        }
    );
    let payouts = [&w.b.payout, &w.c.payout, &d.payout, &e.payout].map(|p| w.env.balance(p));
    let pool = w.env.balance(&pda::insurance_pool());
    let stake_b = w.env.provider(&w.b.pda).stake;

    // The vouching checker's accounts left out, or another vault in place
    // of its own: refused, and nothing moves.
    let state = w.verification(&v);
    assert_eq!(state.wrong_first_round_checkers(), [Some(w.b.pda), None]);
    let full = ix::resolve_verification(
        &w.owner.key(),
        &w.job,
        &state,
        &w.owner.token,
        &w.env.deployment(),
        Some(w.a.pda),
        Some(w.on_the_liar()),
    );
    let owner = w.owner.kp.insecure_clone();
    let before = w.env.snapshot();
    let mut without = full.clone();
    for meta in &mut without.accounts {
        if meta.pubkey == w.b.pda || meta.pubkey == pda::vault(&w.b.pda) {
            meta.pubkey = mcjs::ID;
            meta.is_writable = false;
        }
    }
    expect_error(
        w.env.send(&[without], &[&owner]),
        McjsError::CheckerAccountsRequired,
    );
    let mut other_vault = full.clone();
    for meta in &mut other_vault.accounts {
        if meta.pubkey == pda::vault(&w.b.pda) {
            meta.pubkey = pda::vault(&w.c.pda);
        }
    }
    expect_error(
        w.env.send(&[other_vault], &[&owner]),
        McjsError::WrongTokenAccount,
    );
    w.env.assert_unchanged(&before);

    let logs = w.resolve(&v, Some(w.a.pda), Some(w.on_the_liar())).unwrap();
    let resolved = events::<VerificationResolved>(&logs);
    let slashed = events::<CheckerSlashed>(&logs);
    assert_eq!(slashed.len(), 1);
    assert_eq!(
        (slashed[0].provider, slashed[0].role, slashed[0].amount),
        (w.b.pda, Party::Verifier, default_params().slash_amount)
    );
    assert_eq!(
        w.env.provider(&w.b.pda).stake,
        stake_b - default_params().slash_amount
    );
    assert_eq!(
        w.env.balance(&pda::insurance_pool()) - pool,
        2 * default_params().slash_amount - resolved[0].fees,
        "the liar's slash less the second round's fees, and the whole of the checker's"
    );
    assert_eq!(resolved[0].outcome, VerificationOutcome::ProviderWrong);
    assert_eq!(resolved[0].slashed, default_params().slash_amount);
    assert_eq!(
        w.env.provider(&w.a.pda).slashed_total,
        default_params().slash_amount
    );
    assert_eq!(w.env.job(&w.job).barred_provider, Some(w.a.pda));
    let after = [&w.b.payout, &w.c.payout, &d.payout, &e.payout].map(|p| w.env.balance(p));
    assert_eq!(after[0], payouts[0], "the vouching checker earns nothing");
    assert_eq!(after[1], payouts[1], "nor does the first round's other");
    assert!(
        after[2] > payouts[2] && after[3] > payouts[3],
        "the second round is paid"
    );
    assert_eq!(
        after[2] - payouts[2] + after[3] - payouts[3],
        resolved[0].fees
    );
    assert_eq!(
        w.env.provider(&w.b.pda).slashed_total,
        default_params().slash_amount
    );
    for p in [&w.c, &d, &e] {
        assert_eq!(w.env.provider(&p.pda).slashed_total, 0);
    }
    w.env.assert_invariants();
}

/// A checker that answers wrongly to withhold an honest provider's pay
/// (Inconclusive leaves the interval unpaid) is outvoted the same way: the
/// second round confirms, the provider is paid the interval, and the wrong
/// checker is slashed; the honest one of the first round is not.
#[test]
fn a_checker_answering_wrongly_withholds_nothing_from_an_honest_provider() {
    let mut w = world(PPM);
    let (d, e) = two_more(&mut w);
    w.env.warp(2);
    w.attest(100);
    let v = w.open();
    for p in [&d, &e] {
        w.env.enter_pool(p, 0).unwrap();
    }
    let (b, c) = (w.b.fork(), w.c.fork());
    let vv = w.verification(&v);
    let wrong = CheckAnswer::Reproduced {
        hash: [0x77; 32],
        possession: possession(&vv, b"other bytes"),
    };
    let real = w.honest(&v, 100);
    w.answer_as(&v, &[(&b, wrong), (&c, real)], true);
    assert_eq!(w.verification(&v).state, VerificationState::Disputed);
    let scheduler = w.env.scheduler.insecure_clone();
    w.env.warp(10);
    w.env
        .send(&[w.second_round(&v, &e, &d)], &[&scheduler])
        .unwrap();
    let real = w.honest(&v, 100);
    w.answer_as(&v, &[(&e, real), (&d, real)], true);
    let logs = w.resolve(&v, None, None).unwrap();
    let resolved = events::<VerificationResolved>(&logs);
    assert_eq!(resolved[0].outcome, VerificationOutcome::Confirmed);
    assert_eq!(resolved[0].refund, 0);
    let slashed = events::<CheckerSlashed>(&logs);
    assert_eq!(
        slashed.iter().map(|s| s.provider).collect::<Vec<_>>(),
        [w.b.pda]
    );
    assert_eq!(
        w.env.provider(&w.b.pda).slashed_total,
        default_params().slash_amount
    );
    assert_eq!(w.env.provider(&w.c.pda).slashed_total, 0);
    assert_eq!(w.env.provider(&w.a.pda).slashed_total, 0);
    let job = w.env.job(&w.job);
    assert_eq!(
        job.accrued,
        cost(INTERVAL) - resolved[0].fees,
        "the interval stays owed to the provider (less the checkers' fees)"
    );
    assert_eq!(w.segment(1).unwrap().withheld, 0);
    assert_eq!(w.segment(1).unwrap().verified_to, Some(vv.to));
    w.env.assert_invariants();
}

/// A checker in league with the liar seals, waits for the honest one's
/// reveal, and then keeps its own: one answer is a dispute too, once the
/// window has passed, and the second round catches the lie.
#[test]
fn a_checker_silent_after_the_others_reveal_goes_to_a_second_round() {
    let (mut w, v, d, e) = a_lie_vouched_for(false);
    let (c, real) = (w.c.fork(), w.honest(&v, 100));
    w.reveal(&c, &v, real).expect("the honest referee reveals");
    let window = i64::from(default_params().challenge_window_secs);
    let opened_at = w.verification(&v).opened_at;
    let scheduler = w.env.scheduler.insecure_clone();
    // While the verifier may still reveal, there is no dispute yet.
    w.env.set_time(opened_at + window);
    expect_error(
        w.env.send(&[w.second_round(&v, &d, &e)], &[&scheduler]),
        McjsError::SecondRoundNotOpen,
    );
    // Past the window, nobody may resolve it before its second round had
    // its chance.
    w.env.set_time(opened_at + window + 1);
    expect_error(
        w.resolve(&v, Some(w.a.pda), Some(w.on_the_liar())),
        McjsError::VerificationUndecided,
    );
    w.env
        .send(&[w.second_round(&v, &d, &e)], &[&scheduler])
        .expect("the second round opens");
    let real = w.honest(&v, 100);
    w.answer_as(&v, &[(&d, real), (&e, real)], true);
    let logs = w.resolve(&v, Some(w.a.pda), Some(w.on_the_liar())).unwrap();
    let resolved = events::<VerificationResolved>(&logs);
    assert_eq!(resolved[0].outcome, VerificationOutcome::ProviderWrong);
    assert_eq!(resolved[0].slashed, default_params().slash_amount);
    w.env.assert_invariants();
}

/// A dispute waits for its second round half a window, no longer: then it
/// resolves on what the first round revealed (Inconclusive). A second
/// round that disagrees too decides at once, and there is no third.
#[test]
fn a_dispute_waits_half_a_window_for_its_second_round_and_never_goes_to_a_third() {
    let (mut w, v, d, e) = a_lie_vouched_for(true);
    let window = i64::from(default_params().challenge_window_secs);
    let disputed_at = w.verification(&v).opened_at;
    let scheduler = w.env.scheduler.insecure_clone();
    w.env.set_time(disputed_at + window / 2);
    expect_error(w.resolve(&v, None, None), McjsError::VerificationUndecided);
    w.env.set_time(disputed_at + window / 2 + 1);
    let before = w.env.snapshot();
    expect_error(
        w.env.send(&[w.second_round(&v, &d, &e)], &[&scheduler]),
        McjsError::SecondRoundNotOpen,
    );
    w.env.assert_unchanged(&before);
    let logs = w.resolve(&v, None, None).unwrap();
    let resolved = events::<VerificationResolved>(&logs);
    assert_eq!(resolved[0].outcome, VerificationOutcome::Inconclusive);
    assert_eq!(resolved[0].slashed, 0);
    w.env.assert_invariants();

    // Another check, whose second round disagrees too.
    let (mut w, v, d, e) = a_lie_vouched_for(true);
    let scheduler = w.env.scheduler.insecure_clone();
    w.env
        .send(&[w.second_round(&v, &d, &e)], &[&scheduler])
        .unwrap();
    let (vouch, real) = (vouching(&w, &v), w.honest(&v, 100));
    w.answer_as(&v, &[(&d, real), (&e, vouch)], true);
    assert_eq!(
        w.verification(&v).state,
        VerificationState::Decided {
            outcome: VerificationOutcome::Inconclusive
        },
        "decided by the second round alone"
    );
    let (f, g) = two_more(&mut w);
    expect_error(
        w.env.send(&[w.second_round(&v, &f, &g)], &[&scheduler]),
        McjsError::SecondRoundNotOpen,
    );
    let logs = w.resolve(&v, None, None).unwrap();
    assert_eq!(
        events::<VerificationResolved>(&logs)[0].outcome,
        VerificationOutcome::Inconclusive
    );
    w.env.assert_invariants();
}

/// A provider whose made-up interval was drawn leaves the job and asks for
/// its whole stake, hoping to take it out before the check slashes it:
/// the stake stays until every verified payment to it is released, so the
/// check's slash finds it.
#[test]
fn a_stake_cannot_leave_while_a_check_could_still_slash_it() {
    let mut w = world(PPM);
    w.env.warp(2);
    w.lie(100);
    let v = w.open();
    let real = w.honest(&v, 100);
    w.answer(&v, Some(real), Some(real));
    let all = w.env.provider(&w.a.pda).stake;
    let request = ix::request_withdrawal(&w.a.key(), all);
    let kp = w.a.wallet.kp.insecure_clone();
    w.env.send(&[request], &[&kp]).unwrap();
    let scheduler = w.env.scheduler.insecure_clone();
    let a = w.a.fork();
    let token = w.owner.token;
    w.env
        .report(&scheduler, &w.job, &token, &a, 0, FailureCause::NodeLost)
        .unwrap();
    assert_eq!(w.env.provider(&w.a.pda).active_assignments, 0);
    w.env.warp(default_params().withdrawal_cooldown_secs as i64);
    let withdraw = ix::withdraw_stake(&w.a.key(), &w.a.wallet.token, &w.env.mint);
    let before = w.env.snapshot();
    expect_error(
        w.env.send(&[withdraw.clone()], &[&kp]),
        McjsError::SegmentsHeld,
    );
    w.env.assert_unchanged(&before);

    let stake = w.env.provider(&w.a.pda).stake;
    w.resolve(&v, Some(w.a.pda), None).unwrap();
    let slash = default_params().slash_amount;
    assert_eq!(
        w.env.provider(&w.a.pda).stake,
        stake - slash,
        "the check's slash found the stake"
    );
    w.release(1).unwrap();
    assert_eq!(w.env.provider(&w.a.pda).held_segments, 0);
    w.env.send(&[withdraw], &[&kp]).unwrap();
    assert_eq!(w.env.provider(&w.a.pda).stake, 0);
    w.env.assert_invariants();
}

/// An owner pauses and resumes its verified job in a loop: each
/// assignment's Segment is paid for by the scheduler until its challenge
/// window passes. The job may hold at most `MAX_LIVE_SEGMENTS` of them
/// unreleased: the next assignment is refused (the scheduler's rent is
/// bounded per job) until one is released.
#[test]
fn pausing_and_resuming_in_a_loop_holds_at_most_a_bounded_number_of_segments() {
    let mut w = world(PPM);
    let mut generations = vec![w.env.job(&w.job).generation];
    let pause_resume = |w: &mut World| {
        let pause = w
            .env
            .job_accounts(&w.job, &w.a, 0, &w.job, 0)
            .pause(&w.owner.key());
        let kp = w.owner.kp.insecure_clone();
        w.env.send(&[pause], &[&kp]).expect("pause");
        w.env
            .send(&[ix::resume_job(&w.owner.key(), &w.job)], &[&kp])
            .expect("resume");
    };
    while w.env.job(&w.job).live_segments < MAX_LIVE_SEGMENTS {
        w.env.warp(60);
        pause_resume(&mut w);
        let a = w.a.fork();
        w.env.assign(&w.job, &a, 0).unwrap();
        w.env.start(&w.job, &a, 0).unwrap();
        generations.push(w.env.job(&w.job).generation);
    }
    assert_eq!(generations.len(), MAX_LIVE_SEGMENTS as usize);
    w.env.warp(60);
    pause_resume(&mut w);
    let a = w.a.fork();
    let before = w.env.snapshot();
    expect_error(w.env.assign(&w.job, &a, 0), McjsError::SegmentsFull);
    w.env.assert_unchanged(&before);

    // Once the first segment's window has passed and it is released, the
    // job is placed again.
    let SegmentState::Held { release_at } = w.segment(generations[0]).unwrap().state else {
        panic!("the first segment is held")
    };
    w.env.set_time(release_at);
    w.release(generations[0]).unwrap();
    w.env.assign(&w.job, &a, 0).unwrap();
    w.env.assert_invariants();
}

#[test]
fn a_start_the_provider_attested_itself_and_cannot_be_restored_counts_against_it() {
    let mut w = world(PPM);
    w.env.warp(2);
    w.attest(100);
    w.attest(200);
    let v = w.open();
    assert_eq!(w.verification(&v).from.map(|f| f.step), Some(100));
    w.answer(
        &v,
        Some(CheckAnswer::StartUnavailable),
        Some(CheckAnswer::StartUnavailable),
    );
    assert_eq!(
        w.verification(&v).decide(),
        VerificationOutcome::ProviderWrong,
        "step 100 was this assignment's own: it had to stay in the store"
    );
    // A start from an earlier assignment: not this provider's to keep.
    let mut earlier = w.verification(&v);
    earlier.from = earlier.from.map(|mut f| {
        f.generation -= 1;
        f
    });
    assert_eq!(earlier.decide(), VerificationOutcome::Inconclusive);
    // One checker unable to restore, the other reproducing: not decisive.
    let mut split = w.verification(&v);
    split.referee_answer = Some(w.honest(&v, 200));
    assert_eq!(split.decide(), VerificationOutcome::Inconclusive);
}

#[test]
fn three_different_checkpoints_slash_nobody_and_leave_the_interval_unpaid() {
    let mut w = world(PPM);
    w.env.warp(2);
    w.attest(100);
    let v = w.open();
    let vv = w.verification(&v);
    let run = |tag: &[u8]| CheckAnswer::Reproduced {
        hash: possession(&vv, tag),
        possession: possession(&vv, &[tag, b"bytes"].concat()),
    };
    w.answer(&v, Some(run(b"one")), Some(run(b"two")));
    // A second round would find two more checkpoints; none is opened here.
    assert_eq!(w.verification(&v).state, VerificationState::Disputed);
    w.env
        .warp(default_params().challenge_window_secs as i64 / 2 + 1);
    let logs = w.resolve(&v, None, None).unwrap();
    let resolved = events::<VerificationResolved>(&logs);
    assert_eq!(resolved[0].outcome, VerificationOutcome::Nondeterministic);
    assert_eq!((resolved[0].slashed, resolved[0].fees), (0, 0));
    for p in [&w.a, &w.b, &w.c] {
        assert_eq!(w.env.provider(&p.pda).slashed_total, 0);
    }
    // A liar helped by a checker answering at random looks the same: the
    // interval is not paid, but nothing else of the segment is refunded.
    assert_eq!(w.env.job(&w.job).accrued, 0);
    assert!(!w.env.job(&w.job).barred_provider.is_some());
    w.env.warp(INTERVAL);
    w.complete().unwrap();
    w.env.assert_invariants();
}

#[test]
fn ending_the_job_after_a_draw_is_no_escape_from_its_check() {
    // The liar sees its interval drawn (the draw is public once the slot
    // hash is) and stops the job with a fatal exit before the scheduler
    // opens the check. One provider's word ends no job: it is queued again.
    let mut w = world(PPM);
    w.env.warp(2);
    w.attest(100);
    w.lie(200);
    let scheduler = w.env.scheduler.insecure_clone();
    let (token, a) = (w.owner.token, w.a.fork());
    w.env
        .report(&scheduler, &w.job, &token, &a, 0, FailureCause::JobFatal)
        .unwrap();
    let state = w.env.job(&w.job).state;
    assert!(matches!(state, JobState::Recovering { .. }), "{state:?}");
    let v = w.open();
    let real = w.honest(&v, 200);
    w.answer(&v, Some(real), Some(real));
    let owner_before = w.env.balance(&w.owner.token);
    let logs = w.resolve(&v, Some(w.a.pda), None).unwrap();
    let resolved = events::<VerificationResolved>(&logs);
    assert_eq!(resolved[0].outcome, VerificationOutcome::ProviderWrong);
    assert_eq!(resolved[0].slashed, default_params().slash_amount);
    assert_eq!(
        resolved[0].refund,
        2 * cost(INTERVAL),
        "the liar's whole segment"
    );
    assert_eq!(
        w.env.balance(&w.owner.token) - owner_before,
        2 * cost(INTERVAL)
    );
    w.env.assert_invariants();
}

#[test]
fn nobody_reports_a_job_late_while_it_waits_on_a_check() {
    let mut w = world(PPM);
    w.env.warp(2);
    w.attest(100);
    let v = w.open();
    // The job finished: its completion waits on the check. Two windows pass.
    let window = 900 * i64::from(default_params().liveness_factor);
    w.env.warp(2 * window);
    let (token, a) = (w.owner.token, w.a.fork());
    let stranger = w.env.wallet(0).kp;
    let scheduler = w.env.scheduler.insecure_clone();
    let before = w.env.snapshot();
    expect_error(
        w.env
            .report(&stranger, &w.job, &token, &a, 0, FailureCause::NodeLost),
        McjsError::VerificationOpen,
    );
    expect_error(
        w.env.report(
            &scheduler,
            &w.job,
            &token,
            &a,
            0,
            FailureCause::CheckpointOverdue,
        ),
        McjsError::VerificationOpen,
    );
    w.env.assert_unchanged(&before);
    // Resolved (silence: past its window), the job gets a full window
    // before anyone may report it.
    w.resolve(&v, None, None).unwrap();
    let before = w.env.snapshot();
    expect_error(
        w.env
            .report(&stranger, &w.job, &token, &a, 0, FailureCause::NodeLost),
        McjsError::JobNotStalled,
    );
    w.env.assert_unchanged(&before);
    w.complete().unwrap();
    assert_eq!(w.env.provider(&w.a.pda).slashed_total, 0);
    w.env.assert_invariants();
}

#[test]
fn compensation_never_counts_held_pay_so_a_later_proven_wrong_still_resolves() {
    let mut w = world(PPM);
    w.env.warp(2);
    w.attest(100);
    w.lie(200);
    let v = w.open();
    // The job ends unfinished after its provider's failure before the
    // check resolves: its node is lost, and its owner gives up.
    let scheduler = w.env.scheduler.insecure_clone();
    let (token, a) = (w.owner.token, w.a.fork());
    w.env
        .report(&scheduler, &w.job, &token, &a, 0, FailureCause::NodeLost)
        .unwrap();
    let cancel = ix::cancel_job(&w.owner.key(), &w.job, &token, &w.env.mint);
    let owner = w.owner.kp.insecure_clone();
    w.env.send(&[cancel], &[&owner]).expect("cancel");
    let job = w.env.job(&w.job);
    assert!(
        matches!(job.state, JobState::Cancelled { .. }),
        "{:?}",
        job.state
    );
    assert!(job.held > 0);
    // A verified job's pay is held until released: none of it is
    // compensable, so a later refund of it can never be paid twice.
    assert_eq!(job.paid, job.held);
    assert_eq!(job.compensable(), 0, "held pay is not compensable");
    let admin = w.env.admin.insecure_clone();
    let before = w.env.snapshot();
    expect_error(
        w.env.compensate(&admin, &w.job, &token, 1),
        McjsError::NotCompensable,
    );
    w.env.assert_unchanged(&before);
    // The check proves the liar wrong: it still resolves, refund and all.
    let real = w.honest(&v, 200);
    w.answer(&v, Some(real), Some(real));
    let logs = w.resolve(&v, Some(w.a.pda), None).unwrap();
    let resolved = events::<VerificationResolved>(&logs);
    assert_eq!(resolved[0].outcome, VerificationOutcome::ProviderWrong);
    assert!(resolved[0].refund > 0);
    w.env.assert_invariants();
}

#[test]
fn a_closed_jobs_id_is_never_taken_again() {
    let mut env = Env::new();
    let owner = env.wallet(1_000 * USDC);
    let job = env.submit(&owner, job_args(1, 10 * USDC)).unwrap();
    let kp = owner.kp.insecure_clone();
    let cancel = ix::cancel_job(&kp.pubkey(), &job, &owner.token, &env.mint);
    env.send(&[cancel], &[&kp]).unwrap();
    env.close(&kp, &job, &owner.token).unwrap();
    assert!(env.account(&job).is_none());
    for taken in [1, 0] {
        let before = env.snapshot();
        expect_error(
            env.submit(&owner, job_args(taken, 10 * USDC))
                .map(|_| vec![]),
            McjsError::JobIdTaken,
        );
        env.assert_unchanged(&before);
    }
    // Another owner's ids are its own; the owner's next id is free.
    let other = env.wallet(100 * USDC);
    env.submit(&other, job_args(1, 10 * USDC)).unwrap();
    env.submit(&owner, job_args(2, 10 * USDC)).unwrap();
    env.assert_invariants();
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
    // The output's attestation moves no tokens and needs no segment; the
    // completion settles it and does.
    let operator = w.a.operator(0).insecure_clone();
    let bare = bare_complete(&w, &operator);
    w.env.send(&[bare], &[&operator]).unwrap();
    w.env.warp(i64::from(default_params().draw_secs));
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
    let wrong = complete_by(
        &w,
        &operator.pubkey(),
        1,
        [1; 32],
        Some(pda::segment(&other, 1)),
    );
    expect_error(w.env.send(&[wrong], &[&operator]), McjsError::WrongSegment);
    w.env.assert_unchanged(&before);
}

fn bare_complete(w: &World, operator: &solana_keypair::Keypair) -> mcjs_client::Instruction {
    complete_by(w, &operator.pubkey(), 1, [1; 32], None)
}

/// `complete_job` of the job on A's node 0, signed by `signer`, naming
/// `segment` as the assignment's Segment.
fn complete_by(
    w: &World,
    signer: &Pubkey,
    generation: u32,
    output_hash: [u8; 32],
    segment: Option<Pubkey>,
) -> mcjs_client::Instruction {
    ix::JobAccounts {
        segment,
        ..w.env
            .job_accounts(&w.job, &w.a, 0, &w.owner.token, generation)
    }
    .complete(signer, output_hash)
}

#[test]
fn a_liar_proven_wrong_while_its_job_runs_on_a_checkers_node_is_resolved() {
    // A lies at 200, then its node is lost; the job moves on to B's node,
    // the verifier's provider, before the check resolves.
    let mut w = world(PPM);
    w.env.warp(2);
    w.attest(100);
    w.lie(200);
    let v = w.open();
    let b = w.b.fork();
    let generation = w.move_to(&b);
    let real = w.honest(&v, 200);
    w.answer(&v, Some(real), Some(real));
    let current = ix::CurrentAssignment {
        node: b.nodes[0],
        provider: Some(b.pda),
        provider_payout: b.payout,
        segment: Some(pda::segment(&w.job, generation)),
    };
    let logs = w.resolve(&v, Some(w.a.pda), Some(current)).unwrap();
    let resolved = events::<VerificationResolved>(&logs);
    assert_eq!(resolved[0].outcome, VerificationOutcome::ProviderWrong);
    assert!(resolved[0].rolled_back);
    // Step 100 is the liar's own unchecked checkpoint: back to the start.
    assert_eq!(resolved[0].restore_point, None);
    let job = w.env.job(&w.job);
    assert!(matches!(job.state, JobState::Recovering { .. }));
    assert_eq!(
        w.env.node(&b.nodes[0]).status,
        NodeStatus::Available,
        "the honest checker's node stays in service"
    );
    assert_eq!(w.env.provider(&b.pda).slashed_total, 0);
    w.env.assert_invariants();
}

/// A first-round checker that vouched for a liar and now runs the liar's
/// job (the job moved to its node when the liar's was lost) is both the
/// wrong checker and the current provider: the second round proves the lie,
/// the resolve passes its accounts once (as the provider) and slashes it
/// once as a checker, beside the liar's slash, and the job rolls back off
/// its node.
#[test]
fn a_wrong_first_round_checker_that_runs_the_job_now_is_slashed_once() {
    let mut w = world(PPM);
    let (d, e) = two_more(&mut w);
    w.env.warp(2);
    w.attest(100);
    w.lie(200);
    let v = w.open();
    for p in [&d, &e] {
        w.env.enter_pool(p, 0).unwrap();
    }
    let scheduler = w.env.scheduler.insecure_clone();
    let (b, c) = (w.b.fork(), w.c.fork());
    let generation = w.move_to(&b);
    let (vouch, real) = (vouching(&w, &v), w.honest(&v, 200));
    w.answer_as(&v, &[(&b, vouch), (&c, real)], true);
    assert_eq!(w.verification(&v).state, VerificationState::Disputed);
    w.env
        .send(&[w.second_round(&v, &d, &e)], &[&scheduler])
        .expect("the second round opens");
    let real = w.honest(&v, 200);
    w.answer_as(&v, &[(&d, real), (&e, real)], true);
    let current = ix::CurrentAssignment {
        node: b.nodes[0],
        provider: Some(b.pda),
        provider_payout: b.payout,
        segment: Some(pda::segment(&w.job, generation)),
    };
    let stake_b = w.env.provider(&b.pda).stake;
    // A was slashed once already, for the node it lost.
    let slashed_a = w.env.provider(&w.a.pda).slashed_total;
    let logs = w.resolve(&v, Some(w.a.pda), Some(current)).unwrap();
    let resolved = events::<VerificationResolved>(&logs);
    assert_eq!(resolved[0].outcome, VerificationOutcome::ProviderWrong);
    assert!(resolved[0].rolled_back);
    let slashed = events::<CheckerSlashed>(&logs);
    assert_eq!(
        slashed.iter().map(|s| s.provider).collect::<Vec<_>>(),
        [b.pda],
        "the vouching checker, once"
    );
    let slash = default_params().slash_amount;
    assert_eq!(w.env.provider(&b.pda).stake, stake_b - slash);
    assert_eq!(w.env.provider(&b.pda).slashed_total, slash);
    assert_eq!(w.env.provider(&w.a.pda).slashed_total, slashed_a + slash);
    assert!(matches!(
        w.env.job(&w.job).state,
        JobState::Recovering { .. }
    ));
    w.env.assert_invariants();
}

/// A finished job that waited on a check is not billed for the wait: its
/// completion after the check settled bills at most one checkpoint interval
/// past its last checkpoint, not the billing window (interval × liveness
/// factor). A completion with no check in between bills as before.
#[test]
fn a_completion_that_waited_on_a_check_bills_nothing_past_the_last_attestation() {
    let mut w = world(PPM);
    w.env.warp(2);
    w.attest(100);
    let v = w.open();
    // The job finishes half an interval after its checkpoint: its output
    // is attested, and it waits for the check to complete.
    w.env.warp(INTERVAL / 2);
    let billed = w.env.job(&w.job).billed_secs;
    w.attest_output();
    assert_eq!(
        w.env.job(&w.job).billed_secs - billed,
        (INTERVAL / 2 + 2) as u64,
        "the output's stretch is billed"
    );
    w.env.warp(i64::from(default_params().draw_secs));
    let before = w.env.snapshot();
    expect_error(w.complete_call(), McjsError::VerificationOpen);
    w.env.assert_unchanged(&before);
    // The checkers take two intervals to answer.
    w.env.warp(2 * INTERVAL);
    let honest = w.honest(&v, 100);
    w.answer(&v, Some(honest), Some(honest));
    w.resolve(&v, None, None).unwrap();
    let billed = w.env.job(&w.job).billed_secs;
    w.complete_call().unwrap();
    assert_eq!(
        w.env.job(&w.job).billed_secs,
        billed,
        "the wait for the check is not billed"
    );
    w.env.assert_invariants();
}
