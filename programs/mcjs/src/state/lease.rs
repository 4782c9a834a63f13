use anchor_lang::prelude::*;

use crate::errors::McjsError;
use crate::state::Config;

/// How many standby schedulers the lease names besides the Config's.
pub const MAX_STANDBYS: usize = 4;

/// The lease's length when the program is initialised: 25 slots, about
/// 10 s at 400 ms a slot. A standby takes over this long after the
/// holder's last renewal.
pub const DEFAULT_LEASE_SLOTS: u64 = 25;

/// Which scheduler the program takes decisions from now.
///
/// Several schedulers may run at once; the program arbitrates which one
/// acts. The members are the Config's `scheduler` and up to
/// [`MAX_STANDBYS`] standbys the admin names. The holder renews the lease
/// (`hold_lease`) before `expires_slot`; once that slot has passed, or when
/// the holder is no longer a member, any member may take the lease, which
/// starts a new `term`. `assign_job`, `open_verification` and the
/// scheduler's `report_failure` check that their signer holds the lease, so
/// a deposed or paused leader is fenced the way a stale generation is.
///
/// A lease past its expiry that nobody has taken still holds: a lone
/// scheduler that pauses keeps acting when it wakes, and only another
/// member's `hold_lease` ends its term.
#[account]
#[derive(InitSpace, Debug)]
pub struct SchedulerLease {
    pub holder: Pubkey,
    /// Starts at 1; one more at every change of holder.
    pub term: u64,
    /// The last slot of the holder's lease; another member may take it after.
    pub expires_slot: u64,
    /// How many slots one renewal lasts.
    pub lease_slots: u64,
    /// Members besides the Config's scheduler; `Pubkey::default()` is an empty place.
    pub standbys: [Pubkey; MAX_STANDBYS],
    pub bump: u8,
}

impl SchedulerLease {
    pub fn new(holder: Pubkey, slot: u64, bump: u8) -> Self {
        Self {
            holder,
            term: 1,
            expires_slot: slot.saturating_add(DEFAULT_LEASE_SLOTS),
            lease_slots: DEFAULT_LEASE_SLOTS,
            standbys: [Pubkey::default(); MAX_STANDBYS],
            bump,
        }
    }

    /// Whether `key` may hold the lease: the Config's scheduler or a standby.
    pub fn is_member(&self, config: &Config, key: &Pubkey) -> bool {
        *key == config.scheduler || (*key != Pubkey::default() && self.standbys.contains(key))
    }

    /// Whether `key` holds the lease now and may act as the scheduler.
    pub fn is_held_by(&self, config: &Config, key: &Pubkey) -> bool {
        self.holder == *key && self.is_member(config, key)
    }

    /// Whether no scheduler acts now: the holder's lease ran out at
    /// `expires_slot` without a renewal, or the holder is no longer a
    /// member. Until then the holder alone reports failures: it knows what
    /// the program cannot, an outage of the store or of its own network
    /// (the mass-failure brake), and excuses the lateness they cause.
    pub fn lapsed(&self, config: &Config, slot: u64) -> bool {
        slot > self.expires_slot || !self.is_member(config, &self.holder)
    }

    /// Fails unless `key` may act as the scheduler now.
    pub fn require_holder(&self, config: &Config, key: &Pubkey) -> Result<()> {
        require!(self.is_member(config, key), McjsError::NotScheduler);
        require!(self.is_held_by(config, key), McjsError::NotLeaseHolder);
        Ok(())
    }

    /// Renews the holder's lease, or hands it to another member once it
    /// expired (or its holder left the members). Returns the term that
    /// ended when the holder changed.
    pub fn hold(&mut self, config: &Config, key: Pubkey, slot: u64) -> Result<Option<u64>> {
        require!(self.is_member(config, &key), McjsError::NotScheduler);
        let ended = if self.holder == key {
            None
        } else {
            require!(
                slot > self.expires_slot || !self.is_member(config, &self.holder),
                McjsError::LeaseHeld
            );
            let ended = self.term;
            self.term = self.term.checked_add(1).ok_or(McjsError::Overflow)?;
            self.holder = key;
            Some(ended)
        };
        self.expires_slot = slot
            .checked_add(self.lease_slots)
            .ok_or(McjsError::Overflow)?;
        Ok(ended)
    }

    pub fn invariant(&self) -> Result<()> {
        require!(self.lease_slots >= 1, McjsError::InvalidLease);
        require!(self.term >= 1, McjsError::InvalidLease);
        Ok(())
    }
}
