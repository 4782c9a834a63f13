use anchor_lang::prelude::*;
use anchor_spl::token::{Mint, Token, TokenAccount};

use crate::errors::McjsError;
use crate::events::{emit_event, OwnerCompensated};
use crate::state::{seeds::*, Config, Job};
use crate::token::Vault;

#[derive(AnchorSerialize, AnchorDeserialize, Clone, Debug)]
pub struct CompensateOwnerArgs {
    pub amount: u64,
}

#[derive(Accounts)]
pub struct CompensateOwner<'info> {
    pub admin: Signer<'info>,
    #[account(
        has_one = admin @ McjsError::NotAdmin,
    )]
    pub config: Box<Account<'info, Config>>,
    #[account(mut)]
    pub job: Box<Account<'info, Job>>,
    #[account(
        mut,
        seeds = [SEED_PREFIX, SEED_INSURANCE],
        bump = config.pool_bump,
        address = config.insurance_pool @ McjsError::WrongTokenAccount,
    )]
    pub insurance_pool: Box<Account<'info, TokenAccount>>,
    #[account(address = config.usdc_mint @ McjsError::WrongMint)]
    pub usdc_mint: Box<Account<'info, Mint>>,
    /// The account the job's bond came from: compensation goes nowhere else.
    #[account(
        mut,
        address = job.refund_account @ McjsError::WrongTokenAccount,
    )]
    pub owner_token: Box<Account<'info, TokenAccount>>,
    pub token_program: Program<'info, Token>,
}

impl CompensateOwner<'_> {
    fn validate(&self, args: &CompensateOwnerArgs) -> Result<()> {
        require!(args.amount > 0, McjsError::ZeroAmount);
        let compensable = self.job.compensable();
        require!(compensable > 0, McjsError::NotCompensable);
        require!(args.amount <= compensable, McjsError::CompensationTooLarge);
        require!(
            args.amount <= self.insurance_pool.amount,
            McjsError::InsufficientPool
        );
        Ok(())
    }

    /// The only way tokens leave the insurance pool: the admin pays the
    /// owner of a job that ended unfinished after its providers failed it
    /// (`Job::compensable`), at most what that owner paid for the job, to the job's refund account.
    #[access_control(ctx.accounts.validate(&args))]
    pub fn compensate_owner(ctx: Context<Self>, args: CompensateOwnerArgs) -> Result<()> {
        let accounts = ctx.accounts;
        let bump = [accounts.config.bump];
        let seeds: &[&[u8]] = &[SEED_PREFIX, SEED_CONFIG, &bump];
        Vault::new(
            &accounts.token_program,
            &*accounts.insurance_pool,
            &accounts.usdc_mint,
        )
        .pay(
            &accounts.owner_token.to_account_info(),
            accounts.config.to_account_info(),
            &[seeds],
            args.amount,
        )?;
        let job = &mut accounts.job;
        job.compensated = job
            .compensated
            .checked_add(args.amount)
            .ok_or(McjsError::Overflow)?;
        job.invariant()?;
        accounts.insurance_pool.reload()?;
        emit_event(OwnerCompensated {
            job: job.key(),
            owner_token: accounts.owner_token.key(),
            amount: args.amount,
            compensated: job.compensated,
            pool_balance: accounts.insurance_pool.amount,
            by: accounts.admin.key(),
        });
        Ok(())
    }
}
