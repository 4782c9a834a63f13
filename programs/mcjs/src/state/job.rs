use anchor_lang::prelude::*;

use crate::errors::McjsError;
use crate::state::config::ConfigParams;
use crate::state::terms::{minimum_bond, JobRequirements, JobTerms, STAGING_GRACE_SECS};
use crate::state::verification::MAX_LIVE_SEGMENTS;

/// A job: its declared requirements, its bond, and its life on chain.
#[account]
#[derive(InitSpace, Debug)]
pub struct Job {
    // The first fields have fixed offsets so that clients can find jobs by
    // owner, state and node with `getProgramAccounts` memcmp filters (see
    // `Job::OWNER_OFFSET` and friends); variable-length fields come last.
    pub owner: Pubkey,
    pub state: JobState,
    /// The node and Provider account of the current assignment.
    pub node: Option<Pubkey>,
    pub provider: Option<Pubkey>,
    pub job_id: u64,
    /// sha256 of the canonical (RFC 8785) Job Specification.
    pub spec_hash: [u8; 32],
    pub terms: JobTerms,
    /// Tokens held in the job's vault.
    pub bond: u64,
    /// Tokens paid out of the bond so far (providers and commission).
    pub paid: u64,
    /// Incremented by every (re)assignment and every removal from a node:
    /// attestations and completion must carry the current one.
    pub generation: u32,
    /// USDC base units per hour of the current assignment (node price × GPUs).
    pub rate_per_hour: u64,
    pub last_checkpoint: Option<CheckpointRecord>,
    /// `sha256(prev ‖ generation ‖ epoch ‖ step ‖ checkpoint_hash)` over every attestation.
    pub checkpoint_chain: [u8; 32],
    pub checkpoint_count: u32,
    /// When billable progress was last recorded (start or attestation).
    pub progress_mark: i64,
    /// Owed to the current assignment's provider, not yet paid.
    pub accrued: u64,
    /// Seconds billed over the whole job, capped by the maximum duration.
    pub billed_secs: u64,
    pub restarts_used: u8,
    pub output_hash: Option<[u8; 32]>,
    pub submitted_at: i64,
    pub first_running_at: Option<i64>,
    pub finished_at: Option<i64>,
    /// The owner's token account the bond came from: refunds and slashes
    /// go back there, whoever sends the transaction that settles the job.
    pub refund_account: Pubkey,
    pub bump: u8,
    pub vault_bump: u8,
    pub requirements: JobRequirements,
    /// The cause of the last reported failure, if any.
    pub last_failure: Option<FailureCause>,
    /// Paid back to the owner from the insurance pool (a job that failed
    /// for good through its providers' fault); never more than `paid`.
    pub compensated: u64,
    /// Verification sample rate in parts per million; 0: never verified.
    pub verification_ppm: u32,
    /// The checkpoint before `last_checkpoint`: where the latest interval starts.
    pub prev_checkpoint: Option<CheckpointRecord>,
    /// The slot that recorded the latest attestation (its sampling draw
    /// uses the hash of the first slot after it).
    pub last_attest_slot: u64,
    /// What the latest attestation accrued: the latest interval's payment.
    pub last_interval_amount: u64,
    /// Verifications of this job's intervals not yet resolved; the job
    /// cannot complete while any is open.
    pub open_verifications: u8,
    /// The current assignment's payment is held in a Segment account.
    pub holds_payment: bool,
    /// Tokens in the vault held for Segments (paid out of the bond, not yet
    /// released to providers): the vault holds `bond + held`.
    pub held: u64,
    /// Segment accounts of this job not yet closed: the job (the authority
    /// of the vault they are paid from) cannot be closed before them.
    pub live_segments: u32,
    /// The provider last proven wrong on this job: never assigned it again.
    pub barred_provider: Option<Pubkey>,
    /// The latest interval opened to verification: an interval is opened
    /// at most once, even after its Verification account is closed.
    pub last_opened_interval: u32,
    /// When the job's last open verification resolved: the stall clock of
    /// the anyone-may-report rule does not run while a check is open.
    pub checks_settled_at: i64,
    /// What the current (or, once off its node, the last) assignment's
    /// attestations accrued, fees and withheld intervals not taken off:
    /// where a check's interval ends in the assignment's pay.
    pub assignment_earned: u64,
    /// Where a check proving the latest interval wrong would take the job
    /// back to (`Segment::restore_point`): the start of the assignment that
    /// attested it, or the end of that assignment's latest confirmed
    /// interval. The store keeps this checkpoint whatever its age: neither
    /// the agent's prune nor any node's delete may remove it.
    pub restore_floor: Option<CheckpointRecord>,
    /// The provider on whose node the job last stopped as unable to succeed
    /// anywhere (`FailureCause::JobFatal`): that is one node's word, which
    /// a provider could give to end any job unslashed, so the job fails on
    /// it only when another provider's node says it too.
    pub fatal_claim: Option<Pubkey>,
}

#[derive(AnchorSerialize, AnchorDeserialize, Clone, Copy, Debug, PartialEq, Eq, InitSpace)]
pub struct CheckpointRecord {
    pub hash: [u8; 32],
    pub epoch: u32,
    pub step: u64,
    pub time: i64,
    pub generation: u32,
}

impl CheckpointRecord {
    /// Where the checkpoint stands in the job's history: its generation
    /// (every assignment has a later one than the last), then the job's own
    /// labels, which are the job's to pick and ordered only within an
    /// assignment.
    pub fn history_key(&self) -> (u32, u32, u64) {
        (self.generation, self.epoch, self.step)
    }
}

/// Where a job is; each variant carries the time it was entered.
#[derive(AnchorSerialize, AnchorDeserialize, Clone, Copy, Debug, PartialEq, Eq, InitSpace)]
pub enum JobState {
    Pending { since: i64 },
    Assigned { since: i64 },
    Running { since: i64 },
    Paused { since: i64, reason: PauseReason },
    Recovering { since: i64 },
    Completed { at: i64 },
    Failed { at: i64 },
    Cancelled { at: i64 },
    Expired { at: i64 },
}

#[derive(AnchorSerialize, AnchorDeserialize, Clone, Copy, Debug, PartialEq, Eq, InitSpace)]
pub enum PauseReason {
    Owner,
    InsufficientBond,
}

/// Why an assignment ended early. Who pays for each way a job can stop is
/// decided off chain in one table (`mcjs_protocol::failure`, mirrored in
/// docs/job-contract.md); the program enforces what each cause may do.
#[derive(AnchorSerialize, AnchorDeserialize, Clone, Copy, Debug, PartialEq, Eq, InitSpace)]
pub enum FailureCause {
    /// The node stopped answering (missed heartbeats, partition, crash).
    NodeLost,
    /// The container died and was not restarted.
    ContainerDied,
    /// No checkpoint attested within the allowed time.
    CheckpointOverdue,
    /// The job's own error (a non-zero exit): uses the restart budget, no slash.
    JobError,
    /// The job stopped itself after checkpointing (exit 75): queued again
    /// without using the restart budget if it attested a checkpoint on this
    /// assignment (otherwise like `JobError`), no slash.
    JobYielded,
    /// The job cannot succeed anywhere (exit 2, a spec that does not match
    /// its hash), as a node says: no slash; Failed (the bond refunded) when
    /// a second provider's node says so too, until then as `JobError`.
    JobFatal,
}

impl FailureCause {
    /// The provider's fault: slashed, its node taken offline. Only these
    /// may be reported by anyone other than the scheduler (once stalled).
    pub fn is_infrastructure(&self) -> bool {
        match self {
            FailureCause::NodeLost
            | FailureCause::ContainerDied
            | FailureCause::CheckpointOverdue => true,
            FailureCause::JobError | FailureCause::JobYielded | FailureCause::JobFatal => false,
        }
    }
}

impl JobState {
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            JobState::Completed { .. }
                | JobState::Failed { .. }
                | JobState::Cancelled { .. }
                | JobState::Expired { .. }
        )
    }

    pub fn is_on_node(&self) -> bool {
        matches!(self, JobState::Assigned { .. } | JobState::Running { .. })
    }

    pub fn can_assign(&self) -> bool {
        matches!(self, JobState::Pending { .. } | JobState::Recovering { .. })
    }

    pub fn can_cancel(&self) -> bool {
        matches!(
            self,
            JobState::Pending { .. } | JobState::Recovering { .. } | JobState::Paused { .. }
        )
    }

    pub fn can_top_up(&self) -> bool {
        !self.is_terminal()
    }

    pub fn name(&self) -> &'static str {
        match self {
            JobState::Pending { .. } => "pending",
            JobState::Assigned { .. } => "assigned",
            JobState::Running { .. } => "running",
            JobState::Paused { .. } => "paused",
            JobState::Recovering { .. } => "recovering",
            JobState::Completed { .. } => "completed",
            JobState::Failed { .. } => "failed",
            JobState::Cancelled { .. } => "cancelled",
            JobState::Expired { .. } => "expired",
        }
    }
}

/// `sha256(prev ‖ generation ‖ epoch ‖ step ‖ checkpoint_hash)`, integers little-endian.
pub fn extend_chain(
    prev: &[u8; 32],
    generation: u32,
    epoch: u32,
    step: u64,
    checkpoint_hash: &[u8; 32],
) -> [u8; 32] {
    solana_sha256_hasher::hashv(&[
        prev,
        &generation.to_le_bytes(),
        &epoch.to_le_bytes(),
        &step.to_le_bytes(),
        checkpoint_hash,
    ])
    .to_bytes()
}

/// What an accrual did to the bond.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Accrual {
    pub billed_secs: u64,
    pub amount: u64,
    /// The bond could not cover the full amount.
    pub bond_exhausted: bool,
}

impl Job {
    /// Byte offset of `owner` in the account data (after the discriminator).
    pub const OWNER_OFFSET: usize = 8;
    /// Byte offset of the `state` variant tag.
    pub const STATE_OFFSET: usize = 8 + 32;
    /// Byte offset of `node` (its `Option` tag) whenever the job is on a
    /// node: Assigned and Running carry 8 bytes after their tag.
    pub const NODE_OFFSET: usize = 8 + 32 + 1 + 8;

    pub fn require_generation(&self, generation: u32) -> Result<()> {
        require!(generation == self.generation, McjsError::StaleGeneration);
        Ok(())
    }

    /// A verified job's latest interval stays open to its draw for
    /// `draw_secs`: its next attestation, or its completion, waits that
    /// long, so a provider cannot hide a made-up checkpoint by attesting the
    /// next one before the scheduler has drawn it.
    pub fn require_draw_gap(&self, now: i64, draw_secs: u32) -> Result<()> {
        match self.last_checkpoint {
            Some(last) if self.verification_ppm > 0 => {
                require!(
                    now.saturating_sub(last.time) >= i64::from(draw_secs),
                    McjsError::AttestationTooSoon
                );
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// The generation the next assignment will get, as PDA seed bytes.
    pub fn next_generation_seed(&self) -> [u8; 4] {
        self.generation.wrapping_add(1).to_le_bytes()
    }

    pub fn bump_generation(&mut self) -> Result<()> {
        self.generation = self.generation.checked_add(1).ok_or(McjsError::Overflow)?;
        Ok(())
    }

    /// The bond not yet owed to anyone.
    pub fn unencumbered_bond(&self) -> u64 {
        self.bond.saturating_sub(self.accrued)
    }

    /// Whether another assignment may begin without exceeding the Segments
    /// a verified job may hold unreleased ([`MAX_LIVE_SEGMENTS`]). A job
    /// that does not hold payments always may.
    pub fn has_segment_room(&self, params: &ConfigParams) -> bool {
        !self.holds_payment_under(params) || self.live_segments < MAX_LIVE_SEGMENTS
    }

    /// Whether the job has been billed its whole maximum duration: no more
    /// of its work is paid, so none is attested or assigned; it completes
    /// with the output it has, or is reported and ends (`Job::on_report`).
    pub fn at_cap(&self) -> bool {
        self.billed_secs >= u64::from(self.terms.max_duration_secs)
    }

    /// Pending/Recovering → Assigned.
    pub fn assign(&mut self, node: Pubkey, provider: Pubkey, rate: u64, now: i64) -> Result<()> {
        match self.state {
            JobState::Pending { .. } | JobState::Recovering { .. } => {
                require!(!self.at_cap(), McjsError::DurationCapReached);
                if let Some(deadline) = self.terms.deadline {
                    require!(now <= deadline, McjsError::DeadlinePassed);
                }
                self.bump_generation()?;
                self.node = Some(node);
                self.provider = Some(provider);
                self.rate_per_hour = rate;
                self.accrued = 0;
                self.assignment_earned = 0;
                self.state = JobState::Assigned { since: now };
                Ok(())
            }
            _ => err!(McjsError::JobNotQueued),
        }
    }

    /// Assigned → Running: billing starts now, staging was never billed.
    pub fn start(&mut self, now: i64) -> Result<()> {
        match self.state {
            JobState::Assigned { .. } => {
                self.state = JobState::Running { since: now };
                self.progress_mark = now;
                self.first_running_at.get_or_insert(now);
                Ok(())
            }
            _ => err!(McjsError::JobNotAssigned),
        }
    }

    /// Whether this job's assignments hold their payment until checked: a
    /// verified job under a Config with a challenge window. The one owner of
    /// the rule: `assign_job` creates a Segment exactly then,
    /// `open_verification` is refused otherwise, and clients ask it before
    /// they pass a new Segment.
    pub fn holds_payment_under(&self, params: &ConfigParams) -> bool {
        self.verification_ppm > 0 && params.challenge_window_secs > 0
    }

    /// Records an attested checkpoint and extends the hash chain. A job at
    /// its cap attests nothing more: the run is over, and an attestation
    /// that bills nothing would keep it alive on its node for free.
    ///
    /// (epoch, step) must grow within an assignment only: they are the
    /// job's own labels, and one assignment's cannot bind the next. A
    /// provider that attests `(u32::MAX, u64::MAX)` and leaves would
    /// otherwise make every later attestation unacceptable; the next
    /// assignment's first checkpoint may carry any label. Across
    /// assignments, history is ordered by [`CheckpointRecord::history_key`].
    pub fn record_checkpoint(
        &mut self,
        epoch: u32,
        step: u64,
        hash: [u8; 32],
        now: i64,
    ) -> Result<()> {
        match self.state {
            JobState::Running { .. } => {}
            _ => return err!(McjsError::JobNotRunning),
        }
        require!(!self.output_attested(), McjsError::JobFinishing);
        require!(!self.at_cap(), McjsError::DurationCapReached);
        if let Some(last) = self
            .last_checkpoint
            .filter(|last| last.generation == self.generation)
        {
            require!(
                (epoch, step) > (last.epoch, last.step),
                McjsError::CheckpointNotAdvancing
            );
        }
        self.push_record(epoch, step, hash, now)
    }

    /// A verified job's output, attested as the last interval of its run:
    /// from its last checkpoint to its end, a stretch a draw reaches like
    /// any other, which a check re-executes to the job's exit, hashing its
    /// output as the job's node did (`Verification::output`). The record
    /// carries the last checkpoint's labels (none: zero) and the output's
    /// hash, and extends the hash chain as an attestation does. The job
    /// stays Running, and completes (`complete_job` again, by anyone) once
    /// the draw has had its time and no check is open; until then it
    /// attests nothing more and is neither reported nor paused. Allowed at
    /// the cap, as a completion is.
    pub fn attest_output(&mut self, output_hash: [u8; 32], now: i64) -> Result<()> {
        match self.state {
            JobState::Running { .. } => {}
            _ => return err!(McjsError::JobNotRunning),
        }
        require!(!self.output_attested(), McjsError::JobFinishing);
        let (epoch, step) = self
            .last_checkpoint
            .filter(|last| last.generation == self.generation)
            .map_or((0, 0), |last| (last.epoch, last.step));
        self.push_record(epoch, step, output_hash, now)?;
        self.output_hash = Some(output_hash);
        Ok(())
    }

    /// Whether the job's node attested its output and the job now only
    /// waits to complete ([`Job::attest_output`]).
    pub fn output_attested(&self) -> bool {
        matches!(self.state, JobState::Running { .. }) && self.output_hash.is_some()
    }

    /// Appends an attestation to the job's history: the hash chain, the
    /// restore floor of a new assignment, the latest interval.
    fn push_record(&mut self, epoch: u32, step: u64, hash: [u8; 32], now: i64) -> Result<()> {
        self.checkpoint_chain =
            extend_chain(&self.checkpoint_chain, self.generation, epoch, step, &hash);
        if self
            .last_checkpoint
            .is_none_or(|last| last.generation != self.generation)
        {
            // The assignment's first interval: until a check confirms one
            // of its intervals, a lie in it sends the job back to here.
            self.restore_floor = self.last_checkpoint;
        }
        // The job made progress since a node last called it fatal: a
        // fatal stop from here on is a new claim, to be confirmed anew.
        self.fatal_claim = None;
        self.prev_checkpoint = self.last_checkpoint;
        self.last_checkpoint = Some(CheckpointRecord {
            hash,
            epoch,
            step,
            time: now,
            generation: self.generation,
        });
        self.checkpoint_count = self
            .checkpoint_count
            .checked_add(1)
            .ok_or(McjsError::Overflow)?;
        Ok(())
    }

    /// Marks the accrued amount as paid out of the bond.
    pub fn settle_accrued(&mut self) -> Result<u64> {
        let amount = self.accrued;
        self.bond = self.bond.checked_sub(amount).ok_or(McjsError::Overflow)?;
        self.paid = self.paid.checked_add(amount).ok_or(McjsError::Overflow)?;
        self.accrued = 0;
        Ok(amount)
    }

    /// Adds `amount`, just paid into the job's vault (a top-up, or a held
    /// payment given back), to the bond.
    pub fn add_to_bond(&mut self, amount: u64) -> Result<()> {
        self.bond = self.bond.checked_add(amount).ok_or(McjsError::Overflow)?;
        Ok(())
    }

    /// What a settlement could not pay (its recipient's account closed)
    /// goes back to the bond: out of `paid`, still in the vault.
    pub fn unpay(&mut self, amount: u64) -> Result<()> {
        self.paid = self.paid.checked_sub(amount).ok_or(McjsError::Overflow)?;
        self.bond = self.bond.checked_add(amount).ok_or(McjsError::Overflow)?;
        Ok(())
    }

    /// Takes the job off its node: the node is fenced by the new generation.
    fn leave_node(&mut self) -> Result<()> {
        require!(self.accrued == 0, McjsError::InvalidJobState);
        self.node = None;
        self.provider = None;
        self.rate_per_hour = 0;
        self.holds_payment = false;
        self.bump_generation()
    }

    /// The generation that completed the job (its output is stored under
    /// it): completing takes the job off its node, which moves the
    /// generation on by one, and a completed job's generation never moves
    /// again.
    pub fn completed_generation(&self) -> Option<u32> {
        match self.state {
            JobState::Completed { .. } => self.generation.checked_sub(1),
            _ => None,
        }
    }

    /// Running → Completed, once no verification of its intervals is open.
    pub fn complete(&mut self, output_hash: [u8; 32], now: i64) -> Result<()> {
        require!(self.open_verifications == 0, McjsError::VerificationOpen);
        match self.state {
            JobState::Running { .. } => {
                self.leave_node()?;
                self.output_hash = Some(output_hash);
                self.state = JobState::Completed { at: now };
                self.finished_at = Some(now);
                Ok(())
            }
            _ => err!(McjsError::JobNotRunning),
        }
    }

    /// Assigned/Running → Recovering, or Failed once the restart budget is
    /// spent. Only the job's own errors use the budget: a provider's failure
    /// (`FailureCause::is_infrastructure`) queues it again whatever the
    /// budget says, since the provider pays for it with its stake and the
    /// job did nothing wrong. A yield after a checkpoint attested on this
    /// assignment is queued again without using the budget (one without
    /// counts as an error). A fatal error fails the job when a second
    /// provider's node reports one too (`Job::fatal_claim`); the first
    /// counts as an error, so that no provider ends a job on its word alone
    /// and a job that is fatal everywhere still ends within its budget.
    pub fn fail(&mut self, cause: FailureCause, now: i64) -> Result<()> {
        match self.state {
            JobState::Assigned { .. } | JobState::Running { .. } => {
                // A yield is free only after progress on this assignment:
                // a job that yields without checkpointing would otherwise
                // hold nodes forever at no cost to its restart budget.
                let progressed = self
                    .last_checkpoint
                    .is_some_and(|c| c.generation == self.generation);
                let fatal = cause == FailureCause::JobFatal;
                let confirmed_fatal = fatal
                    && self
                        .fatal_claim
                        .is_some_and(|first| Some(first) != self.provider);
                if fatal && !confirmed_fatal {
                    self.fatal_claim = self.provider;
                }
                self.leave_node()?;
                self.last_failure = Some(cause);
                let out_of_restarts = self.restarts_used >= self.terms.restart_budget;
                match cause {
                    _ if cause.is_infrastructure() => {
                        self.state = JobState::Recovering { since: now };
                    }
                    FailureCause::JobYielded if progressed => {
                        self.state = JobState::Recovering { since: now };
                    }
                    _ if confirmed_fatal => {
                        self.state = JobState::Failed { at: now };
                        self.finished_at = Some(now);
                    }
                    _ if out_of_restarts => {
                        self.state = JobState::Failed { at: now };
                        self.finished_at = Some(now);
                    }
                    _ => {
                        self.restarts_used += 1;
                        self.state = JobState::Recovering { since: now };
                    }
                }
                Ok(())
            }
            _ => err!(McjsError::InvalidJobState),
        }
    }

    /// Whether a report of `cause` slashes the provider: a provider's
    /// failure does, except at the job's cap, where the run is over and
    /// nothing more was owed (a node that stops attesting then is not late).
    pub fn report_slashes(&self, cause: FailureCause) -> bool {
        cause.is_infrastructure() && !self.at_cap()
    }

    /// What a failure report does to the job: at its cap it ends Expired
    /// (its run is over, whatever stopped it, and nobody's fault);
    /// otherwise [`Job::fail`].
    pub fn on_report(&mut self, cause: FailureCause, now: i64) -> Result<()> {
        if !self.at_cap() {
            return self.fail(cause, now);
        }
        match self.state {
            JobState::Assigned { .. } | JobState::Running { .. } => {
                self.leave_node()?;
                self.state = JobState::Expired { at: now };
                self.finished_at = Some(now);
                Ok(())
            }
            _ => err!(McjsError::InvalidJobState),
        }
    }

    /// An interval was proven wrong: the job resumes from `from`, the
    /// checkpoint before it (none: from the start). On a node it is taken
    /// off (Recovering, without using the restart budget); queued or paused
    /// it only moves its restore point back.
    pub fn roll_back(&mut self, from: Option<CheckpointRecord>, now: i64) -> Result<()> {
        if self.state.is_on_node() {
            self.leave_node()?;
            self.state = JobState::Recovering { since: now };
        }
        self.last_checkpoint = from;
        self.prev_checkpoint = None;
        self.restore_floor = from;
        // An output attested after the interval proven wrong is not the
        // job's: it is made again from the restore point.
        self.output_hash = None;
        // `from` was attested long ago: no interval is open to a draw until
        // the next attestation.
        self.last_attest_slot = crate::state::NO_OPEN_INTERVAL;
        Ok(())
    }

    /// A check confirmed the assignment of `generation` up to `verified_to`
    /// (its Segment's latest confirmed end). While the job's latest
    /// interval is that assignment's, a lie found in it later goes back no
    /// further than there, so the floor moves up to it. A confirmation of a
    /// segment already proven wrong moves nothing.
    pub fn confirmed(
        &mut self,
        generation: u32,
        verified_to: Option<CheckpointRecord>,
        disproven: bool,
    ) {
        let latest_is_its = self
            .last_checkpoint
            .is_some_and(|last| last.generation == generation);
        if latest_is_its && !disproven && verified_to.is_some() {
            self.restore_floor = verified_to;
        }
    }

    /// Assigned/Running → Paused; not once the output is attested.
    pub fn pause(&mut self, reason: PauseReason, now: i64) -> Result<()> {
        require!(!self.output_attested(), McjsError::JobFinishing);
        match self.state {
            JobState::Assigned { .. } | JobState::Running { .. } => {
                self.leave_node()?;
                self.state = JobState::Paused { since: now, reason };
                Ok(())
            }
            _ => err!(McjsError::JobNotRunning),
        }
    }

    /// Paused → Recovering, when the bond covers at least one interval.
    pub fn resume(&mut self, now: i64) -> Result<()> {
        match self.state {
            JobState::Paused { .. } => {
                require!(
                    self.bond >= minimum_bond(&self.requirements, &self.terms)?,
                    McjsError::BondTooSmall
                );
                self.state = JobState::Recovering { since: now };
                Ok(())
            }
            _ => err!(McjsError::JobNotPaused),
        }
    }

    /// Pending/Recovering/Paused → Cancelled.
    pub fn cancel(&mut self, now: i64) -> Result<()> {
        match self.state {
            JobState::Pending { .. } | JobState::Recovering { .. } | JobState::Paused { .. } => {
                self.state = JobState::Cancelled { at: now };
                self.finished_at = Some(now);
                Ok(())
            }
            _ => err!(McjsError::InvalidJobState),
        }
    }

    /// Pending/Recovering past the deadline, or at its cap (it can never
    /// be assigned again) → Expired.
    pub fn expire(&mut self, now: i64) -> Result<()> {
        match self.state {
            JobState::Pending { .. } | JobState::Recovering { .. } => {
                let past_deadline = self.terms.deadline.is_some_and(|d| now > d);
                require!(past_deadline || self.at_cap(), McjsError::DeadlineNotPassed);
                self.state = JobState::Expired { at: now };
                self.finished_at = Some(now);
                Ok(())
            }
            _ => err!(McjsError::JobNotQueued),
        }
    }

    /// When the job last showed progress: used for the anyone-may-report
    /// rule. A resolved check counts: a job that waited on one (a finished
    /// job cannot complete while a check is open) gets a full window after.
    /// An assigned job is staging its inputs: its clock starts
    /// [`STAGING_GRACE_SECS`] after its assignment.
    pub fn last_progress(&self) -> Option<i64> {
        match self.state {
            JobState::Assigned { since } => Some(
                since
                    .saturating_add(STAGING_GRACE_SECS)
                    .max(self.checks_settled_at),
            ),
            JobState::Running { .. } => Some(self.progress_mark.max(self.checks_settled_at)),
            _ => None,
        }
    }

    /// What the insurance pool may still pay this job's owner: only a job
    /// that ended unfinished (failed, cancelled or expired) after its last
    /// failure was a provider's, and never more than the owner paid.
    pub fn compensable(&self) -> u64 {
        let failed_by_provider = matches!(
            self.state,
            JobState::Failed { .. } | JobState::Cancelled { .. } | JobState::Expired { .. }
        ) && self.last_failure.is_some_and(|c| c.is_infrastructure());
        if failed_by_provider {
            // Held pay is still the providers' or, proven wrong, refunded:
            // never compensable.
            self.paid
                .saturating_sub(self.held)
                .saturating_sub(self.compensated)
        } else {
            0
        }
    }

    pub fn invariant(&self) -> Result<()> {
        require!(self.accrued <= self.bond, McjsError::InvalidJobState);
        require!(
            self.held <= self.paid && self.compensated <= self.paid.saturating_sub(self.held),
            McjsError::InvalidJobState
        );
        require!(
            self.state.is_on_node() == (self.node.is_some() && self.provider.is_some()),
            McjsError::InvalidJobState
        );
        require!(
            self.state.is_on_node() || self.accrued == 0,
            McjsError::InvalidJobState
        );
        require!(
            self.verification_ppm <= crate::state::PPM,
            McjsError::InvalidSampleRate
        );
        require!(
            self.restarts_used <= self.terms.restart_budget,
            McjsError::InvalidJobState
        );
        Ok(())
    }
}
