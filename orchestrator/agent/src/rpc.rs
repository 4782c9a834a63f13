//! [`AgentChain`] on the MCJS chain client, signing with the node's operator key
//! (never the provider's wallet).

use crate::chain::{AgentChain, ChainFailure, Check};
use crate::core::AttestedCheckpoint;
use anchor_lang::solana_program::instruction::Instruction;
use mcjs_client::history::McjsEvent;
use mcjs_client::ix::Deployment;
use mcjs_client::program::state::{Job, Node, Provider};
use mcjs_client::{ChainClient, ChainError, Keypair, Pubkey, Signer};
use mcjs_runtime::checkpoint::Sha256Digest;
use std::sync::Arc;

pub struct RpcChain {
    pub client: ChainClient,
    pub wallet: Arc<Keypair>,
    /// The job the node held at the last read, or that its last pushed
    /// change named: read with the node in one call.
    held: Arc<std::sync::Mutex<Option<Pubkey>>>,
}

impl RpcChain {
    pub fn new(client: ChainClient, wallet: Keypair) -> Self {
        Self {
            client,
            wallet: Arc::new(wallet),
            held: Arc::default(),
        }
    }
}

/// The error policy's view of a chain error: what is worth retrying.
pub fn failure(e: ChainError) -> ChainFailure {
    // An attestation whose blockhash expired under congestion is sent again
    // (after the core's backoff), never dropped: dropping it would leave the
    // job without a checkpoint on chain until the next interval, exactly when
    // the overdue rule reports it.
    let retryable = e.may_land_if_sent_again();
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

    /// `accountSubscribe` on the account, made again whenever it drops
    /// ([`ChainClient::follow_account`]): never polled.
    /// A change of the node names the job it now holds: that becomes the
    /// hint, so the read that follows a new assignment fetches the node and
    /// its job in one call instead of two.
    fn changes(&self, key: Pubkey) -> Option<futures_util::stream::BoxStream<'static, ()>> {
        use futures_util::StreamExt;
        let held = Arc::clone(&self.held);
        Some(Box::pin(self.client.follow_account(key).map(
            move |update| {
                if let Ok(Some(account)) = update
                    && account.owner == mcjs_client::PROGRAM_ID
                    && let Ok(node) = mcjs_client::decode::node(&account.data)
                {
                    *held.lock().expect("held lock") = node.current_job;
                }
            },
        )))
    }

    fn sign(&self, message: &[u8]) -> [u8; 64] {
        self.wallet.sign_message(message).into()
    }

    /// The job the node's account names, read by address (no scan of the
    /// program): the program keeps `Node::current_job` naming the job
    /// assigned to or running on the node, and clears it when the job
    /// leaves.
    async fn jobs_on_node(&self, node: Pubkey) -> Result<Vec<(Pubkey, Job)>, ChainFailure> {
        let hint = *self.held.lock().expect("held lock");
        let read = self.client.node_job(&node, hint).await.map_err(failure)?;
        let job = read.and_then(|(_, job)| job);
        *self.held.lock().expect("held lock") = job.as_ref().map(|(key, _)| *key);
        Ok(job.into_iter().collect())
    }

    async fn attested(&self, job: Pubkey) -> Result<Vec<AttestedCheckpoint>, ChainFailure> {
        let history = self.client.job_history(&job).await.map_err(failure)?;
        let mut out: Vec<AttestedCheckpoint> = history
            .into_iter()
            .filter_map(|e| match e.event {
                McjsEvent::CheckpointAttested(a) => Some(AttestedCheckpoint {
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

    async fn checks_named(
        &self,
        node: Pubkey,
        keys: Vec<Pubkey>,
    ) -> Result<Vec<Check>, ChainFailure> {
        self.client
            .checks_named(&node, &keys)
            .await
            .map_err(failure)
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

    fn warm(&self) {
        self.client.warm();
    }

    async fn slot_hashes(&self) -> Result<Vec<u8>, ChainFailure> {
        self.client.slot_hashes().await.map_err(failure)
    }

    async fn send(&self, ix: Instruction) -> Result<(), ChainFailure> {
        self.client
            .send(&[ix], &[self.wallet.as_ref()])
            .await
            .map(|_| ())
            .map_err(failure)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What was lost on the way is sent again; what a program refused waits
    /// for the chain to say what changed.
    #[test]
    fn a_transaction_lost_to_congestion_is_sent_again_and_a_refused_one_is_not() {
        let lost = [
            ChainError::Expired { attempts: 3 },
            ChainError::Timeout {
                signature: Default::default(),
                secs: 90,
            },
            ChainError::Unreachable {
                url: "http://rpc".into(),
                message: "connection refused".into(),
            },
            ChainError::Rpc("429 Too Many Requests".into()),
        ];
        for e in lost {
            let shown = e.to_string();
            assert!(failure(e).retryable, "{shown}");
        }
        let refused = [
            ChainError::Program {
                program: "mcjs".into(),
                name: "JobNotRunning".into(),
                message: "".into(),
                code: 6000,
                logs: vec![],
            },
            ChainError::Transaction {
                message: "AccountInUse".into(),
                logs: vec![],
            },
            ChainError::Signing("no fee payer given".into()),
        ];
        for e in refused {
            let shown = e.to_string();
            assert!(!failure(e).retryable, "{shown}");
        }
    }
}
