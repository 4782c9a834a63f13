//! Uploading a checkpoint to the store: every file read confined to the
//! job's checkpoint directory and hashed in the same pass that stores it,
//! then its descriptor.

use super::{
    CheckpointStore, DESCRIPTOR, KnownFiles, ObjectUpload, StoreError, StoredCheckpoint,
    valid_job_id,
};
use crate::checkpoint::{
    CheckpointDigest, CheckpointError, FileDigest, LocalCheckpoint, Sha256Digest,
};
use crate::confined::{ConfinedDir, ConfinedError, Limits};
use futures_util::{StreamExt, TryStreamExt};
use mcjs_protocol::store::layout;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, PutPayload};
use sha2::{Digest, Sha256};
use std::io::Read;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

impl CheckpointStore {
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
        let key = layout::checkpoint_key(local.manifest.step, generation, upload_nonce(job_id));
        let base = layout::checkpoint(job_id, &key);
        let dir = root.open_dir(&local.name).map_err(CheckpointError::from)?;
        let reuse = Reuse {
            known: self.known.clone(),
            job: job_id.to_string(),
        };
        let digest = upload_tree(
            &self.store,
            &format!("{base}/files"),
            dir,
            limits,
            threads,
            Some(reuse),
        )
        .await?;
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
}

/// A fresh nonce for one upload.
pub(crate) fn upload_nonce(job_id: &str) -> u64 {
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
    u64::from_be_bytes(h.finalize()[..8].try_into().expect("8 bytes"))
}

/// Deletes what a refused or failed upload stored. Best effort: a file left
/// (the store failing again) is under this upload's own key, which no
/// descriptor names, so nothing lists or restores it.
async fn delete_files(store: &Arc<dyn ObjectStore>, prefix: &str, files: &[FileDigest]) {
    for f in files {
        let path = ObjectPath::from(format!("{prefix}/{}", f.path));
        match store.delete(&path).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => {
                tracing::warn!(%path, error = %e, "cannot delete a file of a failed upload; no descriptor names it")
            }
        }
    }
}

/// Files of at least this size are hashed before they are stored when the
/// store is known to hold a file of their size already: if it holds these
/// bytes, they are copied there instead of uploaded.
pub const REUSE_MIN_BYTES: u64 = 1 << 20;

/// The files a checkpoint upload may copy inside the store rather than send:
/// those of `job` that this process stored or verified.
#[derive(Clone)]
pub struct Reuse {
    pub known: KnownFiles,
    pub job: String,
}

/// Uploads every regular file under `dir` to `<prefix>/<relative path>`,
/// `threads` files at a time (0: one per core), each read once through one
/// descriptor opened confined to `dir` and hashed as it is copied; returns
/// the digest of exactly what was stored (docs/job-contract.md, "The
/// checkpoint hash"). Over `limits` (counted on the bytes actually read, so
/// a file that grows is caught too), or anything but regular files and
/// directories, is refused as the job's fault and what was uploaded is
/// deleted again. With `reuse`, a file whose bytes the store holds already
/// (same size and sha256, [`Reuse`]) is copied there, not uploaded; what
/// is uploaded becomes known to `reuse` in turn.
pub async fn upload_tree(
    store: &Arc<dyn ObjectStore>,
    prefix: &str,
    dir: ConfinedDir,
    limits: Limits,
    threads: usize,
    reuse: Option<Reuse>,
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
            let (path, listed, reuse) = (f.path.clone(), f.size, reuse.clone());
            Box::pin(async move {
                if let Some(r) = reuse
                    .as_ref()
                    .filter(|r| listed >= REUSE_MIN_BYTES && r.known.has_size(&r.job, listed))
                {
                    if let Some(copied) = copy_known(&store, &dir, &path, &dst, r, &budget).await? {
                        return Ok(copied);
                    }
                }
                let (size, sha256) = copy_hashing(
                    Arc::clone(&store),
                    dir,
                    path.clone(),
                    listed,
                    dst.clone(),
                    budget,
                )
                .await?;
                if let Some(r) = &reuse {
                    r.known.remember(&r.job, size, sha256, dst);
                }
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

/// A file whose bytes the store may hold already: hashed (one read, confined
/// like every read), and if `reuse` knows those bytes, copied inside the
/// store to `dst`. `None` when it does not know them or the copy failed
/// (the file is then uploaded).
async fn copy_known(
    store: &Arc<dyn ObjectStore>,
    dir: &Arc<ConfinedDir>,
    rel: &str,
    dst: &ObjectPath,
    reuse: &Reuse,
    budget: &AtomicU64,
) -> Result<Option<FileDigest>, StoreError> {
    let (dir2, rel2) = (Arc::clone(dir), rel.to_string());
    let (size, sha256) = tokio::task::spawn_blocking(move || {
        let (file, _) = dir2.open_file(&rel2)?;
        crate::checkpoint::hash_reader(file, &dir2.path().join(&rel2))
    })
    .await
    .map_err(|e| StoreError::Join(e.to_string()))??;
    let Some(source) = reuse.known.get(&reuse.job, size, &sha256) else {
        return Ok(None);
    };
    // Charged as an upload is: on the bytes read.
    if budget
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
            left.checked_sub(size)
        })
        .is_err()
    {
        return Err(CheckpointError::from(ConfinedError::Refused {
            path: dir.path().display().to_string(),
            reason: "is over its size limit".into(),
        })
        .into());
    }
    match store.copy(&source, dst).await {
        Ok(()) => {
            tracing::info!(file = rel, bytes = size, from = %source, "unchanged since a stored checkpoint: copied in the store, not uploaded");
            reuse.known.remember(&reuse.job, size, sha256, dst.clone());
            Ok(Some(FileDigest {
                path: rel.to_string(),
                size,
                sha256,
            }))
        }
        Err(e) => {
            budget.fetch_add(size, Ordering::Relaxed);
            tracing::warn!(file = rel, from = %source, error = %e, "cannot copy inside the store; uploading the file");
            Ok(None)
        }
    }
}

/// One file: a blocking reader hashes each chunk and hands the same bytes to
/// the async writer, so the digest covers exactly the stored bytes.
async fn copy_hashing(
    store: Arc<dyn ObjectStore>,
    dir: Arc<ConfinedDir>,
    rel: String,
    listed: u64,
    dst: ObjectPath,
    budget: Arc<AtomicU64>,
) -> Result<(u64, Sha256Digest), StoreError> {
    const CHUNK: usize = 1 << 20;
    let (tx, mut rx) = tokio::sync::mpsc::channel::<bytes::Bytes>(4);
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
    let mut upload = ObjectUpload::sized(store, dst, listed);
    let mut write_error = None;
    while let Some(chunk) = rx.recv().await {
        if let Err(e) = upload.put(chunk).await {
            write_error = Some(e);
            break;
        }
    }
    drop(rx);
    let read = reader.await.map_err(|e| StoreError::Join(e.to_string()));
    match (read, write_error) {
        // What the reader found (the job's fault, above all) comes first;
        // aborting an upload that failed already sends nothing.
        (Err(e), _) => {
            upload.abort().await;
            Err(e)
        }
        (Ok(Err(e)), _) => {
            upload.abort().await;
            Err(e.into())
        }
        // The upload has cleaned up after itself already.
        (Ok(Ok(_)), Some(e)) => Err(StoreError::Upload(e)),
        (Ok(Ok(r)), None) => match upload.finish().await {
            Ok(()) => Ok(r),
            Err(e) => Err(StoreError::Upload(e)),
        },
    }
}
