//! The heartbeat endpoint against a running server and a real HTTP client.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use mcjs_client::Pubkey;
use mcjs_scheduler_daemon::Liveness;
use mcjs_scheduler_daemon::metrics::Metrics;
use mcjs_scheduler_daemon::server::{ServerState, router};

async fn serve(now: Arc<AtomicI64>) -> (String, Arc<Mutex<Liveness>>) {
    let liveness = Arc::new(Mutex::new(Liveness::new(0)));
    let state = ServerState {
        liveness: liveness.clone(),
        metrics: Arc::new(Metrics::new()),
        clock: Arc::new(move || now.load(Ordering::SeqCst)),
        heartbeat_timeout_ms: 3_000,
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router(state)).await.unwrap() });
    (url, liveness)
}

#[tokio::test]
async fn heartbeats_are_recorded_by_the_schedulers_clock() {
    let now = Arc::new(AtomicI64::new(10_000));
    let (url, liveness) = serve(now.clone()).await;
    let node = Pubkey::new_from_array([7; 32]);
    let client = reqwest::Client::new();
    let body = serde_json::json!({
        "node": node.to_string(), "provider": "P", "agent_url": "http://x",
        "sent_at_unix_ms": 1, "jobs": []
    });
    let ack: serde_json::Value = client
        .post(format!("{url}/v1/heartbeat"))
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(ack["received_at_unix_ms"], 10_000);
    assert!(liveness.lock().unwrap().is_alive(&node, 13_000, 3_000));

    now.store(13_001, Ordering::SeqCst);
    let fleet: serde_json::Value = client
        .get(format!("{url}/v1/fleet"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(fleet["nodes"][0]["node"], node.to_string());
    assert_eq!(fleet["nodes"][0]["alive"], false);

    let metrics = client
        .get(format!("{url}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(metrics.contains("mcjs_heartbeats_total 1"), "{metrics}");
}

#[tokio::test]
async fn a_bad_heartbeat_gets_a_400_with_a_json_error_and_changes_nothing() {
    let now = Arc::new(AtomicI64::new(0));
    let (url, liveness) = serve(now).await;
    let client = reqwest::Client::new();
    for body in [
        serde_json::json!({"node": "not a key", "provider": "P", "agent_url": "u", "sent_at_unix_ms": 1, "jobs": []}),
        serde_json::json!({"node": "x"}),
        serde_json::json!({"node": Pubkey::new_from_array([1; 32]).to_string(), "provider": "P", "agent_url": "u", "sent_at_unix_ms": 1, "jobs": [], "extra": true}),
    ] {
        let response = client
            .post(format!("{url}/v1/heartbeat"))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 400);
        let error: serde_json::Value = response.json().await.unwrap();
        assert!(
            error["error"]
                .as_str()
                .unwrap()
                .starts_with("bad heartbeat")
        );
    }
    assert_eq!(liveness.lock().unwrap().nodes().count(), 0);
    let response = client.get(format!("{url}/nope")).send().await.unwrap();
    assert_eq!(response.status(), 404);
}
