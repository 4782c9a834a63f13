//! Provisioning and recovery times on the local chain with the reference
//! trainer, over repeated runs in one cluster:
//!
//! * provisioning: from `job submit` confirmed to the container running
//!   (the job Running on chain);
//! * recovery: from the node's death (agent and container SIGKILLed) to the
//!   job Running again on another node;
//! * compute lost per failure: from the last attested checkpoint to the kill,
//!   against the checkpoint interval.
//!
//! Agents are SIGKILLed with their containers: the scheduler learns it from
//! the closed heartbeat stream (after its grace), not from the timeout.
//!
//! cargo build -p mcjs-cli && cargo run -p mcjs-cluster --example recovery_bench -- \
//!     [--runs 50] [--partitions 10] [--slot-time-ms 400] [--store s3|dir] [--json FILE] \
//!     [--endpoint public] [--standbys N] [--mcjs $CARGO_TARGET_DIR/debug/mcjs]
//!
//! `--standbys N` runs N standby schedulers beside the leader (each named
//! in the scheduler lease; the agents heartbeat to all of them).
//!
//! `--endpoint public` puts a public endpoint's manners (latency, 429s,
//! dropped sends: `mcjs_cluster::EndpointProfile::PUBLIC`) between each
//! process and the chain, and prints what each endpoint did.

use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use mcjs_cluster::{Cluster, ClusterConfig, is_running, workload};
use sha2::{Digest, Sha256};

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn summary(name: &str, mut xs: Vec<f64>) {
    xs.sort_by(|a, b| a.total_cmp(b));
    println!(
        "| {name} | {} | {:.2} | {:.2} | {:.2} | {:.2} |",
        xs.len(),
        percentile(&xs, 50.0),
        percentile(&xs, 99.0),
        xs[0],
        xs[xs.len() - 1]
    );
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let runs: u64 = arg("--runs").map_or(50, |v| v.parse().unwrap());
    let store = match arg("--store").as_deref() {
        None | Some("s3") => mcjs_cluster::StoreKind::S3,
        Some("dir") => mcjs_cluster::StoreKind::Dir,
        Some(other) => anyhow::bail!("--store {other}: s3 or dir"),
    };
    let slot: u64 = arg("--slot-time-ms").map_or(400, |v| v.parse().unwrap());
    let standbys: usize = arg("--standbys").map_or(0, |v| v.parse().unwrap());
    let endpoint = match arg("--endpoint") {
        None => None,
        Some(name) => Some(
            mcjs_cluster::EndpointProfile::named(&name)
                .ok_or_else(|| anyhow::anyhow!("--endpoint {name}: only `public` is known"))?,
        ),
    };
    let target = std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".into());
    let mcjs =
        arg("--mcjs").map_or_else(|| PathBuf::from(&target).join("debug/mcjs"), PathBuf::from);
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut dir = tempfile::Builder::new().prefix("mcjs-bench-").tempdir()?;
    // MCJS_KEEP_TEST_DIRS=1 keeps the cluster's directory (logs, store).
    if std::env::var_os("MCJS_KEEP_TEST_DIRS").is_some() {
        dir.disable_cleanup(true);
        eprintln!("keeping {}", dir.path().display());
    }
    let nodes = root.join("examples/nodes");
    let image = workload::build_trainer_image()?;
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data)?;
    let csv = workload::dataset(512);
    std::fs::write(data.join("train.csv"), &csv)?;
    let sha = hex::encode(Sha256::digest(csv.as_bytes()));
    let mut cluster = Cluster::start(ClusterConfig {
        dir: dir.path().join("cluster"),
        mcjs_bin: mcjs,
        agent_bin: None,
        agents: 3,
        slot_time_ms: slot,
        heartbeat_timeout_ms: 3_000,
        profiles: vec![nodes.join("geforce-rtx-4090.json")],
        prices: vec!["1.00".into()],
        provider_stake_usdc: 500,
        data_roots: vec![data.clone()],
        store,
        agent_env: Vec::new(),
        endpoint,
        standbys,
        scheduler_args: Vec::new(),
    })
    .await?;
    let spec = dir.path().join("job.json");
    let args = workload::trainer_args(6);
    let uri = match store {
        mcjs_cluster::StoreKind::S3 => cluster.upload_input(&data.join("train.csv"))?.0,
        mcjs_cluster::StoreKind::Dir => workload::file_uri(&data.join("train.csv")),
    };
    std::fs::write(&spec, workload::spec_json(&image, &uri, &sha, &args, 3))?;

    let (mut provisioning, mut recovery, mut lost) = (Vec::new(), Vec::new(), Vec::new());
    for run in 1..=runs {
        let job = cluster.submit_job(&spec, "5", run)?;
        let submitted = Instant::now();

        let running = cluster
            .wait_for_job(&job, Duration::from_secs(60), is_running)
            .await?;
        provisioning.push(submitted.elapsed().as_secs_f64());
        let before = cluster
            .wait_for_job(&job, Duration::from_secs(60), |j| {
                is_running(j) && j.checkpoint_count >= 2
            })
            .await?;
        let victim = cluster.agent_of_node(&before.node.unwrap()).unwrap();
        let last = before.last_checkpoint.unwrap();
        let now_unix = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs() as i64;
        cluster.kill_agent(victim);
        let killed = Instant::now();
        lost.push((now_unix - last.time).max(0) as f64);
        cluster
            .wait_for_job(&job, Duration::from_secs(60), |j| {
                is_running(j) && j.generation > running.generation + 1
            })
            .await?;
        recovery.push(killed.elapsed().as_secs_f64());
        cluster.restart_agent(victim)?;
        cluster
            .wait_for_job(&job, Duration::from_secs(120), |j| j.state.is_terminal())
            .await?;
        eprintln!(
            "run {run}: provisioning {:.2} s, recovery {:.2} s",
            provisioning.last().unwrap(),
            recovery.last().unwrap()
        );
    }
    // Partitions close nothing: the scheduler waits out the heartbeat
    // timeout, then the job runs elsewhere; the healed agent fences itself.
    let partitions: u64 = arg("--partitions").map_or(10, |v| v.parse().unwrap());
    let mut partitioned = Vec::new();
    for run in runs + 1..=runs + partitions {
        let job = cluster.submit_job(&spec, "5", run)?;
        let running = cluster
            .wait_for_job(&job, Duration::from_secs(60), |j| {
                is_running(j) && j.checkpoint_count >= 2
            })
            .await?;
        let victim = cluster.agent_of_node(&running.node.unwrap()).unwrap();
        cluster.partition_agent(victim);
        let cut = Instant::now();
        cluster
            .wait_for_job(&job, Duration::from_secs(60), |j| {
                is_running(j) && j.generation > running.generation + 1
            })
            .await?;
        partitioned.push(cut.elapsed().as_secs_f64());
        cluster.heal_agent(victim);
        cluster
            .wait_for_job(&job, Duration::from_secs(120), |j| j.state.is_terminal())
            .await?;
        eprintln!(
            "partition {run}: running elsewhere after {:.2} s",
            partitioned.last().unwrap()
        );
    }
    let grace = mcjs_protocol::DEFAULT_DISCONNECT_GRACE_MS;
    for (process, stats) in cluster.endpoint_stats() {
        println!(
            "endpoint of {process}: {} calls, {} refused (429), {} of {} sends dropped",
            stats.calls, stats.refused, stats.dropped_sends, stats.sends
        );
    }
    println!(
        "endpoint {}",
        endpoint.map_or("direct".to_string(), |p| format!("{p:?}"))
    );
    println!(
        "slot time {slot} ms, store {store:?}, heartbeat timeout 3 s, disconnect grace {grace} ms, checkpoint interval 60 s (the trainer also checkpoints every 16 steps)"
    );
    if let Some(path) = arg("--json") {
        std::fs::write(
            &path,
            serde_json::to_vec_pretty(&serde_json::json!({
                "system": "mcjs",
                "provision_s": provisioning,
                "recovery_s": recovery,
                "lost_s": lost,
                "partition_s": partitioned,
                "config": {
                    "slot_time_ms": slot,
                    "store": format!("{store:?}"),
                    "heartbeat_timeout_ms": 3_000,
                    "disconnect_grace_ms": grace,
                    "agents": 3,
                    "kills": runs,
                },
            }))?,
        )?;
    }
    println!("| measure (s) | runs | median | p99 | min | max |");
    println!("|---|---|---|---|---|---|");
    summary(
        "provisioning: submit confirmed → running",
        provisioning.clone(),
    );
    summary(
        "recovery: node killed → running elsewhere",
        recovery.clone(),
    );
    summary("compute lost per failure (interval 60 s)", lost.clone());
    if !partitioned.is_empty() {
        summary(
            "partition: agent cut off → running elsewhere",
            partitioned.clone(),
        );
    }
    Ok(())
}
