//! Placement throughput: the real scheduler daemon filling an empty fleet.
//!
//! A local chain with 400 ms slots holds `MCJS_BENCH_PLACE_NODES` (200)
//! idle nodes of ten providers and as many pending jobs, each of which fits
//! any node. The daemon reaches the chain through an endpoint that adds
//! `MCJS_BENCH_LATENCY_MS` (100) to every call, as a distant RPC provider
//! does; every node heartbeats once a second, signed by its operator key,
//! as its agent would. Printed, for each number of transactions the daemon
//! keeps in flight (`MCJS_BENCH_IN_FLIGHT`, default `1,16,32,64`): the time
//! from the daemon answering its heartbeat session (it is running) to the
//! last job assigned on chain, the placements a second, and the calls it
//! made through the endpoint.
//!
//!   MCJS_PROGRAM_SO= cargo bench --profile dev -p mcjs-scheduler-daemon --bench placement
//!
//! With `MCJS_PROGRAM_SO` naming the SBF build, the chain runs the bytecode.

#[path = "../tests/common/mod.rs"]
mod common;
mod support;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::{JobBuilder, node, provider};
use mcjs::state::JobState;
use mcjs_client::{ChainClient, JobFilter, Keypair, Pubkey, Signer};
use mcjs_cluster::EndpointProfile;
use mcjs_localnet::{free_port_pair, read_keypair};
use mcjs_protocol::auth::SignedRequest;
use mcjs_protocol::store::StoreUrl;
use mcjs_protocol::{HEARTBEAT_PATH, HEARTBEAT_SESSION_PATH, Heartbeat, HeartbeatSession};
use mcjs_scheduler_daemon::shell::{Daemon, DaemonConfig};
use support::{count, data, endpoint_to, now_ms, program_account, start_chain};
use tokio_util::sync::CancellationToken;

const PROVIDERS: usize = 10;

/// An idle fleet: `nodes` nodes (each with its operator key) of ten
/// providers, and as many pending jobs.
struct Fleet {
    accounts: Vec<(Pubkey, mcjs_localnet::Account)>,
    /// Node, its provider, its operator key.
    nodes: Vec<(Pubkey, Pubkey, Keypair)>,
    jobs: usize,
}

fn fleet(nodes: usize, now: i64) -> Fleet {
    let providers: Vec<Pubkey> = (0..PROVIDERS).map(|_| Pubkey::new_unique()).collect();
    let mut accounts: Vec<(Pubkey, mcjs_localnet::Account)> = providers
        .iter()
        .map(|p| {
            let mut state = provider(10_000_000_000);
            state.node_count = nodes.div_ceil(PROVIDERS) as u32;
            (*p, program_account(data(&state)))
        })
        .collect();
    let mut fleet_nodes = Vec::new();
    for i in 0..nodes {
        let key = Pubkey::new_unique();
        let provider = providers[i % PROVIDERS];
        let operator = Keypair::new();
        let mut n = node(provider, 81_920);
        n.index = (i / PROVIDERS) as u32;
        n.operator = operator.pubkey();
        n.status_since = now - 60;
        accounts.push((key, program_account(data(&n))));
        fleet_nodes.push((key, provider, operator));
    }
    let owner = Pubkey::new_unique();
    for i in 0..nodes {
        let mut job = JobBuilder::pending().0;
        job.owner = owner;
        job.job_id = i as u64;
        job.state = JobState::Pending { since: now - 10 };
        job.submitted_at = now - 10;
        job.progress_mark = now - 10;
        accounts.push((Pubkey::new_unique(), program_account(data(&job))));
    }
    Fleet {
        accounts,
        nodes: fleet_nodes,
        jobs: nodes,
    }
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let nodes = count("MCJS_BENCH_PLACE_NODES", 200);
    let latency = Duration::from_millis(count("MCJS_BENCH_LATENCY_MS", 100) as u64);
    let in_flight: Vec<usize> = std::env::var("MCJS_BENCH_IN_FLIGHT")
        .unwrap_or_else(|_| "1,16,32,64".into())
        .split(',')
        .filter_map(|n| n.trim().parse().ok())
        .collect();
    println!(
        "placement: {nodes} pending jobs on {nodes} idle nodes of {PROVIDERS} providers, 400 ms slots, {} ms of latency per call ({})",
        latency.as_millis(),
        match std::env::var_os("MCJS_PROGRAM_SO").filter(|p| !p.is_empty()) {
            Some(_) => "the program's SBF build",
            None => "the program's native build",
        }
    );
    for sends in in_flight {
        place(nodes, latency, sends).await;
    }
}

/// One run on a fresh chain: the daemon with `sends` transactions in flight.
async fn place(nodes: usize, latency: Duration, sends: usize) {
    let fleet = fleet(nodes, now_ms() / 1_000);
    let (localnet, dir) = start_chain(fleet.accounts).await;
    let info = localnet.info().clone();
    // The daemon finds its websocket at the endpoint's port + 1.
    let (endpoint, _link) = endpoint_to(
        &info,
        EndpointProfile {
            latency,
            ..EndpointProfile::METERED
        },
    )
    .await;
    let listen: std::net::SocketAddr = format!("127.0.0.1:{}", free_port_pair()).parse().unwrap();
    let config = DaemonConfig {
        rpc_url: endpoint.url(),
        fees: None,
        listen,
        tick: Duration::from_millis(500),
        detector: Default::default(),
        store: StoreUrl::Dir(dir.path().join("store")),
        sends_in_flight: sends,
        index_stream: Default::default(),
        challenge: Default::default(),
    };
    let scheduler = read_keypair(&info.wallets.scheduler).unwrap();
    let daemon = Daemon::connect(
        config,
        scheduler,
        mcjs_scheduler_daemon::server::system_clock(),
    )
    .await
    .expect("the scheduler connects");
    let cancel = CancellationToken::new();
    let run = tokio::spawn(daemon.run(cancel.clone()));

    // Every node's agent: a signed heartbeat a second into the daemon's
    // session, as the agent's fallback path sends them.
    let base = format!("http://{listen}");
    let http = reqwest::Client::new();
    let session = loop {
        if let Ok(r) = http
            .get(format!("{base}{HEARTBEAT_SESSION_PATH}"))
            .send()
            .await
            && let Ok(s) = r.json::<HeartbeatSession>().await
        {
            break s.session;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let refused = Arc::new(AtomicU64::new(0));
    let beats = tokio::spawn({
        let (cancel, refused) = (cancel.clone(), refused.clone());
        let nodes = Arc::new(fleet.nodes);
        async move {
            let mut seq = 0u64;
            while !cancel.is_cancelled() {
                seq += 1;
                let sent = futures_util::future::join_all(nodes.iter().map(
                    |(node, provider, operator)| {
                        let beat = Heartbeat {
                            node: node.to_string(),
                            provider: provider.to_string(),
                            agent_url: "http://127.0.0.1:1".into(),
                            sent_at_unix_ms: now_ms(),
                            seq,
                            session: session.clone(),
                            jobs: Vec::new(),
                            goodbye: false,
                            power: None,
                        };
                        let sealed = SignedRequest::seal(
                            HEARTBEAT_PATH,
                            &beat,
                            &operator.pubkey().to_bytes(),
                            |m| operator.sign_message(m).into(),
                        );
                        http.post(format!("{base}{HEARTBEAT_PATH}"))
                            .json(&sealed)
                            .send()
                    },
                ))
                .await;
                for answer in sent {
                    if !answer.is_ok_and(|r| r.status().is_success()) {
                        refused.fetch_add(1, Ordering::Relaxed);
                    }
                }
                tokio::time::sleep(Duration::from_millis(1_000)).await;
            }
        }
    });

    // Assignments, read from the chain itself (not through the endpoint).
    let chain = ChainClient::new(&info.rpc_url);
    let started = Instant::now();
    let calls_before: HashMap<String, u64> = endpoint.calls_by_method().into_iter().collect();
    let mut first_at = None;
    let mut assigned = 0;
    while started.elapsed() < Duration::from_secs(300) {
        assigned = chain
            .jobs(JobFilter::All)
            .await
            .map(|jobs| jobs.iter().filter(|(_, j)| !j.state.can_assign()).count())
            .unwrap_or(assigned);
        if assigned > 0 && first_at.is_none() {
            first_at = Some(started.elapsed());
        }
        if assigned == fleet.jobs {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let elapsed = started.elapsed();
    cancel.cancel();
    let _ = run.await;
    let _ = beats.await;
    let mut calls: Vec<(String, u64)> = endpoint
        .calls_by_method()
        .into_iter()
        .map(|(m, n)| {
            let before = calls_before.get(&m).copied().unwrap_or(0);
            (m, n - before)
        })
        .filter(|(_, n)| *n > 0)
        .collect();
    calls.sort();
    let first = first_at.unwrap_or(elapsed);
    let span = elapsed.saturating_sub(first);
    println!(
        "  {sends:>3} in flight: {assigned}/{} placed in {:.1} s ({:.1} a second); first after {:.1} s, then {:.1} a second; {} heartbeats refused; calls: {}",
        fleet.jobs,
        elapsed.as_secs_f64(),
        assigned as f64 / elapsed.as_secs_f64(),
        first.as_secs_f64(),
        assigned.saturating_sub(1) as f64 / span.as_secs_f64().max(0.001),
        refused.load(Ordering::Relaxed),
        calls
            .iter()
            .map(|(m, n)| format!("{m} {n}"))
            .collect::<Vec<_>>()
            .join(", "),
    );
    drop(localnet);
}
