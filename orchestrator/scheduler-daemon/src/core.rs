//! The decision core: observations in, actions out. No I/O, no clock.

use std::collections::HashSet;
use std::fmt;

use mcjs::state::{FailureCause, Job, JobState, Node};
use mcjs_client::Pubkey;
/// What kind of account a round could not use (a node or a job).
pub use mcjs_client::decode::AccountKind;
use mcjs_protocol::{ChainCause, JobPhase, StopReason};
use mcjs_scheduler::PlacementConfig;
use serde::Serialize;

use crate::liveness::Liveness;
use crate::standby::Standbys;

mod placement;
pub use placement::UNPROVEN_MODEL;
use placement::place;
pub(crate) use placement::{free_nodes, planned_alone};

/// When the daemon declares an assignment failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DetectorConfig {
    /// A node that has not sent a heartbeat for this long is lost.
    pub heartbeat_timeout_ms: i64,
    /// A node whose agent's heartbeat stream closed without a goodbye, and
    /// which has not been heard from since, is lost after this long (the
    /// window in which a reconnect cancels it).
    pub disconnect_grace_ms: i64,
    /// A node whose agent said goodbye (a restart on purpose) is judged
    /// lost by silence only after this long, instead of the heartbeat timeout.
    pub restart_grace_ms: i64,
    /// A running job that has not attested for this many percent of its
    /// checkpoint interval is overdue (the program lets anyone report it
    /// later, at `interval × liveness_factor`).
    pub overdue_percent: u32,
    /// An assigned job whose container has not started after this long
    /// (staging included) is reported.
    pub start_timeout_ms: i64,
    /// The brake on mass failure: a round in which at least
    /// `brake_min_nodes` of the nodes holding a job, and at least
    /// `brake_percent` of them, look dead by their heartbeats reports none
    /// of them lost (see [`Brake`]).
    pub brake_percent: u32,
    pub brake_min_nodes: usize,
    pub placement: PlacementConfig,
}

impl Default for DetectorConfig {
    fn default() -> Self {
        Self {
            heartbeat_timeout_ms: mcjs_protocol::DEFAULT_HEARTBEAT_TIMEOUT_MS as i64,
            disconnect_grace_ms: mcjs_protocol::DEFAULT_DISCONNECT_GRACE_MS as i64,
            restart_grace_ms: mcjs_protocol::DEFAULT_RESTART_GRACE_MS as i64,
            overdue_percent: 200,
            start_timeout_ms: 10 * 60 * 1_000,
            brake_percent: BRAKE_PERCENT,
            brake_min_nodes: BRAKE_MIN_NODES,
            placement: PlacementConfig::default(),
        }
    }
}

/// What the daemon sees: the chain's jobs and nodes, the agents' heartbeats.
pub struct Observation<'a> {
    pub now_ms: i64,
    pub jobs: &'a [(Pubkey, Job)],
    pub nodes: &'a [(Pubkey, Node)],
    pub liveness: &'a Liveness,
    /// Providers whose committed stake is below the program's minimum: the
    /// program refuses to assign their nodes anything, so placing a job
    /// there would hold it in the queue round after round.
    pub understaked: &'a HashSet<Pubkey>,
    /// Periods (start, end; ms) in which the detector could not read the
    /// chain (from the last round that read it to the next one that did), or
    /// the store did not answer (`crate::sight`); they may overlap. No
    /// job is judged late for time inside them: the outage may have kept its
    /// node from attesting or starting, and kept the detector from seeing
    /// that it did. Only the time of an outage is excused, so an endpoint
    /// that fails now and then does not keep a late job alive.
    pub outages: &'a [(i64, i64)],
    /// The Config's `require_proven_hardware`: a node whose profile no hardware challenge
    /// proved is of the lowest class (docs/hardware-challenge.md), placed only where a job
    /// names no GPU model and no memory floor.
    pub require_proven_hardware: bool,
    /// The jobs whose spec asks for a warm standby (`checkpoint.standby`),
    /// as far as the shell has read their specs.
    pub standby_wanted: &'a HashSet<Pubkey>,
    /// The last round's standbys: kept while they stay free and fit, and
    /// where a job that loses its node goes first.
    pub standbys: &'a Standbys,
}

/// The time between `from` and `to` (ms) that falls inside `outages`, each
/// instant counted once where outages overlap (the chain and the store down
/// at once).
pub fn excused_ms(outages: &[(i64, i64)], from: i64, to: i64) -> i64 {
    let mut clipped: Vec<(i64, i64)> = outages
        .iter()
        .map(|&(start, end)| (start.max(from), end.min(to)))
        .filter(|(start, end)| start < end)
        .collect();
    clipped.sort_unstable();
    let mut excused = 0i64;
    let mut counted_to = i64::MIN;
    for (start, end) in clipped {
        let start = start.max(counted_to);
        if end > start {
            excused = excused.saturating_add(end.saturating_sub(start));
            counted_to = end;
        }
    }
    excused
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Action {
    Assign {
        #[serde(with = "b58")]
        job: Pubkey,
        #[serde(with = "b58")]
        node: Pubkey,
        /// The node's Provider account.
        #[serde(with = "b58")]
        provider: Pubkey,
    },
    ReportFailure {
        #[serde(with = "b58")]
        job: Pubkey,
        #[serde(with = "b58")]
        node: Pubkey,
        #[serde(with = "b58")]
        provider: Pubkey,
        generation: u32,
        /// Why the job stopped; the failure table decides `cause` from it.
        stop: StopReason,
        #[serde(with = "cause_serde")]
        cause: FailureCause,
        detail: String,
    },
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::Assign { job, node, .. } => write!(f, "assign job {job} to node {node}"),
            Action::ReportFailure {
                job,
                node,
                generation,
                cause,
                detail,
                ..
            } => write!(
                f,
                "report job {job} failed on node {node} (generation {generation}, {}): {detail}",
                cause_name(cause)
            ),
        }
    }
}

/// A job left in the queue and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Waiting {
    #[serde(with = "b58")]
    pub job: Pubkey,
    pub reason: String,
}

/// An account left out of placement because its contents cannot be scheduled (a malformed
/// node profile, a job whose requirements make no sense). Only that account is left out: the
/// rest of the fleet and the queue are planned as usual.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Skipped {
    pub kind: AccountKind,
    #[serde(with = "b58")]
    pub account: Pubkey,
    pub reason: String,
}

/// The brake's default share: when 40% or more of the nodes holding a job
/// look dead at once, the cause is more likely the scheduler's side of the
/// network (a partition, a restart, an overloaded host) than that many
/// machines failing together (Kubernetes' node controller stops evicting a
/// zone on the same reasoning).
pub const BRAKE_PERCENT: u32 = 40;
/// The brake never holds fewer than this many nodes: in a small fleet one
/// or two lost nodes are common, and their jobs are moved at once.
pub const BRAKE_MIN_NODES: usize = 3;

/// A round that held back its reports of lost nodes: `silent` of the
/// `holding` nodes that hold a job looked dead by their heartbeats. The
/// jobs stay where they are; the evidence that is per node (a checkpoint
/// not attested on chain within twice its interval, a container that did
/// not start in time) still reports each of them, and a node heard from
/// again was never lost.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Brake {
    pub silent: usize,
    pub holding: usize,
    /// The jobs whose reports were held.
    #[serde(with = "b58_vec")]
    pub held: Vec<Pubkey>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Decision {
    pub actions: Vec<Action>,
    pub waiting: Vec<Waiting>,
    pub skipped: Vec<Skipped>,
    /// Set when the brake on mass failure held this round's reports of lost
    /// nodes.
    pub brake: Option<Brake>,
    /// Each standby-asking job's warm standby after this round's actions.
    #[serde(skip_serializing_if = "Standbys::is_empty")]
    pub standbys: Standbys,
}

/// One round: report the assignments that failed, then place the queue on
/// the live, available nodes.
///
/// A job reported failed that the program will queue again (the job's own
/// `fail` rule, applied to a copy) is placed in the same round, away from
/// the failed node: the shell sends both in one transaction, so recovery
/// does not wait for another round.
pub fn reconcile(obs: &Observation<'_>, config: &DetectorConfig) -> Decision {
    let mut decision = Decision::default();
    let mut failing_nodes = HashSet::new();
    let mut requeued: Vec<(Pubkey, Job)> = Vec::new();
    let mut reports: Vec<(&Pubkey, &Job, Action)> = obs
        .jobs
        .iter()
        .filter_map(|(key, job)| Some((key, job, detect_failure(obs, config, key, job, true)?)))
        .collect();
    decision.brake = mass_failure(obs, config, &reports);
    if let Some(brake) = &decision.brake {
        // A held job is judged again on what is not heartbeats.
        reports = reports
            .into_iter()
            .filter_map(|(key, job, action)| {
                if !brake.held.contains(key) {
                    return Some((key, job, action));
                }
                Some((key, job, detect_failure(obs, config, key, job, false)?))
            })
            .collect();
    }
    for (job_key, job, action) in reports {
        if let Action::ReportFailure { node, cause, .. } = &action {
            failing_nodes.insert(*node);
            // The report settles what the node accrued, then fails it.
            let mut after = job.clone();
            after.paid = after.paid.saturating_add(after.accrued);
            after.accrued = 0;
            if after.on_report(*cause, obs.now_ms / 1_000).is_ok() && after.state.can_assign() {
                requeued.push((*job_key, after));
            }
        }
        decision.actions.push(action);
    }
    place(obs, config, &failing_nodes, &requeued, &mut decision);
    decision.standbys = crate::standby::choose(obs, config, &failing_nodes, &decision.actions);
    decision
}

/// The brake on mass failure: when at least `brake_min_nodes` and
/// `brake_percent` of the nodes holding a job look dead by their heartbeats
/// (silent for half the timeout or more, or their stream dropped), the
/// round's reports of lost nodes are held ([`Brake`]). Other reports (an
/// exit, a checkpoint overdue on chain, a container that never started)
/// are each per-node evidence and go ahead.
fn mass_failure(
    obs: &Observation<'_>,
    config: &DetectorConfig,
    reports: &[(&Pubkey, &Job, Action)],
) -> Option<Brake> {
    let holding: HashSet<Pubkey> = obs
        .jobs
        .iter()
        .filter(|(_, job)| {
            matches!(
                job.state,
                JobState::Assigned { .. } | JobState::Running { .. }
            )
        })
        .filter_map(|(_, job)| job.node)
        .collect();
    // Nodes cut off together go past the timeout up to a heartbeat apart,
    // and would be judged a round or two apart, a few at a time: a node
    // silent for half the timeout, or whose stream dropped, already counts
    // toward the share (it is reported only past the timeout).
    let silent = holding
        .iter()
        .filter(|node| {
            obs.liveness.vanished(node, obs.now_ms, 0)
                || obs
                    .now_ms
                    .saturating_sub(obs.liveness.last_sign_of_life_ms(node))
                    > config.heartbeat_timeout_ms / 2
        })
        .count();
    let share_reached =
        (silent as u128) * 100 >= u128::from(config.brake_percent) * holding.len() as u128;
    if silent < config.brake_min_nodes.max(1) || !share_reached {
        return None;
    }
    let held: Vec<Pubkey> = reports
        .iter()
        .filter(|(_, _, action)| {
            matches!(
                action,
                Action::ReportFailure {
                    stop: StopReason::NodeLost,
                    ..
                }
            )
        })
        .map(|(key, _, _)| **key)
        .collect();
    Some(Brake {
        silent,
        holding: holding.len(),
        held,
    })
}

/// Whether the job's assignment has failed and why. Who pays is the failure
/// table's call (`mcjs_protocol::fault`): this only establishes what happened.
fn detect_failure(
    obs: &Observation<'_>,
    config: &DetectorConfig,
    job_key: &Pubkey,
    job: &Job,
    by_heartbeat: bool,
) -> Option<Action> {
    let (node, provider) = (job.node?, job.provider?);
    // Its output attested, the run is over: the job waits only for its
    // draw and any check, and the verification duties complete it
    // (`crate::verify`'s finish) whether or not its node is still there.
    if job.output_attested() {
        return None;
    }
    let report = |stop: StopReason, detail: String| {
        let cause = failure_cause(stop.chain_cause()?);
        Some(Action::ReportFailure {
            job: *job_key,
            node,
            provider,
            generation: job.generation,
            stop,
            cause,
            detail,
        })
    };
    let on_node_since_ms = match job.state {
        JobState::Assigned { since } | JobState::Running { since } => since.saturating_mul(1_000),
        _ => return None,
    };

    let agent = obs.liveness.report(&node, job_key, job.generation);
    if let Some(agent) = agent {
        let stopped = match (agent.phase, &agent.exit) {
            (JobPhase::Exited | JobPhase::DataRejected, Some(exit)) => {
                let last = exit.last_logs.last().cloned().unwrap_or_default();
                Some((exit.stop, last))
            }
            (JobPhase::DataRejected, None) => Some((
                StopReason::InputRejected,
                "an input was refused before the job started".into(),
            )),
            _ => None,
        };
        if let Some((stop, last)) = stopped {
            return report(stop, format!("{}: {last}", stop.label()));
        }
    }

    if let Some(at) = obs.liveness.dropped_at(&node)
        && at >= on_node_since_ms
        && by_heartbeat
    {
        let gone_ms = obs.now_ms.saturating_sub(at);
        if gone_ms >= config.disconnect_grace_ms {
            return report(
                StopReason::NodeLost,
                format!("its agent's connection closed without a goodbye {gone_ms} ms ago"),
            );
        }
    }

    let silent_ms = obs.now_ms.saturating_sub(
        obs.liveness
            .last_sign_of_life_ms(&node)
            .max(on_node_since_ms),
    );
    let timeout_ms = if obs.liveness.away(&node) {
        config.restart_grace_ms.max(config.heartbeat_timeout_ms)
    } else {
        config.heartbeat_timeout_ms
    };
    if silent_ms > timeout_ms && by_heartbeat {
        return report(
            StopReason::NodeLost,
            format!("no heartbeat for {silent_ms} ms"),
        );
    }

    match job.state {
        JobState::Running { .. } => {
            // A job waiting on a check of its intervals (a finished job
            // cannot complete while one is open) is not late, and gets a
            // full allowance after the last one resolves: the program
            // refuses an overdue report meanwhile too.
            if job.open_verifications > 0 {
                return None;
            }
            let interval_ms = i64::from(job.terms.checkpoint_interval_secs) * 1_000;
            let allowed_ms = interval_ms * i64::from(config.overdue_percent) / 100;
            let progress = job.progress_mark.max(job.checks_settled_at);
            let progress_ms = progress.saturating_mul(1_000);
            let since_progress_ms = obs
                .now_ms
                .saturating_sub(progress_ms)
                .saturating_sub(excused_ms(obs.outages, progress_ms, obs.now_ms));
            if since_progress_ms <= allowed_ms {
                return None;
            }
            // The agent signals the job and watches its checkpoint directory:
            // it knows whether the job wrote nothing (the job's fault) or the
            // node failed to attest what it wrote (the provider's).
            let stop = if agent.is_some_and(|a| a.checkpoint_overdue) {
                StopReason::CheckpointMissed
            } else {
                StopReason::AttestationOverdue
            };
            report(
                stop,
                format!(
                    "no checkpoint attested for {} s (interval {} s)",
                    since_progress_ms / 1_000,
                    job.terms.checkpoint_interval_secs
                ),
            )
        }
        JobState::Assigned { since } => {
            let since_ms = since.saturating_mul(1_000);
            let waited_ms = obs
                .now_ms
                .saturating_sub(since_ms)
                .saturating_sub(excused_ms(obs.outages, since_ms, obs.now_ms));
            if waited_ms <= config.start_timeout_ms {
                return None;
            }
            // Staging moves the job's own declared inputs: slow data is the job's.
            let stop = if agent.is_some_and(|a| a.phase == JobPhase::Staging) {
                StopReason::StagingTooSlow
            } else {
                StopReason::NeverStarted
            };
            report(
                stop,
                format!("the container did not start within {} s", waited_ms / 1_000),
            )
        }
        _ => None,
    }
}

/// The program's cause for the table's (one to one).
pub fn failure_cause(cause: ChainCause) -> FailureCause {
    match cause {
        ChainCause::NodeLost => FailureCause::NodeLost,
        ChainCause::ContainerDied => FailureCause::ContainerDied,
        ChainCause::CheckpointOverdue => FailureCause::CheckpointOverdue,
        ChainCause::JobError => FailureCause::JobError,
        ChainCause::JobYielded => FailureCause::JobYielded,
        ChainCause::JobFatal => FailureCause::JobFatal,
    }
}

mod b58 {
    use mcjs_client::Pubkey;
    use serde::Serializer;

    pub fn serialize<S: Serializer>(key: &Pubkey, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&key.to_string())
    }
}

mod b58_vec {
    use mcjs_client::Pubkey;
    use serde::Serializer;
    use serde::ser::SerializeSeq as _;

    pub fn serialize<S: Serializer>(keys: &[Pubkey], s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(keys.len()))?;
        for key in keys {
            seq.serialize_element(&key.to_string())?;
        }
        seq.end()
    }
}

pub use mcjs_client::cause_name;

mod cause_serde {
    use mcjs::state::FailureCause;
    use serde::Serializer;

    pub fn serialize<S: Serializer>(cause: &FailureCause, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(super::cause_name(cause))
    }
}
