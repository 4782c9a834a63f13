use anchor_lang::prelude::*;
use anchor_spl::token::{Mint, Token, TokenAccount};

use crate::errors::McjsError;
use crate::events::{emit_event, JobCancelled};
use crate::instructions::settlement::refund_bond;
use crate::state::{seeds::*, Config, Job};

#[derive(Accounts)]
pub struct CancelJob<'info> {
    pub owner: Signer<'info>,
    /// The Config: the only one (state/seeds.rs), no seeds check.
    pub config: Box<Account<'info, Config>>,
    #[account(
        mut,
        seeds = [SEED_PREFIX, owner.key().as_ref(), SEED_JOB, &job.job_id.to_le_bytes()],
        bump = job.bump,
        has_one = owner @ McjsError::NotOwner,
    )]
    pub job: Box<Account<'info, Job>>,
    #[account(
        mut,
        seeds = [SEED_PREFIX, job.key().as_ref(), SEED_VAULT],
        bump = job.vault_bump,
    )]
    pub job_vault: Box<Account<'info, TokenAccount>>,
    #[account(address = config.usdc_mint @ McjsError::WrongMint)]
    pub usdc_mint: Box<Account<'info, Mint>>,
    #[account(
        mut,
        constraint = owner_token.mint == usdc_mint.key() @ McjsError::WrongMint,
        constraint = owner_token.owner == owner.key() @ McjsError::NotOwner,
    )]
    pub owner_token: Box<Account<'info, TokenAccount>>,
    pub token_program: Program<'info, Token>,
}

impl CancelJob<'_> {
    fn validate(&self) -> Result<()> {
        require!(self.job.state.can_cancel(), McjsError::InvalidJobState);
        Ok(())
    }

    /// Cancels a job that is not on a node and refunds its whole bond.
    #[access_control(ctx.accounts.validate())]
    pub fn cancel_job(ctx: Context<Self>) -> Result<()> {
        let now = Clock::get()?.unix_timestamp;
        let accounts = ctx.accounts;
        accounts.job.cancel(now)?;
        let refund = refund_bond(
            &mut accounts.job,
            &accounts.job_vault.to_account_info(),
            &accounts.usdc_mint,
            &accounts.owner_token.to_account_info(),
            &accounts.token_program,
        )?;
        accounts.job.invariant()?;
        emit_event(JobCancelled {
            job: accounts.job.key(),
            refund,
            by: accounts.owner.key(),
            at: now,
        });
        Ok(())
    }
}
