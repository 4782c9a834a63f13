//! The checkpoint store: checkpoints of each job in an `object_store` (a
//! local directory by default, S3-compatible in production), the last K kept,
//! and restore with verification and fallback. Layout in
//! docs/job-contract.md, "Checkpoints in the checkpoint store".

mod known;
mod object_upload;
mod pipeline;
mod restore;
mod upload;

pub use known::KnownFiles;
pub use object_upload::{ObjectUpload, PART_SIZE, UploadError, UploadStage, part_size_for};
pub use pipeline::CheckpointPipeline;
pub use restore::{RANGE_SIZE, VerifyError, download_verified};
pub(crate) use upload::upload_nonce;
pub use upload::{REUSE_MIN_BYTES, Reuse, upload_tree};

use crate::checkpoint::{CheckpointDigest, CheckpointError, FileDigest, Sha256Digest};
use futures_util::StreamExt;
use mcjs_protocol::store::parse_checkpoint_key;
use object_store::ObjectStore;
use object_store::path::Path as ObjectPath;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

const DESCRIPTOR: &str = "checkpoint.json";
/// A descriptor is about a hundred bytes per file; a bigger one is an attack
/// on the reader's memory, not a descriptor.
pub const MAX_DESCRIPTOR_BYTES: u64 = 1 << 20;

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
    #[error(transparent)]
    Upload(#[from] UploadError),
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

impl StoreError {
    /// Whether the store could not be reached or answered with an error
    /// (worth trying again), as opposed to answering about what it holds.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, Self::Object { source, .. } if !matches!(source, object_store::Error::NotFound { .. }))
    }

    /// Whether a restore found no usable copy only because the store
    /// refused or failed a request (see [`SkippedCheckpoint::store_failed`]):
    /// that says nothing of whether the checkpoint is there.
    pub fn store_failed(&self) -> bool {
        match self {
            Self::NoUsableCheckpoint { tried, .. } => tried.iter().any(|t| t.store_failed),
            other => other.is_unavailable(),
        }
    }

    /// Whether what the job wrote (not the node or the store) caused this.
    pub fn is_job_fault(&self) -> bool {
        match self {
            Self::Checkpoint(e) => e.is_job_fault(),
            _ => false,
        }
    }
}

/// A checkpoint as the store holds it (its `checkpoint.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredCheckpoint {
    pub job_id: String,
    /// `<step, 20 digits>-g<generation>-<16 hex digits unique to this upload>`.
    pub key: String,
    pub epoch: u64,
    pub step: u64,
    pub hash: Sha256Digest,
    pub files: Vec<FileDigest>,
}

impl StoredCheckpoint {
    pub fn total_bytes(&self) -> u64 {
        self.files
            .iter()
            .fold(0, |sum, f| sum.saturating_add(f.size))
    }

    /// Reads the descriptor found at `jobs/<job_id>/checkpoints/<key>/`.
    /// Whoever held the job's node wrote it, so nothing in it is taken on
    /// its word: it must name this job and the key it lives under (whose
    /// step it must carry), list its files as the hash is defined over them,
    /// and those must hash to its own `hash`.
    fn from_descriptor(job_id: &str, key: &str, bytes: &[u8]) -> Result<Self, String> {
        let c: Self = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        if c.job_id != job_id {
            return Err(format!("it names job {:?}", c.job_id));
        }
        if c.key != key {
            return Err(format!("it names key {:?}, but lives under {key:?}", c.key));
        }
        match parse_checkpoint_key(key) {
            Some((step, _)) if step == c.step => {}
            Some((step, _)) => return Err(format!("it says step {}, its key {step}", c.step)),
            None => return Err("its key is not <step>-g<generation>-<nonce>".into()),
        }
        check_file_list(&c.files)?;
        let listed = CheckpointDigest::combine(c.files.clone()).hash;
        if listed != c.hash {
            return Err(format!(
                "its files hash to {listed}, not to the hash it states ({})",
                c.hash
            ));
        }
        Ok(c)
    }
}

/// The job's stored checkpoints as listed: those whose descriptor is usable,
/// and those whose descriptor is not (skipped, never fatal: a node may write
/// anything under its own generation).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CheckpointListing {
    /// Oldest first, by step, then key.
    pub checkpoints: Vec<StoredCheckpoint>,
    pub skipped: Vec<SkippedDescriptor>,
}

/// A descriptor that cannot be a checkpoint of the job, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SkippedDescriptor {
    pub path: String,
    pub reason: String,
}

impl fmt::Display for SkippedDescriptor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.reason)
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
    /// The store did not say what it holds (it refused or failed the
    /// request, other than "not found"): this copy may well be whole.
    pub store_failed: bool,
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
    /// What this process stored or verified: copied in the store, not
    /// uploaded again, when a checkpoint holds it unchanged.
    known: KnownFiles,
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
    mcjs_protocol::store::layout::checkpoints(job_id)
}

impl CheckpointStore {
    /// Keeps the last `keep` checkpoints of each job (at least one).
    pub fn new(store: Arc<dyn ObjectStore>, keep: usize) -> Self {
        Self {
            store,
            keep: keep.max(1),
            known: KnownFiles::default(),
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

    /// The job's stored checkpoints whose descriptor is in place. The key of
    /// each is where the listing found it; a descriptor over
    /// [`MAX_DESCRIPTOR_BYTES`], or one that does not check out where it
    /// lives (`StoredCheckpoint::from_descriptor`), is skipped, logged and
    /// reported.
    pub async fn list(&self, job_id: &str) -> Result<CheckpointListing, StoreError> {
        valid_job_id(job_id)?;
        let prefix = ObjectPath::from(checkpoints_prefix(job_id));
        let listing = self
            .store
            .list_with_delimiter(Some(&prefix))
            .await
            .map_err(Self::object("list", &prefix))?;
        let mut found = CheckpointListing::default();
        for dir in listing.common_prefixes {
            let path = dir.child(DESCRIPTOR);
            let read = match read_small(&self.store, &path, MAX_DESCRIPTOR_BYTES).await? {
                // An upload that never finished: not a checkpoint.
                None => continue,
                Some(read) => read,
            };
            let key = dir.filename().unwrap_or_default();
            match read.and_then(|bytes| StoredCheckpoint::from_descriptor(job_id, key, &bytes)) {
                Ok(c) => found.checkpoints.push(c),
                Err(reason) => {
                    tracing::warn!(%path, %reason, "checkpoint descriptor skipped");
                    found.skipped.push(SkippedDescriptor {
                        path: path.to_string(),
                        reason,
                    });
                }
            }
        }
        found
            .checkpoints
            .sort_by(|a, b| (a.step, &a.key).cmp(&(b.step, &b.key)));
        Ok(found)
    }

    /// Deletes the job's checkpoints that a newer attested one has made
    /// useless: of those at or before `attested_step` (the last step the
    /// chain has attested) it keeps the newest K; everything after it stays,
    /// since it may yet be attested. A node cut off from the chain therefore
    /// never deletes the checkpoint another node must resume from. Skipped
    /// descriptors are neither counted nor touched. A checkpoint hashing
    /// to `floor` (a verified job's restore floor, `Job::restore_floor`:
    /// where a lie found later sends the job back) is neither counted nor
    /// touched either, however old. Returns the deleted checkpoints.
    pub async fn prune(
        &self,
        job_id: &str,
        attested_step: u64,
        floor: Option<&Sha256Digest>,
    ) -> Result<Vec<StoredCheckpoint>, StoreError> {
        let settled: Vec<StoredCheckpoint> = self
            .list(job_id)
            .await?
            .checkpoints
            .into_iter()
            .filter(|c| c.step <= attested_step && Some(&c.hash) != floor)
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
        let base = mcjs_protocol::store::layout::checkpoint(&c.job_id, &c.key);
        self.known.forget_under(&format!("{base}/"));
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
}

/// Whether `files` is a list the checkpoint hash is defined over: sorted by
/// path, each path once, each a '/'-separated relative path of plain
/// segments without a newline (so each file has one place on disk and one
/// line in the hash).
fn check_file_list(files: &[FileDigest]) -> Result<(), String> {
    for f in files {
        if f.path.contains('\n')
            || f.path
                .split('/')
                .any(|s| s.is_empty() || s == "." || s == "..")
        {
            return Err(format!(
                "file path {:?} is not a plain relative path",
                f.path
            ));
        }
    }
    match files.windows(2).find(|w| w[0].path >= w[1].path) {
        Some(w) => Err(format!(
            "files are not sorted by path, each once ({:?} before {:?})",
            w[0].path, w[1].path
        )),
        None => Ok(()),
    }
}

/// Reads `path` if it is at most `cap` bytes: `None` when it is absent,
/// `Some(Err(why))` when it is bigger (as the store says, or as it streams).
async fn read_small(
    store: &Arc<dyn ObjectStore>,
    path: &ObjectPath,
    cap: u64,
) -> Result<Option<Result<Vec<u8>, String>>, StoreError> {
    let got = match store.get(path).await {
        Ok(got) => got,
        Err(object_store::Error::NotFound { .. }) => return Ok(None),
        Err(e) => return Err(CheckpointStore::object("read", path)(e)),
    };
    let too_big = || Ok(Some(Err(format!("it is over {cap} bytes"))));
    if got.meta.size > cap {
        return too_big();
    }
    let mut stream = got.into_stream();
    let mut bytes = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(CheckpointStore::object("read", path))?;
        if bytes.len() as u64 + chunk.len() as u64 > cap {
            return too_big();
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(Some(Ok(bytes)))
}
