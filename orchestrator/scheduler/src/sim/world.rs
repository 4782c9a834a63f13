//! The drawn world: nodes, job arrivals and node incidents, drawn from the
//! seed before a run so that every policy faces the same events.

use super::{
    Arrivals, DAY, HOUR, JobKind, SimConfig, T0, USDC, Workload, standard_job_kinds, standard_kinds,
};
use crate::requirements::Needs;
use crate::types::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The drawn world: nodes, arrivals and node incidents, shared by every policy.
#[derive(Clone, Debug)]
pub struct World {
    pub nodes: Vec<FleetNode>,
    /// Each node's mean time between crashes: its kind's, divided by its failure scale.
    pub node_mtbf_days: Vec<f64>,
    /// How much more often than its kind's average each node fails (crashes, partitions and
    /// power cuts alike): log-normal with mean 1 (see [`failure_scales`]).
    pub node_failure_scale: Vec<f64>,
    /// Whether each node sits behind a UPS that it reads (a power cut then costs a job at most
    /// one checkpoint write).
    pub node_ups: Vec<bool>,
    /// What the chain recorded of each node before the run: failures and hours in service.
    pub node_history: Vec<(u32, f64)>,
    pub jobs: Vec<SimJobSpec>,
    pub incidents: Vec<Incident>,
    pub kinds: Vec<JobKind>,
    pub end: i64,
}

#[derive(Clone, Debug)]
pub struct SimJobSpec {
    pub job: QueuedJob,
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
    Crash {
        repair_secs: i64,
    },
    Partition {
        secs: i64,
    },
    /// The site loses power for `secs`; what the job on the node loses depends on its UPS.
    PowerCut {
        secs: i64,
    },
}

/// Each node's failure scale: log-normal with mean 1, `exp(sigma * z - sigma^2 / 2)` for a
/// standard normal `z` (Box–Muller), so that the fleet fails as often on average as its kinds'
/// rates say while most nodes fail less and a few much more. `sigma = 0` gives every node its
/// kind's rate.
pub fn failure_scales(rng: &mut ChaCha8Rng, nodes: usize, sigma: f64) -> Vec<f64> {
    (0..nodes)
        .map(|_| {
            if sigma <= 0.0 {
                return 1.0;
            }
            let u1 = 1.0 - rng.random::<f64>();
            let u2 = rng.random::<f64>();
            let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
            (sigma * z - sigma * sigma / 2.0).exp()
        })
        .collect()
}

/// How often a node fails in a way the chain records (it goes offline and any job on it
/// leaves): crashes, partitions longer than the heartbeat timeout, power cuts. Per day.
fn recorded_failures_per_day(config: &SimConfig, mtbf_days: f64, scale: f64) -> f64 {
    let partitions_noticed = config.partitions_per_node_day
        * (-(config.heartbeat_timeout_secs as f64) / config.partition_mean_secs.max(1e-9)).exp();
    scale * (1.0 / mtbf_days + partitions_noticed + config.power_cuts_per_node_day)
}

/// Draws with a given mean count of events: a Poisson draw by counting exponential gaps.
fn poisson(rng: &mut ChaCha8Rng, mean: f64) -> u32 {
    let mut count = 0;
    let mut t = exp(rng, 1.0);
    while t < mean && count < 100_000 {
        count += 1;
        t += exp(rng, 1.0);
    }
    count
}

/// Replaces each node's nominal measured values by what a HAL would report on a real fleet:
/// checkpoint write bandwidth within ±30% of the kind's, 30–100% of the disk free, and RAM a
/// few hundred MiB under nominal (firmware and kernel reservations differ per machine).
///
/// Drawn from a stream of its own, so that the rest of the world (arrivals, crashes, prices)
/// is the same with or without variation and quality can be compared on one seed.
pub fn measure(nodes: &mut [FleetNode], seed: u64) {
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
        let nodes: Vec<FleetNode> = kind_of_node
            .iter()
            .enumerate()
            .map(|(i, &k)| {
                let kind = &kinds[k];
                FleetNode {
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
                    attested: false,
                    readiness: rng.random_range(60..=100),
                    // Providers price around the going rate of their hardware.
                    price_per_gpu_hour: kind.price_per_gpu_hour
                        + rng.random_range(0..=kind.price_per_gpu_hour / 5),
                    status: NodeAvailability::Available,
                    last_failure_unix: None,
                    consecutive_failures: 0,
                }
            })
            .collect();
        let mut nodes = nodes;
        if config.measured_variation {
            measure(&mut nodes, config.seed);
        }
        // Reliability (failure scales, UPS, power cuts, history before the run) comes from a
        // stream of its own: with the spread at 0 and no power cuts the rest of the world is
        // the same as without it.
        let mut site_rng = ChaCha8Rng::seed_from_u64(config.seed ^ 0x7265_6c69_6162_6c65);
        let node_failure_scale = failure_scales(
            &mut site_rng,
            kind_of_node.len(),
            config.failure_spread_sigma,
        );
        let node_ups: Vec<bool> = (0..kind_of_node.len())
            .map(|_| site_rng.random::<f64>() < config.ups_fraction)
            .collect();
        let node_mtbf_days: Vec<f64> = kind_of_node
            .iter()
            .zip(&node_failure_scale)
            .map(|(&k, scale)| kinds[k].mtbf_days / scale)
            .collect();
        let node_history: Vec<(u32, f64)> = kind_of_node
            .iter()
            .zip(&node_failure_scale)
            .map(|(&k, &scale)| {
                let age_days = site_rng.random::<f64>() * config.history_max_days.max(0.0);
                let per_day = recorded_failures_per_day(config, kinds[k].mtbf_days, scale);
                (poisson(&mut site_rng, per_day * age_days), age_days * 24.0)
            })
            .collect();

        let mut incidents = Vec::new();
        for (node, mtbf) in node_mtbf_days.iter().enumerate() {
            if config.power_cuts_per_node_day > 0.0 {
                let rate = config.power_cuts_per_node_day * node_failure_scale[node];
                let mut t = T0 as f64;
                loop {
                    t += exp(&mut site_rng, DAY as f64 / rate);
                    if t >= end as f64 {
                        break;
                    }
                    let secs = exp(&mut site_rng, config.power_cut_mean_hours * HOUR as f64);
                    incidents.push(Incident {
                        at: t as i64,
                        node,
                        kind: IncidentKind::PowerCut {
                            secs: (secs as i64).max(300),
                        },
                    });
                }
            }
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
                    DAY as f64
                        / (config.partitions_per_node_day * node_failure_scale[node]).max(1e-9),
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
                let job = QueuedJob {
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
            node_failure_scale,
            node_ups,
            node_history,
            jobs,
            incidents,
            kinds: job_kinds,
            end,
        }
    }
}

fn capable_nodes(nodes: &[FleetNode], kind: &JobKind) -> u64 {
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
