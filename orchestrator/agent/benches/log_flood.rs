//! What a job that floods its output costs the other jobs on its node, and
//! the agent: the reference trainer (a fixed amount of work, one CPU) in
//! Docker, alone and then beside a job that prints 200-byte lines as fast
//! as it can (`mcjs-trainer flood`, one CPU), each container's output
//! followed and shipped to a local store as the agent does
//! (`ContainerEngine::follow_output` into `logs::ship`, the default cap).
//! Runs alternate; prints the trainer's median wall time alone and beside
//! the flood, what the flood printed, shipped, dropped and left stored, and
//! this process's (the agent's side of the pipeline) CPU time and peak
//! resident memory during each kind of run, beside the Docker daemon's CPU
//! time where its process can be read.
//!
//!     cargo bench -p mcjs-agent --bench log_flood [-- RUNS [EPOCHS]]
//!
//! EPOCHS sets the trainer's length (3 by default, about 2 s here; 90 runs
//! it for about a minute beside the flood).

mod common;

use mcjs_runtime::docker::DockerEngine;
use mcjs_runtime::engine::{ContainerEngine, ContainerSpec, JobMounts};
use mcjs_runtime::logs::{self, LogChunker, ShipReport};
use object_store::ObjectStore;
use object_store::local::LocalFileSystem;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

const TRAIN: &[&str] = &[
    "train",
    "--rows",
    "16384",
    "--features",
    "16",
    "--hidden",
    "2048",
    "--batch-size",
    "64",
];

/// Longer than any trainer run: the flood is removed once the trainer ends.
const FLOOD: &[&str] = &["flood", "--seconds", "600", "--line-bytes", "200"];

/// CPU time (user + system) of process `pid` ("self" for this one).
fn cpu_time(pid: &str) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command's closing parenthesis: state is the 3rd
    // field overall, utime the 14th and stime the 15th.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn dockerd_pid() -> Option<String> {
    let out = std::process::Command::new("pidof")
        .arg("dockerd")
        .output()
        .ok()?;
    let pid = String::from_utf8(out.stdout).ok()?;
    let pid = pid.split_whitespace().next()?.to_string();
    cpu_time(&pid).map(|_| pid)
}

/// A started container whose output is followed and shipped.
struct Shipped {
    id: mcjs_runtime::engine::ContainerId,
    follower: tokio::task::JoinHandle<()>,
    shipper: tokio::task::JoinHandle<ShipReport>,
}

async fn start(
    engine: &Arc<DockerEngine>,
    image: &str,
    dir: &Path,
    job: &str,
    args: &[&str],
    store: Arc<dyn ObjectStore>,
) -> Shipped {
    let mounts = JobMounts {
        data: dir.join("data"),
        checkpoints: dir.join("checkpoints"),
        output: dir.join("output"),
        restore: None,
        metrics: None,
    };
    std::fs::create_dir_all(&mounts.data).unwrap();
    mounts.prepare("65532:65532").unwrap();
    let mut spec = ContainerSpec::new(job, image, mounts);
    spec.args = args.iter().map(ToString::to_string).collect();
    spec.resources.cpus = 1.0;
    spec.resources.memory_mib = 1024;
    spec.checkpoint_interval = Duration::from_secs(3600);
    let id = engine.start(&spec).await.unwrap();
    let (sink, source) = logs::channel();
    let follower = {
        let (engine, id) = (Arc::clone(engine), id.clone());
        tokio::spawn(async move {
            let _ = engine.follow_output(&id, 0, sink).await;
        })
    };
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let chunker = LogChunker::new(job, 1, now_ms, logs::DEFAULT_CAP_BYTES);
    let shipper = tokio::spawn(logs::ship(store, chunker, source));
    Shipped {
        id,
        follower,
        shipper,
    }
}

/// What one run measured.
struct Run {
    trainer: Duration,
    wall: Duration,
    cpu: Duration,
    dockerd_cpu: Option<Duration>,
    peak_rss_kib: u64,
    flood: Option<(ShipReport, u64, u64)>,
}

async fn run(
    engine: &Arc<DockerEngine>,
    image: &str,
    dir: &Path,
    flood: bool,
    train: &[&str],
) -> Run {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir.join("store")).unwrap();
    let store: Arc<dyn ObjectStore> =
        Arc::new(LocalFileSystem::new_with_prefix(dir.join("store")).unwrap());
    let dockerd = dockerd_pid();
    let (cpu0, dockerd0, wall0) = (
        cpu_time("self").unwrap(),
        dockerd.as_deref().and_then(cpu_time),
        Instant::now(),
    );
    let peak = Arc::new(AtomicU64::new(rss_kib()));
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (peak, done) = (Arc::clone(&peak), Arc::clone(&done));
        tokio::spawn(async move {
            while !done.load(Ordering::Relaxed) {
                peak.fetch_max(rss_kib(), Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    let flooding = if flood {
        let f = start(
            engine,
            image,
            &dir.join("flood"),
            "flood",
            FLOOD,
            Arc::clone(&store),
        )
        .await;
        // The flood is in full spate before the trainer starts.
        tokio::time::sleep(Duration::from_secs(2)).await;
        Some(f)
    } else {
        None
    };
    let started = Instant::now();
    let trainer = start(
        engine,
        image,
        &dir.join("trainer"),
        "trainer",
        train,
        Arc::clone(&store),
    )
    .await;
    let exit = engine.wait(&trainer.id).await.unwrap();
    let trainer_time = started.elapsed();
    assert_eq!(exit.code, 0, "{exit}");
    let flood = match flooding {
        Some(f) => {
            engine.remove(&f.id).await.unwrap();
            let _ = f.follower.await;
            let report = f.shipper.await.unwrap();
            let (mut bytes, mut objects) = (0u64, 0u64);
            let prefix = object_store::path::Path::from("jobs/flood");
            let mut list = store.list(Some(&prefix));
            use futures_util::StreamExt;
            while let Some(meta) = list.next().await {
                let meta = meta.unwrap();
                bytes += meta.size;
                objects += 1;
            }
            Some((report, bytes, objects))
        }
        None => None,
    };
    let _ = trainer.follower.await;
    let _ = trainer.shipper.await;
    engine.remove(&trainer.id).await.unwrap();
    done.store(true, Ordering::Relaxed);
    let _ = sampler.await;
    Run {
        trainer: trainer_time,
        wall: wall0.elapsed(),
        cpu: cpu_time("self").unwrap() - cpu0,
        dockerd_cpu: match (dockerd.as_deref().and_then(cpu_time), dockerd0) {
            (Some(b), Some(a)) => Some(b - a),
            _ => None,
        },
        peak_rss_kib: peak.load(Ordering::Relaxed),
        flood,
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn secs(v: &[Duration]) -> Vec<String> {
    v.iter()
        .map(|d| format!("{:.2}", d.as_secs_f64()))
        .collect()
}

fn describe(kind: &str, runs: &[Run]) {
    let trainer: Vec<Duration> = runs.iter().map(|r| r.trainer).collect();
    let cpu_share: Vec<f64> = runs
        .iter()
        .map(|r| r.cpu.as_secs_f64() / r.wall.as_secs_f64())
        .collect();
    println!(
        "{kind}: trainer median {:.2} s {:?}; this process: CPU {:.0}% of one core (median), peak RSS {} MiB",
        median(trainer.clone()).as_secs_f64(),
        secs(&trainer),
        {
            let mut c = cpu_share.clone();
            c.sort_by(f64::total_cmp);
            c[c.len() / 2] * 100.0
        },
        runs.iter().map(|r| r.peak_rss_kib).max().unwrap_or(0) / 1024
    );
    let dockerd: Vec<f64> = runs
        .iter()
        .filter_map(|r| Some(r.dockerd_cpu?.as_secs_f64() / r.wall.as_secs_f64()))
        .collect();
    if !dockerd.is_empty() {
        let mut d = dockerd;
        d.sort_by(f64::total_cmp);
        println!(
            "{kind}: dockerd CPU {:.0}% of one core (median)",
            d[d.len() / 2] * 100.0
        );
    }
}

#[tokio::main]
async fn main() {
    let numbers: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let runs = numbers.first().copied().unwrap_or(3);
    let epochs = numbers.get(1).copied().unwrap_or(3).to_string();
    let train: Vec<&str> = TRAIN.iter().copied().chain(["--epochs", &epochs]).collect();
    let image = common::trainer_image();
    let engine = Arc::new(DockerEngine::connect().await.expect("a Docker engine"));
    let dir = tempfile::tempdir().unwrap();
    run(&engine, &image, &dir.path().join("warm"), false, &train).await;
    let (mut alone, mut beside) = (Vec::new(), Vec::new());
    for i in 0..runs {
        alone.push(
            run(
                &engine,
                &image,
                &dir.path().join(format!("alone-{i}")),
                false,
                &train,
            )
            .await,
        );
        beside.push(
            run(
                &engine,
                &image,
                &dir.path().join(format!("flood-{i}")),
                true,
                &train,
            )
            .await,
        );
    }
    println!("trainer: {} (1 CPU)", train.join(" "));
    println!("flood:   {} (1 CPU)", FLOOD.join(" "));
    println!(
        "machine: {} CPUs; runs: {runs} of each, alternating",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    describe("alone        ", &alone);
    describe("beside flood ", &beside);
    let (a, b) = (
        median(alone.iter().map(|r| r.trainer).collect()),
        median(beside.iter().map(|r| r.trainer).collect()),
    );
    println!(
        "trainer slowed by the flood: {:+.1}% (median against median)",
        (b.as_secs_f64() / a.as_secs_f64() - 1.0) * 100.0
    );
    for (i, r) in beside.iter().enumerate() {
        if let Some((report, bytes, objects)) = &r.flood {
            println!(
                "flood run {i}: {:.1} s; lines shipped {} ({:.0}/s), dropped on the node {}, chunks {} ({} rotated out past the cap); stored {:.1} MiB in {objects} objects (cap {} MiB)",
                r.wall.as_secs_f64(),
                report.lines,
                report.lines as f64 / r.wall.as_secs_f64(),
                report.dropped_lines,
                report.chunks,
                report.rotated,
                *bytes as f64 / f64::from(1 << 20),
                logs::DEFAULT_CAP_BYTES >> 20,
            );
        }
    }
}
