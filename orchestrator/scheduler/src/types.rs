//! The placement core's own inputs. The daemon converts chain accounts, job specifications and
//! HAL profiles into these, so the core builds and tests without any of them.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A node as the scheduler knows it (the daemon maps chain addresses to these numbers).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct NodeId(pub u64);

/// A job as the scheduler knows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct JobId(pub u64);

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "node-{}", self.0)
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "job-{}", self.0)
    }
}

/// Hardware a job needs: the on-chain requirement summary plus the off-chain extras.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct HardwareRequirements {
    pub gpu_count: u8,
    pub min_vram_mib: u32,
    /// "sm" number: major * 10 + minor (3.7 -> 37).
    pub min_compute_capability: u16,
    /// Normalised allow-list; empty admits any model.
    pub gpu_models: Vec<String>,
    pub min_checkpoint_write_mibps: u32,
    pub min_cpu_cores: u16,
    pub min_ram_mib: u32,
    pub min_disk_gib: u32,
    pub min_driver: Option<(u32, u32)>,
    /// Only nodes whose every GPU is attested by NVIDIA (the on-chain `attested`).
    pub attested: bool,
}

/// How the job checkpoints; decides which nodes can keep up with it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CheckpointPolicy {
    pub size_bytes: u64,
    pub interval_secs: u32,
    pub keep_checkpoints: u8,
}

/// What the owner pays and when the job is wanted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Terms {
    /// USDC base units (6 decimals) per GPU-hour.
    pub max_price_per_gpu_hour: u64,
    pub deadline_unix: Option<i64>,
    pub submitted_unix: i64,
    /// The node that just failed this job, when it is back in the queue after a failure.
    pub recovering_from: Option<NodeId>,
}

/// A queued job, as placement sees it (the program's `Job` is its account).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueuedJob {
    pub id: JobId,
    pub hardware: HardwareRequirements,
    pub checkpoint: CheckpointPolicy,
    pub terms: Terms,
}

/// Whether a fleet node can take a job now (the placement's view; the
/// program's `NodeStatus` is what its provider declared on chain).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum NodeAvailability {
    Available,
    Busy,
    Offline,
}

/// A node with its measured profile, readiness and current state, as
/// placement sees it (the program's `Node` is its account).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetNode {
    pub id: NodeId,
    /// Normalised model name.
    pub gpu_model: String,
    pub gpu_count: u8,
    pub vram_per_gpu_mib: u32,
    pub compute_capability: u16,
    pub driver: (u32, u32),
    pub cpu_cores: u16,
    pub ram_mib: u32,
    pub disk_free_gib: u32,
    /// Sustained fsync'd write bandwidth.
    pub checkpoint_write_mibps: u32,
    /// Coefficient of variation of the bandwidth samples <= 0.25.
    pub bandwidth_stable: bool,
    /// Every GPU attested by NVIDIA at the node's standing hardware challenge.
    pub attested: bool,
    /// HAL readiness score, 0..=100.
    pub readiness: u8,
    pub price_per_gpu_hour: u64,
    pub status: NodeAvailability,
    pub last_failure_unix: Option<i64>,
    pub consecutive_failures: u32,
}

/// Jobs likely to arrive soon with a given requirement profile (from recent arrivals), so that
/// scarce hardware is not handed to flexible jobs just before the jobs that need it come in.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExpectedDemand {
    pub hardware: HardwareRequirements,
    pub checkpoint: CheckpointPolicy,
    /// Expected number of such jobs over the planning horizon.
    pub jobs: f64,
}

/// Tunables shared by every policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlacementConfig {
    /// Back-off after a node's first failure; doubles with each consecutive failure.
    pub failure_backoff_base_secs: i64,
    pub failure_backoff_max_secs: i64,
    /// A deadline closer than this makes a job urgent: urgent jobs go first, by deadline.
    pub urgent_within_secs: i64,
    /// After waiting this long a job may use hardware held for scarcer jobs, so holds never
    /// starve anyone.
    pub max_hold_secs: i64,
    /// Whether a job prefers the nodes most likely to survive its expected duration, and how
    /// that is weighed against scarcity. Off by default.
    #[serde(default)]
    pub reliability: ReliabilityWeighing,
}

/// Reliability-aware placement (docs/scheduler.md, "Reliability-aware placement"): among the
/// capable classes as lightly loaded as the first that can take a job (within
/// `load_slack_percent`), the job takes the node most likely to run its expected duration
/// without failing, estimated from each node's record
/// ([`crate::plan::reliability::survival_probability`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReliabilityWeighing {
    pub enabled: bool,
    /// How much more loaded (demand per node, from jobs that could use it) than the first
    /// usable class another class may be and still be searched for a more reliable node:
    /// reliability never moves a job onto hardware that scarcer jobs depend on markedly more.
    pub load_slack_percent: u32,
    /// The weight of the fleet prior, in hours of service: a node's own record outweighs it
    /// once its hours in service pass this.
    pub prior_weight_hours: u32,
    /// 0: a job takes the node most likely to survive it. Otherwise a job takes the least
    /// reliable node that still survives it with at least this probability (in percent), and
    /// the most reliable only when none does: short jobs leave the reliable nodes to long ones.
    pub survival_target_percent: u32,
}

impl Default for ReliabilityWeighing {
    fn default() -> Self {
        Self {
            enabled: false,
            load_slack_percent: 10,
            prior_weight_hours: 168,
            survival_target_percent: 0,
        }
    }
}

impl Default for PlacementConfig {
    fn default() -> Self {
        Self {
            failure_backoff_base_secs: 600,
            failure_backoff_max_secs: 24 * 3600,
            urgent_within_secs: 24 * 3600,
            max_hold_secs: 2 * 3600,
            reliability: ReliabilityWeighing::default(),
        }
    }
}

impl PlacementConfig {
    /// When a node that failed may take work again, or `None` when it is not backing off.
    pub fn retry_at(&self, node: &FleetNode) -> Option<i64> {
        let last = node.last_failure_unix?;
        if node.consecutive_failures == 0 {
            return None;
        }
        let doublings = (node.consecutive_failures - 1).min(32);
        let backoff = self
            .failure_backoff_base_secs
            .saturating_mul(1i64 << doublings)
            .min(self.failure_backoff_max_secs);
        Some(last.saturating_add(backoff))
    }

    pub fn backing_off(&self, node: &FleetNode, now_unix: i64) -> bool {
        self.retry_at(node).is_some_and(|t| now_unix < t)
    }
}
