//! A local Solana chain for MCJS that needs nothing but this repository.
//!
//! surfpool serves the Solana JSON-RPC API (HTTP and websocket) offline over
//! a LiteSVM, with the real SPL Token and Associated Token Account programs.
//! [`Localnet::start`] starts it and puts the MCJS program on it: its SBF
//! ELF ([`ProgramBuild::Elf`], what `scripts/build-sbf.sh` prints), deployed
//! by the upgradeable loader's transactions exactly as on a cluster (create a
//! buffer, write it, deploy; the admin wallet is the upgrade authority), or,
//! where no ELF is named, the native build registered as a builtin
//! ([`ProgramBuild::Native`]: quick to build, but nothing is metered and no
//! SBF limit applies). It then initialises the program (a local test USDC
//! mint with 6 decimals, a treasury, the Config) through ordinary
//! transactions, funds a set of wallets, and writes `localnet.json` so that
//! other processes find everything.
//!
//! With [`LocalnetConfig::validator`] (`MCJS_VALIDATOR`), the chain is
//! Agave's own `solana-test-validator` instead ([`agave`]), set up the same
//! way through its RPC.

pub mod agave;
mod ports;
mod setup;
pub use ports::{free_port, free_port_pair, free_port_range};
use setup::initialise;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender};
use mcjs::state::ConfigParams;
use mcjs_client::{ChainClient, ChainError, Keypair, Pubkey, Signer};
use serde::{Deserialize, Serialize};
use sha2::Digest as _;
use surfpool_core::surfnet::svm::{SurfnetSvm, SurfnetSvmConfig};
use surfpool_types::{RpcConfig, SimnetCommand, SimnetConfig, SimnetEvent, SurfpoolConfig};

/// One USDC in base units.
pub const USDC: u64 = 1_000_000;
pub const USDC_DECIMALS: u8 = 6;
/// Mainnet's slot time.
pub const DEFAULT_SLOT_TIME_MS: u64 = 400;
pub const DEFAULT_RPC_PORT: u16 = 8899;
pub const DEFAULT_DIR: &str = ".mcjs-localnet";
/// The file, under the localnet's directory, that describes it.
pub const INFO_FILE: &str = "localnet.json";

const SOL_PER_WALLET: u64 = 1_000 * 1_000_000_000;
const USER_USDC: u64 = 10_000 * USDC;
const PROVIDER_USDC: u64 = 1_000 * USDC;
const PROVIDERS: usize = 3;
/// SPL Token account sizes.
const MINT_LEN: usize = 82;
const TOKEN_ACCOUNT_LEN: usize = 165;

#[derive(Debug, thiserror::Error)]
pub enum LocalnetError {
    #[error(
        "port {port} is in use ({what}); pick another with --rpc-port (the websocket takes the next port)"
    )]
    PortInUse { port: u16, what: &'static str },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Keyfile(#[from] KeyfileError),
    #[error("{path} is not a localnet description: {source}")]
    Info {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("the local chain did not start: {0}")]
    Start(String),
    #[error("initialising the local chain failed: {0}")]
    Init(#[from] ChainError),
}

/// How to run the local chain.
#[derive(Debug, Clone)]
pub struct LocalnetConfig {
    /// JSON-RPC over HTTP; the websocket listens on the next port.
    pub rpc_port: u16,
    /// Where `localnet.json` and `wallets/` are written.
    pub dir: PathBuf,
    pub slot_time_ms: u64,
    /// The program's economics.
    pub params: ConfigParams,
    /// Which build of the program runs.
    pub program: ProgramBuild,
    /// Accounts the chain holds from its first slot, before the program is
    /// initialised (a bench's fleet: 100,000 accounts this way take
    /// seconds, where `surfnet_setAccount` slows as accounts grow).
    pub preload: Vec<(Pubkey, solana_account::Account)>,
    /// Geyser plugin configs (JSON with a `libpath`) the chain loads at
    /// start, as a validator's `--geyser-plugin-config`: a Yellowstone gRPC
    /// plugin serves the chain's updates over gRPC. The plugin must be
    /// built against the chain's `agave-geyser-plugin-interface` and rustc.
    pub geyser_plugins: Vec<PathBuf>,
    /// Agave's `solana-test-validator` binary to run as the chain instead
    /// of surfpool ([`agave`]); it runs the program's SBF ELF only.
    pub validator: Option<PathBuf>,
}

impl Default for LocalnetConfig {
    fn default() -> Self {
        Self {
            rpc_port: DEFAULT_RPC_PORT,
            dir: PathBuf::from(DEFAULT_DIR),
            slot_time_ms: DEFAULT_SLOT_TIME_MS,
            params: default_params(),
            program: ProgramBuild::from_env(),
            preload: Vec::new(),
            geyser_plugins: Vec::new(),
            validator: std::env::var_os(agave::VALIDATOR_VAR)
                .filter(|p| !p.is_empty())
                .map(PathBuf::from),
        }
    }
}

/// Which build of the MCJS program a local chain runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProgramBuild {
    /// The SBF ELF at this path, deployed by loader transactions.
    Elf(PathBuf),
    /// The program compiled for this machine, registered as a builtin: no
    /// compute metering, no SBF stack, heap or verifier.
    Native,
}

impl ProgramBuild {
    /// The ELF named by `MCJS_PROGRAM_SO` (see `mcjs_svm::PROGRAM_SO_VAR`),
    /// else the native build.
    pub fn from_env() -> Self {
        match std::env::var_os(mcjs_svm::PROGRAM_SO_VAR).filter(|p| !p.is_empty()) {
            Some(path) => ProgramBuild::Elf(path.into()),
            None => ProgramBuild::Native,
        }
    }
}

/// What runs as the MCJS program on a local chain (in `localnet.json`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ProgramInfo {
    /// `sbf`: the ELF, deployed by loader transactions; `native`: the
    /// builtin (nothing metered).
    pub build: String,
    pub elf: Option<PathBuf>,
    pub elf_bytes: Option<usize>,
    pub elf_sha256: Option<String>,
    /// The deployment's loader transactions (buffer writes included).
    pub deploy_transactions: Option<usize>,
    pub deploy_ms: Option<u64>,
}

/// Which chain serves a local chain's RPC (in `localnet.json`).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ChainKind {
    /// surfpool over LiteSVM, in process.
    #[default]
    Surfpool,
    /// Agave's `solana-test-validator`, a child process.
    Agave,
}

impl ProgramInfo {
    pub fn is_bytecode(&self) -> bool {
        self.build == "sbf"
    }
}

/// The keypair of the address the program declares (`declare_id!`), which
/// a local chain deploys it at; a cluster deployment uses its own
/// (migrations/README.md).
pub fn program_keypair() -> Keypair {
    let bytes: Vec<u8> = serde_json::from_str(include_str!(
        "../../../migrations/keys/mcjs-program-keypair.json"
    ))
    .expect("the program keypair file is a JSON byte array");
    Keypair::try_from(bytes.as_slice()).expect("the program keypair file holds a keypair")
}

/// The Config a local chain is initialised with.
pub fn default_params() -> ConfigParams {
    ConfigParams {
        commission_bps: 500,
        slash_amount: 5 * USDC,
        min_provider_stake: 100 * USDC,
        liveness_factor: 3,
        withdrawal_cooldown_secs: 900,
        // Every check runs on two nodes: on a small machine (three agents
        // on two cores) they fall behind the job by a couple of seconds an
        // interval, and must still answer within the window.
        challenge_window_secs: 120,
        verification_fee_bps: 2_000,
        draw_secs: 2,
        require_proven_hardware: false,
    }
}

/// The wallet files of a local chain (Solana CLI keypair files).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Wallets {
    pub admin: PathBuf,
    pub scheduler: PathBuf,
    pub user: PathBuf,
    /// Funded, not yet registered as providers.
    pub providers: Vec<PathBuf>,
}

/// What `localnet.json` holds.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct LocalnetInfo {
    pub rpc_url: String,
    pub ws_url: String,
    pub program_id: String,
    pub usdc_mint: String,
    pub usdc_decimals: u8,
    /// The token account that receives the commission.
    pub treasury: String,
    pub slot_time_ms: u64,
    pub wallets: Wallets,
    #[serde(default)]
    pub program: ProgramInfo,
    #[serde(default)]
    pub chain: ChainKind,
}

impl LocalnetInfo {
    /// Reads `DIR/localnet.json`.
    pub fn load(dir: &Path) -> Result<Self, LocalnetError> {
        let path = dir.join(INFO_FILE);
        let text = std::fs::read_to_string(&path).map_err(|source| LocalnetError::Read {
            path: path.clone(),
            source,
        })?;
        serde_json::from_str(&text).map_err(|source| LocalnetError::Info { path, source })
    }

    pub fn usdc_mint(&self) -> Pubkey {
        self.usdc_mint.parse().expect("written by Localnet::start")
    }

    pub fn treasury(&self) -> Pubkey {
        self.treasury.parse().expect("written by Localnet::start")
    }
}

/// Keypair files, as every MCJS command reads and writes them.
pub use mcjs_client::keyfile::{KeyfileError, read_keypair, write_keypair};
/// The account type [`LocalnetConfig::preload`] takes.
pub use solana_account::Account;

/// The keypair at `path`, created there first when absent, so that a
/// restarted local chain keeps its addresses.
fn keypair_at(path: &Path) -> Result<Keypair, LocalnetError> {
    if path.exists() {
        Ok(read_keypair(path)?)
    } else {
        let keypair = Keypair::new();
        write_keypair(path, &keypair)?;
        Ok(keypair)
    }
}

fn check_port(port: u16, what: &'static str) -> Result<(), LocalnetError> {
    TcpListener::bind(("127.0.0.1", port))
        .map(drop)
        .map_err(|_| LocalnetError::PortInUse { port, what })
}

/// A running local chain. Dropping it stops the chain.
pub struct Localnet {
    info: LocalnetInfo,
    dir: PathBuf,
    chain: Chain,
}

/// What serves the chain.
enum Chain {
    Surfpool {
        commands: Sender<SimnetCommand>,
        runloop: Option<JoinHandle<Result<(), String>>>,
    },
    Agave(agave::Validator),
}

/// The wallets a local chain funds, read from (or first written to) its
/// `wallets/` directory.
struct Keys {
    admin: Keypair,
    scheduler: Keypair,
    user: Keypair,
    providers: Vec<Keypair>,
    mint: Keypair,
    treasury: Keypair,
}

impl Keys {
    fn at(wallets_dir: &Path) -> Result<Keys, LocalnetError> {
        Ok(Keys {
            admin: keypair_at(&wallets_dir.join("admin.json"))?,
            scheduler: keypair_at(&wallets_dir.join("scheduler.json"))?,
            user: keypair_at(&wallets_dir.join("user.json"))?,
            providers: (1..=PROVIDERS)
                .map(|i| keypair_at(&wallets_dir.join(format!("provider-{i}.json"))))
                .collect::<Result<Vec<_>, _>>()?,
            // The mint and treasury are keypair accounts too; keeping their
            // keys keeps the local USDC address stable across restarts.
            mint: keypair_at(&wallets_dir.join("usdc-mint.json"))?,
            treasury: keypair_at(&wallets_dir.join("treasury.json"))?,
        })
    }

    /// The wallets that get SOL.
    fn funded(&self) -> Vec<Pubkey> {
        let mut wallets = vec![
            self.admin.pubkey(),
            self.scheduler.pubkey(),
            self.user.pubkey(),
        ];
        wallets.extend(self.providers.iter().map(|p| p.pubkey()));
        wallets
    }
}

impl Localnet {
    /// Starts the chain, initialises the program and the wallets, and
    /// writes `DIR/localnet.json`. Returns once every setup transaction is confirmed.
    pub async fn start(config: LocalnetConfig) -> Result<Localnet, LocalnetError> {
        let ws_port = config
            .rpc_port
            .checked_add(1)
            .ok_or(LocalnetError::PortInUse {
                port: config.rpc_port,
                what: "no port after it for the websocket",
            })?;
        check_port(config.rpc_port, "JSON-RPC")?;
        check_port(ws_port, "websocket")?;

        let wallets_dir = config.dir.join("wallets");
        let keys = Keys::at(&wallets_dir)?;
        let info = LocalnetInfo {
            rpc_url: format!("http://127.0.0.1:{}", config.rpc_port),
            ws_url: format!("ws://127.0.0.1:{ws_port}"),
            program_id: mcjs::ID.to_string(),
            usdc_mint: keys.mint.pubkey().to_string(),
            usdc_decimals: USDC_DECIMALS,
            treasury: keys.treasury.pubkey().to_string(),
            slot_time_ms: config.slot_time_ms,
            wallets: Wallets {
                admin: wallets_dir.join("admin.json"),
                scheduler: wallets_dir.join("scheduler.json"),
                user: wallets_dir.join("user.json"),
                providers: (1..=PROVIDERS)
                    .map(|i| wallets_dir.join(format!("provider-{i}.json")))
                    .collect(),
            },
            program: ProgramInfo {
                build: "native".into(),
                ..ProgramInfo::default()
            },
            chain: ChainKind::Surfpool,
        };
        let elf = match &config.program {
            ProgramBuild::Native => None,
            ProgramBuild::Elf(path) => {
                Some(std::fs::read(path).map_err(|source| LocalnetError::Read {
                    path: path.clone(),
                    source,
                })?)
            }
        };
        let mut localnet = match &config.validator {
            Some(binary) => Self::start_agave(&config, binary, info, &keys, elf.is_some()).await?,
            None => Self::start_surfpool(&config, info, &keys).await?,
        };
        let client = localnet.client();
        if let (Some(elf), ProgramBuild::Elf(path)) = (&elf, &config.program) {
            let started = std::time::Instant::now();
            let admin = &keys.admin;
            let deployed = client
                .deploy_program(
                    admin,
                    &program_keypair(),
                    elf,
                    &admin.pubkey(),
                    &|written, total| {
                        tracing::info!(written, total, "localnet: program buffer chunks written")
                    },
                )
                .await?;
            localnet.info.program = ProgramInfo {
                build: "sbf".into(),
                elf: Some(path.clone()),
                elf_bytes: Some(elf.len()),
                elf_sha256: Some(hex::encode(sha2::Sha256::digest(elf))),
                deploy_transactions: Some(deployed.writes + 2),
                deploy_ms: Some(started.elapsed().as_millis() as u64),
            };
        }
        initialise(
            &client,
            &keys.admin,
            &keys.scheduler,
            &keys.mint,
            &keys.treasury,
            &[&keys.user],
            &keys.providers.iter().collect::<Vec<_>>(),
            config.params,
        )
        .await?;

        let path = localnet.dir.join(INFO_FILE);
        let json = serde_json::to_string_pretty(&localnet.info).expect("info serialises");
        std::fs::write(&path, json).map_err(|source| LocalnetError::Write { path, source })?;
        Ok(localnet)
    }

    /// surfpool in this process, the wallets funded from its first slot.
    async fn start_surfpool(
        config: &LocalnetConfig,
        info: LocalnetInfo,
        keys: &Keys,
    ) -> Result<Localnet, LocalnetError> {
        let surfpool = SurfpoolConfig {
            simnets: vec![SimnetConfig {
                offline_mode: true,
                remote_rpc_url: None,
                slot_time: config.slot_time_ms,
                airdrop_addresses: keys.funded(),
                airdrop_token_amount: SOL_PER_WALLET,
                // Profiling re-executes every instruction in a sandbox; the
                // local chain has no use for it.
                instruction_profiling_enabled: false,
                log_bytes_limit: None,
                ..SimnetConfig::default()
            }],
            rpc: RpcConfig {
                bind_host: "127.0.0.1".into(),
                bind_port: config.rpc_port,
                ws_port: config.rpc_port + 1,
                ..RpcConfig::default()
            },
            plugin_config_path: config.geyser_plugins.clone(),
            ..SurfpoolConfig::default()
        };
        let (mut svm, events, geyser) = SurfnetSvm::new(SurfnetSvmConfig {
            slot_time: config.slot_time_ms,
            instruction_profiling_enabled: false,
            log_bytes_limit: None,
            ..SurfnetSvmConfig::default()
        })
        .map_err(|e| LocalnetError::Start(e.to_string()))?;
        for (key, account) in &config.preload {
            svm.set_account(key, account.clone())
                .map_err(|e| LocalnetError::Start(format!("cannot preload {key}: {e}")))?;
        }
        if config.program == ProgramBuild::Native {
            mcjs_svm::add_mcjs_program(&mut svm.inner.svm);
        }

        let (commands_tx, commands_rx) = crossbeam_channel::unbounded();
        let (ready_tx, ready_rx) = crossbeam_channel::bounded(1);
        drain_events(events, ready_tx);

        let runloop_commands = commands_tx.clone();
        let runloop = std::thread::Builder::new()
            .name("localnet".into())
            .spawn(move || {
                // surfpool takes its locks with `block_in_place`, which needs
                // a multi-threaded runtime of its own.
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .map_err(|e| e.to_string())?;
                runtime
                    .block_on(surfpool_core::start_local_surfnet(
                        svm,
                        surfpool,
                        runloop_commands,
                        commands_rx,
                        geyser,
                    ))
                    .map_err(|e| e.to_string())
            })
            .map_err(|e| LocalnetError::Start(e.to_string()))?;

        let mut localnet = Localnet {
            info,
            dir: config.dir.clone(),
            chain: Chain::Surfpool {
                commands: commands_tx,
                runloop: Some(runloop),
            },
        };
        localnet.wait_ready(ready_rx).await?;
        Ok(localnet)
    }

    /// Agave's validator as a child process, the wallets funded from its
    /// faucet. It runs bytecode only, and has no way to preload accounts.
    async fn start_agave(
        config: &LocalnetConfig,
        binary: &Path,
        mut info: LocalnetInfo,
        keys: &Keys,
        has_elf: bool,
    ) -> Result<Localnet, LocalnetError> {
        if !has_elf {
            return Err(LocalnetError::Start(format!(
                "Agave's validator runs the program's SBF build only: pass --program (or set {}) with the ELF scripts/build-sbf.sh prints",
                mcjs_svm::PROGRAM_SO_VAR
            )));
        }
        if !config.preload.is_empty() {
            return Err(LocalnetError::Start(
                "Agave's validator cannot preload accounts; run this chain on surfpool (unset MCJS_VALIDATOR)".into(),
            ));
        }
        let validator = agave::Validator::start(
            binary,
            &config.dir,
            config.rpc_port,
            config.slot_time_ms,
            &config.geyser_plugins,
        )
        .await?;
        info.chain = ChainKind::Agave;
        info.slot_time_ms = agave::slot_time_ms(agave::ticks_per_slot(config.slot_time_ms));
        let localnet = Localnet {
            info,
            dir: config.dir.clone(),
            chain: Chain::Agave(validator),
        };
        agave::airdrop(&localnet.client(), &keys.funded(), SOL_PER_WALLET).await?;
        Ok(localnet)
    }

    async fn wait_ready(&mut self, ready: Receiver<()>) -> Result<(), LocalnetError> {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            if ready.try_recv().is_ok() {
                return Ok(());
            }
            if let Chain::Surfpool { runloop, .. } = &mut self.chain
                && let Some(handle) = runloop.as_ref()
                && handle.is_finished()
            {
                let outcome = runloop.take().map(|h| h.join());
                return Err(LocalnetError::Start(match outcome {
                    Some(Ok(Err(message))) => message,
                    _ => "the chain stopped during startup".into(),
                }));
            }
            if std::time::Instant::now() > deadline {
                return Err(LocalnetError::Start(
                    "the chain was not ready within 60 s".into(),
                ));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    pub fn info(&self) -> &LocalnetInfo {
        &self.info
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn rpc_url(&self) -> &str {
        &self.info.rpc_url
    }

    /// A client of this chain (confirmations at `confirmed`).
    pub fn client(&self) -> ChainClient {
        ChainClient::with_ws(&self.info.rpc_url, &self.info.ws_url)
    }

    /// Blocks until the chain stops (it stops only when told to or on error).
    pub fn wait(mut self) -> Result<(), LocalnetError> {
        match &mut self.chain {
            Chain::Surfpool { runloop, .. } => match runloop.take().map(|h| h.join()) {
                Some(Ok(Err(message))) => Err(LocalnetError::Start(message)),
                Some(Err(_)) => Err(LocalnetError::Start("the chain's runloop panicked".into())),
                _ => Ok(()),
            },
            Chain::Agave(validator) => match validator.wait() {
                Ok(status) if status.success() => Ok(()),
                Ok(status) => Err(LocalnetError::Start(format!(
                    "solana-test-validator exited ({status})"
                ))),
                Err(e) => Err(LocalnetError::Start(e.to_string())),
            },
        }
    }

    /// Stops the chain and waits for its runloop to end.
    pub fn stop(mut self) {
        self.terminate();
    }

    fn terminate(&mut self) {
        match &mut self.chain {
            Chain::Surfpool { commands, runloop } => {
                let _ = commands.send(SimnetCommand::Terminate(None));
                if let Some(handle) = runloop.take() {
                    let deadline = std::time::Instant::now() + Duration::from_secs(10);
                    while !handle.is_finished() && std::time::Instant::now() < deadline {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    if handle.is_finished() {
                        let _ = handle.join();
                    }
                }
            }
            Chain::Agave(validator) => validator.stop(),
        }
    }
}

impl Drop for Localnet {
    fn drop(&mut self) {
        self.terminate();
    }
}

/// Reads the chain's events so that it never blocks on them; signals
/// readiness and reports errors through `tracing`.
fn drain_events(events: Receiver<SimnetEvent>, ready: Sender<()>) {
    let _ = std::thread::Builder::new()
        .name("localnet-events".into())
        .spawn(move || {
            while let Ok(event) = events.recv() {
                match event {
                    SimnetEvent::CoreStarted(_) => {
                        let _ = ready.try_send(());
                    }
                    SimnetEvent::ErrorLog(_, message) => tracing::warn!(%message, "localnet"),
                    _ => {}
                }
            }
        });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keypair_files_round_trip_and_a_malformed_one_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wallets/k.json");
        let keypair = Keypair::new();
        write_keypair(&path, &keypair).unwrap();
        assert_eq!(read_keypair(&path).unwrap().pubkey(), keypair.pubkey());
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(serde_json::from_str::<Vec<u8>>(&text).unwrap().len(), 64);

        std::fs::write(&path, "[1, 2, 3]").unwrap();
        let err = read_keypair(&path).unwrap_err().to_string();
        assert!(err.contains("is not a keypair file"), "{err}");
        std::fs::write(&path, "not json").unwrap();
        assert!(read_keypair(&path).is_err());
    }

    #[test]
    fn the_program_keypair_is_the_address_the_program_declares() {
        assert_eq!(program_keypair().pubkey(), mcjs::ID);
    }

    #[test]
    fn a_port_in_use_is_refused_before_anything_starts() {
        let taken = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = taken.local_addr().unwrap().port();
        let err = check_port(port, "JSON-RPC").unwrap_err().to_string();
        assert!(err.contains(&format!("port {port} is in use")), "{err}");
    }

    /// What Agave's validator cannot run is refused before it is started,
    /// with the way out; a validator that cannot be run is named.
    #[tokio::test]
    async fn a_chain_on_agave_refuses_what_it_cannot_run_and_names_a_missing_validator() {
        let dir = tempfile::tempdir().unwrap();
        let config = |program, preload: Vec<(Pubkey, Account)>| LocalnetConfig {
            rpc_port: free_port_pair(),
            dir: dir.path().join("chain"),
            program,
            preload,
            validator: Some(dir.path().join("no-such-solana-test-validator")),
            ..LocalnetConfig::default()
        };
        let elf = dir.path().join("mcjs.so");
        std::fs::write(&elf, b"not read before the validator starts").unwrap();

        let refusal = async |config: LocalnetConfig, why: &str| {
            Localnet::start(config).await.err().expect(why).to_string()
        };
        let err = refusal(
            config(ProgramBuild::Native, Vec::new()),
            "the native build cannot run on Agave",
        )
        .await;
        assert!(
            err.contains("SBF build only") && err.contains("--program"),
            "{err}"
        );

        let preload = vec![(Pubkey::new_unique(), Account::default())];
        let err = refusal(
            config(ProgramBuild::Elf(elf.clone()), preload),
            "Agave cannot preload accounts",
        )
        .await;
        assert!(
            err.contains("cannot preload") && err.contains("MCJS_VALIDATOR"),
            "{err}"
        );

        let err = refusal(
            config(ProgramBuild::Elf(elf), Vec::new()),
            "a validator that is not there",
        )
        .await;
        assert!(
            err.contains("no-such-solana-test-validator")
                && err.contains("scripts/agave.sh install"),
            "{err}"
        );
        assert!(
            !dir.path().join("chain").join(INFO_FILE).exists(),
            "no localnet.json for a chain that did not start"
        );
    }
}
