use anchor_lang::prelude::*;

use crate::errors::McjsError;
use crate::events::{emit_event, SegmentReleased};
use crate::instructions::job_bond::*;
use crate::instructions::settlement::SettlementAccounts;
use crate::state::{seeds::*, Provider, Segment, SegmentState};

#[derive(Accounts)]
pub struct ReleaseSegment<'info> {
    /// Anyone: a held payment is released by whoever asks once it is due.
    pub payer: Signer<'info>,
    pub bond: JobBond<'info>,
    #[account(
        mut,
        seeds = [SEED_PREFIX, bond.job.key().as_ref(), SEED_SEGMENT, &segment.generation.to_le_bytes()],
        bump = segment.bump,
        constraint = segment.job == bond.job.key() @ McjsError::WrongSegment,
        has_one = rent_payer @ McjsError::WrongSegment,
        close = rent_payer,
    )]
    pub segment: Box<Account<'info, Segment>>,
    /// The segment's provider: its stake is free of this segment's checks
    /// once it is released.
    #[account(mut, address = segment.provider @ McjsError::WrongProvider)]
    pub provider: Box<Account<'info, Provider>>,
    /// CHECK: receives the segment's rent; checked against `segment.rent_payer`.
    #[account(mut)]
    pub rent_payer: UncheckedAccount<'info>,
    /// CHECK: pinned to the payout account recorded at assignment; paid
    /// only if it can receive (`token::can_receive`: a closed one stops
    /// nothing, its share goes back to the job's bond).
    #[account(mut, address = segment.provider_payout @ McjsError::WrongTokenAccount)]
    pub provider_payout: UncheckedAccount<'info>,
    /// CHECK: pinned to the Config's treasury; paid only if it can receive.
    #[account(mut, address = bond.config.treasury @ McjsError::WrongTokenAccount)]
    pub treasury: UncheckedAccount<'info>,
}

impl ReleaseSegment<'_> {
    fn validate(&self, now: i64) -> Result<()> {
        let due = match self.segment.state {
            SegmentState::Held { release_at } => now >= release_at,
            SegmentState::Refunded => true,
            SegmentState::OnNode => false,
        };
        require!(
            due && self.segment.open_verifications == 0,
            McjsError::SegmentNotReleasable
        );
        Ok(())
    }

    /// Pays a held segment once its challenge window has passed with no
    /// verification open on it: the provider's share to the payout account
    /// recorded at assignment, the commission (less verification fees
    /// already paid from it) to the treasury. A refunded segment only
    /// closes. Either way the segment's rent goes back to whoever paid it.
    #[access_control(ctx.accounts.validate(Clock::get()?.unix_timestamp))]
    pub fn release_segment(ctx: Context<Self>) -> Result<()> {
        let now = Clock::get()?.unix_timestamp;
        let accounts = ctx.accounts;
        let segment = &accounts.segment;
        let refunded = segment.state == SegmentState::Refunded;
        let (owed_provider, owed_commission) = if refunded {
            (0, 0)
        } else {
            segment.payout_split()?
        };
        let pay_to = SettlementAccounts {
            vault: accounts.bond.vault(),
            provider_payout: accounts.provider_payout.to_account_info(),
            treasury: accounts.treasury.to_account_info(),
        };
        let job = &mut accounts.bond.job;
        let (provider_amount, commission) = pay_to.pay(job, (owed_provider, owed_commission))?;
        let owed = owed_provider
            .checked_add(owed_commission)
            .ok_or(McjsError::Overflow)?;
        job.held = job.held.checked_sub(owed).ok_or(McjsError::Overflow)?;
        // What could not be paid (its account closed) is the owner's again.
        job.unpay(owed - provider_amount - commission)?;
        job.live_segments = job
            .live_segments
            .checked_sub(1)
            .ok_or(McjsError::Overflow)?;
        let provider = &mut accounts.provider;
        provider.held_segments = provider
            .held_segments
            .checked_sub(1)
            .ok_or(McjsError::Overflow)?;
        job.invariant()?;
        emit_event(SegmentReleased {
            job: job.key(),
            segment: segment.key(),
            provider: segment.provider,
            generation: segment.generation,
            provider_amount,
            commission,
            refunded,
            by: accounts.payer.key(),
            at: now,
        });
        Ok(())
    }
}
