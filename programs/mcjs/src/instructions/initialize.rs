use anchor_lang::prelude::*;
use anchor_spl::token::{Mint, TokenAccount};

use crate::errors::McjsError;
use crate::events::{emit_event, ConfigInitialized};
use crate::state::{seeds::*, Config, ConfigParams};

#[derive(AnchorSerialize, AnchorDeserialize, Clone, Debug)]
pub struct InitializeArgs {
    pub scheduler: Pubkey,
    pub params: ConfigParams,
}

#[derive(Accounts)]
pub struct Initialize<'info> {
    #[account(mut)]
    pub admin: Signer<'info>,
    #[account(
        init,
        payer = admin,
        space = 8 + Config::INIT_SPACE,
        seeds = [SEED_PREFIX, SEED_CONFIG],
        bump,
    )]
    pub config: Account<'info, Config>,
    pub usdc_mint: Account<'info, Mint>,
    #[account(constraint = treasury.mint == usdc_mint.key() @ McjsError::WrongMint)]
    pub treasury: Account<'info, TokenAccount>,
    pub system_program: Program<'info, System>,
}

impl Initialize<'_> {
    fn validate(&self, args: &InitializeArgs) -> Result<()> {
        args.params.validate()
    }

    /// Creates the Config. Re-initialisation fails: the account already exists.
    #[access_control(ctx.accounts.validate(&args))]
    pub fn initialize(ctx: Context<Self>, args: InitializeArgs) -> Result<()> {
        let config = &mut ctx.accounts.config;
        config.set_inner(Config {
            admin: ctx.accounts.admin.key(),
            scheduler: args.scheduler,
            usdc_mint: ctx.accounts.usdc_mint.key(),
            usdc_decimals: ctx.accounts.usdc_mint.decimals,
            treasury: ctx.accounts.treasury.key(),
            params: args.params,
            paused: false,
            bump: ctx.bumps.config,
        });
        config.invariant()?;
        emit_event(ConfigInitialized {
            admin: config.admin,
            scheduler: config.scheduler,
            usdc_mint: config.usdc_mint,
            treasury: config.treasury,
            params: config.params,
        });
        Ok(())
    }
}
