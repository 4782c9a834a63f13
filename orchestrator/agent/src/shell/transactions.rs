//! What the agent sends the chain for an assignment (start, attest,
//! complete), with the accounts each needs ([`JobAccounts`]: the Segment
//! holding a verified job's pay included).

use super::*;
use mcjs_client::ix::JobAccounts;

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
            Tx::Attest { epoch, step, hash } => self.accounts(job, generation).attest(
                &authority,
                *epoch,
                *step,
                crate::inject::attested_hash(*step, hash.0),
            ),
            Tx::Complete { output_hash } => {
                let on = self.accounts(job, generation);
                if on.refund == Pubkey::default() {
                    return Err(ChainFailure {
                        message: format!("job {job} left this node"),
                        program_error: None,
                        retryable: false,
                    });
                }
                on.complete(&authority, output_hash.0)
            }
        };
        s.chain.send(ix).await
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
