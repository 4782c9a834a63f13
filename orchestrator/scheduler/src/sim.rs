//! A discrete-event fleet simulator that drives a placement policy over days of simulated time.
//!
//! The world (arrivals, node crashes, partitions, repair times) is drawn from the seed before
//! the run, so every policy faces exactly the same events and only the placements differ.

mod workload;
mod world;

pub use workload::{Arrivals, JobKind, NodeKind, Workload, standard_job_kinds, standard_kinds};
pub use world::{Incident, IncidentKind, SimJobSpec, World, failure_scales, measure};

use crate::fleet::FleetIndex;
use crate::plan::reliability::ServiceRecord;
use crate::plan::{PlacementPolicy, PlanRequest};
use crate::types::*;
use serde::Serialize;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::fmt;

const USDC: u64 = 1_000_000;
const HOUR: i64 = 3600;
const DAY: i64 = 24 * HOUR;
const T0: i64 = 1_700_000_000;

/// Knobs of the simulated world.
#[derive(Clone, Debug)]
pub struct SimConfig {
    pub seed: u64,
    pub nodes: usize,
    pub days: f64,
    /// The scheduler plans every tick when something changed.
    pub tick_secs: i64,
    pub heartbeat_timeout_secs: i64,
    /// Fetch and verify a checkpoint before resuming.
    pub restore_overhead_secs: i64,
    pub repair_mean_hours: f64,
    pub partitions_per_node_day: f64,
    pub partition_mean_secs: f64,
    /// Recent arrivals over this window predict the next `forecast_horizon_secs`.
    pub forecast_window_secs: i64,
    pub forecast_horizon_secs: i64,
    /// Jobs whose hardware is at most this fraction of the fleet count as needing scarce
    /// hardware in the report.
    pub scarce_fraction: f64,
    pub scarce_wait_threshold_secs: i64,
    /// Each node's measured values differ as a real fleet's do (see [`measure`]); off, every
    /// node of a kind reports its kind's nominal values.
    pub measured_variation: bool,
    /// The spread of per-node failure rates: each node's rate is its kind's times a log-normal
    /// scale of mean 1 and this sigma ([`failure_scales`]); 0 gives every node its kind's rate.
    pub failure_spread_sigma: f64,
    /// Site power cuts per node-day at a node of average failure scale, and their mean length.
    pub power_cuts_per_node_day: f64,
    pub power_cut_mean_hours: f64,
    /// The share of nodes behind a UPS the agent reads: a power cut there costs the job one
    /// checkpoint write, is told to the scheduler at once and uses no restart.
    pub ups_fraction: f64,
    /// Restarts after a node failure a job may use before it fails for good: the
    /// program's rule before a provider's failure stopped using the spec's
    /// `restart_budget`, kept so that the tables compare; `None` (jobs never fail) is the
    /// program's rule now.
    pub restart_budget: Option<u8>,
    /// A job still queued after its deadline is expired (the program's `expire_job`).
    pub expire_at_deadline: bool,
    /// An owner cancels a job that has not started after this long.
    pub owner_patience_secs: Option<i64>,
    /// Nodes had been in service up to this many days (uniformly) before the run, with the
    /// failures their rate gives: the record the chain holds when the run starts.
    pub history_max_days: f64,
}

impl SimConfig {
    /// The world before per-node failure rates: every node fails at its kind's rate, no power
    /// cuts, and jobs are never failed, expired or cancelled. Reproduces the earlier tables.
    pub fn uniform_failures(self) -> Self {
        Self {
            failure_spread_sigma: 0.0,
            power_cuts_per_node_day: 0.0,
            restart_budget: None,
            expire_at_deadline: false,
            owner_patience_secs: None,
            history_max_days: 0.0,
            ..self
        }
    }
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            seed: 7,
            nodes: 1000,
            days: 7.0,
            tick_secs: 60,
            heartbeat_timeout_secs: 300,
            restore_overhead_secs: 120,
            repair_mean_hours: 6.0,
            partitions_per_node_day: 0.1,
            partition_mean_secs: 900.0,
            forecast_window_secs: 6 * HOUR,
            // Off by default: holding nodes for predicted arrivals cost completions in our
            // measurements (docs/scheduler.md); `--forecast-mins` turns it on.
            forecast_horizon_secs: 0,
            scarce_fraction: 0.15,
            scarce_wait_threshold_secs: 600,
            measured_variation: true,
            failure_spread_sigma: 1.0,
            power_cuts_per_node_day: 1.0 / 30.0,
            power_cut_mean_hours: 2.0,
            ups_fraction: 0.4,
            restart_budget: Some(3),
            expire_at_deadline: true,
            owner_patience_secs: Some(3 * DAY),
            history_max_days: 120.0,
        }
    }
}

/// What one policy achieved on one workload.
#[derive(Clone, Debug, Serialize)]
pub struct SimReport {
    pub policy: String,
    pub workload: String,
    pub submitted: usize,
    pub completed: usize,
    /// Ran out of restarts.
    pub failed: usize,
    /// Still queued after their deadline.
    pub expired: usize,
    /// Given up by their owners before they started.
    pub cancelled: usize,
    /// Not ended when the run stopped: queued, and on a node (or lost with it, not yet noticed).
    pub unfinished_queued: usize,
    pub unfinished_running: usize,
    /// The GPU-hours of work in the jobs that completed.
    pub completed_gpu_hours: f64,
    /// Goodput: the GPU-hours of work done and kept for an owner by the end of the run: the
    /// work of completed jobs and the checkpointed progress of jobs still queued or running.
    /// Work lost at interruptions, and all the work of failed, expired and cancelled jobs,
    /// does not count.
    pub goodput_gpu_hours: f64,
    /// Compute lost to interruptions (work since the last checkpoint, or a checkpoint written
    /// on battery).
    pub wasted_gpu_hours: f64,
    pub mean_wait_secs: f64,
    pub p99_wait_secs: f64,
    pub never_started: usize,
    pub deadline_jobs: usize,
    pub deadline_misses: usize,
    pub scarce_jobs: usize,
    pub scarce_waited: usize,
    pub scarce_mean_wait_secs: f64,
    pub node_crashes: usize,
    pub partitions: usize,
    pub power_cuts_with_ups: usize,
    pub power_cuts_without_ups: usize,
    pub job_interruptions: usize,
    /// Jobs interrupted by a power cut, and the job compute each lost at most, with a UPS and
    /// without.
    pub power_interruptions_with_ups: usize,
    pub power_loss_max_secs_with_ups: i64,
    pub power_interruptions_without_ups: usize,
    pub power_loss_max_secs_without_ups: i64,
    pub plans: usize,
}

impl SimReport {
    /// MCJS's gauge (`mcjs_spec::gauge`): jobs completed over jobs that ended, completed or
    /// failed. Cancelled and expired jobs are counted apart, and jobs still unfinished at the
    /// end of the run are not in it. A run in which no job ended reads 100% here, so that the
    /// tables always hold a number.
    pub fn completion_rate(&self) -> f64 {
        self.end_counts().completion_rate().unwrap_or(1.0)
    }

    /// The run's job ends, as the gauge counts them.
    pub fn end_counts(&self) -> mcjs_spec::gauge::EndCounts {
        mcjs_spec::gauge::EndCounts {
            completed: self.completed as u64,
            failed: self.failed as u64,
            cancelled: self.cancelled as u64,
            expired: self.expired as u64,
        }
    }

    /// Jobs that reached an end: completed, failed, expired or cancelled.
    pub fn ended(&self) -> usize {
        self.completed + self.failed + self.expired + self.cancelled
    }
}

impl fmt::Display for SimReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} on {}: {}/{} completed, {} failed, {} expired, {} cancelled, {} unfinished, \
             completion rate {:.1}%, {:.0} gpu-h wasted, wait mean {:.0} s p99 {:.0} s, \
             {} deadline misses, {}/{} scarce jobs waited (mean {:.0} s)",
            self.policy,
            self.workload,
            self.completed,
            self.submitted,
            self.failed,
            self.expired,
            self.cancelled,
            self.unfinished_queued + self.unfinished_running,
            100.0 * self.completion_rate(),
            self.wasted_gpu_hours,
            self.mean_wait_secs,
            self.p99_wait_secs,
            self.deadline_misses,
            self.scarce_waited,
            self.scarce_jobs,
            self.scarce_mean_wait_secs
        )
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// Ordered before arrivals at the same second so that freed nodes are seen first.
    JobDone {
        job: usize,
        generation: u32,
    },
    NodeUp {
        node: usize,
        generation: u32,
    },
    FailureDetected {
        job: usize,
        generation: u32,
        node: usize,
    },
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum JobState {
    NotYetSubmitted,
    Queued,
    Running {
        node: usize,
        compute_from: i64,
    },
    /// Its node died; the scheduler has not noticed yet.
    Lost,
    Done,
    Failed,
    Expired,
    Cancelled,
}

/// What a job loses when its node goes down.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Interruption {
    /// Everything since the last checkpoint; noticed at the heartbeat timeout; uses a restart.
    Unannounced,
    /// A UPS on battery: the agent checkpoints at once and tells the scheduler, so the job
    /// loses the write and is queued again without using a restart (a yield after progress).
    OnBattery,
}

struct Sim<'w> {
    world: &'w World,
    config: &'w SimConfig,
    fleet: FleetIndex,
    state: Vec<JobState>,
    generation: Vec<u32>,
    progress: Vec<i64>,
    recovering_from: Vec<Option<NodeId>>,
    restarts_used: Vec<u8>,
    first_start: Vec<Option<i64>>,
    completed_at: Vec<Option<i64>>,
    node_job: Vec<Option<usize>>,
    node_generation: Vec<u32>,
    /// The chain's record of each node: failures, seconds in service, and since when it has
    /// been online (not counted yet).
    node_failures: Vec<u32>,
    node_service_secs: Vec<i64>,
    node_online_since: Vec<Option<i64>>,
    queue: Vec<usize>,
    events: BinaryHeap<Reverse<(i64, Event)>>,
    recent: VecDeque<(i64, usize)>,
    report: SimReport,
    dirty: bool,
}

/// Runs one policy over a drawn world.
pub fn simulate(
    policy: &dyn PlacementPolicy,
    workload: &Workload,
    world: &World,
    config: &SimConfig,
) -> SimReport {
    let n_jobs = world.jobs.len();
    let mut sim = Sim {
        world,
        config,
        fleet: FleetIndex::new(world.nodes.clone()).expect("generated fleet is valid"),
        state: vec![JobState::NotYetSubmitted; n_jobs],
        generation: vec![0; n_jobs],
        progress: vec![0; n_jobs],
        recovering_from: vec![None; n_jobs],
        restarts_used: vec![0; n_jobs],
        first_start: vec![None; n_jobs],
        completed_at: vec![None; n_jobs],
        node_job: vec![None; world.nodes.len()],
        node_generation: vec![0; world.nodes.len()],
        node_failures: world.node_history.iter().map(|h| h.0).collect(),
        node_service_secs: world
            .node_history
            .iter()
            .map(|h| (h.1 * HOUR as f64) as i64)
            .collect(),
        node_online_since: vec![Some(T0); world.nodes.len()],
        queue: Vec::new(),
        events: BinaryHeap::new(),
        recent: VecDeque::new(),
        report: SimReport {
            policy: policy.name().to_string(),
            workload: workload.name.to_string(),
            submitted: n_jobs,
            completed: 0,
            failed: 0,
            expired: 0,
            cancelled: 0,
            unfinished_queued: 0,
            unfinished_running: 0,
            completed_gpu_hours: 0.0,
            goodput_gpu_hours: 0.0,
            wasted_gpu_hours: 0.0,
            mean_wait_secs: 0.0,
            p99_wait_secs: 0.0,
            never_started: 0,
            deadline_jobs: 0,
            deadline_misses: 0,
            scarce_jobs: 0,
            scarce_waited: 0,
            scarce_mean_wait_secs: 0.0,
            node_crashes: 0,
            partitions: 0,
            power_cuts_with_ups: 0,
            power_cuts_without_ups: 0,
            job_interruptions: 0,
            power_interruptions_with_ups: 0,
            power_loss_max_secs_with_ups: 0,
            power_interruptions_without_ups: 0,
            power_loss_max_secs_without_ups: 0,
            plans: 0,
        },
        dirty: false,
    };
    sim.run(policy);
    sim.finish()
}

impl Sim<'_> {
    fn run(&mut self, policy: &dyn PlacementPolicy) {
        let mut next_arrival = 0;
        let mut next_incident = 0;
        let mut now = T0;
        while now < self.world.end {
            while let Some(Reverse((at, _))) = self.events.peek()
                && *at <= now
            {
                let Reverse((at, event)) = self.events.pop().expect("peeked");
                self.handle(at, event);
            }
            while next_incident < self.world.incidents.len()
                && self.world.incidents[next_incident].at <= now
            {
                let incident = self.world.incidents[next_incident];
                self.incident(incident);
                next_incident += 1;
            }
            while next_arrival < self.world.jobs.len()
                && self.world.jobs[next_arrival].job.terms.submitted_unix <= now
            {
                self.state[next_arrival] = JobState::Queued;
                self.queue.push(next_arrival);
                self.recent
                    .push_back((now, self.world.jobs[next_arrival].kind));
                next_arrival += 1;
                self.dirty = true;
            }
            self.end_waiting_jobs(now);
            if self.dirty {
                self.plan(policy, now);
                self.dirty = false;
            }
            now += self.config.tick_secs;
        }
    }

    fn node_mut(&mut self, node: usize, f: impl FnOnce(&mut FleetNode)) {
        let mut n = self
            .fleet
            .node(NodeId(node as u64))
            .expect("known node")
            .clone();
        f(&mut n);
        self.fleet.upsert(n).expect("valid node");
        self.dirty = true;
    }

    fn handle(&mut self, at: i64, event: Event) {
        match event {
            Event::JobDone { job, generation } => {
                if self.generation[job] != generation {
                    return;
                }
                let JobState::Running { node, .. } = self.state[job] else {
                    return;
                };
                self.state[job] = JobState::Done;
                self.completed_at[job] = Some(at);
                self.node_job[node] = None;
                self.node_mut(node, |n| {
                    n.status = NodeAvailability::Available;
                    n.consecutive_failures = 0;
                });
            }
            Event::NodeUp { node, generation } => {
                if self.node_generation[node] != generation {
                    return;
                }
                self.node_online_since[node] = Some(at);
                self.node_mut(node, |n| n.status = NodeAvailability::Available);
            }
            Event::FailureDetected {
                job,
                generation,
                node,
            } => {
                if self.generation[job] != generation {
                    return;
                }
                // Every failure here is a node's. The program no longer counts a
                // provider's failure against the restart budget (`Job::fail`); the
                // simulator keeps the earlier rule, a failure uses a restart and fails the
                // job once none is left, so that its tables compare (docs/scheduler.md).
                // `restart_budget: None` is today's program.
                if let Some(budget) = self.config.restart_budget
                    && self.restarts_used[job] >= budget
                {
                    self.state[job] = JobState::Failed;
                    return;
                }
                self.restarts_used[job] = self.restarts_used[job].saturating_add(1);
                self.requeue(job, node);
            }
        }
    }

    fn requeue(&mut self, job: usize, node: usize) {
        self.state[job] = JobState::Queued;
        self.recovering_from[job] = Some(NodeId(node as u64));
        self.queue.push(job);
        self.dirty = true;
    }

    /// The job on `node` stops. Unannounced, it loses everything since its last checkpoint
    /// and the scheduler notices at the heartbeat timeout; on battery it checkpoints first and
    /// loses the write. Returns the job compute lost, in seconds, when a job was running.
    fn interrupt(&mut self, node: usize, at: i64, how: Interruption) -> Option<i64> {
        let job = self.node_job[node].take()?;
        let JobState::Running { compute_from, .. } = self.state[job] else {
            return None;
        };
        let spec = &self.world.jobs[job];
        let ran = (at - compute_from).max(0);
        let (saved, lost) = match how {
            Interruption::Unannounced => {
                let interval = spec.job.checkpoint.interval_secs as i64;
                let saved = ran / interval * interval;
                (saved, ran - saved)
            }
            Interruption::OnBattery if ran == 0 => (0, 0),
            Interruption::OnBattery => {
                let bw = self.world.nodes[node].checkpoint_write_mibps.max(1) as u64;
                let write = (spec.job.checkpoint.size_bytes >> 20).div_ceil(bw) as i64;
                (ran, write.max(1))
            }
        };
        self.progress[job] = (self.progress[job] + saved).min(spec.work_secs);
        self.report.wasted_gpu_hours +=
            lost as f64 * spec.job.hardware.gpu_count as f64 / HOUR as f64;
        self.report.job_interruptions += 1;
        match how {
            Interruption::Unannounced => {
                self.state[job] = JobState::Lost;
                let generation = self.generation[job];
                self.events.push(Reverse((
                    at + self.config.heartbeat_timeout_secs,
                    Event::FailureDetected {
                        job,
                        generation,
                        node,
                    },
                )));
            }
            Interruption::OnBattery => self.requeue(job, node),
        }
        Some(lost)
    }

    /// Queued jobs past their deadline expire; owners give up on jobs that never started.
    fn end_waiting_jobs(&mut self, now: i64) {
        let expire = self.config.expire_at_deadline;
        let patience = self.config.owner_patience_secs;
        if !expire && patience.is_none() {
            return;
        }
        let before = self.queue.len();
        let (world, state, first_start) = (self.world, &mut self.state, &self.first_start);
        self.queue.retain(|&j| {
            let terms = &world.jobs[j].job.terms;
            if expire && terms.deadline_unix.is_some_and(|d| now > d) {
                state[j] = JobState::Expired;
                return false;
            }
            if let Some(p) = patience
                && first_start[j].is_none()
                && now - terms.submitted_unix > p
            {
                state[j] = JobState::Cancelled;
                return false;
            }
            true
        });
        if self.queue.len() != before {
            self.dirty = true;
        }
    }

    fn incident(&mut self, incident: Incident) {
        let node = incident.node;
        let at = incident.at;
        let status = self
            .fleet
            .node(NodeId(node as u64))
            .expect("known node")
            .status;
        if status == NodeAvailability::Offline {
            return;
        }
        let ups = self.world.node_ups[node];
        let (down_for, how) = match incident.kind {
            IncidentKind::Crash { repair_secs } => {
                self.report.node_crashes += 1;
                (repair_secs, Interruption::Unannounced)
            }
            IncidentKind::Partition { secs } => {
                // Shorter than the heartbeat timeout: nobody notices, the job goes on.
                if secs <= self.config.heartbeat_timeout_secs {
                    return;
                }
                self.report.partitions += 1;
                (secs, Interruption::Unannounced)
            }
            IncidentKind::PowerCut { secs } if ups => {
                self.report.power_cuts_with_ups += 1;
                (secs, Interruption::OnBattery)
            }
            IncidentKind::PowerCut { secs } => {
                self.report.power_cuts_without_ups += 1;
                (secs, Interruption::Unannounced)
            }
        };
        let lost = self.interrupt(node, at, how);
        if let (Some(lost), IncidentKind::PowerCut { .. }) = (lost, incident.kind) {
            let r = &mut self.report;
            if ups {
                r.power_interruptions_with_ups += 1;
                r.power_loss_max_secs_with_ups = r.power_loss_max_secs_with_ups.max(lost);
            } else {
                r.power_interruptions_without_ups += 1;
                r.power_loss_max_secs_without_ups = r.power_loss_max_secs_without_ups.max(lost);
            }
        }
        // The chain records the node going offline: one more failure, its service paused.
        self.node_failures[node] += 1;
        if let Some(since) = self.node_online_since[node].take() {
            self.node_service_secs[node] += at - since;
        }
        self.node_generation[node] += 1;
        let generation = self.node_generation[node];
        self.node_mut(node, |n| {
            n.status = NodeAvailability::Offline;
            n.consecutive_failures += 1;
            n.last_failure_unix = Some(at);
        });
        self.events
            .push(Reverse((at + down_for, Event::NodeUp { node, generation })));
    }

    fn forecast(&mut self, now: i64) -> Vec<ExpectedDemand> {
        while let Some(&(t, _)) = self.recent.front()
            && t < now - self.config.forecast_window_secs
        {
            self.recent.pop_front();
        }
        let mut counts = vec![0u32; self.world.kinds.len()];
        for &(_, k) in &self.recent {
            counts[k] += 1;
        }
        let scale =
            self.config.forecast_horizon_secs as f64 / self.config.forecast_window_secs as f64;
        self.world
            .kinds
            .iter()
            .zip(counts)
            .filter(|(_, c)| *c > 0)
            .map(|(kind, c)| ExpectedDemand {
                hardware: kind.hardware.clone(),
                checkpoint: CheckpointPolicy {
                    size_bytes: kind.checkpoint_gib << 30,
                    interval_secs: kind.interval_secs,
                    keep_checkpoints: 2,
                },
                jobs: c as f64 * scale,
            })
            .collect()
    }

    fn plan(&mut self, policy: &dyn PlacementPolicy, now: i64) {
        let expected = self.forecast(now);
        let jobs: Vec<QueuedJob> = self
            .queue
            .iter()
            .map(|&j| {
                let mut job = self.world.jobs[j].job.clone();
                job.terms.recovering_from = self.recovering_from[j];
                job
            })
            .collect();
        // What the scheduler reads for reliability: the chain's record of every node, and each
        // job's remaining work (the owner's estimate, taken here as exact).
        let expected_secs: Vec<i64> = self
            .queue
            .iter()
            .map(|&j| self.world.jobs[j].work_secs - self.progress[j])
            .collect();
        let history: Vec<ServiceRecord> = (0..self.world.nodes.len())
            .map(|n| ServiceRecord {
                node: NodeId(n as u64),
                failures: self.node_failures[n],
                hours_in_service: (self.node_service_secs[n]
                    + self.node_online_since[n].map_or(0, |since| now - since))
                    as f64
                    / HOUR as f64,
            })
            .collect();
        let plan = policy.plan(
            &self.fleet,
            &PlanRequest::new(&jobs, now)
                .with_expected(&expected)
                .with_history(&history)
                .with_expected_secs(&expected_secs),
        );
        self.report.plans += 1;
        let mut placed = Vec::with_capacity(plan.placements.len());
        for p in &plan.placements {
            let job = p.job.0 as usize;
            let node = p.node.0 as usize;
            placed.push(job);
            let spec = &self.world.jobs[job];
            let bw = self.world.nodes[node].checkpoint_write_mibps.max(1) as i64;
            let restore = if self.progress[job] > 0 {
                self.config.restore_overhead_secs
                    + ((spec.job.checkpoint.size_bytes >> 20) as i64 / bw)
            } else {
                self.config.restore_overhead_secs
            };
            let compute_from = now + restore;
            self.generation[job] += 1;
            self.state[job] = JobState::Running { node, compute_from };
            self.first_start[job].get_or_insert(now);
            self.node_job[node] = Some(job);
            self.node_mut(node, |n| n.status = NodeAvailability::Busy);
            let finish = compute_from + (spec.work_secs - self.progress[job]);
            let generation = self.generation[job];
            self.events
                .push(Reverse((finish, Event::JobDone { job, generation })));
        }
        placed.sort_unstable();
        self.queue.retain(|j| placed.binary_search(j).is_err());
    }

    fn finish(mut self) -> SimReport {
        let end = self.world.end;
        let mut waits = Vec::with_capacity(self.world.jobs.len());
        let mut scarce_wait_total = 0.0;
        for (j, spec) in self.world.jobs.iter().enumerate() {
            let submitted = spec.job.terms.submitted_unix;
            // A job that never started has waited until the end of the run (censored).
            let wait = self.first_start[j].unwrap_or(end) - submitted;
            if self.first_start[j].is_none() {
                self.report.never_started += 1;
            }
            waits.push(wait);
            let gpu_hours = |secs: i64| secs as f64 * spec.job.hardware.gpu_count as f64 / 3600.0;
            self.report.goodput_gpu_hours += gpu_hours(match self.state[j] {
                JobState::Done => spec.work_secs,
                JobState::Running { compute_from, .. } => {
                    let interval = spec.job.checkpoint.interval_secs.max(1) as i64;
                    let ran = (end - compute_from).max(0);
                    (self.progress[j] + ran / interval * interval).min(spec.work_secs)
                }
                JobState::Queued | JobState::Lost => self.progress[j],
                _ => 0,
            });
            match self.state[j] {
                JobState::Done => {
                    self.report.completed += 1;
                    self.report.completed_gpu_hours += gpu_hours(spec.work_secs);
                }
                JobState::Failed => self.report.failed += 1,
                JobState::Expired => self.report.expired += 1,
                JobState::Cancelled => self.report.cancelled += 1,
                JobState::Queued | JobState::NotYetSubmitted => self.report.unfinished_queued += 1,
                JobState::Running { .. } | JobState::Lost => self.report.unfinished_running += 1,
            }
            if let Some(deadline) = spec.job.terms.deadline_unix {
                self.report.deadline_jobs += 1;
                let missed = match self.completed_at[j] {
                    Some(done) => done > deadline,
                    None => deadline <= end,
                };
                self.report.deadline_misses += missed as usize;
            }
            if spec.scarce {
                self.report.scarce_jobs += 1;
                scarce_wait_total += wait as f64;
                if wait > self.config.scarce_wait_threshold_secs {
                    self.report.scarce_waited += 1;
                }
            }
        }
        if !waits.is_empty() {
            self.report.mean_wait_secs = waits.iter().sum::<i64>() as f64 / waits.len() as f64;
            waits.sort_unstable();
            let idx = ((waits.len() as f64 * 0.99).ceil() as usize).clamp(1, waits.len()) - 1;
            self.report.p99_wait_secs = waits[idx] as f64;
        }
        if self.report.scarce_jobs > 0 {
            self.report.scarce_mean_wait_secs = scarce_wait_total / self.report.scarce_jobs as f64;
        }
        self.report
    }
}
