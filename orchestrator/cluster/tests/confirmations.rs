//! How a transaction's confirmation reaches its client, counted at a
//! metered endpoint in front of the local chain: pushed over the websocket
//! (no status poll), or polled where no websocket can be had.

use std::time::Duration;

use anchor_lang::solana_program::system_instruction::transfer;
use mcjs_client::{ChainClient, Signer};
use mcjs_cluster::{Endpoint, EndpointProfile};
use mcjs_localnet::{Localnet, LocalnetConfig, free_port_pair, read_keypair};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confirmation_is_pushed_where_a_websocket_serves_and_polled_where_none_does() {
    let dir = tempfile::tempdir().unwrap();
    let localnet = Localnet::start(LocalnetConfig {
        rpc_port: free_port_pair(),
        dir: dir.path().to_path_buf(),
        slot_time_ms: 100,
        ..LocalnetConfig::default()
    })
    .await
    .expect("the local chain starts");
    let info = localnet.info().clone();
    let user = read_keypair(&info.wallets.user).unwrap();
    let to = read_keypair(&info.wallets.providers[0]).unwrap().pubkey();

    let metered = |ws: String| {
        let target = info.rpc_url.clone();
        async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let endpoint = Endpoint::open(listener, target, EndpointProfile::METERED)
                .await
                .unwrap();
            let client = ChainClient::with_ws(&endpoint.url(), &ws);
            (endpoint, client)
        }
    };
    let polls = |endpoint: &Endpoint| {
        endpoint
            .calls_by_method()
            .into_iter()
            .find(|(m, _)| m == "getSignatureStatuses")
            .map_or(0, |(_, n)| n)
    };

    let (pushed_at, pushed) = metered(info.ws_url.clone()).await;
    let (polled_at, polled) = metered("ws://127.0.0.1:1".into()).await;
    for lamports in [1_000, 2_000, 3_000] {
        tokio::time::timeout(
            Duration::from_secs(60),
            pushed.send(&[transfer(&user.pubkey(), &to, lamports)], &[&user]),
        )
        .await
        .expect("confirmed in time")
        .expect("the transfer lands");
        tokio::time::timeout(
            Duration::from_secs(60),
            polled.send(&[transfer(&user.pubkey(), &to, lamports + 1)], &[&user]),
        )
        .await
        .expect("confirmed in time")
        .expect("the transfer lands");
    }
    assert_eq!(
        polls(&pushed_at),
        0,
        "confirmed by notices, yet polled: {:?}",
        pushed_at.calls_by_method()
    );
    assert!(
        polls(&polled_at) >= 3,
        "no websocket, so each confirmation is polled: {:?}",
        polled_at.calls_by_method()
    );
}
