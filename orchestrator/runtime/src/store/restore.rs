//! Restoring a job's checkpoint, and downloading stored files only as far
//! as they match the hash the chain attests.

use super::{
    CheckpointStore, ExpectedCheckpoint, Restored, SkippedCheckpoint, StoreError, StoredCheckpoint,
    check_file_list,
};
use crate::checkpoint::{CheckpointDigest, FileDigest, Sha256Digest};
use crate::confined::Limits;
use futures_util::StreamExt;
use object_store::ObjectStore;
use object_store::path::Path as ObjectPath;
use sha2::{Digest, Sha256};
use std::path::Path;
use std::sync::Arc;
use tokio::io::AsyncWriteExt;

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
