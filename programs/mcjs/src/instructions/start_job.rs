use anchor_lang::prelude::*;

use crate::errors::McjsError;
use crate::events::{emit_event, JobStarted};
use crate::state::{Job, Node, Provider};

#[derive(AnchorSerialize, AnchorDeserialize, Clone, Debug)]
pub struct StartJobArgs {
    pub generation: u32,
}

/// No seeds are checked on the program accounts (state/seeds.rs, "Where a
/// program account's seeds are not checked again"): the job names its node
/// and provider (`job.node`, `job.provider`), the node its provider
/// (`has_one`), and the signer must be the node's operator.
#[derive(Accounts)]
pub struct StartJob<'info> {
    /// The assigned node's operator key.
    pub authority: Signer<'info>,
    pub provider: Box<Account<'info, Provider>>,
    #[account(
        has_one = provider @ McjsError::WrongProvider,
        constraint = node.is_operator(&authority.key()) @ McjsError::NotNodeOperator,
    )]
    pub node: Box<Account<'info, Node>>,
    #[account(
        mut,
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
