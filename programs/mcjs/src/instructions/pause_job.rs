use anchor_lang::prelude::*;
use anchor_spl::token::{Mint, Token, TokenAccount};

use crate::errors::McjsError;
use crate::events::{emit_event, JobPaused};
use crate::instructions::settlement::take_off_node;
use crate::off_node;
use crate::state::{seeds::*, Config, Job, Node, PauseReason, Provider, Segment};

#[derive(Accounts)]
pub struct PauseJob<'info> {
    pub owner: Signer<'info>,
    /// The Config: the only one (state/seeds.rs), no seeds check.
    pub config: Box<Account<'info, Config>>,
    #[account(
        mut,
        seeds = [SEED_PREFIX, owner.key().as_ref(), SEED_JOB, &job.job_id.to_le_bytes()],
        bump = job.bump,
        has_one = owner @ McjsError::NotOwner,
        constraint = job.provider == Some(provider.key()) @ McjsError::NotAssignedProvider,
        constraint = job.node == Some(node.key()) @ McjsError::WrongNode,
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
    #[account(
        mut,
        seeds = [SEED_PREFIX, job.key().as_ref(), SEED_VAULT],
        bump = job.vault_bump,
    )]
    pub job_vault: Box<Account<'info, TokenAccount>>,
    #[account(address = config.usdc_mint @ McjsError::WrongMint)]
    pub usdc_mint: Box<Account<'info, Mint>>,
    /// CHECK: pinned to the provider's payout account by address; paid
    /// only if it can receive (`token::can_receive`: a closed one stops
    /// nothing, its share goes back to the bond).
    #[account(mut, address = provider.payout @ McjsError::WrongTokenAccount)]
    pub provider_payout: UncheckedAccount<'info>,
    /// CHECK: pinned to the Config's treasury by address; paid only if it
    /// can receive, as the payout.
    #[account(mut, address = config.treasury @ McjsError::WrongTokenAccount)]
    pub treasury: UncheckedAccount<'info>,
    pub token_program: Program<'info, Token>,
    /// The current assignment's Segment, when the job's payment is held
    /// (a verified job); checked against the job when it is settled.
    #[account(mut)]
    pub segment: Option<Box<Account<'info, Segment>>>,
}

impl PauseJob<'_> {
    fn validate(&self) -> Result<()> {
        require!(self.job.state.is_on_node(), McjsError::JobNotRunning);
        Ok(())
    }

    /// The owner takes a job off its node: attested progress is paid, the
    /// node released and fenced; the job waits until resumed.
    #[access_control(ctx.accounts.validate())]
    pub fn pause_job(ctx: Context<Self>) -> Result<()> {
        let now = Clock::get()?.unix_timestamp;
        let accounts = ctx.accounts;
        take_off_node(off_node!(accounts, None), true, now, |job| {
            job.pause(PauseReason::Owner, now)
        })?;
        let job = &accounts.job;
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
