//! The agent's sign of life: signed heartbeats to the scheduler on one
//! long-lived stream, sealed for the scheduler's current session.

use crate::chain::{AgentChain, NodeIdentity};
use mcjs_protocol::{
    HEARTBEAT_INTERVAL_MS, HEARTBEAT_PATH, HEARTBEAT_SESSION_PATH, HEARTBEAT_STREAM_PATH,
    Heartbeat, HeartbeatSession, JobReport, NodePower, SignedRequest,
};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// What a heartbeat sender holds: the node's identity and the chain client
/// to sign with, and the latest job reports and power, as the reconcile
/// loop publishes them.
pub(super) struct Heart<C> {
    pub(super) chain: Arc<C>,
    pub(super) me: NodeIdentity,
    /// The agent's own API, announced in each heartbeat.
    pub(super) agent_url: String,
    /// Where the sequence numbers sent are kept ([`crate::sequence`]).
    pub(super) sequence: PathBuf,
    pub(super) reports: watch::Receiver<Vec<JobReport>>,
    pub(super) power: watch::Receiver<Option<NodePower>>,
}

/// Heartbeats on one long-lived request to the scheduler
/// ([`mcjs_protocol::HEARTBEAT_STREAM_PATH`]), one sealed line a second, the
/// first at once on every (re)connection. The open connection is itself the
/// sign of life: if this process dies, its kernel closes it, and the
/// scheduler knows within its grace. A stop on purpose says goodbye first.
/// When the scheduler ends the request (a restart), the agent reconnects.
pub(super) async fn heartbeats<C: AgentChain>(s: Heart<C>, url: String, cancel: CancellationToken) {
    let http = reqwest::Client::builder()
        .connect_timeout(Duration::from_millis(HEARTBEAT_INTERVAL_MS))
        .tcp_keepalive(Duration::from_secs(5))
        .build()
        .expect("an HTTP client");
    let endpoint = format!("{}{HEARTBEAT_STREAM_PATH}", url.trim_end_matches('/'));
    let session_url = format!("{}{HEARTBEAT_SESSION_PATH}", url.trim_end_matches('/'));
    let mut seq = crate::sequence::Sequence::open(&s.sequence);
    let mut failing = false;
    let signer = s.chain.authority().to_bytes();
    // The scheduler's session, asked for before each stream: a restarted
    // scheduler has a new one and refuses lines sealed for the old.
    let session = Arc::new(Mutex::new(String::new()));
    let sealed_for = Arc::clone(&session);
    let mut seal = |goodbye: bool| {
        let now_ms = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or_default();
        let next = seq.next(now_ms);
        let beat = Heartbeat {
            node: s.me.node.to_string(),
            provider: s.me.provider.to_string(),
            agent_url: s.agent_url.clone(),
            sent_at_unix_ms: now_ms,
            seq: next,
            session: sealed_for.lock().expect("session lock").clone(),
            jobs: s.reports.borrow().clone(),
            goodbye,
            power: *s.power.borrow(),
        };
        // Signed with the key the chain authorises for this node, so that
        // no one else can speak for it.
        let sealed = SignedRequest::seal(HEARTBEAT_PATH, &beat, &signer, |m| s.chain.sign(m));
        let mut line = serde_json::to_vec(&sealed).expect("a sealed request serialises");
        line.push(b'\n');
        bytes::Bytes::from(line)
    };
    loop {
        if cancel.is_cancelled() {
            return;
        }
        let asked = http
            .get(&session_url)
            .timeout(Duration::from_millis(HEARTBEAT_INTERVAL_MS * 2))
            .send()
            .await
            .and_then(|r| r.error_for_status());
        let current = match asked {
            Ok(r) => r
                .json::<HeartbeatSession>()
                .await
                .map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        match current {
            Ok(current) => *session.lock().expect("session lock") = current.session,
            Err(e) => {
                if !failing {
                    failing = true;
                    tracing::warn!(scheduler = %session_url, error = %e, "cannot reach the scheduler; retrying");
                }
                tokio::select! {
                    _ = cancel.cancelled() => return,
                    _ = tokio::time::sleep(Duration::from_millis(HEARTBEAT_INTERVAL_MS)) => {}
                }
                continue;
            }
        }
        // Heartbeats queued while the scheduler does not read (a partition)
        // are dropped beyond a few: only the latest matter.
        let (tx, rx) = tokio::sync::mpsc::channel::<bytes::Bytes>(8);
        let body = futures_util::stream::unfold(rx, |mut rx| async move {
            rx.recv()
                .await
                .map(|line| (Ok::<_, std::io::Error>(line), rx))
        });
        let request = http
            .post(&endpoint)
            .header(reqwest::header::CONTENT_TYPE, "application/x-ndjson")
            .body(reqwest::Body::wrap_stream(body))
            .send();
        tokio::pin!(request);
        let mut every = tokio::time::interval(Duration::from_millis(HEARTBEAT_INTERVAL_MS));
        let mut sent = 0u64;
        let ended = loop {
            tokio::select! {
                _ = cancel.cancelled() => {
                    let _ = tx.try_send(seal(true));
                    drop(tx);
                    let _ = tokio::time::timeout(Duration::from_millis(500), &mut request).await;
                    return;
                }
                result = &mut request => {
                    break match result.and_then(|r| r.error_for_status()) {
                        Ok(_) => "the scheduler ended the stream".to_string(),
                        Err(e) => e.to_string(),
                    };
                }
                _ = every.tick() => {
                    if let Err(tokio::sync::mpsc::error::TrySendError::Closed(_)) = tx.try_send(seal(false)) {
                        break "the stream closed".to_string();
                    }
                    sent += 1;
                }
            }
        };
        // Warn once per outage, not once per attempt.
        if sent > 2 {
            failing = false;
        }
        if !failing {
            failing = true;
            tracing::warn!(scheduler = %endpoint, reason = %ended, "heartbeat stream ended; reconnecting");
        }
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
        }
    }
}
