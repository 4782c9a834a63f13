//! `mcjs node`: a provider's GPU hosts, registered from their measured HAL profile.

use std::fmt;
use std::path::PathBuf;

use anyhow::{anyhow, bail};
use mcjs::instructions::{RegisterNodeArgs, UpdateNodeArgs};
use mcjs::state::{HardwareProfile, Node};
use mcjs_client::history::{HistoryEntry, node_status};
use mcjs_client::{ChainClient, Keypair, Pubkey, Signer, ix, pda};
use mcjs_hal::NodeProfile;
use mcjs_ledger::reliability::{self, Reliability};
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

/// Lamports a fresh operator key gets for its transaction fees (0.05 SOL:
/// about 10,000 transactions at the base fee).
const DEFAULT_OPERATOR_LAMPORTS: u64 = 50_000_000;

#[derive(clap::Subcommand, Debug)]
pub enum NodeCommand {
    /// Write a fresh operator key for a node (a Solana keypair file). The
    /// node's agent runs with it; it can run jobs but never move the
    /// provider's money.
    Keygen {
        /// Where to write the keypair; refused if the file exists.
        #[arg(long, short = 'o')]
        outfile: PathBuf,
    },
    /// Register a node of the wallet's provider from its HAL profile.
    Register {
        #[command(flatten)]
        source: ProfileSource,
        /// The node's operator key (`mcjs node keygen`): what its agent signs with.
        #[arg(long, value_parser = parse_operator)]
        operator: Pubkey,
        /// Lamports sent from the wallet to the operator key for its fees,
        /// when it holds less.
        #[arg(long, default_value_t = DEFAULT_OPERATOR_LAMPORTS)]
        operator_lamports: u64,
        /// USDC per GPU-hour, e.g. 1.5.
        #[arg(long, value_parser = parse_usdc)]
        price: u64,
        /// Node index under the provider; default: the next free one.
        #[arg(long)]
        index: Option<u32>,
    },
    /// Update a node's hardware (from a new profile), readiness, price or
    /// operator key. A new operator key fences the old one at once.
    Update {
        /// The node's index under the wallet's provider.
        index: u32,
        #[command(flatten)]
        source: ProfileSource,
        #[arg(long, value_parser = parse_usdc)]
        price: Option<u64>,
        /// Rotate the node's operator key.
        #[arg(long, value_parser = parse_operator)]
        operator: Option<Pubkey>,
        /// Lamports sent to a new operator key for its fees, when it holds less.
        #[arg(long, default_value_t = DEFAULT_OPERATOR_LAMPORTS)]
        operator_lamports: u64,
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

fn parse_operator(text: &str) -> anyhow::Result<Pubkey> {
    if let Ok(key) = text.parse() {
        return Ok(key);
    }
    let path = std::path::Path::new(text);
    if path.exists() {
        return Ok(crate::chain::read_wallet(path)?.pubkey());
    }
    bail!(
        "operator {text:?} is neither an address nor a keypair file (make one with `mcjs node keygen -o FILE`)"
    )
}

#[derive(Serialize)]
struct KeyWritten {
    operator: String,
    path: String,
}

impl fmt::Display for KeyWritten {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "operator key {} written to {}\nregister the node with it: mcjs node register --operator {} …\nthen run its agent with: mcjs agent run --node-key {} --node <NODE>",
            self.operator, self.path, self.operator, self.path
        )
    }
}

/// Writes a fresh keypair, refusing to overwrite one.
fn keygen(outfile: &std::path::Path, global: &GlobalArgs) -> anyhow::Result<u8> {
    if outfile.exists() {
        bail!(
            "{} exists: refusing to overwrite a key (a node's operator key may be in use)",
            outfile.display()
        );
    }
    let key = Keypair::new();
    mcjs_client::keyfile::write_keypair(outfile, &key).map_err(|e| anyhow!("{e}"))?;
    global.output.print(&KeyWritten {
        operator: key.pubkey().to_string(),
        path: outfile.display().to_string(),
    })?;
    Ok(EXIT_OK)
}

/// The instruction funding an operator key up to `lamports`, if it holds less.
async fn top_up_operator(
    client: &ChainClient,
    payer: &Pubkey,
    operator: &Pubkey,
    lamports: u64,
) -> anyhow::Result<Option<mcjs_client::Instruction>> {
    let balance = client.sol_balance(operator).await?;
    Ok((balance < lamports).then(|| ix::fund_operator(payer, operator, lamports - balance)))
}

pub fn run(cmd: NodeCommand, global: &GlobalArgs) -> anyhow::Result<u8> {
    if let NodeCommand::Keygen { outfile } = &cmd {
        return keygen(outfile, global);
    }
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
    let hardware = mcjs_agent::register::hardware(profile);
    if hardware.gpu_count == 0 || hardware.gpu_model.is_empty() {
        bail!("the profile shows no GPU: a node must have at least one GPU to take jobs");
    }
    Ok((hardware, mcjs_hal::readiness(profile).score))
}

async fn run_async(
    cmd: NodeCommand,
    global: &GlobalArgs,
    ctx: Ctx,
    profile: Option<NodeProfile>,
) -> anyhow::Result<u8> {
    let client = ctx.client();
    match cmd {
        NodeCommand::Keygen { .. } => unreachable!("handled before connecting"),
        NodeCommand::Register {
            price,
            index,
            operator,
            operator_lamports,
            ..
        } => {
            let (hardware, readiness) = hardware_of(profile.as_ref().expect("loaded"))?;
            let wallet = ctx.wallet()?;
            let owner = wallet.pubkey();
            let provider_key = pda::provider(&owner);
            let provider = client.provider(&provider_key).await?.ok_or_else(|| {
                anyhow!("the wallet {owner} is not a registered provider: run `mcjs provider register --stake N` first")
            })?;
            require_funds(&client, &wallet, &owner, 0).await?;
            if operator == owner {
                bail!(
                    "the operator key must not be the provider's wallet: the wallet can withdraw the stake and must stay off the node; make one with `mcjs node keygen -o FILE`"
                );
            }
            let index = index.unwrap_or(provider.node_count);
            let node = pda::node(&provider_key, index);
            if client.account(&node).await?.is_some() {
                bail!(
                    "the provider already has a node with index {index} ({node}); use `mcjs node update {index}`"
                );
            }
            let mut ixs = vec![ix::register_node(
                &owner,
                RegisterNodeArgs {
                    index,
                    operator,
                    hardware,
                    readiness,
                    price_per_gpu_hour: price,
                },
            )];
            ixs.extend(top_up_operator(&client, &owner, &operator, operator_lamports).await?);
            let sig = client.send(&ixs, &[&wallet]).await?;
            print_nodes(&client, global, vec![node], "registered", Some(sig), None).await
        }
        NodeCommand::Update {
            index,
            price,
            operator,
            operator_lamports,
            ..
        } => {
            let wallet = ctx.wallet()?;
            let owner = wallet.pubkey();
            let provider = pda::provider(&owner);
            let node = pda::node(&provider, index);
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
            if hardware.is_none() && price.is_none() && operator.is_none() {
                bail!("nothing to update: give --profile FILE, --probe, --price or --operator");
            }
            if operator == Some(owner) {
                bail!(
                    "the operator key must not be the provider's wallet: make one with `mcjs node keygen -o FILE`"
                );
            }
            let mut ixs = vec![ix::update_node(
                &owner,
                &provider,
                index,
                UpdateNodeArgs {
                    hardware,
                    readiness,
                    price_per_gpu_hour: price,
                    operator,
                },
            )];
            if let Some(operator) = &operator {
                ixs.extend(top_up_operator(&client, &owner, operator, operator_lamports).await?);
            }
            let sig = client.send(&ixs, &[&wallet]).await?;
            print_nodes(&client, global, vec![node], "updated", Some(sig), None).await
        }
        NodeCommand::Status { node, provider } => {
            // Each node's record comes from one history that holds its
            // assignments: the node's own, or its provider's for all of them.
            let (keys, history_of) = match (node, provider) {
                (Some(node), _) => {
                    let node = parse_pubkey(&node, "node")?;
                    (vec![node], node)
                }
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
                    let keys = client
                        .nodes_of(&provider)
                        .await?
                        .into_iter()
                        .map(|(k, _)| k)
                        .collect();
                    (keys, provider)
                }
            };
            let history = client.account_history(&history_of).await?;
            let now = client.chain_time().await?;
            print_nodes(
                &client,
                global,
                keys,
                "node",
                None,
                Some((history.as_slice(), now)),
            )
            .await
        }
    }
}

async fn print_nodes(
    client: &ChainClient,
    global: &GlobalArgs,
    keys: Vec<Pubkey>,
    action: &'static str,
    signature: Option<mcjs_client::Signature>,
    // A history holding the nodes' assignments and the chain's clock: show
    // each node's reliability record.
    reliability: Option<(&[HistoryEntry], i64)>,
) -> anyhow::Result<u8> {
    let mut nodes = Vec::new();
    for key in keys {
        let node = client
            .node(&key)
            .await
            .map_err(|e| anyhow!("{key}: {e}"))?
            .ok_or_else(|| anyhow!("no node at {key} on {}", client.url()))?;
        let mut view = NodeView::new(key, &node);
        view.reliability =
            reliability.map(|(history, now)| reliability::node_reliability(&key, history, now));
        nodes.push(view);
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
    operator: String,
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
    /// The program's own record on the Node account: assignments ended by
    /// the provider's fault, and the seconds it has held jobs (what the
    /// scheduler's reliability-aware placement reads).
    failures: u32,
    service_secs: u64,
    /// The hardware challenge (docs/hardware-challenge.md): whether a passed
    /// challenge proves this profile, the last verdict, and whether one is
    /// being answered now.
    hardware: HardwareProofView,
    /// From the chain's history (`mcjs_ledger::reliability`); shown by `node status`.
    #[serde(skip_serializing_if = "Option::is_none")]
    reliability: Option<Reliability>,
}

impl NodeView {
    fn new(key: Pubkey, node: &Node) -> Self {
        let hw = &node.hardware;
        Self {
            node: key.to_string(),
            provider: node.provider.to_string(),
            index: node.index,
            operator: node.operator.to_string(),
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
            failures: node.failures,
            service_secs: node.service_secs,
            hardware: HardwareProofView::new(&node.challenge),
            reliability: None,
        }
    }
}

#[derive(Serialize)]
struct HardwareProofView {
    proven: bool,
    /// Memory each GPU proved it held, KiB.
    #[serde(skip_serializing_if = "Option::is_none")]
    held_kib_per_gpu: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    proven_at: Option<i64>,
    /// The last verdict, for people; absent before the first one under
    /// this profile.
    #[serde(skip_serializing_if = "Option::is_none")]
    last: Option<String>,
    /// What NVIDIA's attestation proved of the GPUs at the passing challenge.
    #[serde(skip_serializing_if = "Option::is_none")]
    attestation: Option<AttestationView>,
    challenge_in_flight: bool,
    challenges_requested: u32,
    challenges_failed: u32,
}

#[derive(Serialize)]
struct AttestationView {
    chip: String,
    /// Each GPU's card, as its identity certificate names it; `null` where not attested.
    device_ids: Vec<Option<String>>,
    /// sha256 of the evidence the checker verified, hex.
    evidence: String,
    #[serde(skip)]
    summary: String,
}

impl AttestationView {
    fn new(attestation: &mcjs::state::GpuAttestation, gpu_count: u8) -> Self {
        Self {
            chip: mcjs_client::challenge::chip_name(attestation),
            device_ids: attestation
                .device_ids
                .iter()
                .take(usize::from(gpu_count))
                .map(|id| (*id != 0).then(|| format!("{id:016X}")))
                .collect(),
            evidence: hex::encode(attestation.evidence),
            summary: mcjs_client::challenge::attestation_summary(attestation, gpu_count),
        }
    }
}

impl HardwareProofView {
    fn new(c: &mcjs::state::ChallengeRecord) -> Self {
        Self {
            proven: c.proven.is_some(),
            held_kib_per_gpu: c.proven.map(|p| p.held_kib_per_gpu),
            proven_at: c.proven.map(|p| p.at),
            last: c.last.map(|l| format!("{l:?}")),
            attestation: c
                .proven
                .and_then(|p| p.attestation.map(|a| AttestationView::new(&a, p.gpu_count))),
            challenge_in_flight: c.in_flight.is_some(),
            challenges_requested: c.requested,
            challenges_failed: c.failed,
        }
    }
}

impl fmt::Display for HardwareProofView {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.held_kib_per_gpu, self.proven_at) {
            (Some(kib), Some(at)) => write!(
                f,
                "proven by a hardware challenge at {at} ({} MiB held per GPU)",
                kib / 1024
            )?,
            _ => write!(f, "not proven by a hardware challenge (the lowest class)")?,
        }
        if let Some(attestation) = &self.attestation {
            write!(f, "; {}", attestation.summary)?;
        }
        if let Some(last) = &self.last {
            write!(f, "; last verdict {last}")?;
        }
        if self.challenge_in_flight {
            write!(f, "; answering a challenge now")?;
        }
        write!(
            f,
            "; {} challenged, {} failed",
            self.challenges_requested, self.challenges_failed
        )
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
            writeln!(f, "  operator     {}", n.operator)?;
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
            write!(
                f,
                "\n  record       {} provider failures in {:.1} h holding jobs (on the account)",
                n.failures,
                n.service_secs as f64 / 3_600.0
            )?;
            write!(f, "\n  hardware     {}", n.hardware)?;
            if let Some(r) = &n.reliability {
                write!(f, "\n  reliability  from the chain's history")?;
                crate::cmd::audit::write_reliability(f, "    ", r)?;
            }
            if i + 1 < self.nodes.len() {
                writeln!(f)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcjs::state::{
        ChallengeRecord, ChallengeResult, GpuAttestation, MAX_ATTESTED_GPUS, ProvenHardware,
    };

    /// What `node show` says of a proof whose first GPU of two is attested.
    #[test]
    fn a_proof_with_an_attested_gpu_is_shown_with_its_card() {
        let mut device_ids = [0u64; MAX_ATTESTED_GPUS];
        device_ids[0] = 0x48B0_2D92_494B_ADF4;
        let record = ChallengeRecord {
            proven: Some(ProvenHardware {
                gpu_count: 2,
                vram_per_gpu_mib: 81_920,
                held_kib_per_gpu: 70_000_000,
                memory_shift: 0,
                commit_secs: 9,
                held_secs: 6,
                at: 1_800,
                attestation: Some(GpuAttestation {
                    chip: *b"GH100\0\0\0",
                    device_ids,
                    evidence: [0xab; 32],
                }),
            }),
            last: Some(ChallengeResult::Passed),
            requested: 1,
            ..Default::default()
        };
        let view = HardwareProofView::new(&record);
        let text = view.to_string();
        assert!(
            text.contains("1 of 2 GPUs attested by NVIDIA (GH100)"),
            "{text}"
        );
        let json = serde_json::to_value(&view).unwrap();
        assert_eq!(
            json["attestation"],
            serde_json::json!({
                "chip": "GH100",
                "device_ids": ["48B02D92494BADF4", null],
                "evidence": "ab".repeat(32),
            })
        );
        // Without attestation the field is absent.
        let mut plain = record;
        plain.proven.as_mut().unwrap().attestation = None;
        let json = serde_json::to_value(HardwareProofView::new(&plain)).unwrap();
        assert!(json.get("attestation").is_none(), "{json}");
        assert!(
            !HardwareProofView::new(&plain)
                .to_string()
                .contains("attested")
        );
    }
}
