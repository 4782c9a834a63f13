use anchor_lang::prelude::*;

use crate::errors::McjsError;
use crate::events::{emit_event, JobResumed};
use crate::state::{Config, Job};

#[derive(Accounts)]
pub struct ResumeJob<'info> {
    pub owner: Signer<'info>,
    /// The Config: the only one (state/seeds.rs), no seeds check.
    pub config: Box<Account<'info, Config>>,
    #[account(mut, has_one = owner @ McjsError::NotOwner)]
    pub job: Box<Account<'info, Job>>,
}

impl ResumeJob<'_> {
    fn validate(&self) -> Result<()> {
        require!(!self.config.paused, McjsError::ProgramPaused);
        Ok(())
    }

    /// Puts a paused job back in the queue, to resume from its last checkpoint.
    #[access_control(ctx.accounts.validate())]
    pub fn resume_job(ctx: Context<Self>) -> Result<()> {
        let now = Clock::get()?.unix_timestamp;
        let job = &mut ctx.accounts.job;
        job.resume(now)?;
        job.invariant()?;
        emit_event(JobResumed {
            job: job.key(),
            by: ctx.accounts.owner.key(),
            at: now,
        });
        Ok(())
    }
}
