//! `mcjs`: the command line of the Managed Compute Job Scheduler.
//!
//! # Map
//!
//! - `main.rs` (this file): the flags every subcommand takes, and dispatch.
//! - `cmd/`: one module per subcommand. A job owner's: `cmd/job.rs` and
//!   `cmd/job/` (`run.rs`: a spec from flags, checked before any upload or
//!   bond; `submit.rs`, `logs.rs`, `metrics.rs`, `progress.rs`, `view.rs`),
//!   `cmd/job_output.rs` (results verified against the chain),
//!   `cmd/spec.rs` (with `cmd/spec_init.jsonc`, the commented starting
//!   spec). A provider's: `cmd/provider.rs`, `cmd/node.rs`, `cmd/hal.rs`,
//!   `cmd/agent.rs`. The operator's: `cmd/admin.rs`, `cmd/deploy.rs`,
//!   `cmd/scheduler.rs`. Anyone's: `cmd/audit.rs`, `cmd/dashboard.rs`. Only
//!   in a build that asks: `cmd/localnet.rs` (feature `localnet`) and
//!   `cmd/demo.rs` (feature `demo`), which `scripts/demo.sh` and
//!   `scripts/test.sh` build; `tests/linking.rs` checks that a plain build
//!   links neither. docs/first-job.md walks through `mcjs job run` and
//!   `mcjs spec init`, and `tests/faults.rs` runs it as written
//!   (`the_first_job_page_runs_as_written`).
//! - `chain.rs`: the cluster URL, wallet and chain client, from flags, the
//!   config file and defaults (Solana CLI conventions).
//! - `store.rs`: finding and opening the deployment's store.
//! - `output.rs`: results for people, or JSON with `--output json`;
//!   `logging.rs`: the daemons' logs.

mod chain;
mod cmd;
mod logging;
mod output;
mod store;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::output::OutputFormat;

/// Exit codes: 0 ok, 1 the checked thing is false, 2 usage or runtime error.
pub const EXIT_OK: u8 = 0;
pub const EXIT_FALSE: u8 = 1;
pub const EXIT_ERROR: u8 = 2;

#[derive(Parser, Debug)]
#[command(
    name = "mcjs",
    version,
    about = "MCJS: checkpointed, fault-tolerant ML jobs on niche GPUs, settled on Solana"
)]
struct Cli {
    #[command(flatten)]
    global: GlobalArgs,
    #[command(subcommand)]
    command: Command,
}

/// Flags every subcommand accepts (Solana CLI conventions).
#[derive(clap::Args, Debug, Clone)]
pub struct GlobalArgs {
    /// Output format.
    #[arg(long, global = true, value_enum, default_value_t = OutputFormat::Display)]
    pub output: OutputFormat,
    /// Cluster JSON-RPC URL or moniker: localhost, devnet, mainnet-beta (or l, d, m).
    /// Default: the config file's json_rpc_url, then localhost.
    #[arg(short = 'u', long, global = true, env = "MCJS_URL")]
    pub url: Option<String>,
    /// Wallet keypair file. Default: the config file's keypair_path, then ~/.config/solana/id.json.
    #[arg(short = 'k', long, global = true, env = "MCJS_KEYPAIR")]
    pub keypair: Option<PathBuf>,
    /// Configuration file (Solana CLI style, YAML or JSON: json_rpc_url,
    /// websocket_url, keypair_path, and MCJS's store_url and scheduler_url).
    #[arg(short = 'C', long, global = true, env = "MCJS_CONFIG")]
    pub config: Option<PathBuf>,
    /// The most a transaction offers per compute unit as a priority fee, in
    /// micro-lamports (0: no priority fee). It offers the 75th percentile of
    /// what recent transactions writing the same accounts paid, doubled each
    /// time it is signed again after expiring. Default: 1000000 on a
    /// cluster, 0 on a local chain (no fee market).
    #[arg(
        long,
        global = true,
        env = "MCJS_MAX_COMPUTE_UNIT_PRICE",
        value_name = "MICRO_LAMPORTS"
    )]
    pub max_compute_unit_price: Option<u64>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Job specifications: validate, hash, schema.
    Spec {
        #[command(subcommand)]
        cmd: cmd::spec::SpecCommand,
    },
    /// Hardware abstraction layer: probe this node, check its checkpoint capability, serve the HAL API.
    Hal {
        #[command(subcommand)]
        cmd: cmd::hal::HalCommand,
    },
    /// Run a local Solana chain with the MCJS program, initialised and with funded wallets.
    #[cfg(feature = "localnet")]
    Localnet(cmd::localnet::LocalnetArgs),
    #[cfg(not(feature = "localnet"))]
    #[command(hide = true)]
    Localnet(cmd::Unbuilt),
    /// Jobs: submit, upload inputs, fetch the verified output, follow, pause, resume, top up, cancel, report a stalled job.
    Job {
        #[command(subcommand)]
        cmd: cmd::job::JobCommand,
    },
    /// Providers: register with a stake, add to it, withdraw it.
    Provider {
        #[command(subcommand)]
        cmd: cmd::provider::ProviderCommand,
    },
    /// Nodes: register a provider's GPU host from its HAL profile, update it, show it.
    Node {
        #[command(subcommand)]
        cmd: cmd::node::NodeCommand,
    },
    /// Verify a job's history against its on-chain commitment; summarise a provider's record.
    Audit {
        #[command(subcommand)]
        cmd: cmd::audit::AuditCommand,
    },
    /// The node agent: register this node and run the jobs the chain assigns to it.
    Agent {
        #[command(subcommand)]
        cmd: cmd::agent::AgentCommand,
    },
    /// The program's Config and scheduler lease: initialise, change, show.
    Admin {
        #[command(subcommand)]
        cmd: cmd::admin::AdminCommand,
    },
    /// The scheduler daemon: places jobs, detects failed nodes, reports them
    /// (while it holds the scheduler lease; a standby follows until it does).
    Scheduler(cmd::scheduler::SchedulerArgs),
    /// Run the whole story locally: chain, scheduler, three agents, a job, a node killed, recovery, payout, audit.
    #[cfg(feature = "demo")]
    Demo(cmd::demo::DemoArgs),
    #[cfg(not(feature = "demo"))]
    #[command(hide = true)]
    Demo(cmd::Unbuilt),
    /// The auditor's web dashboard: jobs, providers, nodes and audits, read from the chain.
    Dashboard(cmd::dashboard::DashboardArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result: anyhow::Result<u8> = match cli.command {
        Command::Spec { cmd } => cmd::spec::run(cmd, &cli.global),
        Command::Hal { cmd } => cmd::hal::run(cmd, &cli.global),
        Command::Scheduler(args) => cmd::scheduler::run(args, &cli.global),
        #[cfg(feature = "demo")]
        Command::Demo(args) => cmd::demo::run(args, &cli.global),
        #[cfg(not(feature = "demo"))]
        Command::Demo(_) => Err(cmd::unbuilt("demo")),
        Command::Dashboard(args) => cmd::dashboard::run(args, &cli.global),
        #[cfg(feature = "localnet")]
        Command::Localnet(args) => cmd::localnet::run(args, &cli.global),
        #[cfg(not(feature = "localnet"))]
        Command::Localnet(_) => Err(cmd::unbuilt("localnet")),
        Command::Job { cmd } => cmd::job::run(cmd, &cli.global),
        Command::Provider { cmd } => cmd::provider::run(cmd, &cli.global),
        Command::Node { cmd } => cmd::node::run(cmd, &cli.global),
        Command::Audit { cmd } => cmd::audit::run(cmd, &cli.global),
        Command::Agent { cmd } => cmd::agent::run(cmd, &cli.global),
        Command::Admin { cmd } => cmd::admin::run(cmd, &cli.global),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(EXIT_ERROR)
        }
    }
}
