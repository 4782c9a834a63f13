//! What a reconcile round reads of the chain and the one thing it writes: a
//! transaction signed by the scheduler. The daemon runs over
//! [`LiveChain`] (an RPC endpoint); its tests run rounds over an in-memory
//! chain that can refuse what a real one would.

use std::collections::HashMap;
use std::future::Future;

use mcjs::state::{ConfigParams, Job, Node, Provider, Segment, Verification};
use mcjs_client::rpc::{JobFilter, ProgramIndex};
use mcjs_client::{ChainClient, ChainError, Instruction, Keypair, Pubkey, Signer, ix};

/// The accounts one round plans from, read in one go at its start.
#[derive(Clone, Debug)]
pub struct Snapshot {
    /// The jobs of the round's working set ([`in_working_set`]), in
    /// submission order.
    pub jobs: Vec<(Pubkey, Job)>,
    pub nodes: Vec<(Pubkey, Node)>,
    pub params: ConfigParams,
    pub providers: HashMap<Pubkey, Provider>,
}

/// What the verification duties read, only when some job is verified.
#[derive(Clone, Debug, Default)]
pub struct VerifySnapshot {
    pub verifications: Vec<(Pubkey, Verification)>,
    pub segments: Vec<(Pubkey, Segment)>,
    /// The SlotHashes sysvar's raw data.
    pub slot_hashes: Vec<u8>,
    /// The chain's clock (unix seconds).
    pub now: i64,
    /// The checker pools asked for that exist.
    pub pools: Vec<(Pubkey, mcjs::state::CheckerPool)>,
}

/// Whether a round has anything to decide about `job`: it can still be
/// placed, run or fail, or its pay is still held (a live segment or an open
/// verification: the verification duties draw, resolve and release it).
/// A settled job ([`mcjs_client::rpc::settled`]) is history: no round
/// reads it, so the round's cost follows what is live, not what ever ran.
pub fn in_working_set(job: &Job) -> bool {
    !mcjs_client::rpc::settled(job)
}

/// The scheduler's view of the chain.
pub trait DaemonChain: Send + Sync + 'static {
    /// The scheduler authority: signer and fee payer of what [`send`](Self::send) sends.
    fn scheduler(&self) -> Pubkey;

    fn deployment(&self) -> impl Future<Output = Result<ix::Deployment, ChainError>> + Send;

    /// A transaction is coming: prepares what sending needs (a blockhash)
    /// in the background. By default nothing.
    fn warm(&self) {}

    /// The working set's jobs ([`in_working_set`]), every node and
    /// provider, and the parameters.
    fn snapshot(&self) -> impl Future<Output = Result<Snapshot, ChainError>> + Send;

    /// The jobs at `keys`, as they are now (closed ones left out): what a
    /// round reads of the jobs that left its working set since the last.
    fn jobs_at(
        &self,
        keys: &[Pubkey],
    ) -> impl Future<Output = Result<Vec<(Pubkey, Job)>, ChainError>> + Send;

    /// What the verification duties read, with the checker `pools` at
    /// those addresses.
    fn verify_snapshot(
        &self,
        pools: &[Pubkey],
    ) -> impl Future<Output = Result<VerifySnapshot, ChainError>> + Send;

    /// The SlotHashes sysvar's raw data and the chain's clock (unix seconds): what the
    /// hardware challenge duties read. By default from [`verify_snapshot`](Self::verify_snapshot).
    fn sysvars(&self) -> impl Future<Output = Result<(Vec<u8>, i64), ChainError>> + Send {
        async move {
            let v = self.verify_snapshot(&[]).await?;
            Ok((v.slot_hashes, v.now))
        }
    }

    /// Signs `instructions` as one transaction, sends it and waits for
    /// confirmation: all of it lands or none of it does.
    fn send(
        &self,
        instructions: &[Instruction],
    ) -> impl Future<Output = Result<(), ChainError>> + Send;
}

/// The chain behind an RPC endpoint, written with the scheduler's key.
///
/// With an `index` (the program's accounts followed over the endpoint's
/// websocket, [`ProgramIndex`]), a round reads its snapshot from memory
/// while the index is live, and the chain only for the sysvars a
/// verification draw needs; while it is not (no websocket, or resyncing
/// after a drop), the round scans the program as it would without one.
pub struct LiveChain {
    pub client: ChainClient,
    pub scheduler: Keypair,
    pub index: Option<ProgramIndex>,
}

impl DaemonChain for LiveChain {
    fn scheduler(&self) -> Pubkey {
        self.scheduler.pubkey()
    }

    async fn deployment(&self) -> Result<ix::Deployment, ChainError> {
        self.client.deployment().await
    }

    fn warm(&self) {
        self.client.warm();
    }

    async fn snapshot(&self) -> Result<Snapshot, ChainError> {
        let indexed = self.index.as_ref().and_then(|index| {
            index.live(|s| {
                Some(Snapshot {
                    jobs: s.unsettled_jobs(),
                    nodes: s.nodes(),
                    params: s.config()?.params,
                    providers: s.providers().into_iter().collect(),
                })
            })
        });
        if let Some(Some(snapshot)) = indexed {
            return Ok(snapshot);
        }
        let mut jobs = self.client.jobs(JobFilter::All).await?;
        jobs.retain(|(_, job)| in_working_set(job));
        Ok(Snapshot {
            jobs,
            nodes: self.client.nodes().await?,
            params: self.client.config().await?.1.params,
            providers: self.client.providers().await?.into_iter().collect(),
        })
    }

    async fn jobs_at(&self, keys: &[Pubkey]) -> Result<Vec<(Pubkey, Job)>, ChainError> {
        if let Some(jobs) = self
            .index
            .as_ref()
            .and_then(|index| index.live(|s| s.jobs_at(keys)))
        {
            return Ok(jobs);
        }
        self.client.jobs_at(keys).await
    }

    async fn verify_snapshot(&self, pools: &[Pubkey]) -> Result<VerifySnapshot, ChainError> {
        let indexed = self
            .index
            .as_ref()
            .and_then(|index| index.live(|s| (s.verifications(), s.segments())));
        let (verifications, segments) = match indexed {
            Some(read) => read,
            None => (
                self.client.verifications(None).await?,
                self.client.segments().await?,
            ),
        };
        // The sysvars and the pools in one call.
        let (slot_hashes, now, pools) = self.client.draw_reads(pools).await?;
        Ok(VerifySnapshot {
            verifications,
            segments,
            slot_hashes,
            now,
            pools,
        })
    }

    async fn sysvars(&self) -> Result<(Vec<u8>, i64), ChainError> {
        self.client.draw_sysvars().await
    }

    async fn send(&self, instructions: &[Instruction]) -> Result<(), ChainError> {
        let Some(index) = &self.index else {
            return self
                .client
                .send(instructions, &[&self.scheduler])
                .await
                .map(|_| ());
        };
        let written: Vec<Pubkey> = instructions
            .iter()
            .filter(|i| i.program_id == mcjs_client::PROGRAM_ID)
            .flat_map(|i| {
                i.accounts
                    .iter()
                    .filter(|m| m.is_writable)
                    .map(|m| m.pubkey)
            })
            .collect();
        self.client.send(instructions, &[&self.scheduler]).await?;
        // Read back what it wrote, so that the next round decides on the
        // state after it (and sees what it closed: no stream says so).
        if let Err(error) = index.refresh(&self.client, &written).await {
            tracing::debug!(%error, "could not read back a landed transaction's accounts");
        }
        Ok(())
    }
}
