use anchor_lang::prelude::*;

use crate::errors::McjsError;

/// A compute provider: its stake and its record.
#[account]
#[derive(InitSpace, Debug)]
pub struct Provider {
    pub owner: Pubkey,
    /// USDC token account that receives payments for jobs.
    pub payout: Pubkey,
    /// Tokens held in the provider's stake vault.
    pub stake: u64,
    pub pending_withdrawal: Option<Withdrawal>,
    /// Jobs currently assigned to or running on this provider's nodes.
    pub active_assignments: u32,
    pub node_count: u32,
    pub jobs_completed: u64,
    pub failures: u64,
    pub slashed_total: u64,
    pub registered_at: i64,
    pub bump: u8,
    pub vault_bump: u8,
    /// Segments of verified jobs this provider attested whose payment is
    /// not yet released: a check of them may still slash the stake, so it
    /// cannot be withdrawn before they are.
    pub held_segments: u32,
}

#[derive(AnchorSerialize, AnchorDeserialize, Clone, Copy, Debug, PartialEq, Eq, InitSpace)]
pub struct Withdrawal {
    pub amount: u64,
    pub requested_at: i64,
}

impl Provider {
    /// The stake that still backs this provider once a pending withdrawal leaves.
    pub fn committed_stake(&self) -> u64 {
        let leaving = self.pending_withdrawal.map_or(0, |w| w.amount);
        self.stake.saturating_sub(leaving)
    }

    pub fn require_min_stake(&self, min: u64) -> Result<()> {
        require!(self.committed_stake() >= min, McjsError::StakeBelowMinimum);
        Ok(())
    }

    pub fn take_assignment(&mut self) -> Result<()> {
        self.active_assignments = self
            .active_assignments
            .checked_add(1)
            .ok_or(McjsError::Overflow)?;
        Ok(())
    }

    pub fn release_assignment(&mut self) -> Result<()> {
        self.active_assignments = self
            .active_assignments
            .checked_sub(1)
            .ok_or(McjsError::Overflow)?;
        Ok(())
    }

    /// Adds `amount`, just deposited into the stake vault, to the stake.
    pub fn add_to_stake(&mut self, amount: u64) -> Result<()> {
        self.stake = self.stake.checked_add(amount).ok_or(McjsError::Overflow)?;
        Ok(())
    }

    /// Takes up to `amount` of the stake for a failure the provider is
    /// answerable for (the caller moves the tokens out of the stake vault):
    /// the stake drops, the slash and the failure are recorded. Returns what
    /// was taken, never more than the stake.
    pub fn slash(&mut self, amount: u64) -> Result<u64> {
        let taken = amount.min(self.stake);
        self.stake = self.stake.checked_sub(taken).ok_or(McjsError::Overflow)?;
        self.slashed_total = self
            .slashed_total
            .checked_add(taken)
            .ok_or(McjsError::Overflow)?;
        self.failures = self.failures.checked_add(1).ok_or(McjsError::Overflow)?;
        Ok(taken)
    }

    pub fn invariant(&self) -> Result<()> {
        if let Some(w) = self.pending_withdrawal {
            require!(w.amount > 0, McjsError::ZeroAmount);
        }
        Ok(())
    }
}
