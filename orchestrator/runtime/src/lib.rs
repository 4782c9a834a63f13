//! The parts of the MCJS node agent that do not need the chain: the job
//! container runner, the checkpoint pipeline (detect, hash, store, restore),
//! data staging and checkpoint deadline tracking; and what a node and a job's
//! owner share in the store: specs by their hash (`spec_store`), a job's
//! output (`output`) and the caps a spec sets on what a job writes
//! (`limits`), so the owner's commands need nothing of the agent. The job
//! contract they implement is docs/job-contract.md.

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
pub mod limits;
pub mod logs;
pub mod output;
pub mod spec_store;
pub mod staging;
pub mod store;
pub mod volume;
