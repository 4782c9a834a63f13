//! `mcjs localnet`: a local Solana chain with the MCJS program, until Ctrl-C.

use std::fmt;
use std::path::PathBuf;

use anyhow::Context;
use mcjs_localnet::{Localnet, LocalnetConfig, LocalnetInfo, ProgramBuild};
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
    /// The program's SBF ELF (what scripts/build-sbf.sh prints), deployed by
    /// loader transactions as on a cluster. Without it the chain runs the
    /// native build of the program, which meters nothing.
    #[arg(long, env = "MCJS_PROGRAM_SO", value_name = "SO")]
    pub program: Option<PathBuf>,
    /// Run Agave's own validator (`solana-test-validator`, this path; built
    /// by `scripts/agave.sh install`) as the chain instead of surfpool. It
    /// runs the SBF ELF only (--program), at --slot-time-ms rounded to its
    /// 6.25 ms ticks.
    #[arg(long, env = mcjs_localnet::agave::VALIDATOR_VAR, value_name = "BINARY")]
    pub validator: Option<PathBuf>,
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
            program: match args.program.clone() {
                Some(path) => ProgramBuild::Elf(path),
                None => ProgramBuild::Native,
            },
            validator: args.validator.clone().filter(|p| !p.as_os_str().is_empty()),
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

/// How the program runs on the chain, for a person.
pub fn program_line(program: &mcjs_localnet::ProgramInfo) -> String {
    match (program.is_bytecode(), &program.elf, program.elf_bytes) {
        (true, Some(elf), Some(bytes)) => format!(
            "SBF bytecode, {bytes} bytes from {}, deployed by {} loader transactions in {:.1} s",
            elf.display(),
            program.deploy_transactions.unwrap_or_default(),
            program.deploy_ms.unwrap_or_default() as f64 / 1000.0
        ),
        _ => "native build registered as a builtin (nothing metered); \
              pass --program with the ELF of scripts/build-sbf.sh to run the bytecode"
            .into(),
    }
}

/// Where the next steps keep the node's profile and operator key.
const NODE_PROFILE: &str = "node.json";
const NODE_KEY: &str = "node-key.json";
/// What `node register` prints, for the agent's `--node`.
const NODE_PLACEHOLDER: &str = "<NODE>";

impl Started {
    /// What a newcomer runs next to see a job placed and run, each with what
    /// it does: the scheduler, a provider and its node, the node's agent, a
    /// job. Tested: each parses as the CLI's own command line.
    fn next_steps(&self) -> Vec<(&'static str, String)> {
        let i = &self.info;
        let w = &i.wallets;
        let url = &i.rpc_url;
        let provider = w
            .providers
            .first()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        vec![
            (
                "the scheduler: placement, failure detection, heartbeats, the store (.mcjs-store)",
                format!("mcjs -u {url} -k {} scheduler", w.scheduler.display()),
            ),
            (
                "a provider, staking 200 USDC",
                format!("mcjs -u {url} -k {provider} provider register --stake 200"),
            ),
            (
                "the node's operator key, what its agent signs with",
                format!("mcjs node keygen -o {NODE_KEY}"),
            ),
            (
                "the node's hardware (without a GPU here: cp examples/nodes/a100-sxm4-80gb-x4.json node.json)",
                format!("mcjs hal probe --output json > {NODE_PROFILE}"),
            ),
            (
                "the node, registered by the provider's wallet (prints the Node account)",
                format!(
                    "mcjs -u {url} -k {provider} node register --profile {NODE_PROFILE} --operator {NODE_KEY} --price 1.5"
                ),
            ),
            (
                "the node's agent, with the Node account printed above",
                format!(
                    "mcjs -u {url} agent run --node-key {NODE_KEY} --node {NODE_PLACEHOLDER} --profile {NODE_PROFILE} --scheduler http://127.0.0.1:7400"
                ),
            ),
            (
                "a job from the user's wallet, with a 100 USDC bond",
                format!(
                    "mcjs -u {url} -k {} job submit examples/specs/training-a100.json --bond 100",
                    w.user.display()
                ),
            ),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    /// Every step `mcjs localnet` prints is a command line the CLI accepts
    /// (its required flags given), in the order a newcomer runs them.
    #[test]
    fn the_printed_next_steps_are_command_lines_the_cli_accepts() {
        let started = Started {
            info: LocalnetInfo {
                rpc_url: "http://127.0.0.1:8899".into(),
                ws_url: "ws://127.0.0.1:8900".into(),
                program_id: "MCJS".into(),
                usdc_mint: "M".into(),
                usdc_decimals: 6,
                treasury: "T".into(),
                slot_time_ms: 400,
                wallets: mcjs_localnet::Wallets {
                    admin: "w/admin.json".into(),
                    scheduler: "w/scheduler.json".into(),
                    user: "w/user.json".into(),
                    providers: vec!["w/provider-1.json".into()],
                },
                program: Default::default(),
                chain: Default::default(),
            },
            info_file: "localnet.json".into(),
        };
        let steps = started.next_steps();
        let text = started.to_string();
        let node = mcjs_client::Pubkey::new_unique().to_string();
        // What `node keygen` wrote, where the later steps read it.
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join(NODE_KEY);
        mcjs_localnet::write_keypair(&key, &mcjs_client::Keypair::new()).unwrap();
        let key = key.display().to_string();
        for (_, step) in &steps {
            assert!(text.contains(step.as_str()), "printed: {step}");
            // The shell's redirection is not the CLI's.
            let words: Vec<&str> = step
                .split_whitespace()
                .take_while(|w| *w != ">")
                .map(|w| match w {
                    NODE_PLACEHOLDER => node.as_str(),
                    NODE_KEY if !step.contains("keygen") => key.as_str(),
                    w => w,
                })
                .collect();
            if let Err(e) = crate::Cli::try_parse_from(&words) {
                panic!("`{step}` is not a command line mcjs accepts:\n{e}");
            }
        }
        let order: Vec<&str> = steps
            .iter()
            .map(|(_, s)| {
                let after: Vec<&str> = s.split_whitespace().collect();
                let at = after
                    .iter()
                    .position(|w| {
                        ["scheduler", "provider", "node", "hal", "agent", "job"].contains(w)
                    })
                    .expect("a command");
                after[at]
            })
            .collect();
        assert_eq!(
            order,
            [
                "scheduler",
                "provider",
                "node",
                "hal",
                "node",
                "agent",
                "job"
            ]
        );
    }
}

impl fmt::Display for Started {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let i = &self.info;
        let w = &i.wallets;
        writeln!(
            f,
            "MCJS local chain running ({})",
            match i.chain {
                mcjs_localnet::ChainKind::Surfpool => "surfpool",
                mcjs_localnet::ChainKind::Agave => "Agave's solana-test-validator",
            }
        )?;
        writeln!(f, "  RPC URL      {}", i.rpc_url)?;
        writeln!(f, "  websocket    {}", i.ws_url)?;
        writeln!(f, "  program      {}", i.program_id)?;
        writeln!(f, "               {}", program_line(&i.program))?;
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
        writeln!(f, "Next, each in its own terminal where it keeps running:")?;
        for (what, step) in self.next_steps() {
            writeln!(f, "  {step}")?;
            writeln!(f, "      {what}")?;
        }
        write!(f, "Ctrl-C stops the chain (its state is not kept).")
    }
}
