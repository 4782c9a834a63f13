use anchor_lang::prelude::*;

use crate::errors::McjsError;
use crate::events::{emit_event, JobAssigned};
use crate::state::{seeds::*, Config, Job, Node, Provider, SchedulerLease, Segment, SegmentState};

/// No seeds are checked on the Config, lease, job, node or provider (state/seeds.rs,
/// "Where a program account's seeds are not checked again"): the Config is
/// the only one, the scheduler may place any queued job on any available
/// node that fits, and the node names its provider (`has_one`). The new
/// Segment is created at its PDA (`init`).
#[derive(Accounts)]
pub struct AssignJob<'info> {
    /// The scheduler that holds the lease.
    #[account(mut)]
    pub scheduler: Signer<'info>,
    pub config: Account<'info, Config>,
    pub lease: Account<'info, SchedulerLease>,
    #[account(mut)]
    pub job: Box<Account<'info, Job>>,
    #[account(
        mut,
        has_one = provider @ McjsError::WrongProvider,
    )]
    pub node: Box<Account<'info, Node>>,
    #[account(mut)]
    pub provider: Box<Account<'info, Provider>>,
    /// A verified job's Segment for this assignment (the generation it is
    /// about to get), paid for by the scheduler and given back on release.
    #[account(
        init,
        payer = scheduler,
        space = 8 + Segment::INIT_SPACE,
        seeds = [SEED_PREFIX, job.key().as_ref(), SEED_SEGMENT, &job.next_generation_seed()],
        bump,
    )]
    pub segment: Option<Box<Account<'info, Segment>>>,
    pub system_program: Option<Program<'info, System>>,
}

impl AssignJob<'_> {
    fn validate(&self) -> Result<()> {
        self.lease
            .require_holder(&self.config, &self.scheduler.key())?;
        require!(!self.config.paused, McjsError::ProgramPaused);
        require!(self.job.state.can_assign(), McjsError::JobNotQueued);
        require!(self.node.status.can_take_job(), McjsError::NodeNotAvailable);
        self.provider
            .require_min_stake(self.config.params.min_provider_stake)?;
        self.job.requirements.check(&self.node.hardware)?;
        // A GPU busy answering a challenge is not free, and the answer
        // would be late.
        require!(
            self.node.challenge.in_flight.is_none(),
            McjsError::ChallengeInFlight
        );
        if self.config.params.require_proven_hardware {
            self.node.require_proven_class(&self.job.requirements)?;
        }
        self.node.require_attested(&self.job.requirements)?;
        require!(
            self.node.price_per_gpu_hour <= self.job.terms.max_price_per_gpu_hour,
            McjsError::NodePriceTooHigh
        );
        require!(
            self.job.barred_provider != Some(self.provider.key()),
            McjsError::ProviderBarred
        );
        let holds = self.job.holds_payment_under(&self.config.params);
        require!(holds == self.segment.is_some(), McjsError::SegmentRequired);
        require!(
            self.job.has_segment_room(&self.config.params),
            McjsError::SegmentsFull
        );
        Ok(())
    }

    /// Places a queued job on a node that satisfies its requirements; the
    /// rate (node price × the job's GPUs) is locked and the generation bumps.
    #[access_control(ctx.accounts.validate())]
    pub fn assign_job(ctx: Context<Self>) -> Result<()> {
        let now = Clock::get()?.unix_timestamp;
        let accounts = ctx.accounts;
        let rate = accounts
            .node
            .price_per_gpu_hour
            .checked_mul(u64::from(accounts.job.requirements.gpu_count))
            .ok_or(McjsError::Overflow)?;
        let (job_key, node_key, provider_key) = (
            accounts.job.key(),
            accounts.node.key(),
            accounts.provider.key(),
        );
        accounts.job.assign(node_key, provider_key, rate, now)?;
        if let Some(segment) = accounts.segment.as_deref_mut() {
            segment.set_inner(Segment {
                job: job_key,
                provider: provider_key,
                provider_payout: accounts.provider.payout,
                node: node_key,
                generation: accounts.job.generation,
                commission_bps: accounts.config.params.commission_bps,
                gross: 0,
                fees_paid: 0,
                state: SegmentState::OnNode,
                open_verifications: 0,
                rent_payer: accounts.scheduler.key(),
                bump: ctx.bumps.segment.ok_or(McjsError::SegmentRequired)?,
                start: accounts.job.last_checkpoint,
                verified_to: None,
                gpu_model: accounts.node.hardware.gpu_model.clone(),
                earned: 0,
                verified_earned: 0,
                withheld: 0,
                disproven: false,
            });
            accounts.job.holds_payment = true;
            accounts.provider.held_segments = accounts
                .provider
                .held_segments
                .checked_add(1)
                .ok_or(McjsError::Overflow)?;
            accounts.job.live_segments = accounts
                .job
                .live_segments
                .checked_add(1)
                .ok_or(McjsError::Overflow)?;
        }
        accounts.node.occupy(job_key, now)?;
        accounts.provider.take_assignment()?;
        accounts.job.invariant()?;
        accounts.node.invariant()?;
        emit_event(JobAssigned {
            job: job_key,
            node: node_key,
            provider: provider_key,
            generation: accounts.job.generation,
            rate_per_hour: rate,
            by: accounts.scheduler.key(),
            at: now,
        });
        Ok(())
    }
}
