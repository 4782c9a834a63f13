use anchor_lang::prelude::*;

use crate::errors::McjsError;
use crate::events::{emit_event, BondToppedUp};
use crate::instructions::job_bond::*;
use crate::token::deposit;

#[derive(AnchorSerialize, AnchorDeserialize, Clone, Debug)]
pub struct TopUpArgs {
    pub amount: u64,
}

#[derive(Accounts)]
pub struct TopUp<'info> {
    pub owners: OwnersBond<'info>,
}

impl TopUp<'_> {
    fn validate(&self, args: &TopUpArgs) -> Result<()> {
        require!(args.amount > 0, McjsError::ZeroAmount);
        require!(
            self.owners.bond.job.state.can_top_up(),
            McjsError::InvalidJobState
        );
        Ok(())
    }

    /// Adds to a live job's bond.
    #[access_control(ctx.accounts.validate(&args))]
    pub fn top_up(ctx: Context<Self>, args: TopUpArgs) -> Result<()> {
        let now = Clock::get()?.unix_timestamp;
        let owners = &mut ctx.accounts.owners;
        let bond = &mut owners.bond;
        deposit(
            &bond.token_program,
            &owners.owner_token,
            &bond.usdc_mint,
            &bond.job_vault,
            &owners.owner,
            args.amount,
        )?;
        let job = &mut bond.job;
        job.add_to_bond(args.amount)?;
        job.invariant()?;
        emit_event(BondToppedUp {
            job: job.key(),
            amount: args.amount,
            bond: job.bond,
            by: owners.owner.key(),
            at: now,
        });
        Ok(())
    }
}
