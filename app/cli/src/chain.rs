//! What every chain subcommand shares: the cluster URL and wallet resolved
//! from flags, the config file and defaults (Solana CLI conventions), the
//! chain client, and parsing of addresses and amounts.

use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow, bail};
use mcjs_client::{ChainClient, ChainError, Keypair, Pubkey, Signer};
use mcjs_spec::units::Usdc;

use crate::GlobalArgs;

pub const LOCALHOST_URL: &str = "http://127.0.0.1:8899";
pub const DEVNET_URL: &str = "https://api.devnet.solana.com";
pub const MAINNET_URL: &str = "https://api.mainnet-beta.solana.com";

/// A URL or one of Solana's monikers.
pub fn resolve_moniker(url: &str) -> String {
    match url {
        "localhost" | "l" => LOCALHOST_URL.into(),
        "devnet" | "d" => DEVNET_URL.into(),
        "mainnet-beta" | "m" => MAINNET_URL.into(),
        other => other.into(),
    }
}

/// The fields of a Solana CLI config file this CLI reads.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct CliConfig {
    pub json_rpc_url: Option<String>,
    pub websocket_url: Option<String>,
    pub keypair_path: Option<String>,
    /// MCJS keys: the deployment's store and scheduler.
    pub store_url: Option<String>,
    pub scheduler_url: Option<String>,
    /// What its transactions offer as priority fees, where not the
    /// client's default.
    pub fees: Option<mcjs_client::compute::FeePolicy>,
}

impl CliConfig {
    /// Reads a JSON or (flat, Solana-style) YAML config file.
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the config file {}", path.display()))?;
        Self::parse(&text).with_context(|| format!("config file {}", path.display()))
    }

    pub fn parse(text: &str) -> anyhow::Result<Self> {
        let mut config = CliConfig::default();
        if text.trim_start().starts_with('{') {
            let value: serde_json::Value = serde_json::from_str(text).context("not valid JSON")?;
            let get = |k: &str| value.get(k).and_then(|v| v.as_str()).map(str::to_string);
            config.json_rpc_url = get("json_rpc_url");
            config.websocket_url = get("websocket_url");
            config.keypair_path = get("keypair_path");
            config.store_url = get("store_url");
            config.scheduler_url = get("scheduler_url");
            return Ok(config);
        }
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') || line == "---" {
                continue;
            }
            let (key, value) = line.split_once(':').ok_or_else(|| {
                anyhow!(
                    "line {}: expected `key: value` (as in Solana's config.yml), found {line:?}",
                    n + 1
                )
            })?;
            let value = value
                .trim()
                .trim_matches(|c| c == '"' || c == '\'')
                .to_string();
            let value = (!value.is_empty()).then_some(value);
            match key.trim() {
                "json_rpc_url" => config.json_rpc_url = value,
                "websocket_url" => config.websocket_url = value,
                "keypair_path" => config.keypair_path = value,
                "store_url" => config.store_url = value,
                "scheduler_url" => config.scheduler_url = value,
                _ => {}
            }
        }
        Ok(config)
    }
}

fn home() -> PathBuf {
    std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from)
}

pub fn default_keypair_path() -> PathBuf {
    home().join(".config/solana/id.json")
}

fn expand_home(path: &str) -> PathBuf {
    match path.strip_prefix("~/") {
        Some(rest) => home().join(rest),
        None => PathBuf::from(path),
    }
}

/// Where this invocation talks to and who it signs as.
pub struct Ctx {
    pub url: String,
    pub ws_url: Option<String>,
    pub keypair_path: PathBuf,
    /// From the config file: the deployment's store and scheduler.
    pub store_url: Option<String>,
    pub scheduler_url: Option<String>,
    /// What its transactions offer as priority fees, where not the
    /// client's default.
    pub fees: Option<mcjs_client::compute::FeePolicy>,
}

impl Ctx {
    /// Flag, then config file, then default.
    pub fn resolve(global: &GlobalArgs) -> anyhow::Result<Self> {
        let config = match &global.config {
            Some(path) => CliConfig::load(path)?,
            None => CliConfig::default(),
        };
        let url = global
            .url
            .clone()
            .or(config.json_rpc_url)
            .map_or_else(|| LOCALHOST_URL.to_string(), |u| resolve_moniker(&u));
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            bail!(
                "--url {url:?} is neither an http(s) URL nor a moniker (localhost, devnet, mainnet-beta, or l, d, m)"
            );
        }
        let keypair_path = global
            .keypair
            .clone()
            .or_else(|| config.keypair_path.as_deref().map(expand_home))
            .unwrap_or_else(default_keypair_path);
        Ok(Self {
            url,
            ws_url: config.websocket_url.filter(|w| !w.is_empty()),
            keypair_path,
            store_url: config.store_url,
            scheduler_url: config.scheduler_url,
            fees: global
                .max_compute_unit_price
                .map(mcjs_client::compute::FeePolicy::with_ceiling),
        })
    }

    pub fn client(&self) -> ChainClient {
        let client = match &self.ws_url {
            Some(ws) => ChainClient::with_ws(&self.url, ws),
            None => ChainClient::new(&self.url),
        };
        match self.fees {
            Some(fees) => client.with_fees(fees),
            None => client,
        }
    }

    /// The signing wallet, with an explanation of how to get one when missing.
    pub fn wallet(&self) -> anyhow::Result<Keypair> {
        read_wallet(&self.keypair_path)
    }
}

pub fn read_wallet(path: &Path) -> anyhow::Result<Keypair> {
    if !path.exists() {
        bail!(
            "no wallet at {}: create one with `solana-keygen new -o {}`, or pass another with -k/--keypair \
             (a local chain started with `mcjs localnet` writes funded wallets to .mcjs-localnet/wallets/)",
            path.display(),
            path.display()
        );
    }
    mcjs_client::keyfile::read_keypair(path).map_err(|e| anyhow!("{e}"))
}

/// A base-58 address, named in the error when malformed.
pub fn parse_pubkey(text: &str, what: &str) -> anyhow::Result<Pubkey> {
    text.parse().map_err(|_| {
        anyhow!("{what} {text:?} is not a Solana address (base-58, 32 bytes, e.g. the output of `mcjs job submit`)")
    })
}

/// A USDC amount such as "100" or "12.5", exactly, in base units.
pub fn parse_usdc(text: &str) -> Result<u64, String> {
    text.parse::<Usdc>()
        .map(Usdc::base_units)
        .map_err(|e| e.to_string())
}

pub fn usdc(base_units: u64) -> String {
    Usdc(base_units).to_string()
}

pub fn now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// Checks, before sending anything, that the wallet can pay `usdc` and the fees.
pub async fn require_funds(
    client: &ChainClient,
    wallet: &Keypair,
    token_account: &Pubkey,
    usdc_needed: u64,
) -> anyhow::Result<()> {
    let lamports = client.sol_balance(&wallet.pubkey()).await?;
    if lamports < 10_000 {
        bail!(
            "insufficient funds: the wallet {} holds {} lamports of SOL, too few for the fees; fund it with SOL first",
            wallet.pubkey(),
            lamports
        );
    }
    if usdc_needed == 0 {
        return Ok(());
    }
    let held = match client.token_balance(token_account).await {
        Ok(held) => held,
        Err(ChainError::NotFound { .. }) => bail!(
            "insufficient funds: the wallet {} has no USDC account ({token_account}); it needs {} USDC",
            wallet.pubkey(),
            usdc(usdc_needed)
        ),
        Err(e) => return Err(e.into()),
    };
    if held < usdc_needed {
        bail!(
            "insufficient funds: the wallet {} holds {} USDC, {} USDC are needed",
            wallet.pubkey(),
            usdc(held),
            usdc(usdc_needed)
        );
    }
    Ok(())
}

pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    crate::cmd::hal::runtime()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn solana_yaml_and_json_configs_are_read() {
        let yaml = "---\njson_rpc_url: \"http://127.0.0.1:9999\"\nwebsocket_url: ''\nkeypair_path: /tmp/k.json\ncommitment: confirmed\n";
        let config = CliConfig::parse(yaml).unwrap();
        assert_eq!(
            config.json_rpc_url.as_deref(),
            Some("http://127.0.0.1:9999")
        );
        assert_eq!(config.websocket_url, None);
        assert_eq!(config.keypair_path.as_deref(), Some("/tmp/k.json"));
        let json = r#"{"json_rpc_url": "devnet", "keypair_path": "/k"}"#;
        let config = CliConfig::parse(json).unwrap();
        assert_eq!(config.json_rpc_url.as_deref(), Some("devnet"));
    }

    #[test]
    fn monikers_resolve_to_cluster_urls() {
        assert_eq!(resolve_moniker("l"), LOCALHOST_URL);
        assert_eq!(resolve_moniker("devnet"), DEVNET_URL);
        assert_eq!(resolve_moniker("m"), MAINNET_URL);
        assert_eq!(resolve_moniker("http://x:1"), "http://x:1");
    }

    #[test]
    fn usdc_amounts_parse_exactly() {
        assert_eq!(parse_usdc("100"), Ok(100_000_000));
        assert_eq!(parse_usdc("12.5"), Ok(12_500_000));
        assert!(parse_usdc("12.5000001").is_err());
        assert!(parse_usdc("-1").is_err());
    }
}
