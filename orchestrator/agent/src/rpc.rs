//! [`AgentChain`] on the MCJS chain client, signing with the provider's wallet.

use crate::chain::{AgentChain, ChainFailure, Check};
use crate::core::Attested;
use anchor_lang::solana_program::instruction::Instruction;
use mcjs_client::history::McjsEvent;
use mcjs_client::ix::Deployment;
use mcjs_client::program::state::{Job, Node, Provider};
use mcjs_client::{ChainClient, ChainError, JobFilter, Keypair, Pubkey, Signer};
use mcjs_runtime::checkpoint::Sha256Digest;
use std::sync::Arc;

pub struct RpcChain {
    pub client: ChainClient,
    pub wallet: Arc<Keypair>,
}

impl RpcChain {
    pub fn new(client: ChainClient, wallet: Keypair) -> Self {
        Self {
            client,
            wallet: Arc::new(wallet),
        }
    }
}

/// The error policy's view of a chain error: what is worth retrying.
pub fn failure(e: ChainError) -> ChainFailure {
    let retryable = matches!(
        e,
        ChainError::Unreachable { .. } | ChainError::Timeout { .. } | ChainError::Rpc(_)
    );
    ChainFailure {
        program_error: e.program_error_name().map(str::to_string),
        message: e.to_string(),
        retryable,
    }
}

impl AgentChain for RpcChain {
    fn authority(&self) -> Pubkey {
        self.wallet.pubkey()
    }

    /// `accountSubscribe` on the node's account (polling without a websocket).
    fn node_changes(&self, node: Pubkey) -> futures_util::stream::BoxStream<'static, ()> {
        use futures_util::StreamExt;
        Box::pin(self.client.watch_account(node).map(|_| ()))
    }

    fn sign(&self, message: &[u8]) -> [u8; 64] {
        self.wallet.sign_message(message).into()
    }

    async fn jobs_on_node(&self, node: Pubkey) -> Result<Vec<(Pubkey, Job)>, ChainFailure> {
        self.client
            .jobs(JobFilter::Node(node))
            .await
            .map_err(failure)
    }

    async fn attested(&self, job: Pubkey) -> Result<Vec<Attested>, ChainFailure> {
        let history = self.client.job_history(&job).await.map_err(failure)?;
        let mut out: Vec<Attested> = history
            .into_iter()
            .filter_map(|e| match e.event {
                McjsEvent::CheckpointAttested(a) => Some(Attested {
                    epoch: a.epoch,
                    step: a.step,
                    hash: Sha256Digest(a.checkpoint_hash),
                    generation: a.generation,
                }),
                _ => None,
            })
            .collect();
        out.sort_by(|a, b| (b.epoch, b.step).cmp(&(a.epoch, a.step)));
        Ok(out)
    }

    async fn checks(&self, node: Pubkey) -> Result<Vec<Check>, ChainFailure> {
        self.client.due_checks(&node).await.map_err(failure)
    }

    async fn node(&self, node: Pubkey) -> Result<Option<Node>, ChainFailure> {
        self.client.node(&node).await.map_err(failure)
    }

    async fn provider(&self, provider: Pubkey) -> Result<Option<Provider>, ChainFailure> {
        self.client.provider(&provider).await.map_err(failure)
    }

    async fn deployment(&self) -> Result<Deployment, ChainFailure> {
        self.client.deployment().await.map_err(failure)
    }

    async fn send(&self, ix: Instruction) -> Result<(), ChainFailure> {
        self.client
            .send(&[ix], &[self.wallet.as_ref()])
            .await
            .map(|_| ())
            .map_err(failure)
    }
}
