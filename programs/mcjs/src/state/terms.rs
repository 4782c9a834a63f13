//! What a job asks for and agrees to (its hardware requirements and its
//! terms: interval, duration, deadline, price, restart budget), the bounds
//! the program holds them to, and what they cost.

use anchor_lang::prelude::*;

use crate::errors::McjsError;
use crate::state::node::{HardwareProfile, MAX_GPU_MODEL_LEN};

pub const MAX_GPU_MODELS: usize = 4;
pub const SECONDS_PER_HOUR: u64 = 3_600;

/// The shortest checkpoint interval a job may declare (the Job
/// Specification's floor, `mcjs_spec::MIN_CHECKPOINT_INTERVAL_SECS`, held
/// on chain too): the liveness window that lets anyone report a job is a
/// few intervals, so an owner who submitted a shorter one directly could
/// have its providers reported seconds after they were assigned.
pub const MIN_CHECKPOINT_INTERVAL_SECS: u32 = 60;

/// How long an assigned job may stage its inputs, on top of its liveness
/// window, before anyone but the scheduler may report it: the scheduler,
/// which hears the agent staging, judges a node that never starts by its
/// own start timeout (10 minutes by default, and never more than this).
pub const STAGING_GRACE_SECS: i64 = 3_600;

/// The compact hardware summary of a Job Specification that the program enforces.
#[derive(AnchorSerialize, AnchorDeserialize, Clone, Debug, PartialEq, Eq, InitSpace)]
pub struct JobRequirements {
    pub gpu_count: u8,
    pub min_vram_mib: u32,
    /// major*10+minor.
    pub min_compute_capability: u16,
    /// Normalised model names; empty allows any model. An entry allows a
    /// model equal to it or starting with it followed by `-`.
    #[max_len(MAX_GPU_MODELS, MAX_GPU_MODEL_LEN)]
    pub gpu_models: Vec<String>,
    pub min_checkpoint_write_mibps: u32,
    /// Only a node whose standing proof has every one of its GPUs attested
    /// by NVIDIA (`Node::all_gpus_attested`), whether or not the Config
    /// requires proven hardware.
    pub attested: bool,
}

#[derive(AnchorSerialize, AnchorDeserialize, Clone, Copy, Debug, PartialEq, Eq, InitSpace)]
pub struct JobTerms {
    pub checkpoint_interval_secs: u32,
    pub max_duration_secs: u32,
    pub deadline: Option<i64>,
    /// USDC base units per GPU-hour.
    pub max_price_per_gpu_hour: u64,
    pub restart_budget: u8,
}

impl JobRequirements {
    pub fn validate(&self) -> Result<()> {
        require!(self.gpu_count >= 1, McjsError::InvalidGpuCount);
        require!(
            self.gpu_models.len() <= MAX_GPU_MODELS
                && self
                    .gpu_models
                    .iter()
                    .all(|m| !m.is_empty() && m.len() <= MAX_GPU_MODEL_LEN),
            McjsError::InvalidGpuModelList
        );
        Ok(())
    }

    /// Checks a node's registered hardware against these requirements.
    pub fn check(&self, hw: &HardwareProfile) -> Result<()> {
        require!(hw.gpu_count >= self.gpu_count, McjsError::NodeTooFewGpus);
        require!(
            hw.vram_per_gpu_mib >= self.min_vram_mib,
            McjsError::NodeVramTooSmall
        );
        require!(
            hw.compute_capability >= self.min_compute_capability,
            McjsError::NodeComputeCapabilityTooLow
        );
        require!(
            self.gpu_models.is_empty()
                || self
                    .gpu_models
                    .iter()
                    .any(|allowed| model_matches(allowed, &hw.gpu_model)),
            McjsError::NodeGpuModelNotAllowed
        );
        require!(
            hw.checkpoint_write_mibps >= self.min_checkpoint_write_mibps,
            McjsError::NodeCheckpointBandwidthTooLow
        );
        Ok(())
    }
}

/// `a100` allows `a100-sxm4-80gb`; `a100-80gb` does not.
pub fn model_matches(allowed: &str, model: &str) -> bool {
    model == allowed
        || (model.len() > allowed.len()
            && model.starts_with(allowed)
            && model.as_bytes()[allowed.len()] == b'-')
}

impl JobTerms {
    pub fn validate(&self, now: i64) -> Result<()> {
        require!(
            self.checkpoint_interval_secs >= MIN_CHECKPOINT_INTERVAL_SECS
                && self.checkpoint_interval_secs <= self.max_duration_secs,
            McjsError::InvalidCheckpointInterval
        );
        require!(self.max_price_per_gpu_hour > 0, McjsError::InvalidMaxPrice);
        if let Some(deadline) = self.deadline {
            require!(deadline > now, McjsError::DeadlineInPast);
        }
        Ok(())
    }

    /// Longest time one attestation may bill: the liveness window.
    pub fn billing_window_secs(&self, liveness_factor: u8) -> Result<u64> {
        u64::from(self.checkpoint_interval_secs)
            .checked_mul(u64::from(liveness_factor))
            .ok_or_else(|| error!(McjsError::Overflow))
    }
}

/// `rate_per_hour × secs / 3600`, rounded down.
pub fn cost_of(rate_per_hour: u64, secs: u64) -> Result<u64> {
    let cost = u128::from(rate_per_hour)
        .checked_mul(u128::from(secs))
        .ok_or(McjsError::Overflow)?
        / u128::from(SECONDS_PER_HOUR);
    u64::try_from(cost).map_err(|_| error!(McjsError::Overflow))
}

/// The bond a job must hold to be queued: one checkpoint interval at its maximum price.
pub fn minimum_bond(req: &JobRequirements, terms: &JobTerms) -> Result<u64> {
    let rate = terms
        .max_price_per_gpu_hour
        .checked_mul(u64::from(req.gpu_count))
        .ok_or(McjsError::Overflow)?;
    Ok(cost_of(rate, u64::from(terms.checkpoint_interval_secs))?.max(1))
}
