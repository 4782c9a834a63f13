use anchor_lang::prelude::*;
use anchor_spl::token::{Mint, Token, TokenAccount};

use crate::errors::McjsError;
use crate::events::{emit_event, StakeAdded};
use crate::state::{seeds::*, Config, Provider};
use crate::token::deposit;

#[derive(AnchorSerialize, AnchorDeserialize, Clone, Debug)]
pub struct AddStakeArgs {
    pub amount: u64,
}

#[derive(Accounts)]
pub struct AddStake<'info> {
    pub owner: Signer<'info>,
    /// The Config: the only one (state/seeds.rs), no seeds check.
    pub config: Account<'info, Config>,
    #[account(
        mut,
        seeds = [SEED_PREFIX, owner.key().as_ref(), SEED_PROVIDER],
        bump = provider.bump,
        has_one = owner @ McjsError::NotOwner,
    )]
    pub provider: Account<'info, Provider>,
    #[account(
        mut,
        seeds = [SEED_PREFIX, provider.key().as_ref(), SEED_VAULT],
        bump = provider.vault_bump,
    )]
    pub stake_vault: Account<'info, TokenAccount>,
    #[account(address = config.usdc_mint @ McjsError::WrongMint)]
    pub usdc_mint: Account<'info, Mint>,
    #[account(
        mut,
        constraint = owner_token.mint == usdc_mint.key() @ McjsError::WrongMint,
        constraint = owner_token.owner == owner.key() @ McjsError::NotOwner,
    )]
    pub owner_token: Account<'info, TokenAccount>,
    pub token_program: Program<'info, Token>,
}

impl AddStake<'_> {
    fn validate(&self, args: &AddStakeArgs) -> Result<()> {
        require!(args.amount > 0, McjsError::ZeroAmount);
        Ok(())
    }

    /// Adds to the provider's stake.
    #[access_control(ctx.accounts.validate(&args))]
    pub fn add_stake(ctx: Context<Self>, args: AddStakeArgs) -> Result<()> {
        let accounts = ctx.accounts;
        deposit(
            &accounts.token_program,
            &accounts.owner_token,
            &accounts.usdc_mint,
            &accounts.stake_vault,
            &accounts.owner,
            args.amount,
        )?;
        let provider = &mut accounts.provider;
        provider.stake = provider
            .stake
            .checked_add(args.amount)
            .ok_or(McjsError::Overflow)?;
        provider.invariant()?;
        emit_event(StakeAdded {
            provider: provider.key(),
            amount: args.amount,
            stake: provider.stake,
        });
        Ok(())
    }
}
