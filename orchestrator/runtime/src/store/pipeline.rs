//! The checkpoint pipeline: picks up a job's complete checkpoints from its
//! checkpoint directory, stores them and removes the local copies.

use super::{CheckpointStore, StoreError, StoredCheckpoint};
use crate::checkpoint::{CheckpointError, complete_checkpoints_in};
use crate::confined::{ConfinedDir, Limits};
use std::path::{Path, PathBuf};

/// Uploaded checkpoints whose removal must be retried; hidden, so never
/// collected again.
const COLLECTED: &str = ".mcjs-collected-";

/// Picks up a job's complete checkpoints from its checkpoint directory:
/// stores each (hashed as it is uploaded), and removes the local copy (the
/// job no longer owns it once its manifest is in place).
pub struct CheckpointPipeline {
    pub store: CheckpointStore,
    pub job_id: String,
    /// The assignment generation it runs under: part of every checkpoint's
    /// key, so that a node writes only its own assignment's checkpoints.
    pub generation: u32,
    pub local_root: PathBuf,
    /// Hashing threads; 0 means one per core.
    pub hash_threads: usize,
    /// One checkpoint's caps: its declared `max_size`, and [`crate::checkpoint::MAX_FILES`].
    pub limits: Limits,
    /// The spec fixes the checkpoint steps (`checkpoint.every_steps`): a
    /// checkpoint at any other step (one written on SIGTERM) is not stored
    /// but removed, so every stored checkpoint of the job lies on steps a
    /// check run reaches by itself.
    pub every_steps: Option<u64>,
}

impl CheckpointPipeline {
    /// Whether a checkpoint at `step` is one the contract lets this job store.
    pub fn on_grid(&self, step: u64) -> bool {
        self.every_steps
            .is_none_or(|n| n > 0 && step.is_multiple_of(n))
    }

    /// Stores every complete checkpoint now in the directory, oldest first.
    /// Every read is confined to the checkpoint directory
    /// ([`crate::confined`]); an error for which
    /// [`StoreError::is_job_fault`] holds is the job's own doing.
    #[tracing::instrument(skip(self), fields(job_id = %self.job_id))]
    pub async fn collect(&self) -> Result<Vec<StoredCheckpoint>, StoreError> {
        let root_path = self.local_root.clone();
        let (root, found) = tokio::task::spawn_blocking(move || {
            let root = ConfinedDir::open(&root_path)?;
            let found = complete_checkpoints_in(&root)?;
            Ok::<_, CheckpointError>((root, found))
        })
        .await
        .map_err(|e| StoreError::Join(e.to_string()))??;
        let mut stored = Vec::new();
        for local in found {
            if !self.on_grid(local.manifest.step) {
                tracing::info!(step = local.manifest.step, every_steps = ?self.every_steps, "a checkpoint off the spec's steps is not stored");
                self.remove_local(&local.dir, &local.name).await;
                continue;
            }
            stored.push(
                self.store
                    .upload(
                        &self.job_id,
                        self.generation,
                        &root,
                        &local,
                        self.limits,
                        self.hash_threads,
                    )
                    .await?,
            );
            self.remove_local(&local.dir, &local.name).await;
        }
        self.remove_collected().await;
        Ok(stored)
    }

    /// Removes a checkpoint directory the agent is done with. std's
    /// remove_dir_all never follows a symlink (CVE-2022-21658). A job still
    /// writing into it (against the contract) can make that fail: it is
    /// hidden from the next look and removal is retried later; what was
    /// stored is stored.
    async fn remove_local(&self, dir: &Path, name: &str) {
        if let Err(e) = tokio::fs::remove_dir_all(dir).await {
            tracing::warn!(dir = %dir.display(), error = %e, "cannot remove the collected checkpoint yet");
            let hidden = self.local_root.join(format!("{COLLECTED}{name}"));
            let _ = tokio::fs::rename(dir, &hidden).await;
        }
    }

    /// Retries removing uploaded checkpoints whose first removal failed.
    async fn remove_collected(&self) {
        let Ok(mut entries) = tokio::fs::read_dir(&self.local_root).await else {
            return;
        };
        while let Ok(Some(entry)) = entries.next_entry().await {
            if entry.file_name().to_string_lossy().starts_with(COLLECTED) {
                let _ = tokio::fs::remove_dir_all(entry.path()).await;
            }
        }
    }
}
