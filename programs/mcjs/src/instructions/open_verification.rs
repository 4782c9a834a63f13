use anchor_lang::compat::solana_sysvar::slot_hashes;
use anchor_lang::prelude::*;

use crate::errors::McjsError;
use crate::events::{emit_event, VerificationOpened};
use crate::state::{
    draw_seed, possession_key, sampled, seeds::*, slot_hash_after, CheckerPool, Config,
    ConfigParams, Job, Node, NodeStatus, PoolMember, Provider, SchedulerLease, Segment,
    SegmentState, Verification, VerificationState, NO_OPEN_INTERVAL,
};

/// No seeds are checked on the Config, lease, job, segment, pool, checkers'
/// nodes or providers (state/seeds.rs, "Where a program account's seeds are
/// not checked again"): the segment names its job (`has_one`) and its GPU
/// model the pool, each checker's node its provider; the scheduler chooses
/// the job (checked in `validate`), the pool's draw the checkers
/// ([`require_drawn`]: each member drawn before them that cannot check is
/// shown by its node's and provider's accounts, after these). The new
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
    pub verifier: Checker<'info>,
    pub referee: Checker<'info>,
    /// The checker pool of the attester's GPU model when it was assigned.
    #[account(constraint = pool.gpu_model == segment.gpu_model @ McjsError::CheckerHardwareClass)]
    pub pool: Box<Account<'info, CheckerPool>>,
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
        let (verifier, referee) = (self.verifier.provider.key(), self.referee.provider.key());
        require!(
            verifier != claimed && referee != claimed && verifier != referee,
            McjsError::InvalidChecker
        );
        for (node, provider) in [
            (&self.verifier.node, &self.verifier.provider),
            (&self.referee.node, &self.referee.provider),
        ] {
            require_fit_checker(node, provider, &self.config.params, job, &self.segment)?;
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
        let proofs = ctx.remaining_accounts;
        let accounts = ctx.accounts;
        let job_key = accounts.job.key();
        let interval = accounts.job.checkpoint_count;
        let (draw_slot, slot_hash) = {
            let data = accounts.slot_hashes.try_borrow_data()?;
            slot_hash_after(&data, accounts.job.last_attest_slot)
                .ok_or(McjsError::DrawUnavailable)?
        };
        require!(
            sampled(
                &slot_hash,
                &job_key,
                interval,
                accounts.job.verification_ppm
            ),
            McjsError::NotSampled
        );
        require_drawn(
            &Draw {
                pool: &accounts.pool,
                seed: first_round_seed(&slot_hash, &job_key, interval),
                exclude: vec![accounts.segment.provider],
                params: &accounts.config.params,
                job: &accounts.job,
                segment: &accounts.segment,
                now,
            },
            &[accounts.verifier.named(), accounts.referee.named()],
            proofs,
        )?;
        let job = &mut accounts.job;
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
            verifier_node: accounts.verifier.node.key(),
            referee_node: accounts.referee.node.key(),
            state: VerificationState::Open,
            interval,
            segment: segment.key(),
            provider: segment.provider,
            node: segment.node,
            verifier_provider: accounts.verifier.provider.key(),
            verifier_payout: accounts.verifier.provider.payout,
            referee_provider: accounts.referee.provider.key(),
            referee_payout: accounts.referee.provider.payout,
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
    params: &ConfigParams,
    job: &Job,
    segment: &Segment,
) -> Result<()> {
    require!(
        node.status != NodeStatus::Offline,
        McjsError::InvalidChecker
    );
    provider.require_min_stake(params.min_provider_stake)?;
    job.requirements
        .check(&node.hardware)
        .map_err(|_| error!(McjsError::InvalidChecker))?;
    require!(
        node.hardware.gpu_model == segment.gpu_model,
        McjsError::CheckerHardwareClass
    );
    Ok(())
}

/// The seed of a first round's draw: `sha256("mcjs-checkers/1" ‖ the
/// sampling draw's slot hash ‖ job ‖ interval)`, fixed by the slot after
/// the attestation.
pub fn first_round_seed(slot_hash: &[u8; 32], job: &Pubkey, interval: u32) -> [u8; 32] {
    draw_seed(
        b"mcjs-checkers/1",
        &[slot_hash, job.as_ref(), &interval.to_le_bytes()],
    )
}

/// A draw of checkers from a pool, and what a drawn member must fit.
pub struct Draw<'a> {
    pub pool: &'a CheckerPool,
    pub seed: [u8; 32],
    /// Providers never drawn: the attester and whoever the check involved.
    pub exclude: Vec<Pubkey>,
    pub params: &'a ConfigParams,
    pub job: &'a Job,
    pub segment: &'a Segment,
    pub now: i64,
}

/// Whether a drawn member checks: its node is the one it entered, of its
/// provider, fit for the segment's check ([`require_fit_checker`]), and its
/// provider still commits the stake it is weighted by.
pub fn member_fits(draw: &Draw<'_>, member: &PoolMember, node: &Node, provider: &Provider) -> bool {
    node.provider == member.provider
        && provider.committed_stake() >= member.weight
        && require_fit_checker(node, provider, draw.params, draw.job, draw.segment).is_ok()
}

/// The `named` checkers are the members the pool's draw gives (in any
/// order: verifier and referee are alike), and each member drawn before
/// them that is not named is shown, by its node's and provider's accounts
/// in `proofs` in the order drawn, to be unable to check
/// ([`member_fits`]). Nothing else is accepted in `proofs`.
pub fn require_drawn(
    draw: &Draw<'_>,
    named: &[Named<'_>],
    proofs: &[AccountInfo<'_>],
) -> Result<()> {
    let mut proofs = proofs.iter();
    let mut waiting: Vec<usize> = (0..named.len()).collect();
    let mut exclude = draw.exclude.clone();
    let drawn = draw
        .pool
        .walk(&draw.seed, named.len(), &mut exclude, draw.now, |member| {
            if let Some(at) = waiting
                .iter()
                .position(|&i| named[i].0 == member.node && named[i].2 == member.provider)
            {
                let (_, node, _, provider) = named[waiting.remove(at)];
                require!(
                    member_fits(draw, member, node, provider),
                    McjsError::CheckerNotDrawn
                );
                return Ok(true);
            }
            let (Some(node), Some(provider)) = (proofs.next(), proofs.next()) else {
                return err!(McjsError::CheckerNotDrawn);
            };
            require!(
                node.key() == member.node && provider.key() == member.provider,
                McjsError::CheckerNotDrawn
            );
            let fits = member_fits(
                draw,
                member,
                &read_program_account::<Node>(node)?,
                &read_program_account::<Provider>(provider)?,
            );
            require!(!fits, McjsError::CheckerNotDrawn);
            Ok(false)
        })?;
    require!(drawn.is_some(), McjsError::NoCheckerDrawn);
    require!(proofs.next().is_none(), McjsError::UnexpectedAccounts);
    Ok(())
}

/// A named checker: its node's key and account, its provider's key and
/// account.
pub type Named<'a> = (Pubkey, &'a Node, Pubkey, &'a Provider);

/// An open verification the scheduler that holds the lease acts on (a
/// second round, a replaced checker). No seeds are checked on the
/// verification (state/seeds.rs, "Where a program account's seeds are not
/// checked again"); its job and segment are pinned by address.
#[derive(Accounts)]
pub struct OpenCheck<'info> {
    pub scheduler: Signer<'info>,
    pub config: Box<Account<'info, Config>>,
    pub lease: Box<Account<'info, SchedulerLease>>,
    #[account(mut)]
    pub verification: Box<Account<'info, Verification>>,
    #[account(address = verification.job @ McjsError::WrongSegment)]
    pub job: Box<Account<'info, Job>>,
    #[account(address = verification.segment @ McjsError::WrongSegment)]
    pub segment: Box<Account<'info, Segment>>,
}

/// A checker a scheduler names: a node and its provider.
#[derive(Accounts)]
pub struct Checker<'info> {
    #[account(constraint = node.provider == provider.key() @ McjsError::WrongProvider)]
    pub node: Box<Account<'info, Node>>,
    pub provider: Box<Account<'info, Provider>>,
}

impl Checker<'_> {
    /// This checker as [`require_drawn`] takes a named one.
    pub fn named(&self) -> Named<'_> {
        (
            self.node.key(),
            &self.node,
            self.provider.key(),
            &self.provider,
        )
    }
}

/// An account of this program's type `T`, read from a remaining account:
/// owned by the program, with `T`'s discriminator.
fn read_program_account<T: AccountDeserialize + Owner>(info: &AccountInfo<'_>) -> Result<T> {
    require_keys_eq!(*info.owner, T::owner(), McjsError::CheckerNotDrawn);
    let data = info.try_borrow_data()?;
    T::try_deserialize(&mut &data[..])
}
