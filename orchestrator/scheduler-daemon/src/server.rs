//! The scheduler's HTTP side: agents' heartbeats in, the fleet view and
//! Prometheus metrics out.

use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::extract::rejection::JsonRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use mcjs_protocol::{FLEET_PATH, FleetView, HEARTBEAT_PATH, Heartbeat, HeartbeatAck, NodeLiveness};
use serde::Serialize;

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

async fn heartbeat(
    State(state): State<ServerState>,
    body: Result<Json<Heartbeat>, JsonRejection>,
) -> Response {
    let Json(heartbeat) = match body {
        Ok(body) => body,
        Err(rejection) => {
            return error(
                StatusCode::BAD_REQUEST,
                format!("bad heartbeat: {}", rejection.body_text()),
            );
        }
    };
    let now = (state.clock)();
    let recorded = state
        .liveness
        .lock()
        .map_err(|_| ())
        .and_then(|mut l| l.record(heartbeat, now).map_err(|_| ()));
    match recorded {
        Ok(()) => {
            state.metrics.heartbeats.inc();
            Json(HeartbeatAck {
                received_at_unix_ms: now,
            })
            .into_response()
        }
        Err(()) => error(
            StatusCode::BAD_REQUEST,
            "bad heartbeat: `node` is not a base58 public key",
        ),
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
