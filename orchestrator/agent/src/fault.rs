//! Who caused what the agent's work ran into. A job owner controls every
//! byte the job writes and every data URI it declares; whatever of that
//! breaks the contract or a limit ends the job as its own fault (no slash),
//! and only the node's own failures are the provider's. Every such decision
//! of the shell is made here, in one place.

use crate::core::Event;
use mcjs_runtime::checkpoint::MAX_FILES;
use mcjs_runtime::confined::{ConfinedDir, Limits};
use mcjs_runtime::staging::StagingError;
use mcjs_runtime::store::StoreError;
use mcjs_spec::JobSpec;
use std::path::Path;

/// A failure met while working for a job, before it is classified.
#[derive(Debug)]
pub enum Found<'a> {
    /// Collecting its checkpoints failed.
    Checkpoint(&'a StoreError),
    /// Staging its inputs failed.
    Staging(&'a StagingError),
    /// It uses more disk than it declared.
    Footprint(String),
}

/// The event the core is told: the job's own fault, or the node's.
pub fn classify(found: Found<'_>) -> Event {
    match found {
        Found::Checkpoint(e) if e.is_job_fault() => Event::JobFault {
            reason: format!("checkpoint refused: {e}"),
        },
        Found::Checkpoint(e) => Event::CollectFailed {
            reason: e.to_string(),
        },
        Found::Staging(e) if e.is_job_fault() => Event::DataRejected {
            reason: e.to_string(),
        },
        Found::Staging(e) => Event::LaunchFailed {
            reason: e.to_string(),
        },
        Found::Footprint(reason) => Event::JobFault { reason },
    }
}

/// Caps of one checkpoint: its declared `max_size` and [`MAX_FILES`].
pub fn checkpoint_limits(spec: &JobSpec) -> Limits {
    Limits {
        max_entries: MAX_FILES,
        max_bytes: spec.checkpoint.max_size.0,
    }
}

/// Caps of the output: the declared disk and [`MAX_FILES`].
pub fn output_limits(spec: &JobSpec) -> Limits {
    Limits {
        max_entries: MAX_FILES,
        max_bytes: spec.request.hardware.disk.0,
    }
}

/// The most bytes staged for one input: its declared size, never more
/// than the job's declared disk.
pub fn input_limit(spec: &JobSpec, declared: Option<u64>) -> u64 {
    let disk = spec.request.hardware.disk.0;
    declared.map_or(disk, |d| d.min(disk))
}

/// Measures what the job wrote into its checkpoint and output directories
/// (confined, bounded walks); says why if it is over the declared disk.
pub fn footprint(job_dir: &Path, spec: &JobSpec) -> Option<String> {
    let disk = spec.request.hardware.disk.0;
    // Entries of both directories together: more than this is over the
    // limits anyway, and keeps the walk short.
    let max_entries = 4 * MAX_FILES;
    let mut used = 0u64;
    for sub in ["checkpoints", "output"] {
        let dir = match ConfinedDir::open(&job_dir.join(sub)) {
            Ok(d) => d,
            Err(_) => continue, // not there yet: nothing written
        };
        match dir.usage("", max_entries) {
            Ok(w) => used = used.saturating_add(w.allocated),
            Err(e) if e.is_job_fault() => {
                return Some(format!("its {sub} directory cannot be measured: {e}"));
            }
            Err(e) => {
                tracing::warn!(dir = %job_dir.join(sub).display(), error = %e, "cannot measure the job's disk use");
            }
        }
    }
    (used > disk).then(|| {
        format!(
            "uses {used} bytes of disk in its checkpoint and output directories, over its declared disk of {disk} bytes"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_checkpoint_is_the_jobs_fault_a_store_failure_is_not() {
        let refused = StoreError::Checkpoint(
            mcjs_runtime::confined::ConfinedError::Refused {
                path: "c/state.bin".into(),
                reason: "is or passes through a symlink".into(),
            }
            .into(),
        );
        assert!(matches!(
            classify(Found::Checkpoint(&refused)),
            Event::JobFault { .. }
        ));
        let store = StoreError::Join("the store is down".into());
        assert!(matches!(
            classify(Found::Checkpoint(&store)),
            Event::CollectFailed { .. }
        ));
    }

    #[test]
    fn refused_inputs_are_rejected_data_a_full_disk_is_the_nodes() {
        let refused = StagingError::Refused {
            index: 0,
            name: "x".into(),
            reason: "not under an allowed data root".into(),
        };
        assert!(matches!(
            classify(Found::Staging(&refused)),
            Event::DataRejected { .. }
        ));
        let disk = StagingError::Io {
            action: "write",
            path: "/cache".into(),
            source: std::io::Error::from_raw_os_error(28),
        };
        assert!(matches!(
            classify(Found::Staging(&disk)),
            Event::LaunchFailed { .. }
        ));
    }
}
