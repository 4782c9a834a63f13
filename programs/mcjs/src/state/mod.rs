pub mod challenge;
pub mod config;
pub mod job;
pub mod job_counter;
pub mod lease;
pub mod node;
pub mod provider;
pub mod seeds;
pub mod verification;

pub use challenge::*;
pub use config::*;
pub use job::*;
pub use job_counter::*;
pub use lease::*;
pub use node::*;
pub use provider::*;
pub use verification::*;
