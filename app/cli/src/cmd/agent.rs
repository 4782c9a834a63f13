//! `mcjs agent`: the node agent daemon of a provider host.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use mcjs_agent::register::adopt_node;
use mcjs_agent::rpc::RpcChain;
use mcjs_agent::{Agent, AgentConfig};
use tokio_util::sync::CancellationToken;

use crate::chain::{Ctx, parse_pubkey, read_wallet};
use crate::cmd::hal::ProbeArgs;
use crate::{EXIT_OK, GlobalArgs};

#[derive(clap::Subcommand, Debug)]
pub enum AgentCommand {
    /// Run the jobs the chain assigns to a node until interrupted (Ctrl-C),
    /// signing with the node's operator key. The provider registers the node
    /// first from its wallet (`mcjs node register --operator <KEY>`); the
    /// wallet itself never comes near the node, and the agent refuses to run
    /// with a key that owns a provider account.
    Run(RunArgs),
}

#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// The node's operator key (a keypair file from `mcjs node keygen`).
    #[arg(long)]
    pub node_key: PathBuf,
    /// The Node account this agent runs (printed by `mcjs node register`).
    #[arg(long)]
    pub node: String,
    /// Node-local directory for the data cache and each job's data, checkpoints and output.
    #[arg(long, default_value = ".mcjs-agent")]
    pub work_dir: PathBuf,
    /// The deployment's store of job specs, checkpoints and outputs: a
    /// directory shared with the scheduler (`file:///dir` or a path), or an
    /// `s3://` URL, reached through the scheduler's gateway with requests
    /// signed by the node key (the agent never holds store credentials).
    /// By default, what the scheduler publishes; `.mcjs-store` without a
    /// scheduler.
    #[arg(long)]
    pub store: Option<mcjs_protocol::store::StoreUrl>,
    /// The scheduler's base URL; heartbeats go there every second.
    #[arg(long)]
    pub scheduler: Option<String>,
    /// Another scheduler of the deployment (a standby of the lease);
    /// heartbeats go there too. Repeat for several.
    #[arg(long = "standby-scheduler", value_name = "URL")]
    pub standby_schedulers: Vec<String>,
    /// Address of the agent's HTTP API (the HAL API plus /v1/agent/metrics and /v1/agent/jobs).
    #[arg(long, default_value = "127.0.0.1:7070")]
    pub listen: SocketAddr,
    /// Use this HAL profile (JSON of `mcjs hal probe --output json`) instead of probing the host.
    #[arg(long)]
    pub profile: Option<PathBuf>,
    /// Enforce checkpoints at least this often (seconds), whatever a job asks.
    #[arg(long)]
    pub max_checkpoint_interval_secs: Option<u64>,
    /// Threads hashing each checkpoint (0: one per core).
    #[arg(long, default_value_t = 0)]
    pub hash_threads: usize,
    /// How often the agent reconciles with the chain, in milliseconds.
    #[arg(long, default_value_t = 500)]
    pub tick_ms: u64,
    /// A directory whose files jobs may stage as file:// inputs
    /// (repeatable). None by default: file:// inputs are refused.
    #[arg(long = "data-root", value_name = "DIR")]
    pub data_roots: Vec<PathBuf>,
    /// Let http(s) inputs reach loopback, private, link-local, CGNAT and
    /// cloud-metadata addresses (refused by default).
    #[arg(long)]
    pub allow_private_data: bool,
    /// How a job's disk is held to its declaration: `loop` puts each run's
    /// checkpoints and output on a loop-mounted ext4 image of the declared
    /// size, so a write past it is refused (needs root and e2fsprogs);
    /// `watch` measures what a run wrote every few seconds (a job may fill
    /// the node's disk between two measurements); `auto`, loop where this
    /// host allows it.
    #[arg(long, default_value = "auto")]
    pub disk_bound: mcjs_agent::DiskBound,
    #[command(flatten)]
    pub probe: ProbeArgs,
}

pub fn run(cmd: AgentCommand, global: &GlobalArgs) -> anyhow::Result<u8> {
    match cmd {
        AgentCommand::Run(args) => run_agent(args, global),
    }
}

fn run_agent(args: RunArgs, global: &GlobalArgs) -> anyhow::Result<u8> {
    crate::logging::init();
    let ctx = Ctx::resolve(global)?;
    let node_key = read_wallet(&args.node_key)?;
    let node = parse_pubkey(&args.node, "node")?;
    let profile = match &args.profile {
        Some(path) => crate::cmd::hal::load_profile(path)?,
        None => crate::cmd::hal::probe(&args.probe)?,
    };
    std::fs::create_dir_all(&args.work_dir)
        .with_context(|| format!("cannot create the work dir {}", args.work_dir.display()))?;
    let work_dir = std::fs::canonicalize(&args.work_dir)?;
    let data_roots = args
        .data_roots
        .iter()
        .map(|d| {
            std::fs::canonicalize(d)
                .with_context(|| format!("cannot use the data root {}", d.display()))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async move {
        let chain = RpcChain::new(ctx.client(), node_key);
        let registered = adopt_node(&chain, node, &profile).await?;
        global.output.print(&registered)?;
        let (store_url, store) = open_store(&args, node, &chain.wallet).await?;
        let s3_store = match store_url {
            mcjs_protocol::store::StoreUrl::S3(location) => Some(mcjs_runtime::staging::S3Inputs {
                location,
                store: std::sync::Arc::clone(&store),
            }),
            mcjs_protocol::store::StoreUrl::Dir(_) => None,
        };
        let config = AgentConfig {
            node,
            work_dir,
            tick: Duration::from_millis(args.tick_ms.max(50)),
            max_checkpoint_interval: args.max_checkpoint_interval_secs.map(Duration::from_secs),
            hash_threads: args.hash_threads,
            scheduler: args.scheduler.clone(),
            standby_schedulers: args.standby_schedulers.clone(),
            agent_url: format!("http://{}", args.listen),
            staging: mcjs_agent::StagingPolicy {
                data_roots,
                allow_private: args.allow_private_data,
                s3_store,
                ..Default::default()
            },
            disk: args.disk_bound,
            ups: args.probe.ups.clone(),
        };
        let metrics = mcjs_agent::metrics::AgentMetrics::new();
        let agent = Agent::new(chain, config, store, metrics).await?;
        let cancel = CancellationToken::new();
        let listener = tokio::net::TcpListener::bind(args.listen)
            .await
            .with_context(|| format!("cannot listen on {}", args.listen))?;
        let hal = mcjs_hal::api::ApiState::new(profile);
        let server = {
            let (agent, cancel) = (agent.clone(), cancel.clone());
            tokio::spawn(
                async move { mcjs_agent::shell::serve(listener, hal, &agent, cancel).await },
            )
        };
        let stop = cancel.clone();
        tokio::spawn(async move {
            let _ = tokio::signal::ctrl_c().await;
            eprintln!(
                "stopping the agent; job containers keep running and are adopted on the next start"
            );
            stop.cancel();
        });
        eprintln!(
            "agent of node {} serving on http://{}",
            agent.node(),
            args.listen
        );
        agent.run(cancel.clone()).await?;
        cancel.cancel();
        let _ = server.await;
        anyhow::Ok(EXIT_OK)
    })
}

/// The store as `--store` says, or as the scheduler publishes it.
async fn open_store(
    args: &RunArgs,
    node: mcjs_client::Pubkey,
    key: &mcjs_client::Keypair,
) -> anyhow::Result<(
    mcjs_protocol::store::StoreUrl,
    std::sync::Arc<dyn object_store::ObjectStore>,
)> {
    use mcjs_protocol::store::{Role, StoreUrl};
    let url = match (&args.store, &args.scheduler) {
        (Some(url), _) => url.clone(),
        (None, Some(scheduler)) => crate::store::resolve(None, None, scheduler).await?,
        (None, None) => StoreUrl::Dir(PathBuf::from(".mcjs-store")),
    };
    let url = crate::cmd::scheduler::absolute(url)?;
    if matches!(url, StoreUrl::S3(_)) && args.scheduler.is_none() {
        anyhow::bail!(
            "an s3:// store is reached through the scheduler's gateway: pass --scheduler"
        );
    }
    let identity = crate::store::identity(
        Role::Node {
            node: node.to_string(),
        },
        key,
    );
    // The gateway of any scheduler of the deployment will do: the standbys'
    // serve the store while the lease's holder is down.
    let gateways: Vec<String> = std::iter::once(
        args.scheduler
            .as_deref()
            .unwrap_or(crate::store::DEFAULT_SCHEDULER_URL)
            .to_string(),
    )
    .chain(args.standby_schedulers.iter().cloned())
    .collect();
    eprintln!("store: {url}");
    let store =
        mcjs_runtime::brokered::open_any(&url, &gateways, identity).map_err(anyhow::Error::msg)?;
    Ok((url, store))
}
