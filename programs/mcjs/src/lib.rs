//! MCJS on-chain program: USDC bond escrow for checkpointed compute jobs,
//! the job state machine with generation fencing, checkpoint attestations
//! with a hash chain, settlement for checkpointed progress, and slashing.
//!
//! # Map
//!
//! - `lib.rs` (this file): the entrypoint. It only dispatches, after
//!   refusing any account beyond those the instruction names
//!   (`no_extra_accounts`, `UnexpectedAccounts`).
//! - `instructions/`: one file per instruction, each with its `Args`, its
//!   `Accounts`, a `validate` under `#[access_control]` and the handler.
//!   The hot path: `assign_job.rs`, `start_job.rs`, `attest_checkpoint.rs`,
//!   `complete_job.rs`, `report_failure.rs`. `settlement.rs` is the only
//!   way tokens leave a job vault: `take_off_node` (every way a job leaves
//!   a node: completion, pause, failure report, exhausted bond),
//!   `settle_segment` (the provider's share and the commission, or a
//!   verified job's pay held in its Segment) and `refund_from_bond`.
//!   `publish_idl.rs` writes the program's IDL into Anchor's IDL account
//!   (the upgrade authority only). Account lists that several instructions
//!   name alike are one nested `Accounts` struct each, declared once:
//!   `job_bond.rs` (`JobBond`, a job and its vault; `OwnersBond`, with the
//!   owner's signature and USDC account), `on_node.rs` (`JobOnNode`: a job
//!   on its node and where its pay goes, for `complete_job`, `pause_job`
//!   and `report_failure`), `provider_stake.rs`, `provider_node.rs`, and in
//!   `open_verification.rs` `Checker` and `OpenCheck`.
//! - `state/`: one file per account, its rules as methods.
//!   - `job.rs`: `Job`, its states and transitions (each a method guarded by
//!     a `match`; every handler ends with `invariant()`), the generation
//!     that fences a node, the checkpoint record and the hash chain
//!     (`extend_chain`), failure causes (`FailureCause::is_infrastructure`),
//!     `Job::on_report`, `Job::attest_output`, the restore floor.
//!   - `billing.rs`: what a job is billed (`Job::accrue`,
//!     `Job::attestation_may_exhaust_bond`).
//!   - `terms.rs`: a job's requirements and terms, their bounds, their cost.
//!   - `node.rs`: `Node`, with its operator key (runs jobs, never moves
//!     money), its hardware profile, and its record: `failures` by the
//!     provider's fault and `service_secs` holding jobs, kept by
//!     `Node::release` as each job leaves; `Node::require_attested`.
//!   - `provider.rs`: `Provider`: stake, withdrawal, payout, slashing.
//!   - `config.rs`: the Config and its parameters
//!     (`require_proven_hardware` among them).
//!   - `lease.rs`: `SchedulerLease`, which scheduler may act.
//!   - `job_counter.rs`: per-owner job ids that only grow, so a closed
//!     job's address is never taken again.
//!   - `verification.rs`: verified progress: `Segment` (an assignment's held
//!     pay) and `Verification` (two checkers who seal, then reveal, an
//!     answer with a possession digest).
//!   - `checker_pool.rs`: the checkers of one GPU model, from which the
//!     program draws who checks an interval.
//!   - `challenge.rs`: the hardware challenge's record on a Node: the
//!     slot-hash seeds the program draws, the scheduler's verdict, the
//!     proven class, `GpuAttestation`.
//!   - `seeds.rs`: every PDA seed, and the `pda` derivations clients use.
//! - `events.rs`: one event per transition, logged through `emit_event`
//!   (Anchor's `emit!` on SBF, a stub off-chain).
//! - `errors.rs`: `McjsError`; codes are positional, so a new error goes at
//!   the end.
//! - `token.rs`: token movements, `transfer_checked` only; `pay_out_or_keep`
//!   pays only into a live token account of the mint (`can_receive`) and
//!   keeps what it cannot pay.
//! - `programs/mcjs/sbf/README.md`: the SBF build, its profile and code
//!   generation.

#![allow(unexpected_cfgs)]

use anchor_lang::prelude::*;
// The SBF build links memcpy and friends from here (see sbf/README.md).
#[cfg(target_arch = "bpf")]
use solana_compiler_builtins as _;

pub mod errors;
pub mod events;
pub mod instructions;
pub mod state;
pub mod token;

pub use instructions::*;

/// Every account an instruction reads is named in its `Accounts`; one more
/// is refused rather than ignored, so no client can believe an account it
/// sent was checked or used.
fn no_extra_accounts<T: anchor_lang::Bumps>(ctx: &Context<T>) -> Result<()> {
    require!(
        ctx.remaining_accounts.is_empty(),
        errors::McjsError::UnexpectedAccounts
    );
    Ok(())
}

declare_id!("AuhJzp4ahHy1c5roHmYBic35bHXpUk5B9L5TCxErDQLe");

#[program]
pub mod mcjs {
    use super::*;

    /// Creates the program's Config and insurance pool (once; the upgrade authority on a cluster).
    pub fn initialize(ctx: Context<Initialize>, args: InitializeArgs) -> Result<()> {
        no_extra_accounts(&ctx)?;
        Initialize::initialize(ctx, args)
    }

    /// Changes the Config; admin only, logged as old and new.
    pub fn update_config(ctx: Context<UpdateConfig>, args: UpdateConfigArgs) -> Result<()> {
        no_extra_accounts(&ctx)?;
        UpdateConfig::update_config(ctx, args)
    }

    /// Names the standby schedulers and the lease's length; admin only.
    pub fn set_schedulers(ctx: Context<SetSchedulers>, args: SetSchedulersArgs) -> Result<()> {
        no_extra_accounts(&ctx)?;
        SetSchedulers::set_schedulers(ctx, args)
    }

    /// Renews the scheduler lease, or takes it once it expired.
    pub fn hold_lease(ctx: Context<HoldLease>) -> Result<()> {
        no_extra_accounts(&ctx)?;
        HoldLease::hold_lease(ctx)
    }

    /// Registers a provider and locks its first stake.
    pub fn register_provider(
        ctx: Context<RegisterProvider>,
        args: RegisterProviderArgs,
    ) -> Result<()> {
        no_extra_accounts(&ctx)?;
        RegisterProvider::register_provider(ctx, args)
    }

    /// Adds to a provider's stake.
    pub fn add_stake(ctx: Context<AddStake>, args: AddStakeArgs) -> Result<()> {
        no_extra_accounts(&ctx)?;
        AddStake::add_stake(ctx, args)
    }

    /// Starts the cooldown of a stake withdrawal.
    pub fn request_withdrawal(
        ctx: Context<RequestWithdrawal>,
        args: RequestWithdrawalArgs,
    ) -> Result<()> {
        no_extra_accounts(&ctx)?;
        RequestWithdrawal::request_withdrawal(ctx, args)
    }

    /// Withdraws stake after the cooldown, with no job assigned.
    pub fn withdraw_stake(ctx: Context<WithdrawStake>) -> Result<()> {
        no_extra_accounts(&ctx)?;
        WithdrawStake::withdraw_stake(ctx)
    }

    /// Registers a node with its measured hardware profile.
    pub fn register_node(ctx: Context<RegisterNode>, args: RegisterNodeArgs) -> Result<()> {
        no_extra_accounts(&ctx)?;
        RegisterNode::register_node(ctx, args)
    }

    /// Updates a node's profile, readiness or price.
    pub fn update_node(ctx: Context<UpdateNode>, args: UpdateNodeArgs) -> Result<()> {
        no_extra_accounts(&ctx)?;
        UpdateNode::update_node(ctx, args)
    }

    /// Takes an idle node offline or brings it back.
    pub fn set_node_status(ctx: Context<SetNodeStatus>, args: SetNodeStatusArgs) -> Result<()> {
        no_extra_accounts(&ctx)?;
        SetNodeStatus::set_node_status(ctx, args)
    }

    /// Submits a job and locks its bond.
    pub fn submit_job(ctx: Context<SubmitJob>, args: SubmitJobArgs) -> Result<()> {
        no_extra_accounts(&ctx)?;
        SubmitJob::submit_job(ctx, args)
    }

    /// Assigns a queued job to a node that meets its requirements (scheduler).
    pub fn assign_job(ctx: Context<AssignJob>) -> Result<()> {
        no_extra_accounts(&ctx)?;
        AssignJob::assign_job(ctx)
    }

    /// The assigned node's operator key reports the job's container running.
    pub fn start_job(ctx: Context<StartJob>, args: StartJobArgs) -> Result<()> {
        no_extra_accounts(&ctx)?;
        StartJob::start_job(ctx, args)
    }

    /// The assigned node's operator key attests a checkpoint; payment accrues.
    pub fn attest_checkpoint(
        ctx: Context<AttestCheckpoint>,
        args: AttestCheckpointArgs,
    ) -> Result<()> {
        no_extra_accounts(&ctx)?;
        AttestCheckpoint::attest_checkpoint(ctx, args)
    }

    /// The assigned node's operator key completes the job with its output hash; settles.
    pub fn complete_job(ctx: Context<CompleteJob>, args: CompleteJobArgs) -> Result<()> {
        no_extra_accounts(&ctx)?;
        CompleteJob::complete_job(ctx, args)
    }

    /// Reports a failed assignment (scheduler at once, anyone once stalled).
    pub fn report_failure(ctx: Context<ReportFailure>, args: ReportFailureArgs) -> Result<()> {
        no_extra_accounts(&ctx)?;
        ReportFailure::report_failure(ctx, args)
    }

    /// The owner pauses a job on a node.
    pub fn pause_job(ctx: Context<PauseJob>) -> Result<()> {
        no_extra_accounts(&ctx)?;
        PauseJob::pause_job(ctx)
    }

    /// The owner puts a paused job back in the queue.
    pub fn resume_job(ctx: Context<ResumeJob>) -> Result<()> {
        no_extra_accounts(&ctx)?;
        ResumeJob::resume_job(ctx)
    }

    /// The owner adds to a job's bond.
    pub fn top_up(ctx: Context<TopUp>, args: TopUpArgs) -> Result<()> {
        no_extra_accounts(&ctx)?;
        TopUp::top_up(ctx, args)
    }

    /// The owner cancels a job that is not on a node; full refund.
    pub fn cancel_job(ctx: Context<CancelJob>) -> Result<()> {
        no_extra_accounts(&ctx)?;
        CancelJob::cancel_job(ctx)
    }

    /// Anyone expires a queued job past its deadline; refund to the owner.
    pub fn expire_job(ctx: Context<ExpireJob>) -> Result<()> {
        no_extra_accounts(&ctx)?;
        ExpireJob::expire_job(ctx)
    }

    /// The owner closes a finished job; rent and any stray tokens back to the owner.
    pub fn close_job(ctx: Context<CloseJob>) -> Result<()> {
        no_extra_accounts(&ctx)?;
        CloseJob::close_job(ctx)
    }

    /// The scheduler opens the verification of a job's latest attested
    /// interval, if the slot-hash draw selects it, naming a verifier and a
    /// referee node of two other providers.
    pub fn open_verification(ctx: Context<OpenVerification>) -> Result<()> {
        // The remaining accounts show the pool members drawn and passed over.
        OpenVerification::open_verification(ctx)
    }

    /// A verifier or referee node's operator key gives the hash it reproduced.
    pub fn attest_verification(
        ctx: Context<AttestVerification>,
        args: AttestVerificationArgs,
    ) -> Result<()> {
        no_extra_accounts(&ctx)?;
        AttestVerification::attest_verification(ctx, args)
    }

    /// A node's agent enters its node in the checker pool of its GPU model,
    /// or renews its entry.
    pub fn enter_checker_pool(ctx: Context<EnterCheckerPool>) -> Result<()> {
        no_extra_accounts(&ctx)?;
        EnterCheckerPool::enter_checker_pool(ctx)
    }

    /// The scheduler names another checker in place of one that has not
    /// sealed its answer by half the challenge window.
    pub fn replace_checker(ctx: Context<ReplaceChecker>, args: ReplaceCheckerArgs) -> Result<()> {
        // The remaining accounts show the pool members drawn and passed over.
        ReplaceChecker::replace_checker(ctx, args)
    }

    /// The scheduler names two fresh checkers for a check whose first
    /// round's checkers disagreed.
    pub fn open_second_round(ctx: Context<OpenSecondRound>) -> Result<()> {
        // The remaining accounts show the pool members drawn and passed over.
        OpenSecondRound::open_second_round(ctx)
    }

    /// Anyone applies a decided verification: fees, slashes, refund, roll-back.
    pub fn resolve_verification(ctx: Context<ResolveVerification>) -> Result<()> {
        no_extra_accounts(&ctx)?;
        ResolveVerification::resolve_verification(ctx)
    }

    /// Anyone pays a held segment once its challenge window has passed.
    pub fn release_segment(ctx: Context<ReleaseSegment>) -> Result<()> {
        no_extra_accounts(&ctx)?;
        ReleaseSegment::release_segment(ctx)
    }

    /// The admin pays the owner of a job that failed through its providers'
    /// fault from the insurance pool, at most what the owner paid.
    pub fn compensate_owner(
        ctx: Context<CompensateOwner>,
        args: CompensateOwnerArgs,
    ) -> Result<()> {
        no_extra_accounts(&ctx)?;
        CompensateOwner::compensate_owner(ctx, args)
    }

    /// The scheduler challenges a free node's claimed hardware
    /// (docs/hardware-challenge.md): the node takes no job until the
    /// verdict is recorded.
    pub fn request_challenge(
        ctx: Context<RequestChallenge>,
        args: RequestChallengeArgs,
    ) -> Result<()> {
        no_extra_accounts(&ctx)?;
        RequestChallenge::request_challenge(ctx, args)
    }

    /// The node's operator key gives its commitment, then its held digest;
    /// the program draws the seed each answered.
    pub fn answer_challenge(
        ctx: Context<AnswerChallenge>,
        args: AnswerChallengeArgs,
    ) -> Result<()> {
        no_extra_accounts(&ctx)?;
        AnswerChallenge::answer_challenge(ctx, args)
    }

    /// The scheduler, as the checker, records the verdict and what it
    /// proves of the node's profile.
    pub fn record_challenge(
        ctx: Context<RecordChallenge>,
        args: RecordChallengeArgs,
    ) -> Result<()> {
        no_extra_accounts(&ctx)?;
        RecordChallenge::record_challenge(ctx, args)
    }

    /// Writes a chunk of the program's Anchor IDL into Anchor's IDL account,
    /// where the ecosystem's tools read it; the upgrade authority only.
    pub fn publish_idl(ctx: Context<PublishIdl>, args: PublishIdlArgs) -> Result<()> {
        no_extra_accounts(&ctx)?;
        PublishIdl::publish_idl(ctx, args)
    }
}
