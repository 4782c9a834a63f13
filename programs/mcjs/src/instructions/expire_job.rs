use anchor_lang::prelude::*;
use anchor_spl::token::{Mint, Token, TokenAccount};

use crate::errors::McjsError;
use crate::events::{emit_event, JobExpired};
use crate::instructions::settlement::refund_bond;
use crate::state::{seeds::*, Config, Job};

#[derive(Accounts)]
pub struct ExpireJob<'info> {
    /// Anyone.
    pub caller: Signer<'info>,
    /// The Config: the only one (state/seeds.rs), no seeds check.
    pub config: Box<Account<'info, Config>>,
    #[account(
        mut,
        seeds = [SEED_PREFIX, job.owner.as_ref(), SEED_JOB, &job.job_id.to_le_bytes()],
        bump = job.bump,
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
    /// CHECK: the job owner's refund account, pinned by address: the refund
    /// goes there, whoever calls, if it can receive (otherwise it stays in
    /// the vault for `close_job`).
    #[account(
        mut,
        address = job.refund_account @ McjsError::WrongTokenAccount,
    )]
    pub owner_token: UncheckedAccount<'info>,
    pub token_program: Program<'info, Token>,
}

impl ExpireJob<'_> {
    /// Ends a queued job whose deadline passed, or that has been billed its
    /// whole maximum duration, and refunds its bond to its owner.
    pub fn expire_job(ctx: Context<Self>) -> Result<()> {
        let now = Clock::get()?.unix_timestamp;
        let accounts = ctx.accounts;
        accounts.job.expire(now)?;
        let refund = refund_bond(
            &mut accounts.job,
            &accounts.job_vault.to_account_info(),
            &accounts.usdc_mint,
            &accounts.owner_token.to_account_info(),
            &accounts.token_program,
        )?;
        accounts.job.invariant()?;
        emit_event(JobExpired {
            job: accounts.job.key(),
            refund,
            by: accounts.caller.key(),
            at: now,
        });
        Ok(())
    }
}
