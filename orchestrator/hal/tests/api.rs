//! The HAL API served on 127.0.0.1, exercised with a real HTTP client, every answer checked
//! against the committed OpenAPI document.

mod common;

use std::net::SocketAddr;
use std::path::Path;

use common::{GIB, node};
use mcjs_hal::api::{ApiState, openapi_json, serve};
use mcjs_hal::probe::GpuObservation;
use serde_json::{Value, json};

const BLESS_VAR: &str = "MCJS_BLESS_OPENAPI";

fn committed_openapi() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("openapi.json");
    serde_json::from_str(&std::fs::read_to_string(&path).expect("openapi.json is committed"))
        .unwrap()
}

#[test]
fn the_committed_openapi_document_is_the_generated_one() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("openapi.json");
    let generated = openapi_json();
    if std::env::var_os(BLESS_VAR).is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "orchestrator/hal/openapi.json differs from the API's code: regenerate it with {BLESS_VAR}=1 cargo test -p mcjs-hal --test api"
    );
}

/// A validator for the documented response of `method path` with `status`, made strict: objects
/// may not carry properties the document does not name.
fn response_validator(doc: &Value, path: &str, status: u16) -> (jsonschema::Validator, String) {
    let response = &doc["paths"][path]["get"]["responses"][status.to_string()];
    assert!(
        response.is_object(),
        "GET {path} -> {status} is not documented"
    );
    let (content_type, media) = response["content"]
        .as_object()
        .unwrap()
        .iter()
        .next()
        .unwrap();
    let mut components = doc["components"].clone();
    forbid_unknown_properties(&mut components);
    let mut schema = media["schema"].clone();
    schema["components"] = components;
    (
        jsonschema::draft202012::options().build(&schema).unwrap(),
        content_type.clone(),
    )
}

fn forbid_unknown_properties(value: &mut Value) {
    match value {
        Value::Object(map) => {
            if map.contains_key("properties") && !map.contains_key("additionalProperties") {
                map.insert("additionalProperties".into(), Value::Bool(false));
            }
            map.values_mut().for_each(forbid_unknown_properties);
        }
        Value::Array(items) => items.iter_mut().for_each(forbid_unknown_properties),
        _ => {}
    }
}

struct Server {
    base: String,
    client: reqwest::Client,
    doc: Value,
    _shutdown: tokio::sync::oneshot::Sender<()>,
}

impl Server {
    async fn start(state: ApiState) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr: SocketAddr = listener.local_addr().unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel();
        tokio::spawn(serve(listener, state, async {
            let _ = rx.await;
        }));
        Self {
            base: format!("http://{addr}"),
            client: reqwest::Client::new(),
            doc: committed_openapi(),
            _shutdown: tx,
        }
    }

    /// GETs `path_and_query`, checks status, content type and body against the document.
    async fn get(&self, path_and_query: &str, expected_status: u16) -> String {
        let resp = self
            .client
            .get(format!("{}{path_and_query}", self.base))
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        let content_type = resp.headers()[reqwest::header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .to_string();
        let body = resp.text().await.unwrap();
        assert_eq!(status, expected_status, "GET {path_and_query}: {body}");
        let path = path_and_query.split('?').next().unwrap();
        let (validator, documented_type) = response_validator(&self.doc, path, status);
        assert!(
            content_type.starts_with(&documented_type),
            "GET {path_and_query}: {content_type} is not {documented_type}"
        );
        let instance = if documented_type == "application/json" {
            serde_json::from_str(&body).unwrap()
        } else {
            Value::String(body.clone())
        };
        let errors: Vec<String> = validator
            .iter_errors(&instance)
            .map(|e| format!("{} at {}", e, e.instance_path))
            .collect();
        assert!(
            errors.is_empty(),
            "GET {path_and_query} does not match the document: {errors:?}\n{body}"
        );
        body
    }

    async fn error(&self, method: reqwest::Method, path_and_query: &str) -> (u16, Value) {
        let method_name = method.to_string();
        let resp = self
            .client
            .request(method, format!("{}{path_and_query}", self.base))
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        let body: Value = resp.json().await.expect("error bodies are json");
        // Undocumented routes and methods still answer with the documented error body.
        let mut schema = json!({ "$ref": "#/components/schemas/ApiError" });
        schema["components"] = self.doc["components"].clone();
        forbid_unknown_properties(&mut schema);
        let validator = jsonschema::draft202012::options().build(&schema).unwrap();
        assert!(
            validator.is_valid(&body),
            "{method_name} {path_and_query}: {body}"
        );
        (status, body)
    }
}

fn hot_k80() -> GpuObservation {
    GpuObservation {
        raw_name: "Tesla K80".into(),
        vram_total_bytes: 12 << 30,
        compute_capability: Some((3, 7)),
        pci_bus_id: "00000000:04:00.0".into(),
        temperature_celsius: Some(90),
        ecc_enabled: Some(true),
        ecc_uncorrected_volatile: Some(0),
        ecc_uncorrected_aggregate: Some(1),
        ..Default::default()
    }
}

#[tokio::test]
async fn every_endpoint_answers_as_documented() {
    let profile = node()
        .with_gpu(common::a100("00000000:07:00.0"))
        .with_gpu(hot_k80())
        .with_storage(200.0, 4, 0.05, 100 * GIB)
        .build();
    let server = Server::start(ApiState::new(profile.clone())).await;

    let health: Value = serde_json::from_str(&server.get("/healthz", 200).await).unwrap();
    assert_eq!(health, json!({ "status": "ok" }));

    let served: mcjs_hal::NodeProfile =
        serde_json::from_str(&server.get("/v1/profile", 200).await).unwrap();
    assert_eq!(served, profile);

    let summary: Value = serde_json::from_str(&server.get("/v1/summary", 200).await).unwrap();
    assert_eq!(summary["checkpoint_write_mibps"], 200);
    assert_eq!(summary["disk_gib"], 100);

    let readiness: Value = serde_json::from_str(&server.get("/v1/readiness", 200).await).unwrap();
    assert_eq!(readiness["score"], mcjs_hal::readiness(&profile).score);

    let yes: Value = serde_json::from_str(
        &server
            .get("/v1/capability?size=10GiB&every=15m&keep=3", 200)
            .await,
    )
    .unwrap();
    assert_eq!(yes["capable"], true);
    assert_eq!(yes["size_bytes"], 10 * GIB);
    assert_eq!(yes["interval_secs"], 900);
    assert_eq!(yes["required_write_mibps"], 57);

    // 100 GiB every 5 minutes needs 1707 MiB/s and 400 GiB of space.
    let no: Value =
        serde_json::from_str(&server.get("/v1/capability?size=100GiB&every=5m", 200).await)
            .unwrap();
    assert_eq!(no["capable"], false);
    assert_eq!(no["keep"], 3);
    assert_eq!(no["reasons"].as_array().unwrap().len(), 2);

    let metrics = server.get("/metrics", 200).await;
    assert!(
        metrics.contains(&format!(
            "mcjs_hal_readiness_score {}",
            mcjs_hal::readiness(&profile).score
        )),
        "{metrics}"
    );
    assert!(metrics.contains("mcjs_hal_gpu_count 2"));
    assert!(
        metrics.contains(
            "mcjs_hal_gpu_temperature_celsius{model=\"k80\",pci_bus_id=\"0000:04:00.0\"} 90"
        ),
        "{metrics}"
    );
    assert!(metrics.contains("mcjs_hal_checkpoint_write_mibps 200"));
    assert!(
        metrics.contains("mcjs_hal_http_requests_total{route=\"/v1/capability\",status=\"200\"} 2"),
        "{metrics}"
    );
}

#[tokio::test]
async fn bad_requests_get_a_json_error_and_the_server_keeps_serving() {
    let server = Server::start(ApiState::new(
        node().with_storage(200.0, 4, 0.05, 100 * GIB).build(),
    ))
    .await;
    for (query, fragment) in [
        ("", "missing field `size`"),
        ("?size=10GiB", "missing field `every`"),
        ("?size=ten&every=15m", "size:"),
        ("?size=10GiB&every=soon", "every:"),
        ("?size=10GiB&every=15m&keep=-1", "keep"),
        ("?size=10GiB&every=15m&keep=0", "keep must be at least 1"),
        ("?size=0B&every=15m", "size must be greater than zero"),
        ("?size=10GiB&every=0s", "interval must be greater than zero"),
    ] {
        let body = server.get(&format!("/v1/capability{query}"), 400).await;
        let body: Value = serde_json::from_str(&body).unwrap();
        let message = body["error"].as_str().unwrap();
        assert!(message.contains(fragment), "{query}: {message}");
    }

    let (status, body) = server.error(reqwest::Method::GET, "/v2/nothing").await;
    assert_eq!(status, 404);
    assert!(body["error"].as_str().unwrap().contains("/v2/nothing"));
    let (status, body) = server.error(reqwest::Method::POST, "/v1/profile").await;
    assert_eq!(status, 405);
    assert!(body["error"].as_str().unwrap().contains("use GET"));

    server.get("/healthz", 200).await;
}

#[tokio::test]
async fn a_replaced_profile_is_served_at_once() {
    let state = ApiState::new(node().build());
    let server = Server::start(state.clone()).await;
    let before: Value =
        serde_json::from_str(&server.get("/v1/capability?size=1GiB&every=1h", 200).await).unwrap();
    assert_eq!(before["capable"], false);
    state.set_profile(node().with_storage(300.0, 4, 0.02, 50 * GIB).build());
    let after: Value =
        serde_json::from_str(&server.get("/v1/capability?size=1GiB&every=1h", 200).await).unwrap();
    assert_eq!(after["capable"], true);
}

#[tokio::test]
async fn a_profile_without_docker_scores_lower_and_says_why() {
    let with = node()
        .with_gpu(common::a100("0000:07:00.0"))
        .with_storage(300.0, 4, 0.02, 50 * GIB)
        .build();
    let without = node()
        .with_gpu(common::a100("0000:07:00.0"))
        .with_storage(300.0, 4, 0.02, 50 * GIB)
        .without_docker()
        .build();
    let server = Server::start(ApiState::new(without)).await;
    let r: Value = serde_json::from_str(&server.get("/v1/readiness", 200).await).unwrap();
    assert_eq!(mcjs_hal::readiness(&with).score, 100);
    // Without network targets the weights sum to 90: (90 - 20) / 90 = 77.8.
    assert_eq!(r["score"], 78);
    let runtime = r["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "container runtime")
        .unwrap();
    assert!(
        runtime["detail"]
            .as_str()
            .unwrap()
            .contains("connection refused")
    );
}
