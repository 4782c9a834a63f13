//! The program index over Yellowstone gRPC: the local chain loads the
//! Yellowstone Geyser plugin (as a validator does with
//! `--geyser-plugin-config`) and the index follows the plugin's `Subscribe`
//! stream.
//!
//! Run by hand: the plugin is a full agave build (see docs/scheduler.md,
//! "The index over Yellowstone gRPC"), so CI does not build it.
//! `MCJS_YELLOWSTONE_PLUGIN=/path/libyellowstone_grpc_geyser.so cargo test
//! -p mcjs-localnet --features yellowstone --test yellowstone -- --ignored`

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::{job, state_of, until_within};
use mcjs_client::rpc::yellowstone::YellowstoneSource;
use mcjs_client::rpc::{IndexSource, ProgramIndex};
use mcjs_client::{Signer, ix, pda};
use mcjs_localnet::{Localnet, LocalnetConfig, free_port_pair, read_keypair};
use solana_commitment_config::CommitmentLevel;

const PLUGIN_VAR: &str = "MCJS_YELLOWSTONE_PLUGIN";
/// The token the server asks of its clients, as a provider's does.
const TOKEN: &str = "mcjs-test-token";

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs the Yellowstone Geyser plugin built for the local chain: set MCJS_YELLOWSTONE_PLUGIN"]
async fn the_index_follows_the_program_over_yellowstone_grpc() {
    let plugin = PathBuf::from(std::env::var(PLUGIN_VAR).unwrap_or_else(|_| {
        panic!("set {PLUGIN_VAR} to the path of libyellowstone_grpc_geyser.so")
    }));
    assert!(plugin.is_file(), "{} is not a file", plugin.display());
    let dir = tempfile::tempdir().unwrap();
    let grpc_port = free_port_pair();
    let config = dir.path().join("yellowstone.json");
    std::fs::write(
        &config,
        serde_json::json!({
            "libpath": plugin.canonicalize().unwrap(),
            "log": { "level": "info" },
            "grpc": {
                "listen": [{ "address": format!("127.0.0.1:{grpc_port}") }],
                "x_token": TOKEN,
            },
        })
        .to_string(),
    )
    .unwrap();
    let localnet = Localnet::start(LocalnetConfig {
        rpc_port: free_port_pair(),
        dir: dir.path().to_path_buf(),
        slot_time_ms: 50,
        geyser_plugins: vec![config],
        ..LocalnetConfig::default()
    })
    .await
    .expect("the local chain starts with the plugin");
    let info = localnet.info().clone();
    let client = localnet.client();
    let mint = info.usdc_mint();
    let user = read_keypair(&info.wallets.user).unwrap();
    let user_token = ix::usdc_account(&user.pubkey(), &mint);
    let jobs: Vec<_> = [1, 2].map(|id| pda::job(&user.pubkey(), id)).into();
    let submit = |id| ix::submit_job(&user.pubkey(), &user_token, &mint, job(id));
    client.send(&[submit(1)], &[&user]).await.unwrap();

    // An index that never backfills after its first: what it learns after
    // that comes over gRPC. At `processed`: the plugin sends updates at a
    // higher commitment once it has assembled their block, and the local
    // chain's Geyser notices never complete one (it sends no `processed`
    // slot status), so only `processed` updates flow here.
    let endpoint = format!("http://127.0.0.1:{grpc_port}");
    let source = |token: Option<&str>| {
        YellowstoneSource::new(&endpoint, token.map(String::from), client.clone())
            .with_commitment(CommitmentLevel::Processed)
    };
    // A wrong token, or none, is refused with an error that says so.
    for token in [None, Some("not-the-token")] {
        let refused = match source(token).subscribe().await {
            Ok(_) => panic!("subscribed with token {token:?}"),
            Err(e) => e.to_string(),
        };
        assert!(
            refused.contains("Yellowstone gRPC Subscribe refused")
                && refused.contains("authentication"),
            "{refused}"
        );
    }
    let index = ProgramIndex::follow_every(source(Some(TOKEN)), Duration::from_secs(3_600));
    until_within(&index, "the backfill", 20, |s| {
        s.config().is_some() && state_of(s, &jobs[0]).is_some()
    })
    .await;
    let slot_at_backfill = index.read(|s| s.slot());

    client.send(&[submit(2)], &[&user]).await.unwrap();
    until_within(&index, "a job submitted after it started", 20, |s| {
        state_of(s, &jobs[1]).is_some()
    })
    .await;
    client
        .send(
            &[ix::cancel_job(&user.pubkey(), &jobs[1], &user_token, &mint)],
            &[&user],
        )
        .await
        .unwrap();
    until_within(&index, "the job cancelled", 20, |s| {
        state_of(s, &jobs[1]).is_some_and(|tag| tag != 0)
    })
    .await;
    // While nothing changes the pings' answers keep the stream live: it
    // does not fall silent (which would resubscribe and backfill).
    tokio::time::sleep(mcjs_client::rpc::INDEX_SILENT_AFTER + Duration::from_secs(1)).await;
    assert_eq!(index.read(|s| s.backfills), 1, "no backfill was needed");
    assert!(index.read(|s| s.updates) >= 2, "updates came over gRPC");
    assert!(
        index.read(|s| s.slot()) > slot_at_backfill,
        "updates carry the slot they were written at"
    );
}
