//! `mcjs localnet`: a local Solana chain with the MCJS program, until Ctrl-C.

use std::fmt;
use std::path::PathBuf;

use anyhow::Context;
use mcjs_localnet::{Localnet, LocalnetConfig, LocalnetInfo};
use serde::Serialize;

use crate::{EXIT_OK, GlobalArgs};

#[derive(clap::Args, Debug)]
pub struct LocalnetArgs {
    /// JSON-RPC port; the websocket listens on the next one.
    #[arg(long, default_value_t = mcjs_localnet::DEFAULT_RPC_PORT)]
    pub rpc_port: u16,
    /// Directory for localnet.json and the wallets.
    #[arg(long, default_value = mcjs_localnet::DEFAULT_DIR)]
    pub dir: PathBuf,
    /// Slot time in milliseconds (mainnet: 400).
    #[arg(long, default_value_t = mcjs_localnet::DEFAULT_SLOT_TIME_MS)]
    pub slot_time_ms: u64,
}

pub fn run(args: LocalnetArgs, global: &GlobalArgs) -> anyhow::Result<u8> {
    if args.slot_time_ms == 0 {
        anyhow::bail!("--slot-time-ms must be at least 1");
    }
    let runtime = crate::chain::runtime()?;
    runtime.block_on(async {
        let config = LocalnetConfig {
            rpc_port: args.rpc_port,
            dir: args.dir.clone(),
            slot_time_ms: args.slot_time_ms,
            ..LocalnetConfig::default()
        };
        let localnet = Localnet::start(config)
            .await
            .context("cannot start the local chain")?;
        global.output.print(&Started {
            info: localnet.info().clone(),
            info_file: localnet.dir().join(mcjs_localnet::INFO_FILE),
        })?;
        tokio::signal::ctrl_c()
            .await
            .context("cannot wait for Ctrl-C")?;
        eprintln!("stopping the local chain");
        localnet.stop();
        Ok(EXIT_OK)
    })
}

#[derive(Serialize)]
struct Started {
    #[serde(flatten)]
    info: LocalnetInfo,
    info_file: PathBuf,
}

impl fmt::Display for Started {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let i = &self.info;
        let w = &i.wallets;
        writeln!(f, "MCJS local chain running")?;
        writeln!(f, "  RPC URL      {}", i.rpc_url)?;
        writeln!(f, "  websocket    {}", i.ws_url)?;
        writeln!(f, "  program      {}", i.program_id)?;
        writeln!(
            f,
            "  USDC mint    {} ({} decimals)",
            i.usdc_mint, i.usdc_decimals
        )?;
        writeln!(f, "  treasury     {}", i.treasury)?;
        writeln!(f, "  slot time    {} ms", i.slot_time_ms)?;
        writeln!(f, "  wallets      admin {}", w.admin.display())?;
        writeln!(f, "               scheduler {}", w.scheduler.display())?;
        writeln!(f, "               user {} (10000 USDC)", w.user.display())?;
        for p in &w.providers {
            writeln!(
                f,
                "               provider {} (1000 USDC, not registered)",
                p.display()
            )?;
        }
        writeln!(f, "  described in {}", self.info_file.display())?;
        writeln!(f)?;
        writeln!(f, "Next, in another terminal:")?;
        let url = &i.rpc_url;
        let p1 = w
            .providers
            .first()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        writeln!(f, "  mcjs -u {url} -k {p1} provider register --stake 200")?;
        writeln!(f, "  mcjs hal probe --output json > node.json")?;
        writeln!(
            f,
            "  mcjs -u {url} -k {p1} node register --profile node.json --price 1.5"
        )?;
        writeln!(
            f,
            "  mcjs -u {url} -k {} job submit examples/specs/training-a100.json --bond 100",
            w.user.display()
        )?;
        write!(f, "Ctrl-C stops the chain (its state is not kept).")
    }
}
