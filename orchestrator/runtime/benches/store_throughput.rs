//! Checkpoints of real size: MCJS's checkpoint upload (read, hashed and
//! stored, descriptor last) and restore (fetched, hashed against the
//! attested hash, in place) against a plain S3 client moving the same bytes
//! to and from the same server, in one run. The server is `s3s-fs` on
//! loopback (as scripts/setup.sh installs it), MCJS talks to it with the
//! operator's keys (the gateway's own cost is measured by the cluster's
//! `store_bench`); the plain client is boto3's managed transfer, 8 threads,
//! 16 MiB parts (`bench/s3_plain.py`, with the interpreter in
//! `MCJS_BENCH_PYTHON`; skipped without one).
//!
//! ```text
//! MCJS_BENCH_PYTHON=~/.cache/mcjs/bench-venv/bin/python \
//! MCJS_BENCH_SIZES=256,1024,4096 MCJS_BENCH_FILES=1 MCJS_BENCH_REPS=3 \
//!   cargo bench -p mcjs-runtime --bench store_throughput
//! ```
//!
//! Prints, per size, the medians in MiB/s and MCJS's ratio to the plain
//! client (upload against upload; restore, which verifies, against the
//! plain download and against the plain download followed by a sha256 of
//! what arrived).

use mcjs_runtime::checkpoint::complete_checkpoints_in;
use mcjs_runtime::confined::{ConfinedDir, Limits};
use mcjs_runtime::store::{CheckpointStore, ExpectedCheckpoint};
use object_store::ClientOptions;
use object_store::ObjectStore;
use object_store::aws::AmazonS3Builder;
use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

const BUCKET: &str = "bench";
const KEY_ID: &str = "mcjs-bench";
const SECRET: &str = "mcjs-bench-secret";
const JOB: &str = "job-bench";

fn env(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

struct S3Server(Child);

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn s3s_fs() -> PathBuf {
    if let Some(p) = std::env::var_os("MCJS_S3S_FS") {
        return p.into();
    }
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cargo"));
    home.join("bin/s3s-fs")
}

fn start_s3(root: &Path) -> (S3Server, String) {
    std::fs::create_dir_all(root.join(BUCKET)).unwrap();
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new(s3s_fs())
        .args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .args(["--access-key", KEY_ID, "--secret-key", SECRET])
        .arg(root)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("s3s-fs (scripts/setup.sh installs it)");
    let endpoint = format!("http://127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "s3s-fs did not listen");
        std::thread::sleep(Duration::from_millis(50));
    }
    (S3Server(child), endpoint)
}

/// `files` files of `mib` MiB in all, incompressible, under
/// `root/step-<step>` with their manifest.
fn write_checkpoint(root: &Path, step: u64, mib: usize, files: usize) -> Vec<PathBuf> {
    let dir = root.join(format!("step-{step:012}"));
    std::fs::create_dir_all(&dir).unwrap();
    let per = (mib << 20) / files;
    let mut names = Vec::new();
    let mut paths = Vec::new();
    for i in 0..files {
        let name = format!("shard-{i}.bin");
        let path = dir.join(&name);
        let mut out =
            std::io::BufWriter::with_capacity(8 << 20, std::fs::File::create(&path).unwrap());
        let mut x = (step << 32 | i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut block = vec![0u8; 1 << 20];
        for _ in 0..per >> 20 {
            for word in block.chunks_exact_mut(8) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                word.copy_from_slice(&x.to_le_bytes());
            }
            out.write_all(&block).unwrap();
        }
        out.flush().unwrap();
        names.push(name);
        paths.push(path);
    }
    std::fs::write(
        dir.join(mcjs_runtime::contract::MANIFEST_FILE),
        serde_json::to_vec(&serde_json::json!({
            "format": mcjs_runtime::contract::MANIFEST_FORMAT,
            "epoch": 0,
            "step": step,
            "files": names,
        }))
        .unwrap(),
    )
    .unwrap();
    paths
}

fn plain_client(
    python: &str,
    endpoint: &str,
    reps: usize,
    files: &[PathBuf],
) -> Option<serde_json::Value> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/s3_plain.py");
    let out = Command::new(python)
        .arg(script)
        .args([endpoint, BUCKET, KEY_ID, SECRET, &reps.to_string()])
        .args(files)
        .output()
        .ok()?;
    if !out.status.success() {
        eprintln!(
            "plain client failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        return None;
    }
    serde_json::from_slice(&out.stdout).ok()
}

fn main() {
    let sizes: Vec<usize> = env("MCJS_BENCH_SIZES", "256,1024")
        .split(',')
        .map(|s| {
            s.trim()
                .parse()
                .expect("MCJS_BENCH_SIZES: MiB, comma-separated")
        })
        .collect();
    let files: usize = env("MCJS_BENCH_FILES", "1").parse().unwrap();
    let reps: usize = env("MCJS_BENCH_REPS", "3").parse().unwrap();
    let python = std::env::var("MCJS_BENCH_PYTHON").ok();
    let base = std::env::var_os("MCJS_BENCH_DIR").map_or_else(std::env::temp_dir, PathBuf::from);
    let work = tempfile::Builder::new()
        .prefix("store-throughput-")
        .tempdir_in(&base)
        .unwrap();
    let (_server, endpoint) = start_s3(&work.path().join("s3"));
    let s3: Arc<dyn ObjectStore> = Arc::new(
        AmazonS3Builder::new()
            .with_endpoint(&endpoint)
            .with_bucket_name(BUCKET)
            .with_region("us-east-1")
            .with_access_key_id(KEY_ID)
            .with_secret_access_key(SECRET)
            .with_client_options(
                ClientOptions::new()
                    .with_allow_http(true)
                    .with_timeout(Duration::from_secs(600)),
            )
            .build()
            .unwrap(),
    );
    let store = CheckpointStore::new(s3, 1);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "# store_throughput: {files} file(s) a checkpoint, {reps} repetitions, medians; s3s-fs on loopback; {threads} cores"
    );
    println!(
        "| size | MCJS upload MiB/s | plain upload MiB/s | ratio | MCJS restore (verified) MiB/s | plain download MiB/s | plain download+sha256 MiB/s | restore / download | restore / download+sha256 |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for (i, &mib) in sizes.iter().enumerate() {
        let local = work.path().join("local");
        let _ = std::fs::remove_dir_all(&local);
        let paths = write_checkpoint(&local, 1 + i as u64, mib, files);
        let (mut up, mut down) = (Vec::new(), Vec::new());
        for rep in 0..reps {
            let root = ConfinedDir::open(&local).unwrap();
            let found = complete_checkpoints_in(&root).unwrap();
            let t = Instant::now();
            let stored = rt
                .block_on(store.upload(JOB, rep as u32 + 1, &root, &found[0], Limits::UNLIMITED, 0))
                .unwrap();
            up.push(t.elapsed().as_secs_f64());
            let dest = work.path().join(format!("restore-{rep}"));
            std::fs::create_dir_all(&dest).unwrap();
            let expected = [ExpectedCheckpoint {
                step: stored.step,
                hash: stored.hash,
            }];
            let t = Instant::now();
            rt.block_on(store.restore(JOB, &expected, Limits::UNLIMITED, &dest))
                .unwrap();
            down.push(t.elapsed().as_secs_f64());
            std::fs::remove_dir_all(&dest).unwrap();
            rt.block_on(store.prune(JOB, u64::MAX, None)).unwrap();
        }
        let rate = |secs: f64| mib as f64 / secs;
        let (up, down) = (rate(median(up)), rate(median(down)));
        let plain = python
            .as_deref()
            .and_then(|p| plain_client(p, &endpoint, reps, &paths));
        let plain_rate = |op: &str| {
            plain.as_ref().map(|v| {
                let secs: Vec<f64> = v[op]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|s| s.as_f64().unwrap())
                    .collect();
                rate(median(secs))
            })
        };
        let (pu, pd, ph) = (
            plain_rate("upload"),
            plain_rate("download"),
            plain_rate("download_hash"),
        );
        let show = |x: Option<f64>| x.map_or("–".into(), |x| format!("{x:.0}"));
        let ratio = |a: f64, b: Option<f64>| b.map_or("–".into(), |b| format!("{:.2}", a / b));
        println!(
            "| {mib} MiB | {up:.0} | {} | {} | {down:.0} | {} | {} | {} | {} |",
            show(pu),
            ratio(up, pu),
            show(pd),
            show(ph),
            ratio(down, pd),
            ratio(down, ph)
        );
        std::fs::remove_dir_all(&local).unwrap();
    }
}
