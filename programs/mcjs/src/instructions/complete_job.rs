use anchor_lang::prelude::*;

use crate::errors::McjsError;
use crate::events::{emit_event, CheckpointAttested, JobCompleted, OutputAttested};
use crate::instructions::on_node::*;
use crate::instructions::settlement::take_off_node;

#[derive(AnchorSerialize, AnchorDeserialize, Clone, Debug)]
pub struct CompleteJobArgs {
    pub generation: u32,
    pub output_hash: [u8; 32],
}

/// The signer must be the node's operator, except to complete a job whose
/// output its node attested (anyone may: the node may be gone).
#[derive(Accounts)]
pub struct CompleteJob<'info> {
    /// The assigned node's operator key; anyone once the output is attested.
    pub authority: Signer<'info>,
    /// The job on its node, with its owner's refund account (completion
    /// ends the job); last, so that its optional Segment is the
    /// instruction's last account.
    pub on_node: JobOnNode<'info>,
}

impl CompleteJob<'_> {
    fn validate(&self, args: &CompleteJobArgs, now: i64) -> Result<()> {
        require!(
            self.on_node.bond.job.output_attested()
                || self.on_node.node.is_operator(&self.authority.key()),
            McjsError::NotNodeOperator
        );
        self.on_node.bond.job.require_generation(args.generation)?;
        if let Some(attested) = self.on_node.bond.job.output_hash {
            require!(attested == args.output_hash, McjsError::OutputMismatch);
        }
        self.on_node
            .bond
            .job
            .require_draw_gap(now, self.on_node.bond.config.params.draw_secs)
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
        let job = &mut accounts.on_node.bond.job;
        require!(
            matches!(job.state, crate::state::JobState::Running { .. }),
            McjsError::JobNotRunning
        );
        if job.holds_payment && job.output_hash.is_none() {
            return accounts.attest_output(&args, clock.slot, now);
        }
        let until = job.billed_until(now);
        job.accrue(until, accounts.on_node.bond.config.params.liveness_factor)?;
        let refund = take_off_node(accounts.on_node.off_node(), true, now, |job| {
            job.complete(args.output_hash, now)
        })?;
        let provider = &mut accounts.on_node.provider;
        provider.jobs_completed = provider
            .jobs_completed
            .checked_add(1)
            .ok_or(McjsError::Overflow)?;
        let job = &accounts.on_node.bond.job;
        emit_event(JobCompleted {
            job: job.key(),
            node: accounts.on_node.node.key(),
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
        let job = &mut self.on_node.bond.job;
        job.attest_output(args.output_hash, now)?;
        let until = job.run_billed_until(now);
        let accrual = job.accrue(until, self.on_node.bond.config.params.liveness_factor)?;
        job.last_attest_slot = slot;
        job.last_interval_amount = accrual.amount;
        job.assignment_earned = job
            .assignment_earned
            .checked_add(accrual.amount)
            .ok_or(McjsError::Overflow)?;
        let last = job.last_checkpoint.ok_or(McjsError::InvalidJobState)?;
        emit_event(OutputAttested {
            job: job.key(),
            node: self.on_node.node.key(),
            generation: args.generation,
            output_hash: args.output_hash,
            interval: job.checkpoint_count,
            by: self.authority.key(),
            at: now,
        });
        emit_event(CheckpointAttested {
            job: job.key(),
            node: self.on_node.node.key(),
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
