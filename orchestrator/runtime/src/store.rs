//! The checkpoint store: checkpoints of each job in an `object_store` (a
//! local directory by default, S3-compatible in production), the last K kept,
//! and restore with verification and fallback. Layout in
//! docs/job-contract.md, "Checkpoints in the checkpoint store".

use crate::checkpoint::{
    CheckpointDigest, CheckpointError, FileDigest, LocalCheckpoint, Sha256Digest,
    complete_checkpoints, hash_checkpoint,
};
use futures_util::StreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, PutPayload, buffered::BufWriter};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::io::AsyncWriteExt;

const DESCRIPTOR: &str = "checkpoint.json";

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("checkpoint store: cannot {action} {path}: {source}")]
    Object {
        action: &'static str,
        path: String,
        #[source]
        source: object_store::Error,
    },
    #[error("cannot {action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    #[error("checkpoint store: {path} is not a valid checkpoint descriptor: {reason}")]
    BadDescriptor { path: String, reason: String },
    #[error("job {job_id}: no usable checkpoint to restore; tried: {}", tried.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    NoUsableCheckpoint {
        job_id: String,
        tried: Vec<SkippedCheckpoint>,
    },
    #[error("invalid job id {0:?}: use letters, digits, '-' or '_'")]
    BadJobId(String),
    #[error("hashing task failed: {0}")]
    Join(String),
}

/// A checkpoint as the store holds it (its `checkpoint.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredCheckpoint {
    pub job_id: String,
    /// `<step, 20 digits>-<first 16 hex digits of the hash>`.
    pub key: String,
    pub epoch: u64,
    pub step: u64,
    pub hash: Sha256Digest,
    pub files: Vec<FileDigest>,
}

impl StoredCheckpoint {
    pub fn total_bytes(&self) -> u64 {
        self.files.iter().map(|f| f.size).sum()
    }
}

/// A checkpoint the restoring node trusts: from the chain's attestations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ExpectedCheckpoint {
    pub step: u64,
    pub hash: Sha256Digest,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SkippedCheckpoint {
    pub step: u64,
    pub hash: Sha256Digest,
    pub reason: String,
}

impl fmt::Display for SkippedCheckpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "step {} ({}): {}", self.step, self.hash, self.reason)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Restored {
    pub checkpoint: StoredCheckpoint,
    /// The verified checkpoint, ready to mount read-only as the restore dir.
    pub dir: PathBuf,
    /// Newer checkpoints that could not be used, newest first.
    pub skipped: Vec<SkippedCheckpoint>,
}

#[derive(Clone)]
pub struct CheckpointStore {
    store: Arc<dyn ObjectStore>,
    keep: usize,
}

fn valid_job_id(job_id: &str) -> Result<(), StoreError> {
    if job_id.is_empty()
        || !job_id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(StoreError::BadJobId(job_id.to_string()));
    }
    Ok(())
}

fn checkpoints_prefix(job_id: &str) -> String {
    format!("jobs/{job_id}/checkpoints")
}

impl CheckpointStore {
    /// Keeps the last `keep` checkpoints of each job (at least one).
    pub fn new(store: Arc<dyn ObjectStore>, keep: usize) -> Self {
        Self {
            store,
            keep: keep.max(1),
        }
    }

    /// A store in a local directory, created if missing.
    pub fn local(root: &Path, keep: usize) -> Result<Self, StoreError> {
        std::fs::create_dir_all(root).map_err(|source| StoreError::Io {
            action: "create the checkpoint store directory",
            path: root.to_path_buf(),
            source,
        })?;
        let fs = object_store::local::LocalFileSystem::new_with_prefix(root).map_err(|source| {
            StoreError::Object {
                action: "open",
                path: root.display().to_string(),
                source,
            }
        })?;
        Ok(Self::new(Arc::new(fs), keep))
    }

    /// A store from a URL such as `s3://bucket/prefix` (credentials and
    /// endpoint from `AWS_*` environment variables) or `file:///abs/dir`.
    #[cfg(feature = "s3")]
    pub fn from_url(url: &url::Url, keep: usize) -> Result<Self, StoreError> {
        let (store, prefix) =
            object_store::parse_url_opts(url, std::env::vars()).map_err(|source| {
                StoreError::Object {
                    action: "open",
                    path: url.to_string(),
                    source,
                }
            })?;
        let store: Arc<dyn ObjectStore> =
            Arc::new(object_store::prefix::PrefixStore::new(store, prefix));
        Ok(Self::new(store, keep))
    }

    fn object(
        action: &'static str,
        path: &ObjectPath,
    ) -> impl FnOnce(object_store::Error) -> StoreError {
        let path = path.to_string();
        move |source| StoreError::Object {
            action,
            path,
            source,
        }
    }

    /// Uploads a complete local checkpoint, its descriptor last. Nothing is
    /// deleted here: see [`CheckpointStore::prune`].
    #[tracing::instrument(skip_all, fields(job_id, step = local.manifest.step, hash = %digest.hash))]
    pub async fn put(
        &self,
        job_id: &str,
        local: &LocalCheckpoint,
        digest: &CheckpointDigest,
    ) -> Result<StoredCheckpoint, StoreError> {
        valid_job_id(job_id)?;
        let key = format!(
            "{:020}-{}",
            local.manifest.step,
            &digest.hash.to_hex()[..16]
        );
        let base = format!("{}/{key}", checkpoints_prefix(job_id));
        for f in &digest.files {
            let src = local.dir.join(&f.path);
            let dst = ObjectPath::from(format!("{base}/files/{}", f.path));
            let mut file = tokio::fs::File::open(&src)
                .await
                .map_err(|source| StoreError::Io {
                    action: "open",
                    path: src.clone(),
                    source,
                })?;
            let mut writer = BufWriter::new(Arc::clone(&self.store), dst.clone());
            let copied = tokio::io::copy(&mut file, &mut writer).await;
            let done = match copied {
                Ok(_) => writer.shutdown().await,
                Err(e) => Err(e),
            };
            if let Err(source) = done {
                let _ = writer.abort().await;
                return Err(StoreError::Io {
                    action: "upload",
                    path: src,
                    source,
                });
            }
        }
        let stored = StoredCheckpoint {
            job_id: job_id.to_string(),
            key,
            epoch: local.manifest.epoch,
            step: local.manifest.step,
            hash: digest.hash,
            files: digest.files.clone(),
        };
        let descriptor = ObjectPath::from(format!("{base}/{DESCRIPTOR}"));
        let json = serde_json::to_vec_pretty(&stored).expect("descriptor serialises");
        self.store
            .put(&descriptor, PutPayload::from(json))
            .await
            .map_err(Self::object("write", &descriptor))?;
        tracing::info!(bytes = stored.total_bytes(), "checkpoint stored");
        Ok(stored)
    }

    /// The job's stored checkpoints whose descriptor is in place, oldest first.
    pub async fn list(&self, job_id: &str) -> Result<Vec<StoredCheckpoint>, StoreError> {
        valid_job_id(job_id)?;
        let prefix = ObjectPath::from(checkpoints_prefix(job_id));
        let listing = self
            .store
            .list_with_delimiter(Some(&prefix))
            .await
            .map_err(Self::object("list", &prefix))?;
        let mut found = Vec::new();
        for dir in listing.common_prefixes {
            let path = dir.child(DESCRIPTOR);
            let bytes = match self.store.get(&path).await {
                Ok(r) => r.bytes().await.map_err(Self::object("read", &path))?,
                // An upload that never finished: not a checkpoint.
                Err(object_store::Error::NotFound { .. }) => continue,
                Err(e) => return Err(Self::object("read", &path)(e)),
            };
            let stored: StoredCheckpoint =
                serde_json::from_slice(&bytes).map_err(|e| StoreError::BadDescriptor {
                    path: path.to_string(),
                    reason: e.to_string(),
                })?;
            found.push(stored);
        }
        found.sort_by(|a, b| (a.step, &a.key).cmp(&(b.step, &b.key)));
        Ok(found)
    }

    /// Deletes the job's checkpoints that a newer attested one has made
    /// useless: of those at or before `attested_step` (the last step the
    /// chain has attested) it keeps the newest K; everything after it stays,
    /// since it may yet be attested. A node cut off from the chain therefore
    /// never deletes the checkpoint another node must resume from. Returns
    /// the deleted checkpoints.
    pub async fn prune(
        &self,
        job_id: &str,
        attested_step: u64,
    ) -> Result<Vec<StoredCheckpoint>, StoreError> {
        let settled: Vec<StoredCheckpoint> = self
            .list(job_id)
            .await?
            .into_iter()
            .filter(|c| c.step <= attested_step)
            .collect();
        let excess = settled.len().saturating_sub(self.keep);
        let mut removed = Vec::new();
        for old in settled.into_iter().take(excess) {
            self.delete(&old).await?;
            removed.push(old);
        }
        Ok(removed)
    }

    async fn delete(&self, c: &StoredCheckpoint) -> Result<(), StoreError> {
        let base = format!("{}/{}", checkpoints_prefix(&c.job_id), c.key);
        // Descriptor first: a half-deleted checkpoint is then invisible.
        let descriptor = ObjectPath::from(format!("{base}/{DESCRIPTOR}"));
        self.store
            .delete(&descriptor)
            .await
            .map_err(Self::object("delete", &descriptor))?;
        for f in &c.files {
            let p = ObjectPath::from(format!("{base}/files/{}", f.path));
            match self.store.delete(&p).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(Self::object("delete", &p)(e)),
            }
        }
        Ok(())
    }

    /// Downloads `c`'s files into `dest` (created), without verifying them.
    pub async fn download(&self, c: &StoredCheckpoint, dest: &Path) -> Result<(), StoreError> {
        let base = format!("{}/{}", checkpoints_prefix(&c.job_id), c.key);
        for f in &c.files {
            let rel = Path::new(&f.path);
            if rel.is_absolute()
                || rel
                    .components()
                    .any(|p| !matches!(p, std::path::Component::Normal(_)))
            {
                return Err(StoreError::BadDescriptor {
                    path: format!("{base}/{DESCRIPTOR}"),
                    reason: format!("file path {:?} escapes the checkpoint directory", f.path),
                });
            }
            let target = dest.join(rel);
            let io = |action, source| StoreError::Io {
                action,
                path: target.clone(),
                source,
            };
            if let Some(parent) = target.parent() {
                tokio::fs::create_dir_all(parent)
                    .await
                    .map_err(|e| io("create", e))?;
            }
            let src = ObjectPath::from(format!("{base}/files/{}", f.path));
            let mut stream = self
                .store
                .get(&src)
                .await
                .map_err(Self::object("read", &src))?
                .into_stream();
            let mut out = tokio::fs::File::create(&target)
                .await
                .map_err(|e| io("create", e))?;
            while let Some(chunk) = stream.next().await {
                let chunk = chunk.map_err(Self::object("read", &src))?;
                out.write_all(&chunk).await.map_err(|e| io("write", e))?;
            }
            out.sync_all().await.map_err(|e| io("sync", e))?;
        }
        Ok(())
    }

    /// Restores the newest of `expected` (newest first, as attested) whose
    /// stored copy hashes to the attested value, into a fresh directory under
    /// `dest_root`. Corrupt or missing ones are skipped and reported.
    #[tracing::instrument(skip_all, fields(job_id))]
    pub async fn restore(
        &self,
        job_id: &str,
        expected: &[ExpectedCheckpoint],
        dest_root: &Path,
    ) -> Result<Restored, StoreError> {
        let stored = self.list(job_id).await?;
        let mut skipped = Vec::new();
        for want in expected {
            let skip = |reason: String| SkippedCheckpoint {
                step: want.step,
                hash: want.hash,
                reason,
            };
            let Some(candidate) = stored
                .iter()
                .find(|s| s.hash == want.hash && s.step == want.step)
            else {
                skipped.push(skip("not in the checkpoint store".into()));
                continue;
            };
            let dir = dest_root.join(&candidate.key);
            let staging = dest_root.join(format!(".{}.partial", candidate.key));
            let _ = tokio::fs::remove_dir_all(&staging).await;
            if let Err(e) = self.download(candidate, &staging).await {
                tracing::warn!(step = want.step, error = %e, "checkpoint download failed, trying the previous one");
                skipped.push(skip(format!("download failed: {e}")));
                let _ = tokio::fs::remove_dir_all(&staging).await;
                continue;
            }
            let path = staging.clone();
            let actual = tokio::task::spawn_blocking(move || hash_checkpoint(&path, 0))
                .await
                .map_err(|e| StoreError::Join(e.to_string()))?;
            match actual {
                Ok(d) if d.hash == want.hash => {
                    let _ = tokio::fs::remove_dir_all(&dir).await;
                    tokio::fs::rename(&staging, &dir)
                        .await
                        .map_err(|source| StoreError::Io {
                            action: "move the restored checkpoint into",
                            path: dir.clone(),
                            source,
                        })?;
                    tracing::info!(
                        step = want.step,
                        skipped = skipped.len(),
                        "checkpoint restored and verified"
                    );
                    return Ok(Restored {
                        checkpoint: candidate.clone(),
                        dir,
                        skipped,
                    });
                }
                Ok(d) => {
                    tracing::warn!(step = want.step, expected = %want.hash, actual = %d.hash, "checkpoint is corrupt, trying the previous one");
                    skipped.push(skip(format!("corrupt: its files hash to {}", d.hash)));
                }
                Err(e) => skipped.push(skip(format!("cannot hash it: {e}"))),
            }
            let _ = tokio::fs::remove_dir_all(&staging).await;
        }
        Err(StoreError::NoUsableCheckpoint {
            job_id: job_id.to_string(),
            tried: skipped,
        })
    }

    /// Restores trusting the store's own descriptors for the expected hashes:
    /// for tooling and tests without a chain. The agent passes attested ones.
    pub async fn restore_latest(
        &self,
        job_id: &str,
        dest_root: &Path,
    ) -> Result<Restored, StoreError> {
        let expected: Vec<ExpectedCheckpoint> = self
            .list(job_id)
            .await?
            .iter()
            .rev()
            .map(|s| ExpectedCheckpoint {
                step: s.step,
                hash: s.hash,
            })
            .collect();
        self.restore(job_id, &expected, dest_root).await
    }
}

/// Picks up a job's complete checkpoints from its checkpoint directory:
/// hashes each, stores it, and removes the local copy (the job no longer owns
/// it once its manifest is in place).
pub struct CheckpointPipeline {
    pub store: CheckpointStore,
    pub job_id: String,
    pub local_root: PathBuf,
    /// Hashing threads; 0 means one per core.
    pub hash_threads: usize,
}

impl CheckpointPipeline {
    /// Stores every complete checkpoint now in the directory, oldest first.
    #[tracing::instrument(skip(self), fields(job_id = %self.job_id))]
    pub async fn collect(&self) -> Result<Vec<StoredCheckpoint>, StoreError> {
        let root = self.local_root.clone();
        let found = tokio::task::spawn_blocking(move || complete_checkpoints(&root))
            .await
            .map_err(|e| StoreError::Join(e.to_string()))??;
        let mut stored = Vec::new();
        for local in found {
            let dir = local.dir.clone();
            let threads = self.hash_threads;
            let digest = tokio::task::spawn_blocking(move || hash_checkpoint(&dir, threads))
                .await
                .map_err(|e| StoreError::Join(e.to_string()))??;
            stored.push(self.store.put(&self.job_id, &local, &digest).await?);
            tokio::fs::remove_dir_all(&local.dir)
                .await
                .map_err(|source| StoreError::Io {
                    action: "remove the uploaded checkpoint",
                    path: local.dir.clone(),
                    source,
                })?;
        }
        Ok(stored)
    }
}
