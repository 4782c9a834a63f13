//! Data staging: a job's declared inputs fetched (`file://`, `https://`, or
//! `http://` — the hash, not the transport, is what is trusted) into a
//! node-local cache addressed by sha256, verified, and linked into the job's
//! data directory before the container starts.

use crate::checkpoint::Sha256Digest;
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

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

/// One declared input of a job spec.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataInput {
    /// The file name under the job's data directory.
    pub name: String,
    pub uri: String,
    /// 64 hex digits.
    pub sha256: String,
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
}

impl DataCache {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            http: reqwest::Client::new(),
        }
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
        for input in inputs {
            wanted.push(validate(input)?);
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
        for (input, expected) in inputs.iter().zip(wanted) {
            let blob = self.blob_path(&expected);
            let cached = tokio::fs::try_exists(&blob).await.unwrap_or(false);
            if !cached {
                self.fetch(input, expected, &blob).await?;
            }
            let size = tokio::fs::metadata(&blob)
                .await
                .map_err(io("stat", &blob))?
                .len();
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

    async fn fetch(
        &self,
        input: &DataInput,
        expected: Sha256Digest,
        blob: &Path,
    ) -> Result<(), StagingError> {
        let fetch_err = |reason: String| StagingError::Fetch {
            name: input.name.clone(),
            uri: input.uri.clone(),
            reason,
        };
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
        let mut out = tokio::fs::File::create(&tmp)
            .await
            .map_err(tmp_io("create"))?;
        let mut hasher = Sha256::new();
        let url = url::Url::parse(&input.uri).map_err(|e| fetch_err(e.to_string()))?;
        let result: Result<(), StagingError> = async {
            match url.scheme() {
                "file" => {
                    let path = url
                        .to_file_path()
                        .map_err(|_| fetch_err("not a local absolute path".into()))?;
                    let mut src = tokio::fs::File::open(&path)
                        .await
                        .map_err(|e| fetch_err(e.to_string()))?;
                    let mut buf = vec![0u8; 1 << 20];
                    loop {
                        let n = src
                            .read(&mut buf)
                            .await
                            .map_err(|e| fetch_err(e.to_string()))?;
                        if n == 0 {
                            break;
                        }
                        hasher.update(&buf[..n]);
                        out.write_all(&buf[..n]).await.map_err(tmp_io("write"))?;
                    }
                }
                "http" | "https" => {
                    let resp = self
                        .http
                        .get(url.clone())
                        .send()
                        .await
                        .and_then(|r| r.error_for_status())
                        .map_err(|e| fetch_err(e.to_string()))?;
                    let mut body = resp.bytes_stream();
                    while let Some(chunk) = body.next().await {
                        let chunk = chunk.map_err(|e| fetch_err(e.to_string()))?;
                        hasher.update(&chunk);
                        out.write_all(&chunk).await.map_err(tmp_io("write"))?;
                    }
                }
                other => {
                    return Err(fetch_err(format!(
                        "unsupported scheme {other:?}; use file://, https:// or http://"
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
        }
    }

    #[tokio::test]
    async fn a_verified_input_lands_in_the_cache_and_the_data_dir() {
        let t = tempfile::tempdir().unwrap();
        let src = t.path().join("src.csv");
        std::fs::write(&src, b"1,2,0\n").unwrap();
        let cache = DataCache::new(t.path().join("cache"));
        let data = t.path().join("data");
        let inputs = [file_input("train.csv", &src, sha(b"1,2,0\n"))];
        let staged = cache.stage(&inputs, &data).await.unwrap();
        assert_eq!(staged[0].size, 6);
        assert!(!staged[0].cached);
        assert_eq!(std::fs::read(data.join("train.csv")).unwrap(), b"1,2,0\n");
        assert!(cache.blob_path(&staged[0].sha256).exists());
        // Second time: from the cache, even with the source gone.
        std::fs::remove_file(&src).unwrap();
        let again = cache.stage(&inputs, &t.path().join("data2")).await.unwrap();
        assert!(again[0].cached);
    }

    #[tokio::test]
    async fn a_hash_mismatch_is_refused_and_nothing_is_cached() {
        let t = tempfile::tempdir().unwrap();
        let src = t.path().join("src.csv");
        std::fs::write(&src, b"tampered").unwrap();
        let cache = DataCache::new(t.path().join("cache"));
        let want = sha(b"original");
        let err = cache
            .stage(
                &[file_input("train.csv", &src, want.clone())],
                &t.path().join("data"),
            )
            .await
            .unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, StagingError::HashMismatch { .. }));
        assert!(
            msg.contains(&want) && msg.contains(&sha(b"tampered")),
            "{msg}"
        );
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
    async fn bad_declarations_are_refused_before_fetching() {
        let t = tempfile::tempdir().unwrap();
        let cache = DataCache::new(t.path().join("cache"));
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
    async fn inputs_are_fetched_over_http() {
        use std::io::{Read, Write};
        let body = b"0.5,0.25,1\n".to_vec();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let served = body.clone();
        std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            let mut req = [0u8; 1024];
            let _ = conn.read(&mut req).unwrap();
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                served.len()
            );
            conn.write_all(head.as_bytes()).unwrap();
            conn.write_all(&served).unwrap();
        });
        let t = tempfile::tempdir().unwrap();
        let cache = DataCache::new(t.path().join("cache"));
        let input = DataInput {
            name: "train.csv".into(),
            uri: format!("http://{addr}/train.csv"),
            sha256: sha(&body),
        };
        cache.stage(&[input], &t.path().join("data")).await.unwrap();
        assert_eq!(
            std::fs::read(t.path().join("data/train.csv")).unwrap(),
            body
        );
    }
}
