//! `mcjs hal`: what this node is, and whether it can keep a checkpoint schedule.

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Context;
use mcjs_hal::probe::docker::DockerEndpoint;
use mcjs_hal::probe::storage::StorageProbeConfig;
use mcjs_hal::{Capability, NodeProfile, ProbeConfig, Readiness};
use mcjs_spec::units::{ByteSize, HumanDuration};
use serde::Serialize;

use crate::{EXIT_FALSE, EXIT_OK, GlobalArgs};

#[derive(clap::Subcommand, Debug)]
pub enum HalCommand {
    /// Probe this node (GPUs, CPU, memory, OS, Docker, checkpoint storage, network) and print its profile.
    Probe(ProbeArgs),
    /// Answer whether this node can write a checkpoint of --size every --every, keeping --keep:
    /// exit 0 yes, 1 no (with reasons).
    Check(CheckArgs),
    /// Probe once, then serve the HAL API (profile, capability, readiness, metrics) over HTTP.
    Serve(ServeArgs),
    /// Print the OpenAPI document of the HAL API.
    Openapi,
}

#[derive(clap::Args, Debug, Clone)]
pub struct ProbeArgs {
    /// Directory where checkpoints will be written; its write and read bandwidth are measured there.
    #[arg(long, env = "MCJS_CHECKPOINT_DIR", default_value = ".")]
    pub checkpoint_dir: PathBuf,
    /// Bytes written to measure the checkpoint directory, split over --samples files, each fsync'd.
    #[arg(long, default_value = "64MiB")]
    pub sample_size: ByteSize,
    /// Number of samples the bandwidth is measured in (at least 2 to judge stability).
    #[arg(long, default_value_t = 4)]
    pub samples: u32,
    /// Skip the storage measurement (nothing is written).
    #[arg(long)]
    pub no_storage: bool,
    /// NVML library to load instead of the system's libnvidia-ml.so.1.
    #[arg(long, env = "MCJS_NVML_LIB")]
    pub nvml_lib: Option<PathBuf>,
    /// Docker endpoint (unix:///path); defaults to DOCKER_HOST, then /var/run/docker.sock.
    #[arg(long)]
    pub docker_host: Option<String>,
    /// Checkpoint store URL whose latency and throughput are measured (http or https).
    #[arg(long)]
    pub store_url: Option<String>,
    /// RPC endpoint URL whose latency is measured (http or https).
    #[arg(long)]
    pub rpc_url: Option<String>,
    /// The node's UPS, read over Network UPS Tools (`upsd`): NAME@HOST[:PORT],
    /// as `upsc` names it (port 3493 by default).
    #[arg(long, env = "MCJS_UPS", value_name = "NAME@HOST[:PORT]")]
    pub ups: Option<mcjs_hal::probe::ups::UpsTarget>,
}

#[derive(clap::Args, Debug)]
pub struct CheckArgs {
    /// Checkpoint size, e.g. 10GiB, 512MiB, 10GB.
    #[arg(long)]
    pub size: ByteSize,
    /// Interval between checkpoints, e.g. 15m, 1h.
    #[arg(long)]
    pub every: HumanDuration,
    /// Checkpoints retained besides the one being written.
    #[arg(long, default_value_t = mcjs_hal::api::DEFAULT_KEEP)]
    pub keep: u32,
    /// Judge a saved profile (the JSON of `mcjs hal probe --output json`) instead of probing.
    #[arg(long)]
    pub profile: Option<PathBuf>,
    #[command(flatten)]
    pub probe: ProbeArgs,
}

#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:7070")]
    pub listen: SocketAddr,
    #[command(flatten)]
    pub probe: ProbeArgs,
}

pub fn run(cmd: HalCommand, global: &GlobalArgs) -> anyhow::Result<u8> {
    match cmd {
        HalCommand::Probe(args) => {
            let profile = probe(&args)?;
            let readiness = mcjs_hal::readiness(&profile);
            global.output.print(&ProbeOutput { profile, readiness })?;
            Ok(EXIT_OK)
        }
        HalCommand::Check(args) => {
            let profile = match &args.profile {
                Some(path) => load_profile(path)?,
                None => probe(&args.probe)?,
            };
            let capability = mcjs_hal::checkpoint_capability(
                &profile,
                args.size.bytes(),
                args.every.secs(),
                args.keep,
            )
            .context("invalid checkpoint schedule")?;
            let capable = capability.capable;
            global.output.print(&CheckOutput {
                capability,
                fingerprint: profile.fingerprint,
                checkpoint_dir: profile.measurements.storage.map(|s| s.path),
            })?;
            Ok(if capable { EXIT_OK } else { EXIT_FALSE })
        }
        HalCommand::Serve(args) => {
            let profile = probe(&args.probe)?;
            runtime()?.block_on(async move {
                let listener = tokio::net::TcpListener::bind(args.listen)
                    .await
                    .with_context(|| format!("cannot listen on {}", args.listen))?;
                eprintln!("serving the HAL API on http://{}", listener.local_addr()?);
                let shutdown = async {
                    let _ = tokio::signal::ctrl_c().await;
                };
                mcjs_hal::api::serve(listener, mcjs_hal::api::ApiState::new(profile), shutdown)
                    .await
                    .context("the HAL API server failed")
            })?;
            Ok(EXIT_OK)
        }
        HalCommand::Openapi => {
            print!("{}", mcjs_hal::api::openapi_json());
            Ok(EXIT_OK)
        }
    }
}

pub(crate) fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

pub(crate) fn probe(args: &ProbeArgs) -> anyhow::Result<NodeProfile> {
    let mut network_targets = Vec::new();
    if let Some(url) = &args.store_url {
        network_targets.push(("checkpoint_store".to_string(), url.clone()));
    }
    if let Some(url) = &args.rpc_url {
        network_targets.push(("rpc".to_string(), url.clone()));
    }
    let config = ProbeConfig {
        checkpoint_dir: (!args.no_storage).then(|| args.checkpoint_dir.clone()),
        storage: StorageProbeConfig {
            total_bytes: args.sample_size.bytes(),
            samples: args.samples,
        },
        nvml_lib: args.nvml_lib.clone(),
        docker_endpoint: args
            .docker_host
            .as_deref()
            .map_or_else(DockerEndpoint::from_env, DockerEndpoint::parse),
        network_targets,
        ups: args.ups.clone(),
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    runtime()?
        .block_on(mcjs_hal::probe_node(&config, now))
        .context("probe failed")
}

pub(crate) fn load_profile(path: &PathBuf) -> anyhow::Result<NodeProfile> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read profile {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| {
        format!(
            "{} is not a node profile: write one with `mcjs hal probe --output json > {}`",
            path.display(),
            path.display()
        )
    })
}

/// The profile with its readiness score.
#[derive(Serialize)]
struct ProbeOutput {
    #[serde(flatten)]
    profile: NodeProfile,
    readiness: Readiness,
}

impl fmt::Display for ProbeOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.profile, self.readiness)
    }
}

#[derive(Serialize)]
struct CheckOutput {
    #[serde(flatten)]
    capability: Capability,
    fingerprint: String,
    checkpoint_dir: Option<String>,
}

impl fmt::Display for CheckOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.capability)?;
        if let Some(dir) = &self.checkpoint_dir {
            write!(f, "  checkpoint directory {dir}")?;
        }
        Ok(())
    }
}
