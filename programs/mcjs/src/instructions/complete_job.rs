use anchor_lang::prelude::*;
use anchor_spl::token::{Mint, Token, TokenAccount};

use crate::errors::McjsError;
use crate::events::{emit_event, CheckpointAttested, JobCompleted, OutputAttested};
use crate::instructions::settlement::take_off_node;
use crate::off_node;
use crate::state::{seeds::*, Config, Job, Node, Provider, Segment};

#[derive(AnchorSerialize, AnchorDeserialize, Clone, Debug)]
pub struct CompleteJobArgs {
    pub generation: u32,
    pub output_hash: [u8; 32],
}

/// No seeds are checked on the Config, job, node or provider (state/seeds.rs,
/// "Where a program account's seeds are not checked again"): the job names
/// its node and provider, the node its provider (`has_one`), and the signer
/// must be the node's operator, except to complete a job whose output its
/// node attested (anyone may: the node may be gone). The token accounts are
/// checked by address or seeds.
#[derive(Accounts)]
pub struct CompleteJob<'info> {
    /// The assigned node's operator key; anyone once the output is attested.
    pub authority: Signer<'info>,
    pub config: Box<Account<'info, Config>>,
    #[account(mut)]
    pub provider: Box<Account<'info, Provider>>,
    #[account(
        mut,
        has_one = provider @ McjsError::WrongProvider,
    )]
    pub node: Box<Account<'info, Node>>,
    #[account(
        mut,
        constraint = job.provider == Some(provider.key()) @ McjsError::NotAssignedProvider,
        constraint = job.node == Some(node.key()) @ McjsError::WrongNode,
    )]
    pub job: Box<Account<'info, Job>>,
    #[account(
        mut,
        seeds = [SEED_PREFIX, job.key().as_ref(), SEED_VAULT],
        bump = job.vault_bump,
    )]
    pub job_vault: Box<Account<'info, TokenAccount>>,
    #[account(address = config.usdc_mint @ McjsError::WrongMint)]
    pub usdc_mint: Box<Account<'info, Mint>>,
    /// CHECK: pinned to the provider's payout account by address; paid
    /// only if it can receive (`token::can_receive`: a closed one stops
    /// nothing, its share goes back to the bond).
    #[account(mut, address = provider.payout @ McjsError::WrongTokenAccount)]
    pub provider_payout: UncheckedAccount<'info>,
    /// CHECK: pinned to the Config's treasury by address; paid only if it
    /// can receive, as the payout.
    #[account(mut, address = config.treasury @ McjsError::WrongTokenAccount)]
    pub treasury: UncheckedAccount<'info>,
    /// CHECK: the job owner's refund account, pinned by address; refunded
    /// only if it can receive (a closed one keeps the refund in the vault
    /// for `close_job`).
    #[account(
        mut,
        address = job.refund_account @ McjsError::WrongTokenAccount,
    )]
    pub owner_token: UncheckedAccount<'info>,
    pub token_program: Program<'info, Token>,
    /// The current assignment's Segment, when the job's payment is held
    /// (a verified job); checked against the job when it is settled.
    #[account(mut)]
    pub segment: Option<Box<Account<'info, Segment>>>,
}

impl CompleteJob<'_> {
    fn validate(&self, args: &CompleteJobArgs, now: i64) -> Result<()> {
        require!(
            self.job.output_attested() || self.node.is_operator(&self.authority.key()),
            McjsError::NotNodeOperator
        );
        self.job.require_generation(args.generation)?;
        if let Some(attested) = self.job.output_hash {
            require!(attested == args.output_hash, McjsError::OutputMismatch);
        }
        self.job.require_draw_gap(now, self.config.params.draw_secs)
    }

    /// The job finished with its output. A job whose payment is held for
    /// checks (a verified job) first has its output attested, as the last
    /// interval of its run (`Job::attest_output`): billed, held and open to
    /// a draw like any other, and nothing more happens. Called again once
    /// the draw has had its time and no check is open (by anyone), or
    /// straight away for any other job, it completes: the last segment is
    /// paid (the output is the final progress mark) and the rest of the
    /// bond refunded.
    #[access_control(ctx.accounts.validate(&args, Clock::get()?.unix_timestamp))]
    pub fn complete_job(ctx: Context<Self>, args: CompleteJobArgs) -> Result<()> {
        let clock = Clock::get()?;
        let now = clock.unix_timestamp;
        let accounts = ctx.accounts;
        let job = &mut accounts.job;
        require!(
            matches!(job.state, crate::state::JobState::Running { .. }),
            McjsError::JobNotRunning
        );
        if job.holds_payment && job.output_hash.is_none() {
            return accounts.attest_output(&args, clock.slot, now);
        }
        let until = job.billed_until(now);
        job.accrue(until, accounts.config.params.liveness_factor)?;
        let refund = take_off_node(
            off_node!(accounts, Some(accounts.owner_token.to_account_info())),
            true,
            now,
            |job| job.complete(args.output_hash, now),
        )?;
        let provider = &mut accounts.provider;
        provider.jobs_completed = provider
            .jobs_completed
            .checked_add(1)
            .ok_or(McjsError::Overflow)?;
        let job = &accounts.job;
        emit_event(JobCompleted {
            job: job.key(),
            node: accounts.node.key(),
            generation: args.generation,
            output_hash: args.output_hash,
            refund,
            by: accounts.authority.key(),
            at: now,
        });
        Ok(())
    }

    /// Attests the output as the run's last interval: billed to now (what
    /// the bond still covers: the run is over, so nothing pauses), open to
    /// the draw from this slot, announced as such and then as an
    /// attestation (in that order), so that the job's history recomputes
    /// its hash chain and knows the record's labels repeat the last
    /// checkpoint's.
    fn attest_output(&mut self, args: &CompleteJobArgs, slot: u64, now: i64) -> Result<()> {
        let job = &mut self.job;
        job.attest_output(args.output_hash, now)?;
        let until = job.run_billed_until(now);
        let accrual = job.accrue(until, self.config.params.liveness_factor)?;
        job.last_attest_slot = slot;
        job.last_interval_amount = accrual.amount;
        job.assignment_earned = job
            .assignment_earned
            .checked_add(accrual.amount)
            .ok_or(McjsError::Overflow)?;
        let last = job.last_checkpoint.ok_or(McjsError::InvalidJobState)?;
        emit_event(OutputAttested {
            job: job.key(),
            node: self.node.key(),
            generation: args.generation,
            output_hash: args.output_hash,
            interval: job.checkpoint_count,
            by: self.authority.key(),
            at: now,
        });
        emit_event(CheckpointAttested {
            job: job.key(),
            node: self.node.key(),
            generation: args.generation,
            epoch: last.epoch,
            step: last.step,
            checkpoint_hash: args.output_hash,
            chain: job.checkpoint_chain,
            accrued: job.accrued,
            by: self.authority.key(),
            at: now,
        });
        job.invariant()
    }
}
