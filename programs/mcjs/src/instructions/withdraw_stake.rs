use anchor_lang::prelude::*;
use anchor_spl::token::{Mint, Token, TokenAccount};

use crate::errors::McjsError;
use crate::events::{emit_event, StakeWithdrawn};
use crate::provider_signer_seeds;
use crate::state::{seeds::*, Config, Provider};
use crate::token::pay_out;

#[derive(Accounts)]
pub struct WithdrawStake<'info> {
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
    #[account(
        mut,
        seeds = [SEED_PREFIX, provider.key().as_ref(), SEED_VAULT],
        bump = provider.vault_bump,
    )]
    pub stake_vault: Account<'info, TokenAccount>,
    #[account(address = config.usdc_mint @ McjsError::WrongMint)]
    pub usdc_mint: Account<'info, Mint>,
    #[account(mut, constraint = destination.mint == usdc_mint.key() @ McjsError::WrongMint)]
    pub destination: Account<'info, TokenAccount>,
    pub token_program: Program<'info, Token>,
}

impl WithdrawStake<'_> {
    fn validate(&self, now: i64) -> Result<()> {
        let request = self
            .provider
            .pending_withdrawal
            .ok_or(McjsError::NoWithdrawalRequested)?;
        let ready_at = request
            .requested_at
            .checked_add(i64::from(self.config.params.withdrawal_cooldown_secs))
            .ok_or(McjsError::Overflow)?;
        require!(now >= ready_at, McjsError::CooldownNotElapsed);
        require!(
            self.provider.active_assignments == 0,
            McjsError::ActiveAssignments
        );
        require!(self.provider.held_segments == 0, McjsError::SegmentsHeld);
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
            .provider
            .pending_withdrawal
            .ok_or(McjsError::NoWithdrawalRequested)?;
        let amount = request.amount.min(accounts.provider.stake);
        let swept = accounts
            .stake_vault
            .amount
            .saturating_sub(accounts.provider.stake);
        let total = amount.checked_add(swept).ok_or(McjsError::Overflow)?;
        let (owner, bump);
        let seeds = provider_signer_seeds!(accounts.provider, owner, bump);
        pay_out(
            &accounts.token_program,
            &accounts.stake_vault,
            &accounts.usdc_mint,
            &accounts.destination.to_account_info(),
            accounts.provider.to_account_info(),
            &[&seeds],
            total,
        )?;
        let provider = &mut accounts.provider;
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
