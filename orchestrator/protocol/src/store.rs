//! The store gateway: how agents and job owners reach a shared S3 store
//! without holding its credentials.
//!
//! Only the scheduler's operator holds the store's keys. Everyone else sends
//! the scheduler a [`StoreRequest`], sealed in a [`crate::SignedRequest`] for
//! [`STORE_SIGN_PATH`] (an agent with its node's operator key, an owner with
//! its wallet), naming the objects it wants to read or write. The scheduler
//! checks each against the chain (docs/store.md, "Who may touch what") and
//! answers with short-lived presigned URLs ([`Grant`]); the bytes then travel
//! straight between the client and the store. Listing and the two ends of a
//! multipart upload carry no object bytes, so the scheduler performs them
//! itself and answers with their result.
//!
//! A job's spec is published through [`STORE_SPEC_PATH`]: the scheduler
//! checks that the body is a spec whose canonical hash names it, and writes
//! it, so nobody can put other bytes under a spec's name.
//!
//! The object layout is shared by everyone: [`layout`] makes every path,
//! [`ObjectKind::classify`] reads them back.

use serde::{Deserialize, Serialize};

pub mod layout;

/// `POST` a sealed [`StoreRequest`]; the answer is a [`StoreResponse`], or
/// `{"error": ...}` with 400, 401 or 403.
pub const STORE_SIGN_PATH: &str = "/v1/store/sign";
/// `POST` a sealed [`SpecUpload`]; the answer is a [`SpecStored`].
pub const STORE_SPEC_PATH: &str = "/v1/store/spec";
/// `GET` the deployment's store: a [`StoreInfo`].
pub const STORE_INFO_PATH: &str = "/v1/store";

/// How long a presigned URL is valid. A transfer only has to *start* within
/// it (S3 checks the signature when the request arrives), so a long
/// download is not cut off; every part of a multipart upload gets its own.
pub const GRANT_TTL_SECS: u64 = 300;

/// Largest spec the gateway accepts (a spec is a few KiB of JSON).
pub const MAX_SPEC_BYTES: usize = 256 * 1024;

/// Largest number of operations in one request.
pub const MAX_OPS: usize = 256;

/// Who a request speaks as.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Role {
    /// The agent of a node, signing with the node's operator key.
    Node { node: String },
    /// A job owner (or a user about to become one), signing with its wallet.
    Owner,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreRequest {
    pub role: Role,
    /// The signer's clock ([`crate::MAX_CLOCK_SKEW_MS`] window).
    pub sent_at_unix_ms: i64,
    pub ops: Vec<StoreOp>,
}

/// One thing a client wants to do. Paths are relative to the deployment's
/// store (its bucket and prefix), '/'-separated, as `object_store` writes them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum StoreOp {
    Get {
        path: String,
    },
    Head {
        path: String,
    },
    /// A URL to PUT the object. `size` is signed into the URL as its
    /// `Content-Length`, so exactly that many bytes can be sent; an owner's
    /// upload must give it (the gateway holds each wallet to its quota).
    Put {
        path: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        size: Option<u64>,
    },
    Delete {
        path: String,
    },
    /// Performed by the scheduler: the objects under `prefix`, and with
    /// `delimiter` the common prefixes one level down.
    List {
        prefix: String,
        delimiter: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        continuation: Option<String>,
    },
    /// Performed by the scheduler: starts a multipart upload of `path`.
    CreateMultipart {
        path: String,
    },
    /// A URL to PUT part `part` (1-based) of an upload; `size` as for
    /// [`StoreOp::Put`].
    UploadPart {
        path: String,
        upload_id: String,
        part: u16,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        size: Option<u64>,
    },
    /// Performed by the scheduler: completes an upload from its parts' ETags.
    CompleteMultipart {
        path: String,
        upload_id: String,
        etags: Vec<String>,
    },
    /// Performed by the scheduler.
    AbortMultipart {
        path: String,
        upload_id: String,
    },
    /// A URL to copy the object at `from` to `path` inside the store (S3's
    /// CopyObject: a PUT of `path` with the source signed into it as
    /// `x-amz-copy-source`), so that bytes the store holds already are not
    /// sent again: a checkpoint file that did not change since the node's
    /// last checkpoint. Only from one of a job's checkpoints to another of
    /// the same job; the caller must be allowed to read `from` and write
    /// `path`.
    Copy {
        path: String,
        from: String,
    },
}

impl StoreOp {
    pub fn path(&self) -> &str {
        match self {
            StoreOp::Get { path }
            | StoreOp::Head { path }
            | StoreOp::Put { path, .. }
            | StoreOp::Delete { path }
            | StoreOp::CreateMultipart { path }
            | StoreOp::UploadPart { path, .. }
            | StoreOp::CompleteMultipart { path, .. }
            | StoreOp::AbortMultipart { path, .. }
            | StoreOp::Copy { path, .. } => path,
            StoreOp::List { prefix, .. } => prefix,
        }
    }

    /// The bytes a transfer declares it will write (`Put`, `UploadPart`).
    pub fn declared_size(&self) -> Option<u64> {
        match self {
            StoreOp::Put { size, .. } | StoreOp::UploadPart { size, .. } => *size,
            _ => None,
        }
    }

    /// Whether the operation changes what the store holds.
    pub fn writes(&self) -> bool {
        !matches!(
            self,
            StoreOp::Get { .. } | StoreOp::Head { .. } | StoreOp::List { .. }
        )
    }
}

/// The answer to each operation, in order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Grant {
    /// Send `method` to `url` (with the object's bytes for a PUT), with
    /// `headers`: they are signed into the URL, and the store refuses the
    /// request without them (a job's output is written create-only:
    /// `if-none-match: *`).
    Url {
        method: String,
        url: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        headers: Vec<(String, String)>,
    },
    Listing(Listing),
    Upload {
        upload_id: String,
    },
    Done,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Listing {
    pub objects: Vec<ListedObject>,
    /// With a delimiter: the "directories" one level below the prefix.
    pub prefixes: Vec<String>,
    /// Set when there is more: send the same `List` with this continuation.
    pub continuation: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListedObject {
    pub path: String,
    pub size: u64,
    /// RFC 3339.
    pub last_modified: String,
    pub e_tag: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreResponse {
    pub grants: Vec<Grant>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpecUpload {
    pub sent_at_unix_ms: i64,
    /// The spec's canonical JSON (RFC 8785).
    pub spec: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpecStored {
    /// The path it is stored under: `specs/<sha256>.json`.
    pub path: String,
    /// Whether it was already there.
    pub existed: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreInfo {
    /// The deployment's store, without credentials: `file:///dir` (every
    /// process opens the directory itself) or `s3://bucket/prefix?...`
    /// (reached through this gateway).
    pub url: String,
}

/// What an object path is, by the shared layout. Anything else is
/// [`ObjectKind::Other`], which nobody but the operator may touch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ObjectKind<'a> {
    /// `specs/<hash>.json`.
    Spec {
        hash: &'a str,
    },
    /// `jobs/<job>/checkpoints/<key>/…`; `generation` is parsed from the key
    /// (`<step>-g<generation>-<nonce>`), `None` when the path stops at the
    /// job's checkpoint directory (a listing) or the key has no generation.
    Checkpoint {
        job: &'a str,
        key: Option<&'a str>,
        generation: Option<u32>,
        step: Option<u64>,
    },
    /// `jobs/<job>/output` and below; `generation` from the segment after
    /// it (`g<generation>`), `None` when the path stops above it or names
    /// none. Outputs are fenced by generation as checkpoints are: a node
    /// writes only under its own, and `mcjs job output` reads the
    /// completing generation's.
    Output {
        job: &'a str,
        generation: Option<u32>,
    },
    /// `jobs/<job>/logs` and below; `generation` from the segment after it
    /// (`g<generation>`). A node writes only its own generation's chunks;
    /// the job's owner reads them all (`mcjs job logs`).
    Logs {
        job: &'a str,
        generation: Option<u32>,
    },
    /// `users/<owner>/…`.
    UserData {
        owner: &'a str,
    },
    Other,
}

fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

fn plain_segment(s: &str) -> bool {
    !s.is_empty()
        && s != "."
        && s != ".."
        && s.bytes()
            .all(|b| b.is_ascii_graphic() && b != b'\\' && b != b'%')
}

/// Parses a checkpoint key `<step, 20 digits>-g<generation>-<16 hex>`.
pub fn parse_checkpoint_key(key: &str) -> Option<(u64, u32)> {
    let mut parts = key.splitn(3, '-');
    let step = parts.next()?;
    let generation = parts.next()?.strip_prefix('g')?;
    let nonce = parts.next()?;
    if step.len() != 20
        || !step.bytes().all(|b| b.is_ascii_digit())
        || generation.is_empty()
        || !generation.bytes().all(|b| b.is_ascii_digit())
        || nonce.len() != 16
        || !nonce.bytes().all(|b| b.is_ascii_hexdigit())
    {
        return None;
    }
    Some((step.parse().ok()?, generation.parse().ok()?))
}

impl<'a> ObjectKind<'a> {
    /// Classifies a store-relative path. A path with an empty, `.` or `..`
    /// segment, a backslash or a percent sign is [`ObjectKind::Other`]: the
    /// layout never produces one, and an S3 key is taken literally.
    pub fn classify(path: &'a str) -> Self {
        let segments: Vec<&str> = path.trim_end_matches('/').split('/').collect();
        if !segments.iter().all(|s| plain_segment(s)) {
            return ObjectKind::Other;
        }
        match segments.as_slice() {
            ["specs", name] => match name.strip_suffix(".json") {
                Some(hash) if hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit()) => {
                    ObjectKind::Spec { hash }
                }
                _ => ObjectKind::Other,
            },
            ["jobs", job, "checkpoints"] => ObjectKind::Checkpoint {
                job,
                key: None,
                generation: None,
                step: None,
            },
            ["jobs", job, "checkpoints", key, ..] => {
                let parsed = parse_checkpoint_key(key);
                ObjectKind::Checkpoint {
                    job,
                    key: Some(key),
                    generation: parsed.map(|(_, g)| g),
                    step: parsed.map(|(s, _)| s),
                }
            }
            ["jobs", job, "output"] => ObjectKind::Output {
                job,
                generation: None,
            },
            ["jobs", job, "output", g, ..] => ObjectKind::Output {
                job,
                generation: parse_generation(g),
            },
            ["jobs", job, "logs"] => ObjectKind::Logs {
                job,
                generation: None,
            },
            ["jobs", job, "logs", g, ..] => ObjectKind::Logs {
                job,
                generation: parse_generation(g),
            },
            ["users", owner, _, ..] => ObjectKind::UserData { owner },
            _ => ObjectKind::Other,
        }
    }
}

/// `g<generation>` read back.
fn parse_generation(segment: &str) -> Option<u32> {
    segment
        .strip_prefix('g')
        .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|n| n.parse().ok())
}

/// A log chunk's path ([`layout::log_chunk`]) read back: its generation,
/// the start of its run (unix ms) and its place in that run.
pub fn parse_log_chunk(path: &str) -> Option<(u32, u64, u32)> {
    let mut segments = path.rsplit('/');
    let name = segments.next()?.strip_suffix(".jsonl")?;
    let generation = parse_generation(segments.next()?)?;
    let (started, seq) = name.split_once('-')?;
    let digits = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(started, 13) || !digits(seq, 6) {
        return None;
    }
    Some((generation, started.parse().ok()?, seq.parse().ok()?))
}

/// Where a deployment keeps specs, checkpoints and outputs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreUrl {
    /// `file:///abs/dir` (or a bare path): a directory every process opens
    /// itself, for one machine.
    Dir(std::path::PathBuf),
    /// `s3://bucket/prefix?endpoint=URL&region=R&path_style=true|false`:
    /// an S3-compatible bucket, reached by everyone but the operator through
    /// the scheduler's gateway.
    S3(S3Location),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct S3Location {
    pub bucket: String,
    /// Key prefix inside the bucket, without leading or trailing '/'; may be empty.
    pub prefix: String,
    /// `http(s)://host:port` of an S3-compatible server; AWS when absent.
    pub endpoint: Option<String>,
    pub region: String,
    /// Path-style URLs (`endpoint/bucket/key`), as MinIO, R2 and most
    /// S3-compatible servers want; virtual-host style when false.
    pub path_style: bool,
}

impl S3Location {
    /// The bucket key of a store-relative path.
    pub fn key(&self, path: &str) -> String {
        if self.prefix.is_empty() {
            path.to_string()
        } else {
            format!("{}/{path}", self.prefix)
        }
    }

    /// The store-relative path of a bucket key, when it is inside the prefix.
    pub fn relative<'a>(&self, key: &'a str) -> Option<&'a str> {
        if self.prefix.is_empty() {
            Some(key)
        } else {
            key.strip_prefix(self.prefix.as_str())?.strip_prefix('/')
        }
    }

    /// The store-relative path an `s3://bucket/key` URI names, when it lies
    /// in this store (its bucket, under its prefix). One rule for the agent
    /// that stages the input and the gateway that grants reading it.
    pub fn path_of_uri(&self, url: &url::Url) -> Option<String> {
        if url.scheme() != "s3" || url.host_str() != Some(self.bucket.as_str()) {
            return None;
        }
        let key = percent_decode(url.path().trim_start_matches('/'))?;
        self.relative(&key).map(str::to_string)
    }

    /// The endpoint to use: the given one, or AWS's regional endpoint.
    pub fn endpoint_url(&self) -> String {
        self.endpoint
            .clone()
            .unwrap_or_else(|| format!("https://s3.{}.amazonaws.com", self.region))
    }
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("store URL {url:?}: {reason}")]
pub struct StoreUrlError {
    pub url: String,
    pub reason: String,
}

impl std::str::FromStr for StoreUrl {
    type Err = StoreUrlError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let err = |reason: &str| StoreUrlError {
            url: text.to_string(),
            reason: reason.to_string(),
        };
        if !text.contains("://") {
            if text.is_empty() {
                return Err(err(
                    "empty; use file:///dir, a directory, or s3://bucket/prefix",
                ));
            }
            return Ok(StoreUrl::Dir(text.into()));
        }
        let url = url::Url::parse(text).map_err(|e| err(&e.to_string()))?;
        match url.scheme() {
            "file" => {
                let path = url
                    .to_file_path()
                    .map_err(|()| err("a file:// URL needs an absolute path"))?;
                Ok(StoreUrl::Dir(path))
            }
            "s3" => {
                if !url.username().is_empty() || url.password().is_some() {
                    return Err(err(
                        "credentials never go in the store URL (it is published); give the scheduler AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
                    ));
                }
                let bucket = url
                    .host_str()
                    .filter(|b| !b.is_empty())
                    .ok_or_else(|| err("no bucket: use s3://bucket/prefix"))?
                    .to_string();
                let prefix = url.path().trim_matches('/').to_string();
                if prefix.split('/').any(|s| s == "." || s == "..") || prefix.contains("//") {
                    return Err(err(
                        "the prefix may not contain empty, '.' or '..' segments",
                    ));
                }
                let mut location = S3Location {
                    bucket,
                    prefix,
                    endpoint: None,
                    region: "us-east-1".into(),
                    path_style: false,
                };
                let mut path_style = None;
                for (key, value) in url.query_pairs() {
                    match key.as_ref() {
                        "endpoint" => {
                            let e = url::Url::parse(&value)
                                .map_err(|e| err(&format!("endpoint: {e}")))?;
                            if !matches!(e.scheme(), "http" | "https") || e.host_str().is_none() {
                                return Err(err("endpoint must be an http(s) URL with a host"));
                            }
                            location.endpoint = Some(value.trim_end_matches('/').to_string());
                        }
                        "region" => location.region = value.into_owned(),
                        "path_style" => {
                            path_style = Some(match value.as_ref() {
                                "true" => true,
                                "false" => false,
                                _ => return Err(err("path_style is true or false")),
                            })
                        }
                        other => {
                            return Err(err(&format!(
                                "unknown option {other:?} (endpoint, region, path_style)"
                            )));
                        }
                    }
                }
                // S3-compatible servers on an address of their own want path style.
                location.path_style = path_style.unwrap_or(location.endpoint.is_some());
                Ok(StoreUrl::S3(location))
            }
            other => Err(err(&format!(
                "unsupported scheme {other:?}; use file:///dir or s3://bucket/prefix"
            ))),
        }
    }
}

impl std::fmt::Display for StoreUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreUrl::Dir(path) => match url::Url::from_file_path(path) {
                Ok(u) => write!(f, "{u}"),
                Err(()) => write!(f, "{}", path.display()),
            },
            StoreUrl::S3(l) => {
                write!(f, "s3://{}/{}", l.bucket, l.prefix)?;
                let mut q = url::form_urlencoded::Serializer::new(String::new());
                if let Some(e) = &l.endpoint {
                    q.append_pair("endpoint", e);
                }
                q.append_pair("region", &l.region);
                q.append_pair("path_style", if l.path_style { "true" } else { "false" });
                write!(f, "?{}", q.finish())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_layout_is_classified_and_anything_odd_is_other() {
        let h = "ab".repeat(32);
        assert_eq!(
            ObjectKind::classify(&format!("specs/{h}.json")),
            ObjectKind::Spec { hash: &h }
        );
        assert_eq!(
            ObjectKind::classify(
                "jobs/J/checkpoints/00000000000000000042-g3-0123456789abcdef/files/x"
            ),
            ObjectKind::Checkpoint {
                job: "J",
                key: Some("00000000000000000042-g3-0123456789abcdef"),
                generation: Some(3),
                step: Some(42),
            }
        );
        assert_eq!(
            ObjectKind::classify("jobs/J/checkpoints/"),
            ObjectKind::Checkpoint {
                job: "J",
                key: None,
                generation: None,
                step: None
            }
        );
        assert_eq!(
            ObjectKind::classify("jobs/J/output/g3/files/model.bin"),
            ObjectKind::Output {
                job: "J",
                generation: Some(3)
            }
        );
        assert_eq!(
            ObjectKind::classify("jobs/J/output/files/model.bin"),
            ObjectKind::Output {
                job: "J",
                generation: None
            }
        );
        assert_eq!(
            ObjectKind::classify("users/O/data/train.csv"),
            ObjectKind::UserData { owner: "O" }
        );
        for odd in [
            "specs/short.json",
            "jobs/J/../K/output/x",
            "jobs/J//output/x",
            "jobs/J/output%2Fx",
            "users/O",
            "jobs\\J/output/x",
            "other/thing",
            "",
        ] {
            assert_eq!(ObjectKind::classify(odd), ObjectKind::Other, "{odd}");
        }
    }

    #[test]
    fn store_urls_parse_print_and_refuse_credentials() {
        let url: StoreUrl = "s3://mcjs/deploy/a?endpoint=http://127.0.0.1:9000&region=eu-1"
            .parse()
            .unwrap();
        let StoreUrl::S3(l) = &url else {
            panic!("{url:?}")
        };
        assert_eq!((l.bucket.as_str(), l.prefix.as_str()), ("mcjs", "deploy/a"));
        assert_eq!(l.endpoint.as_deref(), Some("http://127.0.0.1:9000"));
        assert!(l.path_style);
        assert_eq!(l.key("specs/x.json"), "deploy/a/specs/x.json");
        assert_eq!(l.relative("deploy/a/specs/x.json"), Some("specs/x.json"));
        assert_eq!(l.relative("deploy/ab/x"), None);
        assert_eq!(url.to_string().parse::<StoreUrl>().unwrap(), url);
        assert_eq!(
            "file:///var/mcjs".parse::<StoreUrl>().unwrap(),
            StoreUrl::Dir("/var/mcjs".into())
        );
        assert_eq!(
            ".mcjs-store".parse::<StoreUrl>().unwrap(),
            StoreUrl::Dir(".mcjs-store".into())
        );
        for bad in [
            "s3://key:secret@bucket/p",
            "s3:///p",
            "s3://b/p?endpoint=ftp://x",
            "s3://b/p?acl=public",
            "s3://b/a//c",
            "gs://b/p",
            "",
        ] {
            assert!(bad.parse::<StoreUrl>().is_err(), "{bad}");
        }
    }

    #[test]
    fn checkpoint_keys_carry_step_and_generation() {
        assert_eq!(
            parse_checkpoint_key("00000000000000000007-g12-fedcba9876543210"),
            Some((7, 12))
        );
        for bad in [
            "00000000000000000007-fedcba9876543210",
            "7-g1-fedcba9876543210",
            "00000000000000000007-g-fedcba9876543210",
            "00000000000000000007-gx-fedcba9876543210",
            "00000000000000000007-g1-fedcba987654321z",
        ] {
            assert_eq!(parse_checkpoint_key(bad), None, "{bad}");
        }
    }

    #[test]
    fn requests_round_trip_and_refuse_unknown_fields() {
        let req = StoreRequest {
            role: Role::Node { node: "N".into() },
            sent_at_unix_ms: 1,
            ops: vec![
                StoreOp::Get { path: "a".into() },
                StoreOp::List {
                    prefix: "p".into(),
                    delimiter: true,
                    continuation: None,
                },
                StoreOp::UploadPart {
                    path: "a".into(),
                    upload_id: "u".into(),
                    part: 2,
                    size: Some(7),
                },
            ],
        };
        let json = serde_json::to_string(&req).unwrap();
        assert_eq!(serde_json::from_str::<StoreRequest>(&json).unwrap(), req);
        assert!(
            serde_json::from_str::<StoreRequest>(
                r#"{"role":{"kind":"owner"},"sent_at_unix_ms":1,"ops":[],"admin":true}"#
            )
            .is_err()
        );
    }
}
