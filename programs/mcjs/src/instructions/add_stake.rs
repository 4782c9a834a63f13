use anchor_lang::prelude::*;
use anchor_spl::token::TokenAccount;

use crate::errors::McjsError;
use crate::events::{emit_event, StakeAdded};
use crate::instructions::provider_stake::*;
use crate::token::deposit;

#[derive(AnchorSerialize, AnchorDeserialize, Clone, Debug)]
pub struct AddStakeArgs {
    pub amount: u64,
}

#[derive(Accounts)]
pub struct AddStake<'info> {
    pub stake: ProviderStake<'info>,
    #[account(
        mut,
        constraint = owner_token.mint == stake.usdc_mint.key() @ McjsError::WrongMint,
        constraint = owner_token.owner == stake.owned.owner.key() @ McjsError::NotOwner,
    )]
    pub owner_token: Account<'info, TokenAccount>,
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
            &accounts.stake.token_program,
            &accounts.owner_token,
            &accounts.stake.usdc_mint,
            &accounts.stake.stake_vault,
            &accounts.stake.owned.owner,
            args.amount,
        )?;
        let provider = &mut accounts.stake.owned.provider;
        provider.add_to_stake(args.amount)?;
        provider.invariant()?;
        emit_event(StakeAdded {
            provider: provider.key(),
            amount: args.amount,
            stake: provider.stake,
        });
        Ok(())
    }
}
