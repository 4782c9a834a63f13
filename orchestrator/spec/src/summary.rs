//! What other components read from a validated spec: the requirement summary the chain
//! stores, the terms the escrow enforces, and the full hardware request the scheduler matches.

use serde::Serialize;

use crate::fields::DottedVersion;
use crate::gpu::ComputeCapability;
use crate::spec::JobSpec;
use crate::validate::min_write_mibps;

/// The hard requirements, exactly as the on-chain `Job` account holds them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RequirementSummary {
    pub gpu_count: u8,
    /// 0 when the spec sets no minimum.
    pub min_vram_mib: u32,
    /// sm number (8.0 -> 80); 0 when the spec sets no minimum.
    pub min_compute_capability: u16,
    /// Normalised, at most 4, each at most 32 bytes; empty: any model.
    pub gpu_models: Vec<String>,
    /// `crate::checkpoint::required_write_mibps(max_checkpoint_size, interval)`.
    pub min_checkpoint_write_mibps: u32,
    /// Only nodes whose every GPU is attested by NVIDIA.
    pub attested: bool,
}

/// The money and time terms of the job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JobTerms {
    pub checkpoint_interval_secs: u32,
    /// The fixed length, or the limit of an until-done run.
    pub max_duration_secs: u32,
    pub deadline_unix: Option<i64>,
    /// USDC base units (6 decimals).
    pub max_price_per_gpu_hour: u64,
    pub restart_budget: u8,
    pub target_epochs: Option<u32>,
}

/// The whole hardware request, for the off-chain scheduler.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HardwareRequest {
    pub gpu_count: u8,
    pub gpu_models: Vec<String>,
    pub min_vram_mib: Option<u32>,
    pub min_compute_capability: Option<ComputeCapability>,
    pub min_driver_version: Option<DottedVersion>,
    pub min_cuda_version: Option<DottedVersion>,
    pub cpu_cores: u16,
    pub ram_mib: u32,
    pub disk_gib: u32,
    /// Free disk the node needs for checkpoints alone: max_size × (keep + 1).
    pub checkpoint_disk_bytes: u64,
    pub min_checkpoint_write_mibps: u32,
    pub attested: bool,
}

fn clamp_u32(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

impl JobSpec {
    /// The on-chain requirement summary. Exact for a spec that validates; out-of-range values
    /// of an invalid spec saturate.
    pub fn requirement_summary(&self) -> RequirementSummary {
        let h = &self.request.hardware;
        RequirementSummary {
            gpu_count: h.gpu_count,
            min_vram_mib: h.min_vram_per_gpu.map_or(0, |v| clamp_u32(v.mib_ceil())),
            min_compute_capability: h.min_compute_capability.map_or(0, |c| c.sm()),
            gpu_models: h.gpu_models.iter().map(|m| m.to_string()).collect(),
            min_checkpoint_write_mibps: clamp_u32(min_write_mibps(
                self.checkpoint.max_size,
                self.checkpoint.interval,
            )),
            attested: h.attested,
        }
    }

    /// The job's terms. Exact for a spec that validates; out-of-range values saturate.
    pub fn terms(&self) -> JobTerms {
        JobTerms {
            checkpoint_interval_secs: clamp_u32(self.checkpoint.interval.secs()),
            max_duration_secs: clamp_u32(self.request.duration.max().secs()),
            deadline_unix: self.request.deadline.map(|d| d.unix()),
            max_price_per_gpu_hour: self.request.max_price_per_gpu_hour.0,
            restart_budget: self.checkpoint.restart_budget,
            target_epochs: self.work.target_epochs,
        }
    }

    /// The full hardware request.
    pub fn hardware_request(&self) -> HardwareRequest {
        let h = &self.request.hardware;
        let summary = self.requirement_summary();
        HardwareRequest {
            gpu_count: h.gpu_count,
            gpu_models: summary.gpu_models,
            min_vram_mib: h.min_vram_per_gpu.map(|v| clamp_u32(v.mib_ceil())),
            min_compute_capability: h.min_compute_capability,
            min_driver_version: h.min_driver_version.clone(),
            min_cuda_version: h.min_cuda_version.clone(),
            cpu_cores: h.cpu_cores,
            ram_mib: clamp_u32(h.ram.mib_ceil()),
            disk_gib: clamp_u32(h.disk.gib_ceil()),
            checkpoint_disk_bytes: u64::try_from(crate::checkpoint::required_free_bytes(
                self.checkpoint.max_size.0,
                u32::from(self.checkpoint.keep),
            ))
            .unwrap_or(u64::MAX),
            min_checkpoint_write_mibps: summary.min_checkpoint_write_mibps,
            attested: summary.attested,
        }
    }
}
