//! What the agent sends the chain for an assignment (start, attest,
//! complete), with the accounts each needs ([`JobAccounts`]: the Segment
//! holding a verified job's pay included).

use super::Agent;
use crate::chain::{AgentChain, ChainFailure};
use crate::core::{OUTPUT_ATTESTED, Tx};
use mcjs_client::Pubkey;
use mcjs_client::ix;
use mcjs_client::ix::JobAccounts;
use mcjs_runtime::engine::ContainerEngine;
use std::time::Duration;

/// How long an attestation waits for the job's printed lines to be stored.
const FLUSH_BEFORE_ATTEST: Duration = Duration::from_secs(3);

impl<C: AgentChain, E: ContainerEngine + 'static> Agent<C, E> {
    pub(super) async fn send(
        &self,
        job: Pubkey,
        generation: u32,
        tx: &Tx,
    ) -> Result<(), ChainFailure> {
        let s = &self.shared;
        let authority = s.chain.authority();
        let ix = match tx {
            Tx::Start => ix::start_job(&authority, &job, &s.node, &s.provider, generation),
            Tx::Attest { epoch, step, hash } => {
                self.flush_logs(job, generation).await;
                let on = self.accounts(job, generation);
                let hash = crate::inject::attested_hash(*step, hash.0);
                let settle = self.attestation_may_exhaust_bond(job);
                let sent = s
                    .chain
                    .send(on.attest(&authority, settle, *epoch, *step, hash))
                    .await;
                // The job as last read may be behind the chain: an
                // attestation that does exhaust the bond is refused without
                // the settlement accounts, and sent once more with them.
                return match sent {
                    Err(f)
                        if !settle
                            && f.program_error.as_deref() == Some("SettlementAccountsRequired") =>
                    {
                        s.chain
                            .send(on.attest(&authority, true, *epoch, *step, hash))
                            .await
                    }
                    sent => sent,
                };
            }
            Tx::Complete { output_hash } => {
                let on = self.accounts(job, generation);
                if on.refund == Pubkey::default() {
                    return Err(ChainFailure {
                        message: format!("job {job} left this node"),
                        program_error: None,
                        retryable: false,
                    });
                }
                // A verified job's first completion attests its output
                // (`Job::attest_output`); the job completes with a later
                // one, once the draw has had its time and any check of the
                // output is done. Until then the completion is sent again,
                // refused as too soon or waiting on a check.
                let attesting = self
                    .shared
                    .known
                    .lock()
                    .expect("known lock")
                    .get(&job)
                    .is_some_and(|(_, j)| j.holds_payment && j.output_hash.is_none());
                s.chain.send(on.complete(&authority, output_hash.0)).await?;
                return if attesting {
                    Err(ChainFailure {
                        message: "the output is attested; the job completes once the draw has had its time and any check of it is done".into(),
                        program_error: Some(OUTPUT_ATTESTED.into()),
                        retryable: false,
                    })
                } else {
                    Ok(())
                };
            }
        };
        s.chain.send(ix).await
    }

    /// Stores what the job has printed so far before its checkpoint goes
    /// on chain: a node lost after the attestation loses none of the lines
    /// before the checkpoint the job resumes from. Waited for at most
    /// [`FLUSH_BEFORE_ATTEST`]: a slow store delays no attestation longer.
    async fn flush_logs(&self, job: Pubkey, generation: u32) {
        let flusher = self
            .shared
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

    /// Whether an attestation of `job` now may exhaust its bond (and pause
    /// it), so must name the settlement accounts: from the job as last read
    /// (unknown: yes), a minute ahead of this machine's clock for the
    /// chain's, bounded by the time since its progress mark (the Config's
    /// liveness factor is not read here).
    fn attestation_may_exhaust_bond(&self, job: Pubkey) -> bool {
        let known = self.shared.known.lock().expect("known lock");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        known
            .get(&job)
            .is_none_or(|(_, j)| j.attestation_may_exhaust_bond(now.saturating_add(60), u8::MAX))
    }

    /// This node's assignment of `job` at `generation`: the node's own
    /// accounts, the owner's refund account and a verified job's Segment
    /// from the job as last read (a job no longer read here has neither).
    fn accounts(&self, job: Pubkey, generation: u32) -> JobAccounts {
        let s = &self.shared;
        let known = s.known.lock().expect("known lock");
        let state = known.get(&job).map(|(_, j)| j);
        JobAccounts {
            job,
            node: s.node,
            provider: s.provider,
            payout: s.payout,
            refund: state.map_or_else(Pubkey::default, |j| j.refund_account),
            generation,
            segment: state
                .filter(|j| j.holds_payment)
                .map(|_| mcjs_client::pda::segment(&job, generation)),
            deployment: s.deployment,
        }
    }
}
