use anchor_lang::prelude::*;

use crate::errors::McjsError;
use crate::events::{emit_event, SchedulersSet};
use crate::state::{Config, SchedulerLease, MAX_STANDBYS};

#[derive(AnchorSerialize, AnchorDeserialize, Clone, Debug)]
pub struct SetSchedulersArgs {
    /// The standby schedulers (besides the Config's), at most four.
    pub standbys: Vec<Pubkey>,
    /// How many slots a renewal of the lease lasts.
    pub lease_slots: u64,
}

#[derive(Accounts)]
pub struct SetSchedulers<'info> {
    pub admin: Signer<'info>,
    #[account(has_one = admin @ McjsError::NotAdmin)]
    pub config: Account<'info, Config>,
    #[account(mut)]
    pub lease: Account<'info, SchedulerLease>,
}

impl SetSchedulers<'_> {
    fn validate(&self, args: &SetSchedulersArgs) -> Result<()> {
        require!(
            args.standbys.len() <= MAX_STANDBYS && args.lease_slots >= 1,
            McjsError::InvalidLease
        );
        for (i, key) in args.standbys.iter().enumerate() {
            require!(
                *key != Pubkey::default()
                    && *key != self.config.scheduler
                    && !args.standbys[..i].contains(key),
                McjsError::InvalidLease
            );
        }
        Ok(())
    }

    /// Names the standby schedulers and the lease's length (admin only).
    /// A holder that is no longer a member can be replaced at once.
    #[access_control(ctx.accounts.validate(&args))]
    pub fn set_schedulers(ctx: Context<Self>, args: SetSchedulersArgs) -> Result<()> {
        let lease = &mut ctx.accounts.lease;
        let mut standbys = [Pubkey::default(); MAX_STANDBYS];
        standbys[..args.standbys.len()].copy_from_slice(&args.standbys);
        lease.standbys = standbys;
        lease.lease_slots = args.lease_slots;
        lease.invariant()?;
        emit_event(SchedulersSet {
            scheduler: ctx.accounts.config.scheduler,
            standbys: args.standbys,
            lease_slots: args.lease_slots,
        });
        Ok(())
    }
}
