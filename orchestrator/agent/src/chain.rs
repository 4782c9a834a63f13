//! What the agent needs from the chain, behind one trait: the shell is
//! written against it, and [`crate::rpc`] implements it on the MCJS chain
//! client.

use crate::core::{Attested, ChainJob, ChainState, Keep};
use anchor_lang::solana_program::instruction::Instruction;
use mcjs_client::Pubkey;
use mcjs_client::ix::Deployment;
use mcjs_client::program::state::{Job, JobState, Node, Provider};
use mcjs_runtime::checkpoint::Sha256Digest;
use std::future::Future;
use std::time::Duration;

/// A chain call that failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ChainFailure {
    pub message: String,
    /// The program's error name when the program refused (`StaleGeneration`).
    pub program_error: Option<String>,
    /// Transient: the node could not be reached or did not confirm in time.
    pub retryable: bool,
}

/// A verification this node must answer now, with its job.
pub use mcjs_client::rpc::DueCheck as Check;

pub trait AgentChain: Send + Sync + 'static {
    /// The key the agent signs with: its node's operator key.
    fn authority(&self) -> Pubkey;

    /// Jobs whose `node` is `node` (assigned or running).
    fn jobs_on_node(
        &self,
        node: Pubkey,
    ) -> impl Future<Output = Result<Vec<(Pubkey, Job)>, ChainFailure>> + Send;

    /// The job's attested checkpoints, newest first (from its event history).
    fn attested(
        &self,
        job: Pubkey,
    ) -> impl Future<Output = Result<Vec<Attested>, ChainFailure>> + Send;

    fn node(&self, node: Pubkey)
    -> impl Future<Output = Result<Option<Node>, ChainFailure>> + Send;

    fn provider(
        &self,
        provider: Pubkey,
    ) -> impl Future<Output = Result<Option<Provider>, ChainFailure>> + Send;

    fn deployment(&self) -> impl Future<Output = Result<Deployment, ChainFailure>> + Send;

    /// Signs `message` with the authority's key (ed25519): the agent's
    /// requests to the scheduler carry this signature.
    fn sign(&self, message: &[u8]) -> [u8; 64];

    /// Signs with the authority, sends and waits for confirmation.
    fn send(&self, ix: Instruction) -> impl Future<Output = Result<(), ChainFailure>> + Send;

    /// A transaction is coming: prepares what sending needs (a blockhash)
    /// in the background. By default nothing.
    fn warm(&self) {}

    /// The SlotHashes sysvar's raw data: where the hardware challenge's seeds are drawn
    /// from. By default unavailable (the node then answers no challenge).
    fn slot_hashes(&self) -> impl Future<Output = Result<Vec<u8>, ChainFailure>> + Send {
        async {
            Err(ChainFailure {
                message: "this chain does not expose the SlotHashes sysvar".into(),
                program_error: None,
                retryable: false,
            })
        }
    }

    /// The verifications `node` must answer now: named verifier of an open
    /// one, or referee of a disputed one. By default none.
    fn checks(
        &self,
        _node: Pubkey,
    ) -> impl Future<Output = Result<Vec<Check>, ChainFailure>> + Send {
        async { Ok(Vec::new()) }
    }

    /// Of the verifications at `keys` (what the scheduler says `node`
    /// owes), those the chain confirms `node` must answer now. By default
    /// [`Self::checks`], kept to `keys`.
    fn checks_named(
        &self,
        node: Pubkey,
        keys: Vec<Pubkey>,
    ) -> impl Future<Output = Result<Vec<Check>, ChainFailure>> + Send {
        async move {
            let all = self.checks(node).await?;
            Ok(all.into_iter().filter(|c| keys.contains(&c.key)).collect())
        }
    }

    /// An item after every (re)subscription to the account at `key` and
    /// every change of it (an assignment sets the node's current job, an
    /// attestation changes the job), so that the agent reads the chain when
    /// it changed rather than on every tick. `None` where the chain cannot
    /// tell: the agent then reads it every tick.
    fn changes(&self, _key: Pubkey) -> Option<futures_util::stream::BoxStream<'static, ()>> {
        None
    }
}

/// The core's view of a job the chain says is on this node, or `None` when it
/// is in no state that runs here.
pub fn chain_job(key: Pubkey, job: &Job, node: &Pubkey) -> Option<ChainJob> {
    if job.node.as_ref() != Some(node) {
        return None;
    }
    let state = match job.state {
        JobState::Assigned { .. } => ChainState::Assigned,
        JobState::Running { .. } => ChainState::Running,
        _ => return None,
    };
    Some(ChainJob {
        key,
        generation: job.generation,
        state,
        spec_hash: job.spec_hash,
        last_checkpoint: job.last_checkpoint.map(|c| Attested {
            epoch: c.epoch,
            step: c.step,
            hash: Sha256Digest(c.hash),
            generation: c.generation,
        }),
        checkpoint_interval: Duration::from_secs(u64::from(job.terms.checkpoint_interval_secs)),
        verified: job.verification_ppm > 0,
        at_cap: job.at_cap(),
        // The chain as last read is older than any attestation it is used
        // for, which only makes this more careful.
        keep: if job.verification_ppm == 0 {
            Keep::Attested
        } else if job.open_verifications > 0 {
            Keep::Everything
        } else {
            Keep::FromPrevious {
                previous: job.prev_checkpoint.map(|c| c.step),
                floor: job.restore_floor.map(|c| Sha256Digest(c.hash)),
            }
        },
    })
}
