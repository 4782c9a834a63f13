use anchor_lang::prelude::*;

use crate::errors::McjsError;
use crate::events::{emit_event, JobStarted};
use crate::state::{seeds::*, Job, Node, Provider};

#[derive(AnchorSerialize, AnchorDeserialize, Clone, Debug)]
pub struct StartJobArgs {
    pub generation: u32,
}

#[derive(Accounts)]
pub struct StartJob<'info> {
    /// The assigned node's operator key.
    pub authority: Signer<'info>,
    #[account(
        seeds = [SEED_PREFIX, provider.owner.as_ref(), SEED_PROVIDER],
        bump = provider.bump,
    )]
    pub provider: Box<Account<'info, Provider>>,
    #[account(
        seeds = [SEED_PREFIX, provider.key().as_ref(), SEED_NODE, &node.index.to_le_bytes()],
        bump = node.bump,
        has_one = provider @ McjsError::WrongProvider,
        constraint = node.is_operator(&authority.key()) @ McjsError::NotNodeOperator,
    )]
    pub node: Box<Account<'info, Node>>,
    #[account(
        mut,
        seeds = [SEED_PREFIX, job.owner.as_ref(), SEED_JOB, &job.job_id.to_le_bytes()],
        bump = job.bump,
        constraint = job.provider == Some(provider.key()) @ McjsError::NotAssignedProvider,
        constraint = job.node == Some(node.key()) @ McjsError::WrongNode,
    )]
    pub job: Box<Account<'info, Job>>,
}

impl StartJob<'_> {
    fn validate(&self, args: &StartJobArgs) -> Result<()> {
        self.job.require_generation(args.generation)
    }

    /// The container is running: billing starts.
    #[access_control(ctx.accounts.validate(&args))]
    pub fn start_job(ctx: Context<Self>, args: StartJobArgs) -> Result<()> {
        let now = Clock::get()?.unix_timestamp;
        let job = &mut ctx.accounts.job;
        job.start(now)?;
        job.invariant()?;
        emit_event(JobStarted {
            job: job.key(),
            node: ctx.accounts.node.key(),
            generation: args.generation,
            by: ctx.accounts.authority.key(),
            at: now,
        });
        Ok(())
    }
}
