use anchor_lang::prelude::*;
use anchor_spl::token::{Mint, Token, TokenAccount};

use crate::errors::McjsError;
use crate::events::{emit_event, CheckpointAttested, JobPaused};
use crate::instructions::settlement::{take_off_node, Hold, OffNode, SettlementAccounts};
use crate::state::{seeds::*, Config, Job, Node, PauseReason, Provider, Segment};
use crate::token::Vault;

#[derive(AnchorSerialize, AnchorDeserialize, Clone, Debug)]
pub struct AttestCheckpointArgs {
    pub generation: u32,
    pub epoch: u32,
    pub step: u64,
    pub checkpoint_hash: [u8; 32],
}

/// An attestation's common path moves no tokens: it reads the Config and
/// the node and writes only the job. The settlement accounts are needed
/// only when this attestation exhausts the bond (the job then pauses, its
/// segment is settled and the node released): without them that
/// attestation is refused (`SettlementAccountsRequired`), with nothing
/// changed, and the client sends it again with them (see
/// `Job::attestation_may_exhaust_bond`).
///
/// No seeds are checked on the Config, node or job (state/seeds.rs, "Where
/// a program account's seeds are not checked again"): the Config is the
/// only one; the node is pinned by the job (`job.node`) and the signer must
/// be its operator; the job is any genuine job whose node that is.
#[derive(Accounts)]
pub struct AttestCheckpoint<'info> {
    /// The assigned node's operator key.
    pub authority: Signer<'info>,
    pub config: Box<Account<'info, Config>>,
    /// Settlement only: the node's Provider account (`node.provider`, the
    /// job's `provider`), whose assignment count the pause releases.
    #[account(mut)]
    pub provider: Option<Box<Account<'info, Provider>>>,
    /// Read-only in the common path; passed writable with the settlement
    /// accounts (the pause releases it).
    #[account(constraint = node.is_operator(&authority.key()) @ McjsError::NotNodeOperator)]
    pub node: Box<Account<'info, Node>>,
    #[account(
        mut,
        constraint = job.node == Some(node.key()) @ McjsError::WrongNode,
    )]
    pub job: Box<Account<'info, Job>>,
    /// Settlement only: a token account, so its address is checked (anyone
    /// can create a token account whose authority is the job).
    #[account(
        mut,
        seeds = [SEED_PREFIX, job.key().as_ref(), SEED_VAULT],
        bump = job.vault_bump,
    )]
    pub job_vault: Option<Box<Account<'info, TokenAccount>>>,
    /// Settlement only.
    #[account(address = config.usdc_mint @ McjsError::WrongMint)]
    pub usdc_mint: Option<Box<Account<'info, Mint>>>,
    /// CHECK: settlement only: the provider's payout account, checked
    /// against `provider.payout` in the handler; paid only if it can
    /// receive (`token::can_receive`).
    #[account(mut)]
    pub provider_payout: Option<UncheckedAccount<'info>>,
    /// CHECK: settlement only: the treasury, pinned by address; paid only
    /// if it can receive.
    #[account(mut, address = config.treasury @ McjsError::WrongTokenAccount)]
    pub treasury: Option<UncheckedAccount<'info>>,
    /// Settlement only.
    pub token_program: Option<Program<'info, Token>>,
    /// The current assignment's Segment, when the job's payment is held
    /// (a verified job); checked against the job when it is settled.
    #[account(mut)]
    pub segment: Option<Box<Account<'info, Segment>>>,
}

impl AttestCheckpoint<'_> {
    fn validate(&self, args: &AttestCheckpointArgs, now: i64) -> Result<()> {
        self.job.require_generation(args.generation)?;
        self.job.require_draw_gap(now, self.config.params.draw_secs)
    }

    /// Records a checkpoint, extends the hash chain and accrues payment for
    /// the time since the previous progress mark. When the bond cannot cover
    /// it, the job pauses and the node is released.
    #[access_control(ctx.accounts.validate(&args, Clock::get()?.unix_timestamp))]
    pub fn attest_checkpoint(ctx: Context<Self>, args: AttestCheckpointArgs) -> Result<()> {
        let clock = Clock::get()?;
        let now = clock.unix_timestamp;
        let accounts = ctx.accounts;
        let job = &mut accounts.job;
        job.record_checkpoint(args.epoch, args.step, args.checkpoint_hash, now)?;
        let accrual = job.accrue(now, accounts.config.params.liveness_factor)?;
        job.last_attest_slot = clock.slot;
        job.last_interval_amount = accrual.amount;
        job.assignment_earned = job
            .assignment_earned
            .checked_add(accrual.amount)
            .ok_or(McjsError::Overflow)?;
        emit_event(CheckpointAttested {
            job: job.key(),
            node: accounts.node.key(),
            generation: args.generation,
            epoch: args.epoch,
            step: args.step,
            checkpoint_hash: args.checkpoint_hash,
            chain: job.checkpoint_chain,
            accrued: job.accrued,
            by: accounts.authority.key(),
            at: now,
        });

        if accrual.bond_exhausted {
            accounts.pause_on_exhausted_bond(now)?;
            let job = &accounts.job;
            emit_event(JobPaused {
                job: job.key(),
                generation: job.generation,
                reason: PauseReason::InsufficientBond,
                by: accounts.authority.key(),
                at: now,
            });
            return Ok(());
        }
        job.invariant()
    }

    /// The bond is exhausted: the segment is settled, the job pauses and the
    /// node is released, as `pause_job` does. Every settlement account must
    /// be here, the node writable; otherwise `SettlementAccountsRequired`
    /// (the transaction fails, so nothing this attestation did is kept).
    fn pause_on_exhausted_bond(&mut self, now: i64) -> Result<()> {
        let node_info = self.node.to_account_info();
        let (
            Some(provider),
            Some(job_vault),
            Some(usdc_mint),
            Some(provider_payout),
            Some(treasury),
            Some(token_program),
            true,
        ) = (
            self.provider.as_deref_mut(),
            self.job_vault.as_deref(),
            self.usdc_mint.as_deref(),
            self.provider_payout.as_ref(),
            self.treasury.as_ref(),
            self.token_program.as_ref(),
            node_info.is_writable,
        )
        else {
            return err!(McjsError::SettlementAccountsRequired);
        };
        // The job's provider, whose node this is: a Provider account is
        // genuine (owner and type checked), and these two relations pin it.
        require!(
            self.job.provider == Some(provider.key()),
            McjsError::NotAssignedProvider
        );
        require_keys_eq!(self.node.provider, provider.key(), McjsError::WrongProvider);
        require_keys_eq!(
            provider_payout.key(),
            provider.payout,
            McjsError::WrongTokenAccount
        );
        take_off_node(
            OffNode {
                job: &mut self.job,
                node: &mut self.node,
                provider,
                settlement: SettlementAccounts {
                    vault: Vault::new(token_program, job_vault, usdc_mint),
                    provider_payout: provider_payout.to_account_info(),
                    treasury: treasury.to_account_info(),
                },
                commission_bps: self.config.params.commission_bps,
                hold: Hold {
                    segment: self.segment.as_deref_mut(),
                    challenge_window_secs: self.config.params.challenge_window_secs,
                },
                owner_token: None,
            },
            true,
            now,
            |job| job.pause(PauseReason::InsufficientBond, now),
        )?;
        // The node is not `mut` in the accounts (the common path only reads
        // it), so Anchor does not write it back: it is written here, having
        // been checked writable above.
        AccountsExit::exit(&self.node, &crate::ID)
    }
}
