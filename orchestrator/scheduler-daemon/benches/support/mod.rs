//! What the scheduler's benches share: accounts as the program writes them,
//! a local chain preloaded with them, and an endpoint in front of it.

use anchor_lang::{AccountSerialize, Space};
use mcjs_client::{PROGRAM_ID, Pubkey};
use mcjs_cluster::{Endpoint, EndpointProfile, Link};
use mcjs_localnet::{Localnet, LocalnetConfig, LocalnetInfo, free_port_pair};

/// `var` as a count, else `default`.
pub fn count(var: &str, default: usize) -> usize {
    std::env::var(var)
        .ok()
        .and_then(|v| v.replace('_', "").parse().ok())
        .unwrap_or(default)
}

pub fn now_ms() -> i64 {
    (mcjs_scheduler_daemon::server::system_clock())()
}

/// An account's data as the program writes it, at the size it allocates.
pub fn data<T: AccountSerialize + Space>(account: &T) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + T::INIT_SPACE);
    account.try_serialize(&mut out).expect("serializes");
    out.resize(out.len().max(8 + T::INIT_SPACE), 0);
    out
}

/// A program account holding `data`.
pub fn program_account(data: Vec<u8>) -> mcjs_localnet::Account {
    mcjs_localnet::Account {
        lamports: 10_000_000,
        data,
        owner: PROGRAM_ID,
        executable: false,
        rent_epoch: 0,
    }
}

/// A local chain with 400 ms slots holding `preload` from its first slot.
pub async fn start_chain(
    preload: Vec<(Pubkey, mcjs_localnet::Account)>,
) -> (Localnet, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let localnet = Localnet::start(LocalnetConfig {
        rpc_port: free_port_pair(),
        dir: dir.path().to_path_buf(),
        slot_time_ms: 400,
        preload,
        ..LocalnetConfig::default()
    })
    .await
    .expect("the local chain starts with the fleet");
    (localnet, dir)
}

/// An endpoint with `profile` in front of the chain, and at its port + 1
/// (where a process finds the websocket beside an RPC URL) a link to the
/// chain's websocket, counting its bytes.
pub async fn endpoint_to(info: &LocalnetInfo, profile: EndpointProfile) -> (Endpoint, Link) {
    let ws: std::net::SocketAddr = info
        .ws_url
        .trim_start_matches("ws://")
        .parse()
        .expect("the chain's websocket address");
    let port = free_port_pair();
    let endpoint = Endpoint::open(
        tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .unwrap(),
        info.rpc_url.clone(),
        profile,
    )
    .await
    .unwrap();
    let link = Link::open(
        tokio::net::TcpListener::bind(("127.0.0.1", port + 1))
            .await
            .unwrap(),
        ws,
    )
    .await
    .unwrap();
    (endpoint, link)
}
