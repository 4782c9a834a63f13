use anchor_lang::prelude::*;
use anchor_spl::token::{Mint, Token, TokenAccount};

use crate::errors::McjsError;
use crate::events::{emit_event, BondToppedUp};
use crate::state::{seeds::*, Config, Job};
use crate::token::deposit;

#[derive(AnchorSerialize, AnchorDeserialize, Clone, Debug)]
pub struct TopUpArgs {
    pub amount: u64,
}

#[derive(Accounts)]
pub struct TopUp<'info> {
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

impl TopUp<'_> {
    fn validate(&self, args: &TopUpArgs) -> Result<()> {
        require!(args.amount > 0, McjsError::ZeroAmount);
        require!(self.job.state.can_top_up(), McjsError::InvalidJobState);
        Ok(())
    }

    /// Adds to a live job's bond.
    #[access_control(ctx.accounts.validate(&args))]
    pub fn top_up(ctx: Context<Self>, args: TopUpArgs) -> Result<()> {
        let now = Clock::get()?.unix_timestamp;
        let accounts = ctx.accounts;
        deposit(
            &accounts.token_program,
            &accounts.owner_token,
            &accounts.usdc_mint,
            &accounts.job_vault,
            &accounts.owner,
            args.amount,
        )?;
        let job = &mut accounts.job;
        job.bond = job
            .bond
            .checked_add(args.amount)
            .ok_or(McjsError::Overflow)?;
        job.invariant()?;
        emit_event(BondToppedUp {
            job: job.key(),
            amount: args.amount,
            bond: job.bond,
            by: accounts.owner.key(),
            at: now,
        });
        Ok(())
    }
}
