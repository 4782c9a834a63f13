//! What the agent needs from the chain, behind one trait: the shell is
//! written against it, and [`crate::rpc`] implements it on the MCJS chain
//! client.

use crate::core::{AttestedCheckpoint, ChainJob, ChainState, Keep};
use anchor_lang::solana_program::instruction::Instruction;
use mcjs_client::Pubkey;
use mcjs_client::errors::{code_of, describe};
use mcjs_client::ix::{Deployment, JobAccounts, segment_of};
use mcjs_client::program::errors::McjsError;
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

impl ChainFailure {
    /// Whether the MCJS program refused the transaction with `error`.
    pub fn refused_with(&self, error: McjsError) -> bool {
        let name = describe(code_of(error)).map(|(name, _)| name);
        self.program_error.is_some() && self.program_error == name
    }
}

/// This node as the chain knows it, read once when the agent starts: what
/// every instruction of its assignments names besides the job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeIdentity {
    /// The Node account.
    pub node: Pubkey,
    /// The node's Provider account.
    pub provider: Pubkey,
    /// The provider's payout token account.
    pub payout: Pubkey,
    pub deployment: Deployment,
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

    /// The jobs on node `me` in a state that runs there, as the agent sees
    /// them ([`chain_job`]).
    fn chain_jobs(
        &self,
        me: &NodeIdentity,
    ) -> impl Future<Output = Result<Vec<ChainJob>, ChainFailure>> + Send {
        async move {
            let jobs = self.jobs_on_node(me.node).await?;
            Ok(jobs
                .iter()
                .filter_map(|(key, job)| chain_job(*key, job, me))
                .collect())
        }
    }

    /// The job's attested checkpoints, newest first (from its event history).
    fn attested(
        &self,
        job: Pubkey,
    ) -> impl Future<Output = Result<Vec<AttestedCheckpoint>, ChainFailure>> + Send;

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

/// The agent's view of a job the chain says is on node `me`, or `None` when
/// it is in no state that runs there.
pub fn chain_job(key: Pubkey, job: &Job, me: &NodeIdentity) -> Option<ChainJob> {
    if job.node != Some(me.node) {
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
        last_checkpoint: job.last_checkpoint.map(|c| AttestedCheckpoint {
            epoch: c.epoch,
            step: c.step,
            hash: Sha256Digest(c.hash),
            generation: c.generation,
        }),
        checkpoint_interval: checkpoint_interval(job),
        gpus: u32::from(job.requirements.gpu_count),
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
        accounts: JobAccounts {
            job: key,
            node: me.node,
            provider: me.provider,
            payout: me.payout,
            refund: job.refund_account,
            generation: job.generation,
            segment: segment_of(&key, job),
            deployment: me.deployment,
        },
        bond_exhaustible_from: bond_exhaustible_from(job),
        completion_attests_output: job.holds_payment && job.output_hash.is_none(),
    })
}

/// What a check runs of the job it checks, read from the job's account as
/// a paid run's is ([`chain_job`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckedJob {
    pub spec_hash: [u8; 32],
    /// The GPUs the job asks for, which the check holds.
    pub gpus: u32,
    /// The interval the job's terms ask for.
    pub checkpoint_interval: Duration,
}

impl CheckedJob {
    pub fn of(check: &Check) -> Self {
        Self {
            spec_hash: check.job.spec_hash,
            gpus: u32::from(check.job.requirements.gpu_count),
            checkpoint_interval: checkpoint_interval(&check.job),
        }
    }
}

/// The checkpoint interval `job`'s terms ask for.
fn checkpoint_interval(job: &Job) -> Duration {
    Duration::from_secs(u64::from(job.terms.checkpoint_interval_secs))
}

/// The earliest chain time (Unix seconds) at which an attestation may
/// exhaust `job`'s bond ([`Job::attestation_may_exhaust_bond`], with the
/// Config's liveness factor unread: `u8::MAX`); `None` when none may. The
/// program's answer only turns from no to yes as time passes, so the turn
/// is found by bisection.
fn bond_exhaustible_from(job: &Job) -> Option<i64> {
    let may = |at: i64| job.attestation_may_exhaust_bond(at, u8::MAX);
    let (mut before, mut from) = (i64::MIN, i64::MAX);
    if !may(from) {
        return None;
    }
    if may(before) {
        return Some(before);
    }
    while before + 1 < from {
        let mid = ((i128::from(before) + i128::from(from)) / 2) as i64;
        if may(mid) {
            from = mid;
        } else {
            before = mid;
        }
    }
    Some(from)
}
