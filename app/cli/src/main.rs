//! `mcjs`: the command line of the Managed Compute Job Scheduler.

mod cmd;
mod output;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::output::OutputFormat;

/// Exit codes: 0 ok, 1 the checked thing is false, 2 usage or runtime error.
pub const EXIT_OK: u8 = 0;
pub const EXIT_FALSE: u8 = 1;
pub const EXIT_ERROR: u8 = 2;

#[derive(Parser, Debug)]
#[command(
    name = "mcjs",
    version,
    about = "MCJS: checkpointed, fault-tolerant ML jobs on niche GPUs, settled on Solana"
)]
struct Cli {
    #[command(flatten)]
    global: GlobalArgs,
    #[command(subcommand)]
    command: Command,
}

/// Flags every subcommand accepts (Solana CLI conventions).
#[derive(clap::Args, Debug, Clone)]
pub struct GlobalArgs {
    /// Output format.
    #[arg(long, global = true, value_enum, default_value_t = OutputFormat::Display)]
    pub output: OutputFormat,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Job specifications: validate, hash, schema.
    Spec {
        #[command(subcommand)]
        cmd: cmd::spec::SpecCommand,
    },
    /// Hardware abstraction layer: probe this node, check its checkpoint capability, serve the HAL API.
    Hal {
        #[command(subcommand)]
        cmd: cmd::hal::HalCommand,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result: anyhow::Result<u8> = match cli.command {
        Command::Spec { cmd } => cmd::spec::run(cmd, &cli.global),
        Command::Hal { cmd } => cmd::hal::run(cmd, &cli.global),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(EXIT_ERROR)
        }
    }
}
