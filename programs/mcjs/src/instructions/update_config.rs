use anchor_lang::prelude::*;
use anchor_spl::token::TokenAccount;

use crate::errors::McjsError;
use crate::events::{emit_event, ConfigUpdated};
use crate::state::{Config, ConfigParams};

/// Each field left `None` keeps its value.
#[derive(AnchorSerialize, AnchorDeserialize, Clone, Debug, Default)]
pub struct UpdateConfigArgs {
    pub admin: Option<Pubkey>,
    pub scheduler: Option<Pubkey>,
    pub params: Option<ConfigParams>,
    pub paused: Option<bool>,
}

#[derive(Accounts)]
pub struct UpdateConfig<'info> {
    pub admin: Signer<'info>,
    #[account(
        mut,
        has_one = admin @ McjsError::NotAdmin,
    )]
    pub config: Account<'info, Config>,
    /// A new treasury, when it changes.
    #[account(constraint = new_treasury.mint == config.usdc_mint @ McjsError::WrongMint)]
    pub new_treasury: Option<Account<'info, TokenAccount>>,
}

impl UpdateConfig<'_> {
    fn validate(&self, args: &UpdateConfigArgs) -> Result<()> {
        if let Some(params) = &args.params {
            params.validate()?;
        }
        Ok(())
    }

    /// Changes the Config (admin only), logging the old and new values.
    #[access_control(ctx.accounts.validate(&args))]
    pub fn update_config(ctx: Context<Self>, args: UpdateConfigArgs) -> Result<()> {
        let config = &mut ctx.accounts.config;
        let old = config.snapshot();
        if let Some(admin) = args.admin {
            config.admin = admin;
        }
        if let Some(scheduler) = args.scheduler {
            config.scheduler = scheduler;
        }
        if let Some(params) = args.params {
            config.params = params;
        }
        if let Some(paused) = args.paused {
            config.paused = paused;
        }
        if let Some(treasury) = &ctx.accounts.new_treasury {
            config.treasury = treasury.key();
        }
        config.invariant()?;
        emit_event(ConfigUpdated {
            old,
            new: config.snapshot(),
        });
        Ok(())
    }
}
