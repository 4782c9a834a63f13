//! One module per subcommand.

pub mod admin;
pub mod agent;
pub mod audit;
pub mod dashboard;
pub mod demo;
pub mod hal;
pub mod job;
pub mod job_output;
pub mod localnet;
pub mod node;
pub mod provider;
pub mod scheduler;
pub mod spec;
