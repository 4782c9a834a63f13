//! Hard requirements, reduced to what a node's hardware class must offer.

use mcjs_spec::checkpoint::{required_free_bytes, required_write_mibps};
use mcjs_spec::gpu::{allow_list_admits, is_normalized, normalize_model};
use crate::types::{CheckpointPolicy, HardwareRequirements, Node};
use serde::{Deserialize, Serialize};
use std::fmt;

const MIB: u128 = 1 << 20;
const GIB: u128 = 1 << 30;

/// Everything about a node that placement compares against requirements. Nodes with equal
/// profiles are interchangeable for matching, so matching runs once per class, not per node.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct HardwareClass {
    pub gpu_count: u8,
    pub vram_per_gpu_mib: u32,
    pub compute_capability: u16,
    pub gpu_model: String,
    pub driver: (u32, u32),
    pub cpu_cores: u16,
    pub ram_mib: u32,
    pub disk_free_gib: u32,
    pub checkpoint_write_mibps: u32,
    pub bandwidth_stable: bool,
}

impl HardwareClass {
    pub fn of(node: &Node) -> Self {
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
        let checkpoint_rate =
            u128::from(required_write_mibps(size, u64::from(ckpt.interval_secs)));
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
        })
    }

    /// Bit i set = requirement `Requirement::ORDER[i]` is not met by the class.
    pub fn unmet(&self, c: &HardwareClass) -> u16 {
        let checks = [
            c.gpu_count >= self.gpu_count,
            allow_list_admits(&self.gpu_models, &c.gpu_model),
            c.vram_per_gpu_mib >= self.min_vram_mib,
            c.compute_capability >= self.min_compute_capability,
            self.min_driver.is_none_or(|d| c.driver >= d),
            c.cpu_cores >= self.min_cpu_cores,
            c.ram_mib >= self.min_ram_mib,
            c.disk_free_gib as u128 * GIB >= self.min_disk_bytes,
            c.checkpoint_write_mibps as u128 >= self.min_write_mibps,
            c.bandwidth_stable || !self.needs_stable_bandwidth,
        ];
        checks
            .iter()
            .enumerate()
            .fold(0, |mask, (i, ok)| if *ok { mask } else { mask | (1 << i) })
    }

    /// The requirement behind the lowest set bit of an `unmet` mask.
    pub fn requirement(&self, mask: u16) -> Option<Requirement> {
        let bit = (0..10).find(|i| mask & (1 << i) != 0)?;
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
            _ => Requirement::StableBandwidth,
        })
    }
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
        }
    }
}
