//! Who caused what the agent's work ran into. A job owner controls every
//! byte the job writes and every data URI it declares; whatever of that
//! breaks the contract or a limit ends the job as its own fault (no slash),
//! and only the node's own failures are the provider's. Every such decision
//! of the shell is made here, in one place: an error becomes the
//! [`StopReason`] the agent reports, and `mcjs_protocol::fault` says who
//! pays for it.

use crate::core::Event;
use crate::spec_store::SpecStoreError;
use mcjs_protocol::StopReason;
use mcjs_runtime::checkpoint::MAX_FILES;
use mcjs_runtime::confined::ConfinedDir;
use mcjs_runtime::engine::EngineError;
use mcjs_runtime::launch::LaunchError;
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
    /// Its spec could not be read from the spec store.
    Spec(&'a SpecStoreError),
    /// Its container could not be prepared or started (staging aside).
    Launch(&'a LaunchError),
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
        // Staging is bounded by the declared sizes, so the node's own
        // storage failing it is the node's.
        Found::Staging(e) => Event::LaunchFailed {
            stop: StopReason::NodeDiskFull,
            reason: e.to_string(),
        },
        Found::Footprint(reason) => Event::JobFault { reason },
        Found::Spec(e) => Event::LaunchFailed {
            stop: spec_stop(e),
            reason: e.to_string(),
        },
        Found::Launch(e) => Event::LaunchFailed {
            stop: launch_stop(e),
            reason: e.to_string(),
        },
    }
}

fn spec_stop(e: &SpecStoreError) -> StopReason {
    match e {
        SpecStoreError::Missing { .. } => StopReason::SpecMissing,
        SpecStoreError::HashMismatch { .. } => StopReason::SpecMismatch,
        SpecStoreError::Invalid { .. } => StopReason::SpecUnusable,
        SpecStoreError::Store { .. } => StopReason::StoreUnavailable,
    }
}

fn launch_stop(e: &LaunchError) -> StopReason {
    match e {
        LaunchError::Staging { source, .. } if source.is_job_fault() => StopReason::InputRejected,
        LaunchError::Staging { .. } => StopReason::NodeDiskFull,
        // Preparing the job's empty directories: nothing of the job's is on
        // the disk yet.
        LaunchError::Engine {
            source: EngineError::Prepare { .. },
            ..
        } => StopReason::NodeDiskFull,
        LaunchError::Engine {
            source: EngineError::Unreachable(_),
            ..
        } => StopReason::EngineFailure,
        LaunchError::Engine {
            source: EngineError::Engine { reason, .. },
            ..
        } if reason.contains("No such image") || reason.contains("pull access denied") => {
            StopReason::ImageMissing
        }
        // The engine refused the job's container: its image or command may be
        // the cause, so this is never evidence against the provider.
        LaunchError::Engine { .. } => StopReason::StartRefused,
    }
}

pub use mcjs_runtime::limits::{checkpoint_limits, output_limits};

/// The most bytes staged for one input: its declared size, never more
/// than the job's declared disk.
pub fn input_limit(spec: &JobSpec, declared: Option<u64>) -> u64 {
    let disk = spec.request.hardware.disk.0;
    declared.map_or(disk, |d| d.min(disk))
}

/// `reason` with the node's paths of the job's writable directories put as
/// the job sees them (`/mcjs/checkpoints`, `/mcjs/output`): a refusal tells
/// the job's owner what its job wrote, never how the node lays out its disk.
pub fn in_container_terms(reason: &str, checkpoints: &Path, output: &Path) -> String {
    use mcjs_runtime::contract::{CONTAINER_CHECKPOINT_DIR, CONTAINER_OUTPUT_DIR};
    reason
        .replace(&checkpoints.display().to_string(), CONTAINER_CHECKPOINT_DIR)
        .replace(&output.display().to_string(), CONTAINER_OUTPUT_DIR)
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
    fn a_refusal_names_the_jobs_paths_not_the_nodes() {
        let root = Path::new("/srv/mcjs/runs/5f0c/vol");
        let reason = "checkpoint refused: /srv/mcjs/runs/5f0c/vol/checkpoints/step-1/m.json: is a symlink; also /srv/mcjs/runs/5f0c/vol/output/x";
        let said = in_container_terms(reason, &root.join("checkpoints"), &root.join("output"));
        assert_eq!(
            said,
            "checkpoint refused: /mcjs/checkpoints/step-1/m.json: is a symlink; also /mcjs/output/x"
        );
        assert!(!said.contains("/srv"));
    }

    fn stop_of(event: Event) -> StopReason {
        match event {
            Event::LaunchFailed { stop, .. } => stop,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn spec_problems_are_the_jobs_and_a_store_outage_slashes_no_one() {
        let hash = "ab".repeat(32);
        for (e, stop) in [
            (
                SpecStoreError::Missing { hash: hash.clone() },
                StopReason::SpecMissing,
            ),
            (
                SpecStoreError::HashMismatch {
                    expected: hash.clone(),
                    actual: hash.clone(),
                },
                StopReason::SpecMismatch,
            ),
            (
                SpecStoreError::Invalid {
                    hash: hash.clone(),
                    reason: "not json".into(),
                },
                StopReason::SpecUnusable,
            ),
        ] {
            assert_eq!(stop_of(classify(Found::Spec(&e))), stop);
            assert!(!stop.slashes());
        }
    }

    #[test]
    fn a_refused_start_is_never_the_providers_a_lost_engine_is() {
        let refused = |reason: &str| LaunchError::Engine {
            job_id: "j".into(),
            source: EngineError::Engine {
                action: "start the container",
                job_id: "j".into(),
                reason: reason.into(),
            },
        };
        let cases = [
            (
                refused("exec: \"nope\": executable file not found"),
                StopReason::StartRefused,
            ),
            (
                refused("No such image: mcjs-trainer@sha256:00"),
                StopReason::ImageMissing,
            ),
            (
                LaunchError::Engine {
                    job_id: "j".into(),
                    source: EngineError::Unreachable("socket gone".into()),
                },
                StopReason::EngineFailure,
            ),
            (
                LaunchError::Engine {
                    job_id: "j".into(),
                    source: EngineError::Prepare {
                        path: "/work/jobs/j".into(),
                        source: std::io::Error::from_raw_os_error(28),
                    },
                },
                StopReason::NodeDiskFull,
            ),
        ];
        for (e, stop) in cases {
            assert_eq!(stop_of(classify(Found::Launch(&e))), stop, "{e}");
        }
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
        assert_eq!(
            stop_of(classify(Found::Staging(&disk))),
            StopReason::NodeDiskFull
        );
    }
}
