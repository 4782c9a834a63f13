//! The parts of the MCJS node agent that do not need the chain: the job
//! container runner, the checkpoint pipeline (detect, hash, store, restore),
//! data staging and checkpoint deadline tracking. The job contract they
//! implement is docs/job-contract.md.

pub mod brokered;
pub mod checkpoint;
pub mod confined;
pub mod contract;
pub mod deadline;
pub mod docker;
pub mod engine;
/// In-memory engine for testing code built on this crate (feature `fake`).
#[cfg(any(test, feature = "fake"))]
pub mod fake;
pub mod launch;
pub mod staging;
pub mod store;
pub mod volume;
