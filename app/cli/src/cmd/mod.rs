//! One module per subcommand.

pub mod spec;
