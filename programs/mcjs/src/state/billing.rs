//! What a job is billed: until when, how much, and whether an attestation
//! may exhaust its bond. The rules `attest_checkpoint`, `complete_job` and
//! the settlements share.

use anchor_lang::prelude::*;

use crate::errors::McjsError;
use crate::state::job::{Accrual, Job};
use crate::state::terms::cost_of;

impl Job {
    /// Until when a completion at `now` is billed. An assignment whose
    /// payment is held for checks is billed only to its last attestation,
    /// which is its output's ([`Job::attest_output`]): what follows is the
    /// wait for the draw and any check, not work, and a stretch no draw can
    /// reach would be paid for nothing. Otherwise as
    /// [`Job::run_billed_until`] says.
    pub fn billed_until(&self, now: i64) -> i64 {
        if self.holds_payment {
            self.progress_mark
        } else {
            self.run_billed_until(now)
        }
    }

    /// Until when the run's last stretch, ending at `now` (a completion,
    /// or a verified job's output attested), is billed: to `now`, or, when
    /// a check settled since the last progress mark, at most one checkpoint
    /// interval past the mark. The job may have waited on that check (a
    /// completion is refused while one is open); the wait is not work, and
    /// an honest job finishes within an interval of its last checkpoint.
    pub fn run_billed_until(&self, now: i64) -> i64 {
        if self.checks_settled_at > self.progress_mark {
            now.min(
                self.progress_mark
                    .saturating_add(i64::from(self.terms.checkpoint_interval_secs)),
            )
        } else {
            now
        }
    }

    /// Bills the time since the last progress mark, capped by the billing
    /// window, the maximum duration and the bond.
    pub fn accrue(&mut self, now: i64, liveness_factor: u8) -> Result<Accrual> {
        let elapsed = u64::try_from(now.saturating_sub(self.progress_mark)).unwrap_or(0);
        let remaining = u64::from(self.terms.max_duration_secs).saturating_sub(self.billed_secs);
        let secs = elapsed
            .min(self.terms.billing_window_secs(liveness_factor)?)
            .min(remaining);
        let due = cost_of(self.rate_per_hour, secs)?;
        let available = self.unencumbered_bond();
        let amount = due.min(available);
        self.accrued = self
            .accrued
            .checked_add(amount)
            .ok_or(McjsError::Overflow)?;
        self.billed_secs = self
            .billed_secs
            .checked_add(secs)
            .ok_or(McjsError::Overflow)?;
        self.progress_mark = now;
        Ok(Accrual {
            billed_secs: secs,
            amount,
            bond_exhausted: due > available,
        })
    }

    /// Whether an attestation at `now` may exhaust the bond, and so pause
    /// the job: then it needs the settlement accounts
    /// (`SettlementAccountsRequired` otherwise). Conservative: the most that
    /// [`Job::accrue`] can bill at `now` (the time since the progress mark,
    /// capped by the billing window and the remaining duration) against the
    /// bond not yet owed. A client that does not know the Config's liveness
    /// factor passes `u8::MAX` (the time since the mark then bounds it), and
    /// a `now` a little ahead of its clock.
    pub fn attestation_may_exhaust_bond(&self, now: i64, liveness_factor: u8) -> bool {
        let elapsed = u64::try_from(now.saturating_sub(self.progress_mark)).unwrap_or(0);
        let remaining = u64::from(self.terms.max_duration_secs).saturating_sub(self.billed_secs);
        let window = u64::from(self.terms.checkpoint_interval_secs)
            .saturating_mul(u64::from(liveness_factor));
        let secs = elapsed.min(window).min(remaining);
        cost_of(self.rate_per_hour, secs).map_or(true, |due| due > self.unencumbered_bond())
    }
}
