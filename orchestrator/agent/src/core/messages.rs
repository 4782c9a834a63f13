//! What the core is told (the chain's view of a job, containers found,
//! how one ended, checkpoints stored, events) and what it asks the shell to
//! do ([`Action`], [`Tx`]).

use mcjs_client::ix::JobAccounts;
use mcjs_client::{Pubkey, pda};
use mcjs_protocol::StopReason;
use mcjs_runtime::checkpoint::Sha256Digest;
use serde::Serialize;
use std::time::{Duration, SystemTime};

/// Where a job assigned to this node stands on chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChainState {
    Assigned,
    Running,
}

/// The chain's record of an attested checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct AttestedCheckpoint {
    pub epoch: u32,
    pub step: u64,
    pub hash: Sha256Digest,
    pub generation: u32,
}

/// One job the chain says is on this node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainJob {
    pub key: Pubkey,
    pub generation: u32,
    pub state: ChainState,
    pub spec_hash: [u8; 32],
    pub last_checkpoint: Option<AttestedCheckpoint>,
    pub checkpoint_interval: Duration,
    /// The GPUs the job asks for (its paid run holds them on this node).
    pub gpus: u32,
    /// A verified job: its spec fixes the checkpoint steps (verification is
    /// refused without `checkpoint.every_steps`), so it is never signalled
    /// to checkpoint. A signal only its paid runs received would tell the
    /// job which runs are checks.
    pub verified: bool,
    /// What a newly attested checkpoint lets go of in the store.
    pub keep: Keep,
    /// The job has been billed its whole maximum duration (`Job::at_cap`):
    /// nothing more of its work is paid or attested, so it is stopped.
    pub at_cap: bool,
    /// What an instruction on the assignment names besides its signer (the
    /// node's accounts, the owner's refund account, a verified job's
    /// Segment), at the chain's generation.
    pub accounts: JobAccounts,
    /// The earliest chain time (Unix seconds) at which an attestation may
    /// exhaust the job's bond and pause it, so must name the settlement
    /// accounts; `None` when none may.
    pub bond_exhaustible_from: Option<i64>,
    /// A completion sent now attests the job's output rather than completing
    /// it: a verified job's first (`Job::attest_output`).
    pub completion_attests_output: bool,
}

impl ChainJob {
    /// The chain's newest checkpoint if this assignment attested it: what
    /// an attestation must go past. A label attested by an earlier
    /// assignment binds nothing (the program orders labels within an
    /// assignment only), so one made up by a provider that left cannot
    /// make this one's checkpoints look old.
    pub fn chain_last(&self) -> Option<(u32, u64)> {
        self.last_checkpoint
            .filter(|c| c.generation == self.generation)
            .map(|c| (c.epoch, c.step))
    }

    /// The accounts of the job's assignment at `generation`: the chain's, or
    /// an earlier one's (which names its own generation and Segment) for a
    /// transaction the chain has since moved past.
    pub fn accounts_at(&self, generation: u32) -> JobAccounts {
        JobAccounts {
            generation,
            segment: self
                .accounts
                .segment
                .map(|_| pda::segment(&self.key, generation)),
            ..self.accounts
        }
    }

    /// Whether an attestation sent at `now` may exhaust the job's bond, the
    /// chain's clock taken [`CHAIN_CLOCK_AHEAD`] ahead of this machine's.
    pub fn attestation_may_exhaust_bond(&self, now: SystemTime) -> bool {
        let now = now
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        self.bond_exhaustible_from
            .is_some_and(|from| now.saturating_add(CHAIN_CLOCK_AHEAD) >= from)
    }
}

/// How far ahead of this machine's clock the chain's may be, in seconds, when
/// the agent asks whether an attestation may exhaust a bond.
pub const CHAIN_CLOCK_AHEAD: i64 = 60;

/// Which stored checkpoints a job still needs once a newer one is attested.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// Only what is attested: everything older than the newest attested
    /// checkpoint goes.
    Attested,
    /// A verified job's checkers restore an interval's start: everything
    /// from the previous attested checkpoint (`None`: there is none, keep
    /// everything) on stays, and so does its restore floor
    /// (`Job::restore_floor`, by hash): where a lie found in the latest
    /// interval sends the job back, however old.
    FromPrevious {
        previous: Option<u64>,
        floor: Option<Sha256Digest>,
    },
    /// A check of the job is open: nothing goes.
    Everything,
}

impl Keep {
    /// Up to which step an attestation at `step` lets older checkpoints go.
    pub fn prune_below(self, step: u64) -> Option<u64> {
        match self {
            Keep::Attested => Some(step),
            Keep::FromPrevious { previous, .. } => previous.map(|p| p.min(step)),
            Keep::Everything => None,
        }
    }

    /// The checkpoint kept whatever its age.
    pub fn floor(self) -> Option<Sha256Digest> {
        match self {
            Keep::FromPrevious { floor, .. } => floor,
            Keep::Attested | Keep::Everything => None,
        }
    }
}

/// A job container found on the engine when the agent starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundContainer {
    pub id: String,
    pub job: Pubkey,
    pub generation: u32,
    pub running: bool,
}

/// How a container ended, as the shell saw it: facts only. The core turns
/// them into a [`StopReason`]; the table in `mcjs_protocol::fault` says who
/// pays.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ContainerExit {
    pub code: i64,
    /// The kernel killed it for exceeding its memory limit (the job's own).
    pub oom_killed: bool,
    /// The engine could not say how it ended (it lost the container).
    pub engine_lost: bool,
    pub last_logs: Vec<String>,
}

impl ContainerExit {
    /// Why the job stopped. The agent stops a container only when the chain
    /// has fenced its assignment (and then nothing is reported), so every
    /// exit seen here is one the agent did not cause: the job's own, whatever
    /// its code, unless the engine lost the container.
    pub fn stop_reason(&self) -> StopReason {
        if self.engine_lost {
            StopReason::EngineFailure
        } else if self.oom_killed {
            StopReason::OutOfMemory
        } else {
            StopReason::Exited { code: self.code }
        }
    }
}

/// Why a job stopped on this node and what it last said.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Exit {
    pub stop: StopReason,
    pub last_logs: Vec<String>,
}

/// A checkpoint stored in the checkpoint store, ready to attest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct UploadedCheckpoint {
    pub epoch: u32,
    pub step: u64,
    pub hash: Sha256Digest,
}

/// What went wrong with a chain transaction, for the error policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxFailure {
    pub message: String,
    /// Worth sending again (unreachable node, timeout); a refusal by the
    /// program is not: the next chain snapshot says what changed.
    pub retryable: bool,
    /// The program's error, by name, when it refused the transaction.
    pub program_error: Option<String>,
}

impl TxFailure {
    /// Whether to send the transaction again after a pause: a failure on
    /// the way, or a refusal that time clears (a verified job's draw gap,
    /// a completion waiting on a check).
    pub fn worth_retrying(&self) -> bool {
        self.retryable
            || matches!(
                self.program_error.as_deref(),
                Some("AttestationTooSoon" | "VerificationOpen" | OUTPUT_ATTESTED)
            )
    }
}

/// Not a refusal: a verified job's first completion attested its output,
/// and the completion is sent again until the job completes (the shell's
/// answer to [`Tx::Complete`] then).
pub const OUTPUT_ATTESTED: &str = "OutputAttested";

/// A chain transaction of a job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "tx", rename_all = "snake_case")]
pub enum Tx {
    Start,
    Attest {
        epoch: u32,
        step: u64,
        hash: Sha256Digest,
    },
    Complete {
        output_hash: Sha256Digest,
    },
}

/// What the shell reports back. Every event names the job and generation it
/// is about; events of a generation the core no longer tracks are ignored.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// Data staged and verified, checkpoint restored, container running.
    Launched {
        container: String,
    },
    /// An input's hash did not match: the job must not start.
    DataRejected {
        reason: String,
    },
    /// Preparation failed for another reason (no usable checkpoint, the
    /// engine refused, the spec is not in the store); `stop` says which.
    LaunchFailed {
        stop: StopReason,
        reason: String,
    },
    /// A look at the checkpoint directory finished; these were stored.
    CheckpointsCollected {
        stored: Vec<UploadedCheckpoint>,
    },
    /// A look at the checkpoint directory failed (an invalid checkpoint).
    CollectFailed {
        reason: String,
    },
    /// The running job broke the contract or its limits (a symlink or
    /// special file where the agent reads, a checkpoint or output over its
    /// caps, more disk than it declared): it is stopped, as its own fault.
    JobFault {
        reason: String,
    },
    SignalSent,
    Exited(ContainerExit),
    /// The declared output is present, hashed and stored.
    OutputStored {
        hash: Sha256Digest,
    },
    /// Exit 0 without the declared output, or the output could not be stored.
    OutputMissing {
        reason: String,
    },
    TxConfirmed(Tx),
    TxFailed {
        tx: Tx,
        failure: TxFailure,
    },
    /// The container is gone (stopped after fencing, or removed after exit).
    Removed,
}

/// What the core asks the shell to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Fetch and verify the spec, stage and verify the data, restore the
    /// last attested checkpoint if any, and start the container.
    Launch {
        job: Pubkey,
        generation: u32,
        restore: Option<AttestedCheckpoint>,
    },
    /// Look for complete checkpoints: hash, store, report.
    Collect { job: Pubkey, generation: u32 },
    /// Ask the job to checkpoint now.
    SignalCheckpoint {
        job: Pubkey,
        generation: u32,
        container: String,
    },
    /// Hash and store the declared output.
    CollectOutput { job: Pubkey, generation: u32 },
    /// Delete the job's stored checkpoints below `below` (an attested
    /// checkpoint superseded them), all but the one hashing to `floor`.
    Prune {
        job: Pubkey,
        generation: u32,
        below: u64,
        floor: Option<Sha256Digest>,
    },
    Send {
        job: Pubkey,
        generation: u32,
        tx: Tx,
    },
    /// Stop and remove the container at once.
    Stop {
        job: Pubkey,
        generation: u32,
        container: String,
    },
    /// Remove an exited container (its report is kept).
    Remove {
        job: Pubkey,
        generation: u32,
        container: String,
    },
    /// Remove a container that belongs to no job of this node; with `run`,
    /// the run's directory too (no current assignment uses it).
    RemoveStray {
        container: String,
        run: Option<(Pubkey, u32)>,
    },
    /// The job missed its checkpoint deadline: metric, log, heartbeat.
    FlagOverdue {
        job: Pubkey,
        generation: u32,
        late_by: Duration,
    },
}
