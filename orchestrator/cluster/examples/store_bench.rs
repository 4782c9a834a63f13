//! Checkpoint upload and download throughput, in one run, against:
//!
//! * the directory store (`file://`, one machine);
//! * the S3 server directly, with the operator's credentials (what the
//!   server itself can do);
//! * the S3 store through the scheduler's gateway, as an agent does it:
//!   signed requests, presigned URLs, the chain checked for each request.
//!
//! A cluster with an S3 store runs a long job; the benchmark then writes and
//! restores synthetic checkpoints as that job's node (its operator key, the
//! job's generation), like the agent would.
//!
//! cargo build -p mcjs-cli && cargo run --release -p mcjs-cluster --example store_bench -- \
//!     [--mib 64] [--files 4] [--reps 5] [--mcjs $CARGO_TARGET_DIR/debug/mcjs]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use mcjs_client::Signer;
use mcjs_cluster::{
    Cluster, ClusterConfig, S3_ACCESS_KEY, S3_BUCKET, S3_PREFIX, S3_SECRET_KEY, StoreKind,
    is_running, workload,
};
use mcjs_protocol::store::Role;
use mcjs_runtime::brokered::{BrokeredStore, Identity};
use mcjs_runtime::checkpoint::complete_checkpoints_in;
use mcjs_runtime::confined::{ConfinedDir, Limits};
use mcjs_runtime::store::{CheckpointStore, ExpectedCheckpoint};
use object_store::ObjectStore;

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(|a, b| a.total_cmp(b));
    xs[xs.len() / 2]
}

/// A complete checkpoint of `files` files totalling `mib` MiB under
/// `root/<name>`, with its manifest.
fn synthetic_checkpoint(root: &Path, name: &str, step: u64, mib: usize, files: usize) {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let per = (mib << 20) / files;
    let mut names = Vec::new();
    for i in 0..files {
        // Not compressible, different per step.
        let mut state = step.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ i as u64;
        let bytes: Vec<u8> = (0..per)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect();
        let file = format!("shard-{i}.bin");
        std::fs::write(dir.join(&file), bytes).unwrap();
        names.push(file);
    }
    std::fs::write(
        dir.join(mcjs_runtime::contract::MANIFEST_FILE),
        serde_json::to_vec(&serde_json::json!({
            "format": mcjs_runtime::contract::MANIFEST_FORMAT,
            "epoch": step,
            "step": step,
            "files": names,
        }))
        .unwrap(),
    )
    .unwrap();
}

/// Uploads then restores one checkpoint per repetition; returns the
/// upload and download rates (MiB/s) of each.
async fn measure(
    store: Arc<dyn ObjectStore>,
    job: &str,
    generation: u32,
    scratch: &Path,
    mib: usize,
    files: usize,
    reps: u64,
) -> (Vec<f64>, Vec<f64>) {
    let checkpoints = CheckpointStore::new(store, 1000);
    let (mut up, mut down) = (Vec::new(), Vec::new());
    for rep in 0..reps {
        let local = scratch.join(format!("local-{rep}"));
        std::fs::create_dir_all(&local).unwrap();
        let step = 1_000_000 + rep;
        synthetic_checkpoint(&local, "ckpt", step, mib, files);
        let root = ConfinedDir::open(&local).unwrap();
        let found = complete_checkpoints_in(&root).unwrap();
        let t = Instant::now();
        let stored = checkpoints
            .upload(job, generation, &root, &found[0], Limits::UNLIMITED, 0)
            .await
            .expect("upload");
        up.push(mib as f64 / t.elapsed().as_secs_f64());
        let dest = scratch.join(format!("restore-{rep}"));
        std::fs::create_dir_all(&dest).unwrap();
        let t = Instant::now();
        checkpoints
            .restore(
                job,
                &[ExpectedCheckpoint {
                    step,
                    hash: stored.hash,
                }],
                Limits::UNLIMITED,
                &dest,
            )
            .await
            .expect("restore");
        down.push(mib as f64 / t.elapsed().as_secs_f64());
        let _ = std::fs::remove_dir_all(&local);
        let _ = std::fs::remove_dir_all(&dest);
    }
    (up, down)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mib: usize = arg("--mib").map_or(64, |v| v.parse().unwrap());
    let files: usize = arg("--files").map_or(4, |v| v.parse().unwrap());
    let reps: u64 = arg("--reps").map_or(5, |v| v.parse().unwrap());
    let target = std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".into());
    let mcjs =
        arg("--mcjs").map_or_else(|| PathBuf::from(&target).join("debug/mcjs"), PathBuf::from);
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = tempfile::Builder::new()
        .prefix("mcjs-store-bench-")
        .tempdir()?;
    let image = workload::build_trainer_image()?;
    let cluster = Cluster::start(ClusterConfig {
        dir: dir.path().join("cluster"),
        mcjs_bin: mcjs,
        agent_bin: None,
        agents: 1,
        slot_time_ms: 400,
        heartbeat_timeout_ms: 3_000,
        profiles: vec![root.join("examples/nodes/geforce-rtx-4090.json")],
        prices: vec!["1.00".into()],
        provider_stake_usdc: 200,
        data_roots: Vec::new(),
        store: StoreKind::S3,
        agent_env: Vec::new(),
        endpoint: None,
        standbys: 0,
        scheduler_args: Vec::new(),
    })
    .await?;
    let data = dir.path().join("train.csv");
    std::fs::write(&data, workload::dataset(512))?;
    let (uri, sha) = cluster.upload_input(&data)?;
    let spec = dir.path().join("job.json");
    std::fs::write(
        &spec,
        workload::spec_json(&image, &uri, &sha, &workload::trainer_args(1_000_000), 3),
    )?;
    let job = cluster.submit_job(&spec, "20", 1)?;
    let running = cluster
        .wait_for_job(&job, std::time::Duration::from_secs(120), is_running)
        .await?;
    let node = running.node.expect("a running job has a node");
    let agent = cluster.agent_of_node(&node).expect("the cluster's node");
    let key = mcjs_localnet::read_keypair(&cluster.agents[agent].node_key)?;
    let signer = key.insecure_clone();
    let gateway: Arc<dyn ObjectStore> = Arc::new(BrokeredStore::new(
        &cluster.scheduler_url(),
        Identity {
            role: Role::Node {
                node: node.to_string(),
            },
            key: key.pubkey().to_bytes(),
            sign: Arc::new(move |m: &[u8]| signer.sign_message(m).into()),
        },
    ));
    let endpoint = cluster.s3.as_ref().expect("an S3 cluster").endpoint.clone();
    let direct: Arc<dyn ObjectStore> = Arc::new(object_store::prefix::PrefixStore::new(
        object_store::aws::AmazonS3Builder::new()
            .with_bucket_name(S3_BUCKET)
            .with_region("us-east-1")
            .with_endpoint(&endpoint)
            .with_allow_http(true)
            .with_access_key_id(S3_ACCESS_KEY)
            .with_secret_access_key(S3_SECRET_KEY)
            .build()?,
        S3_PREFIX,
    ));
    let dir_store: Arc<dyn ObjectStore> =
        Arc::new(object_store::local::LocalFileSystem::new_with_prefix({
            let d = dir.path().join("dir-store");
            std::fs::create_dir_all(&d)?;
            d
        })?);
    let scratch = dir.path().join("scratch");
    let job_id = job.to_string();
    println!(
        "checkpoint of {mib} MiB in {files} files, {reps} repetitions each, interleaved; median MiB/s"
    );
    let (mut results, mut order) = (
        vec![(Vec::new(), Vec::new()); 3],
        vec![
            "directory store",
            "S3 direct (operator keys)",
            "S3 via the gateway (agent)",
        ],
    );
    for rep in 0..reps {
        for (i, store) in [&dir_store, &direct, &gateway].into_iter().enumerate() {
            let (u, d) = measure(
                Arc::clone(store),
                &job_id,
                running.generation,
                &scratch.join(format!("{i}-{rep}")),
                mib,
                files,
                1,
            )
            .await;
            results[i].0.extend(u);
            results[i].1.extend(d);
        }
    }
    println!("| store | upload MiB/s | download+verify MiB/s | upload vs dir | download vs dir |");
    println!("|---|---|---|---|---|");
    let (dir_up, dir_down) = (median(results[0].0.clone()), median(results[0].1.clone()));
    for (name, (up, down)) in order.drain(..).zip(results) {
        let (u, d) = (median(up), median(down));
        println!(
            "| {name} | {u:.1} | {d:.1} | {:.2} | {:.2} |",
            u / dir_up,
            d / dir_down
        );
    }
    Ok(())
}
