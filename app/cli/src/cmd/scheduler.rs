//! `mcjs scheduler`: the MCJS scheduler daemon, with the key of the Config's scheduler or of a
//! standby named in the scheduler lease (the holder of the lease acts, the others follow).

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use mcjs_scheduler_daemon::DetectorConfig;
use mcjs_scheduler_daemon::shell::{Daemon, DaemonConfig, IndexStream};
use tokio_util::sync::CancellationToken;

use crate::chain::Ctx;
use crate::{EXIT_OK, GlobalArgs};

#[derive(clap::Args, Debug)]
pub struct SchedulerArgs {
    /// Where agents send heartbeats (and where /metrics and /v1/fleet are served).
    #[arg(long, default_value = "127.0.0.1:7400")]
    pub listen: SocketAddr,
    /// A node silent for longer than this is declared lost.
    #[arg(long, default_value_t = mcjs_protocol::DEFAULT_HEARTBEAT_TIMEOUT_MS)]
    pub heartbeat_timeout_ms: u64,
    /// A node whose agent's heartbeat stream closed without a goodbye (its
    /// process died) is declared lost after this long unless it reconnects.
    #[arg(long, default_value_t = mcjs_protocol::DEFAULT_DISCONNECT_GRACE_MS)]
    pub disconnect_grace_ms: u64,
    /// An agent that said goodbye (stopped on purpose, e.g. to be upgraded)
    /// has this long to come back before its node is declared lost.
    #[arg(long, default_value_t = mcjs_protocol::DEFAULT_RESTART_GRACE_MS)]
    pub restart_grace_ms: u64,
    /// A running job without an attestation for this percentage of its
    /// checkpoint interval is reported overdue.
    #[arg(long, default_value_t = 200)]
    pub overdue_percent: u32,
    /// The brake on mass failure: when this percentage or more of the nodes
    /// holding a job look dead by their heartbeats in one round (and at
    /// least --brake-min-nodes of them), none is reported lost; their jobs
    /// are reported only on per-node evidence (a checkpoint overdue on
    /// chain). 100 or more turns the brake off for all but a whole fleet.
    #[arg(long, default_value_t = mcjs_scheduler_daemon::core::BRAKE_PERCENT)]
    pub brake_percent: u32,
    /// The fewest nodes the brake holds: fewer lost at once are reported.
    #[arg(long, default_value_t = mcjs_scheduler_daemon::core::BRAKE_MIN_NODES)]
    pub brake_min_nodes: usize,
    /// The deployment's store of specs, checkpoints and outputs: a
    /// directory (`file:///dir` or a path) every process on this machine
    /// opens, or `s3://bucket/prefix?endpoint=URL&region=R` behind this
    /// scheduler's gateway (the credentials come from AWS_ACCESS_KEY_ID and
    /// AWS_SECRET_ACCESS_KEY and never leave this process). Published at
    /// /v1/store, where agents and `mcjs job` find it.
    #[arg(long, default_value = ".mcjs-store")]
    pub store: mcjs_protocol::store::StoreUrl,
    /// How often the reconcile loop runs.
    #[arg(long, default_value_t = 500)]
    pub tick_ms: u64,
    /// Transactions of one round (placements, reports) in flight at once.
    #[arg(long, default_value_t = mcjs_scheduler_daemon::shell::SENDS_IN_FLIGHT)]
    pub sends_in_flight: usize,
    /// Follow the program's accounts over a Yellowstone gRPC endpoint
    /// (`http://host:10000`, `https://` for a provider) instead of the RPC
    /// node's websocket; backfills still read --url. The provider's token,
    /// if any, comes from MCJS_YELLOWSTONE_X_TOKEN. Needs a build with the
    /// `yellowstone` feature.
    #[arg(long, value_name = "URL")]
    pub yellowstone: Option<String>,
    /// Among the nodes the scarcity order allows, prefer those most likely
    /// to run a job's remaining time without failing, from the failures and
    /// hours in service the program keeps on each Node (docs/scheduler.md,
    /// "Reliability-aware placement"). Off by default.
    #[arg(long)]
    pub reliability: bool,
    /// Challenge nodes' claimed hardware (docs/hardware-challenge.md): at
    /// registration, after a profile changes, after a verdict that proved
    /// nothing (--challenge-retry-secs), and at random; judge the openings
    /// agents send and record the verdicts on chain. Off by default.
    #[arg(long)]
    pub challenge_hardware: bool,
    /// Seconds a node has for each answer before its challenge is recorded
    /// unanswered.
    #[arg(long, default_value_t = 600)]
    pub challenge_answer_secs: i64,
    /// Seconds after a failed (or unbounded) verdict before a node is
    /// challenged again.
    #[arg(long, default_value_t = 6 * 3_600)]
    pub challenge_retry_secs: i64,
    /// Mean seconds between unannounced re-checks of a proven node; 0: none.
    /// Drawn by provider: all of a drawn provider's proven free nodes at once.
    #[arg(long, default_value_t = 7 * 24 * 3_600)]
    pub challenge_recheck_secs: i64,
    /// Size each claim as if its memory were 2^-N of it: 0 on a real
    /// cluster; on a local one, whose fake GPUs claim more memory than its
    /// CPUs can fill, a scale they answer (the verdict records it).
    #[arg(long, default_value_t = 0)]
    pub challenge_memory_shift: u8,
}

pub fn run(args: SchedulerArgs, global: &GlobalArgs) -> anyhow::Result<u8> {
    let ctx = Ctx::resolve(global)?;
    let scheduler = ctx.wallet()?;
    let config = DaemonConfig {
        rpc_url: ctx.url.clone(),
        fees: ctx.fees,
        listen: args.listen,
        tick: Duration::from_millis(args.tick_ms.max(50)),
        store: absolute(args.store)?,
        sends_in_flight: args.sends_in_flight.max(1),
        index_stream: match args.yellowstone {
            Some(endpoint) => IndexStream::Yellowstone {
                endpoint,
                x_token: std::env::var("MCJS_YELLOWSTONE_X_TOKEN").ok(),
            },
            None => IndexStream::Websocket,
        },
        challenge: mcjs_scheduler_daemon::challenges::ChallengePolicy {
            enabled: args.challenge_hardware,
            sizing: mcjs_scheduler_daemon::challenges::standard_sizing(args.challenge_memory_shift),
            answer_secs: args.challenge_answer_secs.max(1),
            retry_secs: args.challenge_retry_secs.max(0),
            recheck_secs: args.challenge_recheck_secs.max(0),
            // With no challenge in flight, requests are considered this often.
            round_secs: mcjs_scheduler_daemon::shell::CHALLENGE_IDLE_READ_MS / 1_000,
            ..Default::default()
        },
        detector: DetectorConfig {
            heartbeat_timeout_ms: args.heartbeat_timeout_ms as i64,
            disconnect_grace_ms: args.disconnect_grace_ms as i64,
            restart_grace_ms: args.restart_grace_ms as i64,
            overdue_percent: args.overdue_percent.max(100),
            brake_percent: args.brake_percent,
            brake_min_nodes: args.brake_min_nodes,
            placement: {
                let mut placement = mcjs_scheduler_daemon::PlacementConfig::default();
                placement.reliability.enabled = args.reliability;
                placement
            },
            ..DetectorConfig::default()
        },
    };
    crate::logging::init();
    let runtime = crate::chain::runtime()?;
    runtime.block_on(async {
        let daemon = Daemon::connect(
            config,
            scheduler,
            mcjs_scheduler_daemon::server::system_clock(),
        )
        .await
        .context("cannot start the scheduler")?;
        let cancel = CancellationToken::new();
        let on_signal = cancel.clone();
        tokio::spawn(async move {
            let _ = tokio::signal::ctrl_c().await;
            on_signal.cancel();
        });
        daemon.run(cancel).await.context("the scheduler stopped")?;
        Ok(EXIT_OK)
    })
}

/// A directory store as an absolute path, so that what is published means
/// the same to every process whatever its working directory.
pub fn absolute(
    store: mcjs_protocol::store::StoreUrl,
) -> anyhow::Result<mcjs_protocol::store::StoreUrl> {
    use mcjs_protocol::store::StoreUrl;
    Ok(match store {
        StoreUrl::Dir(dir) => {
            std::fs::create_dir_all(&dir)
                .with_context(|| format!("cannot create the store {}", dir.display()))?;
            StoreUrl::Dir(
                std::fs::canonicalize(&dir)
                    .with_context(|| format!("cannot resolve the store {}", dir.display()))?,
            )
        }
        s3 => s3,
    })
}
