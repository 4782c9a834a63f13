//! A provider as its owner signs for it (`OwnedProvider`: `request_withdrawal`),
//! and its stake as its owner moves it (`ProviderStake`: `add_stake`,
//! `withdraw_stake`).

use anchor_lang::prelude::*;
use anchor_spl::token::{Mint, Token, TokenAccount};

use crate::errors::McjsError;
use crate::state::{seeds::*, Config, Provider};
use crate::token::Vault;

/// The provider its owner signs for, at the signer's provider address.
#[derive(Accounts)]
pub struct OwnedProvider<'info> {
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
}

/// The provider its owner signs for and its stake vault, a token account,
/// by its seeds.
#[derive(Accounts)]
pub struct ProviderStake<'info> {
    pub owned: OwnedProvider<'info>,
    #[account(
        mut,
        seeds = [SEED_PREFIX, owned.provider.key().as_ref(), SEED_VAULT],
        bump = owned.provider.vault_bump,
    )]
    pub stake_vault: Account<'info, TokenAccount>,
    #[account(address = owned.config.usdc_mint @ McjsError::WrongMint)]
    pub usdc_mint: Account<'info, Mint>,
    pub token_program: Program<'info, Token>,
}

impl<'info> ProviderStake<'info> {
    /// The stake vault, paid out of signed by the provider.
    pub fn vault(&self) -> Vault<'info> {
        Vault::new(&self.token_program, &self.stake_vault, &self.usdc_mint)
    }
}
