//! A JSON-RPC endpoint with a public endpoint's manners, put between one
//! process and the local chain: every call answered late, calls beyond a
//! rate refused with HTTP 429 (over all methods and per method, in a
//! sliding window, as public Solana endpoints do per client), and some
//! `sendTransaction` calls answered with the signature but never passed
//! on, as a congested endpoint drops transactions without saying so.
//!
//! Each process gets its own, as each machine has its own address and so
//! its own limits. Websocket traffic does not pass here (the process's
//! websocket goes to the next port, a plain [`crate::Link`]).

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use tokio::net::TcpListener;

/// How an endpoint treats its client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EndpointProfile {
    /// Added to every call before it is passed on.
    pub latency: Duration,
    /// The window the limits count calls in.
    pub window: Duration,
    /// Calls of any method answered per window; the rest get 429.
    pub calls_per_window: usize,
    /// Calls of one method answered per window; the rest get 429.
    pub calls_per_method: usize,
    /// Of every hundred `sendTransaction` calls, how many are answered with
    /// the signature and dropped, evenly spread, starting with the first.
    pub dropped_sends_percent: u64,
}

impl EndpointProfile {
    /// What the public mainnet endpoint documents per address (100 calls
    /// per 10 s, 40 per method), with 100 ms of latency and one send in ten
    /// dropped.
    pub const PUBLIC: EndpointProfile = EndpointProfile {
        latency: Duration::from_millis(100),
        window: Duration::from_secs(10),
        calls_per_window: 100,
        calls_per_method: 40,
        dropped_sends_percent: 10,
    };

    /// Every call passed on at once and counted: what a process asks of
    /// the chain, measured without changing it.
    pub const METERED: EndpointProfile = EndpointProfile {
        latency: Duration::ZERO,
        window: Duration::from_secs(10),
        calls_per_window: usize::MAX,
        calls_per_method: usize::MAX,
        dropped_sends_percent: 0,
    };

    /// The profile a name selects: `public` or `metered`.
    pub fn named(name: &str) -> Option<Self> {
        match name {
            "public" => Some(Self::PUBLIC),
            "metered" => Some(Self::METERED),
            _ => None,
        }
    }
}

/// What an endpoint did with the calls it got.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EndpointStats {
    /// Calls received (a batch counts each call in it).
    pub calls: u64,
    /// Calls refused with 429.
    pub refused: u64,
    /// `sendTransaction` calls answered and dropped.
    pub dropped_sends: u64,
    /// `sendTransaction` calls received.
    pub sends: u64,
    /// `getProgramAccounts` calls received: scans of the whole program.
    pub program_scans: u64,
}

#[derive(Default)]
struct Counters {
    calls: AtomicU64,
    refused: AtomicU64,
    dropped_sends: AtomicU64,
    sends: AtomicU64,
    program_scans: AtomicU64,
    /// Request bodies received and answer bodies sent, bytes.
    bytes_in: AtomicU64,
    bytes_out: AtomicU64,
    /// Calls received, by method.
    by_method: Mutex<HashMap<String, u64>>,
}

struct Shared {
    profile: EndpointProfile,
    target: String,
    http: reqwest::Client,
    /// When each answered call was let through, over all methods and by method.
    recent: Mutex<(VecDeque<Instant>, HashMap<String, VecDeque<Instant>>)>,
    counters: Counters,
    /// Down: every call answered 503, as a provider in an outage does.
    down: std::sync::atomic::AtomicBool,
}

/// A running endpoint: `listen` → the JSON-RPC server at `target`.
pub struct Endpoint {
    pub listen: SocketAddr,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Endpoint {
    /// Serves on `listener`, passing what it lets through to `target`
    /// (an `http://` URL).
    pub async fn open(
        listener: TcpListener,
        target: String,
        profile: EndpointProfile,
    ) -> std::io::Result<Self> {
        let listen = listener.local_addr()?;
        let shared = Arc::new(Shared {
            profile,
            target,
            http: reqwest::Client::new(),
            recent: Mutex::default(),
            counters: Counters::default(),
            down: Default::default(),
        });
        let app = axum::Router::new()
            .fallback(answer)
            .with_state(shared.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self {
            listen,
            shared,
            task,
        })
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.listen)
    }

    /// Takes the endpoint down (every call answered 503 Service
    /// Unavailable, counted as refused) or brings it back.
    pub fn set_down(&self, down: bool) {
        self.shared.down.store(down, Ordering::Relaxed);
    }

    /// Calls received by method, most first.
    pub fn calls_by_method(&self) -> Vec<(String, u64)> {
        let by_method = self
            .shared
            .counters
            .by_method
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let mut out: Vec<(String, u64)> = by_method.iter().map(|(m, n)| (m.clone(), *n)).collect();
        out.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        out
    }

    /// Bytes of the request bodies received and of the answers sent (HTTP
    /// bodies: what the calls and their answers weigh, headers aside).
    pub fn bytes(&self) -> (u64, u64) {
        let c = &self.shared.counters;
        (
            c.bytes_in.load(Ordering::Relaxed),
            c.bytes_out.load(Ordering::Relaxed),
        )
    }

    pub fn stats(&self) -> EndpointStats {
        let c = &self.shared.counters;
        EndpointStats {
            calls: c.calls.load(Ordering::Relaxed),
            refused: c.refused.load(Ordering::Relaxed),
            dropped_sends: c.dropped_sends.load(Ordering::Relaxed),
            sends: c.sends.load(Ordering::Relaxed),
            program_scans: c.program_scans.load(Ordering::Relaxed),
        }
    }
}

/// The method names of a JSON-RPC request body (one call or a batch).
fn methods(body: &serde_json::Value) -> Vec<String> {
    let calls = match body {
        serde_json::Value::Array(calls) => calls.iter().collect(),
        call => vec![call],
    };
    calls
        .into_iter()
        .map(|call| call["method"].as_str().unwrap_or_default().to_string())
        .collect()
}

impl Shared {
    /// Whether the limits let `methods` through now; counts them if so.
    fn admit(&self, methods: &[String]) -> bool {
        let now = Instant::now();
        let window = self.profile.window;
        let mut recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        let (all, by_method) = &mut *recent;
        let expire = |q: &mut VecDeque<Instant>| {
            while q.front().is_some_and(|t| now.duration_since(*t) >= window) {
                q.pop_front();
            }
        };
        expire(all);
        if all.len() + methods.len() > self.profile.calls_per_window {
            return false;
        }
        for method in methods {
            let q = by_method.entry(method.clone()).or_default();
            expire(q);
            let asked = methods.iter().filter(|m| *m == method).count();
            if q.len() + asked > self.profile.calls_per_method {
                return false;
            }
        }
        for method in methods {
            all.push_back(now);
            by_method.entry(method.clone()).or_default().push_back(now);
        }
        true
    }

    /// For a single `sendTransaction` this endpoint drops: the signature
    /// to answer with.
    fn dropped_send(&self, call: &serde_json::Value) -> Option<String> {
        if call["method"] != "sendTransaction" {
            return None;
        }
        let n = self.counters.sends.fetch_add(1, Ordering::Relaxed);
        // `percent` of every hundred, spread evenly and reproducibly, the
        // first send among them: a process that sends at all meets a drop.
        let percent = self.profile.dropped_sends_percent.min(100);
        if (n * percent) % 100 >= percent {
            return None;
        }
        let encoded = call["params"][0].as_str()?;
        let wire = match call["params"][1]["encoding"].as_str() {
            Some("base64") => base64::engine::general_purpose::STANDARD
                .decode(encoded)
                .ok()?,
            _ => bs58::decode(encoded).into_vec().ok()?,
        };
        // One signature (a short-vec length of 1), then its 64 bytes.
        let signature = mcjs_client::Signature::try_from(wire.get(1..65)?).ok()?;
        self.counters.dropped_sends.fetch_add(1, Ordering::Relaxed);
        Some(signature.to_string())
    }
}

fn json_response(status: StatusCode, body: Vec<u8>) -> Response {
    let mut response = (status, body).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

async fn answer(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    let call: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    let methods = methods(&call);
    shared
        .counters
        .bytes_in
        .fetch_add(body.len() as u64, Ordering::Relaxed);
    shared
        .counters
        .calls
        .fetch_add(methods.len() as u64, Ordering::Relaxed);
    let scans = methods
        .iter()
        .filter(|m| *m == "getProgramAccounts")
        .count();
    shared
        .counters
        .program_scans
        .fetch_add(scans as u64, Ordering::Relaxed);
    {
        let mut by_method = shared
            .counters
            .by_method
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        for m in &methods {
            *by_method.entry(m.clone()).or_default() += 1;
        }
    }
    tokio::time::sleep(shared.profile.latency).await;
    if shared.down.load(Ordering::Relaxed) {
        shared
            .counters
            .refused
            .fetch_add(methods.len() as u64, Ordering::Relaxed);
        return (StatusCode::SERVICE_UNAVAILABLE, "Service unavailable\n").into_response();
    }
    if !shared.admit(&methods) {
        shared
            .counters
            .refused
            .fetch_add(methods.len() as u64, Ordering::Relaxed);
        return (StatusCode::TOO_MANY_REQUESTS, "Too many requests\n").into_response();
    }
    if let Some(signature) = shared.dropped_send(&call) {
        let reply = serde_json::json!({"jsonrpc": "2.0", "id": call["id"], "result": signature});
        return json_response(StatusCode::OK, reply.to_string().into_bytes());
    }
    let forwarded = shared
        .http
        .post(&shared.target)
        .header(header::CONTENT_TYPE, "application/json")
        .body(body)
        .send()
        .await;
    match forwarded {
        Ok(reply) => {
            let status = reply.status();
            match reply.bytes().await {
                Ok(bytes) => {
                    shared
                        .counters
                        .bytes_out
                        .fetch_add(bytes.len() as u64, Ordering::Relaxed);
                    json_response(status, bytes.to_vec())
                }
                Err(_) => StatusCode::BAD_GATEWAY.into_response(),
            }
        }
        Err(_) => StatusCode::BAD_GATEWAY.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A target that answers every call with its method; its URL.
    async fn echo_target() -> String {
        let target = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let target_url = format!("http://{}", target.local_addr().unwrap());
        let echo = axum::Router::new().fallback(|body: Bytes| async move {
            let call: serde_json::Value = serde_json::from_slice(&body).unwrap();
            serde_json::json!({"jsonrpc": "2.0", "id": call["id"], "result": call["method"]})
                .to_string()
        });
        tokio::spawn(async move { axum::serve(target, echo).await });
        target_url
    }

    #[tokio::test]
    async fn a_down_endpoint_answers_every_call_503_until_it_is_back() {
        let endpoint = Endpoint::open(
            TcpListener::bind("127.0.0.1:0").await.unwrap(),
            echo_target().await,
            EndpointProfile::METERED,
        )
        .await
        .unwrap();
        let http = reqwest::Client::new();
        let status = || async {
            http.post(endpoint.url())
                .json(&serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "getSlot"}))
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        };
        assert_eq!(status().await, 200);
        endpoint.set_down(true);
        assert_eq!(status().await, 503);
        assert_eq!(status().await, 503);
        endpoint.set_down(false);
        assert_eq!(status().await, 200);
        let stats = endpoint.stats();
        assert_eq!((stats.calls, stats.refused), (4, 2));
    }

    #[tokio::test]
    async fn calls_beyond_the_limits_are_refused_and_one_send_in_ten_dropped() {
        let target_url = echo_target().await;

        let profile = EndpointProfile {
            latency: Duration::from_millis(20),
            window: Duration::from_secs(60),
            calls_per_window: 30,
            calls_per_method: 12,
            dropped_sends_percent: 10,
        };
        let endpoint = Endpoint::open(
            TcpListener::bind("127.0.0.1:0").await.unwrap(),
            target_url,
            profile,
        )
        .await
        .unwrap();
        let http = reqwest::Client::new();
        let call = |method: &str, params: serde_json::Value| {
            http.post(endpoint.url())
                .json(&serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
                .send()
        };

        // Per method: 12 answered, then refused.
        let started = Instant::now();
        for i in 0..15 {
            let reply = call("getSlot", serde_json::json!([])).await.unwrap();
            let expected = if i < 12 { 200 } else { 429 };
            assert_eq!(reply.status().as_u16(), expected, "call {i}");
        }
        assert!(started.elapsed() >= Duration::from_millis(15 * 20));

        // Sends: answered with their signature; the 1st of every ten is
        // never passed on.
        let tx = |n: u8| {
            let mut wire = vec![1u8];
            wire.extend([n; 64]);
            wire.extend([0u8; 40]);
            base64::engine::general_purpose::STANDARD.encode(wire)
        };
        for n in 1..=10u8 {
            let reply: serde_json::Value = call(
                "sendTransaction",
                serde_json::json!([tx(n), {"encoding": "base64"}]),
            )
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
            if n == 1 {
                let signature = mcjs_client::Signature::from([n; 64]).to_string();
                assert_eq!(reply["result"], signature.as_str());
            } else {
                assert_eq!(reply["result"], "sendTransaction");
            }
        }
        // Over all methods: 30 answered in the window (12 + 10 so far).
        for i in 0..10 {
            let status = call("getBalance", serde_json::json!([]))
                .await
                .unwrap()
                .status();
            assert_eq!(status.as_u16(), if i < 8 { 200 } else { 429 }, "call {i}");
        }
        assert_eq!(
            endpoint.stats(),
            EndpointStats {
                calls: 35,
                refused: 5,
                dropped_sends: 1,
                sends: 10,
                program_scans: 0,
            }
        );
    }
}

/// Outages of the chain's endpoints and the store; what the cluster's
/// endpoints did, and the scheduler's websocket link behind its endpoint.
impl crate::Cluster {
    /// Holds every byte of the scheduler's websocket (its index's stream)
    /// until [`Self::heal_scheduler_stream`]; its HTTP calls still pass.
    /// Only under an endpoint profile (`ClusterConfig::endpoint`), where the
    /// scheduler's websocket runs through a link; panics otherwise.
    pub fn cut_scheduler_stream(&self) {
        self.scheduler_ws_link().cut();
    }

    pub fn heal_scheduler_stream(&self) {
        self.scheduler_ws_link().heal();
    }

    /// An outage of every process's RPC provider, or its end: each
    /// endpoint answers every call 503 and every websocket to the chain
    /// (the scheduler's and each agent's) is held. Only under an endpoint
    /// profile (`ClusterConfig::endpoint`); panics otherwise.
    pub fn rpc_outage(&self, down: bool) {
        let (endpoint, ws) = self
            .scheduler_endpoint
            .as_ref()
            .expect("an RPC outage needs the endpoints of an endpoint profile");
        let hold = |link: &crate::Link| if down { link.cut() } else { link.heal() };
        endpoint.set_down(down);
        hold(ws);
        for agent in &self.agents {
            if let Some(endpoint) = &agent.endpoint {
                endpoint.set_down(down);
            }
            // Its links: RPC (behind the endpoint), websocket, scheduler.
            hold(&agent.links[1]);
        }
    }

    fn scheduler_ws_link(&self) -> &crate::Link {
        &self
            .scheduler_endpoint
            .as_ref()
            .expect("the scheduler's websocket runs through a link only under an endpoint profile")
            .1
    }

    /// An outage of the store (the S3 server stopped: every connection
    /// refused), or its end (started again over what it held). Only with
    /// an S3 store (`StoreKind::S3`); panics otherwise.
    pub async fn store_outage(&mut self, down: bool) -> anyhow::Result<()> {
        let s3 = self
            .s3
            .as_mut()
            .expect("a store outage needs the cluster's S3 server");
        if down {
            s3.stop();
            Ok(())
        } else {
            s3.start_again().await
        }
    }

    /// What each process's endpoint did with its calls (`scheduler`,
    /// `agent-1`, …); empty without a profile.
    pub fn endpoint_stats(&self) -> Vec<(String, EndpointStats)> {
        let scheduler = self
            .scheduler_endpoint
            .iter()
            .map(|(endpoint, _)| ("scheduler".to_string(), endpoint.stats()));
        let agents = self.agents.iter().filter_map(|agent| {
            let endpoint = agent.endpoint.as_ref()?;
            Some((format!("agent-{}", agent.index + 1), endpoint.stats()))
        });
        scheduler.chain(agents).collect()
    }

    /// Calls by method at each process's endpoint, most first (as
    /// [`Self::endpoint_stats`] names them).
    pub fn endpoint_methods(&self) -> Vec<(String, Vec<(String, u64)>)> {
        let scheduler = self
            .scheduler_endpoint
            .iter()
            .map(|(endpoint, _)| ("scheduler".to_string(), endpoint.calls_by_method()));
        let agents = self.agents.iter().filter_map(|agent| {
            let endpoint = agent.endpoint.as_ref()?;
            Some((
                format!("agent-{}", agent.index + 1),
                endpoint.calls_by_method(),
            ))
        });
        scheduler.chain(agents).collect()
    }
}
