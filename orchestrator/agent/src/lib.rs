//! The MCJS node agent: one per provider host. It registers its node, watches
//! the chain for the jobs assigned to it, stages their data, runs their
//! containers under the job contract (docs/job-contract.md), checkpoints and
//! attests them, completes them, and stops at once when the chain fences it.
//!
//! * [`core`]: the decisions, a pure function of the chain's view, local
//!   events and `now`.
//! * [`shell`]: the async reconcile loop that carries them out.
//! * [`checking`]: the verification checks' decisions (which to take up,
//!   when an unavailable start is the answer), pure as the core is.
//! * [`chain`]: what the agent needs from the chain; [`rpc`] implements it.
//! * [`spec_store`], [`output`]: job specs and outputs in the store (from
//!   `mcjs_runtime`, which the owner's commands use without the agent).

pub mod chain;
pub mod checking;
pub mod core;
pub mod fault;
pub mod gpus;
pub mod inject;
pub mod metrics;
pub mod register;
pub mod rpc;
pub mod sequence;
pub mod shell;

pub use mcjs_runtime::staging::StagingPolicy;
pub use mcjs_runtime::volume::DiskBound;
pub use shell::{Agent, AgentConfig, AgentError};
// Specs and outputs in the store are the owner's as much as the node's:
// they live in the runtime, which the owner's commands use without the agent.
pub use mcjs_runtime::{output, spec_store};
pub use spec_store::{get_spec, put_spec};
