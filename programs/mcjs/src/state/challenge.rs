//! The hardware challenge's record on a Node (docs/hardware-challenge.md).
//!
//! The scheduler requests a challenge; the node's operator answers it in two
//! steps (the commitment, then the held digest), each drawn from the hash of
//! the first slot after the step before it landed; the scheduler, as the
//! checker (the check needs no GPU), records the verdict. The program keeps
//! the draws and the times, so that anyone can judge the same answer again
//! (`mcjs_challenge::judge`), and keeps what a passed challenge proved: the
//! class placement may rely on.

use anchor_lang::prelude::*;

use crate::errors::McjsError;
use crate::state::{slot_hash_after, MAX_GPU_COUNT};

/// The widest product a challenge may ask for (`mcjs_challenge::matrix::MAX_WIDTH`).
pub const MAX_CHALLENGE_WIDTH: u32 = 32_768;
/// Product widths are multiples of this (`mcjs_challenge::matrix::WIDTH_STEP`).
pub const CHALLENGE_WIDTH_STEP: u32 = 64;
pub const MAX_CHALLENGE_PASSES: u32 = 1_024;
pub const MAX_ROWS_OPENED: u32 = 256;
/// A scale of 2^-40 makes a claim of any size a few bytes: beyond that the
/// sizing is nonsense.
pub const MAX_MEMORY_SHIFT: u8 = 40;

/// How large a challenge is (`mcjs_challenge::Sizing`), chosen by the
/// scheduler: the node sizes its work from it and the claim, the checker
/// judges with the same.
#[derive(AnchorSerialize, AnchorDeserialize, Clone, Copy, Debug, PartialEq, Eq, InitSpace)]
pub struct ChallengeSizing {
    /// The share of the claimed memory the challenge fills, percent.
    pub fill_percent: u8,
    /// The widest product, a multiple of 64.
    pub max_width: u32,
    pub passes: u32,
    pub rows_opened: u32,
    /// The claim is sized as if its memory were `memory >> memory_shift`:
    /// 0 on a real cluster; a local cluster whose fake GPUs claim 80 GB
    /// runs the challenge at a size its CPUs can answer. A challenge with a
    /// shift proves nothing of the claim's memory, and its verdict records
    /// the shift (`ProvenHardware::memory_shift`).
    pub memory_shift: u8,
}

impl ChallengeSizing {
    pub fn validate(&self) -> Result<()> {
        require!(
            (1..=100).contains(&self.fill_percent)
                && (CHALLENGE_WIDTH_STEP..=MAX_CHALLENGE_WIDTH).contains(&self.max_width)
                && self.max_width % CHALLENGE_WIDTH_STEP == 0
                && (1..=MAX_CHALLENGE_PASSES).contains(&self.passes)
                && (1..=MAX_ROWS_OPENED).contains(&self.rows_opened)
                && self.memory_shift <= MAX_MEMORY_SHIFT,
            McjsError::InvalidChallengeSizing
        );
        Ok(())
    }
}

/// A seed the program drew: the hash of `slot`, the first slot after the
/// step before it.
#[derive(AnchorSerialize, AnchorDeserialize, Clone, Copy, Debug, PartialEq, Eq, InitSpace)]
pub struct SlotDraw {
    pub slot: u64,
    pub hash: [u8; 32],
}

impl SlotDraw {
    /// The first slot after `after` in the SlotHashes sysvar's data.
    pub fn after(slot_hashes: &[u8], after: u64) -> Result<Self> {
        let (slot, hash) = slot_hash_after(slot_hashes, after).ok_or(McjsError::DrawUnavailable)?;
        Ok(Self { slot, hash })
    }
}

/// A challenge in flight.
#[derive(AnchorSerialize, AnchorDeserialize, Clone, Copy, Debug, PartialEq, Eq, InitSpace)]
pub struct HardwareChallenge {
    pub sizing: ChallengeSizing,
    pub requested_slot: u64,
    pub requested_at: i64,
    /// The challenge seed (drawn after the request) and the node's
    /// commitment: one root over its GPUs' product roots
    /// (`mcjs_challenge::node::commitment`).
    pub commit: Option<ChallengeStepRecord>,
    /// The held seed (drawn after the commitment) and the node's held
    /// digest over its GPUs' held digests.
    pub hold: Option<ChallengeStepRecord>,
}

/// One answered step: the seed it answered, the answer, and when it landed.
#[derive(AnchorSerialize, AnchorDeserialize, Clone, Copy, Debug, PartialEq, Eq, InitSpace)]
pub struct ChallengeStepRecord {
    pub seed: SlotDraw,
    pub answer: [u8; 32],
    pub slot: u64,
    pub at: i64,
}

/// The node's two answers.
#[derive(AnchorSerialize, AnchorDeserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChallengeStep {
    Commit { commitment: [u8; 32] },
    Hold { held_digest: [u8; 32] },
}

impl HardwareChallenge {
    pub fn new(sizing: ChallengeSizing, slot: u64, now: i64) -> Self {
        Self {
            sizing,
            requested_slot: slot,
            requested_at: now,
            commit: None,
            hold: None,
        }
    }

    /// Takes a step in order, each with its seed: the hash of the first
    /// slot after the request (commit) or after the commitment landed
    /// (hold). The node could not know either before the step it answers
    /// had landed.
    pub fn answer(
        &mut self,
        step: ChallengeStep,
        slot_hashes: &[u8],
        slot: u64,
        now: i64,
    ) -> Result<ChallengeStepRecord> {
        // The slot the step's seed is drawn after, the answer, and where
        // the record goes.
        let (after, answer, kept) = match (step, self.commit, self.hold) {
            (ChallengeStep::Commit { commitment }, None, None) => {
                (self.requested_slot, commitment, &mut self.commit)
            }
            (ChallengeStep::Hold { held_digest }, Some(commit), None) => {
                (commit.slot, held_digest, &mut self.hold)
            }
            _ => return err!(McjsError::ChallengeOutOfTurn),
        };
        let record = ChallengeStepRecord {
            seed: SlotDraw::after(slot_hashes, after)?,
            answer,
            slot,
            at: now,
        };
        *kept = Some(record);
        Ok(record)
    }

    /// Seconds each phase took on the chain's clock: from the step before
    /// it landing to its own answer landing (the seed's slot is the first
    /// after that).
    pub fn phase_secs(&self) -> (Option<u32>, Option<u32>) {
        let secs = |from: i64, to: i64| u32::try_from(to.saturating_sub(from)).ok();
        let commit = self.commit.and_then(|c| secs(self.requested_at, c.at));
        let held = match (self.commit, self.hold) {
            (Some(c), Some(h)) => secs(c.at, h.at),
            _ => None,
        };
        (commit, held)
    }
}

/// Why a challenge failed (`mcjs_challenge::Failure`, by kind).
#[derive(AnchorSerialize, AnchorDeserialize, Clone, Copy, Debug, PartialEq, Eq, InitSpace)]
pub enum ChallengeFailure {
    /// A step was not answered in the scheduler's time.
    Unanswered,
    /// A phase took longer than the claimed model's bound.
    Late,
    /// The opening was missing pieces or sized wrong.
    Malformed,
    /// The held pass roots do not chain to the held digest.
    HeldChainMismatch,
    /// An opened row is not in the commitment.
    BadProof,
    /// An opened row's held leaf is not in its pass's root.
    HeldMismatch,
    /// An opened row is not its row of A·B.
    FreivaldsMismatch,
}

/// The checker's verdict on a whole node (every GPU).
#[derive(AnchorSerialize, AnchorDeserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChallengeVerdict {
    /// Every GPU answered every check within the claimed model's measured
    /// bounds; each proved it held `held_kib_per_gpu` KiB.
    Passed {
        held_kib_per_gpu: u32,
    },
    /// Every check held, but the claimed model has no measured bound: the
    /// node computes correctly and nothing is known of its speed or memory.
    Unbounded,
    Failed(ChallengeFailure),
}

/// The longest chip name an attestation records (NVIDIA's identity
/// certificates name the chip, e.g. `GH100`).
pub const MAX_CHIP_NAME: usize = 8;
/// One device id per GPU a node may have.
pub const MAX_ATTESTED_GPUS: usize = MAX_GPU_COUNT as usize;

/// What NVIDIA's attestation proved of a node's GPUs at a passed challenge,
/// as the checker verified it (`mcjs_challenge::attestation`): each GPU's
/// identity key, certified by NVIDIA's Device Identity CA, signed a report
/// over a nonce drawn from that GPU's challenge seed. It proves a genuine
/// card of the chip, and which card (its device id, unique per card); not
/// the SKU or memory, nor that the card did the work: the class is the time
/// bounds' to prove.
#[derive(AnchorSerialize, AnchorDeserialize, Clone, Copy, Debug, PartialEq, Eq, InitSpace)]
pub struct GpuAttestation {
    /// The chip the attested GPUs' certificates name, ASCII letters and
    /// digits, zero padded.
    pub chip: [u8; MAX_CHIP_NAME],
    /// Each GPU's device id in the challenge's order; 0 where the GPU's
    /// evidence was missing or refused, or its card is attested for another
    /// node.
    pub device_ids: [u64; MAX_ATTESTED_GPUS],
    /// sha256 over the attested GPUs' reports and certificate chains
    /// (`mcjs_challenge::attestation::evidence_digest`): binds the record
    /// to the evidence the checker verified.
    pub evidence: [u8; 32],
}

impl GpuAttestation {
    /// A chip name, ids only for the node's GPUs, at least one, none twice.
    pub fn validate(&self, gpu_count: u8) -> Result<()> {
        let name_len = self
            .chip
            .iter()
            .position(|b| *b == 0)
            .unwrap_or(MAX_CHIP_NAME);
        let chip_ok = name_len > 0
            && self.chip[..name_len]
                .iter()
                .all(|b| b.is_ascii_alphanumeric())
            && self.chip[name_len..].iter().all(|b| *b == 0);
        let gpus = usize::from(gpu_count).min(MAX_ATTESTED_GPUS);
        let (ours, beyond) = self.device_ids.split_at(gpus);
        // At most 16 ids: pairwise, with no allocation and no sort in the ELF.
        let twice = ours
            .iter()
            .enumerate()
            .any(|(i, id)| *id != 0 && ours[i + 1..].contains(id));
        require!(
            chip_ok && ours.iter().any(|id| *id != 0) && !twice && beyond.iter().all(|id| *id == 0),
            McjsError::InvalidAttestation
        );
        Ok(())
    }

    /// How many of the node's GPUs are attested.
    pub fn attested(&self) -> u8 {
        self.device_ids.iter().filter(|id| **id != 0).count() as u8
    }
}

/// What the node's last challenge proved, kept until its profile changes.
#[derive(AnchorSerialize, AnchorDeserialize, Clone, Copy, Debug, PartialEq, Eq, InitSpace)]
pub struct ProvenHardware {
    /// The profile's GPU count and memory per GPU when it was proven (the
    /// model is the profile's: any change of profile clears the proof).
    pub gpu_count: u8,
    pub vram_per_gpu_mib: u32,
    /// Memory each GPU proved it held, KiB (a share of the claim).
    pub held_kib_per_gpu: u32,
    /// The sizing's scale: not 0 on a local cluster only, where the
    /// challenge proves the speed of a scaled claim and nothing of memory.
    pub memory_shift: u8,
    pub commit_secs: u32,
    pub held_secs: u32,
    pub at: i64,
    /// The GPUs NVIDIA's attestation proved at this challenge, if any.
    pub attestation: Option<GpuAttestation>,
}

/// The outcome of a node's last recorded challenge.
#[derive(AnchorSerialize, AnchorDeserialize, Clone, Copy, Debug, PartialEq, Eq, InitSpace)]
pub enum ChallengeResult {
    Passed,
    Unbounded,
    Failed(ChallengeFailure),
}

impl From<ChallengeVerdict> for ChallengeResult {
    fn from(verdict: ChallengeVerdict) -> Self {
        match verdict {
            ChallengeVerdict::Passed { .. } => ChallengeResult::Passed,
            ChallengeVerdict::Unbounded => ChallengeResult::Unbounded,
            ChallengeVerdict::Failed(f) => ChallengeResult::Failed(f),
        }
    }
}

/// The node's challenge record: the one in flight, the last result, what
/// is proven, and counts.
#[derive(
    AnchorSerialize, AnchorDeserialize, Clone, Copy, Debug, Default, PartialEq, Eq, InitSpace,
)]
pub struct ChallengeRecord {
    pub in_flight: Option<HardwareChallenge>,
    pub last: Option<ChallengeResult>,
    pub last_at: i64,
    /// Set by a passed challenge, cleared by any other verdict and by any
    /// change of the hardware profile.
    pub proven: Option<ProvenHardware>,
    pub requested: u32,
    pub failed: u32,
}
