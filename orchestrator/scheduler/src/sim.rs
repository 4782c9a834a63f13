//! A discrete-event fleet simulator that drives a placement policy over days of simulated time.
//!
//! The world (arrivals, node crashes, partitions, repair times) is drawn from the seed before
//! the run, so every policy faces exactly the same events and only the placements differ.

use crate::fleet::FleetIndex;
use crate::plan::{PlacementPolicy, PlanRequest};
use crate::requirements::Needs;
use crate::types::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::fmt;

const USDC: u64 = 1_000_000;
const HOUR: i64 = 3600;
const DAY: i64 = 24 * HOUR;
const T0: i64 = 1_700_000_000;

/// A kind of node in the simulated fleet.
#[derive(Clone, Debug)]
pub struct NodeKind {
    pub model: &'static str,
    pub gpu_count: u8,
    pub vram_gib: u32,
    pub compute_capability: u16,
    pub driver: (u32, u32),
    pub share: f64,
    pub price_per_gpu_hour: u64,
    pub mtbf_days: f64,
    pub write_mibps: u32,
}

/// Mostly consumer 24 GB cards, fewer V100 / A100 40 GB, few 80 GB cards, a handful of niche
/// and old ones.
pub fn standard_kinds() -> Vec<NodeKind> {
    let k =
        |model, gpu_count, vram_gib, cc, driver, share, price_cents: u64, mtbf_days, bw| NodeKind {
            model,
            gpu_count,
            vram_gib,
            compute_capability: cc,
            driver,
            share,
            price_per_gpu_hour: price_cents * USDC / 100,
            mtbf_days,
            write_mibps: bw,
        };
    vec![
        k("geforce-rtx-3090", 1, 24, 86, (550, 0), 0.33, 25, 5.0, 600),
        k("geforce-rtx-4090", 1, 24, 89, (550, 0), 0.22, 40, 6.0, 900),
        k("geforce-rtx-4090", 4, 24, 89, (550, 0), 0.05, 40, 6.0, 1500),
        k("v100-sxm2-32gb", 4, 32, 70, (535, 0), 0.10, 60, 15.0, 1200),
        k("a100-pcie-40gb", 1, 40, 80, (535, 0), 0.07, 110, 20.0, 1500),
        k("a100-sxm4-40gb", 8, 40, 80, (535, 0), 0.03, 120, 20.0, 3000),
        k("a100-sxm4-80gb", 1, 80, 80, (550, 0), 0.03, 180, 20.0, 2000),
        k(
            "a100-sxm4-80gb",
            8,
            80,
            80,
            (550, 0),
            0.015,
            190,
            20.0,
            4000,
        ),
        k(
            "h100-sxm5-80gb",
            8,
            80,
            90,
            (550, 0),
            0.015,
            300,
            25.0,
            5000,
        ),
        k("quadro-rtx-8000", 2, 48, 75, (535, 0), 0.03, 70, 8.0, 700),
        k("rtx-a6000", 1, 48, 86, (550, 0), 0.03, 80, 10.0, 900),
        k("k80", 4, 12, 37, (470, 0), 0.03, 5, 3.0, 300),
    ]
}

/// A kind of job: its hardware needs and how long it runs.
#[derive(Clone, Debug)]
pub struct JobKind {
    pub name: &'static str,
    pub hardware: HardwareRequirements,
    pub min_hours: f64,
    pub max_hours: f64,
    pub checkpoint_gib: u64,
    pub interval_secs: u32,
}

fn job_kind(
    name: &'static str,
    gpus: u8,
    vram_gib: u32,
    cc: u16,
    models: &[&str],
    hours: (f64, f64),
    checkpoint_gib: u64,
) -> JobKind {
    JobKind {
        name,
        hardware: HardwareRequirements {
            gpu_count: gpus,
            min_vram_mib: vram_gib * 1024,
            min_compute_capability: cc,
            gpu_models: models.iter().map(|m| m.to_string()).collect(),
            min_cpu_cores: 4,
            min_ram_mib: 16 * 1024,
            min_disk_gib: 100,
            ..HardwareRequirements::default()
        },
        min_hours: hours.0,
        max_hours: hours.1,
        checkpoint_gib,
        interval_secs: 1800,
    }
}

/// The job kinds of the workloads, with the hardware that can run each.
pub fn standard_job_kinds() -> Vec<JobKind> {
    vec![
        // Runs on almost anything with 16 GB: consumer cards, V100, A100, niche cards.
        job_kind("any-16g", 1, 16, 70, &[], (2.0, 36.0), 4),
        job_kind("ampere-24g", 1, 24, 80, &[], (2.0, 36.0), 8),
        job_kind("multi-4x24g", 4, 24, 70, &[], (2.0, 36.0), 20),
        job_kind("single-40g", 1, 40, 80, &[], (2.0, 36.0), 15),
        job_kind("single-48g", 1, 48, 75, &[], (2.0, 36.0), 20),
        // Only the 80 GB cards.
        job_kind("single-80g", 1, 80, 80, &[], (2.0, 36.0), 30),
        job_kind("node-8x80g", 8, 80, 80, &[], (2.0, 36.0), 120),
        // Legacy CUDA stacks pinned to K80.
        job_kind("legacy-k80", 2, 12, 37, &["k80"], (2.0, 36.0), 4),
    ]
}

/// How jobs arrive.
#[derive(Clone, Debug)]
pub enum Arrivals {
    /// A steady Poisson stream at the rate that keeps the fleet `load` busy on average.
    Steady { load: f64 },
    /// Part of the load arrives steadily, the rest in bursts every `every_hours`.
    Bursty {
        load: f64,
        steady_fraction: f64,
        every_hours: f64,
    },
}

#[derive(Clone, Debug)]
pub struct Workload {
    pub name: &'static str,
    /// Weights over `standard_job_kinds()`, by name.
    pub mix: Vec<(&'static str, f64)>,
    pub arrivals: Arrivals,
    /// Fraction of jobs with a deadline.
    pub deadline_fraction: f64,
}

impl Workload {
    /// Each hardware group about 75% busy with the jobs that need it.
    pub fn balanced() -> Self {
        Self {
            name: "balanced",
            mix: vec![
                ("any-16g", 42.0),
                ("ampere-24g", 22.0),
                ("multi-4x24g", 9.0),
                ("single-40g", 8.0),
                ("single-48g", 4.5),
                ("single-80g", 4.0),
                ("node-8x80g", 1.5),
                ("legacy-k80", 2.5),
            ],
            arrivals: Arrivals::Steady { load: 0.8 },
            deadline_fraction: 0.3,
        }
    }

    /// Scarce hardware about 90% busy with jobs that only it can run, while flexible jobs
    /// overflow the common cards and would spill onto scarce ones.
    pub fn scarce_heavy() -> Self {
        Self {
            name: "scarce-heavy",
            mix: vec![
                ("any-16g", 52.0),
                ("ampere-24g", 18.0),
                ("multi-4x24g", 7.0),
                ("single-40g", 6.0),
                ("single-48g", 5.0),
                ("single-80g", 4.5),
                ("node-8x80g", 1.3),
                ("legacy-k80", 2.6),
            ],
            arrivals: Arrivals::Steady { load: 1.05 },
            deadline_fraction: 0.3,
        }
    }

    pub fn bursty() -> Self {
        Self {
            name: "bursty",
            arrivals: Arrivals::Bursty {
                load: 0.85,
                steady_fraction: 0.3,
                every_hours: 8.0,
            },
            ..Self::balanced()
        }
    }
}

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
    pub completed_gpu_hours: f64,
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
    pub job_interruptions: usize,
    pub plans: usize,
}

impl SimReport {
    pub fn completion_rate(&self) -> f64 {
        self.completed as f64 / self.submitted.max(1) as f64
    }
}

impl fmt::Display for SimReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} on {}: {}/{} completed, {:.0} gpu-h wasted, wait mean {:.0} s p99 {:.0} s, \
             {} deadline misses, {}/{} scarce jobs waited (mean {:.0} s)",
            self.policy,
            self.workload,
            self.completed,
            self.submitted,
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

/// The drawn world: nodes, arrivals and node incidents, shared by every policy.
#[derive(Clone, Debug)]
pub struct World {
    pub nodes: Vec<Node>,
    pub node_mtbf_days: Vec<f64>,
    pub jobs: Vec<SimJobSpec>,
    pub incidents: Vec<Incident>,
    pub kinds: Vec<JobKind>,
    pub end: i64,
}

#[derive(Clone, Debug)]
pub struct SimJobSpec {
    pub job: Job,
    pub kind: usize,
    pub work_secs: i64,
    pub scarce: bool,
}

#[derive(Clone, Copy, Debug)]
pub struct Incident {
    pub at: i64,
    pub node: usize,
    pub kind: IncidentKind,
}

#[derive(Clone, Copy, Debug)]
pub enum IncidentKind {
    Crash { repair_secs: i64 },
    Partition { secs: i64 },
}

/// Replaces each node's nominal measured values by what a HAL would report on a real fleet:
/// checkpoint write bandwidth within ±30% of the kind's, 30–100% of the disk free, and RAM a
/// few hundred MiB under nominal (firmware and kernel reservations differ per machine).
///
/// Drawn from a stream of its own, so that the rest of the world (arrivals, crashes, prices)
/// is the same with or without variation and quality can be compared on one seed.
pub fn measure(nodes: &mut [Node], seed: u64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x6d65_6173_7572_6564);
    for node in nodes {
        node.checkpoint_write_mibps =
            (node.checkpoint_write_mibps as f64 * rng.random_range(0.7..=1.3)) as u32;
        node.disk_free_gib = (node.disk_free_gib as f64 * rng.random_range(0.3..=1.0)) as u32;
        node.ram_mib = node.ram_mib.saturating_sub(rng.random_range(0..=600));
    }
}

fn exp(rng: &mut ChaCha8Rng, mean: f64) -> f64 {
    -mean * (1.0 - rng.random::<f64>()).ln()
}

fn log_uniform(rng: &mut ChaCha8Rng, lo: f64, hi: f64) -> f64 {
    (lo.ln() + rng.random::<f64>() * (hi.ln() - lo.ln())).exp()
}

fn pick_weighted(rng: &mut ChaCha8Rng, weights: &[f64]) -> usize {
    let total: f64 = weights.iter().sum();
    let mut x = rng.random::<f64>() * total;
    for (i, w) in weights.iter().enumerate() {
        if x < *w {
            return i;
        }
        x -= w;
    }
    weights.len() - 1
}

impl World {
    pub fn draw(workload: &Workload, config: &SimConfig) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(config.seed);
        let end = T0 + (config.days * DAY as f64) as i64;
        let kinds = standard_kinds();
        // Exact proportions, shuffled so that node ids do not follow hardware.
        let mut kind_of_node = Vec::with_capacity(config.nodes);
        for (i, kind) in kinds.iter().enumerate() {
            let n = (kind.share * config.nodes as f64).round().max(1.0) as usize;
            kind_of_node.extend(std::iter::repeat_n(i, n));
        }
        kind_of_node.truncate(config.nodes.max(kinds.len()));
        for i in (1..kind_of_node.len()).rev() {
            let j = rng.random_range(0..=i);
            kind_of_node.swap(i, j);
        }
        let nodes: Vec<Node> = kind_of_node
            .iter()
            .enumerate()
            .map(|(i, &k)| {
                let kind = &kinds[k];
                Node {
                    id: NodeId(i as u64),
                    gpu_model: kind.model.to_string(),
                    gpu_count: kind.gpu_count,
                    vram_per_gpu_mib: kind.vram_gib * 1024,
                    compute_capability: kind.compute_capability,
                    driver: kind.driver,
                    cpu_cores: 8 * kind.gpu_count as u16,
                    ram_mib: 64 * 1024 * kind.gpu_count as u32,
                    disk_free_gib: 2000,
                    checkpoint_write_mibps: kind.write_mibps,
                    bandwidth_stable: true,
                    readiness: rng.random_range(60..=100),
                    // Providers price around the going rate of their hardware.
                    price_per_gpu_hour: kind.price_per_gpu_hour
                        + rng.random_range(0..=kind.price_per_gpu_hour / 5),
                    status: NodeStatus::Available,
                    last_failure_unix: None,
                    consecutive_failures: 0,
                }
            })
            .collect();
        let mut nodes = nodes;
        if config.measured_variation {
            measure(&mut nodes, config.seed);
        }
        let node_mtbf_days: Vec<f64> = kind_of_node.iter().map(|&k| kinds[k].mtbf_days).collect();

        let mut incidents = Vec::new();
        for (node, mtbf) in node_mtbf_days.iter().enumerate() {
            let mut t = T0 as f64;
            loop {
                t += exp(&mut rng, mtbf * DAY as f64);
                if t >= end as f64 {
                    break;
                }
                let repair_secs = exp(&mut rng, config.repair_mean_hours * HOUR as f64) as i64;
                incidents.push(Incident {
                    at: t as i64,
                    node,
                    kind: IncidentKind::Crash {
                        repair_secs: repair_secs.max(600),
                    },
                });
            }
            let mut t = T0 as f64;
            loop {
                t += exp(
                    &mut rng,
                    DAY as f64 / config.partitions_per_node_day.max(1e-9),
                );
                if t >= end as f64 {
                    break;
                }
                let secs = exp(&mut rng, config.partition_mean_secs) as i64;
                incidents.push(Incident {
                    at: t as i64,
                    node,
                    kind: IncidentKind::Partition { secs: secs.max(1) },
                });
            }
        }
        incidents.sort_by_key(|i| (i.at, i.node));

        let job_kinds = standard_job_kinds();
        let weights: Vec<f64> = job_kinds
            .iter()
            .map(|k| {
                workload
                    .mix
                    .iter()
                    .find(|(n, _)| *n == k.name)
                    .map_or(0.0, |(_, w)| *w)
            })
            .collect();
        let total_w: f64 = weights.iter().sum();
        // Node-hours per job: one job occupies one node.
        let mean_hours: f64 = job_kinds
            .iter()
            .zip(&weights)
            .map(|(k, w)| {
                w / total_w * (k.max_hours - k.min_hours) / (k.max_hours / k.min_hours).ln()
            })
            .sum();
        let (load, steady, burst_every) = match workload.arrivals {
            Arrivals::Steady { load } => (load, 1.0, f64::INFINITY),
            Arrivals::Bursty {
                load,
                steady_fraction,
                every_hours,
            } => (load, steady_fraction, every_hours),
        };
        let per_hour = load * nodes.len() as f64 / mean_hours;
        let mut arrival_times = Vec::new();
        let mut t = T0 as f64;
        loop {
            t += exp(&mut rng, HOUR as f64 / (per_hour * steady).max(1e-9));
            if t >= end as f64 {
                break;
            }
            arrival_times.push(t as i64);
        }
        if burst_every.is_finite() {
            let per_burst = (per_hour * (1.0 - steady) * burst_every).round() as usize;
            let mut b = T0 as f64 + burst_every * HOUR as f64 / 2.0;
            while b < end as f64 {
                for _ in 0..per_burst {
                    arrival_times.push(b as i64 + rng.random_range(0..600));
                }
                b += burst_every * HOUR as f64;
            }
        }
        arrival_times.sort_unstable();

        // A job's needs depend only on its kind. Counted on each node's own values, so which
        // jobs are scarce does not depend on the index's buckets.
        let capable_by_kind: Vec<u64> = job_kinds
            .iter()
            .map(|kind| capable_nodes(&nodes, kind))
            .collect();
        let scarce_limit = (config.scarce_fraction * nodes.len() as f64) as u64;
        let jobs = arrival_times
            .iter()
            .enumerate()
            .map(|(i, &at)| {
                let k = pick_weighted(&mut rng, &weights);
                let kind = &job_kinds[k];
                let work_secs =
                    (log_uniform(&mut rng, kind.min_hours, kind.max_hours) * HOUR as f64) as i64;
                let deadline = (rng.random::<f64>() < workload.deadline_fraction)
                    .then(|| at + (work_secs as f64 * rng.random_range(1.2..2.5)) as i64 + HOUR);
                // Most owners accept the going rate of capable hardware; some bid low.
                let max_price = if rng.random::<f64>() < 0.05 {
                    rng.random_range(5..=40) * USDC / 100
                } else {
                    4 * USDC
                };
                let job = Job {
                    id: JobId(i as u64),
                    hardware: kind.hardware.clone(),
                    checkpoint: CheckpointPolicy {
                        size_bytes: kind.checkpoint_gib << 30,
                        interval_secs: kind.interval_secs,
                        keep_checkpoints: 2,
                    },
                    terms: Terms {
                        max_price_per_gpu_hour: max_price,
                        deadline_unix: deadline,
                        submitted_unix: at,
                        recovering_from: None,
                    },
                };
                let scarce = capable_by_kind[k] <= scarce_limit;
                SimJobSpec {
                    job,
                    kind: k,
                    work_secs,
                    scarce,
                }
            })
            .collect();
        Self {
            nodes,
            node_mtbf_days,
            jobs,
            incidents,
            kinds: job_kinds,
            end,
        }
    }
}

fn capable_nodes(nodes: &[Node], kind: &JobKind) -> u64 {
    let checkpoint = CheckpointPolicy {
        size_bytes: kind.checkpoint_gib << 30,
        interval_secs: kind.interval_secs,
        keep_checkpoints: 2,
    };
    let Ok(needs) = Needs::of(&kind.hardware, &checkpoint) else {
        return 0;
    };
    nodes.iter().filter(|n| needs.admits(n)).count() as u64
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
}

struct Sim<'w> {
    world: &'w World,
    config: &'w SimConfig,
    fleet: FleetIndex,
    state: Vec<JobState>,
    generation: Vec<u32>,
    progress: Vec<i64>,
    recovering_from: Vec<Option<NodeId>>,
    first_start: Vec<Option<i64>>,
    completed_at: Vec<Option<i64>>,
    node_job: Vec<Option<usize>>,
    node_generation: Vec<u32>,
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
        first_start: vec![None; n_jobs],
        completed_at: vec![None; n_jobs],
        node_job: vec![None; world.nodes.len()],
        node_generation: vec![0; world.nodes.len()],
        queue: Vec::new(),
        events: BinaryHeap::new(),
        recent: VecDeque::new(),
        report: SimReport {
            policy: policy.name().to_string(),
            workload: workload.name.to_string(),
            submitted: n_jobs,
            completed: 0,
            completed_gpu_hours: 0.0,
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
            job_interruptions: 0,
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
            if self.dirty {
                self.plan(policy, now);
                self.dirty = false;
            }
            now += self.config.tick_secs;
        }
    }

    fn node_mut(&mut self, node: usize, f: impl FnOnce(&mut Node)) {
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
                    n.status = NodeStatus::Available;
                    n.consecutive_failures = 0;
                });
            }
            Event::NodeUp { node, generation } => {
                if self.node_generation[node] != generation {
                    return;
                }
                self.node_mut(node, |n| n.status = NodeStatus::Available);
            }
            Event::FailureDetected {
                job,
                generation,
                node,
            } => {
                if self.generation[job] != generation {
                    return;
                }
                self.state[job] = JobState::Queued;
                self.recovering_from[job] = Some(NodeId(node as u64));
                self.queue.push(job);
                self.dirty = true;
            }
        }
    }

    /// The job on `node` loses everything since its last checkpoint.
    fn interrupt(&mut self, node: usize, at: i64) {
        let Some(job) = self.node_job[node].take() else {
            return;
        };
        let JobState::Running { compute_from, .. } = self.state[job] else {
            return;
        };
        let spec = &self.world.jobs[job];
        let interval = spec.job.checkpoint.interval_secs as i64;
        let ran = (at - compute_from).max(0);
        let saved = ran / interval * interval;
        self.progress[job] = (self.progress[job] + saved).min(spec.work_secs);
        let lost = (ran - saved) as f64 * spec.job.hardware.gpu_count as f64 / HOUR as f64;
        self.report.wasted_gpu_hours += lost;
        self.report.job_interruptions += 1;
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

    fn incident(&mut self, incident: Incident) {
        let node = incident.node;
        let at = incident.at;
        let status = self
            .fleet
            .node(NodeId(node as u64))
            .expect("known node")
            .status;
        if status == NodeStatus::Offline {
            return;
        }
        let down_for = match incident.kind {
            IncidentKind::Crash { repair_secs } => {
                self.report.node_crashes += 1;
                repair_secs
            }
            IncidentKind::Partition { secs } => {
                // Shorter than the heartbeat timeout: nobody notices, the job goes on.
                if secs <= self.config.heartbeat_timeout_secs {
                    return;
                }
                self.report.partitions += 1;
                secs
            }
        };
        self.interrupt(node, at);
        self.node_generation[node] += 1;
        let generation = self.node_generation[node];
        self.node_mut(node, |n| {
            n.status = NodeStatus::Offline;
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
        let jobs: Vec<Job> = self
            .queue
            .iter()
            .map(|&j| {
                let mut job = self.world.jobs[j].job.clone();
                job.terms.recovering_from = self.recovering_from[j];
                job
            })
            .collect();
        let plan = policy.plan(
            &self.fleet,
            &PlanRequest::new(&jobs, now).with_expected(&expected),
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
            self.node_mut(node, |n| n.status = NodeStatus::Busy);
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
            if self.completed_at[j].is_some() {
                self.report.completed += 1;
                self.report.completed_gpu_hours +=
                    spec.work_secs as f64 * spec.job.hardware.gpu_count as f64 / HOUR as f64;
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
