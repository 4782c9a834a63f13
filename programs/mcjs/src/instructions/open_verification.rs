use anchor_lang::compat::solana_sysvar::slot_hashes;
use anchor_lang::prelude::*;

use crate::errors::McjsError;
use crate::events::{emit_event, VerificationOpened};
use crate::state::{
    possession_key, sampled, seeds::*, slot_hash_after, Config, Job, Node, NodeStatus, Provider,
    SchedulerLease, Segment, SegmentState, Verification, VerificationState, NO_OPEN_INTERVAL,
};

/// No seeds are checked on the Config, lease, job, segment, checkers' nodes or
/// providers (state/seeds.rs, "Where a program account's seeds are not
/// checked again"): the segment names its job (`has_one`), each checker's
/// node its provider, and the
/// scheduler chooses the job and checkers (checked in `validate`). The new
/// Verification is created at its PDA (`init`).
#[derive(Accounts)]
pub struct OpenVerification<'info> {
    /// The scheduler that holds the lease.
    #[account(mut)]
    pub scheduler: Signer<'info>,
    pub config: Box<Account<'info, Config>>,
    pub lease: Box<Account<'info, SchedulerLease>>,
    #[account(mut)]
    pub job: Box<Account<'info, Job>>,
    /// The segment of the assignment that attested the interval's end.
    #[account(
        mut,
        has_one = job @ McjsError::WrongSegment,
    )]
    pub segment: Box<Account<'info, Segment>>,
    /// One verification per interval, ever: its PDA is the interval's.
    #[account(
        init,
        payer = scheduler,
        space = 8 + Verification::INIT_SPACE,
        seeds = [SEED_PREFIX, job.key().as_ref(), SEED_VERIFICATION, &job.checkpoint_count.to_le_bytes()],
        bump,
    )]
    pub verification: Box<Account<'info, Verification>>,
    #[account(
        constraint = verifier_node.provider == verifier_provider.key() @ McjsError::WrongProvider,
    )]
    pub verifier_node: Box<Account<'info, Node>>,
    pub verifier_provider: Box<Account<'info, Provider>>,
    #[account(
        constraint = referee_node.provider == referee_provider.key() @ McjsError::WrongProvider,
    )]
    pub referee_node: Box<Account<'info, Node>>,
    pub referee_provider: Box<Account<'info, Provider>>,
    /// CHECK: the SlotHashes sysvar, by address; read raw (its newest
    /// entries only) rather than deserialised whole.
    #[account(address = slot_hashes::ID)]
    pub slot_hashes: UncheckedAccount<'info>,
    pub system_program: Program<'info, System>,
}

impl OpenVerification<'_> {
    fn validate(&self, now: i64) -> Result<()> {
        self.lease
            .require_holder(&self.config, &self.scheduler.key())?;
        let job = &self.job;
        require!(
            job.holds_payment_under(&self.config.params),
            McjsError::VerificationOff
        );
        // Only the latest interval, within its window, and attested by the
        // assignment whose segment is passed (still unpaid), once. A job
        // that ended since (a completion, a fatal exit) keeps it drawable
        // while its pay is held: ending the job is no escape from a check.
        let to = job
            .last_checkpoint
            .ok_or(McjsError::IntervalNotOpenToVerification)?;
        let window = i64::from(self.config.params.challenge_window_secs);
        require!(
            job.checkpoint_count > job.last_opened_interval
                && job.last_attest_slot != NO_OPEN_INTERVAL
                && now <= to.time.saturating_add(window)
                && self.segment.generation == to.generation
                && self.segment.state != SegmentState::Refunded
                && !self.segment.disproven,
            McjsError::IntervalNotOpenToVerification
        );
        // Two other providers, apart from each other, with nodes that could
        // run the job and a stake that still backs them.
        let claimed = self.segment.provider;
        let (verifier, referee) = (self.verifier_provider.key(), self.referee_provider.key());
        require!(
            verifier != claimed && referee != claimed && verifier != referee,
            McjsError::InvalidChecker
        );
        for (node, provider) in [
            (&self.verifier_node, &self.verifier_provider),
            (&self.referee_node, &self.referee_provider),
        ] {
            require_fit_checker(node, provider, &self.config, job, &self.segment)?;
        }
        Ok(())
    }

    /// Opens the verification of the job's latest attested interval if the
    /// draw selects it: `sha256(hash of the first slot after the
    /// attestation's ‖ job ‖ interval)` read as a little-endian u64, modulo
    /// one million, below the job's sample rate in parts per million. The
    /// segment's payment and the job's completion wait until it resolves.
    #[access_control(ctx.accounts.validate(Clock::get()?.unix_timestamp))]
    pub fn open_verification(ctx: Context<Self>) -> Result<()> {
        let now = Clock::get()?.unix_timestamp;
        let accounts = ctx.accounts;
        let job_key = accounts.job.key();
        let job = &mut accounts.job;
        let interval = job.checkpoint_count;
        let (draw_slot, slot_hash) = {
            let data = accounts.slot_hashes.try_borrow_data()?;
            slot_hash_after(&data, job.last_attest_slot).ok_or(McjsError::DrawUnavailable)?
        };
        require!(
            sampled(&slot_hash, &job_key, interval, job.verification_ppm),
            McjsError::NotSampled
        );
        let to = job
            .last_checkpoint
            .ok_or(McjsError::IntervalNotOpenToVerification)?;
        let segment = &mut accounts.segment;
        // Still on its node the assignment's earnings are the job's;
        // settled, its segment keeps them.
        let earned_to = if segment.state == SegmentState::OnNode {
            job.assignment_earned
        } else {
            segment.earned
        };
        let key = accounts.verification.key();
        accounts.verification.set_inner(Verification {
            job: job_key,
            verifier_node: accounts.verifier_node.key(),
            referee_node: accounts.referee_node.key(),
            state: VerificationState::Open,
            interval,
            segment: segment.key(),
            provider: segment.provider,
            node: segment.node,
            verifier_provider: accounts.verifier_provider.key(),
            verifier_payout: accounts.verifier_provider.payout,
            referee_provider: accounts.referee_provider.key(),
            referee_payout: accounts.referee_provider.payout,
            from: job.prev_checkpoint,
            to,
            interval_amount: job.last_interval_amount,
            earned_to,
            possession_key: possession_key(&slot_hash, &key),
            verifier_commitment: None,
            referee_commitment: None,
            verifier_answer: None,
            referee_answer: None,
            draw_slot,
            opened_at: now,
            resolved_at: None,
            fees: 0,
            slashed: 0,
            rent_payer: accounts.scheduler.key(),
            bump: ctx.bumps.verification,
            replacements: 0,
            first_round: None,
            output: job.output_attested(),
        });
        job.last_opened_interval = interval;
        job.open_verifications = job
            .open_verifications
            .checked_add(1)
            .ok_or(McjsError::Overflow)?;
        segment.open_verifications = segment
            .open_verifications
            .checked_add(1)
            .ok_or(McjsError::Overflow)?;
        let verification = &accounts.verification;
        emit_event(VerificationOpened {
            job: job_key,
            verification: verification.key(),
            interval,
            provider: segment.provider,
            from_step: verification.from.map(|c| c.step),
            to_step: to.step,
            claimed_hash: to.hash,
            verifier_node: verification.verifier_node,
            referee_node: verification.referee_node,
            draw_slot,
            at: now,
        });
        Ok(())
    }
}

/// A checker's node and provider fit a segment's check: the node is not
/// offline, the provider keeps the minimum stake, and the node could run
/// the job and is of the segment's GPU model. A verified job declares
/// bitwise determinism, which holds only on the hardware class it ran on:
/// the GPU model the attester's node had when it was assigned (the segment
/// keeps it, so that renaming the node escapes no check; the job gets its
/// declared GPU count on any node that fits). `open_verification` asks it
/// of both checkers, `replace_checker` of a replacement.
pub fn require_fit_checker(
    node: &Node,
    provider: &Provider,
    config: &Config,
    job: &Job,
    segment: &Segment,
) -> Result<()> {
    require!(
        node.status != NodeStatus::Offline,
        McjsError::InvalidChecker
    );
    provider.require_min_stake(config.params.min_provider_stake)?;
    job.requirements
        .check(&node.hardware)
        .map_err(|_| error!(McjsError::InvalidChecker))?;
    require!(
        node.hardware.gpu_model == segment.gpu_model,
        McjsError::CheckerHardwareClass
    );
    Ok(())
}
