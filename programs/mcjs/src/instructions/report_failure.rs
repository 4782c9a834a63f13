use anchor_lang::prelude::*;
use anchor_spl::token::{Mint, Token, TokenAccount};

use crate::errors::McjsError;
use crate::events::{emit_event, FailureReported};
use crate::instructions::settlement::take_off_node;
use crate::off_node;
use crate::provider_signer_seeds;
use crate::state::{
    seeds::*, Config, FailureCause, Job, JobState, Node, Provider, SchedulerLease, Segment,
};
use crate::token::pay_out;

#[derive(AnchorSerialize, AnchorDeserialize, Clone, Debug)]
pub struct ReportFailureArgs {
    /// The generation the reporter saw fail; a report about an older
    /// assignment is rejected, so it can never hit the job's new node.
    pub generation: u32,
    pub cause: FailureCause,
}

/// No seeds are checked on the Config, lease, job, node or provider (state/seeds.rs,
/// "Where a program account's seeds are not checked again"): the job names
/// its node and provider, the node its provider (`has_one`). The token
/// accounts are checked by address or seeds.
#[derive(Accounts)]
pub struct ReportFailure<'info> {
    /// The scheduler that holds the lease, or anyone once the job has
    /// stalled and the lease has lapsed (no scheduler acts).
    pub reporter: Signer<'info>,
    pub config: Box<Account<'info, Config>>,
    pub lease: Box<Account<'info, SchedulerLease>>,
    #[account(
        mut,
        constraint = job.provider == Some(provider.key()) @ McjsError::NotAssignedProvider,
        constraint = job.node == Some(node.key()) @ McjsError::WrongNode,
    )]
    pub job: Box<Account<'info, Job>>,
    #[account(
        mut,
        has_one = provider @ McjsError::WrongProvider,
    )]
    pub node: Box<Account<'info, Node>>,
    #[account(mut)]
    pub provider: Box<Account<'info, Provider>>,
    #[account(
        mut,
        seeds = [SEED_PREFIX, provider.key().as_ref(), SEED_VAULT],
        bump = provider.vault_bump,
    )]
    pub stake_vault: Box<Account<'info, TokenAccount>>,
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
    /// Receives the slash: never the job's owner or the reporter, so that
    /// nobody profits from a provider's failure.
    #[account(mut, address = config.insurance_pool @ McjsError::WrongTokenAccount)]
    pub insurance_pool: Box<Account<'info, TokenAccount>>,
    /// CHECK: the job owner's refund account, pinned by address: receives
    /// the refund if the job ends and it can receive (a closed one keeps
    /// the refund in the vault for `close_job`).
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

impl ReportFailure<'_> {
    fn validate(&self, args: &ReportFailureArgs) -> Result<()> {
        let clock = Clock::get()?;
        let (now, slot) = (clock.unix_timestamp, clock.slot);
        require!(self.job.state.is_on_node(), McjsError::InvalidJobState);
        // Its output attested, the job's run is over: it waits only for its
        // draw and any check, then anyone completes it.
        require!(!self.job.output_attested(), McjsError::JobFinishing);
        self.job.require_generation(args.generation)?;
        // A job whose completion waits on a check is not late: no overdue
        // report, from anyone, until the check resolves (within its window)
        // and a full liveness window has passed after it.
        if args.cause == FailureCause::CheckpointOverdue {
            require!(
                self.job.open_verifications == 0,
                McjsError::VerificationOpen
            );
        }
        if !self.lease.is_held_by(&self.config, &self.reporter.key()) {
            // Anyone else only while no scheduler acts: a live scheduler
            // excuses the lateness an outage of the store or of its own
            // network causes, and a stranger's report would slash for it.
            require!(
                self.lease.lapsed(&self.config, slot),
                McjsError::SchedulerLive
            );
            require!(
                self.job.open_verifications == 0,
                McjsError::VerificationOpen
            );
            require!(
                args.cause.is_infrastructure(),
                McjsError::JobErrorNeedsScheduler
            );
            let window = self
                .job
                .terms
                .billing_window_secs(self.config.params.liveness_factor)?;
            let last = self.job.last_progress().ok_or(McjsError::InvalidJobState)?;
            let stalled_for = u64::try_from(now.saturating_sub(last)).unwrap_or(0);
            require!(stalled_for >= window, McjsError::JobNotStalled);
        }
        Ok(())
    }

    /// Takes a job off a failed node: pays the node's provider for attested
    /// progress only, slashes it into the insurance pool for an
    /// infrastructure failure (never for the job's own), fences the
    /// node (new generation) and queues the job again — or ends it Failed,
    /// refunding the rest, once the job's own errors spent its restart
    /// budget. A job at its cap ends Expired, and nobody is slashed: its
    /// run is over (`Job::on_report`).
    #[access_control(ctx.accounts.validate(&args))]
    pub fn report_failure(ctx: Context<Self>, args: ReportFailureArgs) -> Result<()> {
        let now = Clock::get()?.unix_timestamp;
        let accounts = ctx.accounts;
        let provider_key = accounts.provider.key();
        let infrastructure = accounts.job.report_slashes(args.cause);
        let slashed = if infrastructure {
            let slashed = accounts
                .provider
                .slash(accounts.config.params.slash_amount)?;
            let (owner, bump);
            let seeds = provider_signer_seeds!(accounts.provider, owner, bump);
            pay_out(
                &accounts.token_program,
                &accounts.stake_vault,
                &accounts.usdc_mint,
                &accounts.insurance_pool.to_account_info(),
                accounts.provider.to_account_info(),
                &[&seeds],
                slashed,
            )?;
            slashed
        } else {
            0
        };

        let refund = take_off_node(
            off_node!(accounts, Some(accounts.owner_token.to_account_info())),
            !infrastructure,
            now,
            |job| job.on_report(args.cause, now),
        )?;
        let job = &accounts.job;
        let job_failed = matches!(job.state, JobState::Failed { .. });
        emit_event(FailureReported {
            job: job.key(),
            node: accounts.node.key(),
            provider: provider_key,
            failed_generation: args.generation,
            cause: args.cause,
            slashed,
            slashed_to: accounts.insurance_pool.key(),
            restarts_used: job.restarts_used,
            job_failed,
            refund,
            by: accounts.reporter.key(),
            at: now,
        });
        Ok(())
    }
}
