use anchor_lang::prelude::*;
use anchor_spl::token::TokenAccount;

use crate::errors::McjsError;
use crate::events::{emit_event, StakeWithdrawn};
use crate::instructions::provider_stake::*;
use crate::provider_signer_seeds;

#[derive(Accounts)]
pub struct WithdrawStake<'info> {
    pub stake: ProviderStake<'info>,
    #[account(mut, constraint = destination.mint == stake.usdc_mint.key() @ McjsError::WrongMint)]
    pub destination: Account<'info, TokenAccount>,
}

impl WithdrawStake<'_> {
    fn validate(&self, now: i64) -> Result<()> {
        let request = self
            .stake
            .owned
            .provider
            .pending_withdrawal
            .ok_or(McjsError::NoWithdrawalRequested)?;
        let ready_at = request
            .requested_at
            .checked_add(i64::from(
                self.stake.owned.config.params.withdrawal_cooldown_secs,
            ))
            .ok_or(McjsError::Overflow)?;
        require!(now >= ready_at, McjsError::CooldownNotElapsed);
        require!(
            self.stake.owned.provider.active_assignments == 0,
            McjsError::ActiveAssignments
        );
        require!(
            self.stake.owned.provider.held_segments == 0,
            McjsError::SegmentsHeld
        );
        Ok(())
    }

    /// Withdraws the requested stake once the cooldown has passed, no job
    /// is assigned and no verified payment is held (a check could still
    /// slash it). A slash since the request reduces what leaves. Tokens
    /// sent into the vault from outside its bookkeeping leave with it.
    #[access_control(ctx.accounts.validate(Clock::get()?.unix_timestamp))]
    pub fn withdraw_stake(ctx: Context<Self>) -> Result<()> {
        let accounts = ctx.accounts;
        let request = accounts
            .stake
            .owned
            .provider
            .pending_withdrawal
            .ok_or(McjsError::NoWithdrawalRequested)?;
        let amount = request.amount.min(accounts.stake.owned.provider.stake);
        let swept = accounts
            .stake
            .stake_vault
            .amount
            .saturating_sub(accounts.stake.owned.provider.stake);
        let total = amount.checked_add(swept).ok_or(McjsError::Overflow)?;
        let (owner, bump);
        let seeds = provider_signer_seeds!(accounts.stake.owned.provider, owner, bump);
        accounts.stake.vault().pay(
            &accounts.destination.to_account_info(),
            accounts.stake.owned.provider.to_account_info(),
            &[&seeds],
            total,
        )?;
        let provider = &mut accounts.stake.owned.provider;
        provider.stake = provider
            .stake
            .checked_sub(amount)
            .ok_or(McjsError::Overflow)?;
        provider.pending_withdrawal = None;
        provider.invariant()?;
        emit_event(StakeWithdrawn {
            provider: provider.key(),
            amount,
            stake: provider.stake,
            swept,
        });
        Ok(())
    }
}
