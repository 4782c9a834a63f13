//! Restoring a job's checkpoint, and downloading stored files only as far
//! as they match the hash the chain attests.

use super::{
    CheckpointStore, ExpectedCheckpoint, Restored, SkippedCheckpoint, StoreError, StoredCheckpoint,
    check_file_list,
};
use crate::checkpoint::{CheckpointDigest, FileDigest, Sha256Digest};
use crate::confined::Limits;
use bytes::Bytes;
use futures_util::future::BoxFuture;
use futures_util::{StreamExt, TryStreamExt};
use object_store::path::Path as ObjectPath;
use object_store::{GetOptions, GetRange, ObjectStore};
use sha2::{Digest, Sha256};
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// A file over this is fetched in ranges of this size, several at once
/// (S3 serves each from its own connection).
pub const RANGE_SIZE: u64 = 16 << 20;
/// Ranges of one file in flight at once: with [`FILES_IN_FLIGHT`] and
/// [`WRITES_QUEUED`], what a restore holds in memory is bounded by
/// `FILES_IN_FLIGHT × (RANGES_IN_FLIGHT + WRITES_QUEUED) × RANGE_SIZE`
/// (384 MiB).
const RANGES_IN_FLIGHT: usize = 8;
/// Files fetched at once.
const FILES_IN_FLIGHT: usize = 2;
/// Chunks waiting for a file's writer.
const WRITES_QUEUED: usize = 4;

impl CheckpointStore {
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
            let skip = |reason: String, store_failed: bool| SkippedCheckpoint {
                step: want.step,
                hash: want.hash,
                reason,
                store_failed,
            };
            // Collected before any await: a lazy filter held across one
            // trips rustc's Send inference in callers (rust-lang/rust#102211).
            let candidates: Vec<&StoredCheckpoint> = stored
                .iter()
                .filter(|s| s.hash == want.hash && s.step == want.step)
                .collect();
            if candidates.is_empty() {
                skipped.push(skip("not in the checkpoint store".into(), false));
                continue;
            }
            for candidate in candidates {
                let base = mcjs_protocol::store::layout::checkpoint(job_id, &candidate.key);
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
                    false,
                )
                .await;
                if let Err(e) = fetched {
                    let _ = tokio::fs::remove_dir_all(&staging).await;
                    let store_failed = matches!(&e, VerifyError::Store(e) if e.is_unavailable());
                    let reason = match e {
                        VerifyError::Tampered { .. } => format!("corrupt: {e}"),
                        VerifyError::Store(e) => format!("download failed: {e}"),
                        VerifyError::Descriptor { .. } | VerifyError::OverLimits { .. } => {
                            format!("refused: {e}")
                        }
                    };
                    tracing::warn!(step = want.step, key = %candidate.key, %reason, "stored checkpoint unusable, trying the next one");
                    skipped.push(skip(reason, store_failed));
                    continue;
                }
                self.adopt(job_id, candidate);
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

    /// Takes `checkpoint`'s files as known (their bytes verified against
    /// the attested hash by whoever restored them): a later checkpoint that
    /// holds one unchanged copies it in the store instead of sending it.
    /// For a checkpoint restored by another [`CheckpointStore`] of this
    /// node (a warm standby's copy).
    pub fn adopt(&self, job_id: &str, checkpoint: &StoredCheckpoint) {
        let base = mcjs_protocol::store::layout::checkpoint(job_id, &checkpoint.key);
        for f in &checkpoint.files {
            self.known.remember(
                job_id,
                f.size,
                f.sha256,
                ObjectPath::from(format!("{base}/files/{}", f.path)),
            );
        }
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
    let digest = match fetch_verified(
        store, prefix, &sorted, attested, limits, &staging, progress, true,
    )
    .await
    {
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
/// entry. `durable`: each file synced to the disk (what a user keeps, not a
/// restore, which is fetched again if the node restarts). Whatever it
/// returns, the caller removes `staging` on error.
async fn fetch_verified(
    store: &Arc<dyn ObjectStore>,
    prefix: &str,
    files: &[FileDigest],
    attested: Sha256Digest,
    limits: Limits,
    staging: &Path,
    progress: &(dyn Fn(u64) + Send + Sync),
    durable: bool,
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
    let received = AtomicU64::new(0);
    let seen = |n: u64| progress(received.fetch_add(n, Ordering::Relaxed) + n);
    // Boxed and collected first: a lazily mapped stream of async blocks
    // trips rustc's Send inference in callers (rust-lang/rust#102211).
    let fetches: Vec<BoxFuture<'_, Result<(), VerifyError>>> = files
        .iter()
        .map(|f| {
            let seen = &seen;
            Box::pin(async move {
                let rel = relative_file(prefix, &f.path)?;
                let src = ObjectPath::from(format!("{prefix}/{}", f.path));
                // Never more than was attested: a store that streams without
                // end is cut off at the attested size.
                let (size, actual) =
                    fetch_file(store, &src, &staging.join(rel), f.size, seen, durable).await?;
                if size != f.size || actual != f.sha256 {
                    return Err(VerifyError::Tampered {
                        file: f.path.clone(),
                        expected: f.sha256,
                        expected_size: f.size,
                        actual,
                        actual_size: size,
                    });
                }
                Ok(())
            }) as BoxFuture<'_, _>
        })
        .collect();
    futures_util::stream::iter(fetches)
        .buffer_unordered(FILES_IN_FLIGHT)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(digest)
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

/// Fetches `src` into `target` (its directory created), hashing what it
/// writes on a thread of its own; `seen` is told of each chunk's size;
/// `durable`: synced to the disk before it returns.
/// Reads no more than `limit` bytes (the attested size): an object the
/// store says is of another size is not read at all. An object over
/// [`RANGE_SIZE`] is read in ranges of that size, [`RANGES_IN_FLIGHT`] at
/// once, written in order. Returns the bytes written and their sha256 (or
/// the object's size as the store gives it, when that is not `limit`).
async fn fetch_file(
    store: &Arc<dyn ObjectStore>,
    src: &ObjectPath,
    target: &Path,
    limit: u64,
    seen: &(dyn Fn(u64) + Send + Sync),
    durable: bool,
) -> Result<(u64, Sha256Digest), StoreError> {
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
    let file = std::fs::File::create(target).map_err(|e| io("create", e))?;
    // Writing and hashing each on a thread of its own: the writer hands every
    // chunk (a reference, not a copy) to the hasher before writing it.
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<Bytes>>(WRITES_QUEUED);
    let (to_hash, mut hashed) = tokio::sync::mpsc::channel::<Vec<Bytes>>(WRITES_QUEUED);
    let path = target.to_path_buf();
    let hasher = tokio::task::spawn_blocking(move || {
        let mut h = Sha256::new();
        let mut size = 0u64;
        while let Some(chunks) = hashed.blocking_recv() {
            for chunk in chunks {
                h.update(&chunk);
                size += chunk.len() as u64;
            }
        }
        (size, Sha256Digest(h.finalize().into()))
    });
    let writer = tokio::task::spawn_blocking(move || {
        let mut file = file;
        while let Some(chunks) = rx.blocking_recv() {
            if to_hash.blocking_send(chunks.clone()).is_err() {
                break;
            }
            for chunk in &chunks {
                file.write_all(chunk)?;
            }
        }
        drop(to_hash);
        if durable {
            file.sync_all()?;
        }
        Ok::<_, std::io::Error>(())
    });
    let fed = feed(store, src, limit, seen, &tx).await;
    drop(tx);
    let written = writer
        .await
        .map_err(|e| StoreError::Join(e.to_string()))?
        .map_err(|source| StoreError::Io {
            action: "write",
            path,
            source,
        });
    let digest = hasher.await.map_err(|e| StoreError::Join(e.to_string()))?;
    match fed? {
        Some(other_size) => Ok((other_size, Sha256Digest([0; 32]))),
        None => written.map(|()| digest),
    }
}

/// Sends `src`'s bytes, in order and no more than `limit`, to the writer;
/// `Some(size)` when the object is `size` bytes, not `limit`: said by the
/// store before any byte is sent (over `limit`; read in ranges, any other
/// size), or found once more than `limit` came.
async fn feed(
    store: &Arc<dyn ObjectStore>,
    src: &ObjectPath,
    limit: u64,
    seen: &(dyn Fn(u64) + Send + Sync),
    tx: &tokio::sync::mpsc::Sender<Vec<Bytes>>,
) -> Result<Option<u64>, StoreError> {
    if limit > RANGE_SIZE {
        let ranges: Vec<std::ops::Range<u64>> = (0..limit)
            .step_by(RANGE_SIZE as usize)
            .map(|start| start..(start + RANGE_SIZE).min(limit))
            .collect();
        let mut parts = futures_util::stream::iter(ranges)
            .map(|range| async move {
                let options = GetOptions {
                    range: Some(GetRange::Bounded(range.clone())),
                    ..Default::default()
                };
                let got = store.get_opts(src, options).await?;
                let size = got.meta.size;
                if size != limit {
                    return Ok((size, Vec::new()));
                }
                // The chunks as they came off the connection, not copied
                // into one buffer: the writer and the hasher take them by
                // reference, in order.
                let chunks: Vec<Bytes> = got.into_stream().try_collect().await?;
                let len: u64 = chunks.iter().map(|c| c.len() as u64).sum();
                if len != range.end - range.start {
                    return Err(object_store::Error::Generic {
                        store: "restore",
                        source: format!("asked for bytes {range:?} of {src}, got {len}").into(),
                    });
                }
                Ok((size, chunks))
            })
            .buffered(RANGES_IN_FLIGHT);
        let mut first = true;
        while let Some(part) = parts.next().await {
            let (size, chunks) = match part {
                // A store that cannot read ranges: the whole object, streamed.
                Err(object_store::Error::NotImplemented) if first => break,
                other => other.map_err(CheckpointStore::object("read", src))?,
            };
            first = false;
            if size != limit {
                return Ok(Some(size));
            }
            seen(chunks.iter().map(|c| c.len() as u64).sum());
            if tx.send(chunks).await.is_err() {
                return Ok(None); // the writer failed; its error is reported
            }
        }
        if !first {
            return Ok(None);
        }
    }
    let got = store
        .get(src)
        .await
        .map_err(CheckpointStore::object("read", src))?;
    // Over the limit: not read. Shorter: read, and found short by the caller.
    if got.meta.size > limit {
        return Ok(Some(got.meta.size));
    }
    let mut stream = got.into_stream();
    let mut size = 0u64;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(CheckpointStore::object("read", src))?;
        size = size.saturating_add(chunk.len() as u64);
        if size > limit {
            // More than attested (a store that hid the size): cut off here.
            return Ok(Some(size));
        }
        seen(chunk.len() as u64);
        if tx.send(vec![chunk]).await.is_err() {
            break;
        }
    }
    Ok(None)
}
