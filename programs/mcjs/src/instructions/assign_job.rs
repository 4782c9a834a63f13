use anchor_lang::prelude::*;

use crate::errors::McjsError;
use crate::events::{emit_event, JobAssigned};
use crate::state::{seeds::*, Config, Job, Node, Provider};

#[derive(Accounts)]
pub struct AssignJob<'info> {
    pub scheduler: Signer<'info>,
    #[account(
        seeds = [SEED_PREFIX, SEED_CONFIG],
        bump = config.bump,
        has_one = scheduler @ McjsError::NotScheduler,
    )]
    pub config: Account<'info, Config>,
    #[account(
        mut,
        seeds = [SEED_PREFIX, job.owner.as_ref(), SEED_JOB, &job.job_id.to_le_bytes()],
        bump = job.bump,
    )]
    pub job: Box<Account<'info, Job>>,
    #[account(
        mut,
        seeds = [SEED_PREFIX, provider.key().as_ref(), SEED_NODE, &node.index.to_le_bytes()],
        bump = node.bump,
        has_one = provider @ McjsError::WrongProvider,
    )]
    pub node: Box<Account<'info, Node>>,
    #[account(
        mut,
        seeds = [SEED_PREFIX, provider.owner.as_ref(), SEED_PROVIDER],
        bump = provider.bump,
    )]
    pub provider: Box<Account<'info, Provider>>,
}

impl AssignJob<'_> {
    fn validate(&self) -> Result<()> {
        require!(!self.config.paused, McjsError::ProgramPaused);
        require!(self.job.state.can_assign(), McjsError::JobNotQueued);
        require!(self.node.status.can_take_job(), McjsError::NodeNotAvailable);
        self.provider
            .require_min_stake(self.config.params.min_provider_stake)?;
        self.job.requirements.check(&self.node.hardware)?;
        require!(
            self.node.price_per_gpu_hour <= self.job.terms.max_price_per_gpu_hour,
            McjsError::NodePriceTooHigh
        );
        Ok(())
    }

    /// Places a queued job on a node that satisfies its requirements; the
    /// rate (node price × the job's GPUs) is locked and the generation bumps.
    #[access_control(ctx.accounts.validate())]
    pub fn assign_job(ctx: Context<Self>) -> Result<()> {
        let now = Clock::get()?.unix_timestamp;
        let accounts = ctx.accounts;
        let rate = accounts
            .node
            .price_per_gpu_hour
            .checked_mul(u64::from(accounts.job.requirements.gpu_count))
            .ok_or(McjsError::Overflow)?;
        let (job_key, node_key, provider_key) = (
            accounts.job.key(),
            accounts.node.key(),
            accounts.provider.key(),
        );
        accounts.job.assign(node_key, provider_key, rate, now)?;
        accounts.node.occupy(job_key, now)?;
        accounts.provider.take_assignment()?;
        accounts.job.invariant()?;
        accounts.node.invariant()?;
        emit_event(JobAssigned {
            job: job_key,
            node: node_key,
            provider: provider_key,
            generation: accounts.job.generation,
            rate_per_hour: rate,
            by: accounts.scheduler.key(),
            at: now,
        });
        Ok(())
    }
}
