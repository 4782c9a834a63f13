//! One event per transition. Auditors rebuild a job's history from these,
//! as they appear in the transaction logs (`Program data: ...`).

use anchor_lang::prelude::*;

use crate::instructions::CheckerStep;
use crate::state::{
    ChallengeSizing, ChallengeStep, ChallengeVerdict, CheckpointRecord, ConfigParams,
    ConfigSnapshot, FailureCause, FirstRound, GpuAttestation, HardwareProfile, NodeStatus, Party,
    PauseReason, SlotDraw, VerificationOutcome, VerificationState,
};

#[event]
pub struct ConfigInitialized {
    pub admin: Pubkey,
    pub scheduler: Pubkey,
    pub usdc_mint: Pubkey,
    pub treasury: Pubkey,
    pub insurance_pool: Pubkey,
    pub params: ConfigParams,
}

/// A scheduler took the lease: from now on only it assigns, reports and
/// opens verifications.
#[event]
pub struct LeaseTaken {
    pub holder: Pubkey,
    pub previous: Pubkey,
    pub term: u64,
    pub ended_term: u64,
    pub slot: u64,
    pub at: i64,
}

/// The admin named the standby schedulers and the lease's length.
#[event]
pub struct SchedulersSet {
    pub scheduler: Pubkey,
    pub standbys: Vec<Pubkey>,
    pub lease_slots: u64,
}

#[event]
pub struct ConfigUpdated {
    pub old: ConfigSnapshot,
    pub new: ConfigSnapshot,
}

#[event]
pub struct ProviderRegistered {
    pub provider: Pubkey,
    pub owner: Pubkey,
    pub payout: Pubkey,
    pub stake: u64,
}

#[event]
pub struct StakeAdded {
    pub provider: Pubkey,
    pub amount: u64,
    pub stake: u64,
}

#[event]
pub struct WithdrawalRequested {
    pub provider: Pubkey,
    pub amount: u64,
    pub available_at: i64,
}

#[event]
pub struct StakeWithdrawn {
    pub provider: Pubkey,
    pub amount: u64,
    pub stake: u64,
    /// Tokens sent into the vault from outside its bookkeeping, returned with it.
    pub swept: u64,
}

#[event]
pub struct NodeRegistered {
    pub node: Pubkey,
    pub provider: Pubkey,
    pub index: u32,
    pub operator: Pubkey,
    pub hardware: HardwareProfile,
    pub readiness: u8,
    pub price_per_gpu_hour: u64,
}

#[event]
pub struct NodeUpdated {
    pub node: Pubkey,
    /// The operator key before and after (equal unless rotated).
    pub old_operator: Pubkey,
    pub operator: Pubkey,
    pub by: Pubkey,
    pub hardware: HardwareProfile,
    pub readiness: u8,
    pub price_per_gpu_hour: u64,
}

#[event]
pub struct NodeStatusChanged {
    pub node: Pubkey,
    pub old: NodeStatus,
    pub new: NodeStatus,
}

#[event]
pub struct JobSubmitted {
    pub job: Pubkey,
    pub owner: Pubkey,
    pub job_id: u64,
    pub spec_hash: [u8; 32],
    pub bond: u64,
    pub at: i64,
}

#[event]
pub struct JobAssigned {
    pub job: Pubkey,
    pub node: Pubkey,
    pub provider: Pubkey,
    pub generation: u32,
    pub rate_per_hour: u64,
    pub by: Pubkey,
    pub at: i64,
}

#[event]
pub struct JobStarted {
    pub job: Pubkey,
    pub node: Pubkey,
    pub generation: u32,
    pub by: Pubkey,
    pub at: i64,
}

#[event]
pub struct CheckpointAttested {
    pub job: Pubkey,
    pub node: Pubkey,
    pub generation: u32,
    pub epoch: u32,
    pub step: u64,
    pub checkpoint_hash: [u8; 32],
    /// The hash chain after this attestation.
    pub chain: [u8; 32],
    pub accrued: u64,
    pub by: Pubkey,
    pub at: i64,
}

/// A job left a node and the node's provider was paid for attested progress.
#[event]
pub struct SegmentSettled {
    pub job: Pubkey,
    pub provider: Pubkey,
    pub generation: u32,
    pub provider_amount: u64,
    pub commission: u64,
}

#[event]
pub struct JobCompleted {
    pub job: Pubkey,
    pub node: Pubkey,
    pub generation: u32,
    pub output_hash: [u8; 32],
    pub refund: u64,
    pub by: Pubkey,
    pub at: i64,
}

/// A verified job's node attested its output (`complete_job`'s first
/// call): the run's last interval, `interval`, open to the draw; the job
/// completes with a later call.
#[event]
pub struct OutputAttested {
    pub job: Pubkey,
    pub node: Pubkey,
    pub generation: u32,
    pub output_hash: [u8; 32],
    pub interval: u32,
    pub by: Pubkey,
    pub at: i64,
}

#[event]
pub struct FailureReported {
    pub job: Pubkey,
    pub node: Pubkey,
    pub provider: Pubkey,
    /// The generation that failed; the job now carries the next one.
    pub failed_generation: u32,
    pub cause: FailureCause,
    pub slashed: u64,
    /// Where the slash went: the insurance pool.
    pub slashed_to: Pubkey,
    pub restarts_used: u8,
    /// True when the restart budget was spent and the job ended Failed.
    pub job_failed: bool,
    pub refund: u64,
    pub by: Pubkey,
    pub at: i64,
}

#[event]
pub struct JobPaused {
    pub job: Pubkey,
    pub generation: u32,
    pub reason: PauseReason,
    pub by: Pubkey,
    pub at: i64,
}

#[event]
pub struct JobResumed {
    pub job: Pubkey,
    pub by: Pubkey,
    pub at: i64,
}

#[event]
pub struct BondToppedUp {
    pub job: Pubkey,
    pub amount: u64,
    pub bond: u64,
    pub by: Pubkey,
    pub at: i64,
}

#[event]
pub struct JobCancelled {
    pub job: Pubkey,
    pub refund: u64,
    pub by: Pubkey,
    pub at: i64,
}

#[event]
pub struct JobExpired {
    pub job: Pubkey,
    pub refund: u64,
    pub by: Pubkey,
    pub at: i64,
}

#[event]
pub struct JobClosed {
    pub job: Pubkey,
    pub by: Pubkey,
    /// Tokens sent into the vault from outside its bookkeeping, returned to the owner.
    pub swept: u64,
}

#[event]
pub struct OwnerCompensated {
    pub job: Pubkey,
    pub owner_token: Pubkey,
    pub amount: u64,
    /// Compensated over the job's life, at most what its owner paid.
    pub compensated: u64,
    pub pool_balance: u64,
    pub by: Pubkey,
}

/// Emits an event into the transaction log.
///
/// On SBF this is Anchor's `emit!`. Off chain (the native build that the
/// tests and the local chain run), Anchor's log functions print to stdout,
/// so the event goes through the syscall stubs, which the host routes into
/// the transaction's log collector.
pub fn emit_event<E: anchor_lang::Event>(event: E) {
    #[cfg(target_os = "solana")]
    anchor_lang::solana_program::log::sol_log_data(&[&event.data()]);
    #[cfg(not(target_os = "solana"))]
    anchor_lang::compat::solana_sysvar::program_stubs::sol_log_data(&[&event.data()]);
}

/// A verified job left a node: its provider's payment is held until `release_at`.
#[event]
pub struct SegmentHeld {
    pub job: Pubkey,
    pub segment: Pubkey,
    pub provider: Pubkey,
    pub generation: u32,
    pub gross: u64,
    pub release_at: i64,
}

/// A held segment was paid (or closed after a refund).
#[event]
pub struct SegmentReleased {
    pub job: Pubkey,
    pub segment: Pubkey,
    pub provider: Pubkey,
    pub generation: u32,
    pub provider_amount: u64,
    pub commission: u64,
    pub refunded: bool,
    pub by: Pubkey,
    pub at: i64,
}

/// The scheduler challenged a node's claimed hardware.
#[event]
pub struct ChallengeRequested {
    pub node: Pubkey,
    /// The claim challenged.
    pub hardware: HardwareProfile,
    pub sizing: ChallengeSizing,
    pub requested_slot: u64,
    pub at: i64,
}

/// A node answered a step of its challenge; the program drew the seed it
/// answered.
#[event]
pub struct ChallengeAnswered {
    pub node: Pubkey,
    pub step: ChallengeStep,
    pub seed_slot: u64,
    pub seed: [u8; 32],
    pub requested_slot: u64,
    pub at: i64,
}

/// The checker's verdict on a challenge, with everything needed to judge
/// the opening again: the sizing, each seed, each answer and the times.
#[event]
pub struct ChallengeRecorded {
    pub node: Pubkey,
    pub verdict: ChallengeVerdict,
    pub sizing: ChallengeSizing,
    pub requested_slot: u64,
    pub seed: Option<SlotDraw>,
    pub commitment: Option<[u8; 32]>,
    pub held_seed: Option<SlotDraw>,
    pub held_digest: Option<[u8; 32]>,
    pub open_seed: Option<SlotDraw>,
    pub commit_secs: Option<u32>,
    pub held_secs: Option<u32>,
    pub at: i64,
    /// What NVIDIA's attestation proved of the node's GPUs (a pass only).
    pub attestation: Option<GpuAttestation>,
}

/// A challenge whose verdict came after the slot hash that draws its
/// opening left the SlotHashes sysvar (about 512 slots after the held
/// digest): nobody can judge it, so it proves and fails nothing, and the
/// node may take jobs and challenges again. The checker's lateness is no
/// fault of the node.
#[event]
pub struct ChallengeLapsed {
    pub node: Pubkey,
    pub requested_slot: u64,
    /// The slot that recorded the held digest, whose successor's hash is gone.
    pub held_slot: u64,
    pub at: i64,
}

/// An attested interval was drawn and handed to a verifier and a referee.
#[event]
pub struct VerificationOpened {
    pub job: Pubkey,
    pub verification: Pubkey,
    pub interval: u32,
    pub provider: Pubkey,
    pub from_step: Option<u64>,
    pub to_step: u64,
    pub claimed_hash: [u8; 32],
    pub verifier_node: Pubkey,
    pub referee_node: Pubkey,
    pub draw_slot: u64,
    pub at: i64,
}

/// A checker that had not sealed its answer by half the challenge window
/// was replaced; the window started again.
#[event]
pub struct CheckerReplaced {
    pub job: Pubkey,
    pub verification: Pubkey,
    pub interval: u32,
    pub role: Party,
    pub replaced_node: Pubkey,
    pub node: Pubkey,
    pub replacements: u8,
    pub at: i64,
}

/// A disputed check went to its second round: two fresh checkers, a fresh
/// possession key and window.
#[event]
pub struct SecondRoundOpened {
    pub job: Pubkey,
    pub verification: Pubkey,
    pub interval: u32,
    pub first_round: FirstRound,
    pub verifier_node: Pubkey,
    pub referee_node: Pubkey,
    pub at: i64,
}

/// A verifier or referee sealed its answer, or revealed it.
#[event]
pub struct VerificationAttested {
    pub job: Pubkey,
    pub verification: Pubkey,
    pub interval: u32,
    pub node: Pubkey,
    pub answer: CheckerStep,
    pub state: VerificationState,
    pub at: i64,
}

/// A verification's consequences were applied.
#[event]
pub struct VerificationResolved {
    pub job: Pubkey,
    pub verification: Pubkey,
    pub interval: u32,
    pub outcome: VerificationOutcome,
    /// The slashed Provider account, if any, and how much went to the pool.
    pub slashed_provider: Option<Pubkey>,
    pub slashed: u64,
    pub fees: u64,
    /// Paid back to the owner: the wrong segment.
    pub refund: u64,
    /// The job went back to `restore_point` (none: its start).
    pub rolled_back: bool,
    pub restore_point: Option<CheckpointRecord>,
    pub by: Pubkey,
    pub at: i64,
}

/// A first-round checker was proven wrong by the second round of its check
/// (it revealed a checkpoint the second round's two checkers did not
/// reproduce) and slashed, all of it to the insurance pool.
#[event]
pub struct CheckerSlashed {
    pub job: Pubkey,
    pub verification: Pubkey,
    pub interval: u32,
    /// The slashed Provider account and the seat it held in the first round.
    pub provider: Pubkey,
    pub role: Party,
    pub amount: u64,
    pub at: i64,
}
