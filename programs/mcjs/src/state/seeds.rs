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
//! | Job            | `mcjs`, owner, `job`, job id (u64 LE)                    |
//! | job vault      | `mcjs`, job, `vault`                                     |

pub const SEED_PREFIX: &[u8] = b"mcjs";
pub const SEED_CONFIG: &[u8] = b"config";
pub const SEED_PROVIDER: &[u8] = b"provider";
pub const SEED_NODE: &[u8] = b"node";
pub const SEED_JOB: &[u8] = b"job";
pub const SEED_VAULT: &[u8] = b"vault";
