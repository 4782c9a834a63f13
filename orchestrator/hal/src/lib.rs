//! Hardware abstraction layer of MCJS.
//!
//! Probes turn a node (GPU vendor and driver, CPU, memory, OS, container runtime, checkpoint
//! storage, network) into one [`NodeProfile`]; [`checkpoint_capability`] answers whether the
//! node can write a checkpoint of a given size on a given schedule; [`readiness`] scores it;
//! [`api::router`] serves all of it over HTTP.

pub mod api;
pub mod capability;
pub mod normalize;
pub mod probe;
pub mod profile;
pub mod score;

pub use capability::{Capability, CapabilityError, checkpoint_capability};
pub use probe::{GpuProbe, ProbeConfig, probe_node};
pub use profile::{HardwareIdentity, HardwareSummary, NodeProfile};
pub use score::{Readiness, readiness};
