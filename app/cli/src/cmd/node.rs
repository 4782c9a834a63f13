//! `mcjs node`: a provider's GPU hosts, registered from their measured HAL profile.

use std::fmt;
use std::path::PathBuf;

use anyhow::{anyhow, bail};
use mcjs::instructions::{RegisterNodeArgs, UpdateNodeArgs};
use mcjs::state::{HardwareProfile, Node};
use mcjs_client::{ChainClient, Pubkey, Signer, history::node_status, ix, pda};
use mcjs_hal::NodeProfile;
use serde::Serialize;

use crate::chain::{Ctx, parse_pubkey, parse_usdc, require_funds, usdc};
use crate::cmd::hal::ProbeArgs;
use crate::{EXIT_OK, GlobalArgs};

#[derive(clap::Args, Debug)]
pub struct ProfileSource {
    /// A saved profile: the JSON of `mcjs hal probe --output json`.
    #[arg(long, conflicts_with = "probe")]
    pub profile: Option<PathBuf>,
    /// Probe this host now instead of reading a profile.
    #[arg(long)]
    pub probe: bool,
    #[command(flatten)]
    pub probe_args: ProbeArgs,
}

#[derive(clap::Subcommand, Debug)]
pub enum NodeCommand {
    /// Register a node of the wallet's provider from its HAL profile.
    Register {
        #[command(flatten)]
        source: ProfileSource,
        /// USDC per GPU-hour, e.g. 1.5.
        #[arg(long, value_parser = parse_usdc)]
        price: u64,
        /// Node index under the provider; default: the next free one.
        #[arg(long)]
        index: Option<u32>,
    },
    /// Update a node's hardware (from a new profile), readiness or price.
    Update {
        /// The node's index under the wallet's provider.
        index: u32,
        #[command(flatten)]
        source: ProfileSource,
        #[arg(long, value_parser = parse_usdc)]
        price: Option<u64>,
    },
    /// Show a node, or every node of a provider (default: the wallet's).
    Status {
        /// A node account.
        node: Option<String>,
        /// A Provider account or its owner's wallet.
        #[arg(long, conflicts_with = "node")]
        provider: Option<String>,
    },
}

pub fn run(cmd: NodeCommand, global: &GlobalArgs) -> anyhow::Result<u8> {
    let ctx = Ctx::resolve(global)?;
    // The probe runs its own runtime; load the profile before entering ours.
    let profile = match &cmd {
        NodeCommand::Register { source, .. } => Some(load(source)?),
        NodeCommand::Update { source, .. } if source.profile.is_some() || source.probe => {
            Some(load(source)?)
        }
        _ => None,
    };
    crate::chain::runtime()?.block_on(run_async(cmd, global, ctx, profile))
}

fn load(source: &ProfileSource) -> anyhow::Result<NodeProfile> {
    match (&source.profile, source.probe) {
        (Some(path), _) => crate::cmd::hal::load_profile(path),
        (None, true) => crate::cmd::hal::probe(&source.probe_args),
        (None, false) => bail!(
            "say where the node's hardware comes from: --profile FILE (from `mcjs hal probe --output json`) or --probe"
        ),
    }
}

/// The on-chain hardware of a profile, refusing what no job could use.
fn hardware_of(profile: &NodeProfile) -> anyhow::Result<(HardwareProfile, u8)> {
    let summary = profile.chain_summary();
    if summary.gpu_count == 0 || summary.gpu_model.is_empty() {
        bail!("the profile shows no GPU: a node must have at least one GPU to take jobs");
    }
    let readiness = mcjs_hal::readiness(profile).score;
    Ok((
        HardwareProfile {
            gpu_model: summary.gpu_model,
            gpu_count: summary.gpu_count,
            vram_per_gpu_mib: summary.vram_per_gpu_mib,
            compute_capability: summary.compute_capability,
            cpu_cores: summary.cpu_cores,
            ram_mib: summary.ram_mib,
            disk_gib: summary.disk_gib,
            checkpoint_write_mibps: summary.checkpoint_write_mibps,
        },
        readiness,
    ))
}

async fn run_async(
    cmd: NodeCommand,
    global: &GlobalArgs,
    ctx: Ctx,
    profile: Option<NodeProfile>,
) -> anyhow::Result<u8> {
    let client = ctx.client();
    match cmd {
        NodeCommand::Register { price, index, .. } => {
            let (hardware, readiness) = hardware_of(profile.as_ref().expect("loaded"))?;
            let wallet = ctx.wallet()?;
            let owner = wallet.pubkey();
            let provider_key = pda::provider(&owner);
            let provider = client.provider(&provider_key).await?.ok_or_else(|| {
                anyhow!("the wallet {owner} is not a registered provider: run `mcjs provider register --stake N` first")
            })?;
            require_funds(&client, &wallet, &owner, 0).await?;
            let index = index.unwrap_or(provider.node_count);
            let node = pda::node(&provider_key, index);
            if client.account(&node).await?.is_some() {
                bail!(
                    "the provider already has a node with index {index} ({node}); use `mcjs node update {index}`"
                );
            }
            let sig = client
                .send(
                    &[ix::register_node(
                        &owner,
                        RegisterNodeArgs {
                            index,
                            hardware,
                            readiness,
                            price_per_gpu_hour: price,
                        },
                    )],
                    &[&wallet],
                )
                .await?;
            print_nodes(&client, global, vec![node], "registered", Some(sig)).await
        }
        NodeCommand::Update { index, price, .. } => {
            let wallet = ctx.wallet()?;
            let owner = wallet.pubkey();
            let node = pda::node(&pda::provider(&owner), index);
            if client.node(&node).await?.is_none() {
                bail!("the wallet's provider has no node with index {index} ({node})");
            }
            let (hardware, readiness) = match &profile {
                Some(p) => {
                    let (h, r) = hardware_of(p)?;
                    (Some(h), Some(r))
                }
                None => (None, None),
            };
            if hardware.is_none() && price.is_none() {
                bail!("nothing to update: give --profile FILE, --probe or --price");
            }
            let sig = client
                .send(
                    &[ix::update_node(
                        &owner,
                        index,
                        UpdateNodeArgs {
                            hardware,
                            readiness,
                            price_per_gpu_hour: price,
                        },
                    )],
                    &[&wallet],
                )
                .await?;
            print_nodes(&client, global, vec![node], "updated", Some(sig)).await
        }
        NodeCommand::Status { node, provider } => {
            let keys = match (node, provider) {
                (Some(node), _) => vec![parse_pubkey(&node, "node")?],
                (None, provider) => {
                    let provider = match provider {
                        Some(p) => {
                            crate::cmd::provider::provider_key(
                                &client,
                                &parse_pubkey(&p, "provider")?,
                            )
                            .await?
                        }
                        None => pda::provider(&ctx.wallet()?.pubkey()),
                    };
                    client
                        .nodes_of(&provider)
                        .await?
                        .into_iter()
                        .map(|(k, _)| k)
                        .collect()
                }
            };
            print_nodes(&client, global, keys, "node", None).await
        }
    }
}

async fn print_nodes(
    client: &ChainClient,
    global: &GlobalArgs,
    keys: Vec<Pubkey>,
    action: &'static str,
    signature: Option<mcjs_client::Signature>,
) -> anyhow::Result<u8> {
    let mut nodes = Vec::new();
    for key in keys {
        let node = client
            .node(&key)
            .await
            .map_err(|e| anyhow!("{key}: {e}"))?
            .ok_or_else(|| anyhow!("no node at {key} on {}", client.url()))?;
        nodes.push(NodeView::new(key, &node));
    }
    global.output.print(&NodesView {
        action,
        signature: signature.map(|s| s.to_string()),
        nodes,
    })?;
    Ok(EXIT_OK)
}

#[derive(Serialize)]
struct NodeView {
    node: String,
    provider: String,
    index: u32,
    gpu_model: String,
    gpu_count: u8,
    vram_per_gpu_mib: u32,
    compute_capability: u16,
    cpu_cores: u16,
    ram_mib: u32,
    disk_gib: u32,
    checkpoint_write_mibps: u32,
    readiness: u8,
    price_per_gpu_hour: String,
    status: &'static str,
    status_since: i64,
    current_job: Option<String>,
}

impl NodeView {
    fn new(key: Pubkey, node: &Node) -> Self {
        let hw = &node.hardware;
        Self {
            node: key.to_string(),
            provider: node.provider.to_string(),
            index: node.index,
            gpu_model: hw.gpu_model.clone(),
            gpu_count: hw.gpu_count,
            vram_per_gpu_mib: hw.vram_per_gpu_mib,
            compute_capability: hw.compute_capability,
            cpu_cores: hw.cpu_cores,
            ram_mib: hw.ram_mib,
            disk_gib: hw.disk_gib,
            checkpoint_write_mibps: hw.checkpoint_write_mibps,
            readiness: node.readiness,
            price_per_gpu_hour: usdc(node.price_per_gpu_hour),
            status: node_status(node.status),
            status_since: node.status_since,
            current_job: node.current_job.map(|j| j.to_string()),
        }
    }
}

#[derive(Serialize)]
struct NodesView {
    action: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    signature: Option<String>,
    nodes: Vec<NodeView>,
}

impl fmt::Display for NodesView {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(sig) = &self.signature {
            writeln!(f, "{} (transaction {sig})", self.action)?;
        }
        if self.nodes.is_empty() {
            return write!(f, "no nodes");
        }
        for (i, n) in self.nodes.iter().enumerate() {
            writeln!(
                f,
                "node {} (index {} of provider {})",
                n.node, n.index, n.provider
            )?;
            writeln!(
                f,
                "  gpus         {}x {} ({} MiB, sm {})",
                n.gpu_count, n.gpu_model, n.vram_per_gpu_mib, n.compute_capability
            )?;
            writeln!(
                f,
                "  host         {} cores, {} MiB RAM, {} GiB disk, checkpoints at {} MiB/s",
                n.cpu_cores, n.ram_mib, n.disk_gib, n.checkpoint_write_mibps
            )?;
            writeln!(f, "  readiness    {}", n.readiness)?;
            writeln!(
                f,
                "  price        {} USDC per GPU-hour",
                n.price_per_gpu_hour
            )?;
            write!(f, "  status       {} since {}", n.status, n.status_since)?;
            if let Some(job) = &n.current_job {
                write!(f, " (job {job})")?;
            }
            if i + 1 < self.nodes.len() {
                writeln!(f)?;
            }
        }
        Ok(())
    }
}
