//! Hard requirements, reduced to what a node's hardware class must offer.

use crate::types::{CheckpointPolicy, FleetNode, HardwareRequirements};
use mcjs_spec::checkpoint::{required_free_bytes, required_write_mibps};
use mcjs_spec::gpu::{allow_list_admits, is_normalized, normalize_model};
use serde::{Deserialize, Serialize};
use std::fmt;

const MIB: u128 = 1 << 20;
const GIB: u128 = 1 << 30;

/// What placement compares against requirements, for a group of nodes that are
/// interchangeable for matching, so that matching runs once per class, not per node.
///
/// Discrete properties (model, GPU count, VRAM, compute capability, driver, CPU cores,
/// bandwidth stability) are exact. Measured ones (RAM, free disk, checkpoint write bandwidth)
/// differ on every real node, so a class holds the *floor* of their geometric bucket
/// ([`bucket_floor`]): every node of the class has at least that much, so a job the class
/// satisfies is satisfied by each of its nodes, and a real fleet stays a few hundred classes
/// instead of one per node. The cost: a job whose need lies between a node's floor and its
/// value does not see that node (see docs/scheduler.md).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct HardwareClass {
    pub gpu_count: u8,
    pub vram_per_gpu_mib: u32,
    pub compute_capability: u16,
    pub gpu_model: String,
    pub driver: (u32, u32),
    pub cpu_cores: u16,
    /// Bucket floor.
    pub ram_mib: u32,
    /// Bucket floor.
    pub disk_free_gib: u32,
    /// Bucket floor.
    pub checkpoint_write_mibps: u32,
    pub bandwidth_stable: bool,
    /// Every GPU attested by NVIDIA at the node's standing hardware challenge.
    pub attested: bool,
}

/// Significant bits a bucket floor keeps: two give buckets 4, 6, 8, 12, 16, 24, 32 ... (two
/// per doubling). Coarser buckets mean fewer classes, so faster matching; they cost no
/// capability (a job also sees the classes its need falls inside, node by node), only a
/// longer node scan in those classes. Three bits gave 422 classes for the simulator's 10,000
/// nodes and about twice the per-job time; two give 138.
const BUCKET_BITS: u32 = 2;

/// The floor of a measured value's geometric bucket: the value with all but its
/// `BUCKET_BITS` most significant bits cleared, values below 4 exact. The floor never exceeds
/// the value and is more than 2/3 of it.
pub fn bucket_floor(value: u32) -> u32 {
    let bits = u32::BITS - value.leading_zeros();
    if bits <= BUCKET_BITS {
        return value;
    }
    let shift = bits - BUCKET_BITS;
    (value >> shift) << shift
}

/// The largest value whose bucket floor is `floor`: the most a node of the bucket can have.
pub fn bucket_ceiling(floor: u32) -> u32 {
    let bits = u32::BITS - floor.leading_zeros();
    if bits <= BUCKET_BITS {
        return floor;
    }
    floor | ((1 << (bits - BUCKET_BITS)) - 1)
}

impl HardwareClass {
    /// The node's class: its discrete properties and the bucket floors of its measured ones.
    pub fn of(node: &FleetNode) -> Self {
        Self {
            ram_mib: bucket_floor(node.ram_mib),
            disk_free_gib: bucket_floor(node.disk_free_gib),
            checkpoint_write_mibps: bucket_floor(node.checkpoint_write_mibps),
            ..Self::exact(node)
        }
    }

    /// The class with its measured values cleared: classes that differ only in measured
    /// values form one discrete group.
    pub(crate) fn discrete(&self) -> Self {
        Self {
            ram_mib: 0,
            disk_free_gib: 0,
            checkpoint_write_mibps: 0,
            ..self.clone()
        }
    }

    /// The node's own values, unbucketed.
    pub fn exact(node: &FleetNode) -> Self {
        Self {
            gpu_count: node.gpu_count,
            vram_per_gpu_mib: node.vram_per_gpu_mib,
            compute_capability: node.compute_capability,
            gpu_model: node.gpu_model.clone(),
            driver: node.driver,
            cpu_cores: node.cpu_cores,
            ram_mib: node.ram_mib,
            disk_free_gib: node.disk_free_gib,
            checkpoint_write_mibps: node.checkpoint_write_mibps,
            bandwidth_stable: node.bandwidth_stable,
            attested: node.attested,
        }
    }

    /// The class with each measured value at its bucket's ceiling: what its best node may have.
    fn ceiling_view(&self) -> Profile<'_> {
        Profile {
            ram_mib: bucket_ceiling(self.ram_mib),
            disk_free_gib: bucket_ceiling(self.disk_free_gib),
            checkpoint_write_mibps: bucket_ceiling(self.checkpoint_write_mibps),
            ..self.view()
        }
    }

    fn view(&self) -> Profile<'_> {
        Profile {
            gpu_count: self.gpu_count,
            vram_per_gpu_mib: self.vram_per_gpu_mib,
            compute_capability: self.compute_capability,
            gpu_model: &self.gpu_model,
            driver: self.driver,
            cpu_cores: self.cpu_cores,
            ram_mib: self.ram_mib,
            disk_free_gib: self.disk_free_gib,
            checkpoint_write_mibps: self.checkpoint_write_mibps,
            bandwidth_stable: self.bandwidth_stable,
            attested: self.attested,
        }
    }
}

/// What `Needs::unmet` reads, borrowed from a class or straight from a node.
struct Profile<'a> {
    gpu_count: u8,
    vram_per_gpu_mib: u32,
    compute_capability: u16,
    gpu_model: &'a str,
    driver: (u32, u32),
    cpu_cores: u16,
    ram_mib: u32,
    disk_free_gib: u32,
    checkpoint_write_mibps: u32,
    bandwidth_stable: bool,
    attested: bool,
}

impl<'a> From<&'a FleetNode> for Profile<'a> {
    fn from(node: &'a FleetNode) -> Self {
        Self {
            gpu_count: node.gpu_count,
            vram_per_gpu_mib: node.vram_per_gpu_mib,
            compute_capability: node.compute_capability,
            gpu_model: &node.gpu_model,
            driver: node.driver,
            cpu_cores: node.cpu_cores,
            ram_mib: node.ram_mib,
            disk_free_gib: node.disk_free_gib,
            checkpoint_write_mibps: node.checkpoint_write_mibps,
            bandwidth_stable: node.bandwidth_stable,
            attested: node.attested,
        }
    }
}

impl fmt::Display for HardwareClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}x {} ({}, sm {}.{})",
            self.gpu_count,
            self.gpu_model,
            Mib(self.vram_per_gpu_mib as u128),
            self.compute_capability / 10,
            self.compute_capability % 10
        )
    }
}

/// A job's requirements with the checkpoint rule folded in; jobs with equal needs share one
/// eligibility computation.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Needs {
    pub gpu_count: u8,
    pub min_vram_mib: u32,
    pub min_compute_capability: u16,
    pub gpu_models: Vec<String>,
    pub min_driver: Option<(u32, u32)>,
    pub min_cpu_cores: u16,
    pub min_ram_mib: u32,
    /// max(min disk, checkpoint size x (kept + 1)).
    pub min_disk_bytes: u128,
    /// max(on-chain minimum, the shared checkpoint rule `mcjs_spec::checkpoint`): a checkpoint
    /// write may take at most 20% of the interval.
    pub min_write_mibps: u128,
    pub needs_stable_bandwidth: bool,
    /// Only nodes whose every GPU is attested by NVIDIA.
    pub attested: bool,
}

/// Why a job can never be placed as written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum InvalidJob {
    #[error("gpu_count is 0: a job needs at least one gpu")]
    NoGpus,
    #[error(
        "checkpoint interval is 0 s: set checkpoint_interval_secs to how often the job checkpoints"
    )]
    ZeroCheckpointInterval,
    #[error("gpu model {given:?} is not normalised: write {expected:?}")]
    ModelNotNormalised { given: String, expected: String },
}

impl Needs {
    pub fn of(hw: &HardwareRequirements, ckpt: &CheckpointPolicy) -> Result<Self, InvalidJob> {
        if hw.gpu_count == 0 {
            return Err(InvalidJob::NoGpus);
        }
        if ckpt.size_bytes > 0 && ckpt.interval_secs == 0 {
            return Err(InvalidJob::ZeroCheckpointInterval);
        }
        if let Some(bad) = hw.gpu_models.iter().find(|m| !is_normalized(m)) {
            return Err(InvalidJob::ModelNotNormalised {
                given: bad.clone(),
                expected: normalize_model(bad),
            });
        }
        let size = ckpt.size_bytes;
        let checkpoint_space = required_free_bytes(size, u32::from(ckpt.keep_checkpoints));
        let checkpoint_rate = u128::from(required_write_mibps(size, u64::from(ckpt.interval_secs)));
        let mut gpu_models = hw.gpu_models.clone();
        gpu_models.sort();
        gpu_models.dedup();
        Ok(Self {
            gpu_count: hw.gpu_count,
            min_vram_mib: hw.min_vram_mib,
            min_compute_capability: hw.min_compute_capability,
            gpu_models,
            min_driver: hw.min_driver,
            min_cpu_cores: hw.min_cpu_cores,
            min_ram_mib: hw.min_ram_mib,
            min_disk_bytes: (hw.min_disk_gib as u128 * GIB).max(checkpoint_space),
            min_write_mibps: (hw.min_checkpoint_write_mibps as u128).max(checkpoint_rate),
            needs_stable_bandwidth: size > 0 || hw.min_checkpoint_write_mibps > 0,
            attested: hw.attested,
        })
    }

    /// Bit i set = requirement `Requirement::ORDER[i]` is not met by the class.
    pub fn unmet(&self, class: &HardwareClass) -> u16 {
        self.unmet_by(&class.view())
    }

    /// The requirements that no node of the class can meet, even one at the top of each
    /// measured bucket. A class with `unmet == 0` serves the job on every node; one with only
    /// `unmet_at_best == 0` serves it on the nodes whose own values reach the need (which
    /// placement checks one by one with [`Needs::admits`]), so bucketing never hides a node
    /// that fits.
    pub fn unmet_at_best(&self, class: &HardwareClass) -> u16 {
        self.unmet_by(&class.ceiling_view())
    }

    /// Whether the node's own measured values, not its class's floors, meet every
    /// requirement: the last check before a placement is final.
    pub fn admits(&self, node: &FleetNode) -> bool {
        self.unmet_by(&Profile::from(node)) == 0
    }

    /// `unmet` restricted to the exact properties, which all classes of one discrete group
    /// share: the planner checks them once per group rather than once per class.
    pub(crate) fn unmet_discrete(&self, class: &HardwareClass) -> u16 {
        self.unmet_discrete_by(&class.view())
    }

    /// `unmet_at_best` restricted to the measured properties.
    pub(crate) fn unmet_measured_at_best(&self, class: &HardwareClass) -> u16 {
        self.unmet_measured_by(&class.ceiling_view())
    }

    fn unmet_by(&self, c: &Profile<'_>) -> u16 {
        self.unmet_discrete_by(c) | self.unmet_measured_by(c)
    }

    fn unmet_discrete_by(&self, c: &Profile<'_>) -> u16 {
        let checks = [
            (0, c.gpu_count >= self.gpu_count),
            (1, allow_list_admits(&self.gpu_models, c.gpu_model)),
            (2, c.vram_per_gpu_mib >= self.min_vram_mib),
            (3, c.compute_capability >= self.min_compute_capability),
            (4, self.min_driver.is_none_or(|d| c.driver >= d)),
            (5, c.cpu_cores >= self.min_cpu_cores),
            (9, c.bandwidth_stable || !self.needs_stable_bandwidth),
            (10, c.attested || !self.attested),
        ];
        mask_of(&checks)
    }

    fn unmet_measured_by(&self, c: &Profile<'_>) -> u16 {
        let checks = [
            (6, c.ram_mib >= self.min_ram_mib),
            (7, c.disk_free_gib as u128 * GIB >= self.min_disk_bytes),
            (8, c.checkpoint_write_mibps as u128 >= self.min_write_mibps),
        ];
        mask_of(&checks)
    }

    /// The requirement behind the lowest set bit of an `unmet` mask.
    pub fn requirement(&self, mask: u16) -> Option<Requirement> {
        let bit = (0..11).find(|i| mask & (1 << i) != 0)?;
        Some(match bit {
            0 => Requirement::GpuCount(self.gpu_count),
            1 => Requirement::GpuModel(self.gpu_models.clone()),
            2 => Requirement::VramPerGpuMib(self.min_vram_mib),
            3 => Requirement::ComputeCapability(self.min_compute_capability),
            4 => Requirement::Driver(self.min_driver.unwrap_or_default()),
            5 => Requirement::CpuCores(self.min_cpu_cores),
            6 => Requirement::RamMib(self.min_ram_mib),
            7 => Requirement::DiskBytes(self.min_disk_bytes),
            8 => Requirement::CheckpointWriteMibps(self.min_write_mibps),
            9 => Requirement::StableBandwidth,
            _ => Requirement::Attested,
        })
    }
}

/// Bit `i` set for every check `(i, false)`.
fn mask_of(checks: &[(u16, bool)]) -> u16 {
    checks.iter().fold(
        0,
        |mask, &(bit, ok)| if ok { mask } else { mask | (1 << bit) },
    )
}

/// One hard requirement, as named in an explanation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Requirement {
    GpuCount(u8),
    GpuModel(Vec<String>),
    VramPerGpuMib(u32),
    ComputeCapability(u16),
    Driver((u32, u32)),
    CpuCores(u16),
    RamMib(u32),
    DiskBytes(u128),
    CheckpointWriteMibps(u128),
    StableBandwidth,
    /// Every GPU attested by NVIDIA.
    Attested,
}

struct Mib(u128);

impl fmt::Display for Mib {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 >= 1024 && self.0.is_multiple_of(1024) {
            write!(f, "{} GiB", self.0 / 1024)
        } else {
            write!(f, "{} MiB", self.0)
        }
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::GpuCount(n) => write!(f, "{n} gpus"),
            Self::GpuModel(models) => write!(f, "a gpu model in [{}]", models.join(", ")),
            Self::VramPerGpuMib(v) => write!(f, "{} of vram per gpu", Mib(*v as u128)),
            Self::ComputeCapability(cc) => {
                write!(f, "compute capability {}.{} or newer", cc / 10, cc % 10)
            }
            Self::Driver((major, minor)) => write!(f, "driver {major}.{minor} or newer"),
            Self::CpuCores(n) => write!(f, "{n} cpu cores"),
            Self::RamMib(r) => write!(f, "{} of ram", Mib(*r as u128)),
            Self::DiskBytes(b) => write!(f, "{} of free disk", Mib(b.div_ceil(MIB))),
            Self::CheckpointWriteMibps(b) => write!(f, "{b} MiB/s of checkpoint write bandwidth"),
            Self::StableBandwidth => write!(f, "stable checkpoint write bandwidth"),
            Self::Attested => write!(f, "every gpu attested by nvidia"),
        }
    }
}
