//! The scheduler's HTTP side: agents' signed heartbeats in, the fleet view
//! and Prometheus metrics out.

use std::sync::{Arc, Mutex, RwLock};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use mcjs_protocol::{
    CHALLENGE_OPENING_PATH, CHECKS_PATH, ChallengeOpening, FLEET_PATH, FleetView, HEARTBEAT_PATH,
    HEARTBEAT_SESSION_PATH, HEARTBEAT_STREAM_PATH, HeartbeatAck, HeartbeatSession,
    MAX_CHALLENGE_OPENING_BYTES, MAX_HEARTBEAT_BYTES, NodeLiveness, STANDBY_PATH,
};
use serde::Serialize;

use crate::auth::{Directory, authenticate, record_new};
use crate::liveness::Liveness;
use crate::metrics::Metrics;

/// Milliseconds since the Unix epoch; injected so tests can drive time.
pub type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

pub fn system_clock() -> Clock {
    Arc::new(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0)
    })
}

#[derive(Clone)]
pub struct ServerState {
    pub liveness: Arc<Mutex<Liveness>>,
    /// The key that speaks for each node, refreshed from the chain every round.
    pub directory: Arc<RwLock<Directory>>,
    pub metrics: Arc<Metrics>,
    pub clock: Clock,
    pub heartbeat_timeout_ms: i64,
    pub disconnect_grace_ms: i64,
    /// Woken when an agent's stream drops, so the loop judges it after the
    /// grace instead of at its next tick.
    pub wake: Arc<tokio::sync::Notify>,
    /// This process's heartbeat session ([`new_session`]).
    pub session: Arc<str>,
    /// What each node owes as a checker, from the last verification read.
    pub duties: Arc<RwLock<crate::duties::CheckRoster>>,
    /// The warm standbys of the last round ([`STANDBY_PATH`]).
    pub standbys: Arc<RwLock<crate::standby::StandbyBook>>,
    /// The hardware challenges in flight (node → the slot of its request), from the last
    /// round's read: only a node named here may send an opening, and only of that one.
    pub challenged: Arc<RwLock<std::collections::HashMap<mcjs_client::Pubkey, u64>>>,
    /// The openings sent, until their challenge is judged.
    pub openings: Arc<Mutex<crate::challenges::Openings>>,
}

/// A heartbeat session: 16 random bytes from the OS, hex.
pub fn new_session() -> Arc<str> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("the OS's random numbers");
    hex::encode(bytes).into()
}

#[derive(Serialize)]
struct ErrorBody {
    error: String,
}

/// A JSON error `{"error": message}` with `status`.
pub(crate) fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (
        status,
        Json(ErrorBody {
            error: message.into(),
        }),
    )
        .into_response()
}

pub fn router(state: ServerState) -> Router {
    Router::new()
        .route(HEARTBEAT_PATH, post(heartbeat))
        .route(HEARTBEAT_STREAM_PATH, post(heartbeat_stream))
        .route(
            HEARTBEAT_SESSION_PATH,
            get(|State(state): State<ServerState>| async move {
                Json(HeartbeatSession {
                    session: state.session.to_string(),
                })
            }),
        )
        .route(
            CHALLENGE_OPENING_PATH,
            post(challenge_opening).layer(axum::extract::DefaultBodyLimit::max(
                MAX_CHALLENGE_OPENING_BYTES,
            )),
        )
        .route(FLEET_PATH, get(fleet))
        .route(&format!("{CHECKS_PATH}/{{node}}"), get(check_duties))
        .route(&format!("{STANDBY_PATH}/{{node}}"), get(standby_duties))
        .route("/metrics", get(metrics))
        .route(
            "/healthz",
            get(|| async { Json(serde_json::json!({ "status": "ok" })) }),
        )
        .fallback(|| async { error(StatusCode::NOT_FOUND, "no such endpoint") })
        .with_state(state)
}

/// Opens and records one sealed heartbeat; what a refusal is counted as.
fn accept(
    state: &ServerState,
    raw: &[u8],
) -> Result<(mcjs_client::Pubkey, bool), mcjs_protocol::Refusal> {
    let now = (state.clock)();
    let (node, heartbeat) = match state.directory.read() {
        Ok(directory) => authenticate(raw, now, &directory, &state.session)?,
        Err(_) => {
            return Err(mcjs_protocol::Refusal::Malformed(
                "node directory poisoned".into(),
            ));
        }
    };
    let goodbye = heartbeat.goodbye;
    let mut liveness = state
        .liveness
        .lock()
        .map_err(|_| mcjs_protocol::Refusal::Malformed("liveness table poisoned".into()))?;
    record_new(&mut liveness, &node, heartbeat, now)?;
    state.metrics.heartbeats.inc();
    Ok((node, goodbye))
}

/// Heartbeat streams open at once; one more is answered 503 at once. A
/// fleet of this many nodes needs more schedulers.
pub const MAX_STREAMS: usize = 4_096;
/// Refused lines after which a stream is ended (its agent reconnects).
pub const STREAM_REFUSALS: u32 = 4;

/// Streams open now, across the server.
static OPEN_STREAMS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Counts a stream open while it lives.
struct StreamSlot;

impl StreamSlot {
    fn take() -> Option<Self> {
        use std::sync::atomic::Ordering;
        OPEN_STREAMS
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < MAX_STREAMS).then_some(n + 1)
            })
            .ok()
            .map(|_| StreamSlot)
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        OPEN_STREAMS.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

/// A long-lived stream of heartbeats, one sealed heartbeat per line
/// (`mcjs_protocol::HEARTBEAT_STREAM_PATH`). Each line is judged like a
/// single heartbeat; the first accepted one binds the stream to its node.
/// When the stream ends, its node's agent is gone unless its last accepted
/// heartbeat said goodbye. The stream ends on a line for another node than
/// the bound one, a line longer than `MAX_HEARTBEAT_BYTES`,
/// [`STREAM_REFUSALS`] refused lines, or silence for the heartbeat timeout
/// (an agent sends a line every `HEARTBEAT_INTERVAL_MS`). At most
/// [`MAX_STREAMS`] are open at once. Each byte is looked at once.
async fn heartbeat_stream(State(state): State<ServerState>, body: axum::body::Body) -> Response {
    use futures_util::StreamExt;
    static STREAMS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let Some(_slot) = StreamSlot::take() else {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("{MAX_STREAMS} heartbeat streams are open: try again later"),
        );
    };
    let id = STREAMS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let idle = std::time::Duration::from_millis(
        u64::try_from(state.heartbeat_timeout_ms)
            .unwrap_or(0)
            .max(2 * mcjs_protocol::HEARTBEAT_INTERVAL_MS),
    );
    let mut data = body.into_data_stream();
    let mut buffer: Vec<u8> = Vec::new();
    // Bytes of `buffer` already searched for a newline.
    let mut scanned = 0;
    let mut bound: Option<mcjs_client::Pubkey> = None;
    let mut goodbye = false;
    let mut accepted = 0u64;
    let mut refused = 0u32;
    'read: loop {
        let chunk = match tokio::time::timeout(idle, data.next()).await {
            Ok(Some(Ok(chunk))) => chunk,
            Ok(_) => break,
            Err(_) => {
                tracing::debug!(stream = id, "heartbeat stream idle: ended");
                break;
            }
        };
        buffer.extend_from_slice(&chunk);
        while let Some(at) = buffer[scanned..].iter().position(|b| *b == b'\n') {
            let end = scanned + at;
            let line: Vec<u8> = buffer.drain(..=end).collect();
            scanned = 0;
            let line = &line[..line.len() - 1];
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match accept(&state, line) {
                Ok((node, bye)) => {
                    if bound.is_some_and(|b| b != node) {
                        break 'read;
                    }
                    if bound.is_none() {
                        bound = Some(node);
                        if let Ok(mut l) = state.liveness.lock() {
                            l.stream_opened(node, id);
                        }
                    }
                    goodbye = bye;
                    accepted += 1;
                }
                Err(refusal) => {
                    count_refusal(&state, &refusal);
                    refused += 1;
                    if refused >= STREAM_REFUSALS {
                        break 'read;
                    }
                }
            }
        }
        scanned = buffer.len();
        if buffer.len() > MAX_HEARTBEAT_BYTES {
            break;
        }
    }
    if let Some(node) = bound {
        let now = (state.clock)();
        if let Ok(mut l) = state.liveness.lock() {
            l.stream_closed(&node, id, goodbye, now);
        }
        if !goodbye {
            tracing::info!(%node, "heartbeat stream closed without a goodbye");
            state.wake.notify_one();
        }
    }
    Json(serde_json::json!({ "accepted": accepted, "refused": refused })).into_response()
}

/// Records a heartbeat only once it is proven to come from the node's own
/// key, fresh and new; anything else is refused with a JSON error, counted,
/// and leaves no trace.
async fn heartbeat(State(state): State<ServerState>, body: Bytes) -> Response {
    match accept(&state, &body) {
        Ok(_) => Json(HeartbeatAck {
            received_at_unix_ms: (state.clock)(),
        })
        .into_response(),
        Err(refusal) => {
            count_refusal(&state, &refusal);
            let status = StatusCode::from_u16(refusal.status()).unwrap_or(StatusCode::BAD_REQUEST);
            error(status, format!("heartbeat refused: {refusal}"))
        }
    }
}

/// Counts a refused heartbeat by its reason.
fn count_refusal(state: &ServerState, refusal: &mcjs_protocol::Refusal) {
    state
        .metrics
        .refused
        .with_label_values(&[refusal.label()])
        .inc();
    tracing::debug!(reason = refusal.label(), %refusal, "heartbeat refused");
}

/// A node's opening of its hardware challenge ([`CHALLENGE_OPENING_PATH`]): signed by the
/// node's operator key, fresh, for the challenge the chain has in flight on the node;
/// kept (the latest per node) until the round judges it. 202 when kept.
async fn challenge_opening(State(state): State<ServerState>, body: Bytes) -> Response {
    match open_challenge_opening(&state, &body) {
        Ok((node, message)) => {
            let Ok(mut openings) = state.openings.lock() else {
                return error(StatusCode::INTERNAL_SERVER_ERROR, "openings poisoned");
            };
            openings.insert(node, message.requested_slot, message.opening);
            tracing::info!(%node, requested_slot = message.requested_slot, "hardware challenge opening received");
            StatusCode::ACCEPTED.into_response()
        }
        Err(refusal) => {
            tracing::debug!(reason = refusal.label(), %refusal, "challenge opening refused");
            let status = StatusCode::from_u16(refusal.status()).unwrap_or(StatusCode::BAD_REQUEST);
            error(status, format!("challenge opening refused: {refusal}"))
        }
    }
}

fn open_challenge_opening(
    state: &ServerState,
    raw: &[u8],
) -> Result<(mcjs_client::Pubkey, ChallengeOpening), mcjs_protocol::Refusal> {
    use mcjs_protocol::Refusal;
    let request = mcjs_protocol::SignedRequest::parse(raw)?;
    // An opening may be a hundred megabytes: who sent it is settled before it is parsed.
    // The signer must be the operator key of a node with a challenge in flight (two map
    // reads), and the signature good; only then is the message read.
    let signer = mcjs_client::Pubkey::new_from_array(request.signer_key()?);
    let speaks_for_one_in_flight = {
        let directory = state
            .directory
            .read()
            .map_err(|_| Refusal::Malformed("node directory poisoned".into()))?;
        let challenged = state
            .challenged
            .read()
            .map_err(|_| Refusal::Malformed("challenges poisoned".into()))?;
        challenged
            .keys()
            .any(|node| directory.authorised(node) == Some(signer))
    };
    if !speaks_for_one_in_flight {
        return Err(Refusal::UnknownNode(format!(
            "with a hardware challenge in flight whose operator key is {signer}"
        )));
    }
    request.verify(CHALLENGE_OPENING_PATH)?;
    let message: ChallengeOpening = request.message()?;
    let node: mcjs_client::Pubkey = message
        .node
        .parse()
        .map_err(|_| Refusal::Malformed("`node` is not a base58 public key".into()))?;
    let authorised = state
        .directory
        .read()
        .map_err(|_| Refusal::Malformed("node directory poisoned".into()))?
        .authorised(&node)
        .ok_or_else(|| Refusal::UnknownNode(message.node.clone()))?;
    if signer != authorised {
        return Err(Refusal::Foreign {
            node: message.node.clone(),
            signer: signer.to_string(),
        });
    }
    mcjs_protocol::auth::check_fresh(message.sent_at_unix_ms, (state.clock)())?;
    let in_flight = state
        .challenged
        .read()
        .map_err(|_| Refusal::Malformed("challenges poisoned".into()))?
        .get(&node)
        .copied();
    if in_flight != Some(message.requested_slot) {
        return Err(Refusal::Malformed(format!(
            "node {node} has no challenge in flight requested at slot {}",
            message.requested_slot
        )));
    }
    Ok((node, message))
}

/// A node's address from a request's path, or the 400 that says it is not one.
fn node_address(path: &str) -> Result<mcjs_client::Pubkey, Response> {
    path.parse()
        .map_err(|_| error(StatusCode::BAD_REQUEST, "not a node address (base58)"))
}

/// The jobs `node` stands by for ([`STANDBY_PATH`]). Public, as the
/// checks are: whose checkpoint a node keeps gives nothing of it away (the
/// store gate decides who reads it).
async fn standby_duties(
    State(state): State<ServerState>,
    axum::extract::Path(node): axum::extract::Path<String>,
) -> Response {
    let node = match node_address(&node) {
        Ok(node) => node,
        Err(refused) => return refused,
    };
    match state.standbys.read() {
        Ok(book) => Json(book.duties(&node)).into_response(),
        Err(_) => error(StatusCode::INTERNAL_SERVER_ERROR, "standbys poisoned"),
    }
}

/// What `node` owes as a checker ([`CHECKS_PATH`]).
async fn check_duties(
    State(state): State<ServerState>,
    axum::extract::Path(node): axum::extract::Path<String>,
) -> Response {
    let node = match node_address(&node) {
        Ok(node) => node,
        Err(refused) => return refused,
    };
    match state.duties.read() {
        Ok(duties) => Json(duties.of(&node)).into_response(),
        Err(_) => error(StatusCode::INTERNAL_SERVER_ERROR, "duties poisoned"),
    }
}

async fn fleet(State(state): State<ServerState>) -> Response {
    let now = (state.clock)();
    let Ok(liveness) = state.liveness.lock() else {
        return error(StatusCode::INTERNAL_SERVER_ERROR, "liveness table poisoned");
    };
    let mut nodes: Vec<NodeLiveness> = liveness
        .nodes()
        .map(|(node, hb)| NodeLiveness {
            node: node.to_string(),
            last_heartbeat_unix_ms: Some(hb.received_ms),
            alive: liveness.is_alive(
                node,
                now,
                state.heartbeat_timeout_ms,
                state.disconnect_grace_ms,
            ),
            power: hb.power,
        })
        .collect();
    nodes.sort_by(|a, b| a.node.cmp(&b.node));
    Json(FleetView { nodes }).into_response()
}

async fn metrics(State(state): State<ServerState>) -> Response {
    match state.metrics.render() {
        Ok(text) => ([("content-type", "text/plain; version=0.0.4")], text).into_response(),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e),
    }
}
