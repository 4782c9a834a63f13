//! A job's accounts on its node, gathered once, and the instructions on the
//! assignment built from them: the CLI, the scheduler and the agent build
//! `report_failure`, `pause_job`, `attest_checkpoint` and `complete_job`
//! here, each with the Segment that holds a verified job's pay
//! ([`segment_of`]).

use anchor_lang::prelude::Pubkey;
use anchor_lang::solana_program::instruction::Instruction;
use mcjs::state::{ConfigParams, FailureCause, Job};
use mcjs::{accounts as acc, instruction as data, instructions as args, state::seeds::pda};

use crate::ix::{Deployment, TOKEN_PROGRAM, build};

/// Everything an instruction on a job's current assignment names besides
/// its signer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JobAccounts {
    pub job: Pubkey,
    pub node: Pubkey,
    /// The node's Provider account.
    pub provider: Pubkey,
    /// The provider's payout token account (from its Provider account).
    pub payout: Pubkey,
    /// The owner's token account, where refunds go.
    pub refund: Pubkey,
    /// The assignment's generation.
    pub generation: u32,
    /// The Segment holding this assignment's payment, for a verified job.
    pub segment: Option<Pubkey>,
    pub deployment: Deployment,
}

impl JobAccounts {
    /// The accounts of `job`'s current assignment as the chain holds it;
    /// `None` when the job is on no node. `payout` is the assignment's
    /// provider's payout account.
    pub fn on_node(key: Pubkey, job: &Job, payout: Pubkey, deployment: Deployment) -> Option<Self> {
        Some(Self {
            job: key,
            node: job.node?,
            provider: job.provider?,
            payout,
            refund: job.refund_account,
            generation: job.generation,
            segment: segment_of(&key, job),
            deployment,
        })
    }

    /// The accounts of the job on its node that `report_failure`,
    /// `pause_job` and `complete_job` name alike (the program's `JobOnNode`),
    /// with the owner's refund account where leaving may end the job.
    fn job_on_node(&self, owner_token: Option<Pubkey>) -> acc::JobOnNode {
        acc::JobOnNode {
            bond: crate::ix::job_bond(&self.job, &self.deployment.usdc_mint),
            provider: self.provider,
            node: self.node,
            provider_payout: self.payout,
            treasury: self.deployment.treasury,
            owner_token,
            segment: self.segment,
        }
    }

    /// `reporter` (anyone; the scheduler for most causes) reports the
    /// assignment failed.
    pub fn report_failure(&self, reporter: &Pubkey, cause: FailureCause) -> Instruction {
        build(
            acc::ReportFailure {
                reporter: *reporter,
                lease: pda::lease(),
                stake_vault: pda::vault(&self.provider),
                insurance_pool: pda::insurance_pool(),
                on_node: self.job_on_node(Some(self.refund)),
            },
            data::ReportFailure {
                args: args::ReportFailureArgs {
                    generation: self.generation,
                    cause,
                },
            },
        )
    }

    /// The owner pauses the job: the node is paid to now and released.
    pub fn pause(&self, owner: &Pubkey) -> Instruction {
        build(
            acc::PauseJob {
                owner: *owner,
                on_node: self.job_on_node(None),
            },
            data::PauseJob {},
        )
    }

    /// The node's operator key attests a checkpoint of this assignment.
    /// Without `settle` it names only the Config, the node (read-only) and
    /// the job (the only account it write-locks): the common case, which
    /// moves no tokens. With `settle` it also names the settlement accounts
    /// (provider, job vault, mint, payout, treasury, token program, a
    /// verified job's Segment) and the node writable, which an attestation
    /// that exhausts the bond needs (it pauses the job): ask
    /// [`Job::attestation_may_exhaust_bond`], and send it again with
    /// `settle` when the program answers `SettlementAccountsRequired`.
    pub fn attest(
        &self,
        authority: &Pubkey,
        settle: bool,
        epoch: u32,
        step: u64,
        hash: [u8; 32],
    ) -> Instruction {
        let some = |key: Pubkey| settle.then_some(key);
        let mut ix = build(
            acc::AttestCheckpoint {
                authority: *authority,
                config: pda::config(),
                provider: some(self.provider),
                node: self.node,
                job: self.job,
                job_vault: some(pda::vault(&self.job)),
                usdc_mint: some(self.deployment.usdc_mint),
                provider_payout: some(self.payout),
                treasury: some(self.deployment.treasury),
                token_program: some(TOKEN_PROGRAM),
                segment: self.segment.filter(|_| settle),
            },
            data::AttestCheckpoint {
                args: args::AttestCheckpointArgs {
                    generation: self.generation,
                    epoch,
                    step,
                    checkpoint_hash: hash,
                },
            },
        );
        if settle {
            // The pause releases the node: write-locked only then.
            for meta in ix.accounts.iter_mut().filter(|m| m.pubkey == self.node) {
                meta.is_writable = true;
            }
        }
        ix
    }

    /// The node's operator key completes the job with its output's hash.
    pub fn complete(&self, authority: &Pubkey, output_hash: [u8; 32]) -> Instruction {
        build(
            acc::CompleteJob {
                authority: *authority,
                on_node: self.job_on_node(Some(self.refund)),
            },
            data::CompleteJob {
                args: args::CompleteJobArgs {
                    generation: self.generation,
                    output_hash,
                },
            },
        )
    }
}

/// The Segment that holds a verified job's current assignment payment, if
/// it has one: the instructions that take the job off its node must carry it
/// (see [`JobAccounts::segment`]).
pub fn segment_of(job_key: &Pubkey, job: &Job) -> Option<Pubkey> {
    job.holds_payment
        .then(|| pda::segment(job_key, job.generation))
}

/// Whether assigning `job` now creates a Segment (a verified job under a
/// Config with a challenge window): see [`crate::ix::assign_job`].
pub fn assignment_holds_payment(job: &Job, params: &ConfigParams) -> bool {
    job.holds_payment_under(params)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accounts() -> JobAccounts {
        JobAccounts {
            job: Pubkey::new_unique(),
            node: Pubkey::new_unique(),
            provider: Pubkey::new_unique(),
            payout: Pubkey::new_unique(),
            refund: Pubkey::new_unique(),
            generation: 3,
            segment: Some(Pubkey::new_unique()),
            deployment: Deployment {
                usdc_mint: Pubkey::new_unique(),
                treasury: Pubkey::new_unique(),
            },
        }
    }

    fn writable(ix: &Instruction) -> Vec<Pubkey> {
        ix.accounts
            .iter()
            .filter(|m| m.is_writable)
            .map(|m| m.pubkey)
            .collect()
    }

    #[test]
    fn an_attestation_that_settles_nothing_write_locks_only_the_job() {
        let on = accounts();
        let authority = Pubkey::new_unique();
        let ix = on.attest(&authority, false, 1, 2, [7; 32]);
        assert_eq!(writable(&ix), vec![on.job]);
        // The optional accounts are left out (the program id stands for none).
        for key in [
            on.provider,
            on.payout,
            on.segment.unwrap(),
            pda::vault(&on.job),
        ] {
            assert!(ix.accounts.iter().all(|m| m.pubkey != key));
        }
        assert!(
            ix.accounts
                .iter()
                .any(|m| m.pubkey == on.node && !m.is_writable)
        );
    }

    #[test]
    fn an_attestation_that_may_pause_names_the_settlement_accounts() {
        let on = accounts();
        let ix = on.attest(&Pubkey::new_unique(), true, 1, 2, [7; 32]);
        let writable = writable(&ix);
        for key in [
            on.job,
            on.node,
            on.provider,
            on.payout,
            on.deployment.treasury,
            pda::vault(&on.job),
            on.segment.unwrap(),
        ] {
            assert!(writable.contains(&key), "{key} writable");
        }
        assert!(
            ix.accounts
                .iter()
                .any(|m| m.pubkey == on.deployment.usdc_mint)
        );
        assert!(ix.accounts.iter().any(|m| m.pubkey == TOKEN_PROGRAM));
    }
}
