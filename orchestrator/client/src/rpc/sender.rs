//! The JSON-RPC transport: solana-client's HTTP sender, with the refusals a
//! public endpoint gives under load retried with exponential backoff and
//! jitter instead of failing the call.
//!
//! Retried: HTTP 429 (after the sender's own five short pauses, which honour
//! `Retry-After`), 502, 503 and 504, and a node that says it is behind
//! (`-32005`), up to [`RETRIES`] times over about half a minute; a refused or
//! reset connection a few times only, so a chain that is down is reported
//! quickly. Not retried: a request that timed out (the caller has waited its
//! full timeout already and decides itself), and every answer that is an
//! answer (a refused transaction, a missing account). Every JSON-RPC method
//! MCJS calls may be sent twice: reads change nothing, and a transaction sent
//! again carries the same signature, which the cluster processes once.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable as _};
use solana_rpc_client::http_sender::HttpSender;
use solana_rpc_client::rpc_sender::{RpcSender, RpcTransportStats};
use solana_rpc_client_api::client_error::{ErrorKind, Result};
use solana_rpc_client_api::request::{RpcError, RpcRequest};

/// Retries of one call refused for load.
pub const RETRIES: usize = 8;
/// Retries of one call whose connection was refused or reset.
pub const CONNECTION_RETRIES: usize = 2;
/// JSON-RPC error code of a node that is behind the cluster.
const NODE_UNHEALTHY: i64 = -32005;

/// Why a call failed, as far as retrying it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RpcRefusal {
    /// The endpoint is overloaded or rate-limiting: wait and ask again.
    Load,
    /// No connection: the endpoint may be restarting, or down.
    Connection,
    /// An answer, or a timeout the caller has already waited for.
    Final,
}

pub fn refusal(kind: &ErrorKind) -> RpcRefusal {
    match kind {
        ErrorKind::Reqwest(e) if e.is_timeout() => RpcRefusal::Final,
        ErrorKind::Reqwest(e) => match e.status().map(|s| s.as_u16()) {
            Some(429 | 502 | 503 | 504) => RpcRefusal::Load,
            Some(_) => RpcRefusal::Final,
            None if e.is_connect() || e.is_request() => RpcRefusal::Connection,
            None => RpcRefusal::Final,
        },
        ErrorKind::Io(_) => RpcRefusal::Connection,
        ErrorKind::RpcError(RpcError::RpcResponseError { code, .. }) if *code == NODE_UNHEALTHY => {
            RpcRefusal::Load
        }
        _ => RpcRefusal::Final,
    }
}

/// [`HttpSender`] with backoff; see the module's documentation.
pub struct RetryingSender {
    inner: HttpSender,
    backoff: ExponentialBuilder,
}

impl RetryingSender {
    pub fn new(url: &str, timeout: Duration) -> Self {
        Self::with_backoff(
            url,
            timeout,
            ExponentialBuilder::default()
                .with_min_delay(Duration::from_millis(250))
                .with_max_delay(Duration::from_secs(8))
                .with_max_times(RETRIES)
                .with_jitter(),
        )
    }

    pub fn with_backoff(url: &str, timeout: Duration, backoff: ExponentialBuilder) -> Self {
        Self {
            inner: HttpSender::new_with_timeout(url, timeout),
            backoff,
        }
    }
}

#[async_trait::async_trait]
impl RpcSender for RetryingSender {
    async fn send(
        &self,
        request: RpcRequest,
        params: serde_json::Value,
    ) -> Result<serde_json::Value> {
        let connection_failures = AtomicUsize::new(0);
        (|| self.inner.send(request, params.clone()))
            .retry(self.backoff)
            .sleep(tokio::time::sleep)
            .when(|e| match refusal(e.kind()) {
                RpcRefusal::Load => true,
                RpcRefusal::Connection => {
                    connection_failures.fetch_add(1, Ordering::Relaxed) < CONNECTION_RETRIES
                }
                RpcRefusal::Final => false,
            })
            .notify(|e, after| {
                tracing::debug!(%request, error = %e, ?after, "JSON-RPC call refused; asking again")
            })
            .await
    }

    fn get_transport_stats(&self) -> RpcTransportStats {
        self.inner.get_transport_stats()
    }

    fn url(&self) -> String {
        self.inner.url()
    }
}
