use anchor_lang::prelude::*;

use crate::errors::McjsError;
use crate::state::{ChallengeRecord, JobRequirements};

pub const MAX_GPU_MODEL_LEN: usize = 32;
/// Bounds a registered profile must fall within: beyond them a value is a
/// typo or an attack on whoever reads the fleet, not hardware. The program's
/// copy of `mcjs_spec::node_limits` (the scheduler skips nodes outside
/// those), held equal by a test; the program also refuses zeros.
pub const MAX_GPU_COUNT: u8 = 16;
pub const MAX_VRAM_PER_GPU_MIB: u32 = 1 << 20;
pub const MIN_COMPUTE_CAPABILITY: u16 = 10;
pub const MAX_COMPUTE_CAPABILITY: u16 = 999;
pub const MAX_RAM_MIB: u32 = 64 << 20;
pub const MAX_DISK_GIB: u32 = 1 << 20;
pub const MAX_CHECKPOINT_WRITE_MIBPS: u32 = 1 << 20;
pub const MAX_READINESS: u8 = 100;

/// A GPU host of a provider, with the hardware profile its HAL measured.
#[account]
#[derive(InitSpace, Debug)]
pub struct Node {
    /// The Provider account (not its owner's wallet).
    pub provider: Pubkey,
    pub index: u32,
    /// The node's operator key: what its agent signs with. It may start,
    /// attest and complete the node's jobs and report the node's status and
    /// measured profile; it can never move the provider's money. Set and
    /// rotated by the provider's wallet.
    pub operator: Pubkey,
    pub hardware: HardwareProfile,
    /// HAL readiness score, 0 to 100.
    pub readiness: u8,
    /// USDC base units per GPU-hour.
    pub price_per_gpu_hour: u64,
    pub status: NodeStatus,
    pub status_since: i64,
    pub current_job: Option<Pubkey>,
    pub bump: u8,
    /// The node's record, kept by the program as jobs leave it: how many
    /// assignments ended by the provider's fault (a failure of an
    /// infrastructure cause, or a check that proved its attestation
    /// wrong) ...
    pub failures: u32,
    /// ... and the seconds it held jobs (each assignment's time from
    /// assignment to removal; idle time is not counted). The scheduler's
    /// reliability-aware placement reads both from the account.
    pub service_secs: u64,
    /// The hardware challenge: the one in flight, and what the last one
    /// proved (state/challenge.rs).
    pub challenge: ChallengeRecord,
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
    /// What every reader of the fleet may rely on: a normalised model name,
    /// at least one GPU, and sizes within [the bounds](MAX_GPU_COUNT).
    pub fn validate(&self) -> Result<()> {
        require!(
            is_normalized_model(&self.gpu_model),
            McjsError::InvalidGpuModel
        );
        require!(
            (1..=MAX_GPU_COUNT).contains(&self.gpu_count)
                && (1..=MAX_VRAM_PER_GPU_MIB).contains(&self.vram_per_gpu_mib)
                && (MIN_COMPUTE_CAPABILITY..=MAX_COMPUTE_CAPABILITY)
                    .contains(&self.compute_capability)
                && self.cpu_cores >= 1
                && (1..=MAX_RAM_MIB).contains(&self.ram_mib)
                && self.disk_gib <= MAX_DISK_GIB
                && self.checkpoint_write_mibps <= MAX_CHECKPOINT_WRITE_MIBPS,
            McjsError::InvalidHardwareProfile
        );
        Ok(())
    }
}

/// The program's copy of the GPU model rule (`mcjs_spec::gpu::normalize_model`
/// owns it off chain; a test checks that the two agree): 1 to
/// [`MAX_GPU_MODEL_LEN`] bytes of `a-z`, `0-9`, `.`, `+` and `-`, starting
/// and ending with a letter or digit, with no `--`. Every such name is a
/// fixed point of the off-chain normalisation.
pub fn is_normalized_model(model: &str) -> bool {
    let bytes = model.as_bytes();
    let allowed = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-.+".contains(b);
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            bytes.len() <= MAX_GPU_MODEL_LEN
                && bytes.iter().all(allowed)
                && first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && !model.contains("--")
        }
        _ => false,
    }
}

/// An operator key is a key of its own: set, and never the wallet that owns
/// the stake (the whole point is that the machine never holds that one).
pub fn require_operator_apart(operator: &Pubkey, provider_owner: &Pubkey) -> Result<()> {
    require!(
        *operator != Pubkey::default() && operator != provider_owner,
        McjsError::InvalidOperator
    );
    Ok(())
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
    /// Whether `key` may act as this node: its operator key.
    pub fn is_operator(&self, key: &Pubkey) -> bool {
        self.operator == *key
    }

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
        // Counters saturate rather than fail: a full counter must never
        // keep a job from leaving its node.
        let served = u64::try_from(now.saturating_sub(self.status_since)).unwrap_or(0);
        self.service_secs = self.service_secs.saturating_add(served);
        if !healthy {
            self.failures = self.failures.saturating_add(1);
        }
        self.current_job = None;
        self.status = if healthy {
            NodeStatus::Available
        } else {
            NodeStatus::Offline
        };
        self.status_since = now;
        Ok(())
    }

    /// Whether the node's proven class admits a job with `requirements`,
    /// when the Config requires proven hardware: a job that names a GPU
    /// model or a memory floor goes only to a node whose profile a passed
    /// challenge proved; an unproven node is of the lowest class, for jobs
    /// that name neither.
    pub fn require_proven_class(&self, requirements: &JobRequirements) -> Result<()> {
        let asks_class = !requirements.gpu_models.is_empty() || requirements.min_vram_mib > 0;
        if !asks_class {
            return Ok(());
        }
        let proven = self.challenge.proven.ok_or(McjsError::UnprovenHardware)?;
        require!(
            proven.vram_per_gpu_mib >= requirements.min_vram_mib
                && proven.gpu_count >= requirements.gpu_count,
            McjsError::UnprovenHardware
        );
        Ok(())
    }

    /// Whether the node's standing proof records NVIDIA's attestation of
    /// every one of its GPUs (each a card no other node's proof held when
    /// it was recorded).
    pub fn all_gpus_attested(&self) -> bool {
        self.challenge.proven.is_some_and(|proven| {
            proven.gpu_count > 0
                && proven
                    .attestation
                    .is_some_and(|a| a.attested() == proven.gpu_count)
        })
    }

    /// A job that asks for attested hardware goes only to a node whose
    /// every GPU is attested (the proof is of the node's current profile,
    /// whose GPU count `JobRequirements::check` holds to the job's); any
    /// other job to any node. Checked whatever the Config requires: the
    /// user asked.
    pub fn require_attested(&self, requirements: &JobRequirements) -> Result<()> {
        require!(
            !requirements.attested || self.all_gpus_attested(),
            McjsError::UnattestedHardware
        );
        Ok(())
    }

    /// A new profile is a new claim: the old proof and any challenge of the
    /// old claim are void.
    pub fn set_hardware(&mut self, hardware: HardwareProfile) {
        if hardware != self.hardware {
            self.challenge.proven = None;
            self.challenge.in_flight = None;
            // Not yet challenged as this claim: the scheduler challenges it next.
            self.challenge.last = None;
        }
        self.hardware = hardware;
    }

    pub fn invariant(&self) -> Result<()> {
        self.hardware.validate()?;
        require!(self.readiness <= MAX_READINESS, McjsError::InvalidReadiness);
        require!(
            self.operator != Pubkey::default(),
            McjsError::InvalidOperator
        );
        require!(
            (self.status == NodeStatus::Busy) == self.current_job.is_some(),
            McjsError::InvalidNodeStatus
        );
        Ok(())
    }
}
