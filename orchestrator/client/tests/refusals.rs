//! A JSON-RPC endpoint that refuses calls under load (HTTP 429, 503), as
//! public ones do: the client asks again with backoff and gets the answer;
//! past its retries it fails with the refusal; an answer, even an error, is
//! never asked again.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

mod common;

use backon::ExponentialBuilder;
use common::{node, ok_json, serve};
use mcjs_client::rpc::{ChainClient, RETRIES, RetryingSender, RpcRefusal, refusal};
use solana_rpc_client::nonblocking::rpc_client::RpcClient;
use solana_rpc_client::rpc_client::RpcClientConfig;
use tokio::net::TcpListener;

/// An endpoint answering the first `refusals` requests with `refusal` (a
/// status line and headers), then every request with `answer` (a JSON body).
async fn endpoint(
    refusals: usize,
    refusal: &'static str,
    answer: &'static str,
) -> (String, Arc<AtomicUsize>) {
    serve(move |n, _| {
        if n < refusals {
            format!("{refusal}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        } else {
            ok_json(answer)
        }
    })
    .await
}

/// An RPC client over the retrying sender with millisecond backoff.
fn quick_client(url: &str) -> RpcClient {
    RpcClient::new_sender(
        RetryingSender::with_backoff(
            url,
            Duration::from_secs(5),
            ExponentialBuilder::default()
                .with_min_delay(Duration::from_millis(1))
                .with_max_delay(Duration::from_millis(5))
                .with_max_times(RETRIES),
        ),
        RpcClientConfig::default(),
    )
}

const SLOT: &str = r#"{"jsonrpc":"2.0","result":4242,"id":1}"#;
const OVERLOADED: &str = "HTTP/1.1 503 Service Unavailable";

#[tokio::test]
async fn a_call_rate_limited_past_the_senders_own_pauses_is_asked_again_until_answered() {
    // solana-client's sender pauses five times on a 429 by itself (for
    // `Retry-After`, here 0 s); the sixth and seventh refusals reach the
    // backoff, and the eighth request is answered.
    let (url, seen) = endpoint(7, "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 0", SLOT).await;
    let client = ChainClient::new(&url);
    assert_eq!(client.rpc().get_slot().await.unwrap(), 4242);
    assert_eq!(seen.load(Ordering::SeqCst), 8);
}

#[tokio::test]
async fn an_overloaded_endpoint_is_asked_again_up_to_the_retries_then_the_refusal_is_returned() {
    let (url, seen) = endpoint(usize::MAX, OVERLOADED, SLOT).await;
    let err = quick_client(&url).get_slot().await.unwrap_err();
    assert_eq!(refusal(err.kind()), RpcRefusal::Load, "{err}");
    assert!(err.to_string().contains("503"), "{err}");
    assert_eq!(seen.load(Ordering::SeqCst), RETRIES + 1);

    let (url, seen) = endpoint(3, OVERLOADED, SLOT).await;
    assert_eq!(quick_client(&url).get_slot().await.unwrap(), 4242);
    assert_eq!(seen.load(Ordering::SeqCst), 4);
}

#[tokio::test]
async fn an_answer_is_never_asked_again_even_an_error() {
    const INVALID: &str =
        r#"{"jsonrpc":"2.0","error":{"code":-32602,"message":"Invalid params"},"id":1}"#;
    let (url, seen) = endpoint(0, "", INVALID).await;
    let err = quick_client(&url).get_slot().await.unwrap_err();
    assert_eq!(refusal(err.kind()), RpcRefusal::Final, "{err}");
    assert_eq!(seen.load(Ordering::SeqCst), 1);

    // A 4xx other than 429 is an answer too.
    let (url, seen) = endpoint(usize::MAX, "HTTP/1.1 403 Forbidden", SLOT).await;
    quick_client(&url).get_slot().await.unwrap_err();
    assert_eq!(seen.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_refused_connection_is_reported_as_one() {
    // A port with nothing listening any more.
    let url = {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    let err = quick_client(&url).get_slot().await.unwrap_err();
    assert_eq!(refusal(err.kind()), RpcRefusal::Connection, "{err}");
}

/// A node that silently drops the first `sendTransaction` (as a congested
/// public endpoint does): the client sends the same transaction again, and
/// it lands once, with no new signature.
#[tokio::test]
async fn a_transaction_dropped_on_the_way_is_sent_again_as_it_is_until_it_lands() {
    use base64::Engine as _;
    use mcjs_client::{Keypair, Signature};
    use std::sync::Mutex;

    let sends = Arc::new(Mutex::new(Vec::<(String, serde_json::Value)>::new()));
    let seen = sends.clone();
    let url = node(move |method, params| {
        let context = serde_json::json!({"slot": 10});
        match method {
            "getLatestBlockhash" => serde_json::json!({"context": context, "value": {
                "blockhash": "4sGjMW1sUnHzSxGspuhpqLDx6wiyjNtZAMdL4VZHirAn",
                "lastValidBlockHeight": 1000}}),
            "isBlockhashValid" => serde_json::json!({"context": context, "value": true}),
            "getRecentPrioritizationFees" => serde_json::json!([]),
            "sendTransaction" => {
                let wire = base64::engine::general_purpose::STANDARD
                    .decode(params[0].as_str().unwrap())
                    .unwrap();
                let signature = Signature::try_from(&wire[1..65]).unwrap().to_string();
                seen.lock()
                    .unwrap()
                    .push((signature.clone(), params[1].clone()));
                serde_json::Value::String(signature)
            }
            "getSignatureStatuses" => {
                // Landed once it was sent twice: the first was dropped.
                let landed = seen.lock().unwrap().len() >= 2;
                let status = landed.then(|| {
                    serde_json::json!({"slot": 11, "confirmations": null, "err": null,
                        "status": {"Ok": null}, "confirmationStatus": "finalized"})
                });
                serde_json::json!({"context": context, "value": [status]})
            }
            other => panic!("unexpected call {other}"),
        }
    })
    .await;
    let payer = Keypair::new();
    let memo =
        mcjs_client::Instruction::new_with_bytes(mcjs_client::Pubkey::new_unique(), b"x", vec![]);
    let client = ChainClient::new(&url);
    let signature = client.send(&[memo], &[&payer]).await.unwrap();
    let sends = sends.lock().unwrap();
    assert_eq!(sends.len(), 2, "{sends:?}");
    assert!(sends.iter().all(|(s, _)| *s == signature.to_string()));
    // The node is asked not to queue it itself; the second skips preflight.
    assert_eq!(sends[0].1["maxRetries"], 0);
    assert_eq!(sends[1].1["skipPreflight"], true);
}
