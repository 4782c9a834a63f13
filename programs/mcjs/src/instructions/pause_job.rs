use anchor_lang::prelude::*;

use crate::errors::McjsError;
use crate::events::{emit_event, JobPaused};
use crate::instructions::on_node::*;
use crate::instructions::settlement::take_off_node;
use crate::state::PauseReason;

#[derive(Accounts)]
pub struct PauseJob<'info> {
    #[account(address = on_node.bond.job.owner @ McjsError::NotOwner)]
    pub owner: Signer<'info>,
    /// The job on its node; last, so that its optional Segment is the
    /// instruction's last account.
    pub on_node: JobOnNode<'info>,
}

impl PauseJob<'_> {
    fn validate(&self) -> Result<()> {
        require!(
            self.on_node.bond.job.state.is_on_node(),
            McjsError::JobNotRunning
        );
        Ok(())
    }

    /// The owner takes a job off its node: attested progress is paid, the
    /// node released and fenced; the job waits until resumed.
    #[access_control(ctx.accounts.validate())]
    pub fn pause_job(ctx: Context<Self>) -> Result<()> {
        let now = Clock::get()?.unix_timestamp;
        let accounts = ctx.accounts;
        take_off_node(accounts.on_node.off_node(), true, now, |job| {
            job.pause(PauseReason::Owner, now)
        })?;
        let job = &accounts.on_node.bond.job;
        emit_event(JobPaused {
            job: job.key(),
            generation: job.generation,
            reason: PauseReason::Owner,
            by: accounts.owner.key(),
            at: now,
        });
        Ok(())
    }
}
