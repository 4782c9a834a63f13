//! The agent's HTTP API: the HAL's routes plus the agent's metrics and job
//! reports.

use super::Agent;
use crate::chain::AgentChain;
use tokio_util::sync::CancellationToken;

/// The agent's HTTP API: the HAL's routes plus the agent's metrics and job reports.
pub fn router<C: AgentChain>(hal: mcjs_hal::api::ApiState, agent: &Agent<C>) -> axum::Router {
    use axum::routing::get;
    let metrics = agent.metrics().clone();
    let reports_of = agent.clone();
    let agent_routes = axum::Router::new()
        .route(
            "/v1/agent/metrics",
            get(move || {
                let text = metrics.render();
                async move { text }
            }),
        )
        .route(
            "/v1/agent/jobs",
            get(move || {
                let reports = reports_of.reports();
                async move { axum::Json(reports) }
            }),
        );
    agent_routes.merge(mcjs_hal::api::router(hal))
}

/// Serves [`router`] on `addr` until `cancel` fires.
pub async fn serve<C: AgentChain>(
    listener: tokio::net::TcpListener,
    hal: mcjs_hal::api::ApiState,
    agent: &Agent<C>,
    cancel: CancellationToken,
) -> std::io::Result<()> {
    axum::serve(listener, router(hal, agent))
        .with_graceful_shutdown(async move { cancel.cancelled().await })
        .await
}
