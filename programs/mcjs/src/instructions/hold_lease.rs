use anchor_lang::prelude::*;

use crate::events::{emit_event, LeaseTaken};
use crate::state::{Config, SchedulerLease};

/// No seeds are checked on the Config or the lease (state/seeds.rs, "Where
/// a program account's seeds are not checked again"): there is one of each.
#[derive(Accounts)]
pub struct HoldLease<'info> {
    /// A member: the Config's scheduler or one of the lease's standbys.
    pub scheduler: Signer<'info>,
    pub config: Account<'info, Config>,
    #[account(mut)]
    pub lease: Account<'info, SchedulerLease>,
}

impl HoldLease<'_> {
    /// Renews the signer's lease, or takes it when it expired (or its
    /// holder is no longer a member), starting a new term. Refused while
    /// another member's lease runs.
    pub fn hold_lease(ctx: Context<Self>) -> Result<()> {
        let clock = Clock::get()?;
        let accounts = ctx.accounts;
        let key = accounts.scheduler.key();
        let previous = accounts.lease.holder;
        let ended = accounts.lease.hold(&accounts.config, key, clock.slot)?;
        accounts.lease.invariant()?;
        if let Some(ended) = ended {
            emit_event(LeaseTaken {
                holder: key,
                previous,
                term: accounts.lease.term,
                ended_term: ended,
                slot: clock.slot,
                at: clock.unix_timestamp,
            });
        }
        Ok(())
    }
}
