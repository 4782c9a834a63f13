use anchor_lang::prelude::*;

use crate::errors::McjsError;

/// An owner's job ids: each new job's id must be at least `next_job_id`,
/// so that a closed job's address (and the Segment and Verification
/// addresses derived from it) is never taken by a new job.
#[account]
#[derive(InitSpace, Debug)]
pub struct JobCounter {
    pub owner: Pubkey,
    pub next_job_id: u64,
    pub bump: u8,
}

impl JobCounter {
    /// Takes `job_id` for a new job.
    pub fn take(&mut self, job_id: u64) -> Result<()> {
        require!(job_id >= self.next_job_id, McjsError::JobIdTaken);
        self.next_job_id = job_id.checked_add(1).ok_or(McjsError::Overflow)?;
        Ok(())
    }
}
