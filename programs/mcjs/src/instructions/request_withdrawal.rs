use anchor_lang::prelude::*;

use crate::errors::McjsError;
use crate::events::{emit_event, WithdrawalRequested};
use crate::instructions::provider_stake::*;
use crate::state::Withdrawal;

#[derive(AnchorSerialize, AnchorDeserialize, Clone, Debug)]
pub struct RequestWithdrawalArgs {
    pub amount: u64,
}

#[derive(Accounts)]
pub struct RequestWithdrawal<'info> {
    pub owned: OwnedProvider<'info>,
}

impl RequestWithdrawal<'_> {
    fn validate(&self, args: &RequestWithdrawalArgs) -> Result<()> {
        require!(args.amount > 0, McjsError::ZeroAmount);
        require!(
            args.amount <= self.owned.provider.stake,
            McjsError::InsufficientStake
        );
        Ok(())
    }

    /// Starts the cooldown of a stake withdrawal; a new request replaces the old.
    #[access_control(ctx.accounts.validate(&args))]
    pub fn request_withdrawal(ctx: Context<Self>, args: RequestWithdrawalArgs) -> Result<()> {
        let now = Clock::get()?.unix_timestamp;
        let cooldown = i64::from(ctx.accounts.owned.config.params.withdrawal_cooldown_secs);
        let provider = &mut ctx.accounts.owned.provider;
        provider.pending_withdrawal = Some(Withdrawal {
            amount: args.amount,
            requested_at: now,
        });
        provider.invariant()?;
        emit_event(WithdrawalRequested {
            provider: provider.key(),
            amount: args.amount,
            available_at: now.checked_add(cooldown).ok_or(McjsError::Overflow)?,
        });
        Ok(())
    }
}
