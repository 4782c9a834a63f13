//! Data staging: a job's declared inputs fetched (`file://`, `https://`, or
//! `http://` — the hash, not the transport, is what is trusted) into a
//! node-local cache addressed by sha256, verified, and linked into the job's
//! data directory before the container starts.
//!
//! The URIs are the job owner's, so staging is bounded ([`StagingPolicy`]):
//! `file://` only below the roots the provider allows, resolved without
//! symlinks, special files or mount crossings; http(s) never to the
//! provider's own network (loopback, private, link-local, CGNAT, metadata
//! addresses), checked on the addresses actually connected to; every input
//! capped in size while it streams; transfers with timeouts. A refused
//! `file://` input says nothing about the host file (not whether it exists,
//! not its hash).

mod net;

pub use net::is_internal;

use crate::checkpoint::Sha256Digest;
use crate::confined::ConfinedDir;
use futures_util::StreamExt;
use net::{error_chain, http_client, internal_literal};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;

#[derive(Debug, thiserror::Error)]
pub enum StagingError {
    #[error(
        "input {name:?} from {uri} has sha256 {actual} but the job spec says {expected}; the source changed or the spec is wrong: refusing to run the job on it"
    )]
    HashMismatch {
        name: String,
        uri: String,
        expected: Sha256Digest,
        actual: Sha256Digest,
    },
    #[error("input {name:?}: {reason}")]
    BadInput { name: String, reason: String },
    /// Refused by the provider's policy or a limit. The reason never
    /// describes a host file.
    #[error("input {index} ({name:?}) refused: {reason}")]
    Refused {
        index: usize,
        name: String,
        reason: String,
    },
    #[error("input {name:?}: cannot fetch {uri}: {reason}")]
    Fetch {
        name: String,
        uri: String,
        reason: String,
    },
    #[error("cannot {action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl StagingError {
    /// Whether the job's declaration (not the node) caused this: the input
    /// is refused, unreachable, too big or not what the spec says. Only a
    /// failure of the node's own disk is the node's.
    pub fn is_job_fault(&self) -> bool {
        !matches!(self, Self::Io { .. })
    }
}

/// What the provider lets job owners stage from.
#[derive(Debug, Clone)]
pub struct StagingPolicy {
    /// Directories `file://` inputs may come from (`mcjs agent run
    /// --data-root`); none (the default) refuses every `file://` input.
    pub data_roots: Vec<PathBuf>,
    /// Let http(s) inputs reach loopback, private, link-local, CGNAT and
    /// metadata addresses (`--allow-private-data`): for a provider whose
    /// data lives on its own network.
    pub allow_private: bool,
    pub connect_timeout: Duration,
    /// The longest wait for the next bytes of a transfer.
    pub read_timeout: Duration,
    /// The cap of an input that declares no size.
    pub max_input_bytes: u64,
    /// The deployment's S3 store, where `s3://` inputs must live (under the
    /// job owner's `users/<owner>/` prefix, which the gateway checks):
    /// fetched through it, never with credentials of the node's own.
    pub s3_store: Option<S3Inputs>,
}

/// `s3://` inputs: the deployment's store and where it is.
#[derive(Debug, Clone)]
pub struct S3Inputs {
    pub location: mcjs_protocol::store::S3Location,
    pub store: Arc<dyn object_store::ObjectStore>,
}

impl S3Inputs {
    /// The store-relative path of an `s3://bucket/key` URI, when it lies in
    /// the deployment's store.
    pub fn path_of(&self, url: &url::Url) -> Option<String> {
        self.location.path_of_uri(url)
    }
}

impl Default for StagingPolicy {
    fn default() -> Self {
        Self {
            data_roots: Vec::new(),
            allow_private: false,
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(60),
            max_input_bytes: 1 << 40,
            s3_store: None,
        }
    }
}

/// One declared input of a job spec (`mcjs_spec::DataInput`) as staging
/// takes it: strings, as the spec wrote them, and the most bytes to stage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputToStage {
    /// The file name under the job's data directory.
    pub name: String,
    pub uri: String,
    /// 64 hex digits.
    pub sha256: String,
    /// The most bytes staged for it (the spec's declared size, at most the
    /// job's declared disk); `None`: the policy's `max_input_bytes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
}

impl InputToStage {
    /// A spec's input, staged up to `max_bytes`.
    pub fn declared(input: &mcjs_spec::DataInput, max_bytes: u64) -> Self {
        Self {
            name: input.name.as_str().to_string(),
            uri: input.uri.as_str().to_string(),
            sha256: input.sha256.to_string(),
            max_bytes: Some(max_bytes),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StagedInput {
    pub name: String,
    pub sha256: Sha256Digest,
    pub size: u64,
    /// Whether it was already in the cache (nothing fetched).
    pub cached: bool,
}

/// The node-local content-addressed cache: `<root>/sha256/<hex>`, each blob
/// written under a temporary name and renamed in only after verification.
pub struct DataCache {
    root: PathBuf,
    http: reqwest::Client,
    policy: StagingPolicy,
}

/// Every `file://` refusal reads the same, so that a job owner learns
/// nothing about the host's files from it.
const FILE_REFUSED: &str =
    "not under an allowed data root, not a readable regular file, or not the declared content";

impl DataCache {
    /// A cache under the default policy: no `file://` inputs, no internal addresses.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self::with_policy(root, StagingPolicy::default())
    }

    pub fn with_policy(root: impl Into<PathBuf>, policy: StagingPolicy) -> Self {
        Self {
            root: root.into(),
            http: http_client(&policy),
            policy,
        }
    }

    pub fn policy(&self) -> &StagingPolicy {
        &self.policy
    }

    pub fn blob_path(&self, hash: &Sha256Digest) -> PathBuf {
        self.root.join("sha256").join(hash.to_hex())
    }

    /// Stages every input into `data_dir`. The first failure stops staging
    /// and is returned: the job must not start on unverified data.
    #[tracing::instrument(skip_all, fields(data_dir = %data_dir.display()))]
    pub async fn stage(
        &self,
        inputs: &[InputToStage],
        data_dir: &Path,
    ) -> Result<Vec<StagedInput>, StagingError> {
        let io = |action, path: &Path| {
            let path = path.to_path_buf();
            move |source| StagingError::Io {
                action,
                path,
                source,
            }
        };
        // Check the whole declaration before fetching anything.
        let mut wanted = Vec::with_capacity(inputs.len());
        for (index, input) in inputs.iter().enumerate() {
            wanted.push(self.validate(index, input)?);
        }
        for dir in [
            self.root.join("sha256"),
            self.root.join("tmp"),
            data_dir.to_path_buf(),
        ] {
            tokio::fs::create_dir_all(&dir)
                .await
                .map_err(io("create", &dir))?;
        }
        let mut staged = Vec::with_capacity(inputs.len());
        for (index, (input, expected)) in inputs.iter().zip(wanted).enumerate() {
            let blob = self.blob_path(&expected);
            let cached = tokio::fs::try_exists(&blob).await.unwrap_or(false);
            // A cached blob answers only a file:// input whose own path is
            // allowed: the cache must not lend another job's file to a URI
            // outside the data roots.
            if cached && input.uri.starts_with("file:") && !self.local_allowed(&input.uri) {
                return Err(StagingError::Refused {
                    index,
                    name: input.name.clone(),
                    reason: FILE_REFUSED.into(),
                });
            }
            if !cached {
                self.fetch(index, input, expected, &blob).await?;
            }
            let size = tokio::fs::metadata(&blob)
                .await
                .map_err(io("stat", &blob))?
                .len();
            if size > self.limit(input) {
                return Err(StagingError::Refused {
                    index,
                    name: input.name.clone(),
                    reason: format!("larger than its limit of {} bytes", self.limit(input)),
                });
            }
            let target = data_dir.join(&input.name);
            let _ = tokio::fs::remove_file(&target).await;
            if tokio::fs::hard_link(&blob, &target).await.is_err() {
                // Another filesystem: a copy costs space but not correctness.
                tokio::fs::copy(&blob, &target)
                    .await
                    .map_err(io("copy the input to", &target))?;
            }
            tracing::info!(name = %input.name, sha256 = %expected, size, cached, "input staged");
            staged.push(StagedInput {
                name: input.name.clone(),
                sha256: expected,
                size,
                cached,
            });
        }
        Ok(staged)
    }

    fn limit(&self, input: &InputToStage) -> u64 {
        input.max_bytes.unwrap_or(self.policy.max_input_bytes)
    }

    /// Whether a `file://` URI names a readable regular file under a data root.
    fn local_allowed(&self, uri: &str) -> bool {
        url::Url::parse(uri)
            .ok()
            .and_then(|u| u.to_file_path().ok())
            .is_some_and(|p| self.open_local(&p).is_some())
    }

    /// Opens a `file://` input confined to the data root it lies under.
    fn open_local(&self, path: &Path) -> Option<std::fs::File> {
        self.policy.data_roots.iter().find_map(|root| {
            let rel = path.strip_prefix(root).ok()?.to_str()?;
            if rel.is_empty() {
                return None;
            }
            let (file, _) = ConfinedDir::open(root).ok()?.open_file(rel).ok()?;
            Some(file)
        })
    }

    async fn fetch(
        &self,
        index: usize,
        input: &InputToStage,
        expected: Sha256Digest,
        blob: &Path,
    ) -> Result<(), StagingError> {
        let fetch_err = |reason: String| StagingError::Fetch {
            name: input.name.clone(),
            uri: input.uri.clone(),
            reason,
        };
        let refused = |reason: String| StagingError::Refused {
            index,
            name: input.name.clone(),
            reason,
        };
        let limit = self.limit(input);
        let too_big = || refused(format!("larger than its limit of {limit} bytes"));
        let tmp =
            self.root
                .join("tmp")
                .join(format!("{}.{}", expected.to_hex(), std::process::id()));
        let tmp_io = |action| {
            let path = tmp.clone();
            move |source| StagingError::Io {
                action,
                path,
                source,
            }
        };
        let url = url::Url::parse(&input.uri).map_err(|e| fetch_err(e.to_string()))?;
        let mut out = tokio::fs::File::create(&tmp)
            .await
            .map_err(tmp_io("create"))?;
        let mut hasher = Sha256::new();
        let mut size = 0u64;
        let local = url.scheme() == "file";
        let result: Result<(), StagingError> = async {
            match url.scheme() {
                "file" => {
                    let path = url
                        .to_file_path()
                        .map_err(|_| refused(FILE_REFUSED.into()))?;
                    let Some(src) = self.open_local(&path) else {
                        return Err(refused(FILE_REFUSED.into()));
                    };
                    let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<u8>>(4);
                    let reader = tokio::task::spawn_blocking(move || {
                        use std::io::Read;
                        let mut src = src.take(limit.saturating_add(1));
                        loop {
                            let mut buf = vec![0u8; 1 << 20];
                            match src.read(&mut buf) {
                                Ok(0) => return true,
                                Ok(n) => {
                                    buf.truncate(n);
                                    if tx.blocking_send(buf).is_err() {
                                        return true;
                                    }
                                }
                                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                                Err(_) => return false,
                            }
                        }
                    });
                    while let Some(chunk) = rx.recv().await {
                        size += chunk.len() as u64;
                        if size > limit {
                            return Err(too_big());
                        }
                        hasher.update(&chunk);
                        out.write_all(&chunk).await.map_err(tmp_io("write"))?;
                    }
                    if !reader.await.unwrap_or(false) {
                        return Err(refused(FILE_REFUSED.into()));
                    }
                }
                "http" | "https" => {
                    if !self.policy.allow_private
                        && let Some(ip) = internal_literal(&url)
                    {
                        return Err(refused(format!(
                            "{ip} is an internal address, which data transfers may not reach"
                        )));
                    }
                    let resp = self
                        .http
                        .get(url.clone())
                        .send()
                        .await
                        .and_then(|r| r.error_for_status())
                        .map_err(|e| fetch_err(error_chain(&e)))?;
                    if resp.content_length().is_some_and(|n| n > limit) {
                        return Err(too_big());
                    }
                    let mut body = resp.bytes_stream();
                    while let Some(chunk) = body.next().await {
                        let chunk = chunk.map_err(|e| fetch_err(error_chain(&e)))?;
                        size += chunk.len() as u64;
                        if size > limit {
                            return Err(too_big());
                        }
                        hasher.update(&chunk);
                        out.write_all(&chunk).await.map_err(tmp_io("write"))?;
                    }
                }
                "s3" => {
                    let Some(s3) = &self.policy.s3_store else {
                        return Err(refused(
                            "this node's deployment has no S3 store; use https:// for public data".into(),
                        ));
                    };
                    let Some(path) = s3.path_of(&url) else {
                        return Err(refused(format!(
                            "s3:// inputs must be in the deployment's store (s3://{}/{}), under the owner's users/<owner>/ prefix",
                            s3.location.bucket, s3.location.prefix
                        )));
                    };
                    let object = object_store::path::Path::from(path.as_str());
                    let got = s3.store.get(&object).await.map_err(|e| match e {
                        object_store::Error::PermissionDenied { .. } => refused(format!(
                            "the store gateway refused {path}: s3:// inputs must be under the job owner's users/<owner>/ prefix"
                        )),
                        other => fetch_err(other.to_string()),
                    })?;
                    if got.meta.size > limit {
                        return Err(too_big());
                    }
                    let mut body = got.into_stream();
                    while let Some(chunk) = body.next().await {
                        let chunk = chunk.map_err(|e| fetch_err(e.to_string()))?;
                        size += chunk.len() as u64;
                        if size > limit {
                            return Err(too_big());
                        }
                        hasher.update(&chunk);
                        out.write_all(&chunk).await.map_err(tmp_io("write"))?;
                    }
                }
                other => {
                    return Err(fetch_err(format!(
                        "unsupported scheme {other:?}; use file://, https://, http:// or s3:// (the deployment's store)"
                    )));
                }
            }
            out.sync_all().await.map_err(tmp_io("sync"))?;
            Ok(())
        }
        .await;
        if let Err(e) = result {
            let _ = tokio::fs::remove_file(&tmp).await;
            return Err(e);
        }
        let actual = Sha256Digest(hasher.finalize().into());
        if actual != expected {
            let _ = tokio::fs::remove_file(&tmp).await;
            // The hash of a host file is the host's secret.
            if local {
                return Err(refused(FILE_REFUSED.into()));
            }
            return Err(StagingError::HashMismatch {
                name: input.name.clone(),
                uri: input.uri.clone(),
                expected,
                actual,
            });
        }
        // Read-only: the blob is shared by every job that declares it.
        use std::os::unix::fs::PermissionsExt;
        tokio::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o444))
            .await
            .map_err(tmp_io("protect"))?;
        tokio::fs::rename(&tmp, blob)
            .await
            .map_err(tmp_io("move into the cache"))?;
        Ok(())
    }

    fn validate(&self, index: usize, input: &InputToStage) -> Result<Sha256Digest, StagingError> {
        let hash = validate(input)?;
        if input.uri.starts_with("file:") && self.policy.data_roots.is_empty() {
            return Err(StagingError::Refused {
                index,
                name: input.name.clone(),
                reason: "this node takes no file:// inputs (its provider allows no data root)"
                    .into(),
            });
        }
        Ok(hash)
    }
}

fn validate(input: &InputToStage) -> Result<Sha256Digest, StagingError> {
    let bad = |reason: String| StagingError::BadInput {
        name: input.name.clone(),
        reason,
    };
    let name_ok = !input.name.is_empty()
        && input.name != "."
        && input.name != ".."
        && !input.name.contains('/')
        && !input.name.contains('\0');
    if !name_ok {
        return Err(bad(
            "the name must be a plain file name (no '/', not '.' or '..')".into(),
        ));
    }
    let is_hex = input.sha256.len() == 64
        && input
            .sha256
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if !is_hex {
        return Err(bad(format!(
            "sha256 {:?} must be 64 lowercase hex digits",
            input.sha256
        )));
    }
    Ok(Sha256Digest::from_hex(&input.sha256).expect("checked hex"))
}

#[cfg(test)]
mod tests;
