use anchor_lang::prelude::*;
use anchor_spl::token::{Mint, Token};

use crate::errors::McjsError;
use crate::events::{emit_event, CheckerSlashed, VerificationResolved};
use crate::instructions::settlement::{
    refund_from_bond, take_off_node, Hold, OffNode, SettlementAccounts,
};
use crate::job_signer_seeds;
use crate::provider_signer_seeds;
use crate::state::{
    seeds::*, CheckpointRecord, Config, Job, Node, Party, Provider, Segment, SegmentState,
    Verification, VerificationOutcome, VerificationState,
};
use crate::token::{can_receive, Vault};

/// No seeds are checked on the Config, job or verification (state/seeds.rs,
/// "Where a program account's seeds are not checked again"): the
/// verification names its job (`has_one`) and segment; token accounts are
/// checked by address or seeds.
#[derive(Accounts)]
pub struct ResolveVerification<'info> {
    /// Anyone: a decided verification is applied by whoever asks.
    pub resolver: Signer<'info>,
    pub config: Box<Account<'info, Config>>,
    #[account(mut)]
    pub job: Box<Account<'info, Job>>,
    /// Closed once applied (its events are the audit record): the rent
    /// goes back to whoever opened it.
    #[account(
        mut,
        has_one = job @ McjsError::WrongSegment,
        has_one = rent_payer @ McjsError::WrongAssignment,
        close = rent_payer,
    )]
    pub verification: Box<Account<'info, Verification>>,
    /// CHECK: the verification's `rent_payer`, checked by `has_one`; only
    /// receives lamports.
    #[account(mut)]
    pub rent_payer: UncheckedAccount<'info>,
    #[account(mut, address = verification.segment @ McjsError::WrongSegment)]
    pub segment: Box<Account<'info, Segment>>,
    #[account(
        mut,
        seeds = [SEED_PREFIX, job.key().as_ref(), SEED_VAULT],
        bump = job.vault_bump,
    )]
    /// CHECK: pinned by its seeds; only paid out of, signed by the job
    /// (the SPL Token program checks its owner and mint), so not
    /// deserialised.
    pub job_vault: UncheckedAccount<'info>,
    #[account(address = config.usdc_mint @ McjsError::WrongMint)]
    pub usdc_mint: Box<Account<'info, Mint>>,
    /// CHECK: the owner's refund account (receives a proven-wrong
    /// segment), pinned to the job's `refund_account`, a token account of
    /// the Config's mint checked when the job was submitted. The five
    /// destinations here are only paid into: not deserialised, and paid
    /// only if they can receive (`token::can_receive`): a participant who
    /// closed its account is not paid, and stops nothing.
    #[account(mut, address = job.refund_account @ McjsError::WrongTokenAccount)]
    pub owner_token: UncheckedAccount<'info>,
    /// CHECK: pinned to the Config's treasury (checked at `initialize`).
    #[account(mut, address = config.treasury @ McjsError::WrongTokenAccount)]
    pub treasury: UncheckedAccount<'info>,
    /// CHECK: pinned to the Config's insurance pool (made at `initialize`).
    #[account(mut, address = config.insurance_pool @ McjsError::WrongTokenAccount)]
    pub insurance_pool: UncheckedAccount<'info>,
    /// CHECK: pinned to the verification's verifier payout account; only
    /// paid into (see `owner_token`).
    #[account(mut, address = verification.verifier_payout @ McjsError::WrongTokenAccount)]
    pub verifier_payout: UncheckedAccount<'info>,
    /// CHECK: pinned to the verification's referee payout account; only
    /// paid into (see `owner_token`).
    #[account(mut, address = verification.referee_payout @ McjsError::WrongTokenAccount)]
    pub referee_payout: UncheckedAccount<'info>,
    /// Whoever's hash lost (the job's provider or the verifier), for a
    /// dispute; checked against the outcome.
    #[account(mut)]
    pub loser: Option<Box<Account<'info, Provider>>>,
    /// CHECK: the loser's stake vault, checked against its seeds in `slash`
    /// before anything moves; only paid out of, signed by the loser (the
    /// SPL Token program checks the vault's owner and mint).
    #[account(mut)]
    pub loser_stake_vault: Option<UncheckedAccount<'info>>,
    /// The job's current assignment, when a proven-wrong interval must take
    /// the job off its node: its node, its provider (omitted when it is the
    /// loser), its provider's payout account (omitted when it is a
    /// checker's, passed above) and its segment (omitted when it is the
    /// verified segment, or the job's payment is not held).
    #[account(mut)]
    pub node: Option<Box<Account<'info, Node>>>,
    #[account(mut)]
    pub provider: Option<Box<Account<'info, Provider>>>,
    /// CHECK: compared with the provider's `payout` (set at
    /// `register_provider`, a token account of the Config's mint) before it
    /// is paid into; only paid into (see `owner_token`).
    #[account(mut)]
    pub provider_payout: Option<UncheckedAccount<'info>>,
    #[account(mut)]
    pub current_segment: Option<Box<Account<'info, Segment>>>,
    pub token_program: Program<'info, Token>,
    /// The first-round verifier and referee, each with its stake vault,
    /// when the second round proved it wrong
    /// (`Verification::wrong_first_round_checkers`): slashed here. A wrong
    /// checker that is the job's current provider is passed as `provider`
    /// instead (a second copy would be refused), its vault still here.
    #[account(mut)]
    pub first_verifier: Option<Box<Account<'info, Provider>>>,
    /// CHECK: checked against its provider's seeds in `slash_checker`
    /// before anything moves; only paid out of, signed by that provider.
    #[account(mut)]
    pub first_verifier_vault: Option<UncheckedAccount<'info>>,
    #[account(mut)]
    pub first_referee: Option<Box<Account<'info, Provider>>>,
    /// CHECK: as `first_verifier_vault`.
    #[account(mut)]
    pub first_referee_vault: Option<UncheckedAccount<'info>>,
}

impl<'info> ResolveVerification<'info> {
    /// A vault the resolution pays out of: the job's, or a slashed
    /// provider's stake vault.
    fn vault(&self, account: &AccountInfo<'info>) -> Vault<'info> {
        Vault::new(&self.token_program, account, &self.usdc_mint)
    }

    /// Two copies of one program account would each be written back, the
    /// later undoing the earlier (a slash, a settlement): every mutable
    /// Provider and Segment passed must be a different account. Anchor
    /// refuses duplicate mutable accounts first; this says which rule it is.
    fn validate(&self) -> Result<()> {
        if let (Some(loser), Some(provider)) = (&self.loser, &self.provider) {
            require_keys_neq!(loser.key(), provider.key(), McjsError::WrongAssignment);
        }
        if let Some(current) = &self.current_segment {
            require_keys_neq!(current.key(), self.segment.key(), McjsError::WrongSegment);
        }
        Ok(())
    }

    /// Nobody blocks a check for longer than its window (and a disputed
    /// one's second round): it is then decided on what was revealed.
    fn outcome(&self, now: i64) -> Result<VerificationOutcome> {
        self.verification
            .resolution(now, self.config.params.challenge_window_secs)
            .ok_or_else(|| error!(McjsError::VerificationUndecided))
    }

    /// Applies a decided verification (or one whose checkers stayed silent
    /// past the challenge window, or whose dispute got no second round in
    /// time; `Verification::resolution`):
    ///
    /// * Confirmed: each checker is paid its fee out of the interval's
    ///   commission (`verification_fee_bps` of it).
    /// * ProviderWrong: the job's provider is slashed, once per segment (the
    ///   verifier's and referee's fees out of the slash, the rest to the
    ///   pool); the job goes back to the latest checkpoint that can be
    ///   trusted (the end of the latest confirmed interval no later than
    ///   the wrong one's start, otherwise the segment's start), taken off
    ///   its node if it is on one; and the owner is refunded the segment's
    ///   pay for every interval past that point: the confirmed work the job
    ///   keeps stays paid.
    /// * Nondeterministic, Inconclusive: nobody is slashed; the interval's
    ///   amount goes back to the owner.
    ///
    /// The segment's payment and the job's completion stop waiting on it,
    /// and the Verification account closes.
    #[access_control(ctx.accounts.validate())]
    pub fn resolve_verification(ctx: Context<Self>) -> Result<()> {
        let now = Clock::get()?.unix_timestamp;
        let outcome = ctx.accounts.outcome(now)?;
        let a = ctx.accounts;
        let params = a.config.params;
        let fee = a
            .verification
            .fee(a.segment.commission_bps, params.verification_fee_bps)?;
        let mut fees = 0u64;
        let mut slashed = 0u64;
        let mut slashed_provider = None;
        let mut refund = 0u64;
        let mut rolled_back = false;
        let mut restore_point = None;

        match outcome {
            VerificationOutcome::Confirmed => {
                fees = a.pay_fee_from_segment(fee, Party::Verifier)?;
                fees += a.pay_fee_from_segment(fee, Party::Referee)?;
                let (to, earned_to) = (a.verification.to, a.verification.earned_to);
                a.segment.confirm(to, earned_to);
                let segment = &a.segment;
                a.job
                    .confirmed(segment.generation, segment.verified_to, segment.disproven);
            }
            // Another interval of a segment already proven wrong (its
            // start was the made-up checkpoint, say): the provider was
            // slashed, the segment refunded and the job rolled back once;
            // the job's progress since is another assignment's.
            VerificationOutcome::ProviderWrong if a.segment.state == SegmentState::Refunded => {}
            VerificationOutcome::ProviderWrong => {
                // Slashed once per segment: another interval of it proven
                // wrong too only moves the job (and the refund) further back.
                if !a.segment.disproven {
                    let expected = a.verification.provider;
                    let (s, f) = a.slash(expected, &[fee, fee])?;
                    (slashed, fees, slashed_provider) = (s, f, Some(expected));
                    a.job.barred_provider = Some(expected);
                }
                restore_point = a.segment.restore_point(a.verification.from);
                rolled_back = a.take_job_back(restore_point, now)?;
                refund = a.refund_segment(restore_point)?;
            }
            VerificationOutcome::Inconclusive | VerificationOutcome::Nondeterministic => {
                refund = a.withhold_interval()?;
            }
        }

        // A second round that agreed proves wrong any first-round checker
        // that revealed another checkpoint: it answered without running
        // the interval, or to take from the provider (or the owner).
        let wrong = a.verification.wrong_first_round_checkers();
        for (party, checker) in [Party::Verifier, Party::Referee].into_iter().zip(wrong) {
            if let Some(checker) = checker {
                a.slash_checker(party, checker, now)?;
            }
        }

        let segment = &mut a.segment;
        segment.open_verifications = segment
            .open_verifications
            .checked_sub(1)
            .ok_or(McjsError::Overflow)?;
        let job = &mut a.job;
        job.open_verifications = job
            .open_verifications
            .checked_sub(1)
            .ok_or(McjsError::Overflow)?;
        if job.open_verifications == 0 {
            job.checks_settled_at = now;
        }
        job.invariant()?;
        let v = &mut a.verification;
        v.state = VerificationState::Resolved { outcome };
        v.resolved_at = Some(now);
        v.fees = fees;
        v.slashed = slashed;
        emit_event(VerificationResolved {
            job: job.key(),
            verification: v.key(),
            interval: v.interval,
            outcome,
            slashed_provider,
            slashed,
            fees,
            refund,
            rolled_back,
            restore_point: if rolled_back { restore_point } else { None },
            by: a.resolver.key(),
            at: now,
        });
        Ok(())
    }

    /// Pays `checker` its fee out of the verified segment's payment (its
    /// commission, see `Segment::payout_split`), from the job's vault.
    fn pay_fee_from_segment(&mut self, fee: u64, checker: Party) -> Result<u64> {
        let to = match checker {
            Party::Verifier => &self.verifier_payout,
            Party::Referee => &self.referee_payout,
        };
        // A checker that closed its payout account forgoes its fee: the
        // segment keeps it.
        if !can_receive(to, &self.usdc_mint.key()) {
            return Ok(0);
        }
        let vault = self.vault(&self.job_vault);
        let job = &mut self.job;
        let segment = &mut self.segment;
        let fee = match segment.state {
            SegmentState::OnNode => {
                // Still the job's current assignment: the interval's payment
                // is part of what it has accrued.
                require!(
                    job.holds_payment && job.generation == segment.generation,
                    McjsError::WrongSegment
                );
                let fee = fee.min(job.accrued);
                job.accrued -= fee;
                job.bond = job.bond.checked_sub(fee).ok_or(McjsError::Overflow)?;
                job.paid = job.paid.checked_add(fee).ok_or(McjsError::Overflow)?;
                fee
            }
            SegmentState::Held { .. } => {
                let fee = fee.min(segment.gross);
                segment.gross -= fee;
                job.held = job.held.checked_sub(fee).ok_or(McjsError::Overflow)?;
                fee
            }
            SegmentState::Refunded => 0,
        };
        segment.fees_paid = segment
            .fees_paid
            .checked_add(fee)
            .ok_or(McjsError::Overflow)?;
        let to = match checker {
            Party::Verifier => &self.verifier_payout,
            Party::Referee => &self.referee_payout,
        };
        let (owner, id, bump);
        let seeds = job_signer_seeds!(job, owner, id, bump);
        vault.pay(to, job.to_account_info(), &[&seeds], fee)?;
        Ok(fee)
    }

    /// An inconclusive check leaves the interval unpaid: its amount goes
    /// back to the owner, out of the segment's held payment (or, still on
    /// its node, out of what the assignment has accrued, which then stays
    /// in the bond). Returns what the owner got back now.
    fn withhold_interval(&mut self) -> Result<u64> {
        let amount = self.verification.interval_amount;
        let vault = self.vault(&self.job_vault);
        let job = &mut self.job;
        let segment = &mut self.segment;
        match segment.state {
            SegmentState::OnNode => {
                require!(
                    job.holds_payment && job.generation == segment.generation,
                    McjsError::WrongSegment
                );
                let amount = amount.min(job.accrued);
                job.accrued -= amount;
                segment.withhold(amount)?;
                Ok(0)
            }
            SegmentState::Held { .. } => {
                let amount = amount.min(segment.gross);
                segment.gross -= amount;
                segment.withhold(amount)?;
                job.held = job.held.checked_sub(amount).ok_or(McjsError::Overflow)?;
                job.paid = job.paid.checked_sub(amount).ok_or(McjsError::Overflow)?;
                refund_or_keep(job, &vault, &self.owner_token, amount)
            }
            SegmentState::Refunded => Ok(0),
        }
    }

    /// Slashes `expected` (the loser) by the Config's slash amount, capped by
    /// its stake: `fees` go to the verifier and the referee, capped by the
    /// slash; the rest to the insurance pool. Returns (slashed in all, fees
    /// paid).
    fn slash(&mut self, expected: Pubkey, fees: &[u64; 2]) -> Result<(u64, u64)> {
        let loser = self.loser.as_deref_mut().ok_or(McjsError::WrongProvider)?;
        require_keys_eq!(loser.key(), expected, McjsError::WrongProvider);
        let vault = self
            .loser_stake_vault
            .as_deref()
            .ok_or(McjsError::WrongTokenAccount)?;
        require_keys_eq!(
            vault.key(),
            stake_vault_address(loser)?,
            McjsError::WrongTokenAccount
        );

        let vault = Vault::new(&self.token_program, vault, &self.usdc_mint);
        let total = loser.slash(self.config.params.slash_amount)?;
        let (owner, bump);
        let seeds = provider_signer_seeds!(loser, owner, bump);
        let seeds: &[&[&[u8]]] = &[&seeds];
        let authority = loser.to_account_info();
        let mut left = total;
        let mut paid_fees = 0u64;
        for (to, fee) in [&self.verifier_payout, &self.referee_payout]
            .into_iter()
            .zip(fees)
        {
            // A checker that closed its payout account forgoes its fee:
            // the pool takes it with the rest of the slash.
            let fee = vault.pay_or_keep(to, authority.clone(), seeds, (*fee).min(left))?;
            left -= fee;
            paid_fees += fee;
        }
        vault.pay(&self.insurance_pool, authority, seeds, left)?;
        Ok((total, paid_fees))
    }

    /// Slashes a first-round checker the second round proved wrong by the
    /// Config's slash amount (capped by its stake), all of it to the
    /// insurance pool: the second round's fees are paid as for any check,
    /// and nobody profits from a checker's slash.
    fn slash_checker(&mut self, party: Party, checker: Pubkey, now: i64) -> Result<()> {
        let (account, vault) = match party {
            Party::Verifier => (&mut self.first_verifier, &self.first_verifier_vault),
            Party::Referee => (&mut self.first_referee, &self.first_referee_vault),
        };
        let provider: &mut Account<'_, Provider> =
            match (account.as_deref_mut(), self.provider.as_deref_mut()) {
                (Some(p), _) => p,
                (None, Some(p)) if p.key() == checker => p,
                _ => return err!(McjsError::CheckerAccountsRequired),
            };
        require_keys_eq!(provider.key(), checker, McjsError::WrongProvider);
        let vault = vault.as_deref().ok_or(McjsError::CheckerAccountsRequired)?;
        require_keys_eq!(
            vault.key(),
            stake_vault_address(provider)?,
            McjsError::WrongTokenAccount
        );
        let amount = provider.slash(self.config.params.slash_amount)?;
        let (owner, bump);
        let seeds = provider_signer_seeds!(provider, owner, bump);
        Vault::new(&self.token_program, vault, &self.usdc_mint).pay(
            &self.insurance_pool,
            provider.to_account_info(),
            &[&seeds],
            amount,
        )?;
        emit_event(CheckerSlashed {
            job: self.job.key(),
            verification: self.verification.key(),
            interval: self.verification.interval,
            provider: checker,
            role: party,
            amount,
            at: now,
        });
        Ok(())
    }

    /// Moves the job back to the interval's start. On a node it is taken
    /// off (its assignment settled as usual; the node of the provider that
    /// lied goes offline, another's stays available); queued or paused it
    /// only moves its restore point. A finished job, or one already back
    /// before the interval, is left as it is.
    fn take_job_back(&mut self, from: Option<CheckpointRecord>, now: i64) -> Result<bool> {
        let to = self.verification.to;
        let past_interval = self
            .job
            .last_checkpoint
            .is_some_and(|l| l.history_key() >= to.history_key());
        if self.job.state.is_terminal() || !past_interval {
            return Ok(false);
        }
        if !self.job.state.is_on_node() {
            self.job.roll_back(from, now)?;
            return Ok(true);
        }
        let vault = self.vault(&self.job_vault);
        let liar = self.verification.provider;
        let on_liar = self.job.provider == Some(liar);
        let node = self.node.as_deref_mut().ok_or(McjsError::WrongAssignment)?;
        require!(
            self.job.node == Some(node.key()),
            McjsError::WrongAssignment
        );
        let provider: &mut Account<'_, Provider> = if on_liar {
            self.loser
                .as_deref_mut()
                .ok_or(McjsError::WrongAssignment)?
        } else {
            let p = self
                .provider
                .as_deref_mut()
                .ok_or(McjsError::WrongAssignment)?;
            require!(
                self.job.provider == Some(p.key()),
                McjsError::WrongAssignment
            );
            p
        };
        require_keys_eq!(node.provider, provider.key(), McjsError::WrongAssignment);
        // The job may have moved to a checker's node: that provider's
        // payout account is already here (a second copy would be refused).
        let payout: &AccountInfo<'_> = if provider.payout == self.verifier_payout.key() {
            &self.verifier_payout
        } else if provider.payout == self.referee_payout.key() {
            &self.referee_payout
        } else {
            self.provider_payout
                .as_deref()
                .ok_or(McjsError::WrongAssignment)?
        };
        require_keys_eq!(payout.key(), provider.payout, McjsError::WrongAssignment);
        let same_segment = self.job.holds_payment && self.segment.generation == self.job.generation;
        let hold_segment: Option<&mut Account<'_, Segment>> = if same_segment {
            Some(&mut self.segment)
        } else {
            self.current_segment.as_deref_mut()
        };
        take_off_node(
            OffNode {
                job: &mut self.job,
                node,
                provider,
                settlement: SettlementAccounts {
                    vault,
                    provider_payout: payout.clone(),
                    treasury: self.treasury.to_account_info(),
                },
                commission_bps: self.config.params.commission_bps,
                hold: Hold {
                    segment: hold_segment,
                    challenge_window_secs: self.config.params.challenge_window_secs,
                },
                owner_token: None,
            },
            !on_liar,
            now,
            |job| job.roll_back(from, now),
        )?;
        Ok(true)
    }

    /// Returns a proven-wrong segment's held payment to the owner, all but
    /// the confirmed work the job keeps when it goes back to `restore`
    /// (`Segment::confirmed_pay`): the owner pays for no disproven work,
    /// and gets no confirmed work for free. What the segment keeps is
    /// released to its provider as usual.
    fn refund_segment(&mut self, restore: Option<CheckpointRecord>) -> Result<u64> {
        let vault = self.vault(&self.job_vault);
        let segment = &mut self.segment;
        segment.disproven = true;
        if !matches!(segment.state, SegmentState::Held { .. }) {
            // Already refunded for another interval (or, impossibly, still
            // on its node: `take_job_back` settles it first).
            return Ok(0);
        }
        let keep = segment.confirmed_pay(restore);
        let amount = segment.gross - keep;
        let job = &mut self.job;
        job.held = job.held.checked_sub(amount).ok_or(McjsError::Overflow)?;
        job.paid = job.paid.checked_sub(amount).ok_or(McjsError::Overflow)?;
        segment.gross = keep;
        if keep == 0 {
            segment.state = SegmentState::Refunded;
        }
        refund_or_keep(job, &vault, &self.owner_token, amount)
    }
}

/// A provider's stake vault, from its seeds and stored bump.
fn stake_vault_address(provider: &Account<'_, Provider>) -> Result<Pubkey> {
    Pubkey::create_program_address(
        &[
            SEED_PREFIX,
            provider.key().as_ref(),
            SEED_VAULT,
            &[provider.vault_bump],
        ],
        &crate::ID,
    )
    .map_err(|_| error!(McjsError::WrongTokenAccount))
}

/// Pays the owner `amount` that just left the job's held payments (out of
/// `held` and `paid`): back into the bond, and from there to the owner's
/// refund account if it can receive (otherwise it stays in the bond, the
/// owner's still: `close_job` pays a finished job's). Returns what was
/// paid now.
fn refund_or_keep<'info>(
    job: &mut Account<'info, Job>,
    vault: &Vault<'info>,
    owner_token: &AccountInfo<'info>,
    amount: u64,
) -> Result<u64> {
    job.add_to_bond(amount)?;
    refund_from_bond(job, vault, owner_token, amount)
}
