//! A JSON-RPC node faked over plain HTTP, for what a local chain will not
//! do on demand: refuse, drop, or answer with chosen values.
#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// An HTTP server on a free port: answers request number `n` (from 0),
/// whose body is `body`, with the whole response `respond(n, body)`; counts
/// the requests.
pub async fn serve(
    respond: impl Fn(usize, &str) -> String + Send + Sync + 'static,
) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(AtomicUsize::new(0));
    let count = seen.clone();
    let respond = Arc::new(respond);
    tokio::spawn(async move {
        loop {
            let (mut stream, _) = listener.accept().await.unwrap();
            let (count, respond) = (count.clone(), respond.clone());
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0u8; 8192];
                // The headers, then the body their Content-Length announces.
                let body = loop {
                    let n = stream.read(&mut buf).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    request.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&request).to_ascii_lowercase();
                    if let Some(end) = text.find("\r\n\r\n") {
                        let len = text
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .and_then(|v| v.trim().parse::<usize>().ok())
                            .unwrap_or(0);
                        if request.len() >= end + 4 + len {
                            break String::from_utf8_lossy(&request[end + 4..]).to_string();
                        }
                    }
                };
                let n = count.fetch_add(1, Ordering::SeqCst);
                // Off the runtime's workers: an answer made slow on purpose
                // (a thread sleep) must not stall the client's own timers.
                let respond = respond.clone();
                let Ok(response) = tokio::task::spawn_blocking(move || respond(n, &body)).await
                else {
                    return;
                };
                let _ = stream.write_all(response.as_bytes()).await;
                let _ = stream.shutdown().await;
            });
        }
    });
    (url, seen)
}

/// A 200 response carrying `json`.
pub fn ok_json(json: &str) -> String {
    format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{json}",
        json.len()
    )
}

/// A JSON-RPC node that answers each request with `answer(method, params)`.
pub async fn node(
    answer: impl Fn(&str, &serde_json::Value) -> serde_json::Value + Send + Sync + 'static,
) -> String {
    node_with_errors(move |method, params| Ok(answer(method, params))).await
}

/// A JSON-RPC node that answers each request with `answer(method, params)`:
/// a result, or an error's code and message.
pub async fn node_with_errors(
    answer: impl Fn(&str, &serde_json::Value) -> Result<serde_json::Value, (i64, String)>
    + Send
    + Sync
    + 'static,
) -> String {
    let (url, _) = serve(move |_, body| {
        let call: serde_json::Value = serde_json::from_str(body).unwrap();
        let reply = match answer(call["method"].as_str().unwrap_or(""), &call["params"]) {
            Ok(result) => serde_json::json!({"jsonrpc": "2.0", "id": call["id"], "result": result}),
            Err((code, message)) => serde_json::json!({"jsonrpc": "2.0", "id": call["id"],
                "error": {"code": code, "message": message}}),
        };
        ok_json(&reply.to_string())
    })
    .await;
    url
}
