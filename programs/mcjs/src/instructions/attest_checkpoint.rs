use anchor_lang::prelude::*;
use anchor_spl::token::{Mint, Token, TokenAccount};

use crate::errors::McjsError;
use crate::events::{emit_event, CheckpointAttested, JobPaused};
use crate::instructions::settlement::take_off_node;
use crate::off_node;
use crate::state::{seeds::*, Config, Job, Node, PauseReason, Provider, Segment};

#[derive(AnchorSerialize, AnchorDeserialize, Clone, Debug)]
pub struct AttestCheckpointArgs {
    pub generation: u32,
    pub epoch: u32,
    pub step: u64,
    pub checkpoint_hash: [u8; 32],
}

#[derive(Accounts)]
pub struct AttestCheckpoint<'info> {
    /// The assigned node's operator key.
    pub authority: Signer<'info>,
    #[account(seeds = [SEED_PREFIX, SEED_CONFIG], bump = config.bump)]
    pub config: Box<Account<'info, Config>>,
    #[account(
        mut,
        seeds = [SEED_PREFIX, provider.owner.as_ref(), SEED_PROVIDER],
        bump = provider.bump,
    )]
    pub provider: Box<Account<'info, Provider>>,
    #[account(
        mut,
        seeds = [SEED_PREFIX, provider.key().as_ref(), SEED_NODE, &node.index.to_le_bytes()],
        bump = node.bump,
        has_one = provider @ McjsError::WrongProvider,
        constraint = node.is_operator(&authority.key()) @ McjsError::NotNodeOperator,
    )]
    pub node: Box<Account<'info, Node>>,
    #[account(
        mut,
        seeds = [SEED_PREFIX, job.owner.as_ref(), SEED_JOB, &job.job_id.to_le_bytes()],
        bump = job.bump,
        constraint = job.provider == Some(provider.key()) @ McjsError::NotAssignedProvider,
        constraint = job.node == Some(node.key()) @ McjsError::WrongNode,
    )]
    pub job: Box<Account<'info, Job>>,
    #[account(
        mut,
        seeds = [SEED_PREFIX, job.key().as_ref(), SEED_VAULT],
        bump = job.vault_bump,
    )]
    pub job_vault: Box<Account<'info, TokenAccount>>,
    #[account(address = config.usdc_mint @ McjsError::WrongMint)]
    pub usdc_mint: Box<Account<'info, Mint>>,
    #[account(mut, address = provider.payout @ McjsError::WrongTokenAccount)]
    pub provider_payout: Box<Account<'info, TokenAccount>>,
    #[account(mut, address = config.treasury @ McjsError::WrongTokenAccount)]
    pub treasury: Box<Account<'info, TokenAccount>>,
    pub token_program: Program<'info, Token>,
    /// The current assignment's Segment, when the job's payment is held
    /// (a verified job); checked against the job when it is settled.
    #[account(mut)]
    pub segment: Option<Box<Account<'info, Segment>>>,
}

impl AttestCheckpoint<'_> {
    fn validate(&self, args: &AttestCheckpointArgs, now: i64) -> Result<()> {
        self.job.require_generation(args.generation)?;
        self.job.require_draw_gap(now, self.config.params.draw_secs)
    }

    /// Records a checkpoint, extends the hash chain and accrues payment for
    /// the time since the previous progress mark. When the bond cannot cover
    /// it, the job pauses and the node is released.
    #[access_control(ctx.accounts.validate(&args, Clock::get()?.unix_timestamp))]
    pub fn attest_checkpoint(ctx: Context<Self>, args: AttestCheckpointArgs) -> Result<()> {
        let clock = Clock::get()?;
        let now = clock.unix_timestamp;
        let accounts = ctx.accounts;
        let job = &mut accounts.job;
        job.record_checkpoint(args.epoch, args.step, args.checkpoint_hash, now)?;
        let accrual = job.accrue(now, accounts.config.params.liveness_factor)?;
        job.last_attest_slot = clock.slot;
        job.last_interval_amount = accrual.amount;
        emit_event(CheckpointAttested {
            job: job.key(),
            node: accounts.node.key(),
            generation: args.generation,
            epoch: args.epoch,
            step: args.step,
            checkpoint_hash: args.checkpoint_hash,
            chain: job.checkpoint_chain,
            accrued: job.accrued,
            by: accounts.authority.key(),
            at: now,
        });

        if accrual.bond_exhausted {
            take_off_node(off_node!(accounts, None), true, now, |job| {
                job.pause(PauseReason::InsufficientBond, now)
            })?;
            let job = &accounts.job;
            emit_event(JobPaused {
                job: job.key(),
                generation: job.generation,
                reason: PauseReason::InsufficientBond,
                by: accounts.authority.key(),
                at: now,
            });
            return Ok(());
        }
        job.invariant()?;
        accounts.node.invariant()?;
        Ok(())
    }
}
