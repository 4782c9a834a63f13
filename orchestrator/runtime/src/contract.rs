//! Names and paths of the job contract (docs/job-contract.md), in one place.

pub const ENV_DATA_DIR: &str = "MCJS_DATA_DIR";
pub const ENV_CHECKPOINT_DIR: &str = "MCJS_CHECKPOINT_DIR";
pub const ENV_OUTPUT_DIR: &str = "MCJS_OUTPUT_DIR";
pub const ENV_RESTORE_DIR: &str = "MCJS_RESTORE_DIR";
pub const ENV_CHECKPOINT_INTERVAL_SECS: &str = "MCJS_CHECKPOINT_INTERVAL_SECS";
pub const ENV_CHECKPOINT_SIGNAL: &str = "MCJS_CHECKPOINT_SIGNAL";
pub const ENV_JOB_ID: &str = "MCJS_JOB_ID";
/// Set when the spec fixes the checkpoint steps (every verified job): the
/// job checkpoints at every multiple of this step count and at no other
/// step, in paid runs and check runs alike.
pub const ENV_CHECKPOINT_EVERY_STEPS: &str = "MCJS_CHECKPOINT_EVERY_STEPS";
/// Where the job may append its progress, one JSON object per line
/// (`{"step": 120, "loss": 0.41}`): the node ships each line to the job's
/// owner beside its printed lines (`mcjs job metrics`, `mcjs job watch`).
pub const ENV_METRICS_FILE: &str = "MCJS_METRICS_FILE";

pub const CONTAINER_DATA_DIR: &str = "/mcjs/data";
pub const CONTAINER_CHECKPOINT_DIR: &str = "/mcjs/checkpoints";
pub const CONTAINER_OUTPUT_DIR: &str = "/mcjs/output";
pub const CONTAINER_RESTORE_DIR: &str = "/mcjs/restore";
pub const CONTAINER_METRICS_DIR: &str = "/mcjs/metrics";
/// The metrics file's name in [`CONTAINER_METRICS_DIR`].
pub const METRICS_FILE: &str = "metrics.jsonl";

/// The file whose presence marks a checkpoint directory complete.
pub const MANIFEST_FILE: &str = "mcjs-manifest.json";
pub const MANIFEST_FORMAT: &str = "mcjs-checkpoint/1";
/// Domain separator and version of the checkpoint hash.
pub const CHECKPOINT_HASH_HEADER: &str = "mcjs-checkpoint-hash/1\n";

/// The signal that asks a job to checkpoint now.
pub const CHECKPOINT_SIGNAL: &str = "SIGUSR1";
/// The user a job runs as unless its spec says otherwise.
pub const DEFAULT_USER: &str = "65532:65532";

/// The job finished and its output is complete.
pub const EXIT_DONE: i64 = 0;
/// The job's input or configuration is invalid: retrying cannot help.
pub const EXIT_BAD_INPUT: i64 = 2;
/// The job checkpointed on SIGTERM and stopped; it resumes from that checkpoint.
pub const EXIT_PREEMPTED: i64 = 75;

/// What an exit code means under the contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ExitMeaning {
    Done,
    BadInput,
    Preempted,
    Crashed,
}

impl ExitMeaning {
    pub fn of(code: i64) -> Self {
        match code {
            EXIT_DONE => Self::Done,
            EXIT_BAD_INPUT => Self::BadInput,
            EXIT_PREEMPTED => Self::Preempted,
            _ => Self::Crashed,
        }
    }

    /// Whether resuming from the last checkpoint can make progress.
    pub fn can_resume(self) -> bool {
        matches!(self, Self::Preempted | Self::Crashed)
    }
}
