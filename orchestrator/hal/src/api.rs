//! The HAL over HTTP, as the agent serves it to the scheduler and to operators.
//!
//! Every error answer is a 4xx/5xx with a JSON body `{ "error": "..." }`. The OpenAPI document
//! is generated from this module ([`openapi_json`]) and committed as `orchestrator/hal/openapi.json`.

use std::future::Future;
use std::sync::{Arc, RwLock};

use axum::extract::rejection::QueryRejection;
use axum::extract::{MatchedPath, Query, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use mcjs_spec::units::{ByteSize, HumanDuration};
use prometheus::{Encoder, GaugeVec, IntCounterVec, IntGauge, Opts, Registry, TextEncoder};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, OpenApi, ToSchema};

use crate::capability::{Capability, checkpoint_capability};
use crate::profile::{HardwareSummary, NodeProfile};
use crate::score::{Readiness, readiness};

/// Checkpoints kept when a capability question does not say.
pub const DEFAULT_KEEP: u32 = 3;

/// Shared state of the API: the latest profile (replaced when the agent re-probes) and metrics.
#[derive(Clone)]
pub struct ApiState {
    inner: Arc<Inner>,
}

struct Inner {
    profile: RwLock<NodeProfile>,
    metrics: Metrics,
}

impl ApiState {
    pub fn new(profile: NodeProfile) -> Self {
        Self {
            inner: Arc::new(Inner {
                profile: RwLock::new(profile),
                metrics: Metrics::new(),
            }),
        }
    }

    pub fn profile(&self) -> NodeProfile {
        self.inner
            .profile
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Replaces the served profile, e.g. after a fresh probe.
    pub fn set_profile(&self, profile: NodeProfile) {
        *self
            .inner
            .profile
            .write()
            .unwrap_or_else(|p| p.into_inner()) = profile;
    }
}

/// The body of every error answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ApiError {
    pub error: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Health {
    pub status: String,
}

/// A checkpoint schedule to judge.
#[derive(Debug, Clone, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct CapabilityQuery {
    /// Checkpoint size, e.g. `10GiB`, `512MiB`, `10GB`.
    pub size: String,
    /// Interval between checkpoints, e.g. `15m`, `900s`, `1h`.
    pub every: String,
    /// Checkpoints retained besides the one being written (default 3).
    pub keep: Option<u32>,
}

struct ErrorResponse(StatusCode, String);

impl IntoResponse for ErrorResponse {
    fn into_response(self) -> Response {
        (self.0, Json(ApiError { error: self.1 })).into_response()
    }
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "MCJS HAL API",
        description = "Hardware profile, checkpoint capability and readiness of one MCJS node."
    ),
    paths(
        healthz,
        get_profile,
        get_summary,
        get_readiness,
        get_capability,
        get_metrics
    ),
    components(schemas(ApiError))
)]
pub struct ApiDoc;

/// The OpenAPI document, pretty-printed, as committed in `openapi.json`.
pub fn openapi_json() -> String {
    let mut text = ApiDoc::openapi()
        .to_pretty_json()
        .expect("the generated document serialises");
    text.push('\n');
    text
}

/// The API's routes over `state`.
pub fn router(state: ApiState) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/v1/profile", get(get_profile))
        .route("/v1/summary", get(get_summary))
        .route("/v1/readiness", get(get_readiness))
        .route("/v1/capability", get(get_capability))
        .route("/metrics", get(get_metrics))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(
            state.clone(),
            count_requests,
        ))
        .with_state(state)
}

/// Serves the API on `listener` until `shutdown` completes.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: ApiState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router(state))
        .with_graceful_shutdown(shutdown)
        .await
}

#[utoipa::path(get, path = "/healthz", responses((status = 200, description = "The API is up", body = Health)))]
async fn healthz() -> Json<Health> {
    Json(Health {
        status: "ok".to_string(),
    })
}

#[utoipa::path(get, path = "/v1/profile", responses((status = 200, description = "The node's latest profile", body = NodeProfile)))]
async fn get_profile(State(state): State<ApiState>) -> Json<NodeProfile> {
    Json(state.profile())
}

#[utoipa::path(get, path = "/v1/summary", responses((status = 200, description = "What the node registers on chain", body = HardwareSummary)))]
async fn get_summary(State(state): State<ApiState>) -> Json<HardwareSummary> {
    Json(state.profile().chain_summary())
}

#[utoipa::path(get, path = "/v1/readiness", responses((status = 200, description = "Readiness score and its components", body = Readiness)))]
async fn get_readiness(State(state): State<ApiState>) -> Json<Readiness> {
    Json(readiness(&state.profile()))
}

#[utoipa::path(
    get,
    path = "/v1/capability",
    params(CapabilityQuery),
    responses(
        (status = 200, description = "Whether the node can keep this checkpoint schedule, with reasons", body = Capability),
        (status = 400, description = "A missing or malformed parameter", body = ApiError)
    )
)]
async fn get_capability(
    State(state): State<ApiState>,
    query: Result<Query<CapabilityQuery>, QueryRejection>,
) -> Result<Json<Capability>, ErrorResponse> {
    let bad = |msg: String| ErrorResponse(StatusCode::BAD_REQUEST, msg);
    let Query(q) = query.map_err(|e| {
        bad(format!(
            "{}: expected size=<bytes>&every=<duration>[&keep=<n>], e.g. size=10GiB&every=15m&keep=3",
            e.body_text()
        ))
    })?;
    let size: ByteSize = q.size.parse().map_err(|e| bad(format!("size: {e}")))?;
    let every: HumanDuration = q.every.parse().map_err(|e| bad(format!("every: {e}")))?;
    let keep = q.keep.unwrap_or(DEFAULT_KEEP);
    checkpoint_capability(&state.profile(), size.bytes(), every.secs(), keep)
        .map(Json)
        .map_err(|e| bad(e.to_string()))
}

#[utoipa::path(
    get,
    path = "/metrics",
    responses((status = 200, description = "Prometheus text exposition format 0.0.4", body = String, content_type = "text/plain"))
)]
async fn get_metrics(State(state): State<ApiState>) -> Result<Response, ErrorResponse> {
    let metrics = &state.inner.metrics;
    metrics.update(&state.profile());
    let mut buf = Vec::new();
    TextEncoder::new()
        .encode(&metrics.registry.gather(), &mut buf)
        .map_err(|e| {
            ErrorResponse(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("cannot encode metrics: {e}"),
            )
        })?;
    Ok(([(header::CONTENT_TYPE, prometheus::TEXT_FORMAT)], buf).into_response())
}

async fn not_found(request: Request) -> ErrorResponse {
    ErrorResponse(
        StatusCode::NOT_FOUND,
        format!(
            "no route for {}: the API serves /healthz, /metrics, /v1/profile, /v1/summary, /v1/readiness, /v1/capability",
            request.uri().path()
        ),
    )
}

async fn method_not_allowed(request: Request) -> ErrorResponse {
    ErrorResponse(
        StatusCode::METHOD_NOT_ALLOWED,
        format!(
            "{} is not allowed on {}: use GET",
            request.method(),
            request.uri().path()
        ),
    )
}

async fn count_requests(State(state): State<ApiState>, request: Request, next: Next) -> Response {
    // The matched route, not the raw path, so that unknown paths cannot grow the label set.
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_string(), |p| p.as_str().to_string());
    let response = next.run(request).await;
    state
        .inner
        .metrics
        .requests
        .with_label_values(&[route.as_str(), response.status().as_str()])
        .inc();
    response
}

struct Metrics {
    registry: Registry,
    requests: IntCounterVec,
    readiness: IntGauge,
    gpu_count: IntGauge,
    gpu_temperature: GaugeVec,
    gpu_ecc_uncorrected: GaugeVec,
    storage_write: IntGauge,
    storage_read: IntGauge,
    storage_write_cov: prometheus::Gauge,
    storage_free: IntGauge,
    docker_reachable: IntGauge,
    probe_timestamp: IntGauge,
}

impl Metrics {
    fn new() -> Self {
        let registry = Registry::new();
        let requests = IntCounterVec::new(
            Opts::new(
                "mcjs_hal_http_requests_total",
                "HTTP requests served, by route and status",
            ),
            &["route", "status"],
        )
        .expect("valid metric");
        let int = |name: &str, help: &str| IntGauge::new(name, help).expect("valid metric");
        let per_gpu = |name: &str, help: &str| {
            GaugeVec::new(Opts::new(name, help), &["pci_bus_id", "model"]).expect("valid metric")
        };
        let m = Self {
            readiness: int("mcjs_hal_readiness_score", "Readiness score 0..100"),
            gpu_count: int("mcjs_hal_gpu_count", "GPUs in the profile"),
            gpu_temperature: per_gpu(
                "mcjs_hal_gpu_temperature_celsius",
                "GPU temperature at the last probe",
            ),
            gpu_ecc_uncorrected: per_gpu(
                "mcjs_hal_gpu_ecc_uncorrected_volatile_errors",
                "Uncorrected ECC errors since the driver loaded, at the last probe",
            ),
            storage_write: int(
                "mcjs_hal_checkpoint_write_mibps",
                "Sustained fsync'd write bandwidth of the checkpoint directory",
            ),
            storage_read: int(
                "mcjs_hal_checkpoint_read_mibps",
                "Read bandwidth of the checkpoint directory",
            ),
            storage_write_cov: prometheus::Gauge::new(
                "mcjs_hal_checkpoint_write_cov",
                "Coefficient of variation of the write bandwidth samples",
            )
            .expect("valid metric"),
            storage_free: int(
                "mcjs_hal_checkpoint_free_bytes",
                "Free bytes in the checkpoint directory",
            ),
            docker_reachable: int(
                "mcjs_hal_docker_reachable",
                "1 when the container runtime answered",
            ),
            probe_timestamp: int(
                "mcjs_hal_probe_timestamp_seconds",
                "Unix time of the last probe",
            ),
            requests,
            registry,
        };
        let collectors: Vec<Box<dyn prometheus::core::Collector>> = vec![
            Box::new(m.requests.clone()),
            Box::new(m.readiness.clone()),
            Box::new(m.gpu_count.clone()),
            Box::new(m.gpu_temperature.clone()),
            Box::new(m.gpu_ecc_uncorrected.clone()),
            Box::new(m.storage_write.clone()),
            Box::new(m.storage_read.clone()),
            Box::new(m.storage_write_cov.clone()),
            Box::new(m.storage_free.clone()),
            Box::new(m.docker_reachable.clone()),
            Box::new(m.probe_timestamp.clone()),
        ];
        for c in collectors {
            m.registry.register(c).expect("metric names are unique");
        }
        m
    }

    fn update(&self, profile: &NodeProfile) {
        let clamp = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        self.readiness.set(i64::from(readiness(profile).score));
        self.gpu_count.set(profile.identity.gpus.len() as i64);
        self.gpu_temperature.reset();
        self.gpu_ecc_uncorrected.reset();
        for (gpu, health) in profile.identity.gpus.iter().zip(&profile.measurements.gpus) {
            let labels = [gpu.pci_bus_id.as_str(), gpu.model.as_str()];
            if let Some(t) = health.temperature_celsius {
                self.gpu_temperature
                    .with_label_values(&labels)
                    .set(f64::from(t));
            }
            if let Some(e) = health.ecc_uncorrected_volatile {
                self.gpu_ecc_uncorrected
                    .with_label_values(&labels)
                    .set(e as f64);
            }
        }
        let storage = profile.measurements.storage.as_ref();
        self.storage_write.set(storage.map_or(0, |s| {
            i64::from(crate::profile::floor_to_u32(s.write.mean_mibps))
        }));
        self.storage_read.set(storage.map_or(0, |s| {
            i64::from(crate::profile::floor_to_u32(s.read.mean_mibps))
        }));
        self.storage_write_cov
            .set(storage.map_or(0.0, |s| s.write.cov));
        self.storage_free
            .set(storage.map_or(0, |s| clamp(s.free_bytes)));
        self.docker_reachable
            .set(i64::from(profile.docker_reachable()));
        self.probe_timestamp
            .set(clamp(profile.measurements.taken_at_unix));
    }
}
