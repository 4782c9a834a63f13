//! Checkpoints of real size through the whole system, beside a plain S3
//! client moving the same bytes to and from the same server, in one run.
//!
//! A cluster with an S3 store (the agents run `--agent-bin`, a provider's
//! own build: `cargo build --release -p mcjs-cli --locked`) runs the
//! reference trainer with `--ballast-mib SIZE` (each checkpoint carries SIZE
//! MiB of incompressible bytes, new at every checkpoint). For each size:
//!
//! * upload: the trainer's "checkpoint … step N" line (its time as the
//!   agent read it, from `mcjs job logs --output json`) → step N attested
//!   on chain (seen by polling every 50 ms): stored, hashed and attested;
//! * restore: the job assigned to its new node → running there (the
//!   checkpoint fetched and verified, the container started);
//! * recovery: the node (agent and container) SIGKILLed → the job running
//!   elsewhere, and → its next checkpoint attested;
//! * the plain client (`bench/s3_plain.py`: boto3, 8 threads, 16 MiB parts,
//!   the operator's keys): upload, download, download + sha256 of a file of
//!   the same size, on the same server.
//!
//! ```text
//! cargo build -p mcjs-cli --features demo,yellowstone   # the chain and the scheduler
//! cargo build --release -p mcjs-cli --locked             # the provider's agent
//! cargo run --release -p mcjs-cluster --example checkpoint_bench -- \
//!     --sizes 256,1024,4096 [--runs 2] [--mcjs target/debug/mcjs] \
//!     [--agent-bin target/release/mcjs] [--python ~/.cache/mcjs/bench-venv/bin/python] \
//!     [--standby]   # the job asks for a warm standby; killed once the standby holds its latest
//! ```

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use mcjs_cluster::{Cluster, ClusterConfig, StoreKind, is_running, workload};
use sha2::{Digest, Sha256};

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// When the job printed its checkpoint of `step` (ms, as the agent read the
/// line), from its logs.
fn checkpoint_line_at(cluster: &Cluster, job: &str, step: u64) -> anyhow::Result<Option<i64>> {
    let out = cluster.run_mcjs(
        &cluster.info.wallets.user,
        &[
            "job",
            "logs",
            job,
            "--output",
            "json",
            "--scheduler",
            &cluster.scheduler_url(),
        ],
    )?;
    let wanted = format!("step {step})");
    Ok(out
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| {
            v["line"]
                .as_str()
                .is_some_and(|l| l.starts_with("mcjs-trainer: checkpoint ") && l.ends_with(&wanted))
        })
        .and_then(|v| v["at_ms"].as_i64()))
}

/// A file of `mib` MiB of the trainer's kind of bytes, for the plain client.
fn plain_file(path: &Path, mib: u64) -> anyhow::Result<()> {
    let mut out = std::io::BufWriter::with_capacity(8 << 20, std::fs::File::create(path)?);
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut block = vec![0u8; 1 << 20];
    for _ in 0..mib {
        for word in block.chunks_exact_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            word.copy_from_slice(&x.to_le_bytes());
        }
        out.write_all(&block)?;
    }
    out.flush()?;
    Ok(())
}

struct Plain {
    upload: f64,
    download: f64,
    download_hash: f64,
}

fn plain_client(
    python: &str,
    cluster: &Cluster,
    file: &Path,
    reps: usize,
) -> anyhow::Result<Plain> {
    let s3 = cluster.s3.as_ref().expect("an S3 store");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/s3_plain.py");
    let out = Command::new(python)
        .arg(script)
        .args([
            &s3.endpoint,
            mcjs_cluster::S3_BUCKET,
            mcjs_cluster::S3_ACCESS_KEY,
            mcjs_cluster::S3_SECRET_KEY,
            &reps.to_string(),
        ])
        .arg(file)
        .output()?;
    anyhow::ensure!(
        out.status.success(),
        "plain client: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let m = |op: &str| {
        median(
            v[op]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s.as_f64().unwrap())
                .collect(),
        )
    };
    Ok(Plain {
        upload: m("upload"),
        download: m("download"),
        download_hash: m("download_hash"),
    })
}

/// Freezes the job on agent `victim` (its containers paused) and waits
/// until another agent logs a standby copy of its latest attested
/// checkpoint; returns that agent.
async fn held_by_standby(
    cluster: &Cluster,
    job: &mcjs_client::Pubkey,
    victim: usize,
) -> anyhow::Result<usize> {
    cluster.pause_containers_of(victim);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let client = cluster.client();
    let step = client
        .job(job)
        .await?
        .and_then(|j| j.last_checkpoint)
        .map(|c| c.step)
        .ok_or_else(|| anyhow::anyhow!("nothing attested"))?;
    let (name, ready) = (job.to_string(), format!("step={step} "));
    let since = Instant::now();
    loop {
        let holding = (0..3).filter(|&i| i != victim).find(|&i| {
            cluster
                .agent_lines(i, "standby copy ready")
                .iter()
                .any(|l| l.contains(&name) && l.contains(&ready))
        });
        if let Some(i) = holding {
            return Ok(i);
        }
        anyhow::ensure!(
            since.elapsed() < Duration::from_secs(600),
            "no standby holds step {step} after 10 minutes"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let sizes: Vec<u64> = arg("--sizes")
        .unwrap_or_else(|| "256,1024".into())
        .split(',')
        .map(|s| s.trim().parse().expect("--sizes: MiB, comma-separated"))
        .collect();
    let runs: usize = arg("--runs").map_or(2, |v| v.parse().unwrap());
    let target = std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".into());
    let mcjs =
        arg("--mcjs").map_or_else(|| PathBuf::from(&target).join("debug/mcjs"), PathBuf::from);
    let agent_bin = arg("--agent-bin").map_or_else(
        || PathBuf::from(&target).join("release/mcjs"),
        PathBuf::from,
    );
    let python = arg("--python");
    // The job asks for a warm standby; the kill waits until the standby
    // holds the latest attested checkpoint (the job frozen meanwhile).
    let standby = std::env::args().any(|a| a == "--standby");
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let base = std::env::var_os("MCJS_BENCH_DIR").map_or_else(std::env::temp_dir, PathBuf::from);
    let mut dir = tempfile::Builder::new()
        .prefix("mcjs-ckpt-bench-")
        .tempdir_in(base)?;
    if std::env::var_os("MCJS_KEEP_TEST_DIRS").is_some() {
        dir.disable_cleanup(true);
        eprintln!("keeping {}", dir.path().display());
    }
    let image = workload::build_trainer_image()?;
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data)?;
    let csv = workload::dataset(512);
    std::fs::write(data.join("train.csv"), &csv)?;
    let sha = hex::encode(Sha256::digest(csv.as_bytes()));
    let largest = *sizes.iter().max().unwrap();
    let mut cluster = Cluster::start(ClusterConfig {
        dir: dir.path().join("cluster"),
        mcjs_bin: mcjs,
        agent_bin: Some(agent_bin.clone()),
        agents: 3,
        slot_time_ms: 400,
        heartbeat_timeout_ms: 3_000,
        profiles: vec![root.join("examples/nodes/a100-sxm4-80gb-x4.json")],
        prices: vec!["1.00".into()],
        provider_stake_usdc: 500,
        data_roots: Vec::new(),
        store: StoreKind::S3,
        agent_env: Vec::new(),
        endpoint: None,
        standbys: 0,
        scheduler_args: Vec::new(),
    })
    .await?;
    cluster.wait_for_nodes(Duration::from_secs(120)).await?;
    let (uri, _) = cluster.upload_input(&data.join("train.csv"))?;
    println!(
        "# checkpoint_bench: agents {} (release), S3 store (s3s-fs) through the gateway, 400 ms slots, {runs} run(s) a size, medians; largest {largest} MiB",
        agent_bin.display()
    );
    println!(
        "| checkpoint | upload: written → attested s | MiB/s | plain upload MiB/s | ratio | restore: assigned → running s | MiB/s | plain download MiB/s | plain download+sha256 MiB/s | ratio (download) | recovery: killed → running s | killed → next attested s | 1.2 × plain download + 2 s |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    let mut job_id = 0u64;
    for &mib in &sizes {
        // One checkpoint every ~mib/10 steps of 100 ms (25 s at 4 GiB): the
        // previous checkpoint is stored before the next is written.
        let every = (mib / 10).max(30);
        // Five checkpoints' worth of steps (16 an epoch): three before the
        // kill, one after, and the end.
        let epochs = (every * 5).div_ceil(16) + 1;
        let args: Vec<String> = [
            "--data",
            "train.csv",
            "--batch-size",
            "32",
            "--epochs",
            &epochs.to_string(),
            "--step-sleep-ms",
            "100",
            "--checkpoint-every-steps",
            &every.to_string(),
            "--ballast-mib",
            &mib.to_string(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let mut spec: serde_json::Value =
            serde_json::from_str(&workload::spec_json(&image, &uri, &sha, &args, 3))?;
        spec["checkpoint"]["max_size"] = format!("{}MiB", mib + 64).into();
        spec["checkpoint"]["interval"] = "1h".into();
        // One checkpoint kept, one being written, beside the job's data.
        spec["checkpoint"]["keep"] = 1.into();
        spec["request"]["hardware"]["disk"] = format!("{}MiB", (mib + 64) * 2 + 512).into();
        spec["request"]["hardware"]["ram"] = "1GiB".into();
        if standby {
            spec["checkpoint"]["standby"] = true.into();
        }
        let spec_path = dir.path().join(format!("job-{mib}.json"));
        std::fs::write(&spec_path, serde_json::to_vec_pretty(&spec)?)?;

        let (mut up, mut restore, mut recovery, mut next) = (vec![], vec![], vec![], vec![]);
        let mut on_standby = 0;
        for run in 0..runs {
            job_id += 1;
            let job = cluster.submit_job(&spec_path, "50", job_id)?;
            let name = job.to_string();
            let first = cluster
                .wait_for_job(&job, Duration::from_secs(600), |j| {
                    is_running(j) && j.checkpoint_count >= 2
                })
                .await?;
            let seen = now_ms();
            let step = first.last_checkpoint.as_ref().unwrap().step;
            // The second attested checkpoint, timed from its line (the
            // poll's 100 ms granularity aside; the next one is timed at 50 ms).
            let c = cluster
                .wait_for_job(&job, Duration::from_secs(600), |j| j.checkpoint_count >= 3)
                .await?;
            let attested = now_ms();
            let step3 = c.last_checkpoint.as_ref().unwrap().step;
            match checkpoint_line_at(&cluster, &name, step3)? {
                Some(at) => up.push((attested - at) as f64 / 1e3),
                None => eprintln!(
                    "size {mib}: no checkpoint line for step {step3} (step {step} seen at {seen})"
                ),
            }
            let victim = cluster.agent_of_node(&c.node.unwrap()).unwrap();
            let generation = c.generation;
            let mut standing = None;
            if standby {
                standing = Some(held_by_standby(&cluster, &job, victim).await?);
            }
            cluster.kill_agent(victim);
            let killed = Instant::now();
            let mut assigned = None;
            let client = cluster.client();
            let running_at = loop {
                if let Some(j) = client.job(&job).await? {
                    if j.generation > generation && assigned.is_none() {
                        assigned = Some(Instant::now());
                    }
                    if j.generation > generation && is_running(&j) {
                        break Instant::now();
                    }
                }
                anyhow::ensure!(
                    killed.elapsed() < Duration::from_secs(900),
                    "not running again after 15 minutes"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            };
            recovery.push((running_at - killed).as_secs_f64());
            if let Some(standing) = standing {
                let now_on = client.job(&job).await?.and_then(|j| j.node);
                let on = now_on.and_then(|n| cluster.agent_of_node(&n));
                if on == Some(standing) {
                    on_standby += 1;
                }
            }
            restore.push((running_at - assigned.unwrap_or(running_at)).as_secs_f64());
            let count = c.checkpoint_count;
            cluster
                .wait_for_job(&job, Duration::from_secs(900), |j| {
                    j.checkpoint_count > count && j.generation > generation
                })
                .await?;
            next.push(killed.elapsed().as_secs_f64());
            cluster.restart_agent(victim)?;
            cluster
                .wait_for_job(&job, Duration::from_secs(900), |j| j.state.is_terminal())
                .await?;
            // The finished job's checkpoints leave the store's disk (the S3
            // server's files): the disk holds one run's at a time.
            let stored = cluster.store.join("jobs").join(&name).join("checkpoints");
            if let Err(e) = std::fs::remove_dir_all(&stored) {
                eprintln!("cannot remove {}: {e}", stored.display());
            }
            eprintln!(
                "{mib} MiB run {run}: upload {:?} s, restore {:.2} s, recovery {:.2} s, next attested {:.2} s",
                up.last(),
                restore.last().unwrap(),
                recovery.last().unwrap(),
                next.last().unwrap()
            );
        }
        let plain = match &python {
            Some(python) => {
                let file = dir.path().join("plain.bin");
                plain_file(&file, mib)?;
                let p = plain_client(python, &cluster, &file, runs.max(3))?;
                std::fs::remove_file(&file)?;
                Some(p)
            }
            None => None,
        };
        if standby {
            println!("# {mib} MiB: {on_standby} of {runs} recoveries onto the standby");
        }
        let rate = |secs: f64| mib as f64 / secs;
        let show = |x: Option<f64>| x.map_or("–".into(), |x| format!("{x:.0}"));
        let (u, r) = (median(up), median(restore));
        println!(
            "| {mib} MiB | {u:.2} | {:.0} | {} | {} | {r:.2} | {:.0} | {} | {} | {} | {:.2} | {:.2} | {} |",
            rate(u),
            show(plain.as_ref().map(|p| rate(p.upload))),
            plain
                .as_ref()
                .map_or("–".into(), |p| format!("{:.2}", p.upload / u)),
            rate(r),
            show(plain.as_ref().map(|p| rate(p.download))),
            show(plain.as_ref().map(|p| rate(p.download_hash))),
            plain
                .as_ref()
                .map_or("–".into(), |p| format!("{:.2}", p.download / r)),
            median(recovery),
            median(next),
            plain
                .as_ref()
                .map_or("–".into(), |p| format!("{:.2}", 1.2 * p.download + 2.0)),
        );
    }
    Ok(())
}
