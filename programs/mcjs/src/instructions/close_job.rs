use anchor_lang::prelude::*;
use anchor_spl::token::TokenAccount;

use crate::errors::McjsError;
use crate::events::{emit_event, JobClosed};
use crate::instructions::job_bond::*;
use crate::job_signer_seeds;
use crate::token::close_vault;

#[derive(Accounts)]
pub struct CloseJob<'info> {
    /// Receives the job's and the vault's rent.
    #[account(mut, address = bond.job.owner @ McjsError::NotOwner)]
    pub owner: Signer<'info>,
    /// Any USDC account of the owner's: receives whatever was sent into the
    /// vault from outside (the bond itself was settled at the terminal state).
    #[account(
        mut,
        constraint = owner_token.mint == bond.usdc_mint.key() @ McjsError::WrongMint,
        constraint = owner_token.owner == owner.key() @ McjsError::WrongTokenAccount,
    )]
    pub owner_token: Box<Account<'info, TokenAccount>>,
    pub bond: JobBond<'info>,
}

impl CloseJob<'_> {
    fn validate(&self) -> Result<()> {
        require!(self.bond.job.state.is_terminal(), McjsError::JobNotFinished);
        // Held payments are the providers' until released (or the owner's
        // only through a proven-wrong verification): never swept.
        require!(
            self.bond.job.held == 0
                && self.bond.job.open_verifications == 0
                && self.bond.job.live_segments == 0,
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
        let bond = &accounts.bond;
        let (owner, id, bump);
        let seeds = job_signer_seeds!(bond.job, owner, id, bump);
        let swept = bond.job_vault.amount;
        bond.vault().pay(
            &accounts.owner_token.to_account_info(),
            bond.job.to_account_info(),
            &[&seeds],
            swept,
        )?;
        close_vault(
            &bond.token_program,
            &bond.job_vault,
            accounts.owner.to_account_info(),
            bond.job.to_account_info(),
            &[&seeds],
        )?;
        bond.job.close(accounts.owner.to_account_info())?;
        emit_event(JobClosed {
            job: bond.job.key(),
            by: accounts.owner.key(),
            swept,
        });
        Ok(())
    }
}
