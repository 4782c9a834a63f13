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

use crate::checkpoint::Sha256Digest;
use crate::confined::ConfinedDir;
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
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

/// One declared input of a job spec.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataInput {
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

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StagedInput {
    pub name: String,
    pub sha256: Sha256Digest,
    pub size: u64,
    /// Whether it was already in the cache (nothing fetched).
    pub cached: bool,
}

/// Whether `ip` is on the provider's own side: loopback, private,
/// link-local (cloud metadata at 169.254.169.254), CGNAT, unspecified,
/// multicast, reserved, or an IPv6 form of one of those (fd00:ec2::254 is
/// unique-local).
pub fn is_internal(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_internal_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_internal_v4(v4);
            }
            let seg = v6.segments();
            // NAT64 (64:ff9b::/96) and 6to4 (2002::/16) carry an IPv4 address.
            if seg[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
                let [a, b] = seg[6].to_be_bytes();
                let [c, d] = seg[7].to_be_bytes();
                return is_internal_v4(Ipv4Addr::new(a, b, c, d));
            }
            if seg[0] == 0x2002 {
                let [a, b] = seg[1].to_be_bytes();
                let [c, d] = seg[2].to_be_bytes();
                return is_internal_v4(Ipv4Addr::new(a, b, c, d));
            }
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (seg[0] & 0xfe00) == 0xfc00 // unique local
                || (seg[0] & 0xffc0) == 0xfe80 // link-local
                || (seg[0] & 0xffc0) == 0xfec0 // site-local (deprecated)
                || (seg[..6] == [0, 0, 0, 0, 0, 0] && v6 != Ipv6Addr::UNSPECIFIED) // IPv4-compatible
        }
    }
}

fn is_internal_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || a == 0
        || (a == 100 && (64..128).contains(&b)) // CGNAT 100.64/10
        || (a == 192 && b == 0 && ip.octets()[2] == 0) // IETF protocol assignments
        || (a == 198 && (b == 18 || b == 19)) // benchmarking
        || a >= 240 // reserved
}

/// Resolves names for data transfers, keeping only public addresses: hyper
/// connects to what this returns, so the check holds for the address
/// actually connected to, whatever DNS answers the next time (rebinding).
struct PublicOnly;

impl reqwest::dns::Resolve for PublicOnly {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_string();
        Box::pin(async move {
            let all: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let public: Vec<SocketAddr> =
                all.into_iter().filter(|a| !is_internal(a.ip())).collect();
            if public.is_empty() {
                return Err(format!(
                    "{host} resolves only to internal addresses (loopback, private, link-local or metadata), which data transfers may not reach"
                )
                .into());
            }
            Ok(Box::new(public.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// The internal address literal in `url`'s host, if any (a literal never
/// goes through the resolver).
fn internal_literal(url: &url::Url) -> Option<IpAddr> {
    let ip = match url.host()? {
        url::Host::Ipv4(v4) => IpAddr::V4(v4),
        url::Host::Ipv6(v6) => IpAddr::V6(v6),
        url::Host::Domain(_) => return None,
    };
    is_internal(ip).then_some(ip)
}

fn http_client(policy: &StagingPolicy) -> reqwest::Client {
    let allow_private = policy.allow_private;
    let mut builder = reqwest::Client::builder()
        // A proxy would connect for us, past the address check.
        .no_proxy()
        .connect_timeout(policy.connect_timeout)
        .read_timeout(policy.read_timeout)
        .redirect(reqwest::redirect::Policy::custom(move |attempt| {
            if attempt.previous().len() >= 5 {
                attempt.error("more than 5 redirects")
            } else if !allow_private && internal_literal(attempt.url()).is_some() {
                attempt.error("redirected to an internal address")
            } else if !matches!(attempt.url().scheme(), "http" | "https") {
                attempt.error("redirected to another scheme")
            } else {
                attempt.follow()
            }
        }));
    if !allow_private {
        builder = builder.dns_resolver(Arc::new(PublicOnly));
    }
    builder.build().expect("an HTTP client for data staging")
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
        inputs: &[DataInput],
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

    fn limit(&self, input: &DataInput) -> u64 {
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
        input: &DataInput,
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

    fn validate(&self, index: usize, input: &DataInput) -> Result<Sha256Digest, StagingError> {
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

/// An error with its causes: reqwest's own message hides why a connection failed.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

fn validate(input: &DataInput) -> Result<Sha256Digest, StagingError> {
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
mod tests {
    use super::*;

    fn sha(bytes: &[u8]) -> String {
        hex::encode(Sha256::digest(bytes))
    }

    fn file_input(name: &str, path: &Path, sha256: String) -> DataInput {
        DataInput {
            name: name.into(),
            uri: url::Url::from_file_path(path).unwrap().to_string(),
            sha256,
            max_bytes: None,
        }
    }

    /// A cache whose provider allows `root` as a data root.
    fn cache_with_root(t: &Path, root: &Path) -> DataCache {
        DataCache::with_policy(
            t.join("cache"),
            StagingPolicy {
                data_roots: vec![root.to_path_buf()],
                ..StagingPolicy::default()
            },
        )
    }

    fn http_input(uri: String, body: &[u8]) -> DataInput {
        DataInput {
            name: "train.csv".into(),
            uri,
            sha256: sha(body),
            max_bytes: None,
        }
    }

    /// Serves `response` (head and body) to each of `n` connections.
    fn serve(n: usize, response: impl Fn(&mut std::net::TcpStream) + Send + 'static) -> SocketAddr {
        use std::io::Read;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            for _ in 0..n {
                let Ok((mut conn, _)) = listener.accept() else {
                    return;
                };
                let mut req = [0u8; 1024];
                let _ = conn.read(&mut req);
                response(&mut conn);
            }
        });
        addr
    }

    fn ok_response(body: Vec<u8>) -> impl Fn(&mut std::net::TcpStream) + Send + 'static {
        move |conn| {
            use std::io::Write;
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = conn.write_all(head.as_bytes());
            let _ = conn.write_all(&body);
        }
    }

    #[tokio::test]
    async fn a_verified_input_lands_in_the_cache_and_the_data_dir() {
        let t = tempfile::tempdir().unwrap();
        let src = t.path().join("src.csv");
        std::fs::write(&src, b"1,2,0\n").unwrap();
        let cache = cache_with_root(t.path(), t.path());
        let data = t.path().join("data");
        let inputs = [file_input("train.csv", &src, sha(b"1,2,0\n"))];
        let staged = cache.stage(&inputs, &data).await.unwrap();
        assert_eq!(staged[0].size, 6);
        assert!(!staged[0].cached);
        assert_eq!(std::fs::read(data.join("train.csv")).unwrap(), b"1,2,0\n");
        assert!(cache.blob_path(&staged[0].sha256).exists());
        // Second time: from the cache.
        let again = cache.stage(&inputs, &t.path().join("data2")).await.unwrap();
        assert!(again[0].cached);
    }

    #[tokio::test]
    async fn the_cache_does_not_lend_a_blob_to_a_file_uri_outside_the_data_roots() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("datasets");
        std::fs::create_dir(&root).unwrap();
        std::fs::write(root.join("private.csv"), b"another job's data").unwrap();
        let cache = cache_with_root(t.path(), &root);
        let hash = sha(b"another job's data");
        let owner = file_input("a", &root.join("private.csv"), hash.clone());
        cache.stage(&[owner], &t.path().join("d1")).await.unwrap();
        // The blob is cached now; a URI outside the roots with its hash gets nothing.
        let thief = file_input("a", Path::new("/etc/hostname"), hash);
        let err = cache
            .stage(&[thief], &t.path().join("d2"))
            .await
            .unwrap_err();
        assert!(err.to_string().contains(FILE_REFUSED), "{err}");
        assert!(!t.path().join("d2/a").exists());
    }

    #[tokio::test]
    async fn a_hash_mismatch_on_a_host_file_is_refused_without_revealing_its_hash() {
        let t = tempfile::tempdir().unwrap();
        let src = t.path().join("src.csv");
        std::fs::write(&src, b"tampered").unwrap();
        let cache = cache_with_root(t.path(), t.path());
        let want = sha(b"original");
        let err = cache
            .stage(
                &[file_input("train.csv", &src, want.clone())],
                &t.path().join("data"),
            )
            .await
            .unwrap_err();
        let msg = err.to_string();
        assert!(
            matches!(err, StagingError::Refused { index: 0, .. }),
            "{msg}"
        );
        assert!(!msg.contains(&sha(b"tampered")), "{msg}");
        assert!(msg.contains(FILE_REFUSED), "{msg}");
        assert!(
            !cache
                .blob_path(&Sha256Digest::from_hex(&want).unwrap())
                .exists()
        );
        assert!(!t.path().join("data/train.csv").exists());
        assert_eq!(
            std::fs::read_dir(t.path().join("cache/tmp"))
                .unwrap()
                .count(),
            0
        );
    }

    #[tokio::test]
    async fn host_files_outside_the_data_roots_read_exactly_like_missing_ones() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("datasets");
        std::fs::create_dir(&root).unwrap();
        std::fs::write(t.path().join("secret"), b"host secret").unwrap();
        std::os::unix::fs::symlink(t.path().join("secret"), root.join("link")).unwrap();
        std::os::unix::fs::symlink("/dev/zero", root.join("zero")).unwrap();
        let cache = cache_with_root(t.path(), &root);
        let mut messages = Vec::new();
        for path in [
            PathBuf::from("/dev/zero"),
            PathBuf::from("/etc/passwd"),
            t.path().join("secret"),
            root.join("link"),
            root.join("zero"),
            root.join("../secret"),
            root.join("missing"),
        ] {
            // Even with the right hash: the host file is not the job's.
            let input = file_input("x", &path, sha(b"host secret"));
            let err = tokio::time::timeout(
                Duration::from_secs(10),
                cache.stage(&[input], &t.path().join("data")),
            )
            .await
            .expect("never hangs")
            .unwrap_err();
            assert!(err.is_job_fault(), "{err}");
            messages.push(
                err.to_string()
                    .replace(&url::Url::from_file_path(&path).unwrap().to_string(), ""),
            );
        }
        let first = &messages[0];
        assert!(messages.iter().all(|m| m == first), "{messages:#?}");
    }

    #[tokio::test]
    async fn without_a_data_root_no_file_input_is_taken() {
        let t = tempfile::tempdir().unwrap();
        let src = t.path().join("src");
        std::fs::write(&src, b"x").unwrap();
        let cache = DataCache::new(t.path().join("cache"));
        let err = cache
            .stage(&[file_input("x", &src, sha(b"x"))], &t.path().join("data"))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("no file:// inputs"), "{err}");
    }

    #[tokio::test]
    async fn an_input_over_its_size_is_cut_off_while_streaming() {
        let t = tempfile::tempdir().unwrap();
        let src = t.path().join("big");
        std::fs::write(&src, vec![7u8; 10_000]).unwrap();
        let cache = cache_with_root(t.path(), t.path());
        let mut input = file_input("big", &src, sha(&vec![7u8; 10_000]));
        input.max_bytes = Some(4096);
        let err = cache
            .stage(&[input.clone()], &t.path().join("data"))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("limit of 4096 bytes"), "{err}");
        input.max_bytes = Some(10_000);
        cache.stage(&[input], &t.path().join("data")).await.unwrap();
    }

    #[tokio::test]
    async fn bad_declarations_are_refused_before_fetching() {
        let t = tempfile::tempdir().unwrap();
        let cache = cache_with_root(t.path(), t.path());
        let mut i = file_input("../escape", Path::new("/nonexistent"), sha(b""));
        let err = cache.stage(&[i.clone()], t.path()).await.unwrap_err();
        assert!(err.to_string().contains("plain file name"), "{err}");
        i.name = "ok".into();
        i.sha256 = "abc".into();
        let err = cache.stage(&[i.clone()], t.path()).await.unwrap_err();
        assert!(err.to_string().contains("64 lowercase hex"), "{err}");
        i.sha256 = sha(b"");
        i.uri = "ftp://example.org/x".into();
        let err = cache.stage(&[i], t.path()).await.unwrap_err();
        assert!(err.to_string().contains("unsupported scheme"), "{err}");
    }

    #[tokio::test]
    async fn inputs_are_fetched_over_http_where_the_provider_allows_its_network() {
        let body = b"0.5,0.25,1\n".to_vec();
        let addr = serve(1, ok_response(body.clone()));
        let t = tempfile::tempdir().unwrap();
        let cache = DataCache::with_policy(
            t.path().join("cache"),
            StagingPolicy {
                allow_private: true,
                ..StagingPolicy::default()
            },
        );
        let input = http_input(format!("http://{addr}/train.csv"), &body);
        cache.stage(&[input], &t.path().join("data")).await.unwrap();
        assert_eq!(
            std::fs::read(t.path().join("data/train.csv")).unwrap(),
            body
        );
    }

    #[tokio::test]
    async fn loopback_and_metadata_addresses_are_refused_by_default() {
        let body = b"internal".to_vec();
        let addr = serve(3, ok_response(body.clone()));
        let t = tempfile::tempdir().unwrap();
        let cache = DataCache::new(t.path().join("cache"));
        for uri in [
            format!("http://{addr}/x"),
            format!("http://localhost:{}/x", addr.port()),
            format!("http://[::ffff:127.0.0.1]:{}/x", addr.port()),
            "http://169.254.169.254/latest/meta-data/".to_string(),
            "http://[fd00:ec2::254]/latest/meta-data/".to_string(),
        ] {
            let err = cache
                .stage(&[http_input(uri.clone(), &body)], &t.path().join("data"))
                .await
                .unwrap_err();
            let msg = err.to_string();
            assert!(err.is_job_fault(), "{msg}");
            assert!(msg.contains("internal address"), "{uri}: {msg}");
        }
        assert!(!t.path().join("data/train.csv").exists());
    }

    #[tokio::test]
    async fn a_redirect_to_an_internal_address_is_refused() {
        let inner = serve(1, ok_response(b"internal".to_vec()));
        let outer = serve(1, move |conn| {
            use std::io::Write;
            let head = format!(
                "HTTP/1.1 302 Found\r\nLocation: http://{inner}/x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            );
            let _ = conn.write_all(head.as_bytes());
        });
        // The client alone (without fetch's check of the first URL) reaches
        // the outer server on loopback; its redirect policy must refuse the rest.
        let client = http_client(&StagingPolicy::default());
        let err = client
            .get(format!("http://{outer}/x"))
            .send()
            .await
            .unwrap_err();
        assert!(
            error_chain(&err).contains("internal address"),
            "{}",
            error_chain(&err)
        );
    }

    #[test]
    fn internal_addresses_are_recognised() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "255.255.255.255",
            "224.0.0.1",
            "::1",
            "::",
            "fd00:ec2::254",
            "fe80::1",
            "::ffff:10.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "2002:7f00:1::",
        ] {
            assert!(is_internal(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["1.1.1.1", "8.8.8.8", "2606:4700::1111", "100.128.0.1"] {
            assert!(!is_internal(ip.parse().unwrap()), "{ip}");
        }
    }
}
