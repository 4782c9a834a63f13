//! Scarcity-aware job placement for MCJS.
//!
//! A pure, deterministic core: (queued jobs, fleet, expected demand, now) -> placements and an
//! explanation for every job left waiting. No I/O, no clocks, no unseeded randomness. The fleet
//! simulator in [`sim`] drives any [`PlacementPolicy`] over days of simulated time.
//!
//! # Map
//!
//! All of it is pure; the scheduler daemon converts chain accounts into its
//! inputs (`mcjs_scheduler_daemon::core`'s placement).
//!
//! - `types.rs`: the core's own inputs (nodes, jobs, `PlacementConfig`).
//! - `requirements.rs`: a job's hard requirements as the hardware class a
//!   node must offer: exact on discrete properties, geometric buckets on
//!   measured ones.
//! - `fleet.rs`: `FleetIndex`, the fleet grouped into hardware classes with
//!   the free nodes of each; `validate_node` refuses a node out of bounds.
//! - `plan.rs`: the policies: `ScarcityAware` (keeps rare hardware for the
//!   jobs that need it) and the `FirstFit` and `BestFit` baselines.
//!   `plan/explain.rs`: why a job waits. `plan/reliability.rs`: a node's
//!   chance of surviving the job's expected duration from its failures and
//!   hours in service (Gamma-Poisson with a fleet prior), weighed when
//!   `PlacementConfig::reliability` is on (off by default), never onto a
//!   class a narrower shape depends on.
//! - `sim.rs`, `sim/world.rs`, `sim/workload.rs`: the fleet simulator:
//!   per-node failure rates spread log-normally, crashes, partitions and power cuts
//!   with and without a UPS, drawn from a seed so every policy faces the
//!   same events.
//! - `bin/mcjs-fleet-sim.rs`: throughput and quality tables
//!   (`cargo run --release -p mcjs-scheduler --bin mcjs-fleet-sim -- --all`).

pub mod fleet;
pub mod plan;
pub mod requirements;
pub mod sim;
pub mod types;

pub use fleet::{FleetError, FleetIndex, validate_node};
pub use plan::reliability::{FailurePrior, ServiceRecord, survival_probability};
pub use plan::{
    Availability, BestFit, FirstFit, Placement, PlacementPolicy, Plan, PlanRequest, ScarcityAware,
    Unplaced, UnplacedJob,
};
pub use requirements::{
    HardwareClass, InvalidJob, Needs, Requirement, bucket_ceiling, bucket_floor,
};
pub use types::*;
