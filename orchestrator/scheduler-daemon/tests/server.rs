//! The heartbeat endpoint against a running server and a real HTTP client:
//! only the node's own key, fresh and in sequence, is heard.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

mod common;

use mcjs_client::{Keypair, Pubkey, Signer};
use mcjs_protocol::{
    HEARTBEAT_PATH, HEARTBEAT_SESSION_PATH, HEARTBEAT_STREAM_PATH, Heartbeat, HeartbeatSession,
    JobPhase, JobReport, SignedRequest, StopReason, StopReport,
};
use mcjs_scheduler_daemon::Liveness;
use mcjs_scheduler_daemon::auth::Directory;
use mcjs_scheduler_daemon::metrics::Metrics;
use mcjs_scheduler_daemon::server::{ServerState, router};
use mcjs_scheduler_daemon::standby::{StandbyBook, Standbys};

/// The scheduler's clock in these tests: a real-looking Unix time in ms.
const NOW: i64 = 1_700_000_000_000;

struct Server {
    url: String,
    liveness: Arc<Mutex<Liveness>>,
    /// What the last round named as warm standbys.
    standbys: Arc<RwLock<StandbyBook>>,
    http: reqwest::Client,
}

/// A node, its authorised key, and a server that knows them.
async fn serve(now: Arc<AtomicI64>, node: Pubkey, key: &Keypair) -> Server {
    serve_session(now, node, key, SESSION).await
}

/// The same, as a scheduler process whose heartbeat session is `session`.
async fn serve_session(now: Arc<AtomicI64>, node: Pubkey, key: &Keypair, session: &str) -> Server {
    let liveness = Arc::new(Mutex::new(Liveness::new(0)));
    let standbys: Arc<RwLock<StandbyBook>> = Default::default();
    let mut directory = Directory::default();
    directory.insert(node, key.pubkey());
    let state = ServerState {
        liveness: liveness.clone(),
        directory: Arc::new(RwLock::new(directory)),
        metrics: Arc::new(Metrics::new()),
        clock: Arc::new(move || now.load(Ordering::SeqCst)),
        heartbeat_timeout_ms: 3_000,
        disconnect_grace_ms: 500,
        wake: Arc::new(tokio::sync::Notify::new()),
        session: session.into(),
        duties: Default::default(),
        standbys: Arc::clone(&standbys),
        challenged: Default::default(),
        openings: Default::default(),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router(state)).await.unwrap() });
    Server {
        url,
        liveness,
        standbys,
        http: reqwest::Client::new(),
    }
}

fn beat(node: Pubkey, sent_at: i64, seq: u64) -> Heartbeat {
    Heartbeat {
        node: node.to_string(),
        provider: "P".into(),
        agent_url: "http://x".into(),
        sent_at_unix_ms: sent_at,
        seq,
        session: SESSION.into(),
        jobs: vec![],
        goodbye: false,
        power: None,
    }
}

/// The test server's heartbeat session.
const SESSION: &str = "0123456789abcdef0123456789abcdef";

/// A heartbeat that, if believed, would get the node's provider slashed.
fn damning(node: Pubkey, sent_at: i64, seq: u64) -> Heartbeat {
    Heartbeat {
        jobs: vec![JobReport {
            job: Pubkey::new_from_array([9; 32]).to_string(),
            generation: 1,
            phase: JobPhase::Exited,
            last_checkpoint: None,
            checkpoint_overdue: false,
            exit: Some(StopReport {
                stop: StopReason::EngineFailure,
                last_logs: vec!["the engine lost it".into()],
            }),
        }],
        ..beat(node, sent_at, seq)
    }
}

fn sign(key: &Keypair, heartbeat: &Heartbeat) -> SignedRequest {
    SignedRequest::seal(HEARTBEAT_PATH, heartbeat, &key.pubkey().to_bytes(), |m| {
        key.sign_message(m).into()
    })
}

impl Server {
    async fn post(&self, body: &impl serde::Serialize) -> (u16, serde_json::Value) {
        let response = self
            .http
            .post(format!("{}{HEARTBEAT_PATH}", self.url))
            .json(body)
            .send()
            .await
            .unwrap();
        (response.status().as_u16(), response.json().await.unwrap())
    }

    async fn metrics(&self) -> String {
        self.http
            .get(format!("{}/metrics", self.url))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    fn recorded(&self, node: &Pubkey) -> Option<(i64, u64)> {
        let live = self.liveness.lock().unwrap();
        live.last(node).map(|h| (h.received_ms, h.seq))
    }
}

#[tokio::test]
async fn a_signed_heartbeat_is_recorded_by_the_schedulers_clock() {
    let now = Arc::new(AtomicI64::new(NOW));
    let (node, key) = (Pubkey::new_from_array([7; 32]), Keypair::new());
    let server = serve(now.clone(), node, &key).await;
    let (status, ack) = server.post(&sign(&key, &beat(node, NOW - 5, 1))).await;
    assert_eq!(status, 200, "{ack}");
    assert_eq!(ack["received_at_unix_ms"], NOW);
    assert!(
        server
            .liveness
            .lock()
            .unwrap()
            .is_alive(&node, NOW + 3_000, 3_000, 500)
    );

    now.store(NOW + 3_001, Ordering::SeqCst);
    let fleet: serde_json::Value = server
        .http
        .get(format!("{}/v1/fleet", server.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(fleet["nodes"][0]["node"], node.to_string());
    assert_eq!(fleet["nodes"][0]["alive"], false);
    let metrics = server.metrics().await;
    assert!(metrics.contains("mcjs_heartbeats_total 1"), "{metrics}");
    // Every refusal reason is exported from the start, at zero.
    assert!(
        metrics.contains(r#"mcjs_agent_requests_refused_total{reason="bad_signature"} 0"#),
        "{metrics}"
    );
}

#[tokio::test]
async fn agent_and_scheduler_clocks_30_s_apart_still_work_either_way() {
    let now = Arc::new(AtomicI64::new(NOW));
    let (node, key) = (Pubkey::new_from_array([7; 32]), Keypair::new());
    let server = serve(now, node, &key).await;
    let (status, _) = server.post(&sign(&key, &beat(node, NOW - 30_000, 1))).await;
    assert_eq!(status, 200);
    let (status, _) = server.post(&sign(&key, &beat(node, NOW + 30_000, 2))).await;
    assert_eq!(status, 200);
    assert_eq!(server.recorded(&node), Some((NOW, 2)));
}

/// Every way a stranger (or a replaying eavesdropper) can try to speak for
/// the node: refused with the right status and a JSON error, counted by
/// reason, and nothing of it recorded.
#[tokio::test]
async fn forged_replayed_foreign_stale_and_unsigned_heartbeats_are_refused_and_change_nothing() {
    let now = Arc::new(AtomicI64::new(NOW));
    let (node, key) = (Pubkey::new_from_array([7; 32]), Keypair::new());
    let stranger = Keypair::new();
    let server = serve(now, node, &key).await;
    // The node's last genuine heartbeat, at sequence 10.
    let genuine = sign(&key, &beat(node, NOW, 10));
    assert_eq!(server.post(&genuine).await.0, 200);
    let before = server.recorded(&node);

    let forged = {
        // Claims the node's key; the signature is the stranger's.
        let mut r = sign(&stranger, &damning(node, NOW, 11));
        r.signer = key.pubkey().to_string();
        r
    };
    let tampered = {
        // A genuine signature over another body.
        let mut r = sign(&key, &beat(node, NOW, 12));
        r.body = serde_json::to_string(&damning(node, NOW, 12)).unwrap();
        r
    };
    let replayed_same = genuine.clone();
    let replayed_old = sign(&key, &damning(node, NOW, 9));
    let foreign = sign(&stranger, &damning(node, NOW, 13));
    let unknown_node = sign(&stranger, &damning(Pubkey::new_from_array([8; 32]), NOW, 1));
    let stale = sign(&key, &damning(node, NOW - 121_000, 14));
    let future = sign(&key, &damning(node, NOW + 121_000, 15));
    let unsigned = serde_json::to_value(damning(node, NOW, 16)).unwrap();

    let cases: Vec<(&str, serde_json::Value, u16, &str)> = vec![
        (
            "forged",
            serde_json::to_value(&forged).unwrap(),
            401,
            "bad signature",
        ),
        (
            "tampered",
            serde_json::to_value(&tampered).unwrap(),
            401,
            "bad signature",
        ),
        (
            "replayed",
            serde_json::to_value(&replayed_same).unwrap(),
            401,
            "replayed",
        ),
        (
            "replayed old",
            serde_json::to_value(&replayed_old).unwrap(),
            401,
            "replayed",
        ),
        (
            "foreign",
            serde_json::to_value(&foreign).unwrap(),
            403,
            "is not the key authorised",
        ),
        (
            "unknown node",
            serde_json::to_value(&unknown_node).unwrap(),
            403,
            "unknown node",
        ),
        ("stale", serde_json::to_value(&stale).unwrap(), 401, "stale"),
        (
            "from the future",
            serde_json::to_value(&future).unwrap(),
            401,
            "stale",
        ),
        ("unsigned", unsigned, 401, "unsigned"),
    ];
    for (what, body, status, message) in cases {
        let (got, error) = server.post(&body).await;
        assert_eq!(got, status, "{what}: {error}");
        let text = error["error"].as_str().unwrap_or_default();
        assert!(text.contains(message), "{what}: {text}");
        assert_eq!(server.recorded(&node), before, "{what} changed the record");
    }
    {
        let live = server.liveness.lock().unwrap();
        assert_eq!(live.nodes().count(), 1, "the unknown node was not recorded");
        assert!(live.last(&node).unwrap().jobs.is_empty());
    }

    let metrics = server.metrics().await;
    for (reason, n) in [
        ("bad_signature", 2),
        ("replayed", 2),
        ("foreign", 1),
        ("unknown_node", 1),
        ("stale", 2),
        ("unsigned", 1),
    ] {
        let line = format!("mcjs_agent_requests_refused_total{{reason=\"{reason}\"}} {n}");
        assert!(metrics.contains(&line), "{line}\n{metrics}");
    }
    assert!(metrics.contains("mcjs_heartbeats_total 1"), "{metrics}");

    // The node itself carries on above its last sequence.
    assert_eq!(server.post(&sign(&key, &beat(node, NOW, 11))).await.0, 200);
}

#[tokio::test]
async fn junk_gets_a_400_with_a_json_error_and_changes_nothing() {
    let now = Arc::new(AtomicI64::new(NOW));
    let (node, key) = (Pubkey::new_from_array([7; 32]), Keypair::new());
    let server = serve(now, node, &key).await;
    for body in [
        serde_json::json!({"signature": "x"}),
        serde_json::to_value({
            let mut r = sign(&key, &beat(node, NOW, 1));
            r.body = "{\"node\": 1}".into();
            r
        })
        .unwrap(),
        serde_json::json!("a string"),
    ] {
        let (status, error) = server.post(&body).await;
        assert!(status == 400 || status == 401, "{status} {error}");
        assert!(
            error["error"]
                .as_str()
                .unwrap()
                .starts_with("heartbeat refused")
        );
    }
    assert_eq!(server.liveness.lock().unwrap().nodes().count(), 0);
    let response = server
        .http
        .get(format!("{}/nope", server.url))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
}

/// Streams `lines` (each already a JSON line) on one request, then either
/// ends the request (`Ok`) or drops the connection mid-request.
async fn stream(server: &Server, lines: Vec<String>, end_cleanly: bool) {
    use tokio::io::AsyncWriteExt;
    let addr = server.url.trim_start_matches("http://").to_string();
    let mut tcp = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let head = format!(
        "POST {HEARTBEAT_STREAM_PATH} HTTP/1.1\r\nhost: {addr}\r\ntransfer-encoding: chunked\r\ncontent-type: application/x-ndjson\r\n\r\n"
    );
    tcp.write_all(head.as_bytes()).await.unwrap();
    for line in lines {
        let chunk = format!("{line}\n");
        tcp.write_all(format!("{:x}\r\n{chunk}\r\n", chunk.len()).as_bytes())
            .await
            .unwrap();
        tcp.flush().await.unwrap();
    }
    // Let the server read what was sent before the stream ends.
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    if end_cleanly {
        tcp.write_all(b"0\r\n\r\n").await.unwrap();
        let mut answer = vec![0u8; 1024];
        let _ = tokio::io::AsyncReadExt::read(&mut tcp, &mut answer).await;
    }
    // Dropping the socket: what the kernel does when the agent's process dies.
    drop(tcp);
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
}

#[tokio::test]
async fn a_stream_closed_without_a_goodbye_marks_the_agent_gone_and_a_goodbye_does_not() {
    let now = Arc::new(AtomicI64::new(1_000));
    let key = Keypair::new();
    let node = Pubkey::new_unique();
    let server = serve(now.clone(), node, &key).await;
    let line = |seq: u64, goodbye: bool| {
        serde_json::to_string(&sign(
            &key,
            &Heartbeat {
                goodbye,
                ..beat(node, 1_000, seq)
            },
        ))
        .unwrap()
    };

    // Killed: the connection drops mid-request, no goodbye.
    stream(&server, vec![line(1, false), line(2, false)], false).await;
    {
        let l = server.liveness.lock().unwrap();
        assert_eq!(
            l.last_seq(&node),
            Some(2),
            "both streamed heartbeats recorded"
        );
        assert_eq!(l.dropped_at(&node), Some(1_000));
        assert!(l.is_alive(&node, 1_400, 3_000, 500), "within the grace");
        assert!(
            !l.is_alive(&node, 1_500, 3_000, 500),
            "gone after the grace"
        );
    }
    // It reconnects: its first heartbeat cancels the drop.
    now.store(1_300, Ordering::SeqCst);
    stream(&server, vec![line(3, false), line(4, true)], true).await;
    {
        let l = server.liveness.lock().unwrap();
        assert_eq!(l.dropped_at(&node), None, "a goodbye is no death");
        assert!(l.is_alive(&node, 4_000, 3_000, 500));
    }

    // A stranger's stream for the node binds nothing and drops nothing.
    let stranger = Keypair::new();
    let forged = serde_json::to_string(&SignedRequest::seal(
        HEARTBEAT_PATH,
        &beat(node, 1_300, 99),
        &stranger.pubkey().to_bytes(),
        |m| stranger.sign_message(m).into(),
    ))
    .unwrap();
    stream(&server, vec![forged, "junk".into()], false).await;
    let l = server.liveness.lock().unwrap();
    assert_eq!(l.last_seq(&node), Some(4));
    assert_eq!(l.dropped_at(&node), None);
}

/// Opens a stream, writes `chunks` (raw body bytes, each one HTTP chunk),
/// then waits up to `wait` for the server to answer; its JSON, if it did.
async fn raw_stream(
    server: &Server,
    chunks: Vec<Vec<u8>>,
    wait: std::time::Duration,
) -> Option<serde_json::Value> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = server.url.trim_start_matches("http://").to_string();
    let mut tcp = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let head = format!(
        "POST {HEARTBEAT_STREAM_PATH} HTTP/1.1\r\nhost: {addr}\r\ntransfer-encoding: chunked\r\ncontent-type: application/x-ndjson\r\n\r\n"
    );
    tcp.write_all(head.as_bytes()).await.unwrap();
    for chunk in chunks {
        let mut framed = format!("{:x}\r\n", chunk.len()).into_bytes();
        framed.extend_from_slice(&chunk);
        framed.extend_from_slice(b"\r\n");
        // The server may have ended the stream already: that is the point.
        if tcp.write_all(&framed).await.is_err() {
            break;
        }
    }
    let mut answer = Vec::new();
    let read = tokio::time::timeout(wait, async {
        let mut buf = [0u8; 4096];
        loop {
            match tcp.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    answer.extend_from_slice(&buf[..n]);
                    if answer.windows(4).any(|w| w == b"\r\n\r\n") && answer.ends_with(b"}") {
                        break;
                    }
                }
            }
        }
    })
    .await;
    read.ok()?;
    let text = String::from_utf8_lossy(&answer);
    let body = &text[text.find('{')?..=text.rfind('}')?];
    serde_json::from_str(body).ok()
}

#[tokio::test]
async fn a_stream_of_refused_lines_is_ended_and_a_valid_line_after_them_is_never_read() {
    let now = Arc::new(AtomicI64::new(NOW));
    let key = Keypair::new();
    let node = Pubkey::new_unique();
    let server = serve(now.clone(), node, &key).await;
    let mut body = Vec::new();
    for _ in 0..10 {
        body.extend_from_slice(b"junk\n");
    }
    body.extend_from_slice(
        serde_json::to_string(&sign(&key, &beat(node, NOW, 1)))
            .unwrap()
            .as_bytes(),
    );
    body.push(b'\n');
    let answer = raw_stream(&server, vec![body], std::time::Duration::from_secs(5))
        .await
        .expect("the server ends the stream");
    assert_eq!(
        answer["refused"],
        mcjs_scheduler_daemon::server::STREAM_REFUSALS
    );
    assert_eq!(answer["accepted"], 0);
    assert_eq!(
        server.recorded(&node),
        None,
        "nothing after the refusals was read"
    );
}

#[tokio::test]
async fn a_silent_stream_is_ended_after_the_heartbeat_timeout_and_its_agent_counts_as_gone() {
    let now = Arc::new(AtomicI64::new(NOW));
    let key = Keypair::new();
    let node = Pubkey::new_unique();
    let server = serve(now.clone(), node, &key).await;
    let mut line = serde_json::to_vec(&sign(&key, &beat(node, NOW, 1))).unwrap();
    line.push(b'\n');
    // Then silence: the server's timeout in these tests is 3 s.
    let answer = raw_stream(&server, vec![line], std::time::Duration::from_secs(10))
        .await
        .expect("the server ends a silent stream");
    assert_eq!(answer["accepted"], 1);
    let l = server.liveness.lock().unwrap();
    assert_eq!(l.dropped_at(&node), Some(NOW), "closed without a goodbye");
}

#[tokio::test]
async fn a_heartbeat_sent_one_byte_at_a_time_is_read_once_whole() {
    let now = Arc::new(AtomicI64::new(NOW));
    let key = Keypair::new();
    let node = Pubkey::new_unique();
    let server = serve(now.clone(), node, &key).await;
    let mut line = serde_json::to_vec(&sign(&key, &beat(node, NOW, 1))).unwrap();
    line.push(b'\n');
    let mut goodbye = serde_json::to_vec(&sign(
        &key,
        &Heartbeat {
            goodbye: true,
            power: None,
            ..beat(node, NOW, 2)
        },
    ))
    .unwrap();
    goodbye.push(b'\n');
    let mut chunks: Vec<Vec<u8>> = line.iter().map(|b| vec![*b]).collect();
    chunks.extend(goodbye.iter().map(|b| vec![*b]));
    chunks.push(Vec::new()); // the last chunk: the request ends
    let answer = raw_stream(&server, chunks, std::time::Duration::from_secs(10))
        .await
        .expect("an answer");
    assert_eq!(answer["accepted"], 2, "{answer}");
    assert_eq!(server.recorded(&node).map(|(_, seq)| seq), Some(2));
}

/// Median of honest heartbeat round trips, one after another, with
/// sequence numbers from `seq`.
async fn honest_median(server: &Server, key: &Keypair, node: Pubkey, seq: u64, n: u64) -> f64 {
    let mut took = Vec::new();
    for i in 0..n {
        let started = std::time::Instant::now();
        let (status, ack) = server.post(&sign(key, &beat(node, NOW, seq + i))).await;
        took.push(started.elapsed().as_secs_f64() * 1e3);
        assert_eq!(status, 200, "an honest heartbeat under load: {ack}");
    }
    took.sort_by(f64::total_cmp);
    took[took.len() / 2]
}

/// Strangers hold 500 streams open without a byte and one more sends
/// 256 KiB one byte at a time, with no newline: the node's honest
/// heartbeats are answered in about their usual time meanwhile (medians
/// before and during, same run, printed), the server ends every stranger's
/// stream itself (silence for the heartbeat timeout; a line past
/// `MAX_HEARTBEAT_BYTES`), and none of it costs a chain call (the endpoint
/// reads only the directory in memory).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_hundred_silent_streams_and_a_slow_endless_line_leave_honest_heartbeats_answered() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let now = Arc::new(AtomicI64::new(NOW));
    let key = Keypair::new();
    let node = Pubkey::new_unique();
    let server = serve(now.clone(), node, &key).await;
    let before = honest_median(&server, &key, node, 1, 21).await;

    let addr = server.url.trim_start_matches("http://").to_string();
    let head = format!(
        "POST {HEARTBEAT_STREAM_PATH} HTTP/1.1\r\nhost: {addr}\r\ntransfer-encoding: chunked\r\ncontent-type: application/x-ndjson\r\n\r\n"
    );
    let opened = std::time::Instant::now();
    let mut silent = Vec::new();
    for _ in 0..500 {
        let mut tcp = tokio::net::TcpStream::connect(&addr).await.unwrap();
        tcp.write_all(head.as_bytes()).await.unwrap();
        silent.push(tcp);
    }
    let slow = {
        let (addr, head) = (addr.clone(), head.clone());
        tokio::spawn(async move {
            let mut tcp = tokio::net::TcpStream::connect(&addr).await.unwrap();
            tcp.write_all(head.as_bytes()).await.unwrap();
            let mut sent = 0usize;
            while sent < mcjs_protocol::MAX_HEARTBEAT_BYTES + 1024 {
                if tcp.write_all(b"1\r\na\r\n").await.is_err() {
                    break; // the server ended the stream
                }
                sent += 1;
            }
            let mut answer = Vec::new();
            let _ = tokio::time::timeout(
                std::time::Duration::from_secs(20),
                tcp.read_to_end(&mut answer),
            )
            .await;
            (sent, String::from_utf8_lossy(&answer).into_owned())
        })
    };
    let during = honest_median(&server, &key, node, 100, 21).await;
    let measured_within = opened.elapsed();
    eprintln!(
        "heartbeat load: honest median {before:.1} ms before, {during:.1} ms with 500 silent streams and a slow line ({:.1} s after they opened)",
        measured_within.as_secs_f64()
    );
    assert!(
        measured_within < std::time::Duration::from_secs(3),
        "the load was not all there while measuring"
    );
    assert!(
        during < before * 5.0 + 50.0,
        "honest heartbeats slowed from {before:.1} ms to {during:.1} ms"
    );

    // Every silent stream is ended by the server (its timeout here is 3 s).
    let ended = tokio::time::timeout(std::time::Duration::from_secs(15), async {
        let mut ended = 0;
        for tcp in &mut silent {
            let mut buf = Vec::new();
            if tcp.read_to_end(&mut buf).await.is_ok() {
                ended += 1;
            }
        }
        ended
    })
    .await
    .expect("the server ends silent streams");
    assert_eq!(ended, 500);
    let (sent, answer) = slow.await.unwrap();
    eprintln!("heartbeat load: the endless line was ended after {sent} bytes: {answer:?}");
    // The server answered and ended the stream, past the line cap.
    assert!(answer.contains("\"accepted\":0"), "{answer}");
    assert!(
        sent > mcjs_protocol::MAX_HEARTBEAT_BYTES / 2,
        "{sent} bytes"
    );
    assert_eq!(server.recorded(&node).map(|(_, seq)| seq), Some(120));
}

/// A restarted scheduler has a new session and no memory of the node's
/// sequence numbers: a line the node sealed for the old session, captured
/// and replayed within the clock window after the restart, is refused and
/// records nothing (it cannot keep a dead node alive); the node's own next
/// line, sealed for the session it asked the new process for, is recorded.
#[tokio::test]
async fn a_line_captured_before_a_scheduler_restart_cannot_be_replayed_after_it() {
    let now = Arc::new(AtomicI64::new(NOW));
    let (node, key) = (Pubkey::new_from_array([7; 32]), Keypair::new());
    let before = serve(now.clone(), node, &key).await;
    let captured = sign(&key, &beat(node, NOW, 41));
    assert_eq!(before.post(&captured).await.0, 200);

    // The scheduler restarts: a new process, a new session, no memory.
    let restarted = "fedcba9876543210fedcba9876543210";
    let after = serve_session(now.clone(), node, &key, restarted).await;
    let asked: HeartbeatSession = after
        .http
        .get(format!("{}{HEARTBEAT_SESSION_PATH}", after.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(asked.session, restarted);
    now.fetch_add(1_000, Ordering::SeqCst);
    let (status, body) = after.post(&captured).await;
    assert_eq!(status, 401, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("another scheduler session"),
        "{body}"
    );
    assert_eq!(after.recorded(&node), None, "the replay recorded nothing");

    let fresh = Heartbeat {
        session: asked.session,
        ..beat(node, NOW + 1_000, 42)
    };
    let (status, body) = after.post(&sign(&key, &fresh)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(after.recorded(&node), Some((NOW + 1_000, 42)));
}

/// The hardware challenge's openings (`POST /v1/challenge/opening`): only the node's own
/// key, fresh, for the challenge the chain has in flight on it, is kept; a large one (more
/// than the HTTP layer's 2 MB default) is taken.
#[tokio::test]
async fn a_challenge_opening_is_kept_only_from_the_node_for_its_challenge_in_flight() {
    use mcjs_challenge::{GpuOpening, NodeOpening, Opening};
    use mcjs_protocol::{CHALLENGE_OPENING_PATH, ChallengeOpening};
    use mcjs_scheduler_daemon::challenges::Openings;

    let (key, stranger) = (Keypair::new(), Keypair::new());
    let node = Pubkey::new_unique();
    let mut directory = Directory::default();
    directory.insert(node, key.pubkey());
    let openings: Arc<Mutex<Openings>> = Default::default();
    let challenged = Arc::new(RwLock::new(std::collections::HashMap::from([(node, 7u64)])));
    let state = ServerState {
        liveness: Arc::new(Mutex::new(Liveness::new(0))),
        directory: Arc::new(RwLock::new(directory)),
        metrics: Arc::new(Metrics::new()),
        clock: Arc::new(|| NOW),
        heartbeat_timeout_ms: 3_000,
        disconnect_grace_ms: 500,
        wake: Arc::new(tokio::sync::Notify::new()),
        session: SESSION.into(),
        duties: Default::default(),
        standbys: Default::default(),
        challenged,
        openings: Arc::clone(&openings),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router(state)).await.unwrap() });
    let http = reqwest::Client::new();
    let opening = NodeOpening {
        gpus: vec![GpuOpening {
            commitment: [1; 32],
            held_digest: [2; 32],
            opening: Opening {
                held_roots: vec![[3; 32]; 64],
                rows: vec![mcjs_challenge::OpenedRow {
                    index: 5,
                    // About 2 MB of JSON.
                    values: vec![-123_456; 400_000],
                    proof: Default::default(),
                    pass: 0,
                    held_proof: Default::default(),
                }],
            },
            attestation: None,
        }],
    };
    let post = |sealed: SignedRequest| {
        let (http, url) = (http.clone(), url.clone());
        async move {
            http.post(format!("{url}{CHALLENGE_OPENING_PATH}"))
                .json(&sealed)
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    let send = |by: &Keypair, node: Pubkey, slot: u64, sent_at: i64| {
        let message = ChallengeOpening {
            node: node.to_string(),
            requested_slot: slot,
            sent_at_unix_ms: sent_at,
            opening: opening.clone(),
        };
        post(SignedRequest::seal(
            CHALLENGE_OPENING_PATH,
            &message,
            &by.pubkey().to_bytes(),
            |m| by.sign_message(m).into(),
        ))
    };
    for (by, to, slot, sent_at, status) in [
        (&stranger, node, 7, NOW, 403),
        (&key, node, 8, NOW, 400),
        (&key, node, 7, NOW - 600_000, 401),
        (&key, Pubkey::new_unique(), 7, NOW, 403),
    ] {
        assert_eq!(send(by, to, slot, sent_at).await, status);
        assert!(openings.lock().unwrap().is_empty(), "nothing kept");
    }
    // Who sent it is settled before the message is read: a body that is no opening at all
    // is refused for its signer (403) or its signature (401), never parsed (400).
    let raw = |by: &Keypair, claimed: &Keypair| {
        let body = "{ not an opening".to_string();
        let signature = by.sign_message(&mcjs_protocol::auth::signing_bytes(
            CHALLENGE_OPENING_PATH,
            &body,
        ));
        post(SignedRequest {
            body,
            signer: claimed.pubkey().to_string(),
            signature: signature.to_string(),
        })
    };
    assert_eq!(raw(&stranger, &stranger).await, 403);
    assert_eq!(raw(&stranger, &key).await, 401);
    assert_eq!(raw(&key, &key).await, 400, "signed by the node: then read");
    assert!(openings.lock().unwrap().is_empty(), "nothing kept");

    assert_eq!(send(&key, node, 7, NOW).await, 202);
    let kept = openings.lock().unwrap();
    assert_eq!(kept.get(&node, 7), Some(&opening));
    assert_eq!(kept.get(&node, 8), None);
}

/// `GET /v1/standby/{node}`: a named standby is told its job, the job's spec
/// and its latest attested checkpoint; any other node an empty list; a path
/// that is not an address a 400. Reading it changes nothing.
#[tokio::test]
async fn a_standby_is_told_its_job_and_latest_checkpoint_and_no_one_else_is() {
    let key = Keypair::new();
    let node = Pubkey::new_unique();
    let server = serve(Arc::new(AtomicI64::new(NOW)), node, &key).await;
    let job = Pubkey::new_unique();
    let mut account = common::JobBuilder::pending()
        .running_on(Pubkey::new_unique(), Pubkey::new_unique(), 2, 0)
        .0;
    account.last_checkpoint = Some(mcjs::state::CheckpointRecord {
        hash: [5; 32],
        epoch: 1,
        step: 120,
        time: 0,
        generation: 2,
    });
    let mut named = Standbys::default();
    named.insert(job, node);
    *server.standbys.write().unwrap() = StandbyBook::new(&named, &[(job, account.clone())]);
    let ask = async |path: String| {
        server
            .http
            .get(format!("{}/v1/standby/{path}", server.url))
            .send()
            .await
            .unwrap()
    };
    let told: serde_json::Value = ask(node.to_string()).await.json().await.unwrap();
    assert_eq!(
        told,
        serde_json::json!({"jobs": [{
            "job": job.to_string(),
            "spec": hex::encode(account.spec_hash),
            "step": 120,
            "hash": hex::encode([5u8; 32]),
        }]})
    );
    let other: serde_json::Value = ask(Pubkey::new_unique().to_string())
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(other, serde_json::json!({"jobs": []}));
    assert_eq!(ask("not-a-key".into()).await.status(), 400);
    assert_eq!(server.standbys.read().unwrap().jobs_of(&node).len(), 1);
}
