//! The scheduler's HTTP side: agents' signed heartbeats in, the fleet view
//! and Prometheus metrics out.

use std::sync::{Arc, Mutex, RwLock};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use mcjs_protocol::{FLEET_PATH, FleetView, HEARTBEAT_PATH, HeartbeatAck, NodeLiveness};
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
}

#[derive(Serialize)]
struct ErrorBody {
    error: String,
}

fn error(status: StatusCode, message: impl Into<String>) -> Response {
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
        .route(FLEET_PATH, get(fleet))
        .route("/metrics", get(metrics))
        .route(
            "/healthz",
            get(|| async { Json(serde_json::json!({ "status": "ok" })) }),
        )
        .fallback(|| async { error(StatusCode::NOT_FOUND, "no such endpoint") })
        .with_state(state)
}

/// Records a heartbeat only once it is proven to come from the node's own
/// key, fresh and new; anything else is refused with a JSON error, counted,
/// and leaves no trace.
async fn heartbeat(State(state): State<ServerState>, body: Bytes) -> Response {
    let now = (state.clock)();
    let opened = match state.directory.read() {
        Ok(directory) => authenticate(&body, now, &directory),
        Err(_) => return error(StatusCode::INTERNAL_SERVER_ERROR, "node directory poisoned"),
    };
    let recorded = match opened {
        Ok((node, heartbeat)) => match state.liveness.lock() {
            Ok(mut liveness) => record_new(&mut liveness, &node, heartbeat, now),
            Err(_) => return error(StatusCode::INTERNAL_SERVER_ERROR, "liveness table poisoned"),
        },
        Err(refusal) => Err(refusal),
    };
    match recorded {
        Ok(()) => {
            state.metrics.heartbeats.inc();
            Json(HeartbeatAck {
                received_at_unix_ms: now,
            })
            .into_response()
        }
        Err(refusal) => {
            state
                .metrics
                .refused
                .with_label_values(&[refusal.label()])
                .inc();
            tracing::debug!(reason = refusal.label(), %refusal, "heartbeat refused");
            let status = StatusCode::from_u16(refusal.status()).unwrap_or(StatusCode::BAD_REQUEST);
            error(status, format!("heartbeat refused: {refusal}"))
        }
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
            alive: liveness.is_alive(node, now, state.heartbeat_timeout_ms),
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
