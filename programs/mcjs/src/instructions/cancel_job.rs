use anchor_lang::prelude::*;

use crate::errors::McjsError;
use crate::events::{emit_event, JobCancelled};
use crate::instructions::job_bond::*;

#[derive(Accounts)]
pub struct CancelJob<'info> {
    pub owners: OwnersBond<'info>,
}

impl CancelJob<'_> {
    fn validate(&self) -> Result<()> {
        require!(
            self.owners.bond.job.state.can_cancel(),
            McjsError::InvalidJobState
        );
        Ok(())
    }

    /// Cancels a job that is not on a node and refunds its whole bond.
    #[access_control(ctx.accounts.validate())]
    pub fn cancel_job(ctx: Context<Self>) -> Result<()> {
        let now = Clock::get()?.unix_timestamp;
        let owners = &mut ctx.accounts.owners;
        owners.bond.job.cancel(now)?;
        let refund = owners.bond.refund(&owners.owner_token.to_account_info())?;
        owners.bond.job.invariant()?;
        emit_event(JobCancelled {
            job: owners.bond.job.key(),
            refund,
            by: owners.owner.key(),
            at: now,
        });
        Ok(())
    }
}
