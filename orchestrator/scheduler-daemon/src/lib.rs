//! The MCJS scheduler daemon.
//!
//! [`core`] is the decision core: a pure function from what the chain says
//! (jobs, nodes), what the agents said (heartbeats) and `now` to the actions
//! to take (assign a job, report a failure). The async shell around it only
//! observes, calls the core, and sends the resulting transactions
//! ([`transactions`] resolves their accounts, [`chain::DaemonChain`] is all
//! it reads and writes, so rounds are tested over an in-memory chain); the chain
//! stays the source of truth, so a restarted daemon carries on where the
//! last one stopped and the program refuses anything done twice.

pub mod auth;
pub mod chain;
pub mod challenges;
pub mod core;
pub mod duties;
pub mod funds;
pub mod gateway;
pub mod index_stream;
pub mod lease;
pub mod liveness;
pub mod metrics;
pub mod node_views;
pub mod quota;
pub mod s3;
pub mod server;
pub mod shell;
pub mod sight;
pub mod standby;
pub mod store_gate;
pub mod transactions;
pub mod verify;
pub mod watch;

pub use crate::core::{
    AccountKind, Action, Decision, DetectorConfig, Observation, Skipped, reconcile,
};
pub use crate::liveness::Liveness;
/// The planner's knobs, as `DetectorConfig::placement` takes them.
pub use mcjs_scheduler::PlacementConfig;
