//! A job's accounts on its node, gathered once, and the instructions on the
//! assignment built from them: the CLI, the scheduler and the agent build
//! `report_failure`, `pause_job`, `attest_checkpoint` and `complete_job`
//! here, each with the Segment that holds a verified job's pay.

use anchor_lang::prelude::Pubkey;
use anchor_lang::solana_program::instruction::Instruction;
use mcjs::state::{FailureCause, Job};
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
            segment: crate::ix::segment_of(&key, job),
            deployment,
        })
    }

    /// `reporter` (anyone; the scheduler for most causes) reports the
    /// assignment failed.
    pub fn report_failure(&self, reporter: &Pubkey, cause: FailureCause) -> Instruction {
        build(
            acc::ReportFailure {
                reporter: *reporter,
                config: pda::config(),
                job: self.job,
                node: self.node,
                provider: self.provider,
                stake_vault: pda::vault(&self.provider),
                job_vault: pda::vault(&self.job),
                usdc_mint: self.deployment.usdc_mint,
                provider_payout: self.payout,
                treasury: self.deployment.treasury,
                insurance_pool: pda::insurance_pool(),
                owner_token: self.refund,
                token_program: TOKEN_PROGRAM,
                segment: self.segment,
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
                config: pda::config(),
                job: self.job,
                node: self.node,
                provider: self.provider,
                job_vault: pda::vault(&self.job),
                usdc_mint: self.deployment.usdc_mint,
                provider_payout: self.payout,
                treasury: self.deployment.treasury,
                token_program: TOKEN_PROGRAM,
                segment: self.segment,
            },
            data::PauseJob {},
        )
    }

    /// The node's operator key attests a checkpoint of this assignment.
    pub fn attest(&self, authority: &Pubkey, epoch: u32, step: u64, hash: [u8; 32]) -> Instruction {
        build(
            acc::AttestCheckpoint {
                authority: *authority,
                config: pda::config(),
                provider: self.provider,
                node: self.node,
                job: self.job,
                job_vault: pda::vault(&self.job),
                usdc_mint: self.deployment.usdc_mint,
                provider_payout: self.payout,
                treasury: self.deployment.treasury,
                token_program: TOKEN_PROGRAM,
                segment: self.segment,
            },
            data::AttestCheckpoint {
                args: args::AttestCheckpointArgs {
                    generation: self.generation,
                    epoch,
                    step,
                    checkpoint_hash: hash,
                },
            },
        )
    }

    /// The node's operator key completes the job with its output's hash.
    pub fn complete(&self, authority: &Pubkey, output_hash: [u8; 32]) -> Instruction {
        build(
            acc::CompleteJob {
                authority: *authority,
                config: pda::config(),
                provider: self.provider,
                node: self.node,
                job: self.job,
                job_vault: pda::vault(&self.job),
                usdc_mint: self.deployment.usdc_mint,
                provider_payout: self.payout,
                treasury: self.deployment.treasury,
                owner_token: self.refund,
                token_program: TOKEN_PROGRAM,
                segment: self.segment,
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
