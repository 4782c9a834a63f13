//! The checkpoint store: checkpoints of each job in an `object_store` (a
//! local directory by default, S3-compatible in production), the last K kept,
//! and restore with verification and fallback. Layout in
//! docs/job-contract.md, "Checkpoints in the checkpoint store".

use crate::checkpoint::{
    CheckpointDigest, CheckpointError, FileDigest, LocalCheckpoint, Sha256Digest,
    complete_checkpoints_in,
};
use crate::confined::{ConfinedDir, ConfinedError, Limits};
use futures_util::{StreamExt, TryStreamExt};
use mcjs_protocol::store::parse_checkpoint_key;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, PutPayload, buffered::BufWriter};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::io::AsyncWriteExt;

const DESCRIPTOR: &str = "checkpoint.json";
/// A descriptor is about a hundred bytes per file; a bigger one is an attack
/// on the reader's memory, not a descriptor.
pub const MAX_DESCRIPTOR_BYTES: u64 = 1 << 20;
/// Uploaded checkpoints whose removal must be retried; hidden, so never
/// collected again.
const COLLECTED: &str = ".mcjs-collected-";

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

impl StoreError {
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
pub struct Listing {
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

    /// Uploads a complete checkpoint found under `root`, its descriptor
    /// last, hashing each file in the same pass that uploads it: what the
    /// descriptor (and so the chain) records is exactly what was stored.
    /// Refused (the job's fault) beyond `limits`, for anything but regular
    /// files and directories, or if the manifest changed since it was read.
    /// Nothing is deleted here: see [`CheckpointStore::prune`].
    #[tracing::instrument(skip_all, fields(job_id, step = local.manifest.step))]
    pub async fn upload(
        &self,
        job_id: &str,
        generation: u32,
        root: &ConfinedDir,
        local: &LocalCheckpoint,
        limits: Limits,
        threads: usize,
    ) -> Result<StoredCheckpoint, StoreError> {
        valid_job_id(job_id)?;
        // Unique per upload: the hash is known only once every byte is
        // stored, and a re-run of the same step must never overwrite a copy
        // that may already be attested.
        let key = format!(
            "{:020}-g{generation}-{}",
            local.manifest.step,
            upload_nonce(job_id)
        );
        let base = format!("{}/{key}", checkpoints_prefix(job_id));
        let dir = root.open_dir(&local.name).map_err(CheckpointError::from)?;
        let digest =
            upload_tree(&self.store, &format!("{base}/files"), dir, limits, threads).await?;
        let manifest = digest
            .files
            .iter()
            .find(|f| f.path == crate::contract::MANIFEST_FILE);
        if manifest.map(|f| f.sha256) != Some(local.manifest_sha256) {
            delete_files(&self.store, &format!("{base}/files"), &digest.files).await;
            return Err(CheckpointError::from(ConfinedError::Refused {
                path: local
                    .dir
                    .join(crate::contract::MANIFEST_FILE)
                    .display()
                    .to_string(),
                reason:
                    "changed after it was put in place; a complete checkpoint belongs to the agent"
                        .into(),
            })
            .into());
        }
        let stored = StoredCheckpoint {
            job_id: job_id.to_string(),
            key,
            epoch: local.manifest.epoch,
            step: local.manifest.step,
            hash: digest.hash,
            files: digest.files,
        };
        let descriptor = ObjectPath::from(format!("{base}/{DESCRIPTOR}"));
        let json = serde_json::to_vec_pretty(&stored).expect("descriptor serialises");
        self.store
            .put(&descriptor, PutPayload::from(json))
            .await
            .map_err(Self::object("write", &descriptor))?;
        tracing::info!(bytes = stored.total_bytes(), hash = %stored.hash, "checkpoint stored");
        Ok(stored)
    }

    /// The job's stored checkpoints whose descriptor is in place. The key of
    /// each is where the listing found it; a descriptor over
    /// [`MAX_DESCRIPTOR_BYTES`], or one that does not check out where it
    /// lives (`StoredCheckpoint::from_descriptor`), is skipped, logged and
    /// reported.
    pub async fn list(&self, job_id: &str) -> Result<Listing, StoreError> {
        valid_job_id(job_id)?;
        let prefix = ObjectPath::from(checkpoints_prefix(job_id));
        let listing = self
            .store
            .list_with_delimiter(Some(&prefix))
            .await
            .map_err(Self::object("list", &prefix))?;
        let mut found = Listing::default();
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
    /// descriptors are neither counted nor touched. Returns the deleted
    /// checkpoints.
    pub async fn prune(
        &self,
        job_id: &str,
        attested_step: u64,
    ) -> Result<Vec<StoredCheckpoint>, StoreError> {
        let settled: Vec<StoredCheckpoint> = self
            .list(job_id)
            .await?
            .checkpoints
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

    /// Restores the newest of `expected` (newest first, as attested) of
    /// which a stored copy verifies, into a fresh directory under
    /// `dest_root`. Every stored copy with the attested step and hash is
    /// tried in turn; each is checked against the attested hash and `limits`
    /// (the spec's `checkpoint.max_size`) before a byte is fetched, and each
    /// file is fetched no further than its declared size and hashed as it
    /// arrives ([`download_verified`]'s rules). Corrupt or missing ones are
    /// skipped and reported.
    #[tracing::instrument(skip_all, fields(job_id))]
    pub async fn restore(
        &self,
        job_id: &str,
        expected: &[ExpectedCheckpoint],
        limits: Limits,
        dest_root: &Path,
    ) -> Result<Restored, StoreError> {
        let stored = self.list(job_id).await?.checkpoints;
        let mut skipped = Vec::new();
        for want in expected {
            let skip = |reason: String| SkippedCheckpoint {
                step: want.step,
                hash: want.hash,
                reason,
            };
            // Collected before any await: a lazy filter held across one
            // trips rustc's Send inference in callers (rust-lang/rust#102211).
            let candidates: Vec<&StoredCheckpoint> = stored
                .iter()
                .filter(|s| s.hash == want.hash && s.step == want.step)
                .collect();
            if candidates.is_empty() {
                skipped.push(skip("not in the checkpoint store".into()));
                continue;
            }
            for candidate in candidates {
                let base = format!("{}/{}", checkpoints_prefix(job_id), candidate.key);
                let dir = dest_root.join(&candidate.key);
                let staging = dest_root.join(format!(".{}.partial", candidate.key));
                let _ = tokio::fs::remove_dir_all(&staging).await;
                let fetched = fetch_verified(
                    &self.store,
                    &format!("{base}/files"),
                    &candidate.files,
                    want.hash,
                    limits,
                    &staging,
                    &|_| {},
                )
                .await;
                if let Err(e) = fetched {
                    let _ = tokio::fs::remove_dir_all(&staging).await;
                    let reason = match e {
                        VerifyError::Tampered { .. } => format!("corrupt: {e}"),
                        VerifyError::Store(e) => format!("download failed: {e}"),
                        VerifyError::Descriptor { .. } | VerifyError::OverLimits { .. } => {
                            format!("refused: {e}")
                        }
                    };
                    tracing::warn!(step = want.step, key = %candidate.key, %reason, "stored checkpoint unusable, trying the next one");
                    skipped.push(skip(reason));
                    continue;
                }
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
        limits: Limits,
        dest_root: &Path,
    ) -> Result<Restored, StoreError> {
        let expected: Vec<ExpectedCheckpoint> = self
            .list(job_id)
            .await?
            .checkpoints
            .iter()
            .rev()
            .map(|s| ExpectedCheckpoint {
                step: s.step,
                hash: s.hash,
            })
            .collect();
        self.restore(job_id, &expected, limits, dest_root).await
    }
}

/// A fresh 16-hex-digit name for one upload.
fn upload_nonce(job_id: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let mut h = Sha256::new();
    h.update(job_id.as_bytes());
    h.update(now.to_le_bytes());
    h.update(std::process::id().to_le_bytes());
    h.update(COUNTER.fetch_add(1, Ordering::Relaxed).to_le_bytes());
    hex::encode(&h.finalize()[..8])
}

async fn delete_files(store: &Arc<dyn ObjectStore>, prefix: &str, files: &[FileDigest]) {
    for f in files {
        let _ = store
            .delete(&ObjectPath::from(format!("{prefix}/{}", f.path)))
            .await;
    }
}

/// Uploads every regular file under `dir` to `<prefix>/<relative path>`,
/// `threads` files at a time (0: one per core), each read once through one
/// descriptor opened confined to `dir` and hashed as it is copied; returns
/// the digest of exactly what was stored (docs/job-contract.md, "The
/// checkpoint hash"). Over `limits` (counted on the bytes actually read, so
/// a file that grows is caught too), or anything but regular files and
/// directories, is refused as the job's fault and what was uploaded is
/// deleted again.
pub async fn upload_tree(
    store: &Arc<dyn ObjectStore>,
    prefix: &str,
    dir: ConfinedDir,
    limits: Limits,
    threads: usize,
) -> Result<CheckpointDigest, StoreError> {
    let dir = Arc::new(dir);
    let walk = {
        let dir = Arc::clone(&dir);
        tokio::task::spawn_blocking(move || dir.walk("", limits))
            .await
            .map_err(|e| StoreError::Join(e.to_string()))?
            .map_err(CheckpointError::from)?
    };
    let threads = if threads == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        threads
    };
    let budget = Arc::new(AtomicU64::new(limits.max_bytes));
    // Boxed and collected first: a lazily mapped stream of async blocks
    // trips rustc's Send inference in callers (rust-lang/rust#102211).
    let jobs: Vec<futures_util::future::BoxFuture<'static, Result<FileDigest, StoreError>>> = walk
        .files
        .iter()
        .map(|f| {
            let (dir, budget, store) = (Arc::clone(&dir), Arc::clone(&budget), Arc::clone(store));
            let dst = ObjectPath::from(format!("{prefix}/{}", f.path));
            let path = f.path.clone();
            Box::pin(async move {
                let (size, sha256) = copy_hashing(store, dir, path.clone(), dst, budget).await?;
                Ok::<_, StoreError>(FileDigest { path, size, sha256 })
            }) as futures_util::future::BoxFuture<'static, _>
        })
        .collect();
    let uploads = futures_util::stream::iter(jobs).buffer_unordered(threads.max(1));
    let result: Result<Vec<FileDigest>, StoreError> = uploads.try_collect().await;
    match result {
        Ok(mut files) => {
            files.sort_by(|a, b| a.path.cmp(&b.path));
            Ok(CheckpointDigest::combine(files))
        }
        Err(e) => {
            let all: Vec<FileDigest> = walk
                .files
                .iter()
                .map(|f| FileDigest {
                    path: f.path.clone(),
                    size: 0,
                    sha256: Sha256Digest([0; 32]),
                })
                .collect();
            delete_files(store, prefix, &all).await;
            Err(e)
        }
    }
}

/// One file: a blocking reader hashes each chunk and hands the same bytes to
/// the async writer, so the digest covers exactly the stored bytes.
async fn copy_hashing(
    store: Arc<dyn ObjectStore>,
    dir: Arc<ConfinedDir>,
    rel: String,
    dst: ObjectPath,
    budget: Arc<AtomicU64>,
) -> Result<(u64, Sha256Digest), StoreError> {
    const CHUNK: usize = 1 << 20;
    let (tx, mut rx) = tokio::sync::mpsc::channel::<bytes::Bytes>(4);
    let shown = dir.path().join(&rel);
    let reader =
        tokio::task::spawn_blocking(move || -> Result<(u64, Sha256Digest), CheckpointError> {
            let (mut file, _) = dir.open_file(&rel)?;
            let mut h = Sha256::new();
            let mut size = 0u64;
            loop {
                let mut buf = vec![0u8; CHUNK];
                let n = match file.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => {
                        return Err(CheckpointError::Io {
                            path: dir.path().join(&rel),
                            source: e,
                        });
                    }
                };
                // Charged on the bytes read, not on a size stated earlier.
                let charged = budget.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
                    left.checked_sub(n as u64)
                });
                if charged.is_err() {
                    return Err(ConfinedError::Refused {
                        path: dir.path().display().to_string(),
                        reason: "is over its size limit".into(),
                    }
                    .into());
                }
                buf.truncate(n);
                h.update(&buf);
                size += n as u64;
                if tx.blocking_send(bytes::Bytes::from(buf)).is_err() {
                    break; // the writer failed; its error is reported
                }
            }
            Ok((size, Sha256Digest(h.finalize().into())))
        });
    let mut writer = BufWriter::new(store, dst.clone());
    let mut write_error = None;
    while let Some(chunk) = rx.recv().await {
        if let Err(e) = writer.write_all(&chunk).await {
            write_error = Some(e);
            break;
        }
    }
    drop(rx);
    let read = reader.await.map_err(|e| StoreError::Join(e.to_string()))?;
    let read = match (read, write_error) {
        (Err(e), _) => Err(StoreError::from(e)),
        (Ok(_), Some(source)) => Err(StoreError::Io {
            action: "upload",
            path: shown,
            source,
        }),
        (Ok(r), None) => match writer.shutdown().await {
            Ok(()) => return Ok(r),
            Err(source) => Err(StoreError::Io {
                action: "upload",
                path: shown,
                source,
            }),
        },
    };
    let _ = writer.abort().await;
    read
}

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

/// Why a download was refused.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    #[error(
        "the store's list of files hashes to {listed}, but the chain attests {attested}: the stored descriptor is not the one attested; nothing was written"
    )]
    Descriptor {
        listed: Sha256Digest,
        attested: Sha256Digest,
    },
    #[error(
        "the store's list of files declares {bytes} bytes in {files} files, over the limit of {max_bytes} bytes in {max_files} files; nothing was fetched"
    )]
    OverLimits {
        files: u64,
        bytes: u64,
        max_files: u64,
        max_bytes: u64,
    },
    #[error(
        "{file}: refused, its bytes in the store do not match what the chain attests (sha256 {actual}, {actual_size} bytes; attested {expected}, {expected_size} bytes); nothing was written"
    )]
    Tampered {
        file: String,
        expected: Sha256Digest,
        expected_size: u64,
        actual: Sha256Digest,
        actual_size: u64,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Downloads `files` (stored under `<prefix>/<path>`) into `dest`, and keeps
/// them only if they pass [`fetch_verified`]: the list hashes to `attested`
/// (the digest on chain, as defined in docs/job-contract.md) and is within
/// `limits`, and every file matches its entry. Files go to a hidden
/// directory next to `dest` first, so a refused download leaves nothing at
/// `dest`. `progress` is called with the bytes received so far.
pub async fn download_verified(
    store: &Arc<dyn ObjectStore>,
    prefix: &str,
    files: &[FileDigest],
    attested: Sha256Digest,
    limits: Limits,
    dest: &Path,
    progress: &(dyn Fn(u64) + Send + Sync),
) -> Result<CheckpointDigest, VerifyError> {
    let mut sorted = files.to_vec();
    sorted.sort_by(|a, b| a.path.cmp(&b.path));
    let name = dest
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "output".into());
    let staging = dest.with_file_name(format!(".{name}.partial"));
    let _ = tokio::fs::remove_dir_all(&staging).await;
    let digest =
        match fetch_verified(store, prefix, &sorted, attested, limits, &staging, progress).await {
            Ok(d) => d,
            Err(e) => {
                let _ = tokio::fs::remove_dir_all(&staging).await;
                return Err(e);
            }
        };
    if tokio::fs::metadata(dest).await.is_ok() {
        let _ = tokio::fs::remove_dir_all(&staging).await;
        return Err(StoreError::Io {
            action: "write into",
            path: dest.to_path_buf(),
            source: std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "it already exists; choose another directory or remove it",
            ),
        }
        .into());
    }
    tokio::fs::rename(&staging, dest)
        .await
        .map_err(|source| StoreError::Io {
            action: "move the verified files into",
            path: dest.to_path_buf(),
            source,
        })?;
    Ok(digest)
}

/// Fetches a descriptor's `files` (sorted by path) from `<prefix>/<path>`
/// into `staging`, trusting nothing the store holds. Before a byte is
/// fetched, the list must be one the hash is defined over, hash to
/// `attested`, and declare no more than `limits`; then each file is read no
/// further than its declared size, hashed as it arrives, and must match its
/// entry. Whatever it returns, the caller removes `staging` on error.
async fn fetch_verified(
    store: &Arc<dyn ObjectStore>,
    prefix: &str,
    files: &[FileDigest],
    attested: Sha256Digest,
    limits: Limits,
    staging: &Path,
    progress: &(dyn Fn(u64) + Send + Sync),
) -> Result<CheckpointDigest, VerifyError> {
    check_file_list(files).map_err(|reason| StoreError::BadDescriptor {
        path: prefix.to_string(),
        reason,
    })?;
    let digest = CheckpointDigest::combine(files.to_vec());
    if digest.hash != attested {
        return Err(VerifyError::Descriptor {
            listed: digest.hash,
            attested,
        });
    }
    let count = files.len() as u64;
    let bytes = files
        .iter()
        .try_fold(0u64, |sum, f| sum.checked_add(f.size))
        .unwrap_or(u64::MAX);
    if count > limits.max_entries || bytes > limits.max_bytes {
        return Err(VerifyError::OverLimits {
            files: count,
            bytes,
            max_files: limits.max_entries,
            max_bytes: limits.max_bytes,
        });
    }
    let mut received = 0u64;
    for f in files {
        let rel = relative_file(prefix, &f.path)?;
        let src = ObjectPath::from(format!("{prefix}/{}", f.path));
        let mut h = Sha256::new();
        // Never more than was attested: a store that streams without end
        // is cut off at the attested size.
        let size = fetch_file(store, &src, &staging.join(rel), f.size, |chunk| {
            h.update(chunk);
            received += chunk.len() as u64;
            progress(received);
        })
        .await?;
        let actual = Sha256Digest(h.finalize().into());
        if size != f.size || actual != f.sha256 {
            return Err(VerifyError::Tampered {
                file: f.path.clone(),
                expected: f.sha256,
                expected_size: f.size,
                actual,
                actual_size: size,
            });
        }
    }
    Ok(digest)
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

/// A descriptor's file path as a relative path that stays inside the
/// directory it is downloaded into.
fn relative_file<'a>(descriptor: &str, path: &'a str) -> Result<&'a Path, StoreError> {
    let rel = Path::new(path);
    if rel.is_absolute()
        || rel
            .components()
            .any(|p| !matches!(p, std::path::Component::Normal(_)))
    {
        return Err(StoreError::BadDescriptor {
            path: descriptor.to_string(),
            reason: format!("file path {path:?} escapes the directory"),
        });
    }
    Ok(rel)
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

/// Streams `src` into `target` (its directory created), each chunk shown
/// to `seen` before it is written; stops once more than `limit` bytes came.
/// Returns how many bytes came, or, without reading any, the object's size
/// when the store says it is over `limit`.
async fn fetch_file(
    store: &Arc<dyn ObjectStore>,
    src: &ObjectPath,
    target: &Path,
    limit: u64,
    mut seen: impl FnMut(&[u8]),
) -> Result<u64, StoreError> {
    let io = |action, source| StoreError::Io {
        action,
        path: target.to_path_buf(),
        source,
    };
    if let Some(parent) = target.parent() {
        tokio::fs::create_dir_all(parent)
            .await
            .map_err(|e| io("create", e))?;
    }
    let got = store
        .get(src)
        .await
        .map_err(CheckpointStore::object("read", src))?;
    if got.meta.size > limit {
        return Ok(got.meta.size);
    }
    let mut stream = got.into_stream();
    let mut out = tokio::fs::File::create(target)
        .await
        .map_err(|e| io("create", e))?;
    let mut size = 0u64;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(CheckpointStore::object("read", src))?;
        size = size.saturating_add(chunk.len() as u64);
        if size > limit {
            break;
        }
        seen(&chunk);
        out.write_all(&chunk).await.map_err(|e| io("write", e))?;
    }
    out.sync_all().await.map_err(|e| io("sync", e))?;
    Ok(size)
}
