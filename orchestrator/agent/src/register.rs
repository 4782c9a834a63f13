//! Putting the node on chain: `register_node` the first time, `update_node`
//! after (a fresh probe, a new price).

use crate::chain::{AgentChain, ChainFailure};
use mcjs_client::program::instructions::{RegisterNodeArgs, UpdateNodeArgs};
use mcjs_client::program::state::{HardwareProfile, NodeStatus};
use mcjs_client::{Pubkey, ix, pda};
use mcjs_hal::NodeProfile;
use serde::Serialize;
use std::fmt;

#[derive(Debug, thiserror::Error)]
pub enum RegisterError {
    #[error(
        "provider account {provider} of wallet {authority} does not exist: register the provider first (`mcjs provider register --stake <USDC>` signed by this wallet), then start the agent"
    )]
    NoProvider { provider: Pubkey, authority: Pubkey },
    #[error(
        "the node profile has no GPU to register (the HAL found none); run the agent on a GPU host or give --profile a profile with GPUs"
    )]
    NoGpu,
    #[error("the price per GPU-hour must be above zero")]
    NoPrice,
    #[error(transparent)]
    Chain(#[from] ChainFailure),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Registered {
    pub node: String,
    pub index: u32,
    /// True when this call created the node, false when it updated it.
    pub created: bool,
    pub gpu_model: String,
    pub gpu_count: u8,
    pub readiness: u8,
    pub price_per_gpu_hour: u64,
}

impl fmt::Display for Registered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "node {} (index {}) {}: {}x {} readiness {} at {} base units per GPU-hour",
            self.node,
            self.index,
            if self.created {
                "registered"
            } else {
                "updated"
            },
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

/// Registers node `index` of the chain's authority, or updates it if it exists.
pub async fn register_node<C: AgentChain>(
    chain: &C,
    profile: &NodeProfile,
    index: u32,
    price_per_gpu_hour: u64,
) -> Result<Registered, RegisterError> {
    let authority = chain.authority();
    let provider = pda::provider(&authority);
    if chain.provider(provider).await?.is_none() {
        return Err(RegisterError::NoProvider {
            provider,
            authority,
        });
    }
    let hw = hardware(profile);
    if hw.gpu_count == 0 || hw.gpu_model.is_empty() {
        return Err(RegisterError::NoGpu);
    }
    if price_per_gpu_hour == 0 {
        return Err(RegisterError::NoPrice);
    }
    let readiness = mcjs_hal::readiness(profile).score;
    let node = pda::node(&provider, index);
    let created = chain.node(node).await?.is_none();
    let instruction = if created {
        ix::register_node(
            &authority,
            RegisterNodeArgs {
                index,
                hardware: hw.clone(),
                readiness,
                price_per_gpu_hour,
            },
        )
    } else {
        ix::update_node(
            &authority,
            index,
            UpdateNodeArgs {
                hardware: Some(hw.clone()),
                readiness: Some(readiness),
                price_per_gpu_hour: Some(price_per_gpu_hour),
            },
        )
    };
    chain.send(instruction).await?;
    // A node taken offline by a reported failure comes back when its agent
    // starts again; a busy node keeps its job.
    if let Some(existing) = chain.node(node).await?
        && existing.status == NodeStatus::Offline
        && existing.current_job.is_none()
    {
        chain
            .send(ix::set_node_status(
                &authority,
                index,
                NodeStatus::Available,
            ))
            .await?;
    }
    Ok(Registered {
        node: node.to_string(),
        index,
        created,
        gpu_model: hw.gpu_model,
        gpu_count: hw.gpu_count,
        readiness,
        price_per_gpu_hour,
    })
}
