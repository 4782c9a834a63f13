//! Paying a job's segment and refunding its bond: the only ways tokens leave a job vault.

use anchor_lang::prelude::*;

use crate::errors::McjsError;
use crate::events::{emit_event, SegmentHeld, SegmentSettled};
use crate::state::{Job, Node, Provider, Segment, SegmentState};
use crate::token::{split_commission, Vault};

/// Signer seeds of a job PDA (the authority of its vault).
#[macro_export]
macro_rules! job_signer_seeds {
    ($job:expr, $owner:ident, $id:ident, $bump:ident) => {{
        $owner = $job.owner;
        $id = $job.job_id.to_le_bytes();
        $bump = [$job.bump];
        [
            $crate::state::seeds::SEED_PREFIX,
            $owner.as_ref(),
            $crate::state::seeds::SEED_JOB,
            &$id,
            &$bump,
        ]
    }};
}

/// Signer seeds of a provider PDA (the authority of its stake vault).
#[macro_export]
macro_rules! provider_signer_seeds {
    ($provider:expr, $owner:ident, $bump:ident) => {{
        $owner = $provider.owner;
        $bump = [$provider.bump];
        [
            $crate::state::seeds::SEED_PREFIX,
            $owner.as_ref(),
            $crate::state::seeds::SEED_PROVIDER,
            &$bump,
        ]
    }};
}

pub struct SettlementAccounts<'info> {
    /// The job's vault, pinned by its seeds by each instruction; paid out
    /// of, signed by the job.
    pub vault: Vault<'info>,
    /// Destinations only: pinned by address by each instruction (see
    /// `token::Vault`), so they need not be deserialised.
    pub provider_payout: AccountInfo<'info>,
    pub treasury: AccountInfo<'info>,
}

impl<'info> SettlementAccounts<'info> {
    /// Pays a segment's `(provider share, commission)` out of the job's
    /// vault, signed by the job: each only if its account can receive
    /// (`Vault::pay_or_keep`). Returns what each was paid.
    pub fn pay(&self, job: &Account<'info, Job>, owed: (u64, u64)) -> Result<(u64, u64)> {
        let (owner, id, bump);
        let seeds = job_signer_seeds!(job, owner, id, bump);
        let authority = job.to_account_info();
        let vault = &self.vault;
        Ok((
            vault.pay_or_keep(&self.provider_payout, authority.clone(), &[&seeds], owed.0)?,
            vault.pay_or_keep(&self.treasury, authority, &[&seeds], owed.1)?,
        ))
    }
}

/// Where a verified job's assignment payment is held, and for how long.
pub struct Hold<'a, 'info> {
    pub segment: Option<&'a mut Account<'info, Segment>>,
    pub challenge_window_secs: u32,
}

/// Pays what the current assignment accrued: the provider's share to its
/// payout account, the commission to the treasury. A verified job's payment
/// is held instead, in the vault, for its Segment (see `release_segment`).
/// A share whose account cannot receive (its owner closed it) goes back to
/// the job's bond: closing it stops nothing (`token::can_receive`).
pub fn settle_segment<'info>(
    job: &mut Account<'info, Job>,
    accounts: &SettlementAccounts<'info>,
    hold: Hold<'_, 'info>,
    provider: Pubkey,
    commission_bps: u16,
    now: i64,
) -> Result<()> {
    if job.holds_payment {
        let segment = hold.segment.ok_or(McjsError::SegmentRequired)?;
        require!(
            segment.job == job.key()
                && segment.generation == job.generation
                && segment.state == SegmentState::OnNode,
            McjsError::WrongSegment
        );
        let amount = job.settle_accrued()?;
        job.held = job.held.checked_add(amount).ok_or(McjsError::Overflow)?;
        segment.gross = segment
            .gross
            .checked_add(amount)
            .ok_or(McjsError::Overflow)?;
        let release_at = now
            .checked_add(i64::from(hold.challenge_window_secs))
            .ok_or(McjsError::Overflow)?;
        segment.earned = job.assignment_earned;
        segment.state = SegmentState::Held { release_at };
        emit_event(SegmentHeld {
            job: job.key(),
            segment: segment.key(),
            provider,
            generation: job.generation,
            gross: segment.gross,
            release_at,
        });
        return Ok(());
    }
    let amount = job.accrued;
    let (provider_amount, commission) =
        accounts.pay(job, split_commission(amount, commission_bps)?)?;
    job.settle_accrued()?;
    job.unpay(amount - provider_amount - commission)?;
    emit_event(SegmentSettled {
        job: job.key(),
        provider,
        generation: job.generation,
        provider_amount,
        commission,
    });
    Ok(())
}

/// What every instruction that takes a job off its node holds: the job, its
/// node and provider, and where the segment's payment goes.
pub struct OffNode<'a, 'info> {
    pub job: &'a mut Account<'info, Job>,
    pub node: &'a mut Account<'info, Node>,
    pub provider: &'a mut Account<'info, Provider>,
    pub settlement: SettlementAccounts<'info>,
    pub commission_bps: u16,
    pub hold: Hold<'a, 'info>,
    /// The owner's refund account, needed when the transition ends the job
    /// (pinned by address to the job's `refund_account`).
    pub owner_token: Option<AccountInfo<'info>>,
}

/// The one way a job leaves a node (attestation on an exhausted bond,
/// completion, pause, failure report): the segment is settled, `transition`
/// moves the job (and fences the node with a new generation), the node is
/// released (`healthy` false takes it offline), a terminal job's remaining
/// bond is refunded, and every account's invariant is checked. Returns the
/// refund.
pub fn take_off_node<'info>(
    off: OffNode<'_, 'info>,
    healthy: bool,
    now: i64,
    transition: impl FnOnce(&mut Job) -> Result<()>,
) -> Result<u64> {
    let provider_key = off.provider.key();
    settle_segment(
        off.job,
        &off.settlement,
        off.hold,
        provider_key,
        off.commission_bps,
        now,
    )?;
    transition(off.job)?;
    let refund = if off.job.state.is_terminal() {
        let owner_token = off.owner_token.ok_or(McjsError::WrongTokenAccount)?;
        let bond = off.job.bond;
        refund_from_bond(off.job, &off.settlement.vault, &owner_token, bond)?
    } else {
        0
    };
    let job_key = off.job.key();
    off.node.release(job_key, healthy, now)?;
    off.provider.release_assignment()?;
    off.job.invariant()?;
    off.node.invariant()?;
    off.provider.invariant()?;
    Ok(refund)
}

/// Pays `amount` of the bond (the whole bond when a job ends) to the
/// owner's refund account if it can receive (`token::can_receive`); what it
/// cannot take stays in the bond, the owner's: `close_job` pays it to any
/// token account of the owner's. Returns what was paid.
pub fn refund_from_bond<'info>(
    job: &mut Account<'info, Job>,
    vault: &Vault<'info>,
    owner_token: &AccountInfo<'info>,
    amount: u64,
) -> Result<u64> {
    let (owner, id, bump);
    let seeds = job_signer_seeds!(job, owner, id, bump);
    let paid = vault.pay_or_keep(owner_token, job.to_account_info(), &[&seeds], amount)?;
    job.bond = job.bond.checked_sub(paid).ok_or(McjsError::Overflow)?;
    Ok(paid)
}
