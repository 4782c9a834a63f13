//! Scarcity-aware job placement for MCJS.
//!
//! A pure, deterministic core: (queued jobs, fleet, expected demand, now) -> placements and an
//! explanation for every job left waiting. No I/O, no clocks, no unseeded randomness. The fleet
//! simulator in [`sim`] drives any [`PlacementPolicy`] over days of simulated time.

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
