//! `mcjs demo`: the whole promise in one command, on one machine with Docker.
//!
//! Starts a local chain, the scheduler and three agents (separate processes,
//! each with its own working directory and node profile), builds the
//! reference trainer's image, submits a training job from the demo user's
//! wallet, kills the node running it part-way, shows the job recover on
//! another node from its last attested checkpoint, lets it finish, prints
//! the payout and the refund, checks the final model against an
//! uninterrupted run, and audits the job's history on chain.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use mcjs::state::JobState;
use mcjs_client::{ix, pda, Signer};
use mcjs_cluster::{Cluster, ClusterConfig};
use sha2::{Digest, Sha256};

use crate::{EXIT_FALSE, EXIT_OK, GlobalArgs};

#[derive(clap::Args, Debug)]
pub struct DemoArgs {
    /// Working directory (wiped first): chain, store, agents, logs.
    #[arg(long, default_value = ".mcjs-demo")]
    pub dir: PathBuf,
    /// Slot time of the local chain (mainnet: 400).
    #[arg(long, default_value_t = 400)]
    pub slot_time_ms: u64,
    /// Kill the node once this many checkpoints are attested.
    #[arg(long, default_value_t = 3)]
    pub kill_after_checkpoints: u32,
    /// Training epochs of the reference job (its length).
    #[arg(long, default_value_t = 12)]
    pub epochs: u32,
    /// Use this trainer image id instead of building it.
    #[arg(long)]
    pub image: Option<String>,
}

const NODE_PROFILES: [(&str, &str); 3] = [
    ("geforce-rtx-4090.json", include_str!("../../../../examples/nodes/geforce-rtx-4090.json")),
    ("v100-sxm2-32gb-x2.json", include_str!("../../../../examples/nodes/v100-sxm2-32gb-x2.json")),
    ("a100-sxm4-80gb-x4.json", include_str!("../../../../examples/nodes/a100-sxm4-80gb-x4.json")),
];

fn step(started: Instant, text: impl AsRef<str>) {
    eprintln!("[{:>6.1}s] {}", started.elapsed().as_secs_f64(), text.as_ref());
}

pub fn run(args: DemoArgs, _global: &GlobalArgs) -> anyhow::Result<u8> {
    crate::chain::runtime()?.block_on(demo(args))
}

async fn demo(args: DemoArgs) -> anyhow::Result<u8> {
    let t = Instant::now();
    if args.dir.exists() {
        std::fs::remove_dir_all(&args.dir)
            .with_context(|| format!("cannot clear {}", args.dir.display()))?;
    }
    std::fs::create_dir_all(&args.dir)?;
    let dir = std::fs::canonicalize(&args.dir)?;

    let image = match args.image {
        Some(image) => image,
        None => {
            step(t, "building the reference trainer image (FROM scratch, static binary)");
            build_trainer_image()?
        }
    };
    step(t, format!("trainer image {image}"));

    // Inputs: a dataset generated from a seed, and three node profiles.
    let data = dir.join("data");
    std::fs::create_dir_all(&data)?;
    let csv = dataset(512);
    std::fs::write(data.join("train.csv"), &csv)?;
    let data_sha = hex::encode(Sha256::digest(csv.as_bytes()));
    let mut profiles = Vec::new();
    for (name, text) in NODE_PROFILES {
        let path = data.join(name);
        std::fs::write(&path, text)?;
        profiles.push(path);
    }

    step(t, "starting the local chain, the scheduler and three agents");
    let mut cluster = Cluster::start(ClusterConfig {
        dir: dir.clone(),
        mcjs_bin: std::env::current_exe()?,
        agents: 3,
        slot_time_ms: args.slot_time_ms,
        heartbeat_timeout_ms: mcjs_protocol::DEFAULT_HEARTBEAT_TIMEOUT_MS,
        profiles,
        prices: vec!["1.00".into(), "1.20".into(), "1.50".into()],
        provider_stake_usdc: 200,
    })
    .await
    .context("cannot start the demo cluster")?;
    step(t, format!("chain at {}, scheduler at {}", cluster.info.rpc_url, cluster.scheduler_url()));
    for a in &cluster.agents {
        step(t, format!("  agent-{} runs node {}", a.index + 1, a.node));
    }

    let train_args = trainer_args(args.epochs);
    let reference = tokio::task::spawn_blocking({
        let image = image.clone();
        let data = data.clone();
        let out = dir.join("reference");
        let train_args = train_args.clone();
        move || uninterrupted_run(&image, &data, &out, &train_args)
    });

    let spec_path = dir.join("job.json");
    std::fs::write(&spec_path, spec_json(&image, &data.join("train.csv"), &data_sha, &train_args))?;
    let user = cluster.user_wallet()?;
    let user_wallet = cluster.info.wallets.user.clone();
    let store = cluster.store.clone();
    cluster.run_mcjs(
        &user_wallet,
        &["job", "submit", spec_path.to_str().unwrap(), "--bond", "20", "--job-id", "1", "--store", store.to_str().unwrap()],
    )?;
    let job = pda::job(&user.pubkey(), 1);
    let client = cluster.client();
    let deployment = client.deployment().await?;
    let user_token = ix::usdc_account(&user.pubkey(), &deployment.usdc_mint);
    let user_before = client.token_balance(&user_token).await?;
    step(t, format!("job {job} submitted with a 20 USDC bond"));

    let running = cluster
        .wait_for_job(&job, Duration::from_secs(120), mcjs_cluster::is_running)
        .await?;
    let first_node = running.node.context("a running job has a node")?;
    let victim = cluster.agent_of_node(&first_node).context("the node is one of ours")?;
    step(t, format!("running on node {first_node} (agent-{}), generation {}", victim + 1, running.generation));

    let kill_at = args.kill_after_checkpoints;
    let before_kill = cluster
        .wait_for_job(&job, Duration::from_secs(300), |j| j.checkpoint_count >= kill_at)
        .await?;
    let last = before_kill.last_checkpoint.context("checkpoints were attested")?;
    step(t, format!("{} checkpoints attested; last at epoch {} step {}", before_kill.checkpoint_count, last.epoch, last.step));

    cluster.kill_agent(victim);
    let killed_at = Instant::now();
    step(t, format!("KILLED agent-{} and its container (SIGKILL): node {first_node} is gone", victim + 1));

    let reported = cluster
        .wait_for_job(&job, Duration::from_secs(60), |j| !matches!(j.state, JobState::Running { .. }) || j.generation != running.generation)
        .await?;
    step(t, format!("scheduler reported the failure after {:.1}s: job {} (generation {}, restarts used {})",
        killed_at.elapsed().as_secs_f64(), reported.state.name(), reported.generation, reported.restarts_used));

    let recovered = cluster
        .wait_for_job(&job, Duration::from_secs(120), |j| mcjs_cluster::is_running(j) && j.generation > running.generation)
        .await?;
    let new_node = recovered.node.context("a running job has a node")?;
    step(t, format!("RECOVERED on node {new_node} (agent-{}) {:.1}s after the kill, from epoch {} step {}",
        cluster.agent_of_node(&new_node).map_or(0, |i| i + 1), killed_at.elapsed().as_secs_f64(), last.epoch, last.step));

    let done = cluster
        .wait_for_job(&job, Duration::from_secs(600), |j| j.state.is_terminal())
        .await?;
    if !matches!(done.state, JobState::Completed { .. }) {
        bail!("the job ended {} instead of completing; logs in {}", done.state.name(), dir.join("logs").display());
    }
    step(t, format!("COMPLETED: {} checkpoints attested, output {}", done.checkpoint_count, hex::encode(done.output_hash.unwrap_or_default())));

    let user_after = client.token_balance(&user_token).await?;
    let treasury = client.token_balance(&deployment.treasury).await?;
    step(t, format!("paid {} USDC for checkpointed progress ({} USDC commission to the treasury); refunded {} USDC of the 20 USDC bond",
        crate::chain::usdc(done.paid), crate::chain::usdc(treasury), crate::chain::usdc(user_after.saturating_sub(user_before.saturating_sub(20_000_000)))));
    for a in &cluster.agents {
        let payout = client.provider(&a.provider).await?.map(|p| p.payout).unwrap_or_default();
        let balance = client.token_balance(&payout).await.unwrap_or(0);
        let slashed = client.provider(&a.provider).await?.map_or(0, |p| p.slashed_total);
        step(t, format!("  agent-{}: payout account holds {} USDC, slashed {} USDC", a.index + 1, crate::chain::usdc(balance), crate::chain::usdc(slashed)));
    }

    let model = find_file(&store.join("jobs").join(job.to_string()).join("output"), "model.bin")?;
    let reference = reference.await.context("the reference run panicked")??;
    let same = std::fs::read(&model)? == std::fs::read(&reference)?;
    step(t, format!("final model {} the uninterrupted run's ({})", if same { "is byte-identical to" } else { "DIFFERS from" }, reference.display()));

    step(t, "auditing the job's history on chain");
    let audit = cluster.run_mcjs(&user_wallet, &["audit", "job", &job.to_string()]);
    match &audit {
        Ok(text) => eprintln!("{text}"),
        Err(e) => eprintln!("{e:#}"),
    }
    cluster.stop();
    step(t, format!("done; everything is under {}", dir.display()));
    Ok(if same && audit.is_ok() { EXIT_OK } else { EXIT_FALSE })
}

fn trainer_args(epochs: u32) -> Vec<String> {
    [
        "--data", "train.csv", "--batch-size", "32", "--epochs", &epochs.to_string(),
        "--step-sleep-ms", "40", "--checkpoint-every-steps", "16",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn spec_json(image: &str, data: &Path, sha: &str, args: &[String]) -> String {
    let digest = image.trim_start_matches("sha256:");
    serde_json::to_string_pretty(&serde_json::json!({
        "version": 1,
        "work": {
            "kind": "training",
            "model_id": "mcjs/reference-mlp",
            "image": format!("mcjs-trainer@sha256:{digest}"),
            "command": ["/mcjs-trainer", "train"],
            "args": args,
            "queue_tolerant": true
        },
        "data": [{
            "name": "train.csv",
            "role": "dataset",
            "uri": format!("file://{}", data.display()),
            "sha256": sha
        }],
        "request": {
            "hardware": {"gpu_count": 1, "min_vram": "16GiB", "cpu_cores": 1, "ram": "256MiB", "disk": "1GiB"},
            "duration": {"mode": "until_done", "limit": "1h"},
            "max_price_per_gpu_hour": "2.00"
        },
        "output": {
            "produces": ["model"],
            "destination": "file:///tmp/mcjs-out",
            "required_artifacts": ["model.bin", "metrics.json"]
        },
        "checkpoint": {"interval": "1m", "max_size": "1MiB", "keep": 3, "restart_budget": 3}
    }))
    .expect("a JSON value serialises")
}

fn build_trainer_image() -> anyhow::Result<String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/trainer/build-image.sh");
    let out = std::process::Command::new("bash")
        .arg(&script)
        .output()
        .with_context(|| format!("cannot run {}", script.display()))?;
    if !out.status.success() {
        bail!("building the trainer image failed:\n{}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The same job, in the same image, run once without interruption.
fn uninterrupted_run(image: &str, data: &Path, out: &Path, args: &[String]) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(out.join("checkpoints"))?;
    std::fs::create_dir_all(out.join("output"))?;
    let status = std::process::Command::new("docker")
        .args(["run", "--rm", "--network", "none", "--user", "0:0"])
        .args(["-v", &format!("{}:/mcjs/data:ro", data.display())])
        .args(["-v", &format!("{}:/mcjs/checkpoints", out.join("checkpoints").display())])
        .args(["-v", &format!("{}:/mcjs/output", out.join("output").display())])
        .args(["-e", "MCJS_DATA_DIR=/mcjs/data", "-e", "MCJS_CHECKPOINT_DIR=/mcjs/checkpoints", "-e", "MCJS_OUTPUT_DIR=/mcjs/output"])
        .args(["-e", "MCJS_CHECKPOINT_INTERVAL_SECS=3600"])
        .args(["--entrypoint", "/mcjs-trainer", image, "train"])
        .args(args)
        .output()
        .context("cannot run docker")?;
    if !status.status.success() {
        bail!("the uninterrupted reference run failed: {}", String::from_utf8_lossy(&status.stderr));
    }
    Ok(out.join("output").join("model.bin"))
}

fn find_file(dir: &Path, name: &str) -> anyhow::Result<PathBuf> {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).with_context(|| format!("cannot read {}", d.display()))? {
            let p = entry?.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.file_name().is_some_and(|n| n == name) {
                return Ok(p);
            }
        }
    }
    bail!("no {name} under {}", dir.display())
}

/// A small binary classification set from a fixed seed (xorshift).
pub fn dataset(rows: usize) -> String {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut out = String::new();
    for _ in 0..rows {
        let mut x = Vec::new();
        for _ in 0..6 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            x.push(((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0);
        }
        for v in &x {
            out.push_str(&format!("{v},"));
        }
        out.push_str(&format!("{}\n", u8::from(x[0] * x[1] + 0.3 * x[2] > 0.0)));
    }
    out
}
