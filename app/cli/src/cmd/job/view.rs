//! How a job reads to people and to scripts: one job, a list of jobs, and
//! the outcome of an owner's command.

use std::fmt;

use mcjs::state::{Job, JobState, PauseReason};
use mcjs_client::Pubkey;
use serde::Serialize;

use crate::chain::usdc;

/// A job as people and scripts read it.
#[derive(Serialize)]
pub struct JobView {
    pub job: String,
    pub job_id: u64,
    pub owner: String,
    pub state: &'static str,
    pub state_since: i64,
    /// How long ago (chain time) the job entered its state.
    pub state_age_secs: i64,
    /// Completed, failed, cancelled or expired.
    pub finished: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pause_reason: Option<&'static str>,
    pub spec_hash: String,
    pub node: Option<String>,
    pub provider: Option<String>,
    pub generation: u32,
    pub bond: String,
    pub paid: String,
    pub accrued: String,
    pub bond_used_percent: f64,
    /// A finished job's bond still in its vault: its refund account could
    /// not take it (closed); `mcjs job close` pays it to the owner.
    pub refund_waiting: bool,
    pub rate_per_hour: String,
    pub checkpoints: u32,
    pub last_checkpoint: Option<CheckpointView>,
    pub checkpoint_chain: String,
    pub billed_secs: u64,
    pub max_duration_secs: u32,
    /// Billed its whole maximum duration: no more of its work is paid, so
    /// its node stops it (its last attested checkpoint is its partial output).
    pub at_cap: bool,
    pub checkpoint_interval_secs: u32,
    pub deadline: Option<i64>,
    pub secs_to_deadline: Option<i64>,
    pub restarts_used: u8,
    pub restart_budget: u8,
    /// The provider whose node last said the job cannot succeed anywhere
    /// (`JobFatal`, e.g. exit 2): the job fails if another provider's node
    /// says it too, before the job attests more progress.
    pub fatal_claim: Option<String>,
    pub output_hash: Option<String>,
    /// A verified job's node attested its output: the job completes once
    /// the draw has had its time and any check of the output is done.
    pub output_attested: bool,
    pub submitted_at: i64,
}

#[derive(Serialize)]
pub struct CheckpointView {
    pub epoch: u32,
    pub step: u64,
    pub hash: String,
    pub generation: u32,
    pub time: i64,
}

fn state_since(state: &JobState) -> i64 {
    match *state {
        JobState::Pending { since }
        | JobState::Assigned { since }
        | JobState::Running { since }
        | JobState::Paused { since, .. }
        | JobState::Recovering { since } => since,
        JobState::Completed { at }
        | JobState::Failed { at }
        | JobState::Cancelled { at }
        | JobState::Expired { at } => at,
    }
}

impl JobView {
    pub fn new(key: Pubkey, job: &Job, now: i64) -> Self {
        let total = job.bond + job.paid;
        let used = job.paid + job.accrued;
        Self {
            job: key.to_string(),
            job_id: job.job_id,
            owner: job.owner.to_string(),
            state: job.state.name(),
            state_since: state_since(&job.state),
            state_age_secs: now.saturating_sub(state_since(&job.state)),
            finished: job.state.is_terminal(),
            pause_reason: match job.state {
                JobState::Paused {
                    reason: PauseReason::Owner,
                    ..
                } => Some("owner"),
                JobState::Paused {
                    reason: PauseReason::InsufficientBond,
                    ..
                } => Some("bond exhausted"),
                _ => None,
            },
            spec_hash: hex::encode(job.spec_hash),
            node: job.node.map(|k| k.to_string()),
            provider: job.provider.map(|k| k.to_string()),
            generation: job.generation,
            bond: usdc(job.bond),
            paid: usdc(job.paid),
            accrued: usdc(job.accrued),
            refund_waiting: job.state.is_terminal() && job.bond > 0,
            bond_used_percent: if total == 0 {
                0.0
            } else {
                (used as f64 * 1000.0 / total as f64).round() / 10.0
            },
            rate_per_hour: usdc(job.rate_per_hour),
            checkpoints: job.checkpoint_count,
            last_checkpoint: job.last_checkpoint.map(|c| CheckpointView {
                epoch: c.epoch,
                step: c.step,
                hash: hex::encode(c.hash),
                generation: c.generation,
                time: c.time,
            }),
            checkpoint_chain: hex::encode(job.checkpoint_chain),
            billed_secs: job.billed_secs,
            max_duration_secs: job.terms.max_duration_secs,
            at_cap: job.at_cap(),
            checkpoint_interval_secs: job.terms.checkpoint_interval_secs,
            deadline: job.terms.deadline,
            secs_to_deadline: job.terms.deadline.map(|d| d - now),
            restarts_used: job.restarts_used,
            restart_budget: job.terms.restart_budget,
            fatal_claim: job
                .fatal_claim
                .filter(|_| !job.state.is_terminal())
                .map(|k| k.to_string()),
            output_hash: job.output_hash.map(hex::encode),
            output_attested: job.output_attested(),
            submitted_at: job.submitted_at,
        }
    }

    pub(super) fn progress_line(&self) -> String {
        let checkpoint = self
            .last_checkpoint
            .as_ref()
            .map_or("no checkpoint yet".to_string(), |c| {
                format!("epoch {} step {}", c.epoch, c.step)
            });
        let deadline = self
            .secs_to_deadline
            .map_or("no deadline".to_string(), |s| {
                format!("{} to deadline", human_secs(s))
            });
        if self.finished {
            // The bond has gone back (or waits for `mcjs job close`): what
            // is left of it says nothing of what the run used.
            let rest = if self.refund_waiting {
                format!("{} USDC of the bond waits for mcjs job close", self.bond)
            } else {
                "the rest of the bond refunded".to_string()
            };
            return format!("{checkpoint} | {} USDC paid, {rest}", self.paid);
        }
        format!(
            "{checkpoint} | {deadline} | bond used {}% ({} paid, {} accrued of {})",
            self.bond_used_percent, self.paid, self.accrued, self.bond
        )
    }
}

pub(super) fn human_secs(secs: i64) -> String {
    if secs < 0 {
        return format!("{} past", human_secs(-secs));
    }
    let (d, h, m, s) = (secs / 86_400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    if d > 0 {
        format!("{d}d{h:02}h")
    } else if h > 0 {
        format!("{h}h{m:02}m")
    } else {
        format!("{m}m{s:02}s")
    }
}

impl fmt::Display for JobView {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "job {} (id {}, owner {})",
            self.job, self.job_id, self.owner
        )?;
        write!(
            f,
            "  state        {} for {} (since unix time {})",
            self.state,
            human_secs(self.state_age_secs),
            self.state_since
        )?;
        if let Some(reason) = self.pause_reason {
            write!(f, " ({reason})")?;
        }
        writeln!(f)?;
        writeln!(f, "  spec         {}", self.spec_hash)?;
        if let (Some(node), Some(provider)) = (&self.node, &self.provider) {
            writeln!(
                f,
                "  node         {node} (provider {provider}) at {} USDC/hour",
                self.rate_per_hour
            )?;
        }
        writeln!(f, "  generation   {}", self.generation)?;
        if self.finished && !self.refund_waiting {
            writeln!(
                f,
                "  bond         {} USDC paid, the rest refunded",
                self.paid
            )?;
        } else {
            writeln!(
                f,
                "  bond         {} USDC held, {} paid, {} accrued ({}% used)",
                self.bond, self.paid, self.accrued, self.bond_used_percent
            )?;
        }
        if self.refund_waiting {
            writeln!(
                f,
                "  refund       {} USDC waits in the job's vault (its refund account could not take it): `mcjs job close {}` pays it to your wallet",
                self.bond, self.job
            )?;
        }
        match &self.last_checkpoint {
            Some(c) => writeln!(
                f,
                "  checkpoints  {}, last epoch {} step {} (generation {}) hash {}",
                self.checkpoints, c.epoch, c.step, c.generation, c.hash
            )?,
            None => writeln!(f, "  checkpoints  none")?,
        }
        writeln!(f, "  chain        {}", self.checkpoint_chain)?;
        writeln!(
            f,
            "  billed       {} s of at most {} s (checkpoint every {} s)",
            self.billed_secs, self.max_duration_secs, self.checkpoint_interval_secs
        )?;
        if self.at_cap {
            writeln!(
                f,
                "  cap          reached: no more of its work is paid, so it is stopped; its last attested checkpoint is its partial output (`mcjs job output {} --partial`)",
                self.job
            )?;
        }
        match self.secs_to_deadline {
            Some(s) => writeln!(
                f,
                "  deadline     {} ({})",
                self.deadline.unwrap_or_default(),
                human_secs(s)
            )?,
            None => writeln!(f, "  deadline     none")?,
        }
        write!(
            f,
            "  restarts     {} of {}",
            self.restarts_used, self.restart_budget
        )?;
        if let Some(provider) = &self.fatal_claim {
            write!(
                f,
                "\n  fatal?       provider {provider}'s node said the job cannot succeed anywhere (exit 2, or a spec it cannot run); it runs again elsewhere, and fails if another provider's node says so too before it makes progress"
            )?;
        }
        if let Some(out) = &self.output_hash {
            write!(f, "\n  output       {out}")?;
            if self.output_attested {
                write!(
                    f,
                    " (attested: the job completes once the draw has had its time and any check of the output is done)"
                )?;
            }
        }
        Ok(())
    }
}

#[derive(Serialize)]
pub(super) struct JobList {
    pub(super) jobs: Vec<JobView>,
}

impl fmt::Display for JobList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.jobs.is_empty() {
            return write!(f, "no jobs");
        }
        writeln!(
            f,
            "{:<44}  {:>6}  {:<10}  {:>12}  {:>11}  checkpoint",
            "job", "id", "state", "bond USDC", "checkpoints"
        )?;
        for (i, j) in self.jobs.iter().enumerate() {
            let last = j.last_checkpoint.as_ref().map_or("-".to_string(), |c| {
                format!("epoch {} step {}", c.epoch, c.step)
            });
            write!(
                f,
                "{:<44}  {:>6}  {:<10}  {:>12}  {:>11}  {last}",
                j.job, j.job_id, j.state, j.bond, j.checkpoints
            )?;
            if i + 1 < self.jobs.len() {
                writeln!(f)?;
            }
        }
        Ok(())
    }
}

#[derive(Serialize)]
pub(super) struct Done {
    pub(super) action: &'static str,
    pub(super) signature: String,
    pub(super) job: Option<JobView>,
}

impl fmt::Display for Done {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{} (transaction {})", self.action, self.signature)?;
        match &self.job {
            Some(job) => write!(f, "{job}"),
            None => write!(f, "the job account is closed"),
        }
    }
}
