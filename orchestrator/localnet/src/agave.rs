//! Agave's own validator as the local chain: `solana-test-validator` (the
//! `agave-validator` package at the workspace's Solana version;
//! `scripts/agave.sh install` builds it), started as a child process with
//! its ledger under the local chain's directory, and the same setup as on
//! surfpool done through its RPC: SOL from its faucet, the program by the
//! loader's transactions, the mint, the wallets, the Config.
//!
//! What differs from surfpool, and what the rest of [`crate::Localnet`]
//! does about it: slots are produced by proof of history (the slot time is
//! set through `--ticks-per-slot`, at 6.25 ms a tick); a program is
//! invocable only from the slot after its deployment
//! (`ChainClient::deploy_program` waits for it); there are no cheat codes
//! (no `surfnet_timeTravel`, no `surfnet_setAccount`), so a chain that needs
//! accounts preloaded is refused.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mcjs_client::{ChainClient, Pubkey};

use crate::LocalnetError;

/// The environment variable naming the `solana-test-validator` binary that
/// `mcjs localnet` (and every cluster and demo that starts one) runs instead
/// of surfpool.
pub const VALIDATOR_VAR: &str = "MCJS_VALIDATOR";

/// Agave's proof of history ticks 160 times a second.
const TICK_MS_X100: u64 = 625;
/// Ports a validator binds beyond RPC, websocket, faucet and gossip (TPU,
/// TVU, repair, QUIC…): Agave asks for a range at least this wide.
const DYNAMIC_PORTS: u16 = 40;
/// How long a fresh ledger takes to serve RPC here: genesis, the first
/// snapshot and the faucet (seconds on 2 cores).
const START_WITHIN: Duration = Duration::from_secs(120);

/// A running `solana-test-validator`, stopped when dropped.
pub struct Validator {
    child: Child,
    log: PathBuf,
}

/// The ticks per slot that give `slot_time_ms` (rounded; at least 2).
pub fn ticks_per_slot(slot_time_ms: u64) -> u64 {
    ((slot_time_ms * 100 + TICK_MS_X100 / 2) / TICK_MS_X100).max(2)
}

/// The slot time `ticks` ticks per slot give, in milliseconds.
pub fn slot_time_ms(ticks: u64) -> u64 {
    ticks * TICK_MS_X100 / 100
}

impl Validator {
    /// Starts `binary` with a fresh ledger under `dir/ledger`, RPC on
    /// `rpc_port` (websocket on the next port), and waits until it serves.
    pub async fn start(
        binary: &Path,
        dir: &Path,
        rpc_port: u16,
        slot_time_ms: u64,
        geyser_plugins: &[PathBuf],
    ) -> Result<Validator, LocalnetError> {
        let ledger = dir.join("ledger");
        let log = dir.join("validator.log");
        let faucet_port = crate::free_port();
        let gossip_port = crate::free_port();
        let dynamic = crate::free_port_range(DYNAMIC_PORTS);
        let out = std::fs::File::create(&log).map_err(|source| LocalnetError::Write {
            path: log.clone(),
            source,
        })?;
        let err = out.try_clone().map_err(|source| LocalnetError::Write {
            path: log.clone(),
            source,
        })?;
        let mut cmd = Command::new(binary);
        cmd.arg("--ledger")
            .arg(&ledger)
            .args(["--reset", "--quiet"])
            .args(["--bind-address", "127.0.0.1"])
            .args(["--rpc-port", &rpc_port.to_string()])
            .args(["--faucet-port", &faucet_port.to_string()])
            .args(["--gossip-port", &gossip_port.to_string()])
            .args([
                "--dynamic-port-range",
                &format!("{dynamic}-{}", dynamic + DYNAMIC_PORTS),
            ])
            .args([
                "--ticks-per-slot",
                &ticks_per_slot(slot_time_ms).to_string(),
            ]);
        for plugin in geyser_plugins {
            cmd.arg("--geyser-plugin-config").arg(plugin);
        }
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| {
                LocalnetError::Start(format!(
                    "cannot run {} ({e}); `scripts/agave.sh install` builds it, or unset {VALIDATOR_VAR}",
                    binary.display()
                ))
            })?;
        let mut validator = Validator { child, log };
        validator
            .wait_serving(&format!("http://127.0.0.1:{rpc_port}"))
            .await?;
        Ok(validator)
    }

    async fn wait_serving(&mut self, rpc_url: &str) -> Result<(), LocalnetError> {
        let client = ChainClient::new(rpc_url);
        let deadline = Instant::now() + START_WITHIN;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(LocalnetError::Start(format!(
                    "solana-test-validator exited ({status}): {}",
                    self.log_tail()
                )));
            }
            // Serving once it has moved past genesis (the faucet answers by then).
            if matches!(client.rpc().get_slot().await, Ok(slot) if slot > 0) {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(LocalnetError::Start(format!(
                    "solana-test-validator did not serve RPC within {} s: {}",
                    START_WITHIN.as_secs(),
                    self.log_tail()
                )));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The end of the validator's own output, for an error.
    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(10)..].join("\n");
        format!("{} (the whole log: {})", tail.trim(), self.log.display())
    }

    /// Blocks until the validator exits.
    pub fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        self.child.wait()
    }

    /// Stops the validator (SIGKILL: its ledger is thrown away at the next
    /// start) and reaps it.
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Validator {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Gives each of `wallets` `lamports` from the validator's faucet, and
/// waits until every one holds them.
pub async fn airdrop(
    client: &ChainClient,
    wallets: &[Pubkey],
    lamports: u64,
) -> Result<(), LocalnetError> {
    let rpc = client.rpc();
    for wallet in wallets {
        rpc.request_airdrop(wallet, lamports)
            .await
            .map_err(|e| LocalnetError::Start(format!("the faucet refused {wallet}: {e}")))?;
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    for wallet in wallets {
        loop {
            let balance = rpc
                .get_balance_with_commitment(
                    wallet,
                    solana_commitment_config::CommitmentConfig::confirmed(),
                )
                .await
                .map(|r| r.value)
                .unwrap_or_default();
            if balance >= lamports {
                break;
            }
            if Instant::now() > deadline {
                return Err(LocalnetError::Start(format!(
                    "the faucet's SOL for {wallet} did not arrive within 60 s"
                )));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_times_map_to_ticks_and_back() {
        assert_eq!(ticks_per_slot(400), 64, "Agave's default slot");
        assert_eq!(slot_time_ms(64), 400);
        assert_eq!(ticks_per_slot(50), 8);
        assert_eq!(slot_time_ms(ticks_per_slot(50)), 50);
        assert_eq!(ticks_per_slot(1), 2, "never under two ticks");
    }
}
