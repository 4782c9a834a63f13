//! A provider's stake as its owner moves it (`add_stake`, `withdraw_stake`).

use anchor_lang::prelude::*;
use anchor_spl::token::{Mint, Token, TokenAccount};

use crate::errors::McjsError;
use crate::state::{seeds::*, Config, Provider};

/// The provider its owner signs for (at the signer's provider address) and
/// its stake vault, a token account, by its seeds.
#[derive(Accounts)]
pub struct ProviderStake<'info> {
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
    pub token_program: Program<'info, Token>,
}
