//! Token movements: `transfer_checked` only, and only these paths.

use anchor_lang::prelude::*;
use anchor_spl::token::{self, CloseAccount, Mint, Token, TokenAccount, TransferChecked};

use crate::errors::McjsError;
use crate::state::BPS_DENOMINATOR;

/// Tokens from a wallet-owned account, signed by the wallet.
pub fn deposit<'info>(
    token_program: &Program<'info, Token>,
    from: &Account<'info, TokenAccount>,
    mint: &Account<'info, Mint>,
    to: &Account<'info, TokenAccount>,
    authority: &Signer<'info>,
    amount: u64,
) -> Result<()> {
    require!(amount > 0, McjsError::ZeroAmount);
    token::transfer_checked(
        CpiContext::new(
            token_program.key(),
            TransferChecked {
                from: from.to_account_info(),
                mint: mint.to_account_info(),
                to: to.to_account_info(),
                authority: authority.to_account_info(),
            },
        ),
        amount,
        mint.decimals,
    )
}

/// A token account the program pays out of (a job's vault, a provider's
/// stake vault, the insurance pool) with the mint and the token program
/// every payment out of it names: the only way tokens leave the program.
///
/// A payment's destination is any account: the SPL Token program refuses a
/// transfer to one that is not a token account of the mint
/// (`transfer_checked` checks the mint of both sides), so an instruction
/// whose destination is pinned by address to a key it validated earlier
/// (the Config's treasury and insurance pool, a job's refund account, a
/// provider's or checker's payout account) need not deserialise it: it may
/// pass an `UncheckedAccount`. A vault not deserialised either (one pinned
/// by its seeds) is checked by the SPL Token program: its authority must
/// own it and its mint must be `mint`.
pub struct Vault<'info> {
    token_program: Pubkey,
    account: AccountInfo<'info>,
    mint: AccountInfo<'info>,
    decimals: u8,
}

impl<'info> Vault<'info> {
    pub fn new(
        token_program: &Program<'info, Token>,
        account: &impl ToAccountInfo<'info>,
        mint: &Account<'info, Mint>,
    ) -> Self {
        Self {
            token_program: token_program.key(),
            account: account.to_account_info(),
            mint: mint.to_account_info(),
            decimals: mint.decimals,
        }
    }

    /// Pays `amount` to `to`, signed by the vault's authority (a PDA, by
    /// its seeds). Zero moves nothing.
    pub fn pay(
        &self,
        to: &AccountInfo<'info>,
        authority: AccountInfo<'info>,
        signer_seeds: &[&[&[u8]]],
        amount: u64,
    ) -> Result<()> {
        if amount == 0 {
            return Ok(());
        }
        token::transfer_checked(
            CpiContext::new_with_signer(
                self.token_program,
                TransferChecked {
                    from: self.account.clone(),
                    mint: self.mint.clone(),
                    to: to.clone(),
                    authority,
                },
                signer_seeds,
            ),
            amount,
            self.decimals,
        )
    }

    /// [`Vault::pay`] when `to` can receive ([`can_receive`]); otherwise
    /// nothing moves and the caller keeps `amount` where its owner can
    /// still claim it. Returns what was paid.
    pub fn pay_or_keep(
        &self,
        to: &AccountInfo<'info>,
        authority: AccountInfo<'info>,
        signer_seeds: &[&[&[u8]]],
        amount: u64,
    ) -> Result<u64> {
        if amount == 0 || !can_receive(to, self.mint.key) {
            return Ok(0);
        }
        self.pay(to, authority, signer_seeds, amount)?;
        Ok(amount)
    }
}

/// Whether `to` can take a transfer of `mint` now: a token account of the
/// SPL Token program for `mint`, initialised and not frozen. Its owner can
/// close it (and the mint's freeze authority freeze it) at any time, so a
/// settlement that pays a participant checks first and keeps what it cannot
/// pay ([`Vault::pay_or_keep`]): closing an account one is paid into must
/// never stop a job from leaving a node, a segment from settling or a check
/// from resolving.
pub fn can_receive(to: &AccountInfo<'_>, mint: &Pubkey) -> bool {
    if to.owner != &anchor_spl::token::ID {
        return false;
    }
    let Ok(data) = to.try_borrow_data() else {
        return false;
    };
    TokenAccount::try_deserialize(&mut &data[..]).is_ok_and(|account| {
        account.mint == *mint
            && account.state == anchor_spl::token::spl_token::state::AccountState::Initialized
    })
}

pub fn close_vault<'info>(
    token_program: &Program<'info, Token>,
    vault: &Account<'info, TokenAccount>,
    destination: AccountInfo<'info>,
    vault_authority: AccountInfo<'info>,
    signer_seeds: &[&[&[u8]]],
) -> Result<()> {
    token::close_account(CpiContext::new_with_signer(
        token_program.key(),
        CloseAccount {
            account: vault.to_account_info(),
            destination,
            authority: vault_authority,
        },
        signer_seeds,
    ))
}

/// `(provider share, commission)` of a payment.
pub fn split_commission(amount: u64, commission_bps: u16) -> Result<(u64, u64)> {
    let commission = u128::from(amount)
        .checked_mul(u128::from(commission_bps))
        .ok_or(McjsError::Overflow)?
        / u128::from(BPS_DENOMINATOR);
    let commission = u64::try_from(commission).map_err(|_| error!(McjsError::Overflow))?;
    let provider = amount.checked_sub(commission).ok_or(McjsError::Overflow)?;
    Ok((provider, commission))
}
