use anchor_lang::prelude::*;

use crate::errors::McjsError;

pub const MAX_GPU_MODEL_LEN: usize = 32;

/// A GPU host of a provider, with the hardware profile its HAL measured.
#[account]
#[derive(InitSpace, Debug)]
pub struct Node {
    /// The Provider account (not its owner's wallet).
    pub provider: Pubkey,
    pub index: u32,
    pub hardware: HardwareProfile,
    /// HAL readiness score, 0 to 100.
    pub readiness: u8,
    /// USDC base units per GPU-hour.
    pub price_per_gpu_hour: u64,
    pub status: NodeStatus,
    pub status_since: i64,
    pub current_job: Option<Pubkey>,
    pub bump: u8,
}

/// The hardware a node offers, as the HAL measured it.
#[derive(AnchorSerialize, AnchorDeserialize, Clone, Debug, PartialEq, Eq, InitSpace)]
pub struct HardwareProfile {
    /// Normalised model name, e.g. `a100-sxm4-80gb`.
    #[max_len(MAX_GPU_MODEL_LEN)]
    pub gpu_model: String,
    pub gpu_count: u8,
    pub vram_per_gpu_mib: u32,
    /// CUDA compute capability as major*10+minor (3.7 is 37).
    pub compute_capability: u16,
    pub cpu_cores: u16,
    pub ram_mib: u32,
    pub disk_gib: u32,
    /// Measured sustained write bandwidth, fsync'd, to the checkpoint directory.
    pub checkpoint_write_mibps: u32,
}

impl HardwareProfile {
    pub fn validate(&self) -> Result<()> {
        require!(
            !self.gpu_model.is_empty() && self.gpu_model.len() <= MAX_GPU_MODEL_LEN,
            McjsError::InvalidGpuModel
        );
        Ok(())
    }
}

#[derive(AnchorSerialize, AnchorDeserialize, Clone, Copy, Debug, PartialEq, Eq, InitSpace)]
pub enum NodeStatus {
    Available,
    Busy,
    Offline,
}

impl NodeStatus {
    pub fn can_take_job(&self) -> bool {
        matches!(self, NodeStatus::Available)
    }
}

impl Node {
    pub fn occupy(&mut self, job: Pubkey, now: i64) -> Result<()> {
        match self.status {
            NodeStatus::Available if self.current_job.is_none() => {
                self.status = NodeStatus::Busy;
                self.status_since = now;
                self.current_job = Some(job);
                Ok(())
            }
            NodeStatus::Busy => err!(McjsError::NodeBusy),
            _ => err!(McjsError::NodeNotAvailable),
        }
    }

    /// Frees the node after a job leaves it; `healthy` false takes it offline
    /// until its provider declares it available again.
    pub fn release(&mut self, job: Pubkey, healthy: bool, now: i64) -> Result<()> {
        require!(self.current_job == Some(job), McjsError::WrongNode);
        self.current_job = None;
        self.status = if healthy {
            NodeStatus::Available
        } else {
            NodeStatus::Offline
        };
        self.status_since = now;
        Ok(())
    }

    pub fn invariant(&self) -> Result<()> {
        self.hardware.validate()?;
        require!(self.readiness <= 100, McjsError::InvalidReadiness);
        require!(
            (self.status == NodeStatus::Busy) == self.current_job.is_some(),
            McjsError::InvalidNodeStatus
        );
        Ok(())
    }
}
