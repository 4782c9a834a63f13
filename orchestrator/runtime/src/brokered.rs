//! A store reached through the scheduler's gateway (`mcjs_protocol::store`):
//! an [`ObjectStore`] that holds no credentials. Every operation asks the
//! gateway, in a request signed with the caller's key (a node's operator
//! key, or an owner's wallet), for a short-lived presigned URL, then moves
//! the bytes straight between this process and the store. Listing and the
//! two ends of a multipart upload are performed by the gateway.
//!
//! What may be touched is decided by the gateway against the chain; a
//! refusal comes back as [`object_store::Error::PermissionDenied`] (403) or
//! [`object_store::Error::Unauthenticated`] (401), with the gateway's reason.

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures_util::stream::BoxStream;
use futures_util::{StreamExt, TryStreamExt};
use mcjs_protocol::SignedRequest;
use mcjs_protocol::store::{
    Grant, Listing, Role, STORE_SIGN_PATH, STORE_SPEC_PATH, SpecStored, SpecUpload, StoreOp,
    StoreRequest, StoreResponse,
};
use object_store::path::Path;
use object_store::{
    GetOptions, GetResult, GetResultPayload, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMode, PutMultipartOptions, PutOptions, PutPayload, PutResult,
};

mod upload;

use upload::Upload;

const STORE: &str = "mcjs-gateway";

/// How often a request the gateway answers 429 (busy) is sent in all, and
/// the first pause between: 250 ms, doubling to 2 s, about 12 s in all
/// (a sealed request stays fresh for two minutes).
const BUSY_TRIES: u32 = 9;
const BUSY_FIRST_PAUSE: Duration = Duration::from_millis(250);

/// Signs the bytes of a request with the caller's ed25519 key.
pub type SignFn = Arc<dyn Fn(&[u8]) -> [u8; 64] + Send + Sync>;

/// Who this store speaks as, and how it signs.
#[derive(Clone)]
pub struct Identity {
    pub role: Role,
    /// The signer's ed25519 public key.
    pub key: [u8; 32],
    pub sign: SignFn,
}

struct Broker {
    http: reqwest::Client,
    /// The base URLs of the schedulers whose gateways serve this store
    /// (the lease's holder and its standbys: any one will do).
    gateways: Vec<String>,
    /// The gateway that answered last: asked first.
    current: std::sync::atomic::AtomicUsize,
    identity: Identity,
    /// GET grants kept for the ranged reads of one object: a restore reads
    /// a big file in many ranges, and the `Range` header is not signed, so
    /// one grant serves them all while it is young (see [`GET_REUSE`]).
    reads: Mutex<std::collections::HashMap<String, (std::time::Instant, Granted)>>,
}

/// A presigned request: method, URL, headers to send.
type Granted = (reqwest::Method, String, Vec<(String, String)>);

/// How long a GET grant serves further ranged reads of its object: well
/// within the 300 s a presigned URL lives (S3 checks it when a request
/// arrives), and short, since a node fenced off a job keeps what it was
/// granted until then.
const GET_REUSE: Duration = Duration::from_secs(60);

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

fn generic(message: impl Into<String>) -> object_store::Error {
    object_store::Error::Generic {
        store: STORE,
        source: message.into().into(),
    }
}

impl Broker {
    /// The gateway that answered last.
    fn gateway(&self) -> &str {
        let at = self.current.load(std::sync::atomic::Ordering::Relaxed);
        &self.gateways[at % self.gateways.len()]
    }

    /// Sends `sealed` to the gateway that answered last, and to the next
    /// one while a gateway cannot be reached (its scheduler is down); the
    /// first that answers is asked first from then on.
    async fn send_anywhere(
        &self,
        path: &str,
        sealed: &SignedRequest,
    ) -> object_store::Result<reqwest::Response> {
        use std::sync::atomic::Ordering;
        let first = self.current.load(Ordering::Relaxed);
        let mut unreachable = Vec::new();
        for i in 0..self.gateways.len() {
            let at = (first + i) % self.gateways.len();
            let gateway = &self.gateways[at];
            match self
                .http
                .post(format!("{gateway}{path}"))
                .json(sealed)
                .send()
                .await
            {
                Ok(response) => {
                    if at != first {
                        tracing::info!(gateway, "the store gateway answers here now");
                        self.current.store(at, Ordering::Relaxed);
                    }
                    return Ok(response);
                }
                Err(e) => unreachable.push(format!("{gateway}: {e}")),
            }
        }
        Err(generic(format!(
            "cannot reach the store gateway ({})",
            unreachable.join("; ")
        )))
    }

    async fn post(
        &self,
        path: &str,
        sealed: &SignedRequest,
        what: &str,
    ) -> object_store::Result<String> {
        // A gateway that is busy (429: its per-address or shared budgets)
        // is asked again after a pause that doubles, up to BUSY_TRIES.
        let mut tries = 0;
        let response = loop {
            let response = self.send_anywhere(path, sealed).await?;
            tries += 1;
            if response.status() != reqwest::StatusCode::TOO_MANY_REQUESTS || tries >= BUSY_TRIES {
                break response;
            }
            let pause = BUSY_FIRST_PAUSE * 2u32.pow((tries - 1).min(3));
            tracing::debug!(
                what,
                tries,
                pause_ms = pause.as_millis() as u64,
                "the store gateway is busy; asking again"
            );
            tokio::time::sleep(pause).await;
        };
        let status = response.status();
        let text = response
            .text()
            .await
            .map_err(|e| generic(format!("store gateway: {e}")))?;
        if status.is_success() {
            return Ok(text);
        }
        let reason = serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_string))
            .unwrap_or(text);
        let path = what.to_string();
        Err(match status.as_u16() {
            403 => object_store::Error::PermissionDenied {
                path,
                source: reason.into(),
            },
            401 => object_store::Error::Unauthenticated {
                path,
                source: reason.into(),
            },
            _ => generic(format!("store gateway ({status}) for {what}: {reason}")),
        })
    }

    /// Asks the gateway for one grant per op.
    async fn ask(&self, ops: Vec<StoreOp>) -> object_store::Result<Vec<Grant>> {
        let what = ops
            .first()
            .map(|o| o.path().to_string())
            .unwrap_or_default();
        let n = ops.len();
        let request = StoreRequest {
            role: self.identity.role.clone(),
            sent_at_unix_ms: now_ms(),
            ops,
        };
        let sign = Arc::clone(&self.identity.sign);
        let sealed =
            SignedRequest::seal(STORE_SIGN_PATH, &request, &self.identity.key, |m| sign(m));
        let text = self.post(STORE_SIGN_PATH, &sealed, &what).await?;
        let response: StoreResponse = serde_json::from_str(&text)
            .map_err(|e| generic(format!("store gateway: unreadable answer: {e}")))?;
        if response.grants.len() != n {
            return Err(generic("store gateway: wrong number of grants"));
        }
        Ok(response.grants)
    }

    async fn ask_one(&self, op: StoreOp) -> object_store::Result<Grant> {
        Ok(self.ask(vec![op]).await?.remove(0))
    }

    async fn url(
        &self,
        op: StoreOp,
    ) -> object_store::Result<(reqwest::Method, String, Vec<(String, String)>)> {
        match self.ask_one(op).await? {
            Grant::Url {
                method,
                url,
                headers,
            } => Ok((
                method
                    .parse()
                    .map_err(|_| generic(format!("store gateway: bad method {method}")))?,
                url,
                headers,
            )),
            other => Err(generic(format!(
                "store gateway: expected a URL, got {other:?}"
            ))),
        }
    }

    /// A GET grant for `op`'s object, asked for or reused (younger than
    /// [`GET_REUSE`]).
    async fn read_grant(&self, op: StoreOp) -> object_store::Result<Granted> {
        let path = op.path().to_string();
        let now = std::time::Instant::now();
        {
            let mut reads = self.reads.lock().expect("read grants");
            reads.retain(|_, (at, _)| now.duration_since(*at) < GET_REUSE);
            if let Some((_, granted)) = reads.get(&path) {
                return Ok(granted.clone());
            }
        }
        let granted = self.url(op).await?;
        self.reads
            .lock()
            .expect("read grants")
            .insert(path, (now, granted.clone()));
        Ok(granted)
    }

    async fn transfer(
        &self,
        op: StoreOp,
        body: Option<PutPayload>,
    ) -> object_store::Result<reqwest::Response> {
        self.transfer_range(op, body, None).await
    }

    /// [`Broker::transfer`], reading only `range` of the object (a GET's
    /// `Range` header, which a presigned URL does not sign: one grant serves
    /// any part of the object).
    async fn transfer_range(
        &self,
        op: StoreOp,
        body: Option<PutPayload>,
        range: Option<std::ops::Range<u64>>,
    ) -> object_store::Result<reqwest::Response> {
        let path = op.path().to_string();
        let reused = matches!((&op, &range), (StoreOp::Get { .. }, Some(_)));
        let (method, url, headers) = if reused {
            self.read_grant(op).await?
        } else {
            self.url(op).await?
        };
        let answer = self.send(&path, method, url, headers, body, range).await;
        if reused && answer.is_err() {
            // Not reused again: the next read asks the gateway afresh.
            self.reads.lock().expect("read grants").remove(&path);
        }
        answer
    }

    async fn send(
        &self,
        path: &str,
        method: reqwest::Method,
        url: String,
        headers: Vec<(String, String)>,
        body: Option<PutPayload>,
        range: Option<std::ops::Range<u64>>,
    ) -> object_store::Result<reqwest::Response> {
        let path = path.to_string();
        let mut request = self.http.request(method, url);
        for (name, value) in headers {
            request = request.header(name, value);
        }
        if let Some(r) = &range {
            request = request.header(
                reqwest::header::RANGE,
                format!("bytes={}-{}", r.start, r.end.saturating_sub(1)),
            );
        }
        if let Some(body) = body {
            let bytes = Bytes::from(body);
            request = request
                .header(reqwest::header::CONTENT_LENGTH, bytes.len())
                .body(bytes);
        }
        let response = request
            .send()
            .await
            .map_err(|e| generic(format!("store: {path}: {e}")))?;
        match response.status() {
            reqwest::StatusCode::OK if range.is_some() => Err(generic(format!(
                "store: {path}: the store answered a ranged read with the whole object"
            ))),
            s if s.is_success() => Ok(response),
            reqwest::StatusCode::RANGE_NOT_SATISFIABLE => Err(generic(format!(
                "store: {path}: the range asked for is beyond the object's end"
            ))),
            reqwest::StatusCode::NOT_FOUND => Err(object_store::Error::NotFound {
                path: path.clone(),
                source: format!("{path} is not in the store").into(),
            }),
            // A create-only write of an object that exists.
            reqwest::StatusCode::PRECONDITION_FAILED => Err(object_store::Error::AlreadyExists {
                path: path.clone(),
                source: format!("{path} is in the store already, and may not be replaced").into(),
            }),
            s => {
                let text = response.text().await.unwrap_or_default();
                Err(generic(format!(
                    "store: {path}: {s}: {}",
                    text.chars().take(300).collect::<String>()
                )))
            }
        }
    }

    async fn list(&self, prefix: &str, delimiter: bool) -> object_store::Result<Listing> {
        let mut all = Listing::default();
        let mut continuation = None;
        loop {
            let grant = self
                .ask_one(StoreOp::List {
                    prefix: prefix.to_string(),
                    delimiter,
                    continuation: continuation.take(),
                })
                .await?;
            let Grant::Listing(page) = grant else {
                return Err(generic("store gateway: expected a listing"));
            };
            all.objects.extend(page.objects);
            all.prefixes.extend(page.prefixes);
            match page.continuation {
                Some(token) => continuation = Some(token),
                None => return Ok(all),
            }
        }
    }
}

/// An [`ObjectStore`] behind the scheduler's gateway.
#[derive(Clone)]
pub struct BrokeredStore {
    broker: Arc<Broker>,
}

impl fmt::Debug for BrokeredStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BrokeredStore({})", self.broker.gateway())
    }
}

impl fmt::Display for BrokeredStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the store behind {}", self.broker.gateway())
    }
}

impl BrokeredStore {
    /// A store behind the gateway of the scheduler at `gateway`
    /// (`http://host:port`), speaking as `identity`.
    pub fn new(gateway: &str, identity: Identity) -> Self {
        Self::with_gateways(&[gateway.to_string()], identity)
    }

    /// A store behind the gateways of several schedulers of one deployment
    /// (the first asked first; another when one cannot be reached).
    /// `gateways` must not be empty.
    pub fn with_gateways(gateways: &[String], identity: Identity) -> Self {
        assert!(!gateways.is_empty(), "a brokered store needs a gateway");
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .expect("a TLS backend is compiled in");
        Self {
            broker: Arc::new(Broker {
                http,
                gateways: gateways
                    .iter()
                    .map(|g| g.trim_end_matches('/').to_string())
                    .collect(),
                current: Default::default(),
                identity,
                reads: Mutex::default(),
            }),
        }
    }

    /// Publishes a spec (its canonical JSON) through the gateway, which
    /// stores it under its own hash.
    pub async fn publish_spec(&self, canonical: String) -> object_store::Result<SpecStored> {
        let upload = SpecUpload {
            sent_at_unix_ms: now_ms(),
            spec: canonical,
        };
        let sign = Arc::clone(&self.broker.identity.sign);
        let sealed =
            SignedRequest::seal(STORE_SPEC_PATH, &upload, &self.broker.identity.key, |m| {
                sign(m)
            });
        let text = self.broker.post(STORE_SPEC_PATH, &sealed, "specs/").await?;
        serde_json::from_str(&text).map_err(|e| generic(format!("store gateway: {e}")))
    }
}

fn meta_from(location: &Path, response: &reqwest::Response) -> ObjectMeta {
    let header = |name: reqwest::header::HeaderName| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let last_modified = header(reqwest::header::LAST_MODIFIED)
        .and_then(|t| chrono::DateTime::parse_from_rfc2822(&t).ok())
        .map(|t| t.with_timezone(&chrono::Utc))
        .unwrap_or_else(|| chrono::DateTime::from(std::time::SystemTime::now()));
    ObjectMeta {
        location: location.clone(),
        last_modified,
        size: header(reqwest::header::CONTENT_LENGTH)
            .and_then(|l| l.parse().ok())
            .unwrap_or(0),
        e_tag: header(reqwest::header::ETAG),
        version: None,
    }
}

/// A ranged answer's `Content-Range: bytes <first>-<last>/<size>`: the
/// bytes sent (end exclusive) and the object's size.
fn content_range(response: &reqwest::Response) -> Option<(std::ops::Range<u64>, u64)> {
    let value = response
        .headers()
        .get(reqwest::header::CONTENT_RANGE)?
        .to_str()
        .ok()?;
    let (sent, size) = value.strip_prefix("bytes ")?.split_once('/')?;
    let (first, last) = sent.split_once('-')?;
    let (first, last, size): (u64, u64, u64) =
        (first.parse().ok()?, last.parse().ok()?, size.parse().ok()?);
    (first <= last && last < size).then(|| (first..last + 1, size))
}

fn listed_meta(o: mcjs_protocol::store::ListedObject) -> ObjectMeta {
    ObjectMeta {
        location: Path::from(o.path),
        last_modified: chrono::DateTime::parse_from_rfc3339(&o.last_modified)
            .map(|t| t.with_timezone(&chrono::Utc))
            .unwrap_or_else(|_| chrono::DateTime::from(std::time::UNIX_EPOCH)),
        size: o.size,
        e_tag: o.e_tag,
        version: None,
    }
}

#[async_trait::async_trait]
impl ObjectStore for BrokeredStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        if !matches!(opts.mode, PutMode::Overwrite) {
            return Err(object_store::Error::NotImplemented);
        }
        let response = self
            .broker
            .transfer(
                StoreOp::Put {
                    path: location.to_string(),
                    size: Some(payload.content_length() as u64),
                },
                Some(payload),
            )
            .await?;
        Ok(PutResult {
            e_tag: response
                .headers()
                .get(reqwest::header::ETAG)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string),
            version: None,
        })
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        _opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        let path = location.to_string();
        let Grant::Upload { upload_id } = self
            .broker
            .ask_one(StoreOp::CreateMultipart { path: path.clone() })
            .await?
        else {
            return Err(generic("store gateway: expected an upload id"));
        };
        Ok(Box::new(Upload {
            broker: Arc::clone(&self.broker),
            path,
            upload_id,
            etags: Arc::new(Mutex::new(Vec::new())),
        }))
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        let range = match &options.range {
            None => None,
            Some(object_store::GetRange::Bounded(r)) if r.start < r.end && !options.head => {
                Some(r.clone())
            }
            Some(_) => return Err(object_store::Error::NotImplemented),
        };
        if options.if_match.is_some()
            || options.if_none_match.is_some()
            || options.if_modified_since.is_some()
            || options.if_unmodified_since.is_some()
            || options.version.is_some()
        {
            return Err(object_store::Error::NotImplemented);
        }
        let path = location.to_string();
        let op = if options.head {
            StoreOp::Head { path }
        } else {
            StoreOp::Get { path }
        };
        let response = self.broker.transfer_range(op, None, range.clone()).await?;
        let mut meta = meta_from(location, &response);
        let range = match range {
            None => 0..meta.size,
            Some(asked) => {
                // `Content-Range: bytes <first>-<last>/<size>`: the part sent
                // and the whole object's size.
                let (sent, size) = content_range(&response).ok_or_else(|| {
                    generic(format!(
                        "store: {location}: a ranged read without a valid Content-Range"
                    ))
                })?;
                if sent.start != asked.start || sent.end > asked.end {
                    return Err(generic(format!(
                        "store: {location}: asked for bytes {asked:?}, sent {sent:?}"
                    )));
                }
                meta.size = size;
                sent
            }
        };
        let shown = location.to_string();
        let stream = if options.head {
            futures_util::stream::empty().boxed()
        } else {
            response
                .bytes_stream()
                .map_err(move |e| generic(format!("store: {shown}: {e}")))
                .boxed()
        };
        Ok(GetResult {
            range,
            meta,
            payload: GetResultPayload::Stream(stream),
            attributes: Default::default(),
        })
    }

    async fn delete(&self, location: &Path) -> object_store::Result<()> {
        match self
            .broker
            .transfer(
                StoreOp::Delete {
                    path: location.to_string(),
                },
                None,
            )
            .await
        {
            Ok(_) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        let broker = Arc::clone(&self.broker);
        let prefix = prefix.map(|p| p.to_string()).unwrap_or_default();
        futures_util::stream::once(async move { broker.list(&prefix, false).await })
            .map_ok(|listing| {
                futures_util::stream::iter(listing.objects.into_iter().map(|o| Ok(listed_meta(o))))
            })
            .try_flatten()
            .boxed()
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        let prefix = prefix.map(|p| p.to_string()).unwrap_or_default();
        let listing = self.broker.list(&prefix, true).await?;
        Ok(ListResult {
            common_prefixes: listing.prefixes.into_iter().map(Path::from).collect(),
            objects: listing.objects.into_iter().map(listed_meta).collect(),
        })
    }

    /// S3's CopyObject through a presigned URL: the bytes stay in the
    /// store. Only between checkpoints of one job (the gateway's rule).
    async fn copy(&self, from: &Path, to: &Path) -> object_store::Result<()> {
        let response = self
            .broker
            .transfer(
                StoreOp::Copy {
                    path: to.to_string(),
                    from: from.to_string(),
                },
                Some(PutPayload::new()),
            )
            .await?;
        // A copy can fail after its 200 has been sent: the error is then
        // the body.
        let body = response
            .text()
            .await
            .map_err(|e| generic(format!("store: copy to {to}: {e}")))?;
        if body.contains("<Error>") {
            return Err(generic(format!(
                "store: copy of {from} to {to} failed: {}",
                body.chars().take(300).collect::<String>()
            )));
        }
        Ok(())
    }

    async fn copy_if_not_exists(&self, _from: &Path, _to: &Path) -> object_store::Result<()> {
        Err(object_store::Error::NotImplemented)
    }
}

/// Asks the scheduler at `scheduler` which store its deployment uses.
pub async fn discover(scheduler: &str) -> Result<mcjs_protocol::store::StoreUrl, String> {
    let url = format!(
        "{}{}",
        scheduler.trim_end_matches('/'),
        mcjs_protocol::store::STORE_INFO_PATH
    );
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| e.to_string())?;
    let response = http
        .get(&url)
        .send()
        .await
        .map_err(|e| format!("cannot ask the scheduler for its store at {url}: {e}"))?;
    if !response.status().is_success() {
        return Err(format!("{url} answered {}", response.status()));
    }
    let info: mcjs_protocol::store::StoreInfo = response
        .json()
        .await
        .map_err(|e| format!("{url}: unreadable answer: {e}"))?;
    info.url
        .parse()
        .map_err(|e: mcjs_protocol::store::StoreUrlError| e.to_string())
}

/// Opens a deployment's store: a directory directly, an `s3://` store
/// through the gateway of the scheduler at `scheduler`, as `identity`.
pub fn open(
    url: &mcjs_protocol::store::StoreUrl,
    scheduler: &str,
    identity: Identity,
) -> Result<Arc<dyn ObjectStore>, String> {
    open_any(url, &[scheduler.to_string()], identity)
}

/// [`open`] with the gateways of several schedulers, for a deployment that
/// runs standbys: an `s3://` store is reached through whichever answers.
pub fn open_any(
    url: &mcjs_protocol::store::StoreUrl,
    schedulers: &[String],
    identity: Identity,
) -> Result<Arc<dyn ObjectStore>, String> {
    use mcjs_protocol::store::StoreUrl;
    match url {
        StoreUrl::Dir(dir) => {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create the store {}: {e}", dir.display()))?;
            let fs = object_store::local::LocalFileSystem::new_with_prefix(dir)
                .map_err(|e| format!("cannot open the store {}: {e}", dir.display()))?;
            Ok(Arc::new(fs))
        }
        StoreUrl::S3(_) if schedulers.is_empty() => {
            Err("an s3:// store is reached through a scheduler's gateway: none was given".into())
        }
        StoreUrl::S3(_) => Ok(Arc::new(BrokeredStore::with_gateways(schedulers, identity))),
    }
}
