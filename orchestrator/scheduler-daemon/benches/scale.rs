//! The scheduler at fleet scale, in three parts.
//!
//! 1. From memory, with `MCJS_BENCH_NODES` nodes (default 10,000) and
//!    `MCJS_BENCH_JOBS` jobs (100,000) in steady state (nine in ten
//!    finished, nine in a hundred running on their nodes, one in a hundred
//!    waiting for hardware no node has): the index's backfill and memory, a
//!    read of everything (what a round cloned before its working set), and
//!    the real scheduler round (`Daemon::round` over the index: snapshot,
//!    directory, failure detection, placement, verification duties).
//! 2. On the local chain, preloaded (`LocalnetConfig::preload`) with
//!    `MCJS_BENCH_CHAIN_NODES` nodes (1,000) and `MCJS_BENCH_CHAIN_JOBS`
//!    jobs (10,000) of the same mix: a scan of the program (what every round
//!    did before the index) against the index's backfill over RPC.
//! 3. The real scheduler daemon behind a metered endpoint (every HTTP call
//!    and byte counted, its websocket through a counting link) over a chain
//!    with 100 nodes and 10, then 1,000, finished jobs: its calls and bytes
//!    per minute in steady state (`MCJS_BENCH_WINDOW_SECS`, default 60).
//!
//!   MCJS_PROGRAM_SO= cargo bench --profile dev -p mcjs-scheduler-daemon --bench scale
//!
//! Every account is what the program's own types serialize to, at the
//! size the program allocates.

#[path = "../tests/common/mod.rs"]
mod common;
mod support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use common::{JobBuilder, busy, heartbeat, node, params, provider};
use mcjs::state::{Config, JobState};
use mcjs_client::decode::AccountKind;
use mcjs_client::rpc::{Event, IndexSource, ProgramIndex};
use mcjs_client::{ChainClient, JobFilter, Keypair, Pubkey, ix};
use mcjs_cluster::{Endpoint, EndpointProfile};
use mcjs_localnet::{free_port_pair, read_keypair};
use mcjs_protocol::store::StoreUrl;
use mcjs_scheduler_daemon::Liveness;
use mcjs_scheduler_daemon::auth::Directory;
use mcjs_scheduler_daemon::chain::LiveChain;
use mcjs_scheduler_daemon::metrics::Metrics;
use mcjs_scheduler_daemon::shell::{Daemon, DaemonConfig, Memory};
use support::{count, data, endpoint_to, now_ms, program_account, start_chain};
use tokio_util::sync::CancellationToken;

/// The system allocator, counting the bytes in use: what the index holds
/// is what is in use once it is live less what was before.
struct Counting;

static IN_USE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

unsafe impl std::alloc::GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        IN_USE.fetch_add(layout.size(), std::sync::atomic::Ordering::Relaxed);
        unsafe { std::alloc::System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        IN_USE.fetch_sub(layout.size(), std::sync::atomic::Ordering::Relaxed);
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn in_use() -> usize {
    IN_USE.load(std::sync::atomic::Ordering::Relaxed)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let (nodes, jobs) = (
        count("MCJS_BENCH_NODES", 10_000),
        count("MCJS_BENCH_JOBS", 100_000),
    );
    let (chain_nodes, chain_jobs) = (
        count("MCJS_BENCH_CHAIN_NODES", 1_000),
        count("MCJS_BENCH_CHAIN_JOBS", 10_000),
    );
    let window = Duration::from_secs(count("MCJS_BENCH_WINDOW_SECS", 60) as u64);

    in_memory(nodes, jobs).await;
    scans_against_backfill(chain_nodes, chain_jobs).await;
    for finished in [10, 1_000] {
        scheduler_traffic(100, finished, window).await;
    }
}

/// A fleet in steady state, as the program writes its accounts.
struct Fleet {
    /// Providers, nodes and jobs.
    accounts: Vec<(Pubkey, Vec<u8>)>,
    /// The Config account, at its address (the chain has its own).
    config: (Pubkey, Vec<u8>),
    /// The nodes running a job.
    busy: Vec<Pubkey>,
}

/// `nodes` nodes of one provider and `jobs` jobs: 1 in 100 waiting for
/// eight GPUs (no node has them: they wait, as jobs for scarce hardware
/// do), 9 in 100 running (each on its own node while there are nodes), the
/// rest completed. `now` (unix seconds) dates the running jobs' progress.
fn fleet(nodes: usize, jobs: usize, now: i64) -> Fleet {
    let owner = Pubkey::new_unique();
    let provider_key = Pubkey::new_unique();
    let waiting = jobs / 100;
    let running = (jobs * 9 / 100).min(nodes);
    let node_keys: Vec<Pubkey> = (0..nodes).map(|_| Pubkey::new_unique()).collect();
    let job_keys: Vec<Pubkey> = (0..jobs).map(|_| Pubkey::new_unique()).collect();
    let mut accounts = vec![(provider_key, data(&provider(10_000_000_000)))];
    for (i, key) in node_keys.iter().enumerate() {
        let mut n = node(provider_key, 81_920);
        n.index = i as u32;
        if i < running {
            n = busy(n, job_keys[i]);
        }
        accounts.push((*key, data(&n)));
    }
    for (i, key) in job_keys.iter().enumerate() {
        let mut job = JobBuilder::pending().0;
        job.owner = owner;
        job.job_id = i as u64;
        job.terms.checkpoint_interval_secs = 900;
        if i < running {
            job = JobBuilder(job)
                .running_on(node_keys[i], provider_key, 1, now - 10)
                .0;
        } else if i < running + waiting {
            job.requirements.gpu_count = 8;
        } else {
            job.state = JobState::Completed { at: now - 100 };
            job.finished_at = Some(now - 100);
        }
        accounts.push((*key, data(&job)));
    }
    let config = Config {
        admin: Pubkey::new_unique(),
        scheduler: Pubkey::new_unique(),
        usdc_mint: Pubkey::new_unique(),
        usdc_decimals: 6,
        treasury: Pubkey::new_unique(),
        insurance_pool: Pubkey::new_unique(),
        params: params(),
        paused: false,
        bump: 255,
        pool_bump: 255,
    };
    Fleet {
        accounts,
        config: (mcjs_client::pda::config(), data(&config)),
        busy: node_keys[..running].to_vec(),
    }
}

/// Part 1: the index and the scheduler's round, from memory.
async fn in_memory(nodes: usize, jobs: usize) {
    let now = now_ms();
    let fleet = fleet(nodes, jobs, now / 1_000);
    let mut accounts = fleet.accounts.clone();
    accounts.push(fleet.config.clone());
    let before = in_use();
    let t = Instant::now();
    let index = ProgramIndex::follow(InMemory(Arc::new(accounts)));
    while !index.is_live() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let backfill = t.elapsed();
    // Let the backfill's copies be dropped before counting.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let held = in_use().saturating_sub(before);
    println!(
        "memory: {nodes} nodes, {jobs} jobs: index backfill {:.0} ms; memory in use grew {:.1} MiB ({} B an account)",
        ms(backfill),
        held as f64 / (1024.0 * 1024.0),
        held / (nodes + jobs).max(1),
    );

    let mut everything = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        let (j, n, _) = index.read(|s| (s.jobs(), s.nodes(), s.providers()));
        assert_eq!((j.len(), n.len()), (jobs, nodes));
        everything.push(t.elapsed());
    }

    let mut liveness = Liveness::new(now);
    for key in &fleet.busy {
        liveness
            .record(heartbeat(*key, vec![]), now)
            .expect("a heartbeat");
    }
    let daemon = Daemon {
        chain: LiveChain {
            // Nothing in steady state is sent: an endpoint that is not there.
            client: ChainClient::new("http://127.0.0.1:9"),
            scheduler: Keypair::new(),
            index: Some(index),
        },
        config: DaemonConfig {
            rpc_url: "http://127.0.0.1:9".into(),
            fees: None,
            listen: "127.0.0.1:0".parse().unwrap(),
            tick: Duration::from_millis(500),
            detector: Default::default(),
            store: StoreUrl::Dir("/nonexistent".into()),
            sends_in_flight: mcjs_scheduler_daemon::shell::SENDS_IN_FLIGHT,
            index_stream: Default::default(),
            challenge: Default::default(),
        },
        liveness: Arc::new(Mutex::new(liveness)),
        directory: Arc::new(RwLock::new(Directory::from_chain(&[]))),
        metrics: Arc::new(Metrics::new()),
        clock: Arc::new(move || now),
        s3: None,
        duties: Default::default(),
        store_sight: Default::default(),
        leading: Default::default(),
        challenged: Default::default(),
        openings: Default::default(),
        standbys: Default::default(),
    };
    let deployment = ix::Deployment {
        usdc_mint: Pubkey::new_unique(),
        treasury: Pubkey::new_unique(),
    };
    let mut memory = Memory::default();
    let t = Instant::now();
    let first = daemon
        .round(&deployment, &mut memory)
        .await
        .expect("a round");
    let first_ms = ms(t.elapsed());
    assert!(
        first.done.is_empty() && first.refused.is_empty(),
        "a steady fleet asks for nothing: {first:?}"
    );
    let mut rounds = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        let report = daemon
            .round(&deployment, &mut memory)
            .await
            .expect("a round");
        rounds.push(t.elapsed());
        assert!(report.done.is_empty() && report.refused.is_empty());
    }
    // Where a round's time goes: its read of the index, and the decision.
    let index = daemon.chain.index.as_ref().expect("an index");
    let (mut reads, mut decisions) = (Vec::new(), Vec::new());
    for _ in 0..20 {
        let t = Instant::now();
        let (jobs, nodes) = index.read(|s| (s.unsettled_jobs(), s.nodes()));
        reads.push(t.elapsed());
        let liveness = daemon.liveness.lock().unwrap();
        let t = Instant::now();
        let decision = mcjs_scheduler_daemon::reconcile(
            &mcjs_scheduler_daemon::core::Observation {
                now_ms: now,
                jobs: &jobs,
                nodes: &nodes,
                liveness: &liveness,
                understaked: &Default::default(),
                outages: &[],
                require_proven_hardware: false,
                standby_wanted: &Default::default(),
                standbys: &Default::default(),
            },
            &Default::default(),
        );
        decisions.push(t.elapsed());
        assert!(decision.actions.is_empty());
    }
    println!(
        "memory: every job, node and provider cloned and sorted (a round's read before its working set) median {:.1} ms of 20",
        ms(median(everything))
    );
    println!(
        "memory: of a round, the working set and nodes read from the index median {:.1} ms, the decision (failure detection and placement, `reconcile`) median {:.1} ms",
        ms(median(reads)),
        ms(median(decisions))
    );
    println!(
        "memory: a scheduler round (Daemon::round over the index; {} running, {} waiting, {} finished) first {first_ms:.1} ms, then median {:.1} ms of 20",
        fleet.busy.len(),
        jobs / 100,
        jobs - fleet.busy.len() - jobs / 100,
        ms(median(rounds))
    );
}

/// The fleet's accounts as the local chain holds them (its own Config
/// stays).
fn preload(fleet: &Fleet) -> Vec<(Pubkey, mcjs_localnet::Account)> {
    fleet
        .accounts
        .iter()
        .map(|(key, data)| (*key, program_account(data.clone())))
        .collect()
}

/// Part 2: scans of the program against the index's backfill, over RPC.
/// surfpool 1.6.1 keeps one list of accounts per owner and copies it on
/// every insert, so it holds about 11,000 program accounts in reasonable
/// time, not 110,000.
async fn scans_against_backfill(nodes: usize, jobs: usize) {
    let fleet = fleet(nodes, jobs, now_ms() / 1_000);
    let started = Instant::now();
    let (localnet, _dir) = start_chain(preload(&fleet)).await;
    let client = localnet.client();
    println!(
        "chain: {nodes} nodes and {jobs} jobs, started in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let mut scans = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        let (j, n) = (
            client.jobs(JobFilter::All).await.unwrap(),
            client.nodes().await.unwrap(),
        );
        assert_eq!((j.len(), n.len()), (jobs, nodes));
        scans.push(t.elapsed());
    }
    let bytes: usize = fleet.accounts.iter().map(|(_, d)| d.len()).sum();
    println!(
        "chain: a scan of jobs and nodes (each round before the index) {:.1} MB of account data, {:.1} MB as base64; median {:.0} ms of 3",
        bytes as f64 / 1e6,
        bytes as f64 * 4.0 / 3.0 / 1e6,
        ms(median(scans))
    );
    let before = in_use();
    let t = Instant::now();
    let index = ProgramIndex::follow(client.clone());
    while !index.is_live() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let backfill = t.elapsed();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let held = in_use().saturating_sub(before);
    let mut reads = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        let (j, n) = index.read(|s| (s.jobs(), s.nodes()));
        assert_eq!((j.len(), n.len()), (jobs, nodes));
        reads.push(t.elapsed());
    }
    println!(
        "chain: index backfill over RPC {:.0} ms; memory in use grew {:.1} MiB; a read of every job and node from it median {:.1} ms of 20",
        ms(backfill),
        held as f64 / (1024.0 * 1024.0),
        ms(median(reads)),
    );
}

/// Part 3: the scheduler daemon's RPC traffic over a chain with `nodes`
/// idle nodes and `finished` finished jobs: what its start costs (its node
/// directory and the index's backfill), then calls and bytes per minute
/// over `window`, the index's five-minute re-backfill amortised apart.
async fn scheduler_traffic(nodes: usize, finished: usize, window: Duration) {
    let now = now_ms() / 1_000;
    let fleet = fleet(nodes, finished, now);
    // Every job finished and every node idle: nothing to place or detect.
    let accounts: Vec<(Pubkey, mcjs_localnet::Account)> = preload(&Fleet {
        accounts: fleet
            .accounts
            .into_iter()
            .map(|(k, d)| {
                if let Ok(mut job) = mcjs_client::decode::job(&d) {
                    job.state = JobState::Completed { at: now - 100 };
                    job.finished_at = Some(now - 100);
                    (job.node, job.provider) = (None, None);
                    return (k, data(&job));
                }
                if let Ok(mut n) = mcjs_client::decode::node(&d) {
                    n.status = mcjs::state::NodeStatus::Available;
                    n.current_job = None;
                    return (k, data(&n));
                }
                (k, d)
            })
            .collect(),
        config: fleet.config,
        busy: vec![],
    });
    let jobs_held = accounts
        .iter()
        .filter(|(_, a)| mcjs_client::decode::job(&a.data).is_ok())
        .count();
    let (localnet, dir) = start_chain(accounts).await;
    let info = localnet.info().clone();
    // The daemon finds its websocket at the endpoint's port + 1: a link
    // there to the chain's, counting its bytes.
    let (endpoint, link) = endpoint_to(&info, EndpointProfile::METERED).await;
    let config = DaemonConfig {
        rpc_url: endpoint.url(),
        fees: None,
        listen: format!("127.0.0.1:{}", free_port_pair()).parse().unwrap(),
        tick: Duration::from_millis(500),
        detector: Default::default(),
        store: StoreUrl::Dir(dir.path().join("store")),
        sends_in_flight: mcjs_scheduler_daemon::shell::SENDS_IN_FLIGHT,
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
    let index = daemon.chain.index.clone().expect("an index");
    let cancel = CancellationToken::new();
    let run = tokio::spawn(daemon.run(cancel.clone()));
    while !index.is_live() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let calls_at =
        |e: &Endpoint| -> HashMap<String, u64> { e.calls_by_method().into_iter().collect() };
    let (start_calls, start_bytes, start_ws) =
        (calls_at(&endpoint), endpoint.bytes(), link.bytes());
    tokio::time::sleep(window).await;
    let (end_calls, end_bytes, end_ws) = (calls_at(&endpoint), endpoint.bytes(), link.bytes());
    cancel.cancel();
    let _ = run.await;
    let per_min = 60.0 / window.as_secs_f64();
    let mut methods: Vec<(String, u64)> = end_calls
        .iter()
        .map(|(m, n)| (m.clone(), n - start_calls.get(m).copied().unwrap_or(0)))
        .filter(|(_, n)| *n > 0)
        .collect();
    methods.sort();
    let calls: u64 = methods.iter().map(|(_, n)| n).sum();
    let start_http = start_bytes.0 + start_bytes.1;
    let http = (end_bytes.0 + end_bytes.1) - start_http;
    let ws_bytes = end_ws - start_ws;
    let by_method = methods
        .iter()
        .map(|(m, n)| format!("{m} {n}"))
        .collect::<Vec<_>>()
        .join(", ");
    let start_by_method = start_calls
        .iter()
        .map(|(m, n)| format!("{m} {n}"))
        .collect::<Vec<_>>()
        .join(", ");
    println!(
        "scheduler over a chain of {nodes} idle nodes and {jobs_held} finished jobs: start {start_http} HTTP bytes ({start_by_method}); then over {} s: {:.1} calls a minute ({by_method}), {:.0} HTTP bytes a minute, {:.0} websocket bytes a minute; with the 5-minute re-backfill amortised: about {:.0} HTTP bytes a minute",
        window.as_secs(),
        calls as f64 * per_min,
        http as f64 * per_min,
        ws_bytes as f64 * per_min,
        http as f64 * per_min + start_http as f64 / 5.0,
    );
    drop(localnet);
}

/// Accounts served from memory as a node would: every account of a kind
/// at slot 1, and a stream that tells a new slot every second and nothing
/// else.
struct InMemory(Arc<Vec<(Pubkey, Vec<u8>)>>);

impl IndexSource for InMemory {
    async fn subscribe(
        &self,
    ) -> Result<futures_util::stream::BoxStream<'static, Event>, mcjs_client::ChainError> {
        Ok(Box::pin(futures_util::stream::unfold(
            1u64,
            |slot| async move {
                tokio::time::sleep(Duration::from_secs(1)).await;
                Some((Event::Slot(slot), slot + 1))
            },
        )))
    }

    async fn backfill(
        &self,
        kind: AccountKind,
    ) -> Result<(u64, Vec<(Pubkey, Vec<u8>)>), mcjs_client::ChainError> {
        let discriminator = mcjs_client::decode::discriminator_of(kind);
        Ok((
            1,
            self.0
                .iter()
                .filter(|(_, data)| data.starts_with(discriminator))
                .cloned()
                .collect(),
        ))
    }
}
