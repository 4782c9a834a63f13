//! A job's bond and the accounts that move it, declared once and nested in
//! each instruction that funds or refunds a job off its node
//! (`top_up`, `cancel_job`, `expire_job`, `close_job`).

use anchor_lang::prelude::*;
use anchor_spl::token::{Mint, Token, TokenAccount};

use crate::errors::McjsError;
use crate::instructions::settlement::refund_from_bond;
use crate::state::{seeds::*, Config, Job};
use crate::token::Vault;

/// A job and its vault. No seeds are checked on the Config or the job
/// (state/seeds.rs, "Where a program account's seeds are not checked
/// again"); the vault, a token account anyone could imitate, by its seeds.
#[derive(Accounts)]
pub struct JobBond<'info> {
    pub config: Box<Account<'info, Config>>,
    #[account(mut)]
    pub job: Box<Account<'info, Job>>,
    #[account(
        mut,
        seeds = [SEED_PREFIX, job.key().as_ref(), SEED_VAULT],
        bump = job.vault_bump,
    )]
    pub job_vault: Box<Account<'info, TokenAccount>>,
    #[account(address = config.usdc_mint @ McjsError::WrongMint)]
    pub usdc_mint: Box<Account<'info, Mint>>,
    pub token_program: Program<'info, Token>,
}

impl<'info> JobBond<'info> {
    /// The job's vault, paid out of signed by the job.
    pub fn vault(&self) -> Vault<'info> {
        Vault::new(&self.token_program, &*self.job_vault, &self.usdc_mint)
    }

    /// Refunds the whole bond to `to` (pinned by the instruction to the
    /// owner) if it can receive; returns what was paid.
    pub fn refund(&mut self, to: &AccountInfo<'info>) -> Result<u64> {
        let (bond, vault) = (self.job.bond, self.vault());
        refund_from_bond(&mut self.job, &vault, to, bond)
    }
}

/// A job its owner signs for, with one of the owner's USDC accounts
/// (`top_up` pays from it, `cancel_job` refunds into it).
#[derive(Accounts)]
pub struct OwnersBond<'info> {
    #[account(address = bond.job.owner @ McjsError::NotOwner)]
    pub owner: Signer<'info>,
    #[account(
        mut,
        constraint = owner_token.mint == bond.usdc_mint.key() @ McjsError::WrongMint,
        constraint = owner_token.owner == owner.key() @ McjsError::NotOwner,
    )]
    pub owner_token: Box<Account<'info, TokenAccount>>,
    pub bond: JobBond<'info>,
}
