//! What strangers can make the dashboard do, counted in chain calls: the
//! dashboard reads the chain through a proxy that counts every JSON-RPC
//! call by method. Fifty `/live` pages share one chain read per
//! `LIVE_POLL` (they cost what one page costs), a `/search` of an address
//! with an endless history (the SPL Token program) reads at most
//! `LOCATE_CAP` of it, and an honest page is answered meanwhile in about
//! its usual time (medians before and during, same run, printed).

mod common;

use axum::body::Bytes;
use common::Story;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// JSON-RPC calls seen, by method.
#[derive(Clone, Default)]
struct Calls(Arc<Mutex<HashMap<String, usize>>>);

impl Calls {
    fn total(&self) -> usize {
        self.0.lock().unwrap().values().sum()
    }
    fn of(&self, method: &str) -> usize {
        self.0.lock().unwrap().get(method).copied().unwrap_or(0)
    }
    fn count(&self, body: &[u8]) {
        let Ok(value) = serde_json::from_slice::<serde_json::Value>(body) else {
            return;
        };
        let calls = match value {
            serde_json::Value::Array(batch) => batch,
            one => vec![one],
        };
        let mut seen = self.0.lock().unwrap();
        for call in calls {
            let method = call["method"].as_str().unwrap_or("?").to_string();
            *seen.entry(method).or_default() += 1;
        }
    }
}

/// A JSON-RPC proxy to `upstream` that counts what passes.
async fn counting_proxy(upstream: String) -> (String, Calls) {
    let calls = Calls::default();
    let http = reqwest::Client::new();
    let counted = calls.clone();
    let app = axum::Router::new().route(
        "/",
        axum::routing::post(move |body: Bytes| {
            let (http, upstream, counted) = (http.clone(), upstream.clone(), counted.clone());
            async move {
                counted.count(&body);
                let answer = http
                    .post(&upstream)
                    .header("content-type", "application/json")
                    .body(body)
                    .send()
                    .await
                    .unwrap();
                let status = answer.status().as_u16();
                let bytes = answer.bytes().await.unwrap();
                (
                    axum::http::StatusCode::from_u16(status).unwrap(),
                    [("content-type", "application/json")],
                    bytes,
                )
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, calls)
}

async fn median_ms(url: &str, n: usize) -> f64 {
    let http = reqwest::Client::new();
    let mut took = Vec::new();
    for _ in 0..n {
        let started = Instant::now();
        let response = http.get(url).send().await.unwrap();
        assert!(
            response.status().is_success(),
            "{url}: {}",
            response.status()
        );
        response.bytes().await.unwrap();
        took.push(started.elapsed().as_secs_f64() * 1e3);
    }
    took.sort_by(f64::total_cmp);
    took[n / 2]
}

/// A client whose requests come from `ip` (a loopback address).
fn from(ip: [u8; 4]) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(Some(std::net::IpAddr::from(ip)))
        .build()
        .unwrap()
}

/// Opens `n` `/live` pages, each from its own loopback address (one
/// address may hold only `MAX_LIVE_STREAMS_PER_PEER`), and reads them for
/// `for_how_long`; returns the events the pages got.
async fn live_pages(base: &str, n: usize, for_how_long: Duration) -> usize {
    let mut pages = Vec::new();
    for i in 0..n {
        let page = from([127, 0, 1, i as u8 + 1])
            .get(format!("{base}/live"))
            .send()
            .await
            .unwrap();
        assert_eq!(page.status(), reqwest::StatusCode::OK);
        pages.push(tokio::spawn(async move {
            let mut page = page;
            let mut events = 0;
            let until = tokio::time::Instant::now() + for_how_long;
            while let Ok(Ok(Some(chunk))) = tokio::time::timeout_at(until, page.chunk()).await {
                events += String::from_utf8_lossy(&chunk).matches("data: ").count();
            }
            events
        }));
    }
    let mut events = 0;
    for page in pages {
        events += page.await.unwrap();
    }
    events
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_live_pages_and_a_search_of_the_token_program_cost_bounded_chain_calls() {
    let story = Story::build().await;
    let (proxy, calls) = counting_proxy(story.localnet.info().rpc_url.clone()).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(mcjs_dashboard::serve(
        listener,
        mcjs_client::ChainClient::new(&proxy),
        std::future::pending(),
    ));
    let honest = format!("{base}/job/{}", story.recovered);
    let before = median_ms(&honest, 9).await;

    // One live page for three polls, then fifty for as long: the chain
    // reads they cause.
    let window = mcjs_dashboard::LIVE_POLL * 3;
    let at_start = calls.total();
    let started = std::time::Instant::now();
    let one_events = live_pages(&base, 1, window).await;
    let one = calls.total() - at_start;
    let one_secs = started.elapsed().as_secs_f64();
    let at_start = calls.total();
    let started = std::time::Instant::now();
    let fifty = tokio::spawn({
        let base = base.clone();
        async move { live_pages(&base, 50, window).await }
    });
    tokio::time::sleep(mcjs_dashboard::LIVE_POLL / 2).await;
    let during = median_ms(&honest, 9).await;
    let honest_calls = {
        // What the honest requests themselves cost, measured alone below.
        let fifty_events = fifty.await.unwrap();
        assert!(
            fifty_events >= 50,
            "every live page got its first event ({fifty_events})"
        );
        calls.total() - at_start
    };
    let fifty_secs = started.elapsed().as_secs_f64();
    let at_start = calls.total();
    median_ms(&honest, 9).await;
    let nine_pages = calls.total() - at_start;
    let fifty_live = honest_calls.saturating_sub(nine_pages);
    eprintln!(
        "dashboard load: job page median {before:.1} ms before, {during:.1} ms with 50 live pages; \
         chain calls over {} s: {one} for one live page ({one_events} events), {fifty_live} for fifty \
         (besides {nine_pages} for nine job pages)",
        window.as_secs()
    );
    assert!(one > 0, "a live page reads the chain");
    // Fifty pages share the polls of one. Compared per second: each page
    // watches for the window from when it opened, and on a loaded machine
    // opening fifty takes seconds, which lengthens their phase and adds the
    // reads of pages opened after a poll's answer went stale (seen: 30 calls
    // in 8.1 s against one page's 9 in 6.1 s, with the whole suite running).
    // A page that polled by itself would cost fifty times one's rate.
    let (one_rate, fifty_rate) = (one as f64 / one_secs, fifty_live as f64 / fifty_secs);
    assert!(
        fifty_rate <= one_rate * 3.0 + 8.0 / window.as_secs_f64(),
        "fifty live pages cost {fifty_live} chain calls in {fifty_secs:.1} s where one costs {one} in {one_secs:.1} s"
    );
    assert!(
        during < before * 5.0 + 200.0,
        "the job page slowed from {before:.1} ms to {during:.1} ms"
    );

    // A search of the token program: found in no MCJS account, and only the
    // newest LOCATE_CAP of its transactions looked at.
    let at_start = calls.total();
    let tx_reads = calls.of("getTransaction");
    let response = reqwest::get(format!(
        "{base}/search?q=TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA"
    ))
    .await
    .unwrap();
    assert_eq!(response.status(), reqwest::StatusCode::NOT_FOUND);
    let search = calls.total() - at_start;
    let search_tx = calls.of("getTransaction") - tx_reads;
    eprintln!(
        "dashboard load: /search of the token program: {search} chain calls, {search_tx} getTransaction"
    );
    assert!(
        search_tx <= mcjs_dashboard::data::LOCATE_CAP,
        "{search_tx} transactions read"
    );
    assert!(
        search <= mcjs_dashboard::data::LOCATE_CAP + 16,
        "{search} chain calls"
    );
}

/// One address holds at most `MAX_LIVE_STREAMS_PER_PEER` live pages (the
/// next is answered 429), so it cannot take the dashboard's
/// `MAX_LIVE_STREAMS` from everyone else; another address still opens one.
/// Past its request budget an address is answered 429 by the per-address
/// layer, and the others are served.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_address_holds_a_few_live_pages_and_its_own_request_budget() {
    let story = Story::build().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(mcjs_dashboard::serve(
        listener,
        mcjs_client::ChainClient::new(&story.localnet.info().rpc_url),
        std::future::pending(),
    ));
    let greedy = from([127, 0, 2, 1]);
    let mut held = Vec::new();
    let mut refused = 0;
    for _ in 0..mcjs_dashboard::MAX_LIVE_STREAMS_PER_PEER + 4 {
        let page = greedy.get(format!("{base}/live")).send().await.unwrap();
        match page.status().as_u16() {
            200 => held.push(page),
            429 => refused += 1,
            other => panic!("a live page answered {other}"),
        }
    }
    assert_eq!(held.len(), mcjs_dashboard::MAX_LIVE_STREAMS_PER_PEER);
    assert_eq!(refused, 4);
    let other = from([127, 0, 2, 2]);
    let page = other.get(format!("{base}/live")).send().await.unwrap();
    assert_eq!(
        page.status().as_u16(),
        200,
        "another address opens a live page"
    );
    // A page the greedy address closes gives its place back.
    drop(held.pop());
    let again = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let page = greedy.get(format!("{base}/live")).send().await.unwrap();
            if page.status().as_u16() == 200 {
                return page;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("a closed live page's place is given back");
    drop(again);

    // 400 page requests from one address, as fast as it can: past its burst
    // the layer answers 429; another address's page is still served.
    let flood = from([127, 0, 2, 3]);
    let started = Instant::now();
    let mut limited = 0;
    for _ in 0..400 {
        let r = flood.get(format!("{base}/program")).send().await.unwrap();
        if r.status().as_u16() == 429 {
            limited += 1;
        }
    }
    let secs = started.elapsed().as_secs_f64();
    eprintln!("400 dashboard requests from one address in {secs:.2} s: {limited} answered 429");
    let budget = mcjs_dashboard::PER_PEER.burst as f64
        + secs / mcjs_dashboard::PER_PEER.period.as_secs_f64()
        + 1.0;
    assert!(
        (400 - limited) as f64 <= budget,
        "{} let through, over {budget:.0}",
        400 - limited
    );
    assert!(limited > 0, "the flood was limited");
    let page = other.get(format!("{base}/program")).send().await.unwrap();
    assert!(page.status().is_success(), "{}", page.status());
}
