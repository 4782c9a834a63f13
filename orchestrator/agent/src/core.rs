//! The agent's decisions, as a pure function of what it is told.
//!
//! Inputs: the chain's view of the jobs assigned to this node (a full
//! snapshot each time), what the local work reports ([`Event`]), and `now`.
//! Output: [`Action`]s for the shell to carry out. No I/O, no clock: the
//! tests drive it with a fake one.

use mcjs_client::Pubkey;
use mcjs_hal::probe::ups::PowerState;
use mcjs_protocol::{JobPhase, JobReport, StopReason, StopReport};
use mcjs_runtime::checkpoint::Sha256Digest;
use mcjs_runtime::deadline::{CheckpointDeadline, DeadlineStatus, checkpoint_status};
use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, SystemTime};

mod messages;
mod power;
pub use messages::*;
pub use power::{POWER_SIGNAL_FLOOR, POWER_STOP_WAIT, PowerStop};

/// The first retry of a chain transaction that failed for a transient reason;
/// doubled on every further failure up to [`MAX_RETRY`].
pub const FIRST_RETRY: Duration = Duration::from_millis(500);
pub const MAX_RETRY: Duration = Duration::from_secs(10);

/// The next look for checkpoints after one failed (the store refusing an
/// upload, say: the checkpoint stays on the node and is uploaded again);
/// doubled on every further failure up to [`MAX_COLLECT_RETRY`], and back
/// to every tick once a look succeeds.
pub const FIRST_COLLECT_RETRY: Duration = Duration::from_secs(1);
pub const MAX_COLLECT_RETRY: Duration = Duration::from_secs(60);

/// Where one of this node's jobs is, as the agent runs it (its heartbeat
/// reports it as a `mcjs_protocol::JobPhase`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "phase", rename_all = "snake_case")]
pub enum RunPhase {
    /// Launch requested: staging, restoring, starting the container.
    Launching,
    /// Container running.
    Running {
        container: String,
    },
    /// Exited 0; output being collected and the job completed on chain.
    Completing {
        container: String,
        output: Option<Sha256Digest>,
    },
    /// Completed on chain.
    Done,
    /// Exited otherwise (or never ran); reported, waiting for the chain to
    /// move the job on.
    Exited {
        exit: Exit,
        container: Option<String>,
    },
    DataRejected {
        reason: String,
    },
    /// The chain moved the job on: container stopped, nothing more is sent.
    Fenced,
}

impl RunPhase {
    fn container(&self) -> Option<&str> {
        match self {
            RunPhase::Running { container, .. } | RunPhase::Completing { container, .. } => {
                Some(container)
            }
            RunPhase::Exited { container, .. } => container.as_deref(),
            _ => None,
        }
    }

    pub fn wire(&self) -> JobPhase {
        match self {
            RunPhase::Launching => JobPhase::Staging,
            RunPhase::Running { .. } => JobPhase::Running,
            RunPhase::Completing { .. } | RunPhase::Done => JobPhase::Completing,
            RunPhase::Exited { .. } => JobPhase::Exited,
            RunPhase::DataRejected { .. } => JobPhase::DataRejected,
            RunPhase::Fenced => JobPhase::Fenced,
        }
    }
}

/// One assignment (job, generation) the agent works on.
#[derive(Debug, Clone, PartialEq)]
pub struct Assignment {
    pub job: Pubkey,
    pub generation: u32,
    pub phase: RunPhase,
    /// `start_job` confirmed (or the chain already says Running).
    pub started: bool,
    /// Checkpoint enforcement; the interval is the job's, capped by the agent's.
    pub policy: CheckpointDeadline,
    /// Never signalled to checkpoint ([`ChainJob::verified`]).
    pub fixed_steps: bool,
    /// What an attestation lets go of, as the chain last said.
    pub keep: Keep,
    /// The last stored checkpoint, or when the container started.
    pub last_checkpoint_at: Option<SystemTime>,
    pub last_signal_at: Option<SystemTime>,
    /// The newest checkpoint attested by this agent (epoch, step).
    pub last_attested: Option<(u32, u64)>,
    /// The chain's newest checkpoint of this assignment, to skip what it
    /// has ([`ChainJob::chain_last`]).
    pub chain_last: Option<(u32, u64)>,
    /// Transactions waiting their turn: one is in flight at a time, in order.
    pub queue: VecDeque<Tx>,
    pub in_flight: Option<Tx>,
    pub retry_at: Option<SystemTime>,
    pub retry_delay: Duration,
    pub collecting: bool,
    /// After a failed look for checkpoints, none before this.
    pub collect_after: Option<SystemTime>,
    pub collect_delay: Duration,
    pub overdue_flagged: bool,
    pub exit: Option<Exit>,
    /// The node's battery is low: the job stops once a checkpoint taken
    /// after the warning is attested.
    pub power_stop: Option<PowerStop>,
}

impl Assignment {
    /// The chain says the job has been billed its whole maximum duration:
    /// its container is removed and the stop reported as `cap_reached`
    /// (the program ends a job at its cap `Expired`, nobody slashed); what
    /// it has not attested is not attested now (it would be refused).
    /// Nothing changes for a job already completing or stopped.
    fn stop_at_cap(&mut self, job: Pubkey, actions: &mut Vec<Action>) {
        let container = match &self.phase {
            RunPhase::Running { container } => Some(container.clone()),
            RunPhase::Launching => None,
            _ => return,
        };
        tracing::info!(%job, generation = self.generation, "the job has been billed its whole maximum duration: stopping it at its cap");
        let exit = Exit {
            stop: StopReason::CapReached,
            last_logs: vec![
                "the job reached its maximum duration (its cap): stopped; its last attested \
                 checkpoint is its partial output"
                    .to_string(),
            ],
        };
        self.exit = Some(exit.clone());
        self.phase = RunPhase::Exited {
            exit,
            container: container.clone(),
        };
        self.queue.retain(|t| !matches!(t, Tx::Attest { .. }));
        if let Some(container) = container {
            actions.push(Action::Remove {
                job,
                generation: self.generation,
                container,
            });
        }
    }

    fn new(job: &ChainJob, policy: CheckpointDeadline, phase: RunPhase) -> Self {
        Self {
            job: job.key,
            generation: job.generation,
            phase,
            started: job.state == ChainState::Running,
            policy,
            fixed_steps: job.verified,
            keep: job.keep,
            last_checkpoint_at: None,
            last_signal_at: None,
            last_attested: None,
            chain_last: job.chain_last(),
            queue: VecDeque::new(),
            in_flight: None,
            retry_at: None,
            retry_delay: FIRST_RETRY,
            collecting: false,
            collect_after: None,
            collect_delay: FIRST_COLLECT_RETRY,
            overdue_flagged: false,
            exit: None,
            power_stop: None,
        }
    }

    /// Whether the deadline is being watched: the container runs and has not exited.
    pub fn deadline(&self, now: SystemTime) -> Option<DeadlineStatus> {
        match (&self.phase, self.last_checkpoint_at) {
            (RunPhase::Running { .. }, Some(last)) => {
                Some(checkpoint_status(last, self.policy, now))
            }
            _ => None,
        }
    }

    pub fn report(&self) -> JobReport {
        JobReport {
            job: self.job.to_string(),
            generation: self.generation,
            phase: self.phase.wire(),
            last_checkpoint: self.last_attested,
            checkpoint_overdue: self.overdue_flagged,
            exit: self.exit.as_ref().map(|e| StopReport {
                stop: e.stop,
                last_logs: e.last_logs.clone(),
            }),
        }
    }
}

/// The agent's knobs that shape its decisions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CorePolicy {
    /// Checkpoints are enforced at least this often, whatever the job asks.
    pub max_checkpoint_interval: Option<Duration>,
}

/// Every assignment the agent knows about, keyed by job.
#[derive(Debug, Clone)]
pub struct Core {
    pub policy: CorePolicy,
    pub jobs: BTreeMap<Pubkey, Assignment>,
    /// Containers found at start, waiting for the first chain snapshot.
    found: Vec<FoundContainer>,
    /// What the node's UPS last said (`Unknown`: no UPS, or unread).
    pub power: PowerState,
    /// When every running job was last told to checkpoint for a loss of
    /// mains power ([`POWER_SIGNAL_FLOOR`]).
    power_signalled_at: Option<SystemTime>,
}

/// The interval a job's container is told to checkpoint at, paid run or
/// check alike: the job's own, capped by the node's `cap`, at least a second.
pub fn checkpoint_interval(job: Duration, cap: Option<Duration>) -> Duration {
    job.min(cap.unwrap_or(Duration::MAX))
        .max(Duration::from_secs(1))
}

impl Core {
    pub fn new(policy: CorePolicy) -> Self {
        Self {
            policy,
            jobs: BTreeMap::new(),
            found: Vec::new(),
            power: PowerState::Unknown,
            power_signalled_at: None,
        }
    }

    /// Containers left by an earlier run of the agent; decided on at the next
    /// chain snapshot (adopted, or removed).
    pub fn found_containers(&mut self, found: Vec<FoundContainer>) {
        self.found = found;
    }

    fn checkpoint_policy(&self, job: &ChainJob) -> CheckpointDeadline {
        CheckpointDeadline::with_default_grace(self.effective_interval(job))
    }

    /// The interval the container is told to checkpoint at
    /// ([`checkpoint_interval`] under this node's cap).
    pub fn effective_interval(&self, job: &ChainJob) -> Duration {
        checkpoint_interval(job.checkpoint_interval, self.policy.max_checkpoint_interval)
    }

    /// Reconciles with a fresh chain snapshot of the jobs on this node.
    pub fn on_chain(&mut self, snapshot: &[ChainJob], now: SystemTime) -> Vec<Action> {
        let mut actions = Vec::new();
        // Fencing first: anything not on this node at this generation stops now.
        let keys: Vec<Pubkey> = self.jobs.keys().copied().collect();
        for key in keys {
            let current = snapshot.iter().find(|j| j.key == key);
            let a = self.jobs.get_mut(&key).expect("key from the map");
            let same_generation = current.is_some_and(|j| j.generation == a.generation);
            if same_generation {
                continue;
            }
            match &a.phase {
                RunPhase::Fenced | RunPhase::Done => {}
                RunPhase::DataRejected { .. }
                | RunPhase::Exited {
                    container: None, ..
                } => {}
                _ => {
                    tracing::warn!(job = %key, generation = a.generation, "the chain moved the job on: fencing it")
                }
            }
            if let Some(container) = a.phase.container() {
                actions.push(Action::Stop {
                    job: key,
                    generation: a.generation,
                    container: container.to_string(),
                });
            }
            a.queue.clear();
            // A job on another generation of this node starts afresh below.
            self.jobs.remove(&key);
        }
        let found = std::mem::take(&mut self.found);
        for job in snapshot {
            let policy = self.checkpoint_policy(job);
            if let Some(a) = self.jobs.get_mut(&job.key) {
                a.chain_last = job.chain_last();
                a.keep = job.keep;
                // A start whose confirmation was lost: the chain says it happened.
                if job.state == ChainState::Running && !a.started {
                    a.started = true;
                    if a.in_flight == Some(Tx::Start) {
                        a.in_flight = None;
                    }
                    a.queue.retain(|t| *t != Tx::Start);
                }
                if job.at_cap {
                    a.stop_at_cap(job.key, &mut actions);
                }
                continue;
            }
            let adopted = found
                .iter()
                .find(|c| c.job == job.key && c.generation == job.generation);
            let mut a = Assignment::new(job, policy, RunPhase::Launching);
            match adopted {
                Some(c) => {
                    tracing::info!(job = %job.key, generation = job.generation, container = %c.id, "adopting the running container");
                    a.phase = RunPhase::Running {
                        container: c.id.clone(),
                    };
                    a.last_checkpoint_at = Some(now);
                    if job.state == ChainState::Assigned {
                        a.queue.push_back(Tx::Start);
                    }
                }
                // Nothing more of a job at its cap would be paid: it is
                // not launched again (the agent restarted after the cap).
                None if job.at_cap => {}
                None => actions.push(Action::Launch {
                    job: job.key,
                    generation: job.generation,
                    restore: job.last_checkpoint,
                }),
            }
            if job.at_cap {
                a.stop_at_cap(job.key, &mut actions);
            }
            self.jobs.insert(job.key, a);
        }
        for c in found {
            let kept = self.jobs.get(&c.job).is_some_and(|a| {
                a.generation == c.generation && a.phase.container() == Some(&c.id)
            });
            if !kept {
                let current = self
                    .jobs
                    .get(&c.job)
                    .is_some_and(|a| a.generation == c.generation);
                actions.push(Action::RemoveStray {
                    container: c.id,
                    run: (!current).then_some((c.job, c.generation)),
                });
            }
        }
        actions.extend(self.on_tick(now));
        actions
    }

    /// Something the shell did finished.
    pub fn on_event(
        &mut self,
        job: Pubkey,
        generation: u32,
        event: Event,
        now: SystemTime,
    ) -> Vec<Action> {
        let mut actions = Vec::new();
        let Some(a) = self
            .jobs
            .get_mut(&job)
            .filter(|a| a.generation == generation)
        else {
            // A fenced generation: its results are dropped, its container stopped.
            if let Event::Launched { container } = event {
                actions.push(Action::Stop {
                    job,
                    generation,
                    container,
                });
            }
            return actions;
        };
        match event {
            // Stopped while it launched (at its cap): removed at once.
            Event::Launched { container } if matches!(a.phase, RunPhase::Exited { .. }) => {
                actions.push(Action::Remove {
                    job,
                    generation,
                    container,
                });
            }
            Event::Launched { container } => {
                a.phase = RunPhase::Running { container };
                a.last_checkpoint_at = Some(now);
                if !a.started {
                    a.queue.push_front(Tx::Start);
                }
            }
            Event::DataRejected { reason } => {
                a.exit = Some(Exit {
                    stop: StopReason::InputRejected,
                    last_logs: vec![reason.clone()],
                });
                a.phase = RunPhase::DataRejected { reason };
            }
            Event::LaunchFailed { stop, reason } => {
                tracing::warn!(%job, generation, stop = %stop.label(), fault = ?stop.fault(), %reason, "the job did not start");
                let exit = Exit {
                    stop,
                    last_logs: vec![reason],
                };
                a.exit = Some(exit.clone());
                a.phase = RunPhase::Exited {
                    exit,
                    container: None,
                };
            }
            Event::CheckpointsCollected { stored } => {
                a.collecting = false;
                a.collect_after = None;
                a.collect_delay = FIRST_COLLECT_RETRY;
                if !stored.is_empty() {
                    a.last_checkpoint_at = Some(now);
                    a.overdue_flagged = false;
                }
                if let (Some(stop), Some(newest)) = (
                    a.power_stop.as_mut(),
                    stored.iter().map(|c| (c.epoch, c.step)).max(),
                ) {
                    stop.checkpoint = stop.checkpoint.max(Some(newest));
                }
                for c in stored {
                    a.queue.push_back(Tx::Attest {
                        epoch: c.epoch,
                        step: c.step,
                        hash: c.hash,
                    });
                }
            }
            Event::CollectFailed { reason } => {
                a.collecting = false;
                let retry_in = a.collect_delay;
                a.collect_after = Some(now + retry_in);
                a.collect_delay = (retry_in * 2).min(MAX_COLLECT_RETRY);
                tracing::warn!(%job, generation, %reason, ?retry_in, "cannot collect the job's checkpoints; the job runs on and they are collected again");
            }
            Event::JobFault { reason } => {
                a.collecting = false;
                if let RunPhase::Running { container } | RunPhase::Completing { container, .. } =
                    &a.phase
                {
                    let container = container.clone();
                    tracing::warn!(%job, generation, %reason, "stopping the job: its own fault");
                    let exit = Exit {
                        stop: StopReason::ContractBroken,
                        last_logs: vec![reason],
                    };
                    a.exit = Some(exit.clone());
                    a.phase = RunPhase::Exited {
                        exit,
                        container: Some(container.clone()),
                    };
                    actions.push(Action::Remove {
                        job,
                        generation,
                        container,
                    });
                }
            }
            Event::SignalSent => {}
            Event::Exited(seen) => {
                let container = a.phase.container().map(str::to_string);
                let stop = seen.stop_reason();
                match (&a.phase, stop.fault()) {
                    // No one's fault: the job finished; its output decides.
                    (RunPhase::Running { container }, None) => {
                        a.phase = RunPhase::Completing {
                            container: container.clone(),
                            output: None,
                        };
                        actions.push(Action::CollectOutput { job, generation });
                    }
                    (RunPhase::Running { .. }, Some(fault)) => {
                        tracing::info!(%job, generation, stop = %stop.label(), ?fault, "the job stopped");
                        let exit = Exit {
                            stop,
                            last_logs: seen.last_logs,
                        };
                        a.exit = Some(exit.clone());
                        a.phase = RunPhase::Exited {
                            exit,
                            container: container.clone(),
                        };
                        if let Some(container) = container {
                            actions.push(Action::Remove {
                                job,
                                generation,
                                container,
                            });
                        }
                    }
                    _ => {}
                }
            }
            Event::OutputStored { hash } => {
                if let RunPhase::Completing { output, .. } = &mut a.phase {
                    *output = Some(hash);
                    a.queue.push_back(Tx::Complete { output_hash: hash });
                }
            }
            Event::OutputMissing { reason } => {
                let exit = Exit {
                    stop: StopReason::OutputMissing,
                    last_logs: vec![reason],
                };
                a.exit = Some(exit.clone());
                let container = a.phase.container().map(str::to_string);
                a.phase = RunPhase::Exited {
                    exit,
                    container: container.clone(),
                };
                if let Some(container) = container {
                    actions.push(Action::Remove {
                        job,
                        generation,
                        container,
                    });
                }
            }
            Event::TxConfirmed(tx) => {
                if a.in_flight.as_ref() == Some(&tx) {
                    a.in_flight = None;
                }
                a.retry_delay = FIRST_RETRY;
                a.retry_at = None;
                match tx {
                    Tx::Start => a.started = true,
                    Tx::Attest { epoch, step, .. } => {
                        a.last_attested = Some((epoch, step));
                        a.chain_last = a.chain_last.max(Some((epoch, step)));
                        // Only an attested checkpoint supersedes older ones.
                        if let Some(below) = a.keep.prune_below(step) {
                            actions.push(Action::Prune {
                                job,
                                generation,
                                below,
                                floor: a.keep.floor(),
                            });
                        }
                        if a.power_stop
                            .is_some_and(|p| p.checkpoint.is_some_and(|c| c <= (epoch, step)))
                        {
                            power::stop_for_power(
                                a,
                                "its checkpoint after the warning is attested",
                                &mut actions,
                            );
                        }
                    }
                    Tx::Complete { .. } => {
                        if let Some(container) = a.phase.container() {
                            actions.push(Action::Remove {
                                job,
                                generation,
                                container: container.to_string(),
                            });
                        }
                        a.phase = RunPhase::Done;
                    }
                }
            }
            Event::TxFailed { tx, failure } => {
                if a.in_flight.as_ref() == Some(&tx) {
                    a.in_flight = None;
                }
                if failure.worth_retrying() {
                    a.queue.push_front(tx);
                    a.retry_at = Some(now + a.retry_delay);
                    a.retry_delay = (a.retry_delay * 2).min(MAX_RETRY);
                } else {
                    tracing::warn!(%job, generation, ?tx, reason = %failure.message, "the chain refused the transaction; waiting for the chain to say what changed");
                }
            }
            Event::Removed => {
                if let RunPhase::Exited { container, .. } = &mut a.phase {
                    *container = None;
                }
            }
        }
        actions.extend(self.on_tick(now));
        actions
    }

    /// Time passed: checkpoint signals, collection, deadlines, the next transaction.
    pub fn on_tick(&mut self, now: SystemTime) -> Vec<Action> {
        let mut actions = Vec::new();
        for a in self.jobs.values_mut() {
            let (job, generation) = (a.job, a.generation);
            if a.power_stop.is_some_and(|p| {
                now.duration_since(p.asked_at).unwrap_or_default() >= POWER_STOP_WAIT
            }) {
                power::stop_for_power(a, "no checkpoint attested in time", &mut actions);
            }
            if let RunPhase::Running { container, .. } = &a.phase {
                if !a.collecting && a.collect_after.is_none_or(|t| now >= t) {
                    a.collecting = true;
                    actions.push(Action::Collect { job, generation });
                }
                let since_checkpoint = a
                    .last_checkpoint_at
                    .and_then(|t| now.duration_since(t).ok())
                    .unwrap_or_default();
                let since_signal = a.last_signal_at.and_then(|t| now.duration_since(t).ok());
                // Signal when due, and again each interval while none
                // arrives; a job whose spec fixes its steps is never told.
                if !a.fixed_steps
                    && since_checkpoint >= a.policy.interval
                    && since_signal.is_none_or(|s| s >= a.policy.interval)
                {
                    a.last_signal_at = Some(now);
                    actions.push(Action::SignalCheckpoint {
                        job,
                        generation,
                        container: container.clone(),
                    });
                }
                if let Some(DeadlineStatus::Overdue { late_by }) = a.deadline(now)
                    && !a.overdue_flagged
                {
                    a.overdue_flagged = true;
                    actions.push(Action::FlagOverdue {
                        job,
                        generation,
                        late_by,
                    });
                }
            }
            if a.in_flight.is_none() && a.retry_at.is_none_or(|t| now >= t) {
                a.retry_at = None;
                while let Some(tx) = a.queue.pop_front() {
                    let ready = match &tx {
                        // A container that died before its start was
                        // confirmed is never started on chain: nothing billed.
                        Tx::Start => {
                            if !matches!(
                                a.phase,
                                RunPhase::Running { .. } | RunPhase::Completing { .. }
                            ) {
                                continue;
                            }
                            true
                        }
                        // Attestations wait for the start; those the chain
                        // already has are dropped (a confirmation that was lost).
                        Tx::Attest { epoch, step, .. } => {
                            if a.chain_last.is_some_and(|last| last >= (*epoch, *step)) {
                                continue;
                            }
                            a.started
                        }
                        Tx::Complete { .. } => {
                            !a.queue.iter().any(|t| matches!(t, Tx::Attest { .. }))
                        }
                    };
                    if !ready {
                        a.queue.push_front(tx);
                        break;
                    }
                    a.in_flight = Some(tx.clone());
                    actions.push(Action::Send {
                        job,
                        generation,
                        tx,
                    });
                    break;
                }
            }
        }
        actions
    }

    /// What the heartbeat says about each job.
    pub fn reports(&self) -> Vec<JobReport> {
        self.jobs.values().map(Assignment::report).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One rule for the paid run and for a check's replay: the job's
    /// interval, capped by the node's, never under a second.
    #[test]
    fn the_checkpoint_interval_is_the_jobs_capped_by_the_node_and_at_least_a_second() {
        let s = Duration::from_secs;
        assert_eq!(checkpoint_interval(s(900), None), s(900));
        assert_eq!(checkpoint_interval(s(900), Some(s(60))), s(60));
        assert_eq!(checkpoint_interval(s(30), Some(s(60))), s(30));
        assert_eq!(checkpoint_interval(Duration::ZERO, None), s(1));
        assert_eq!(checkpoint_interval(s(30), Some(Duration::ZERO)), s(1));
    }
}
