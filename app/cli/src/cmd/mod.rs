//! One module per subcommand.
pub mod hal;
