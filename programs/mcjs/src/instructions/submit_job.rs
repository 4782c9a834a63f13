use anchor_lang::prelude::*;
use anchor_spl::token::{Mint, Token, TokenAccount};

use crate::errors::McjsError;
use crate::events::{emit_event, JobSubmitted};
use crate::state::{
    minimum_bond, seeds::*, Config, Job, JobCounter, JobRequirements, JobState, JobTerms, PPM,
};
use crate::token::deposit;

#[derive(AnchorSerialize, AnchorDeserialize, Clone, Debug)]
pub struct SubmitJobArgs {
    pub job_id: u64,
    pub spec_hash: [u8; 32],
    pub requirements: JobRequirements,
    pub terms: JobTerms,
    pub bond: u64,
    /// The share of intervals to verify, in parts per million; 0: none.
    pub verification_ppm: u32,
}

#[derive(Accounts)]
#[instruction(args: SubmitJobArgs)]
pub struct SubmitJob<'info> {
    #[account(mut)]
    pub owner: Signer<'info>,
    /// The Config: the only one (state/seeds.rs), no seeds check.
    pub config: Account<'info, Config>,
    /// The owner's job ids, created with its first job.
    #[account(
        init_if_needed,
        payer = owner,
        space = 8 + JobCounter::INIT_SPACE,
        seeds = [SEED_PREFIX, owner.key().as_ref(), SEED_JOBS],
        bump,
    )]
    pub job_counter: Box<Account<'info, JobCounter>>,
    #[account(
        init,
        payer = owner,
        space = 8 + Job::INIT_SPACE,
        seeds = [SEED_PREFIX, owner.key().as_ref(), SEED_JOB, &args.job_id.to_le_bytes()],
        bump,
    )]
    pub job: Box<Account<'info, Job>>,
    #[account(
        init,
        payer = owner,
        seeds = [SEED_PREFIX, job.key().as_ref(), SEED_VAULT],
        bump,
        token::mint = usdc_mint,
        token::authority = job,
        token::token_program = token_program,
    )]
    pub job_vault: Box<Account<'info, TokenAccount>>,
    #[account(address = config.usdc_mint @ McjsError::WrongMint)]
    pub usdc_mint: Box<Account<'info, Mint>>,
    #[account(
        mut,
        constraint = owner_token.mint == usdc_mint.key() @ McjsError::WrongMint,
        constraint = owner_token.owner == owner.key() @ McjsError::NotOwner,
    )]
    pub owner_token: Box<Account<'info, TokenAccount>>,
    pub token_program: Program<'info, Token>,
    pub system_program: Program<'info, System>,
}

impl SubmitJob<'_> {
    fn validate(&self, args: &SubmitJobArgs, now: i64) -> Result<()> {
        require!(!self.config.paused, McjsError::ProgramPaused);
        args.requirements.validate()?;
        args.terms.validate(now)?;
        require!(args.verification_ppm <= PPM, McjsError::InvalidSampleRate);
        require!(
            args.bond >= minimum_bond(&args.requirements, &args.terms)?,
            McjsError::BondTooSmall
        );
        Ok(())
    }

    /// Declares a job by its spec hash and locks its bond in the job's vault.
    #[access_control(ctx.accounts.validate(&args, Clock::get()?.unix_timestamp))]
    pub fn submit_job(ctx: Context<Self>, args: SubmitJobArgs) -> Result<()> {
        let now = Clock::get()?.unix_timestamp;
        let accounts = ctx.accounts;
        let counter = &mut accounts.job_counter;
        counter.owner = accounts.owner.key();
        counter.bump = ctx.bumps.job_counter;
        counter.take(args.job_id)?;
        deposit(
            &accounts.token_program,
            &accounts.owner_token,
            &accounts.usdc_mint,
            &accounts.job_vault,
            &accounts.owner,
            args.bond,
        )?;
        let job = &mut accounts.job;
        job.set_inner(Job {
            owner: accounts.owner.key(),
            job_id: args.job_id,
            spec_hash: args.spec_hash,
            requirements: args.requirements,
            last_failure: None,
            compensated: 0,
            terms: args.terms,
            bond: args.bond,
            paid: 0,
            state: JobState::Pending { since: now },
            node: None,
            provider: None,
            generation: 0,
            rate_per_hour: 0,
            last_checkpoint: None,
            checkpoint_chain: [0; 32],
            checkpoint_count: 0,
            progress_mark: now,
            accrued: 0,
            billed_secs: 0,
            restarts_used: 0,
            output_hash: None,
            submitted_at: now,
            first_running_at: None,
            finished_at: None,
            refund_account: accounts.owner_token.key(),
            bump: ctx.bumps.job,
            vault_bump: ctx.bumps.job_vault,
            verification_ppm: args.verification_ppm,
            prev_checkpoint: None,
            last_attest_slot: 0,
            last_interval_amount: 0,
            open_verifications: 0,
            holds_payment: false,
            held: 0,
            live_segments: 0,
            barred_provider: None,
            last_opened_interval: 0,
            checks_settled_at: 0,
            assignment_earned: 0,
            restore_floor: None,
            fatal_claim: None,
        });
        job.invariant()?;
        emit_event(JobSubmitted {
            job: job.key(),
            owner: job.owner,
            job_id: job.job_id,
            spec_hash: job.spec_hash,
            bond: job.bond,
            at: now,
        });
        Ok(())
    }
}
