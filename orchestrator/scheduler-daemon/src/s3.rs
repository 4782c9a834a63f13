//! The deployment's S3 store as the gateway reaches it, with the
//! operator's credentials: presigned URLs for transfers, and the few
//! requests the gateway performs itself (listing, multipart ends, specs).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use mcjs_protocol::store::{
    GRANT_TTL_SECS, ListedObject, Listing, MAX_SPEC_BYTES, S3Location, StoreOp,
};
use rusty_s3::{Bucket, Credentials, S3Action, UrlStyle};

use crate::quota::Stored;
use crate::store_gate::{SpecInput, spec_inputs};

/// The deployment's S3 store, with the operator's credentials.
pub struct S3Store {
    pub location: S3Location,
    bucket: Bucket,
    credentials: Credentials,
    http: reqwest::Client,
    /// What each spec names in `users/` ([`spec_inputs`]), by spec hash:
    /// a spec is stored under its hash, so this never goes stale.
    inputs: std::sync::Mutex<HashMap<[u8; 32], Arc<Vec<SpecInput>>>>,
}

/// Specs whose inputs are kept; past this the cache starts again.
const INPUTS_CACHED: usize = 4096;

#[derive(Debug, thiserror::Error)]
pub enum S3Error {
    #[error("store: {0}")]
    Config(String),
    #[error("store: {action} {key}: {reason}")]
    Request {
        action: &'static str,
        key: String,
        reason: String,
    },
}

impl S3Store {
    /// The store at `location` with credentials `AWS_ACCESS_KEY_ID` /
    /// `AWS_SECRET_ACCESS_KEY` from `env`.
    pub fn new(
        location: S3Location,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, S3Error> {
        let (Some(key), Some(secret)) = (env("AWS_ACCESS_KEY_ID"), env("AWS_SECRET_ACCESS_KEY"))
        else {
            return Err(S3Error::Config(
                "an s3:// store needs the operator's credentials in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (only the scheduler holds them)".into(),
            ));
        };
        let endpoint: url::Url = location
            .endpoint_url()
            .parse()
            .map_err(|e| S3Error::Config(format!("endpoint: {e}")))?;
        let style = if location.path_style {
            UrlStyle::Path
        } else {
            UrlStyle::VirtualHost
        };
        let bucket = Bucket::new(
            endpoint,
            style,
            location.bucket.clone(),
            location.region.clone(),
        )
        .map_err(|e| S3Error::Config(e.to_string()))?;
        let credentials = match env("AWS_SESSION_TOKEN") {
            Some(token) => Credentials::new_with_token(key, secret, token),
            None => Credentials::new(key, secret),
        };
        Ok(Self {
            location,
            bucket,
            credentials,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(60))
                .build()
                .map_err(|e| S3Error::Config(e.to_string()))?,
            inputs: std::sync::Mutex::default(),
        })
    }

    fn ttl() -> Duration {
        Duration::from_secs(GRANT_TTL_SECS)
    }

    /// A presigned URL for a transfer op, with the headers signed into it
    /// that the request must carry; `None` for the ops performed here. A
    /// `create_only` PUT carries `if-none-match: *`: it creates the object
    /// or fails (412), and can never replace one.
    pub(crate) fn presign(
        &self,
        op: &StoreOp,
        create_only: bool,
    ) -> Option<(reqwest::Method, url::Url, Vec<(String, String)>)> {
        let key = self.location.key(op.path());
        let c = Some(&self.credentials);
        let ttl = Self::ttl();
        let mut headers = Vec::new();
        let (method, url) = match op {
            StoreOp::Get { .. } => (
                reqwest::Method::GET,
                self.bucket.get_object(c, &key).sign(ttl),
            ),
            StoreOp::Head { .. } => (
                reqwest::Method::HEAD,
                self.bucket.head_object(c, &key).sign(ttl),
            ),
            StoreOp::Put { size, .. } => {
                let mut action = self.bucket.put_object(c, &key);
                if let Some(size) = size {
                    action
                        .headers_mut()
                        .insert("content-length", size.to_string());
                }
                if create_only {
                    action.headers_mut().insert("if-none-match", "*");
                    headers.push(("if-none-match".to_string(), "*".to_string()));
                }
                (reqwest::Method::PUT, action.sign(ttl))
            }
            StoreOp::Copy { from, .. } => {
                // S3's CopyObject: the source signed in, so the URL copies
                // that object and no other.
                let source = copy_source(&self.location.bucket, &self.location.key(from));
                let mut action = self.bucket.put_object(c, &key);
                action
                    .headers_mut()
                    .insert("x-amz-copy-source", source.clone());
                headers.push(("x-amz-copy-source".to_string(), source));
                (reqwest::Method::PUT, action.sign(ttl))
            }
            StoreOp::Delete { .. } => (
                reqwest::Method::DELETE,
                self.bucket.delete_object(c, &key).sign(ttl),
            ),
            StoreOp::UploadPart {
                upload_id,
                part,
                size,
                ..
            } => {
                let mut action = self.bucket.upload_part(c, &key, *part, upload_id);
                if let Some(size) = size {
                    action
                        .headers_mut()
                        .insert("content-length", size.to_string());
                }
                (reqwest::Method::PUT, action.sign(ttl))
            }
            _ => return None,
        };
        Some((method, url, headers))
    }

    async fn send(
        &self,
        action: &'static str,
        key: &str,
        request: reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, S3Error> {
        let fail = |reason: String| S3Error::Request {
            action,
            key: key.to_string(),
            reason,
        };
        let response = request.send().await.map_err(|e| fail(e.to_string()))?;
        if !response.status().is_success() {
            let status = response.status();
            let body = response.text().await.unwrap_or_default();
            return Err(fail(format!(
                "{status}: {}",
                body.chars().take(300).collect::<String>()
            )));
        }
        Ok(response)
    }

    pub async fn list(
        &self,
        prefix: &str,
        delimiter: bool,
        continuation: Option<&str>,
    ) -> Result<Listing, S3Error> {
        let mut key = self.location.key(prefix);
        if !key.is_empty() && !key.ends_with('/') {
            key.push('/');
        }
        let mut action = self.bucket.list_objects_v2(Some(&self.credentials));
        action.with_prefix(key.clone());
        if delimiter {
            action.with_delimiter("/");
        }
        if let Some(token) = continuation {
            action.with_continuation_token(token.to_string());
        }
        let url = action.sign(Self::ttl());
        let text = self
            .send("list", &key, self.http.get(url))
            .await?
            .text()
            .await
            .map_err(|e| S3Error::Request {
                action: "list",
                key: key.clone(),
                reason: e.to_string(),
            })?;
        let parsed = rusty_s3::actions::ListObjectsV2::parse_response(&text).map_err(|e| {
            S3Error::Request {
                action: "list",
                key: key.clone(),
                reason: format!("unreadable answer: {e}"),
            }
        })?;
        let rel = |k: &str| self.location.relative(k).map(str::to_string);
        Ok(Listing {
            objects: parsed
                .contents
                .iter()
                .filter_map(|o| {
                    Some(ListedObject {
                        path: rel(&o.key)?,
                        size: o.size.unwrap_or(0),
                        last_modified: o.last_modified.clone().unwrap_or_default(),
                        e_tag: o.etag.clone(),
                    })
                })
                .collect(),
            prefixes: parsed
                .common_prefixes
                .iter()
                .filter_map(|p| rel(p.prefix.trim_end_matches('/')))
                .collect(),
            continuation: parsed.next_continuation_token,
        })
    }

    /// What is stored under `prefix`: every page of its listing, stopping
    /// once more than `max_objects` are counted (the caller refuses then).
    pub async fn usage(&self, prefix: &str, max_objects: u64) -> Result<Stored, S3Error> {
        let mut stored = Stored::default();
        let mut continuation = None;
        loop {
            let page = self.list(prefix, false, continuation.as_deref()).await?;
            for object in page.objects {
                stored.add(object.path, object.size);
            }
            match page.continuation {
                Some(next) if stored.usage.objects <= max_objects => continuation = Some(next),
                _ => return Ok(stored),
            }
        }
    }

    pub async fn create_multipart(&self, path: &str) -> Result<String, S3Error> {
        let key = self.location.key(path);
        let url = self
            .bucket
            .create_multipart_upload(Some(&self.credentials), &key)
            .sign(Self::ttl());
        let text = self
            .send("start an upload of", &key, self.http.post(url))
            .await?
            .text()
            .await
            .map_err(|e| S3Error::Request {
                action: "start an upload of",
                key: key.clone(),
                reason: e.to_string(),
            })?;
        let parsed =
            rusty_s3::actions::CreateMultipartUpload::parse_response(&text).map_err(|e| {
                S3Error::Request {
                    action: "start an upload of",
                    key: key.clone(),
                    reason: format!("unreadable answer: {e}"),
                }
            })?;
        Ok(parsed.upload_id().to_string())
    }

    pub async fn complete_multipart(
        &self,
        path: &str,
        upload_id: &str,
        etags: &[String],
    ) -> Result<(), S3Error> {
        let key = self.location.key(path);
        let action = self.bucket.complete_multipart_upload(
            Some(&self.credentials),
            &key,
            upload_id,
            etags.iter().map(String::as_str),
        );
        let url = action.sign(Self::ttl());
        let body = action.body();
        self.send(
            "complete the upload of",
            &key,
            self.http.post(url).body(body),
        )
        .await?;
        Ok(())
    }

    pub async fn abort_multipart(&self, path: &str, upload_id: &str) -> Result<(), S3Error> {
        let key = self.location.key(path);
        let url = self
            .bucket
            .abort_multipart_upload(Some(&self.credentials), &key, upload_id)
            .sign(Self::ttl());
        self.send("abort the upload of", &key, self.http.delete(url))
            .await?;
        Ok(())
    }

    /// The object at `path`, if there, and if it is at most `max` bytes.
    pub async fn get(&self, path: &str, max: usize) -> Result<Option<Vec<u8>>, S3Error> {
        let key = self.location.key(path);
        let url = self
            .bucket
            .get_object(Some(&self.credentials), &key)
            .sign(Self::ttl());
        let fail = |reason: String| S3Error::Request {
            action: "read",
            key: key.clone(),
            reason,
        };
        let mut response = self
            .http
            .get(url)
            .send()
            .await
            .map_err(|e| fail(e.to_string()))?;
        match response.status() {
            reqwest::StatusCode::NOT_FOUND => return Ok(None),
            s if !s.is_success() => return Err(fail(s.to_string())),
            _ => {}
        }
        let mut bytes = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| fail(e.to_string()))? {
            if bytes.len() + chunk.len() > max {
                return Err(fail(format!("over {max} bytes")));
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(Some(bytes))
    }

    /// The objects of `users/` the spec of `spec_hash` names as inputs;
    /// none for a spec that is not there or not valid (its job cannot run).
    pub async fn inputs_of(&self, spec_hash: [u8; 32]) -> Result<Arc<Vec<SpecInput>>, S3Error> {
        if let Some(known) = self.inputs.lock().expect("inputs lock").get(&spec_hash) {
            return Ok(Arc::clone(known));
        }
        let path = mcjs_protocol::store::layout::spec(&spec_hash);
        let Some(bytes) = self.get(&path, MAX_SPEC_BYTES).await? else {
            // Not published (yet): nothing to keep.
            return Ok(Arc::new(Vec::new()));
        };
        let inputs = std::str::from_utf8(&bytes)
            .ok()
            .and_then(|text| mcjs_spec::JobSpec::from_json(text).ok())
            .filter(|spec| mcjs_spec::spec_hash(spec) == spec_hash)
            .map(|spec| spec_inputs(spec_hash, &spec, &self.location))
            .unwrap_or_default();
        let inputs = Arc::new(inputs);
        let mut cache = self.inputs.lock().expect("inputs lock");
        if cache.len() >= INPUTS_CACHED {
            cache.clear();
        }
        cache.insert(spec_hash, Arc::clone(&inputs));
        Ok(inputs)
    }

    pub async fn exists(&self, path: &str) -> Result<bool, S3Error> {
        let key = self.location.key(path);
        let url = self
            .bucket
            .head_object(Some(&self.credentials), &key)
            .sign(Self::ttl());
        let response = self
            .http
            .head(url)
            .send()
            .await
            .map_err(|e| S3Error::Request {
                action: "look up",
                key: key.clone(),
                reason: e.to_string(),
            })?;
        match response.status() {
            s if s.is_success() => Ok(true),
            reqwest::StatusCode::NOT_FOUND => Ok(false),
            s => Err(S3Error::Request {
                action: "look up",
                key,
                reason: s.to_string(),
            }),
        }
    }

    pub async fn put(&self, path: &str, bytes: Vec<u8>) -> Result<(), S3Error> {
        let key = self.location.key(path);
        let url = self
            .bucket
            .put_object(Some(&self.credentials), &key)
            .sign(Self::ttl());
        self.send("write", &key, self.http.put(url).body(bytes))
            .await?;
        Ok(())
    }
}

/// `x-amz-copy-source`'s value: `/<bucket>/<key>`, the key percent-encoded
/// but for its slashes and unreserved characters.
fn copy_source(bucket: &str, key: &str) -> String {
    let mut out = format!("/{bucket}/");
    for b in key.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod copy_source_tests {
    #[test]
    fn a_copy_source_is_the_bucket_and_the_key_percent_encoded_but_for_slashes() {
        assert_eq!(
            super::copy_source("mcjs", "deploy/jobs/J/checkpoints/k/files/a b+ü.bin"),
            "/mcjs/deploy/jobs/J/checkpoints/k/files/a%20b%2B%C3%BC.bin"
        );
    }
}
