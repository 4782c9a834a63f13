//! What the agent sends the chain for an assignment (start, attest,
//! complete), with the accounts each needs: those of the job as last read
//! ([`ChainJob::accounts_at`], the Segment holding a verified job's pay
//! included).

use super::JobRunner;
use crate::chain::{AgentChain, ChainFailure};
use crate::core::{OUTPUT_ATTESTED, Tx};
use mcjs_client::Pubkey;
use mcjs_client::ix;
use mcjs_client::program::errors::McjsError;
use mcjs_runtime::engine::ContainerEngine;
use std::time::{Duration, SystemTime};

/// How long an attestation waits for the job's printed lines to be stored.
const FLUSH_BEFORE_ATTEST: Duration = Duration::from_secs(3);

impl<C: AgentChain, E: ContainerEngine + 'static> JobRunner<C, E> {
    pub(super) async fn send(
        &self,
        job: Pubkey,
        generation: u32,
        tx: &Tx,
    ) -> Result<(), ChainFailure> {
        let s = &self.node;
        let authority = s.chain.authority();
        match tx {
            Tx::Start => {
                let me = &s.me;
                let ix = ix::start_job(&authority, &job, &me.node, &me.provider, generation);
                s.chain.send(ix).await
            }
            Tx::Attest { epoch, step, hash } => {
                self.flush_logs(job, generation).await;
                let Some(known) = self.known(job) else {
                    return Err(unread(job, tx));
                };
                let on = known.accounts_at(generation);
                let hash = crate::inject::attested_hash(*step, hash.0);
                let settle = known.attestation_may_exhaust_bond(SystemTime::now());
                let sent = s
                    .chain
                    .send(on.attest(&authority, settle, *epoch, *step, hash))
                    .await;
                // The job as last read may be behind the chain: an
                // attestation that does exhaust the bond is refused without
                // the settlement accounts, and sent once more with them.
                match sent {
                    Err(f) if !settle && f.refused_with(McjsError::SettlementAccountsRequired) => {
                        s.chain
                            .send(on.attest(&authority, true, *epoch, *step, hash))
                            .await
                    }
                    sent => sent,
                }
            }
            Tx::Complete { output_hash } => {
                let Some(known) = self.known(job) else {
                    return Err(unread(job, tx));
                };
                let on = known.accounts_at(generation);
                s.chain.send(on.complete(&authority, output_hash.0)).await?;
                // A verified job's first completion attests its output
                // (`Job::attest_output`); the job completes with a later
                // one, once the draw has had its time and any check of the
                // output is done. Until then the completion is sent again,
                // refused as too soon or waiting on a check.
                if known.completion_attests_output {
                    Err(ChainFailure {
                        message: "the output is attested; the job completes once the draw has had its time and any check of it is done".into(),
                        program_error: Some(OUTPUT_ATTESTED.into()),
                        retryable: false,
                    })
                } else {
                    Ok(())
                }
            }
        }
    }

    /// Stores what the job has printed so far before its checkpoint goes
    /// on chain: a node lost after the attestation loses none of the lines
    /// before the checkpoint the job resumes from. Waited for at most
    /// [`FLUSH_BEFORE_ATTEST`]: a slow store delays no attestation longer.
    async fn flush_logs(&self, job: Pubkey, generation: u32) {
        let flusher = self
            .jobs
            .log_flushers
            .lock()
            .expect("flushers lock")
            .get(&(job, generation))
            .cloned();
        if let Some(flusher) = flusher
            && !matches!(
                tokio::time::timeout(FLUSH_BEFORE_ATTEST, flusher.flush()).await,
                Ok(true)
            )
        {
            tracing::debug!(%job, generation, "the job's lines were not all stored before the attestation");
        }
    }
}

/// Why a transaction of a job this agent holds no reading of is not sent: an
/// attestation waits for the first read (the chain unreachable since the
/// agent adopted the job's container); a completion is not sent at all.
fn unread(job: Pubkey, tx: &Tx) -> ChainFailure {
    let attest = matches!(tx, Tx::Attest { .. });
    ChainFailure {
        message: if attest {
            format!("job {job} has not been read from the chain yet")
        } else {
            format!("job {job} left this node")
        },
        program_error: None,
        retryable: attest,
    }
}
