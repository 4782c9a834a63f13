//! Starting a job the contract's way (data verified first, then the
//! container) and watching its checkpoints against the schedule.

use crate::deadline::{CheckpointDeadline, DeadlineStatus, checkpoint_status};
use crate::engine::{ContainerEngine, ContainerId, ContainerSpec, EngineError};
use crate::staging::{DataCache, InputToStage, StagedInput, StagingError};
use crate::store::{CheckpointPipeline, StoreError, StoredCheckpoint};
use std::time::SystemTime;

#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("job {job_id} not started: {source}")]
    Staging {
        job_id: String,
        #[source]
        source: StagingError,
    },
    #[error("job {job_id} not started: {source}")]
    Engine {
        job_id: String,
        #[source]
        source: EngineError,
    },
}

/// Stages and verifies every input into the spec's data directory, prepares
/// the writable directories, and only then starts the container: the meter
/// never runs while data moves, and a job never sees unverified data.
#[tracing::instrument(skip_all, fields(job_id = %spec.job_id))]
pub async fn launch<E: ContainerEngine>(
    engine: &E,
    cache: &DataCache,
    inputs: &[InputToStage],
    spec: &ContainerSpec,
) -> Result<(ContainerId, Vec<StagedInput>), LaunchError> {
    let engine_err = |source| LaunchError::Engine {
        job_id: spec.job_id.clone(),
        source,
    };
    spec.validate().map_err(engine_err)?;
    let staged = cache
        .stage(inputs, &spec.mounts.data)
        .await
        .map_err(|source| LaunchError::Staging {
            job_id: spec.job_id.clone(),
            source,
        })?;
    spec.mounts.prepare(&spec.user).map_err(engine_err)?;
    let id = engine.start(spec).await.map_err(engine_err)?;
    Ok((id, staged))
}

/// What one look at a running job found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MonitorReport {
    /// Checkpoints stored by this look, oldest first: the agent attests them.
    pub stored: Vec<StoredCheckpoint>,
    pub status: DeadlineStatus,
}

/// Picks up a running job's checkpoints and tracks its deadline. Call
/// [`CheckpointMonitor::poll`] periodically with the current time.
pub struct CheckpointMonitor {
    pub pipeline: CheckpointPipeline,
    pub policy: CheckpointDeadline,
    /// The last checkpoint picked up, or when the job (re)started.
    pub last_checkpoint: SystemTime,
}

impl CheckpointMonitor {
    pub fn new(
        pipeline: CheckpointPipeline,
        policy: CheckpointDeadline,
        started: SystemTime,
    ) -> Self {
        Self {
            pipeline,
            policy,
            last_checkpoint: started,
        }
    }

    pub async fn poll(&mut self, now: SystemTime) -> Result<MonitorReport, StoreError> {
        let stored = self.pipeline.collect().await?;
        if !stored.is_empty() {
            self.last_checkpoint = now;
        }
        let status = checkpoint_status(self.last_checkpoint, self.policy, now);
        if status.is_overdue() {
            tracing::warn!(job_id = %self.pipeline.job_id, ?status, "job is overdue for a checkpoint");
        }
        Ok(MonitorReport { stored, status })
    }
}
