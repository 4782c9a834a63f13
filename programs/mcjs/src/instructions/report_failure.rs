use anchor_lang::prelude::*;
use anchor_spl::token::TokenAccount;

use crate::errors::McjsError;
use crate::events::{emit_event, FailureReported};
use crate::instructions::on_node::*;
use crate::instructions::settlement::take_off_node;
use crate::provider_signer_seeds;
use crate::state::{seeds::*, FailureCause, JobState, SchedulerLease};
use crate::token::Vault;

#[derive(AnchorSerialize, AnchorDeserialize, Clone, Debug)]
pub struct ReportFailureArgs {
    /// The generation the reporter saw fail; a report about an older
    /// assignment is rejected, so it can never hit the job's new node.
    pub generation: u32,
    pub cause: FailureCause,
}

/// No seeds are checked on the lease (state/seeds.rs, "Where a program
/// account's seeds are not checked again"); the token accounts are checked
/// by address or seeds.
#[derive(Accounts)]
pub struct ReportFailure<'info> {
    /// The scheduler that holds the lease, or anyone once the job has
    /// stalled and the lease has lapsed (no scheduler acts).
    pub reporter: Signer<'info>,
    pub lease: Box<Account<'info, SchedulerLease>>,
    #[account(
        mut,
        seeds = [SEED_PREFIX, on_node.provider.key().as_ref(), SEED_VAULT],
        bump = on_node.provider.vault_bump,
    )]
    pub stake_vault: Box<Account<'info, TokenAccount>>,
    /// Receives the slash: never the job's owner or the reporter, so that
    /// nobody profits from a provider's failure.
    #[account(mut, address = on_node.bond.config.insurance_pool @ McjsError::WrongTokenAccount)]
    pub insurance_pool: Box<Account<'info, TokenAccount>>,
    /// The job on its node, with its owner's refund account (a report may
    /// end the job); last, so that its optional Segment is the
    /// instruction's last account.
    pub on_node: JobOnNode<'info>,
}

impl ReportFailure<'_> {
    fn validate(&self, args: &ReportFailureArgs) -> Result<()> {
        let clock = Clock::get()?;
        let (now, slot) = (clock.unix_timestamp, clock.slot);
        require!(
            self.on_node.bond.job.state.is_on_node(),
            McjsError::InvalidJobState
        );
        // Its output attested, the job's run is over: it waits only for its
        // draw and any check, then anyone completes it.
        require!(
            !self.on_node.bond.job.output_attested(),
            McjsError::JobFinishing
        );
        self.on_node.bond.job.require_generation(args.generation)?;
        // A job whose completion waits on a check is not late: no overdue
        // report, from anyone, until the check resolves (within its window)
        // and a full liveness window has passed after it.
        if args.cause == FailureCause::CheckpointOverdue {
            require!(
                self.on_node.bond.job.open_verifications == 0,
                McjsError::VerificationOpen
            );
        }
        if !self
            .lease
            .is_held_by(&self.on_node.bond.config, &self.reporter.key())
        {
            // Anyone else only while no scheduler acts: a live scheduler
            // excuses the lateness an outage of the store or of its own
            // network causes, and a stranger's report would slash for it.
            require!(
                self.lease.lapsed(&self.on_node.bond.config, slot),
                McjsError::SchedulerLive
            );
            require!(
                self.on_node.bond.job.open_verifications == 0,
                McjsError::VerificationOpen
            );
            require!(
                args.cause.is_infrastructure(),
                McjsError::JobErrorNeedsScheduler
            );
            let window = self
                .on_node
                .bond
                .job
                .terms
                .billing_window_secs(self.on_node.bond.config.params.liveness_factor)?;
            let last = self
                .on_node
                .bond
                .job
                .last_progress()
                .ok_or(McjsError::InvalidJobState)?;
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
        let provider_key = accounts.on_node.provider.key();
        let infrastructure = accounts.on_node.bond.job.report_slashes(args.cause);
        let slashed = if infrastructure {
            let slashed = accounts
                .on_node
                .provider
                .slash(accounts.on_node.bond.config.params.slash_amount)?;
            let (owner, bump);
            let seeds = provider_signer_seeds!(accounts.on_node.provider, owner, bump);
            let bond = &accounts.on_node.bond;
            Vault::new(&bond.token_program, &*accounts.stake_vault, &bond.usdc_mint).pay(
                &accounts.insurance_pool.to_account_info(),
                accounts.on_node.provider.to_account_info(),
                &[&seeds],
                slashed,
            )?;
            slashed
        } else {
            0
        };

        let refund = take_off_node(accounts.on_node.off_node(), !infrastructure, now, |job| {
            job.on_report(args.cause, now)
        })?;
        let job = &accounts.on_node.bond.job;
        let job_failed = matches!(job.state, JobState::Failed { .. });
        emit_event(FailureReported {
            job: job.key(),
            node: accounts.on_node.node.key(),
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
