//! One module per subcommand.

pub mod hal;
pub mod spec;
