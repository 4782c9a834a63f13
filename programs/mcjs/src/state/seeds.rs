//! Every PDA seed of the program, in one place.
//!
//! Seeds nest as prefix, parent key, kind, index (little-endian):
//!
//! | account        | seeds                                                    |
//! |----------------|----------------------------------------------------------|
//! | Config         | `mcjs`, `config`                                         |
//! | Provider       | `mcjs`, owner, `provider`                                |
//! | provider vault | `mcjs`, provider, `vault`                                |
//! | Node           | `mcjs`, provider, `node`, index (u32 LE)                 |
//! | JobCounter     | `mcjs`, owner, `jobs`                                    |
//! | Job            | `mcjs`, owner, `job`, job id (u64 LE)                    |
//! | job vault      | `mcjs`, job, `vault`                                     |
//! | insurance pool | `mcjs`, `insurance`                                      |
//! | SchedulerLease | `mcjs`, `lease`                                          |
//! | Segment        | `mcjs`, job, `segment`, generation (u32 LE)              |
//! | Verification   | `mcjs`, job, `verification`, interval (u32 LE)           |
//! | CheckerPool    | `mcjs`, `checker_pool`, GPU model (its UTF-8 bytes)      |
//!
//! ## Where a program account's seeds are not checked again
//!
//! Every Config, SchedulerLease, Provider, Node, JobCounter, Job, Segment, Verification and CheckerPool
//! account is created only by this program's own `init` at the PDA of the
//! very fields it stores (owner, job id, provider, index, job, generation,
//! interval, GPU model), and those fields never change afterwards; no instruction
//! takes a `zero` account. So an account that Anchor has checked to be
//! owned by this program and of that type (its discriminator) is at the PDA
//! of its own fields: deriving that PDA again from the same fields
//! (`seeds = [.., job.owner, .., job.job_id], bump = job.bump`) proves
//! nothing more, and costs about 1,500 CU (`create_program_address`). Such
//! checks are left out where an instruction pins the account by a stored key
//! relation instead (`job.node == Some(node.key())`, `node.provider ==
//! provider.key()`, `job.owner == owner.key()`), or where any genuine
//! account of the type will do (Config and SchedulerLease are the only ones there are; a Job
//! named by nothing else is whichever job the signer is allowed to act
//! on). Token accounts are owned by the token program, where anyone can
//! create one with any authority: a vault's seeds stay checked.

pub const SEED_PREFIX: &[u8] = b"mcjs";
pub const SEED_CONFIG: &[u8] = b"config";
pub const SEED_PROVIDER: &[u8] = b"provider";
pub const SEED_NODE: &[u8] = b"node";
pub const SEED_JOB: &[u8] = b"job";
pub const SEED_JOBS: &[u8] = b"jobs";
pub const SEED_VAULT: &[u8] = b"vault";
pub const SEED_INSURANCE: &[u8] = b"insurance";
pub const SEED_SEGMENT: &[u8] = b"segment";
pub const SEED_VERIFICATION: &[u8] = b"verification";
pub const SEED_LEASE: &[u8] = b"lease";
pub const SEED_CHECKER_POOL: &[u8] = b"checker_pool";

/// PDA derivations for clients (off chain only).
#[cfg(not(target_os = "solana"))]
pub mod pda {
    use super::*;
    use anchor_lang::prelude::Pubkey;

    pub fn config() -> Pubkey {
        Pubkey::find_program_address(&[SEED_PREFIX, SEED_CONFIG], &crate::ID).0
    }

    /// The scheduler lease (state/lease.rs).
    pub fn lease() -> Pubkey {
        Pubkey::find_program_address(&[SEED_PREFIX, SEED_LEASE], &crate::ID).0
    }

    /// The insurance pool's token account (authority: the Config).
    pub fn insurance_pool() -> Pubkey {
        Pubkey::find_program_address(&[SEED_PREFIX, SEED_INSURANCE], &crate::ID).0
    }

    /// The checker pool of a GPU model (state/checker_pool.rs).
    pub fn checker_pool(gpu_model: &str) -> Pubkey {
        Pubkey::find_program_address(
            &[SEED_PREFIX, SEED_CHECKER_POOL, gpu_model.as_bytes()],
            &crate::ID,
        )
        .0
    }

    pub fn provider(owner: &Pubkey) -> Pubkey {
        Pubkey::find_program_address(&[SEED_PREFIX, owner.as_ref(), SEED_PROVIDER], &crate::ID).0
    }

    /// The token vault of a Provider or Job account.
    pub fn vault(parent: &Pubkey) -> Pubkey {
        Pubkey::find_program_address(&[SEED_PREFIX, parent.as_ref(), SEED_VAULT], &crate::ID).0
    }

    pub fn node(provider: &Pubkey, index: u32) -> Pubkey {
        Pubkey::find_program_address(
            &[
                SEED_PREFIX,
                provider.as_ref(),
                SEED_NODE,
                &index.to_le_bytes(),
            ],
            &crate::ID,
        )
        .0
    }

    pub fn job_counter(owner: &Pubkey) -> Pubkey {
        Pubkey::find_program_address(&[SEED_PREFIX, owner.as_ref(), SEED_JOBS], &crate::ID).0
    }

    pub fn job(owner: &Pubkey, job_id: u64) -> Pubkey {
        Pubkey::find_program_address(
            &[SEED_PREFIX, owner.as_ref(), SEED_JOB, &job_id.to_le_bytes()],
            &crate::ID,
        )
        .0
    }

    pub fn segment(job: &Pubkey, generation: u32) -> Pubkey {
        Pubkey::find_program_address(
            &[
                SEED_PREFIX,
                job.as_ref(),
                SEED_SEGMENT,
                &generation.to_le_bytes(),
            ],
            &crate::ID,
        )
        .0
    }

    pub fn verification(job: &Pubkey, interval: u32) -> Pubkey {
        Pubkey::find_program_address(
            &[
                SEED_PREFIX,
                job.as_ref(),
                SEED_VERIFICATION,
                &interval.to_le_bytes(),
            ],
            &crate::ID,
        )
        .0
    }
}
