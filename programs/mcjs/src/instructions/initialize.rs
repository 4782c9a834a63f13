use anchor_lang::prelude::*;
use anchor_lang::solana_program::bpf_loader_upgradeable;
use anchor_spl::token::{Mint, Token, TokenAccount};

use crate::errors::McjsError;
use crate::events::{emit_event, ConfigInitialized};
use crate::state::{seeds::*, Config, ConfigParams, SchedulerLease};

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
    /// Held by the Config's scheduler from the start (state/lease.rs).
    #[account(
        init,
        payer = admin,
        space = 8 + SchedulerLease::INIT_SPACE,
        seeds = [SEED_PREFIX, SEED_LEASE],
        bump,
    )]
    pub lease: Account<'info, SchedulerLease>,
    pub usdc_mint: Account<'info, Mint>,
    #[account(constraint = treasury.mint == usdc_mint.key() @ McjsError::WrongMint)]
    pub treasury: Account<'info, TokenAccount>,
    /// Receives every slash; only `compensate_owner` moves tokens out.
    #[account(
        init,
        payer = admin,
        seeds = [SEED_PREFIX, SEED_INSURANCE],
        bump,
        token::mint = usdc_mint,
        token::authority = config,
        token::token_program = token_program,
    )]
    pub insurance_pool: Account<'info, TokenAccount>,
    /// CHECK: this program's own account (its address is checked); on a
    /// cluster it is owned by the upgradeable loader and names its programdata.
    #[account(address = crate::ID)]
    pub program: UncheckedAccount<'info>,
    /// CHECK: the programdata account derived from the program id; when the
    /// program is upgradeable its upgrade authority must be the admin.
    pub program_data: UncheckedAccount<'info>,
    pub token_program: Program<'info, Token>,
    pub system_program: Program<'info, System>,
}

impl Initialize<'_> {
    fn validate(&self, args: &InitializeArgs) -> Result<()> {
        require_upgrade_authority(
            &self.program,
            &self.program_data,
            &self.admin.key(),
            McjsError::NotUpgradeAuthority,
        )?;
        args.params.validate()
    }

    /// Creates the Config, the scheduler lease and the insurance pool. Re-initialisation fails:
    /// the accounts already exist.
    #[access_control(ctx.accounts.validate(&args))]
    pub fn initialize(ctx: Context<Self>, args: InitializeArgs) -> Result<()> {
        let config = &mut ctx.accounts.config;
        config.set_inner(Config {
            admin: ctx.accounts.admin.key(),
            scheduler: args.scheduler,
            usdc_mint: ctx.accounts.usdc_mint.key(),
            usdc_decimals: ctx.accounts.usdc_mint.decimals,
            treasury: ctx.accounts.treasury.key(),
            insurance_pool: ctx.accounts.insurance_pool.key(),
            params: args.params,
            paused: false,
            bump: ctx.bumps.config,
            pool_bump: ctx.bumps.insurance_pool,
        });
        config.invariant()?;
        let lease = &mut ctx.accounts.lease;
        lease.set_inner(SchedulerLease::new(
            args.scheduler,
            Clock::get()?.slot,
            ctx.bumps.lease,
        ));
        lease.invariant()?;
        emit_event(ConfigInitialized {
            admin: config.admin,
            scheduler: config.scheduler,
            usdc_mint: config.usdc_mint,
            treasury: config.treasury,
            insurance_pool: config.insurance_pool,
            params: config.params,
        });
        Ok(())
    }
}

/// On a cluster the program is deployed by the upgradeable loader: only its
/// upgrade authority may initialise it (or publish its IDL), so nobody can
/// front-run the deployment and make itself admin. A program without
/// programdata (the native build registered as a builtin by the local chain
/// and the test harness, which initialise it before anyone else can reach
/// it) has no upgrade authority to check: `Ok(false)`. `refusal` is the
/// error when `signer` is not the upgrade authority.
pub fn require_upgrade_authority(
    program: &AccountInfo,
    program_data: &AccountInfo,
    signer: &Pubkey,
    refusal: McjsError,
) -> Result<bool> {
    if *program.owner != bpf_loader_upgradeable::ID {
        return Ok(false);
    }
    let (expected, _) =
        Pubkey::find_program_address(&[crate::ID.as_ref()], &bpf_loader_upgradeable::ID);
    require_keys_eq!(program_data.key(), expected, refusal);
    require_keys_eq!(*program_data.owner, bpf_loader_upgradeable::ID, refusal);
    let data = program_data.try_borrow_data()?;
    let program_data =
        ProgramData::try_deserialize_unchecked(&mut &data[..]).map_err(|_| error!(refusal))?;
    if program_data.upgrade_authority_address != Some(*signer) {
        return Err(error!(refusal));
    }
    Ok(true)
}
