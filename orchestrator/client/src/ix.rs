//! Instruction builders, one per program instruction.
//!
//! Accounts that follow from others (PDAs, vaults, the config) are derived
//! here; the caller passes what only it knows (wallets, token accounts, the
//! config's treasury and mint).

use anchor_lang::prelude::{AccountMeta, Pubkey};
use anchor_lang::solana_program::instruction::Instruction;
use anchor_lang::{InstructionData, ToAccountMetas};
use anchor_spl::token::spl_token;
use mcjs::{accounts as acc, instruction as data, instructions as args, state::seeds::pda};

pub use crate::job_accounts::{JobAccounts, assignment_holds_payment, segment_of};
pub use challenge::{answer_challenge, record_challenge, request_challenge};
pub use verification::{
    Checkers, CurrentAssignment, DrawProof, attest_verification, drawn_checkers,
    enter_checker_pool, open_second_round, open_verification, release_segment, replace_checker,
    resolve_verification,
};

mod challenge;
pub mod tamper;
mod verification;

const SYSTEM_PROGRAM: Pubkey = anchor_lang::solana_program::system_program::ID;
pub(crate) const TOKEN_PROGRAM: Pubkey = spl_token::ID;
const UPGRADEABLE_LOADER: Pubkey = anchor_lang::solana_program::bpf_loader_upgradeable::ID;

pub(crate) fn build(accounts: impl ToAccountMetas, data: impl InstructionData) -> Instruction {
    Instruction {
        program_id: mcjs::ID,
        accounts: accounts.to_account_metas(None),
        data: data.data(),
    }
}

/// What every token-moving job instruction needs to know about the deployment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deployment {
    pub usdc_mint: Pubkey,
    pub treasury: Pubkey,
}

pub fn initialize(
    admin: &Pubkey,
    usdc_mint: &Pubkey,
    treasury: &Pubkey,
    args: args::InitializeArgs,
) -> Instruction {
    build(
        acc::Initialize {
            admin: *admin,
            config: pda::config(),
            lease: pda::lease(),
            usdc_mint: *usdc_mint,
            treasury: *treasury,
            insurance_pool: pda::insurance_pool(),
            program: mcjs::ID,
            program_data: program_data_address(),
            token_program: TOKEN_PROGRAM,
            system_program: SYSTEM_PROGRAM,
        },
        data::Initialize { args },
    )
}

/// The program's programdata account under the upgradeable loader (absent
/// where the program runs as a builtin).
pub fn program_data_address() -> Pubkey {
    Pubkey::find_program_address(&[mcjs::ID.as_ref()], &UPGRADEABLE_LOADER).0
}

/// Anchor's IDL account of the program, where the ecosystem's tools
/// (anchorpy's `fetch_idl`, Anchor's `legacy-idl fetch`, explorers) read its
/// IDL: `create_with_seed(PDA of no seeds, "anchor:idl", program)`.
pub fn idl_address() -> Pubkey {
    let base = Pubkey::find_program_address(&[], &mcjs::ID).0;
    Pubkey::create_with_seed(&base, args::IDL_SEED, &mcjs::ID).expect("a seed under 32 bytes")
}

/// Writes `data` at `offset` of the program's compressed IDL, `total_len`
/// bytes in all (the upgrade authority only; `rpc::idl` writes it whole).
pub fn publish_idl(authority: &Pubkey, offset: u32, total_len: u32, data: Vec<u8>) -> Instruction {
    build(
        acc::PublishIdl {
            authority: *authority,
            config: pda::config(),
            idl: idl_address(),
            base: Pubkey::find_program_address(&[], &mcjs::ID).0,
            program: mcjs::ID,
            program_data: program_data_address(),
            system_program: SYSTEM_PROGRAM,
        },
        data::PublishIdl {
            args: args::PublishIdlArgs {
                offset,
                total_len,
                data,
            },
        },
    )
}

pub fn update_config(
    admin: &Pubkey,
    new_treasury: Option<Pubkey>,
    args: args::UpdateConfigArgs,
) -> Instruction {
    build(
        acc::UpdateConfig {
            admin: *admin,
            config: pda::config(),
            new_treasury,
        },
        data::UpdateConfig { args },
    )
}

/// Names the standby schedulers and the lease's length (admin only).
pub fn set_schedulers(admin: &Pubkey, args: args::SetSchedulersArgs) -> Instruction {
    build(
        acc::SetSchedulers {
            admin: *admin,
            config: pda::config(),
            lease: pda::lease(),
        },
        data::SetSchedulers { args },
    )
}

/// Renews the scheduler lease, or takes it once it expired.
pub fn hold_lease(scheduler: &Pubkey) -> Instruction {
    build(
        acc::HoldLease {
            scheduler: *scheduler,
            config: pda::config(),
            lease: pda::lease(),
        },
        data::HoldLease {},
    )
}

pub fn register_provider(
    owner: &Pubkey,
    owner_token: &Pubkey,
    payout: &Pubkey,
    usdc_mint: &Pubkey,
    stake: u64,
) -> Instruction {
    let provider = pda::provider(owner);
    build(
        acc::RegisterProvider {
            owner: *owner,
            config: pda::config(),
            provider,
            stake_vault: pda::vault(&provider),
            usdc_mint: *usdc_mint,
            owner_token: *owner_token,
            payout: *payout,
            token_program: TOKEN_PROGRAM,
            system_program: SYSTEM_PROGRAM,
        },
        data::RegisterProvider {
            args: args::RegisterProviderArgs { stake },
        },
    )
}

pub fn add_stake(
    owner: &Pubkey,
    owner_token: &Pubkey,
    usdc_mint: &Pubkey,
    amount: u64,
) -> Instruction {
    build(
        acc::AddStake {
            stake: provider_stake(owner, usdc_mint),
            owner_token: *owner_token,
        },
        data::AddStake {
            args: args::AddStakeArgs { amount },
        },
    )
}

pub fn request_withdrawal(owner: &Pubkey, amount: u64) -> Instruction {
    build(
        acc::RequestWithdrawal {
            owned: owned_provider(owner),
        },
        data::RequestWithdrawal {
            args: args::RequestWithdrawalArgs { amount },
        },
    )
}

/// The provider `owner` signs for (the program's `OwnedProvider`).
fn owned_provider(owner: &Pubkey) -> acc::OwnedProvider {
    acc::OwnedProvider {
        owner: *owner,
        config: pda::config(),
        provider: pda::provider(owner),
    }
}

/// The provider `owner` signs for and its stake vault (the program's
/// `ProviderStake`).
fn provider_stake(owner: &Pubkey, usdc_mint: &Pubkey) -> acc::ProviderStake {
    acc::ProviderStake {
        owned: owned_provider(owner),
        stake_vault: pda::vault(&pda::provider(owner)),
        usdc_mint: *usdc_mint,
        token_program: TOKEN_PROGRAM,
    }
}

pub fn withdraw_stake(owner: &Pubkey, destination: &Pubkey, usdc_mint: &Pubkey) -> Instruction {
    build(
        acc::WithdrawStake {
            stake: provider_stake(owner, usdc_mint),
            destination: *destination,
        },
        data::WithdrawStake {},
    )
}

pub fn register_node(owner: &Pubkey, args: args::RegisterNodeArgs) -> Instruction {
    let provider = pda::provider(owner);
    build(
        acc::RegisterNode {
            owner: *owner,
            config: pda::config(),
            provider,
            node: pda::node(&provider, args.index),
            system_program: SYSTEM_PROGRAM,
        },
        data::RegisterNode { args },
    )
}

/// `authority` is the provider's wallet or the node's operator key;
/// `provider` the Provider account that owns node `index`.
pub fn update_node(
    authority: &Pubkey,
    provider: &Pubkey,
    index: u32,
    args: args::UpdateNodeArgs,
) -> Instruction {
    build(
        acc::UpdateNode {
            authority: *authority,
            provider_node: acc::ProvidersNode {
                provider: *provider,
                node: pda::node(provider, index),
            },
        },
        data::UpdateNode { args },
    )
}

/// `authority` is the provider's wallet or the node's operator key;
/// `provider` the Provider account that owns node `index`.
pub fn set_node_status(
    authority: &Pubkey,
    provider: &Pubkey,
    index: u32,
    status: mcjs::state::NodeStatus,
) -> Instruction {
    build(
        acc::SetNodeStatus {
            authority: *authority,
            provider_node: acc::ProvidersNode {
                provider: *provider,
                node: pda::node(provider, index),
            },
        },
        data::SetNodeStatus {
            args: args::SetNodeStatusArgs { status },
        },
    )
}

/// What `submit_job` records of a spec: its canonical hash, the summary
/// of its requirements the program enforces, its terms and its
/// verification rate in parts per million. The one place a spec becomes
/// the program's arguments.
pub fn submit_args(spec: &mcjs_spec::JobSpec, job_id: u64, bond: u64) -> args::SubmitJobArgs {
    let summary = spec.requirement_summary();
    let terms = spec.terms();
    args::SubmitJobArgs {
        job_id,
        spec_hash: mcjs_spec::spec_hash(spec),
        requirements: mcjs::state::JobRequirements {
            gpu_count: summary.gpu_count,
            min_vram_mib: summary.min_vram_mib,
            min_compute_capability: summary.min_compute_capability,
            gpu_models: summary.gpu_models,
            min_checkpoint_write_mibps: summary.min_checkpoint_write_mibps,
            attested: summary.attested,
        },
        terms: mcjs::state::JobTerms {
            checkpoint_interval_secs: terms.checkpoint_interval_secs,
            max_duration_secs: terms.max_duration_secs,
            deadline: terms.deadline_unix,
            max_price_per_gpu_hour: terms.max_price_per_gpu_hour,
            restart_budget: terms.restart_budget,
        },
        bond,
        verification_ppm: spec
            .verification
            .as_ref()
            .map_or(0, |v| v.sample_rate.ppm()),
    }
}

pub fn submit_job(
    owner: &Pubkey,
    owner_token: &Pubkey,
    usdc_mint: &Pubkey,
    args: args::SubmitJobArgs,
) -> Instruction {
    let job = pda::job(owner, args.job_id);
    build(
        acc::SubmitJob {
            owner: *owner,
            config: pda::config(),
            job_counter: pda::job_counter(owner),
            job,
            job_vault: pda::vault(&job),
            usdc_mint: *usdc_mint,
            owner_token: *owner_token,
            token_program: TOKEN_PROGRAM,
            system_program: SYSTEM_PROGRAM,
        },
        data::SubmitJob { args },
    )
}

/// `provider` is the Provider account (not its owner's wallet).
/// `new_segment`: `Some(generation)`, the job's generation before this
/// assignment, when the assignment creates a Segment (a verified job under a
/// Config with a challenge window: [`assignment_holds_payment`]); it names
/// the new assignment's Segment and the system program that creates it.
pub fn assign_job(
    scheduler: &Pubkey,
    job: &Pubkey,
    node: &Pubkey,
    provider: &Pubkey,
    new_segment: Option<u32>,
) -> Instruction {
    build(
        acc::AssignJob {
            scheduler: *scheduler,
            config: pda::config(),
            lease: pda::lease(),
            job: *job,
            node: *node,
            provider: *provider,
            segment: new_segment.map(|generation| pda::segment(job, generation.wrapping_add(1))),
            system_program: new_segment.map(|_| SYSTEM_PROGRAM),
        },
        data::AssignJob {},
    )
}

/// `authority` is the node's operator key; `provider` the node's Provider account.
pub fn start_job(
    authority: &Pubkey,
    job: &Pubkey,
    node: &Pubkey,
    provider: &Pubkey,
    generation: u32,
) -> Instruction {
    build(
        acc::StartJob {
            authority: *authority,
            provider: *provider,
            node: *node,
            job: *job,
        },
        data::StartJob {
            args: args::StartJobArgs { generation },
        },
    )
}

/// A job and its vault (the program's `JobBond`).
pub(crate) fn job_bond(job: &Pubkey, usdc_mint: &Pubkey) -> acc::JobBond {
    acc::JobBond {
        config: pda::config(),
        job: *job,
        job_vault: pda::vault(job),
        usdc_mint: *usdc_mint,
        token_program: TOKEN_PROGRAM,
    }
}

/// A job its owner signs for, with one of the owner's USDC accounts (the
/// program's `OwnersBond`).
fn owners_bond(
    owner: &Pubkey,
    job: &Pubkey,
    owner_token: &Pubkey,
    usdc_mint: &Pubkey,
) -> acc::OwnersBond {
    acc::OwnersBond {
        owner: *owner,
        owner_token: *owner_token,
        bond: job_bond(job, usdc_mint),
    }
}

pub fn resume_job(owner: &Pubkey, job: &Pubkey) -> Instruction {
    build(
        acc::ResumeJob {
            owner: *owner,
            config: pda::config(),
            job: *job,
        },
        data::ResumeJob {},
    )
}

pub fn top_up(
    owner: &Pubkey,
    job: &Pubkey,
    owner_token: &Pubkey,
    usdc_mint: &Pubkey,
    amount: u64,
) -> Instruction {
    build(
        acc::TopUp {
            owners: owners_bond(owner, job, owner_token, usdc_mint),
        },
        data::TopUp {
            args: args::TopUpArgs { amount },
        },
    )
}

pub fn cancel_job(
    owner: &Pubkey,
    job: &Pubkey,
    owner_token: &Pubkey,
    usdc_mint: &Pubkey,
) -> Instruction {
    build(
        acc::CancelJob {
            owners: owners_bond(owner, job, owner_token, usdc_mint),
        },
        data::CancelJob {},
    )
}

pub fn expire_job(
    caller: &Pubkey,
    job: &Pubkey,
    owner_token: &Pubkey,
    usdc_mint: &Pubkey,
) -> Instruction {
    build(
        acc::ExpireJob {
            caller: *caller,
            owner_token: *owner_token,
            bond: job_bond(job, usdc_mint),
        },
        data::ExpireJob {},
    )
}

/// `owner_token` is any USDC account of the owner's: it receives tokens sent
/// into the vault after the job settled.
pub fn close_job(
    owner: &Pubkey,
    job: &Pubkey,
    owner_token: &Pubkey,
    usdc_mint: &Pubkey,
) -> Instruction {
    build(
        acc::CloseJob {
            owner: *owner,
            owner_token: *owner_token,
            bond: job_bond(job, usdc_mint),
        },
        data::CloseJob {},
    )
}

/// `owner_token` must be the job's recorded refund account.
pub fn compensate_owner(
    admin: &Pubkey,
    job: &Pubkey,
    owner_token: &Pubkey,
    usdc_mint: &Pubkey,
    amount: u64,
) -> Instruction {
    build(
        acc::CompensateOwner {
            admin: *admin,
            config: pda::config(),
            job: *job,
            insurance_pool: pda::insurance_pool(),
            usdc_mint: *usdc_mint,
            owner_token: *owner_token,
            token_program: TOKEN_PROGRAM,
        },
        data::CompensateOwner {
            args: args::CompensateOwnerArgs { amount },
        },
    )
}

/// Lamports from a wallet to a node's operator key, for its transaction fees.
pub fn fund_operator(payer: &Pubkey, operator: &Pubkey, lamports: u64) -> Instruction {
    anchor_lang::solana_program::system_instruction::transfer(payer, operator, lamports)
}

/// The USDC account the CLI uses for a wallet: its associated token account.
pub fn usdc_account(owner: &Pubkey, usdc_mint: &Pubkey) -> Pubkey {
    anchor_spl::associated_token::get_associated_token_address(owner, usdc_mint)
}

/// Creates a wallet's associated token account unless it exists.
pub fn create_usdc_account(payer: &Pubkey, owner: &Pubkey, usdc_mint: &Pubkey) -> Instruction {
    anchor_spl::associated_token::spl_associated_token_account::instruction::create_associated_token_account_idempotent(
        payer,
        owner,
        usdc_mint,
        &TOKEN_PROGRAM,
    )
}
