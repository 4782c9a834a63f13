//! How results reach the user: `Display` for people, `Serialize` for `--output json`.

use std::fmt::Display;

use serde::Serialize;

#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OutputFormat {
    /// Human-readable text.
    #[default]
    Display,
    /// Pretty-printed JSON.
    Json,
    /// One-line JSON.
    JsonCompact,
}

impl OutputFormat {
    /// Prints a result in the chosen format.
    pub fn print<T: Display + Serialize>(self, value: &T) -> anyhow::Result<()> {
        match self {
            OutputFormat::Display => println!("{value}"),
            OutputFormat::Json => println!("{}", serde_json::to_string_pretty(value)?),
            OutputFormat::JsonCompact => println!("{}", serde_json::to_string(value)?),
        }
        Ok(())
    }

    pub fn is_json(self) -> bool {
        !matches!(self, OutputFormat::Display)
    }
}
