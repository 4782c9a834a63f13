use anchor_lang::prelude::*;

use crate::errors::McjsError;
use crate::events::{emit_event, JobExpired};
use crate::instructions::job_bond::*;

#[derive(Accounts)]
pub struct ExpireJob<'info> {
    /// Anyone.
    pub caller: Signer<'info>,
    /// CHECK: the job owner's refund account, pinned by address: the refund
    /// goes there, whoever calls, if it can receive (otherwise it stays in
    /// the vault for `close_job`).
    #[account(
        mut,
        address = bond.job.refund_account @ McjsError::WrongTokenAccount,
    )]
    pub owner_token: UncheckedAccount<'info>,
    pub bond: JobBond<'info>,
}

impl ExpireJob<'_> {
    /// Ends a queued job whose deadline passed, or that has been billed its
    /// whole maximum duration, and refunds its bond to its owner.
    pub fn expire_job(ctx: Context<Self>) -> Result<()> {
        let now = Clock::get()?.unix_timestamp;
        let accounts = ctx.accounts;
        let bond = &mut accounts.bond;
        bond.job.expire(now)?;
        let refund = bond.refund(&accounts.owner_token.to_account_info())?;
        bond.job.invariant()?;
        emit_event(JobExpired {
            job: bond.job.key(),
            refund,
            by: accounts.caller.key(),
            at: now,
        });
        Ok(())
    }
}
