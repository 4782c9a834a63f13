//! `mcjs demo`: the whole promise in one command, on one machine with Docker.
//!
//! Starts a local chain, the scheduler and three agents (separate processes,
//! each with its own working directory and node profile), builds the
//! reference trainer's image, submits a training job from the demo user's
//! wallet, kills the node running it part-way, shows the job recover on
//! another node from its last attested checkpoint, lets it finish, prints
//! the payout and the refund, checks the final model against an
//! uninterrupted run, and audits the job's history on chain. The auditor's
//! dashboard serves the demo's chain on a loopback port the whole time;
//! with `--keep` everything stays up after the summary until Ctrl-C.
//!
//! The chain runs the program's SBF ELF when `MCJS_PROGRAM_SO` names one
//! (deployed by loader transactions), else the native build; the summary
//! says which ran.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use mcjs::state::JobState;
use mcjs_client::{Signer, ix};
use mcjs_cluster::{Cluster, ClusterConfig, StoreKind, workload};
use sha2::{Digest, Sha256};

use crate::chain::usdc;
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
    /// After the summary, keep the chain, the scheduler, the agents and the
    /// dashboard up until Ctrl-C.
    #[arg(long)]
    pub keep: bool,
    /// Start the chain, the S3 store, the scheduler and the three agents,
    /// write `<dir>/cli.yml` (for `mcjs -C <dir>/cli.yml`: the chain, the
    /// demo user's wallet, the scheduler) and keep them up until Ctrl-C, with
    /// no story: a local MCJS to run your own jobs on
    /// (docs/first-job.md).
    #[arg(long, conflicts_with_all = ["keep", "image", "epochs", "kill_after_checkpoints"])]
    pub cluster_only: bool,
    /// Put a public endpoint's manners between each process and the chain:
    /// `public` (100 ms a call, HTTP 429 past 100 calls per 10 s or 40 of
    /// one method, one sendTransaction in ten dropped), or `metered` (every
    /// call passed on at once and counted: what each process asks of the
    /// chain, printed at the end).
    #[arg(long, value_name = "PROFILE", value_parser = parse_endpoint)]
    pub endpoint: Option<mcjs_cluster::EndpointProfile>,
}

fn parse_endpoint(name: &str) -> Result<mcjs_cluster::EndpointProfile, String> {
    mcjs_cluster::EndpointProfile::named(name)
        .ok_or_else(|| format!("{name:?} is not a profile; there are: public, metered"))
}

const NODE_PROFILES: [(&str, &str); 3] = [
    (
        "geforce-rtx-4090.json",
        include_str!("../../../../examples/nodes/geforce-rtx-4090.json"),
    ),
    (
        "v100-sxm2-32gb-x2.json",
        include_str!("../../../../examples/nodes/v100-sxm2-32gb-x2.json"),
    ),
    (
        "a100-sxm4-80gb-x4.json",
        include_str!("../../../../examples/nodes/a100-sxm4-80gb-x4.json"),
    ),
];

fn step(started: Instant, text: impl AsRef<str>) {
    eprintln!(
        "[{:>6.1}s] {}",
        started.elapsed().as_secs_f64(),
        text.as_ref()
    );
}

/// The demo's cluster with no story, until Ctrl-C: `mcjs demo --cluster-only`.
async fn cluster_only(args: DemoArgs, dir: PathBuf, t: Instant) -> anyhow::Result<u8> {
    let profiles_dir = dir.join("profiles");
    std::fs::create_dir_all(&profiles_dir)?;
    step(
        t,
        "starting the local chain, the S3 store, the scheduler and three agents",
    );
    let mut cluster = start_cluster(&args, &dir, &profiles_dir)
        .await
        .context("cannot start the local cluster")?;
    for a in &cluster.agents {
        step(t, format!("  agent-{} runs node {}", a.index + 1, a.node));
    }
    // Listening before the config file says it is ready.
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("cannot wait for SIGTERM")?;
    let config = dir.join("cli.yml");
    // Whole or absent: a script waiting for it may read it the moment it exists.
    let partial = dir.join("cli.yml.part");
    std::fs::write(
        &partial,
        format!(
            "json_rpc_url: {}\nwebsocket_url: {}\nkeypair_path: {}\nscheduler_url: {}\n",
            cluster.info.rpc_url,
            cluster.info.ws_url,
            cluster.info.wallets.user.display(),
            cluster.scheduler_url()
        ),
    )
    .and_then(|()| std::fs::rename(&partial, &config))
    .with_context(|| format!("cannot write {}", config.display()))?;
    step(
        t,
        format!(
            "ready: chain at {}, scheduler at {}; the demo user's wallet holds 10,000 USDC. Run your jobs with `mcjs -C {} job run …` (docs/first-job.md); Ctrl-C (or SIGTERM) stops everything",
            cluster.info.rpc_url,
            cluster.scheduler_url(),
            config.display()
        ),
    );
    tokio::select! {
        interrupted = tokio::signal::ctrl_c() => interrupted.context("cannot wait for Ctrl-C")?,
        _ = term.recv() => {}
    }
    step(t, "stopping");
    cluster.stop();
    Ok(EXIT_OK)
}

/// Starts the demo's cluster in `dir`: three agents of three GPU models,
/// their node profiles written under `profiles_dir`.
async fn start_cluster(
    args: &DemoArgs,
    dir: &std::path::Path,
    profiles_dir: &std::path::Path,
) -> anyhow::Result<Cluster> {
    let mut profiles = Vec::new();
    for (name, text) in NODE_PROFILES {
        let path = profiles_dir.join(name);
        std::fs::write(&path, text)?;
        profiles.push(path);
    }
    Cluster::start(ClusterConfig {
        dir: dir.to_path_buf(),
        mcjs_bin: std::env::current_exe()?,
        agent_bin: None,
        agents: 3,
        slot_time_ms: args.slot_time_ms,
        heartbeat_timeout_ms: mcjs_protocol::DEFAULT_HEARTBEAT_TIMEOUT_MS,
        profiles,
        prices: vec!["1.00".into(), "1.20".into(), "1.50".into()],
        provider_stake_usdc: 200,
        // Every process in its own directory, sharing nothing but the chain
        // and the S3 endpoint (the scheduler alone holds its keys).
        data_roots: Vec::new(),
        store: StoreKind::S3,
        agent_env: Vec::new(),
        endpoint: args.endpoint,
        standbys: 0,
        scheduler_args: Vec::new(),
    })
    .await
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

    if args.cluster_only {
        return cluster_only(args, dir, t).await;
    }
    let image = match args.image.clone() {
        Some(image) => image,
        None => {
            step(
                t,
                "building the reference trainer image (FROM scratch, static binary)",
            );
            workload::build_trainer_image()?
        }
    };
    step(t, format!("trainer image {image}"));

    // Inputs: a dataset generated from a seed, and three node profiles.
    let data = dir.join("data");
    std::fs::create_dir_all(&data)?;
    let csv = workload::dataset(512);
    std::fs::write(data.join("train.csv"), &csv)?;
    let data_sha = hex::encode(Sha256::digest(csv.as_bytes()));

    step(
        t,
        "starting the local chain, the scheduler and three agents",
    );
    let mut cluster = start_cluster(&args, &dir, &data)
        .await
        .context("cannot start the demo cluster")?;
    step(
        t,
        format!(
            "chain at {}, scheduler at {}, store {}",
            cluster.info.rpc_url,
            cluster.scheduler_url(),
            cluster.store_url
        ),
    );
    let program = crate::cmd::localnet::program_line(&cluster.info.program);
    step(t, format!("  the MCJS program: {program}"));
    for a in &cluster.agents {
        step(t, format!("  agent-{} runs node {}", a.index + 1, a.node));
    }

    let train_args = workload::trainer_args(args.epochs);
    let reference = tokio::task::spawn_blocking({
        let image = image.clone();
        let data = data.clone();
        let out = dir.join("reference");
        let train_args = train_args.clone();
        move || workload::uninterrupted_run(&image, &data, &out, &train_args)
    });

    let (data_uri, uploaded_sha) = cluster.upload_input(&data.join("train.csv"))?;
    anyhow::ensure!(
        uploaded_sha == data_sha,
        "the uploaded dataset's sha256 differs: {uploaded_sha}"
    );
    step(t, format!("the user uploaded the dataset to {data_uri}"));
    let spec_path = dir.join("job.json");
    std::fs::write(
        &spec_path,
        workload::spec_json(&image, &data_uri, &data_sha, &train_args, 3),
    )?;
    // The auditor's dashboard over the demo's chain, in this process.
    let dashboard_listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .context("cannot listen for the dashboard on a loopback port")?;
    let dashboard_url = format!(
        "http://{}",
        dashboard_listener
            .local_addr()
            .context("the dashboard's address")?
    );
    // Stopped by aborting it: a graceful shutdown would wait for the open
    // pages' live-update streams, which never end.
    let dashboard = tokio::spawn(mcjs_dashboard::serve(
        dashboard_listener,
        cluster.client(),
        std::future::pending(),
    ));
    step(t, format!("dashboard: {dashboard_url}"));

    let user = cluster.user_wallet()?;
    let client = cluster.client();
    let deployment = client.deployment().await?;
    let user_token = ix::usdc_account(&user.pubkey(), &deployment.usdc_mint);
    // Before the bond is locked: the user must end with no more than this.
    let user_before = client.token_balance(&user_token).await?;
    let job = cluster.submit_job(&spec_path, "20", 1)?;
    let mut payouts_before = Vec::new();
    for a in &cluster.agents {
        let payout = client
            .provider(&a.provider)
            .await?
            .context("provider account")?
            .payout;
        payouts_before.push(client.token_balance(&payout).await?);
    }
    step(t, format!("job {job} submitted with a 20 USDC bond"));

    let running = cluster
        .wait_for_job(&job, Duration::from_secs(120), mcjs_cluster::is_running)
        .await?;
    let first_node = running.node.context("a running job has a node")?;
    let victim = cluster
        .agent_of_node(&first_node)
        .context("the node is one of ours")?;
    step(
        t,
        format!(
            "running on node {first_node} (agent-{}), generation {}",
            victim + 1,
            running.generation
        ),
    );

    let kill_at = args.kill_after_checkpoints;
    let before_kill = cluster
        .wait_for_job(&job, Duration::from_secs(300), |j| {
            j.checkpoint_count >= kill_at
        })
        .await?;
    let last = before_kill
        .last_checkpoint
        .context("checkpoints were attested")?;
    step(
        t,
        format!(
            "{} checkpoints attested; last at epoch {} step {}",
            before_kill.checkpoint_count, last.epoch, last.step
        ),
    );

    cluster.kill_agent(victim);
    let killed_at = Instant::now();
    step(
        t,
        format!(
            "KILLED agent-{} and its container (SIGKILL): node {first_node} is gone",
            victim + 1
        ),
    );

    let reported = cluster
        .wait_for_job(&job, Duration::from_secs(60), |j| {
            !matches!(j.state, JobState::Running { .. }) || j.generation != running.generation
        })
        .await?;
    step(
        t,
        format!(
            "scheduler reported the failure after {:.1}s: job {} (generation {}, restarts used {})",
            killed_at.elapsed().as_secs_f64(),
            reported.state.name(),
            reported.generation,
            reported.restarts_used
        ),
    );

    let recovered = cluster
        .wait_for_job(&job, Duration::from_secs(120), |j| {
            mcjs_cluster::is_running(j) && j.generation > running.generation
        })
        .await?;
    let new_node = recovered.node.context("a running job has a node")?;
    step(
        t,
        format!(
            "RECOVERED on node {new_node} (agent-{}) {:.1}s after the kill, from epoch {} step {}",
            cluster.agent_of_node(&new_node).map_or(0, |i| i + 1),
            killed_at.elapsed().as_secs_f64(),
            last.epoch,
            last.step
        ),
    );

    let done = cluster
        .wait_for_job(&job, Duration::from_secs(600), |j| j.state.is_terminal())
        .await?;
    if !matches!(done.state, JobState::Completed { .. }) {
        bail!(
            "the job ended {} instead of completing; logs in {}",
            done.state.name(),
            dir.join("logs").display()
        );
    }
    step(
        t,
        format!(
            "COMPLETED: {} checkpoints attested, output {}",
            done.checkpoint_count,
            hex::encode(done.output_hash.unwrap_or_default())
        ),
    );

    let user_after = client.token_balance(&user_token).await?;
    let treasury = client.token_balance(&deployment.treasury).await?;
    let pool_key = client.config().await?.1.insurance_pool;
    let pool = client.token_balance(&pool_key).await?;
    let refund = 20_000_000u64.saturating_sub(done.paid);
    let mut slashed_total = 0;
    for (a, before) in cluster.agents.iter().zip(&payouts_before) {
        let provider = client
            .provider(&a.provider)
            .await?
            .context("provider account")?;
        let earned = client
            .token_balance(&provider.payout)
            .await?
            .saturating_sub(*before);
        slashed_total += provider.slashed_total;
        step(
            t,
            format!(
                "  agent-{}: earned {} USDC, slashed {} USDC, jobs completed {}, failures {}",
                a.index + 1,
                usdc(earned),
                usdc(provider.slashed_total),
                provider.jobs_completed,
                provider.failures
            ),
        );
    }
    step(
        t,
        format!(
            "the job cost {} USDC for checkpointed progress ({} USDC of it MCJS commission); {} USDC of the 20 USDC bond came back",
            usdc(done.paid),
            usdc(treasury),
            usdc(refund),
        ),
    );
    step(
        t,
        format!(
            "{} USDC slashed from the failed node's stake went to the insurance pool {} (now {} USDC), not to the user: nobody profits from a provider's failure",
            usdc(slashed_total),
            pool_key,
            usdc(pool)
        ),
    );
    step(
        t,
        format!(
            "the user's USDC went from {} to {} (the 20 USDC bond locked, its unspent part returned)",
            usdc(user_before),
            usdc(user_after)
        ),
    );
    if user_after > user_before {
        anyhow::bail!(
            "the user ended with more USDC than it started with ({} > {}): a failure must never pay the job's owner",
            usdc(user_after),
            usdc(user_before)
        );
    }

    let delivered = dir.join("delivered");
    cluster
        .job_output(&job, &delivered, &[])
        .context("`mcjs job output` did not deliver the verified output")?;
    step(
        t,
        format!(
            "mcjs job output verified every file against the chain's output hash into {}",
            delivered.display()
        ),
    );
    // What the job printed and its progress, across both nodes, as its
    // owner reads them (`mcjs job logs`, `mcjs job metrics`); job output
    // kept both beside the output.
    let printed = std::fs::read_to_string(delivered.with_extension("logs.txt")).unwrap_or_default();
    step(
        t,
        format!(
            "what the job printed on both nodes, each move marked: {} lines in {} (`mcjs job logs {job} --follow` while it runs); its metrics, from MCJS_METRICS_FILE (`mcjs job metrics {job}`):",
            printed.lines().count(),
            delivered.with_extension("logs.txt").display()
        ),
    );
    match cluster.run_mcjs(
        &cluster.info.wallets.user,
        &[
            "job",
            "metrics",
            &job.to_string(),
            "--scheduler",
            &cluster.scheduler_url(),
        ],
    ) {
        Ok(table) => eprintln!("{table}"),
        Err(e) => eprintln!("{e:#}"),
    }
    let model = workload::find_file(&delivered, "model.bin")?;
    let reference = reference.await.context("the reference run panicked")??;
    let same = std::fs::read(&model)? == std::fs::read(&reference)?;
    step(
        t,
        format!(
            "final model {} the uninterrupted run's ({})",
            if same {
                "is byte-identical to"
            } else {
                "DIFFERS from"
            },
            reference.display()
        ),
    );

    step(t, "auditing the job's history on chain");
    let audit = cluster.run_mcjs(
        &cluster.info.wallets.user,
        &["audit", "job", &job.to_string()],
    );
    match &audit {
        Ok(text) => eprintln!("{text}"),
        Err(e) => eprintln!("{e:#}"),
    }
    if args.keep {
        step(
            t,
            format!(
                "--keep: the chain ({}), the scheduler, the agents and the dashboard stay up; \
                 dashboard: {dashboard_url}/job/{job} (Ctrl-C to stop)",
                cluster.info.rpc_url
            ),
        );
        tokio::signal::ctrl_c()
            .await
            .context("cannot wait for Ctrl-C")?;
        step(t, "Ctrl-C: stopping");
    }
    step(t, format!("the MCJS program ran as {program}"));
    let secs = t.elapsed().as_secs_f64().max(1.0);
    for (process, st) in cluster.endpoint_stats() {
        step(
            t,
            format!(
                "the {process}'s endpoint: {} calls in {secs:.0} s ({:.2}/s; {} getProgramAccounts), {} refused (429), {} of {} sends dropped",
                st.calls,
                st.calls as f64 / secs,
                st.program_scans,
                st.refused,
                st.dropped_sends,
                st.sends
            ),
        );
    }
    for (process, methods) in cluster.endpoint_methods() {
        let top: Vec<String> = methods
            .iter()
            .take(6)
            .map(|(m, n)| format!("{m} {n}"))
            .collect();
        step(
            t,
            format!("the {process}'s calls by method: {}", top.join(", ")),
        );
    }
    dashboard.abort();
    cluster.stop();
    step(t, format!("done; everything is under {}", dir.display()));
    Ok(if same && audit.is_ok() {
        EXIT_OK
    } else {
        EXIT_FALSE
    })
}
