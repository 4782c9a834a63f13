//! The MCJS chain client: the one place that knows the program's wire format.
//!
//! * [`ix`] builds every instruction of the program with its accounts.
//! * [`decode`] reads the program's accounts.
//! * [`events`] parses the events the program itself logged in a transaction
//!   (never another program's lines); [`history`] names
//!   every event of the program and orders them into an account's history.
//! * [`errors`] names a program error from its code.
//! * [`rpc`] (feature `rpc`) talks to a node: sends and confirms
//!   transactions, finds accounts, reads histories, watches accounts.
//!
//! What the chain's history says about a job, a node or the network (a
//! job's audit, reliability records, the completion rate) is computed from
//! these histories by the `mcjs-ledger` crate.
//!
//! # Map
//!
//! Pure, without `rpc`:
//!
//! - `ix.rs`: one builder per instruction; `ix::submit_args` is the one
//!   place a spec becomes `submit_job`'s arguments. `ix/verification.rs`
//!   and `ix/challenge.rs` hold verified progress's and the hardware
//!   challenge's instructions. `ix/tamper.rs`: what only an attacker does
//!   to a built instruction (another account in a slot, a signature
//!   dropped), for the program's tests.
//! - `job_accounts.rs` (`ix::JobAccounts`): a job's accounts on its node,
//!   gathered once, and the instructions on the assignment built from them
//!   (`report_failure`, `pause_job`, `attest_checkpoint`, `complete_job`),
//!   each with the Segment that holds a verified job's pay
//!   (`ix::segment_of`; `ix::assignment_holds_payment` says whether an
//!   assignment creates one). The agent, the scheduler and the CLI all
//!   build these here.
//! - `compute.rs`: the compute-unit limit each transaction asks for (the
//!   instruction's measured SBF maximum from `bench/results/program-cu.txt`
//!   plus a quarter; a test holds the table to that file) and the price it
//!   offers (the 75th percentile of what recent slots paid for its writable
//!   accounts, doubled at each re-signing, under the operator's ceiling,
//!   `--max-compute-unit-price`).
//! - `decode.rs`, `events.rs`, `history.rs`, `errors.rs`: accounts, events
//!   and error names, as listed above.
//! - `challenge.rs`: the hardware challenge between the chain and
//!   `mcjs_challenge`: a Node's record to the challenge's parameters,
//!   seeds, draws and answers (read from the SlotHashes data as the program
//!   draws them), and a verdict with the GPUs' checked attestation evidence
//!   to what `record_challenge` takes (`attestation_on_chain`).
//!
//! The JSON-RPC side, feature `rpc` (`ChainClient`, `rpc/mod.rs`):
//!
//! - `keyfile.rs`: Solana CLI keypair files.
//! - `rpc/sender.rs`: the transport; a call an endpoint refuses for load
//!   (429, 502 to 504, a node behind) is asked again with backoff and
//!   jitter, a refused connection a few times.
//! - `rpc/send.rs`: signing, sending, confirming. Sent with
//!   `maxRetries: 0` and again every 2 s until it lands or its blockhash
//!   expires, then re-signed; `ChainClient::warm` fetches a blockhash ahead
//!   of a send. `rpc/blockhash.rs`: one blockhash held 20 s, shared by a
//!   client's clones. `rpc/notices.rs`: confirmation by a
//!   `signatureSubscribe` made before sending, one websocket per client.
//!   `rpc/statuses.rs`: status polls shared by every waiting transaction,
//!   where no websocket can be had.
//! - `rpc/error.rs`: what failed, named after the program that raised it.
//! - `rpc/accounts.rs`: reading and finding accounts; `ChainClient::node_job`
//!   reads a node and the job it holds in one `getMultipleAccounts`,
//!   `checks_named` reads Verification accounts by address.
//! - `rpc/history.rs`: an account's events (`ChainClient::account_history`).
//! - `rpc/watch.rs`: following one account; `follow_account` makes its
//!   `accountSubscribe` again whenever it drops and never polls.
//! - `rpc/index.rs`: `ProgramIndex`, the program's accounts in memory: a
//!   subscription made first, then one `getProgramAccounts` per account
//!   kind, merged by slot so no update replaces a newer one; not live (and
//!   resynced) while the stream is down; backfilled every 5 minutes to drop
//!   closed accounts; jobs not settled (`rpc::settled`) kept apart.
//!   Its stream (`IndexSource`): `rpc/index_websocket.rs`, or Yellowstone
//!   gRPC in `rpc/yellowstone.rs` (feature `yellowstone`).
//! - `rpc/deploy.rs`: deploying an ELF by the upgradeable loader's
//!   transactions (`mcjs admin deploy`, and every local chain).
//! - `rpc/local.rs`: the local chain's cheat codes, feature `local-chain`,
//!   which only tests enable.

pub mod challenge;
pub mod compute;
pub mod decode;
pub mod errors;
pub mod events;
pub mod history;
pub mod ix;
mod job_accounts;
#[cfg(feature = "rpc")]
pub mod keyfile;
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
