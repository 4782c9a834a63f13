//! MCJS ledger analytics: what the chain's history alone says about a job,
//! a node, a provider and the network. Pure: each function takes the
//! histories (`mcjs_client::history::HistoryEntry`, read by
//! `ChainClient::account_history`) and the accounts it needs, and reads
//! nothing itself; the CLI (`mcjs audit`, `mcjs node show`) and the
//! dashboard read the chain and call them.
//!
//! # Map
//!
//! - `audit.rs`: a job's history replayed and its checkpoint hash chain
//!   recomputed against the attested hashes ([`audit::audit_job`]); a
//!   provider's slashes and failure reports ([`audit::audit_provider`]).
//! - `reliability.rs`: a node's and a provider's record (completions,
//!   failures by cause, verifications, uptime) from their histories
//!   ([`reliability::node_reliability`]).
//! - `completion.rs`: the network's completion rate over a window, from
//!   job accounts and their histories ([`completion::job_ends`]).

pub mod audit;
pub mod completion;
pub mod reliability;
