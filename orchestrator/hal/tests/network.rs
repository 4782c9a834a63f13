//! The network probe against a local HTTP server.

use axum::Router;
use axum::routing::get;
use mcjs_hal::probe::network::{measure, measure_all};

#[tokio::test]
async fn a_reachable_target_gets_latency_status_and_throughput() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = Router::new().route("/blob", get(|| async { vec![7u8; 1 << 20] }));
    tokio::spawn(async move { axum::serve(listener, app).await });

    let m = measure("checkpoint_store", &format!("http://{addr}/blob")).await;
    assert_eq!(m.error, None);
    assert_eq!(m.http_status, Some(200));
    assert_eq!(m.http_bytes, Some(1 << 20));
    assert!(m.connect_ms.unwrap() > 0.0);
    assert!(m.http_ms.unwrap() > 0.0);
    assert!(m.throughput_mibps.unwrap() > 0.0);

    let missing = measure("rpc", &format!("http://{addr}/nothing")).await;
    assert_eq!(missing.http_status, Some(404));
    assert_eq!(missing.error, None);
}

#[tokio::test]
async fn unreachable_or_malformed_targets_are_recorded_not_raised() {
    // Bind then drop: the port is (almost surely) closed right after.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let targets = vec![
        ("rpc".to_string(), format!("http://127.0.0.1:{port}/")),
        ("checkpoint_store".to_string(), "not a url".to_string()),
        (
            "checkpoint_store".to_string(),
            "file:///var/lib/mcjs".to_string(),
        ),
    ];
    let out = measure_all(&targets).await;
    assert_eq!(out.len(), 3);
    assert!(
        out[0].error.as_deref().unwrap().contains("tcp connect"),
        "{:?}",
        out[0].error
    );
    assert!(out[1].error.as_deref().unwrap().contains("invalid url"));
    assert!(
        out[2]
            .error
            .as_deref()
            .unwrap()
            .contains("only http and https")
    );
    assert!(out.iter().all(|m| m.connect_ms.is_none()));
}
