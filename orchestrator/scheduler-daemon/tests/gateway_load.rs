//! The store gateway under strangers' load, on loopback: requests from
//! fresh keys cost it a signature check and, beyond a bounded budget, no
//! chain call; a node the scheduler does not know costs no chain call at
//! all; the known node is still served. The chain calls are counted at a
//! stand-in RPC server that answers every request with an error.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use mcjs_client::{ChainClient, Keypair, Pubkey, Signer};
use mcjs_protocol::SignedRequest;
use mcjs_protocol::store::{Role, STORE_SIGN_PATH, StoreOp, StoreRequest, StoreUrl};
use mcjs_scheduler_daemon::auth::Directory;
use mcjs_scheduler_daemon::gateway::{self, GatewayLimits, GatewayState, S3Store};
use mcjs_scheduler_daemon::metrics::Metrics;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// An RPC endpoint that counts the requests it gets and fails each.
async fn counting_rpc() -> (String, Arc<AtomicU64>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let count = Arc::new(AtomicU64::new(0));
    let counted = Arc::clone(&count);
    tokio::spawn(async move {
        loop {
            let Ok((mut tcp, _)) = listener.accept().await else {
                return;
            };
            let counted = Arc::clone(&counted);
            tokio::spawn(async move {
                let mut buf = vec![0u8; 64 * 1024];
                let mut seen = Vec::new();
                while let Ok(n) = tcp.read(&mut buf).await {
                    if n == 0 {
                        return;
                    }
                    seen.extend_from_slice(&buf[..n]);
                    if seen.windows(4).any(|w| w == b"\r\n\r\n") {
                        break;
                    }
                }
                counted.fetch_add(1, Ordering::SeqCst);
                let _ = tcp
                    .write_all(
                        b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                    )
                    .await;
            });
        }
    });
    (url, count)
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn sealed(key: &Keypair, role: Role, path: String) -> Vec<u8> {
    let request = StoreRequest {
        role,
        sent_at_unix_ms: now_ms(),
        ops: vec![StoreOp::Get { path }],
    };
    serde_json::to_vec(&SignedRequest::seal(
        STORE_SIGN_PATH,
        &request,
        &key.pubkey().to_bytes(),
        |m| key.sign_message(m).into(),
    ))
    .unwrap()
}

/// A gateway with the standard limits over the chain at `rpc`, for an S3
/// store nobody serves (nothing here gets as far as the store).
fn gateway_over(rpc: &str, directory: Directory) -> GatewayState {
    let store: StoreUrl = "s3://mcjs/deploy?endpoint=http://127.0.0.1:9"
        .parse()
        .unwrap();
    let StoreUrl::S3(location) = store.clone() else {
        panic!("an s3 url")
    };
    GatewayState {
        url: store,
        s3: Some(Arc::new(
            S3Store::new(location, |k| Some(format!("test-{k}"))).unwrap(),
        )),
        client: ChainClient::new(rpc),
        metrics: Arc::new(Metrics::new()),
        clock: Arc::new(now_ms),
        directory: Arc::new(RwLock::new(directory)),
        limits: Arc::new(GatewayLimits::standard()),
        views: Default::default(),
        index: None,
        standbys: Default::default(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strangers_cost_no_chain_call_beyond_the_budget_and_the_known_node_is_still_served() {
    let (rpc, chain_calls) = counting_rpc().await;
    let (node, operator) = (Pubkey::new_unique(), Keypair::new());
    let mut directory = Directory::default();
    directory.insert(node, operator.pubkey());
    let state = gateway_over(&rpc, directory);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}{STORE_SIGN_PATH}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, gateway::routes(state)).await.unwrap() });
    let http = reqwest::Client::new();
    let post = async |body: Vec<u8>| -> (u16, Duration) {
        let t = Instant::now();
        let status = http
            .post(&url)
            .body(body)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16();
        (status, t.elapsed())
    };
    let known = || {
        sealed(
            &operator,
            Role::Node {
                node: node.to_string(),
            },
            "specs/x.json".into(),
        )
    };

    // The known node, before: its request reaches the chain (which fails).
    let (status, before) = post(known()).await;
    assert_eq!(status, 502, "the stand-in chain fails every call");
    let calls_before = chain_calls.load(Ordering::SeqCst);
    assert!(calls_before >= 1);

    // 1,000 owner requests, each from a fresh wallet.
    let started = Instant::now();
    let mut busy = 0;
    for _ in 0..1_000 {
        let k = Keypair::new();
        // A job's output: the owner's jobs decide it, so it costs a chain
        // scan (a wallet's own space would not).
        let path = format!("jobs/{}/output/g1/model.bin", Pubkey::new_unique());
        let (status, _) = post(sealed(&k, Role::Owner, path)).await;
        if status == 429 {
            busy += 1;
        }
    }
    let secs = started.elapsed().as_secs_f64();
    let owner_calls = chain_calls.load(Ordering::SeqCst) - calls_before;
    // The owners' budget: a burst of 50, then 20 a second.
    let budget = 50 + (20.0 * secs).ceil() as u64 + 2;
    eprintln!(
        "1,000 fresh owner keys in {secs:.2} s: {busy} refused at once, {owner_calls} chain calls (budget {budget})"
    );
    assert!(
        owner_calls <= budget,
        "{owner_calls} chain calls over the budget of {budget}"
    );
    assert!(busy >= 1_000 - budget as usize, "{busy} refused");

    // 500 node requests from keys the scheduler does not know: no chain call.
    let calls = chain_calls.load(Ordering::SeqCst);
    for i in 0..500 {
        let k = Keypair::new();
        let claimed = if i % 2 == 0 { node } else { k.pubkey() };
        let (status, _) = post(sealed(
            &k,
            Role::Node {
                node: claimed.to_string(),
            },
            "specs/x.json".into(),
        ))
        .await;
        assert!(matches!(status, 401 | 403), "{status}");
    }
    assert_eq!(
        chain_calls.load(Ordering::SeqCst),
        calls,
        "a node the scheduler does not know costs no chain call"
    );

    // The known node, after: still served (its own budget is untouched).
    let (status, after) = post(known()).await;
    assert_eq!(status, 502);
    assert!(chain_calls.load(Ordering::SeqCst) > calls);
    eprintln!(
        "the known node's request: {:.1} ms before the load, {:.1} ms after",
        before.as_secs_f64() * 1e3,
        after.as_secs_f64() * 1e3
    );
}

/// One address signing owner requests with fresh wallets spends its own
/// share of the owners' budget, not the whole of it: another address's
/// owner is still looked up. And past the scheduler's per-address budget,
/// a request is refused before its body is read (no signature checked, no
/// chain call), while other addresses are answered as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_address_cannot_spend_the_owners_budget_or_the_port_of_another() {
    use mcjs_protocol::peer::{PeerLimit, PerPeer};
    let (rpc, chain_calls) = counting_rpc().await;
    let state = gateway_over(&rpc, Directory::default());
    // The per-address layer as the scheduler serves it, with a budget small
    // enough to cross quickly: a burst of 300, then 100 a second.
    let per_peer = PerPeer::new(PeerLimit {
        period: Duration::from_millis(10),
        burst: 300,
    });
    let app = gateway::routes(state).layer(per_peer.layer());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<std::net::SocketAddr>(),
        )
        .await
        .unwrap()
    });
    let from = |ip: [u8; 4]| {
        reqwest::Client::builder()
            .local_address(Some(std::net::IpAddr::from(ip)))
            .build()
            .unwrap()
    };
    let url = format!("http://127.0.0.1:{port}{STORE_SIGN_PATH}");
    let owner_request = || {
        let k = Keypair::new();
        // A job's output: the owner's jobs decide it, so it costs a chain
        // scan (a wallet's own space would not).
        let path = format!("jobs/{}/output/g1/model.bin", Pubkey::new_unique());
        sealed(&k, Role::Owner, path)
    };
    let post = async |client: &reqwest::Client, body: Vec<u8>| -> u16 {
        client
            .post(&url)
            .body(body)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    };

    // 200 fresh wallets from 127.0.0.2: only its share reaches the chain.
    let flood = from([127, 0, 0, 2]);
    let started = Instant::now();
    let mut refused = 0;
    for _ in 0..200 {
        if post(&flood, owner_request()).await == 429 {
            refused += 1;
        }
    }
    let secs = started.elapsed().as_secs_f64();
    let spent = chain_calls.load(Ordering::SeqCst);
    // One address's share: a burst of 25, then 10 a second.
    let share = 25 + (10.0 * secs).ceil() as u64 + 1;
    eprintln!(
        "200 fresh owner keys from one address in {secs:.2} s: {refused} refused, {spent} chain calls (its share {share})"
    );
    assert!(
        spent <= share,
        "{spent} chain calls over its share of {share}"
    );

    // An owner at another address is still looked up (the chain stand-in
    // fails: 502 means the lookup was made).
    let honest = from([127, 0, 0, 3]);
    assert_eq!(post(&honest, owner_request()).await, 502);
    assert!(chain_calls.load(Ordering::SeqCst) > spent);

    // 2,000 requests of junk from 127.0.0.4: past the address's budget each
    // is refused by the layer (429) before its body is read.
    let junk = from([127, 0, 0, 4]);
    let started = Instant::now();
    let mut limited = 0;
    for _ in 0..2_000 {
        if post(&junk, b"not a signed request".to_vec()).await == 429 {
            limited += 1;
        }
    }
    let secs = started.elapsed().as_secs_f64();
    let allowed = 300 + (100.0 * secs).ceil() as usize + 1;
    eprintln!(
        "2,000 requests from one address in {secs:.2} s: {limited} refused by the per-address layer (at most {allowed} let through)"
    );
    assert!(
        2_000 - limited <= allowed,
        "{} let through, over {allowed}",
        2_000 - limited
    );
    // The honest address is answered meanwhile.
    assert_eq!(post(&honest, owner_request()).await, 502);
    assert!(per_peer.remembered() >= 3);
}

/// A node's standing is read at most every 2 s; a request it refuses reads
/// it again at once (the chain may have given the node a job a moment ago),
/// but only if the standing is over 0.5 s old, so a node whose requests are
/// all refused costs at most two reads a second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_node_request_reads_the_chain_again_only_past_half_a_second() {
    use mcjs_scheduler_daemon::node_views::{NodeView, VIEW_RECHECK};
    let (rpc, chain_calls) = counting_rpc().await;
    let (node, operator) = (Pubkey::new_unique(), Keypair::new());
    let mut directory = Directory::default();
    directory.insert(node, operator.pubkey());
    let state = gateway_over(&rpc, directory);
    let views = Arc::clone(&state.views);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}{STORE_SIGN_PATH}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, gateway::routes(state)).await.unwrap() });
    let http = reqwest::Client::new();
    // No job on the node has this spec: refused on the view.
    let refused = || {
        sealed(
            &operator,
            Role::Node {
                node: node.to_string(),
            },
            format!("specs/{}.json", "ab".repeat(32)),
        )
    };
    let post = async |body: Vec<u8>| http.post(&url).body(body).send().await.unwrap();
    let standing = |age: Duration| {
        let view = NodeView {
            operator: operator.pubkey(),
            jobs: Vec::new(),
            checking: Vec::new(),
            standby: Vec::new(),
        };
        views.put(node, view, Instant::now() - age);
    };

    // Read 100 ms ago: refused on it, no chain call.
    standing(Duration::from_millis(100));
    let calls = chain_calls.load(Ordering::SeqCst);
    let response = post(refused()).await;
    assert_eq!(response.status().as_u16(), 403);
    let why = response.text().await.unwrap();
    assert!(why.contains("no job on this node has this spec"), "{why}");
    assert_eq!(
        chain_calls.load(Ordering::SeqCst),
        calls,
        "a fresh standing is not read again"
    );

    // Read a second ago (fresh for serving, but past the recheck age): the
    // refusal reads the chain again (which fails here, so the standing
    // serves and still refuses).
    assert!(Duration::from_secs(1) > VIEW_RECHECK);
    standing(Duration::from_secs(1));
    let response = post(refused()).await;
    assert_eq!(response.status().as_u16(), 403);
    assert!(
        chain_calls.load(Ordering::SeqCst) > calls,
        "a refusal on a standing a second old reads the chain again"
    );
}
