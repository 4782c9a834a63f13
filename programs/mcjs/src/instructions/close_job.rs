use anchor_lang::prelude::*;
use anchor_spl::token::{Mint, Token, TokenAccount};

use crate::errors::McjsError;
use crate::events::{emit_event, JobClosed};
use crate::job_signer_seeds;
use crate::state::{seeds::*, Config, Job};
use crate::token::{close_vault, pay_out};

#[derive(Accounts)]
pub struct CloseJob<'info> {
    #[account(mut)]
    pub owner: Signer<'info>,
    #[account(
        mut,
        seeds = [SEED_PREFIX, owner.key().as_ref(), SEED_JOB, &job.job_id.to_le_bytes()],
        bump = job.bump,
        has_one = owner @ McjsError::NotOwner,
        close = owner,
    )]
    pub job: Box<Account<'info, Job>>,
    #[account(
        mut,
        seeds = [SEED_PREFIX, job.key().as_ref(), SEED_VAULT],
        bump = job.vault_bump,
    )]
    pub job_vault: Box<Account<'info, TokenAccount>>,
    /// The Config: the only one (state/seeds.rs), no seeds check.
    pub config: Box<Account<'info, Config>>,
    #[account(address = config.usdc_mint @ McjsError::WrongMint)]
    pub usdc_mint: Box<Account<'info, Mint>>,
    /// Any USDC account of the owner's: receives whatever was sent into the
    /// vault from outside (the bond itself was settled at the terminal state).
    #[account(
        mut,
        constraint = owner_token.mint == usdc_mint.key() @ McjsError::WrongMint,
        constraint = owner_token.owner == owner.key() @ McjsError::WrongTokenAccount,
    )]
    pub owner_token: Box<Account<'info, TokenAccount>>,
    pub token_program: Program<'info, Token>,
}

impl CloseJob<'_> {
    fn validate(&self) -> Result<()> {
        require!(self.job.state.is_terminal(), McjsError::JobNotFinished);
        // Held payments are the providers' until released (or the owner's
        // only through a proven-wrong verification): never swept.
        require!(
            self.job.held == 0 && self.job.open_verifications == 0 && self.job.live_segments == 0,
            McjsError::SegmentNotReleasable
        );
        Ok(())
    }

    /// Closes a finished job's vault and account, returning the rent to the
    /// owner. Tokens anyone sent into the vault after the job settled are
    /// swept to the owner first: SPL Token refuses to close an account with
    /// a balance, so dust must never be able to keep a job open.
    #[access_control(ctx.accounts.validate())]
    pub fn close_job(ctx: Context<Self>) -> Result<()> {
        let accounts = ctx.accounts;
        let (owner, id, bump);
        let seeds = job_signer_seeds!(accounts.job, owner, id, bump);
        let swept = accounts.job_vault.amount;
        pay_out(
            &accounts.token_program,
            &accounts.job_vault,
            &accounts.usdc_mint,
            &accounts.owner_token.to_account_info(),
            accounts.job.to_account_info(),
            &[&seeds],
            swept,
        )?;
        close_vault(
            &accounts.token_program,
            &accounts.job_vault,
            accounts.owner.to_account_info(),
            accounts.job.to_account_info(),
            &[&seeds],
        )?;
        emit_event(JobClosed {
            job: accounts.job.key(),
            by: accounts.owner.key(),
            swept,
        });
        Ok(())
    }
}
