//! What the agent sends the chain for an assignment (attest, complete,
//! report), with the accounts each needs: the prune bound after an
//! attestation and the Segment holding a verified job's pay.

use super::*;

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
            Tx::Attest { epoch, step, hash } => ix::with_segment(
                ix::attest_checkpoint(
                    &authority,
                    &job,
                    &s.node,
                    &s.provider,
                    &s.payout,
                    &s.deployment,
                    AttestCheckpointArgs {
                        generation,
                        epoch: *epoch,
                        step: *step,
                        checkpoint_hash: crate::inject::attested_hash(*step, hash.0),
                    },
                ),
                self.segment(job, generation),
            ),
            Tx::Complete { output_hash } => {
                let owner = s
                    .known
                    .lock()
                    .expect("known lock")
                    .get(&job)
                    .map(|(_, j)| j.refund_account)
                    .ok_or_else(|| ChainFailure {
                        message: format!("job {job} left this node"),
                        program_error: None,
                        retryable: false,
                    })?;
                let owner_token = owner;
                ix::with_segment(
                    ix::complete_job(
                        &authority,
                        &job,
                        &s.node,
                        &s.provider,
                        &s.payout,
                        &owner_token,
                        &s.deployment,
                        CompleteJobArgs {
                            generation,
                            output_hash: output_hash.0,
                        },
                    ),
                    self.segment(job, generation),
                )
            }
        };
        s.chain.send(ix).await
    }

    /// Up to which step a newly attested checkpoint at `step` lets older
    /// ones go. A verified job's checkers restore an interval's start: keep
    /// everything from the previous attested checkpoint on, and prune
    /// nothing while a verification is open (the chain as last read is
    /// older than the attestation, which only makes this more careful).
    pub(super) fn prune_bound(&self, job: Pubkey, step: u64) -> Option<u64> {
        let known = self.shared.known.lock().expect("known lock");
        let Some((_, state)) = known.get(&job) else {
            return Some(step);
        };
        if state.verification_ppm == 0 {
            return Some(step);
        }
        if state.open_verifications > 0 {
            return None;
        }
        state.prev_checkpoint.map(|c| c.step.min(step))
    }

    /// The Segment holding this assignment's payment, for a verified job.
    pub(super) fn segment(&self, job: Pubkey, generation: u32) -> Option<Pubkey> {
        let known = self.shared.known.lock().expect("known lock");
        let (_, state) = known.get(&job)?;
        state
            .holds_payment
            .then(|| mcjs_client::pda::segment(&job, generation))
    }
}
