//! The agent's identity on chain: it runs with its node's operator key (a
//! key that can run jobs but never move the provider's money), refuses any
//! other key, and keeps the node's measured profile current.

use crate::chain::{AgentChain, ChainFailure};
use mcjs_client::program::instructions::UpdateNodeArgs;
use mcjs_client::program::state::{HardwareProfile, Node, NodeStatus};
use mcjs_client::{Pubkey, ix, pda};
use mcjs_hal::NodeProfile;
use serde::Serialize;
use std::fmt;

#[derive(Debug, thiserror::Error)]
pub enum RegisterError {
    #[error(
        "node {node} is not registered: the provider registers it with its wallet (`mcjs node register --operator {operator}`), then the agent runs with that operator key"
    )]
    NoNode { node: Pubkey, operator: Pubkey },
    #[error(
        "this key ({key}) is not the operator key of node {node} (that is {operator}): run the agent with the node's operator key (`--node-key`), or rotate it with `mcjs node update --operator {key}` from the provider's wallet"
    )]
    NotOperator {
        node: Pubkey,
        key: Pubkey,
        operator: Pubkey,
    },
    #[error(
        "this key ({key}) owns provider account {provider} and can withdraw its stake: keep it off the node; make an operator key with `mcjs node keygen`, set it with `mcjs node update --operator`, and run the agent with `--node-key`"
    )]
    WalletKey { key: Pubkey, provider: Pubkey },
    #[error(
        "the node profile has no GPU to report (the HAL found none); run the agent on a GPU host or give --profile a profile with GPUs"
    )]
    NoGpu,
    #[error(transparent)]
    Chain(#[from] ChainFailure),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Registered {
    pub node: String,
    pub provider: String,
    pub operator: String,
    pub index: u32,
    pub gpu_model: String,
    pub gpu_count: u8,
    pub readiness: u8,
    pub price_per_gpu_hour: u64,
}

impl fmt::Display for Registered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "node {} (index {} of provider {}) run by operator key {}: {}x {} readiness {} at {} base units per GPU-hour",
            self.node,
            self.index,
            self.provider,
            self.operator,
            self.gpu_count,
            self.gpu_model,
            self.readiness,
            self.price_per_gpu_hour
        )
    }
}

/// The hardware profile the program stores, from the HAL's summary.
pub fn hardware(profile: &NodeProfile) -> HardwareProfile {
    let s = profile.chain_summary();
    HardwareProfile {
        gpu_model: s.gpu_model,
        gpu_count: s.gpu_count,
        vram_per_gpu_mib: s.vram_per_gpu_mib,
        compute_capability: s.compute_capability,
        cpu_cores: s.cpu_cores,
        ram_mib: s.ram_mib,
        disk_gib: s.disk_gib,
        checkpoint_write_mibps: s.checkpoint_write_mibps,
    }
}

/// Checks that the chain's signing key is `node`'s operator key and not a
/// provider's wallet, then reports the node's fresh profile and readiness
/// (with the operator key: it may do that, not change the price) and brings
/// the node back if a failure report had taken it offline.
pub async fn adopt_node<C: AgentChain>(
    chain: &C,
    node: Pubkey,
    profile: &NodeProfile,
) -> Result<Registered, RegisterError> {
    let key = chain.authority();
    let wallet_provider = pda::provider(&key);
    if chain.provider(wallet_provider).await?.is_some() {
        return Err(RegisterError::WalletKey {
            key,
            provider: wallet_provider,
        });
    }
    let existing = chain.node(node).await?.ok_or(RegisterError::NoNode {
        node,
        operator: key,
    })?;
    if existing.operator != key {
        return Err(RegisterError::NotOperator {
            node,
            key,
            operator: existing.operator,
        });
    }
    let hw = hardware(profile);
    if hw.gpu_count == 0 || hw.gpu_model.is_empty() {
        return Err(RegisterError::NoGpu);
    }
    let readiness = mcjs_hal::readiness(profile).score;
    chain
        .send(ix::update_node(
            &key,
            &existing.provider,
            existing.index,
            UpdateNodeArgs {
                hardware: Some(hw.clone()),
                readiness: Some(readiness),
                ..UpdateNodeArgs::default()
            },
        ))
        .await?;
    // A node taken offline by a reported failure comes back when its agent
    // starts again; a busy node keeps its job.
    bring_back(chain, &existing).await?;
    Ok(Registered {
        node: node.to_string(),
        provider: existing.provider.to_string(),
        operator: key.to_string(),
        index: existing.index,
        gpu_model: hw.gpu_model,
        gpu_count: hw.gpu_count,
        readiness,
        price_per_gpu_hour: existing.price_per_gpu_hour,
    })
}

/// Puts the node back in service when a reported failure took it offline
/// and it holds no job: its agent is evidently running again (a restart, or
/// a partition that healed). Returns whether it did.
pub async fn bring_back<C: AgentChain>(chain: &C, node: &Node) -> Result<bool, ChainFailure> {
    if node.status != NodeStatus::Offline || node.current_job.is_some() {
        return Ok(false);
    }
    chain
        .send(ix::set_node_status(
            &chain.authority(),
            &node.provider,
            node.index,
            NodeStatus::Available,
        ))
        .await?;
    Ok(true)
}
