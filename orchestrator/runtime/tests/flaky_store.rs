//! A store that fails in the middle of an upload: a real S3 server
//! (`s3s-fs`, as scripts/setup.sh installs it) behind a TCP proxy that cuts
//! every connection and refuses new ones once a chosen request (or a number
//! of bytes) goes by, until it is healed. Whatever request fails (the single
//! put, starting a multipart upload, a part, the completion), the upload
//! returns a clear error and never panics, nothing is visible under the
//! checkpoint's keys, the checkpoint stays on the node, and the next
//! collection once the store answers again stores it byte for byte.
//!
//! In addition, an `ObjectStore` wrapper that fails one chosen call (and,
//! optionally, the abort too) checks the same without a network, and that
//! every failed multipart upload is aborted.

use async_trait::async_trait;
use futures_util::stream::BoxStream;
use mcjs_runtime::checkpoint::hash_checkpoint;
use mcjs_runtime::confined::Limits;
use mcjs_runtime::store::{
    CheckpointPipeline, CheckpointStore, ObjectUpload, PART_SIZE, StoreError, UploadStage,
};
use object_store::aws::AmazonS3Builder;
use object_store::memory::InMemory;
use object_store::path::Path as ObjectPath;
use object_store::{
    BackoffConfig, ClientOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta,
    ObjectStore, PutMultipartOptions, PutOptions, PutPayload, PutResult, RetryConfig, UploadPart,
};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Once};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

const JOB: &str = "job-7";
const BUCKET: &str = "ckpt";
const KEY_ID: &str = "mcjs-test";
const SECRET: &str = "mcjs-test-secret";

/// Panics anywhere in this test binary (any thread, any task), counted: a
/// panic swallowed by a task's `JoinHandle` still shows here.
static PANICS: AtomicUsize = AtomicUsize::new(0);

fn count_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICS.fetch_add(1, Ordering::SeqCst);
            default(info);
        }));
    });
}

/// Deterministic, incompressible-looking bytes, different for each `seed`.
fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

// ---------------------------------------------------------------- S3 server

/// `$MCJS_S3S_FS`, else on the PATH, else cargo's bin dir.
fn s3s_fs_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("MCJS_S3S_FS") {
        return p.into();
    }
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            if dir.join("s3s-fs").is_file() {
                return dir.join("s3s-fs");
            }
        }
    }
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cargo"));
    cargo_home.join("bin/s3s-fs")
}

struct S3Server {
    addr: SocketAddr,
    child: Child,
}

impl S3Server {
    async fn start(root: &Path) -> Self {
        std::fs::create_dir_all(root.join(BUCKET)).unwrap();
        let port = TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let bin = s3s_fs_bin();
        let child = Command::new(&bin)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--access-key", KEY_ID, "--secret-key", SECRET])
            .arg(root)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start the S3 server {} ({e}); scripts/setup.sh installs it",
                    bin.display()
                )
            });
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(addr).await.is_err() {
            assert!(Instant::now() < deadline, "s3s-fs did not listen on {port}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Self { addr, child }
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A client of the S3 server at `addr`, retrying briefly (a production
/// client retries for minutes; the proxy refuses everything until healed).
fn s3_client(addr: SocketAddr) -> Arc<dyn ObjectStore> {
    let retry = RetryConfig {
        backoff: BackoffConfig {
            init_backoff: Duration::from_millis(10),
            max_backoff: Duration::from_millis(50),
            base: 2.0,
        },
        max_retries: 2,
        retry_timeout: Duration::from_secs(10),
    };
    let s3 = AmazonS3Builder::new()
        .with_endpoint(format!("http://{addr}"))
        .with_bucket_name(BUCKET)
        .with_region("us-east-1")
        .with_access_key_id(KEY_ID)
        .with_secret_access_key(SECRET)
        .with_client_options(
            ClientOptions::new()
                .with_allow_http(true)
                .with_timeout(Duration::from_secs(60)),
        )
        .with_retry(retry)
        .build()
        .unwrap();
    Arc::new(s3)
}

// ---------------------------------------------------------------- the proxy

/// When the proxy goes down.
#[derive(Clone, Copy, Debug)]
enum Trip {
    Never,
    /// Once this many bytes have gone from the client to the server.
    AfterBytes(u64),
    /// Before forwarding a request containing this (a request line's
    /// query: `?uploads=` starts a multipart upload, `?uploadId=`
    /// completes one, `&uploadId=` stores a part).
    OnRequest(&'static str),
}

struct ProxyState {
    trip: Trip,
    sent: u64,
    tripped: usize,
}

/// Forwards to the S3 server. Once tripped it is down: every connection is
/// closed mid-stream and new ones are closed at once, until healed.
struct Proxy {
    addr: SocketAddr,
    state: Arc<Mutex<ProxyState>>,
    down: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    async fn start(target: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(Mutex::new(ProxyState {
            trip: Trip::Never,
            sent: 0,
            tripped: 0,
        }));
        let (down, _) = watch::channel(false);
        let task = {
            let (state, down) = (Arc::clone(&state), down.clone());
            tokio::spawn(async move {
                loop {
                    let Ok((inbound, _)) = listener.accept().await else {
                        continue;
                    };
                    if *down.borrow() {
                        drop(inbound); // refused
                        continue;
                    }
                    let (state, down) = (Arc::clone(&state), down.clone());
                    tokio::spawn(connection(inbound, target, state, down));
                }
            })
        };
        Self {
            addr,
            state,
            down,
            task,
        }
    }

    fn arm(&self, trip: Trip) {
        let mut s = self.state.lock().unwrap();
        s.trip = trip;
        s.sent = 0;
    }

    fn heal(&self) {
        self.state.lock().unwrap().trip = Trip::Never;
        self.down.send_replace(false);
    }

    fn tripped(&self) -> usize {
        self.state.lock().unwrap().tripped
    }

    /// Bytes sent to the S3 server since the last `arm`.
    fn sent(&self) -> u64 {
        self.state.lock().unwrap().sent
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn connection(
    inbound: TcpStream,
    target: SocketAddr,
    state: Arc<Mutex<ProxyState>>,
    down: watch::Sender<bool>,
) {
    let Ok(outbound) = TcpStream::connect(target).await else {
        return;
    };
    let (mut client_r, mut client_w) = inbound.into_split();
    let (mut server_r, mut server_w) = outbound.into_split();
    let mut watch_down = down.subscribe();
    let upstream = async {
        let mut buf = vec![0u8; 64 << 10];
        // The end of the previous read, so a needle split across reads is found.
        let mut tail: Vec<u8> = Vec::new();
        loop {
            let n = match client_r.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            let forward = {
                let mut s = state.lock().unwrap();
                let (forward, trip) = match s.trip {
                    Trip::Never => (n, false),
                    Trip::AfterBytes(limit) => {
                        let left = limit.saturating_sub(s.sent) as usize;
                        (n.min(left), n >= left)
                    }
                    Trip::OnRequest(needle) => {
                        let mut seen = std::mem::take(&mut tail);
                        seen.extend_from_slice(&buf[..n]);
                        let hit = seen.windows(needle.len()).any(|w| w == needle.as_bytes());
                        tail = seen[seen.len().saturating_sub(needle.len())..].to_vec();
                        if hit { (0, true) } else { (n, false) }
                    }
                };
                s.sent += forward as u64;
                if trip {
                    s.trip = Trip::Never;
                    s.tripped += 1;
                    down.send_replace(true);
                }
                forward
            };
            if forward > 0 && server_w.write_all(&buf[..forward]).await.is_err() {
                return;
            }
            if forward < n {
                return;
            }
        }
    };
    let downstream = async {
        let mut buf = vec![0u8; 64 << 10];
        loop {
            match server_r.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    if client_w.write_all(&buf[..n]).await.is_err() {
                        return;
                    }
                }
            }
        }
    };
    tokio::select! {
        _ = upstream => {}
        _ = downstream => {}
        _ = watch_down.wait_for(|d| *d) => {}
    }
    // Dropping both sockets here cuts the connection both ways.
}

// ---------------------------------------------------------------- fixture

struct Fixture {
    _t: tempfile::TempDir,
    local: PathBuf,
    _s3: S3Server,
    proxy: Proxy,
    /// The S3 server without the proxy: what is visible there.
    direct: Arc<dyn ObjectStore>,
    pipeline: CheckpointPipeline,
}

impl Fixture {
    async fn new() -> Self {
        count_panics();
        let t = tempfile::tempdir().unwrap();
        let local = t.path().join("ckpt");
        std::fs::create_dir_all(&local).unwrap();
        let s3 = S3Server::start(&t.path().join("s3")).await;
        let proxy = Proxy::start(s3.addr).await;
        let pipeline = CheckpointPipeline {
            store: CheckpointStore::new(s3_client(proxy.addr), 3),
            job_id: JOB.into(),
            generation: 1,
            local_root: local.clone(),
            // One file at a time: the manifest (a single put) goes first.
            hash_threads: 1,
            limits: Limits::UNLIMITED,
            every_steps: None,
        };
        Self {
            direct: s3_client(s3.addr),
            _s3: s3,
            proxy,
            _t: t,
            local,
            pipeline,
        }
    }

    /// A complete checkpoint of `step` whose weights are `weights` bytes.
    fn checkpoint(&self, step: u64, weights: usize) -> (PathBuf, Vec<u8>) {
        let dir = self.local.join(format!("step-{step:06}"));
        std::fs::create_dir_all(&dir).unwrap();
        let bytes = pattern(weights, step);
        std::fs::write(dir.join("weights.bin"), &bytes).unwrap();
        std::fs::write(
            dir.join("mcjs-manifest.json"),
            format!(r#"{{"format":"mcjs-checkpoint/1","epoch":0,"step":{step}}}"#),
        )
        .unwrap();
        (dir, bytes)
    }

    /// Every object the S3 server shows under the job.
    async fn visible(&self) -> Vec<String> {
        use futures_util::TryStreamExt;
        let prefix = ObjectPath::from(format!("jobs/{JOB}"));
        let mut found: Vec<String> = self
            .direct
            .list(Some(&prefix))
            .map_ok(|m| m.location.to_string())
            .try_collect()
            .await
            .unwrap();
        found.sort();
        found
    }

    /// Cuts the store at `trip` while the checkpoint of `step` (`weights`
    /// bytes of weights) is collected, then heals it and collects again.
    async fn cut_then_recover(&self, step: u64, weights: usize, trip: Trip) -> StoreError {
        let panics = PANICS.load(Ordering::SeqCst);
        let (dir, bytes) = self.checkpoint(step, weights);
        let digest = hash_checkpoint(&dir, 1).unwrap();
        self.proxy.arm(trip);
        let failed = self.pipeline.collect().await;
        let err = failed.expect_err("the store went down mid-upload");
        assert_eq!(self.proxy.tripped(), 1, "the fault was hit: {err}");
        self.proxy.heal();
        assert_eq!(PANICS.load(Ordering::SeqCst), panics, "nothing panicked");
        assert!(
            !err.is_job_fault(),
            "the store's failure is not the job's: {err}"
        );
        // The failed file is not there, nor a descriptor: no checkpoint is
        // visible. What was stored completely before the cut (the
        // manifest's single put) stays when the store is still down for
        // the cleanup; without a descriptor nothing lists or restores it.
        let left = self.visible().await;
        assert!(
            left.iter()
                .all(|p| p.ends_with("/files/mcjs-manifest.json")),
            "nothing half-written or described is visible ({err}): {left:?}"
        );
        let listing = self.pipeline.store.list(JOB).await.unwrap();
        assert!(listing.checkpoints.is_empty() && listing.skipped.is_empty());
        assert!(
            dir.join("weights.bin").is_file(),
            "the checkpoint stays on the node"
        );

        // The store answers again: the same checkpoint goes through whole.
        let stored = self.pipeline.collect().await.unwrap();
        assert_eq!(stored.len(), 1);
        let c = &stored[0];
        assert_eq!((c.step, c.hash), (step, digest.hash));
        let base = format!("jobs/{JOB}/checkpoints/{}", c.key);
        let got = self
            .direct
            .get(&ObjectPath::from(format!("{base}/files/weights.bin")))
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        assert!(
            got.len() == bytes.len() && got[..] == bytes[..],
            "byte-identical"
        );
        assert!(!dir.exists(), "the local copy goes once stored");
        let now: Vec<String> = self
            .visible()
            .await
            .into_iter()
            .filter(|p| !left.contains(p))
            .collect();
        assert_eq!(
            now,
            vec![
                format!("{base}/checkpoint.json"),
                format!("{base}/files/mcjs-manifest.json"),
                format!("{base}/files/weights.bin"),
            ]
        );
        let listing = self.pipeline.store.list(JOB).await.unwrap();
        assert_eq!(listing.checkpoints, stored);
        // And it restores, verified against the hash.
        let restore = tempfile::tempdir().unwrap();
        let restored = self
            .pipeline
            .store
            .restore(
                JOB,
                &[mcjs_runtime::store::ExpectedCheckpoint {
                    step,
                    hash: digest.hash,
                }],
                Limits::UNLIMITED,
                restore.path(),
            )
            .await
            .unwrap();
        assert_eq!(restored.checkpoint.hash, digest.hash);
        assert_eq!(PANICS.load(Ordering::SeqCst), panics, "nothing panicked");
        err
    }
}

fn upload_stage(e: &StoreError) -> UploadStage {
    match e {
        StoreError::Upload(u) => u.stage,
        other => panic!("not an upload error: {other:?}"),
    }
}

/// Big enough for three parts (the last one short).
const BIG: usize = 2 * PART_SIZE + (3 << 20) + 17;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cut_while_parts_are_stored_fails_cleanly_and_the_retry_stores_it_whole() {
    let f = Fixture::new().await;
    // Part of the way through the second part's bytes.
    let err = f
        .cut_then_recover(
            10,
            BIG,
            Trip::AfterBytes((PART_SIZE + PART_SIZE / 2) as u64),
        )
        .await;
    assert!(matches!(upload_stage(&err), UploadStage::Part(_)), "{err}");
    let shown = err.to_string();
    assert!(shown.contains("weights.bin"), "{shown}");
    assert!(shown.contains("part"), "{shown}");
    assert!(
        shown.contains("uploading it again once the store answers is safe"),
        "{shown}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cut_at_the_completion_fails_cleanly_and_the_retry_stores_it_whole() {
    let f = Fixture::new().await;
    let err = f
        .cut_then_recover(20, BIG, Trip::OnRequest("?uploadId="))
        .await;
    assert_eq!(upload_stage(&err), UploadStage::Complete, "{err}");
    assert!(
        err.to_string().contains("completing its multipart upload"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_refused_multipart_start_fails_cleanly_and_the_retry_stores_it_whole() {
    let f = Fixture::new().await;
    let err = f
        .cut_then_recover(30, BIG, Trip::OnRequest("?uploads="))
        .await;
    assert_eq!(upload_stage(&err), UploadStage::Create, "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cut_during_a_single_put_fails_cleanly_and_the_retry_stores_it_whole() {
    let f = Fixture::new().await;
    // A checkpoint under a part: every file is one put; cut inside the
    // weights' request body (the manifest's put went through).
    let err = f
        .cut_then_recover(40, 3 << 20, Trip::AfterBytes(2 << 20))
        .await;
    assert_eq!(upload_stage(&err), UploadStage::Put, "{err}");
    assert!(err.to_string().contains("weights.bin"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_store_that_is_down_from_the_start_fails_cleanly() {
    let f = Fixture::new().await;
    // The very first byte: the manifest's put is refused.
    let err = f.cut_then_recover(50, BIG, Trip::AfterBytes(0)).await;
    assert_eq!(upload_stage(&err), UploadStage::Put, "{err}");
    assert!(err.to_string().contains("mcjs-manifest.json"), "{err}");
}

/// A file over a range is restored in ranges read at once, written in
/// order: byte-identical; the same file in the store with one byte changed,
/// or longer, is refused by name and nothing is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_big_file_is_restored_in_ranges_byte_identical_and_a_changed_one_is_refused() {
    use mcjs_runtime::store::{ExpectedCheckpoint, RANGE_SIZE};
    let f = Fixture::new().await;
    let size = 3 * RANGE_SIZE as usize + 12_345;
    let (_, bytes) = f.checkpoint(60, size);
    let stored = f.pipeline.collect().await.unwrap().remove(0);
    let expected = [ExpectedCheckpoint {
        step: 60,
        hash: stored.hash,
    }];
    let into = tempfile::tempdir().unwrap();
    let restore = async |name: &str| {
        f.pipeline
            .store
            .restore(JOB, &expected, Limits::UNLIMITED, &into.path().join(name))
            .await
    };
    let restored = restore("whole").await.unwrap();
    let back = std::fs::read(restored.dir.join("weights.bin")).unwrap();
    assert!(back.len() == bytes.len() && back == bytes, "byte-identical");

    let weights = ObjectPath::from(format!(
        "jobs/{JOB}/checkpoints/{}/files/weights.bin",
        stored.key
    ));
    // One byte changed in the last range.
    let mut changed = bytes.clone();
    changed[size - 5] ^= 1;
    f.direct.put(&weights, changed.into()).await.unwrap();
    let err = restore("changed").await.unwrap_err().to_string();
    assert!(
        err.contains("weights.bin: refused") && err.contains(&format!("{size} bytes")),
        "{err}"
    );
    // Longer than attested: refused without reading it.
    let mut longer = bytes.clone();
    longer.extend_from_slice(&[0; 100]);
    f.direct.put(&weights, longer.into()).await.unwrap();
    let err = restore("longer").await.unwrap_err().to_string();
    assert!(
        err.contains("weights.bin: refused") && err.contains(&format!("{} bytes", size + 100)),
        "{err}"
    );
    let left: Vec<_> = std::fs::read_dir(into.path().join("changed"))
        .map(|d| d.collect())
        .unwrap_or_default();
    assert!(
        left.is_empty(),
        "nothing left of a refused restore: {left:?}"
    );
}

/// A checkpoint file that did not change since the last stored checkpoint
/// (frozen base weights) is copied inside the store: the second checkpoint
/// sends the S3 server its changed bytes and little more, and both restore
/// byte-identical.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_unchanged_file_is_copied_in_the_store_and_only_the_changed_bytes_are_sent() {
    use mcjs_runtime::store::ExpectedCheckpoint;
    let f = Fixture::new().await;
    let frozen = pattern(6 << 20, 99);
    let weights = 2 << 20;
    let mut stored = Vec::new();
    let mut sent = Vec::new();
    for step in [70, 80] {
        let (dir, _) = f.checkpoint(step, weights);
        std::fs::write(dir.join("base.bin"), &frozen).unwrap();
        f.proxy.arm(Trip::Never);
        stored.push(f.pipeline.collect().await.unwrap().remove(0));
        sent.push(f.proxy.sent());
    }
    assert!(
        sent[0] > (8 << 20),
        "the first checkpoint sends both files: {sent:?}"
    );
    assert!(
        sent[1] >= weights as u64 && sent[1] < weights as u64 + (256 << 10),
        "the second sends its changed weights and requests, not the 6 MiB base: {sent:?}"
    );
    assert_ne!(stored[0].hash, stored[1].hash);
    let into = tempfile::tempdir().unwrap();
    for (c, step) in stored.iter().zip([70, 80]) {
        let restored = f
            .pipeline
            .store
            .restore(
                JOB,
                &[ExpectedCheckpoint { step, hash: c.hash }],
                Limits::UNLIMITED,
                &into.path().join(step.to_string()),
            )
            .await
            .unwrap();
        assert_eq!(
            std::fs::read(restored.dir.join("base.bin")).unwrap(),
            frozen
        );
        assert_eq!(
            std::fs::read(restored.dir.join("weights.bin")).unwrap(),
            pattern(weights, step)
        );
    }
    // Each checkpoint holds its own copy: pruning one leaves the other whole.
    let base = |c: &mcjs_runtime::store::StoredCheckpoint| {
        ObjectPath::from(format!("jobs/{JOB}/checkpoints/{}/files/base.bin", c.key))
    };
    for c in &stored {
        let got = f.direct.get(&base(c)).await.unwrap().bytes().await.unwrap();
        assert!(got[..] == frozen[..]);
    }
}

/// A copy inside the store that fails (its source pruned since) is no
/// failure: the file is uploaded, and the checkpoint restores whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_copy_whose_source_is_gone_falls_back_to_the_upload() {
    use mcjs_runtime::store::ExpectedCheckpoint;
    let f = Fixture::new().await;
    let frozen = pattern(6 << 20, 98);
    let (dir, _) = f.checkpoint(90, 1 << 20);
    std::fs::write(dir.join("base.bin"), &frozen).unwrap();
    let first = f.pipeline.collect().await.unwrap().remove(0);
    let source = ObjectPath::from(format!(
        "jobs/{JOB}/checkpoints/{}/files/base.bin",
        first.key
    ));
    f.direct.delete(&source).await.unwrap();
    let (dir, _) = f.checkpoint(100, 1 << 20);
    std::fs::write(dir.join("base.bin"), &frozen).unwrap();
    f.proxy.arm(Trip::Never);
    let second = f.pipeline.collect().await.unwrap().remove(0);
    assert!(
        f.proxy.sent() > (7 << 20),
        "the base is sent again: {}",
        f.proxy.sent()
    );
    let into = tempfile::tempdir().unwrap();
    let restored = f
        .pipeline
        .store
        .restore(
            JOB,
            &[ExpectedCheckpoint {
                step: 100,
                hash: second.hash,
            }],
            Limits::UNLIMITED,
            into.path(),
        )
        .await
        .unwrap();
    assert_eq!(
        std::fs::read(restored.dir.join("base.bin")).unwrap(),
        frozen
    );
}

// ------------------------------------------------- an error-injecting store

/// Which call of the wrapped store fails.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Fail {
    Put,
    Create,
    /// The n-th part (from 1).
    Part(usize),
    Complete,
    /// Every read of a checkpoint's files (not of its descriptor),
    /// refused as the gateway refuses a checker the files of a checkpoint
    /// other than its interval's start.
    Get,
}

#[derive(Debug)]
struct Faulty {
    inner: Arc<InMemory>,
    fail: Fail,
    abort_fails: bool,
    aborted: Arc<AtomicUsize>,
    parts: Arc<AtomicUsize>,
    armed: Arc<AtomicBool>,
}

impl std::fmt::Display for Faulty {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Faulty({:?})", self.fail)
    }
}

fn injected(what: &str) -> object_store::Error {
    object_store::Error::Generic {
        store: "Faulty",
        source: format!("injected failure: {what}").into(),
    }
}

impl Faulty {
    fn failing(&self, at: Fail) -> bool {
        self.fail == at && self.armed.load(Ordering::SeqCst)
    }
}

#[derive(Debug)]
struct FaultyUpload {
    inner: Box<dyn MultipartUpload>,
    store: FaultyShared,
}

#[derive(Debug, Clone)]
struct FaultyShared {
    fail: Fail,
    abort_fails: bool,
    aborted: Arc<AtomicUsize>,
    parts: Arc<AtomicUsize>,
    armed: Arc<AtomicBool>,
}

#[async_trait]
impl MultipartUpload for FaultyUpload {
    fn put_part(&mut self, data: PutPayload) -> UploadPart {
        let n = self.store.parts.fetch_add(1, Ordering::SeqCst) + 1;
        if self.store.fail == Fail::Part(n) && self.store.armed.load(Ordering::SeqCst) {
            return Box::pin(async move { Err(injected(&format!("part {n}"))) });
        }
        self.inner.put_part(data)
    }

    async fn complete(&mut self) -> object_store::Result<PutResult> {
        if self.store.fail == Fail::Complete && self.store.armed.load(Ordering::SeqCst) {
            return Err(injected("complete"));
        }
        self.inner.complete().await
    }

    async fn abort(&mut self) -> object_store::Result<()> {
        self.store.aborted.fetch_add(1, Ordering::SeqCst);
        if self.store.abort_fails {
            return Err(injected("abort"));
        }
        self.inner.abort().await
    }
}

#[async_trait]
impl ObjectStore for Faulty {
    async fn put_opts(
        &self,
        location: &ObjectPath,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        if self.failing(Fail::Put) {
            return Err(injected("put"));
        }
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &ObjectPath,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        if self.failing(Fail::Create) {
            return Err(injected("create"));
        }
        let inner = self.inner.put_multipart_opts(location, opts).await?;
        Ok(Box::new(FaultyUpload {
            inner,
            store: FaultyShared {
                fail: self.fail,
                abort_fails: self.abort_fails,
                aborted: Arc::clone(&self.aborted),
                parts: Arc::clone(&self.parts),
                armed: Arc::clone(&self.armed),
            },
        }))
    }

    async fn get_opts(
        &self,
        location: &ObjectPath,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        if self.failing(Fail::Get) && location.as_ref().contains("/files/") {
            return Err(object_store::Error::PermissionDenied {
                path: location.to_string(),
                source: "injected: store request refused".into(),
            });
        }
        self.inner.get_opts(location, options).await
    }

    async fn delete(&self, location: &ObjectPath) -> object_store::Result<()> {
        self.inner.delete(location).await
    }

    fn list(
        &self,
        prefix: Option<&ObjectPath>,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(
        &self,
        prefix: Option<&ObjectPath>,
    ) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy(&self, from: &ObjectPath, to: &ObjectPath) -> object_store::Result<()> {
        self.inner.copy(from, to).await
    }

    async fn copy_if_not_exists(
        &self,
        from: &ObjectPath,
        to: &ObjectPath,
    ) -> object_store::Result<()> {
        self.inner.copy_if_not_exists(from, to).await
    }
}

/// Each injected failure, with the abort failing too or not: a clear error
/// naming the failed request, nothing under the path, the multipart upload
/// aborted (once), no panic; disarmed, the same upload goes through whole.
#[tokio::test]
async fn every_injected_failure_is_an_error_and_the_upload_is_aborted() {
    count_panics();
    let panics = PANICS.load(Ordering::SeqCst);
    let cases = [
        (Fail::Put, 1000, UploadStage::Put, 0),
        (Fail::Create, BIG, UploadStage::Create, 0),
        (Fail::Part(1), BIG, UploadStage::Part(1), 1),
        (Fail::Part(3), BIG, UploadStage::Part(3), 1),
        (Fail::Complete, BIG, UploadStage::Complete, 1),
        // Exactly two parts: the last one sent by `finish`.
        (Fail::Part(2), 2 * PART_SIZE, UploadStage::Part(2), 1),
    ];
    for abort_fails in [false, true] {
        for (fail, size, stage, aborts) in cases {
            let inner = Arc::new(InMemory::new());
            let faulty = Faulty {
                inner: Arc::clone(&inner),
                fail,
                abort_fails,
                aborted: Arc::default(),
                parts: Arc::default(),
                armed: Arc::new(AtomicBool::new(true)),
            };
            let (aborted, armed) = (Arc::clone(&faulty.aborted), Arc::clone(&faulty.armed));
            let store: Arc<dyn ObjectStore> = Arc::new(faulty);
            let path = ObjectPath::from("jobs/j/checkpoints/k/files/weights.bin");
            let bytes = pattern(size, size as u64);
            let send = |store: Arc<dyn ObjectStore>| {
                let (path, bytes) = (path.clone(), bytes.clone());
                async move {
                    let mut up = ObjectUpload::new(store, path);
                    for chunk in bytes.chunks(1 << 20) {
                        up.put(bytes::Bytes::copy_from_slice(chunk)).await?;
                    }
                    up.finish().await
                }
            };
            let err = send(Arc::clone(&store))
                .await
                .expect_err("the injected failure surfaces");
            let case = format!("{fail:?}, abort fails: {abort_fails}: {err}");
            assert_eq!(err.stage, stage, "{case}");
            assert!(err.to_string().contains("injected failure"), "{case}");
            assert!(err.to_string().contains(path.as_ref()), "{case}");
            assert_eq!(aborted.load(Ordering::SeqCst), aborts, "{case}");
            assert!(inner.head(&path).await.is_err(), "nothing visible: {case}");

            armed.store(false, Ordering::SeqCst);
            send(Arc::clone(&store)).await.unwrap();
            let got = inner.get(&path).await.unwrap().bytes().await.unwrap();
            assert!(got[..] == bytes[..], "byte-identical: {case}");
        }
    }
    assert_eq!(PANICS.load(Ordering::SeqCst), panics, "nothing panicked");
}

/// Giving an upload up before it finishes leaves nothing, and aborts the
/// multipart upload it had started.
#[tokio::test]
async fn an_abandoned_upload_leaves_nothing() {
    let inner = Arc::new(InMemory::new());
    let faulty = Faulty {
        inner: Arc::clone(&inner),
        fail: Fail::Put,
        abort_fails: false,
        aborted: Arc::default(),
        parts: Arc::default(),
        armed: Arc::new(AtomicBool::new(false)),
    };
    let aborted = Arc::clone(&faulty.aborted);
    let path = ObjectPath::from("a/b");
    let mut up = ObjectUpload::new(Arc::new(faulty), path.clone());
    up.put(pattern(PART_SIZE + 1, 1)).await.unwrap();
    up.abort().await;
    assert_eq!(aborted.load(Ordering::SeqCst), 1);
    assert!(inner.head(&path).await.is_err());
}

/// A restore that finds no usable copy says whether the store answered
/// (the copy is not there: the start is unavailable) or only refused or
/// failed its requests (nothing is known of the copy): a checker answers
/// `StartUnavailable`, which can cost the provider its stake, only on the
/// first.
#[tokio::test]
async fn a_restore_refused_by_the_store_is_told_apart_from_a_missing_checkpoint() {
    use mcjs_runtime::checkpoint::Sha256Digest;
    use mcjs_runtime::store::ExpectedCheckpoint;
    let t = tempfile::tempdir().unwrap();
    let local = t.path().join("ckpt");
    let dir = local.join("step-000010");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("weights.bin"), pattern(4096, 10)).unwrap();
    std::fs::write(
        dir.join("mcjs-manifest.json"),
        r#"{"format":"mcjs-checkpoint/1","epoch":0,"step":10}"#,
    )
    .unwrap();
    let inner = Arc::new(InMemory::new());
    let faulty = Faulty {
        inner: Arc::clone(&inner),
        fail: Fail::Get,
        abort_fails: false,
        aborted: Arc::default(),
        parts: Arc::default(),
        armed: Arc::new(AtomicBool::new(false)),
    };
    let armed = Arc::clone(&faulty.armed);
    let pipeline = CheckpointPipeline {
        store: CheckpointStore::new(Arc::new(faulty), 3),
        job_id: JOB.into(),
        generation: 1,
        local_root: local,
        hash_threads: 1,
        limits: Limits::UNLIMITED,
        every_steps: None,
    };
    pipeline.collect().await.unwrap();
    let stored = pipeline.store.list(JOB).await.unwrap().checkpoints;
    let expected = [ExpectedCheckpoint {
        step: 10,
        hash: stored[0].hash,
    }];
    let restore = async |into: &str| {
        pipeline
            .store
            .restore(JOB, &expected, Limits::UNLIMITED, &t.path().join(into))
            .await
    };
    // Whole and readable: restored.
    restore("a").await.unwrap();

    // The store refuses to read the files (descriptors still answer).
    armed.store(true, Ordering::SeqCst);
    let refused = restore("b").await.unwrap_err();
    assert!(
        matches!(refused, StoreError::NoUsableCheckpoint { .. }),
        "{refused}"
    );
    assert!(
        refused.store_failed(),
        "a refusal says nothing of the copy: {refused}"
    );
    armed.store(false, Ordering::SeqCst);

    // One of its files is gone: the store answered, the copy is not whole.
    use futures_util::TryStreamExt;
    let files: Vec<ObjectPath> = inner
        .list(None)
        .map_ok(|m| m.location)
        .try_collect()
        .await
        .unwrap();
    let file = files
        .iter()
        .find(|p| p.as_ref().ends_with("/files/weights.bin"))
        .expect("the weights are stored");
    inner.delete(file).await.unwrap();
    let missing = restore("c").await.unwrap_err();
    assert!(
        matches!(missing, StoreError::NoUsableCheckpoint { .. }),
        "{missing}"
    );
    assert!(
        !missing.store_failed(),
        "a missing file is an answer: {missing}"
    );

    // A hash the store holds no copy of: an answer too.
    let unknown = [ExpectedCheckpoint {
        step: 10,
        hash: Sha256Digest([7; 32]),
    }];
    let none = pipeline
        .store
        .restore(JOB, &unknown, Limits::UNLIMITED, &t.path().join("d"))
        .await
        .unwrap_err();
    assert!(!none.store_failed(), "{none}");
}
