//! The MCJS chain client: the one place that knows the program's wire format.
//!
//! * [`ix`] builds every instruction of the program with its accounts.
//! * [`decode`] reads the program's accounts.
//! * [`events`] parses the events the program itself logged in a transaction
//!   (never another program's lines); [`history`] names
//!   every event of the program and orders them into an account's history.
//! * [`errors`] names a program error from its code.
//! * [`audit`] rebuilds a job's history and verifies its checkpoint chain.
//! * [`reliability`] computes a node's and a provider's reliability record
//!   from chain history.
//! * [`completion`] computes the network's completion rate over a window
//!   from job accounts and chain history.
//! * [`rpc`] (feature `rpc`) talks to a node: sends and confirms
//!   transactions, finds accounts, reads histories, watches accounts.

pub mod audit;
pub mod challenge;
pub mod completion;
pub mod compute;
pub mod decode;
pub mod errors;
pub mod events;
pub mod history;
pub mod ix;
mod job_accounts;
#[cfg(feature = "rpc")]
pub mod keyfile;
pub mod reliability;
#[cfg(feature = "rpc")]
pub mod rpc;

pub use anchor_lang::prelude::Pubkey;
pub use anchor_lang::solana_program::instruction::Instruction;
pub use history::cause_name;
pub use mcjs::state::seeds::pda;
pub use mcjs::{self as program, ID as PROGRAM_ID};
#[cfg(feature = "rpc")]
pub use rpc::{ChainClient, ChainError, JobFilter};
pub use solana_keypair::Keypair;
pub use solana_signature::Signature;
pub use solana_signer::Signer;
