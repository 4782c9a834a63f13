use anchor_lang::prelude::*;
use anchor_spl::token::{Mint, Token, TokenAccount};

use crate::errors::McjsError;
use crate::events::{emit_event, ProviderRegistered};
use crate::state::{seeds::*, Config, Provider};
use crate::token::deposit;

#[derive(AnchorSerialize, AnchorDeserialize, Clone, Debug)]
pub struct RegisterProviderArgs {
    pub stake: u64,
}

#[derive(Accounts)]
pub struct RegisterProvider<'info> {
    #[account(mut)]
    pub owner: Signer<'info>,
    /// The Config: the only one (state/seeds.rs), no seeds check.
    pub config: Account<'info, Config>,
    #[account(
        init,
        payer = owner,
        space = 8 + Provider::INIT_SPACE,
        seeds = [SEED_PREFIX, owner.key().as_ref(), SEED_PROVIDER],
        bump,
    )]
    pub provider: Account<'info, Provider>,
    #[account(
        init,
        payer = owner,
        seeds = [SEED_PREFIX, provider.key().as_ref(), SEED_VAULT],
        bump,
        token::mint = usdc_mint,
        token::authority = provider,
        token::token_program = token_program,
    )]
    pub stake_vault: Account<'info, TokenAccount>,
    #[account(address = config.usdc_mint @ McjsError::WrongMint)]
    pub usdc_mint: Account<'info, Mint>,
    /// Where the stake comes from.
    #[account(
        mut,
        constraint = owner_token.mint == usdc_mint.key() @ McjsError::WrongMint,
        constraint = owner_token.owner == owner.key() @ McjsError::NotOwner,
    )]
    pub owner_token: Account<'info, TokenAccount>,
    /// Where job payments go.
    #[account(constraint = payout.mint == usdc_mint.key() @ McjsError::WrongMint)]
    pub payout: Account<'info, TokenAccount>,
    pub token_program: Program<'info, Token>,
    pub system_program: Program<'info, System>,
}

impl RegisterProvider<'_> {
    fn validate(&self, args: &RegisterProviderArgs) -> Result<()> {
        require!(args.stake > 0, McjsError::ZeroAmount);
        Ok(())
    }

    /// Registers the signer as a provider and locks its first stake.
    #[access_control(ctx.accounts.validate(&args))]
    pub fn register_provider(ctx: Context<Self>, args: RegisterProviderArgs) -> Result<()> {
        let accounts = ctx.accounts;
        deposit(
            &accounts.token_program,
            &accounts.owner_token,
            &accounts.usdc_mint,
            &accounts.stake_vault,
            &accounts.owner,
            args.stake,
        )?;
        let provider = &mut accounts.provider;
        provider.set_inner(Provider {
            owner: accounts.owner.key(),
            payout: accounts.payout.key(),
            stake: args.stake,
            pending_withdrawal: None,
            active_assignments: 0,
            node_count: 0,
            jobs_completed: 0,
            failures: 0,
            slashed_total: 0,
            registered_at: Clock::get()?.unix_timestamp,
            bump: ctx.bumps.provider,
            vault_bump: ctx.bumps.stake_vault,
            held_segments: 0,
        });
        provider.invariant()?;
        emit_event(ProviderRegistered {
            provider: provider.key(),
            owner: provider.owner,
            payout: provider.payout,
            stake: provider.stake,
        });
        Ok(())
    }
}
