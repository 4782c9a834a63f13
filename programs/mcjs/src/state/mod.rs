pub mod config;
pub mod job;
pub mod node;
pub mod provider;
pub mod seeds;
pub mod verification;

pub use config::*;
pub use job::*;
pub use node::*;
pub use provider::*;
pub use verification::*;
