//! The checkpoint pipeline's overhead on a job's step time: the reference
//! trainer in Docker, checkpointing every N steps, with and without the
//! agent's monitor (poll every 500 ms, hash, store, remove) running beside
//! it. Runs alternate; prints the median wall time of each and the overhead.
//!
//!     cargo bench -p mcjs-agent --bench checkpoint_overhead [-- RUNS]

mod common;

use mcjs_runtime::deadline::CheckpointDeadline;
use mcjs_runtime::docker::DockerEngine;
use mcjs_runtime::engine::{ContainerEngine, ContainerSpec, JobMounts};
use mcjs_runtime::launch::CheckpointMonitor;
use mcjs_runtime::store::{CheckpointPipeline, CheckpointStore};
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

const ARGS: &[&str] = &[
    "train",
    "--rows",
    "4096",
    "--features",
    "16",
    "--hidden",
    "2048",
    "--batch-size",
    "64",
    "--epochs",
    "2",
    "--checkpoint-every-steps",
    "16",
];

async fn run(
    engine: &DockerEngine,
    image: &str,
    dir: &Path,
    monitor: bool,
) -> (Duration, u64, u64) {
    let _ = std::fs::remove_dir_all(dir);
    let mounts = JobMounts {
        data: dir.join("data"),
        checkpoints: dir.join("checkpoints"),
        output: dir.join("output"),
        restore: None,
        metrics: None,
    };
    std::fs::create_dir_all(&mounts.data).unwrap();
    mounts.prepare("65532:65532").unwrap();
    let mut spec = ContainerSpec::new("bench", image, mounts);
    spec.args = ARGS.iter().map(ToString::to_string).collect();
    spec.resources.memory_mib = 1024;
    spec.checkpoint_interval = Duration::from_secs(3600);
    let started = Instant::now();
    let id = engine.start(&spec).await.unwrap();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = monitor.then(|| {
        let pipeline = CheckpointPipeline {
            generation: 1,
            store: CheckpointStore::local(&dir.join("store"), 2).unwrap(),
            job_id: "bench".into(),
            local_root: dir.join("checkpoints"),
            hash_threads: 2,
            limits: mcjs_runtime::confined::Limits::UNLIMITED,
            every_steps: None,
        };
        let done = std::sync::Arc::clone(&done);
        tokio::spawn(async move {
            let mut m = CheckpointMonitor::new(
                pipeline,
                CheckpointDeadline::with_default_grace(Duration::from_secs(3600)),
                SystemTime::now(),
            );
            let (mut stored, mut bytes) = (0u64, 0u64);
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                for c in m.poll(SystemTime::now()).await.unwrap().stored {
                    stored += 1;
                    bytes += c.total_bytes();
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            (stored, bytes)
        })
    });
    // The job's time is measured by the wait, not by the monitor's polling.
    let exit = engine.wait(&id).await.unwrap();
    let wall = started.elapsed();
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let (stored, bytes) = match watcher {
        Some(w) => w.await.unwrap(),
        None => (0, 0),
    };
    assert_eq!(exit.code, 0, "{exit}");
    engine.remove(&id).await.unwrap();
    (wall, stored, bytes)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

#[tokio::main]
async fn main() {
    let runs: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(5);
    let image = common::trainer_image();
    let engine = DockerEngine::connect().await.expect("a Docker engine");
    let dir = tempfile::tempdir().unwrap();
    let (mut without, mut with) = (Vec::new(), Vec::new());
    let (mut stored, mut bytes) = (0, 0);
    run(&engine, &image, &dir.path().join("warm"), false).await;
    for i in 0..runs {
        let (w, _, _) = run(&engine, &image, &dir.path().join(format!("off-{i}")), false).await;
        without.push(w);
        let (w, s, b) = run(&engine, &image, &dir.path().join(format!("on-{i}")), true).await;
        with.push(w);
        (stored, bytes) = (s, b);
    }
    let (off, on) = (median(without.clone()), median(with.clone()));
    println!("trainer args: {}", ARGS.join(" "));
    println!(
        "runs: {runs} each, alternating; checkpoints stored per run: {stored} ({bytes} bytes in all)"
    );
    println!(
        "without the pipeline: median {:.3} s  {:?}",
        off.as_secs_f64(),
        without
            .iter()
            .map(|d| format!("{:.3}", d.as_secs_f64()))
            .collect::<Vec<_>>()
    );
    println!(
        "with the pipeline:    median {:.3} s  {:?}",
        on.as_secs_f64(),
        with.iter()
            .map(|d| format!("{:.3}", d.as_secs_f64()))
            .collect::<Vec<_>>()
    );
    println!(
        "overhead on step time: {:+.2}%",
        (on.as_secs_f64() / off.as_secs_f64() - 1.0) * 100.0
    );
}
