//! The program index at fleet scale. On the local chain, preloaded
//! (`LocalnetConfig::preload`) with `MCJS_BENCH_CHAIN_NODES` nodes (default
//! 1,000) and `MCJS_BENCH_CHAIN_JOBS` jobs (default 10,000; nine in ten
//! finished): a scan of the program (what every round did before the
//! index) against the index's backfill over RPC. From memory, with
//! `MCJS_BENCH_NODES` (10,000) and `MCJS_BENCH_JOBS` (100,000): the
//! index's own backfill, its memory, and a round's snapshot read from it;
//! the local chain cannot hold that many (see `main`).
//!
//!   cargo bench -p mcjs-localnet --bench index_scale
//!
//! The accounts are copies of one node and one job created by ordinary
//! transactions on a first chain, at fresh addresses, so every one decodes
//! as the program wrote it.

use std::time::{Duration, Instant};

use mcjs::instructions::{RegisterNodeArgs, SubmitJobArgs};
use mcjs::state::{HardwareProfile, Job, JobRequirements, JobTerms};
use mcjs_client::decode::AccountKind;
use mcjs_client::rpc::{Event, IndexSource, ProgramIndex};
use mcjs_client::{JobFilter, Keypair, Pubkey, Signer, ix, pda};
use mcjs_localnet::{Localnet, LocalnetConfig, USDC, free_port_pair, read_keypair};

fn count(var: &str, default: usize) -> usize {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The system allocator, counting the bytes in use: what the index holds
/// is what is in use once it is live less what was before (the local chain
/// runs in this process too, so its own growth counts; it is small next to
/// the index, since the accounts were already there).
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
    let dir = tempfile::tempdir().unwrap();
    let localnet = Localnet::start(LocalnetConfig {
        rpc_port: free_port_pair(),
        dir: dir.path().to_path_buf(),
        slot_time_ms: 400,
        ..LocalnetConfig::default()
    })
    .await
    .expect("the local chain starts");
    let info = localnet.info().clone();
    let client = localnet.client();
    let mint = info.usdc_mint();
    let user = read_keypair(&info.wallets.user).unwrap();
    let provider = read_keypair(&info.wallets.providers[0]).unwrap();
    let provider_token = ix::usdc_account(&provider.pubkey(), &mint);
    let user_token = ix::usdc_account(&user.pubkey(), &mint);

    // One node and one job made by the program, to copy.
    client
        .send(
            &[
                ix::register_provider(
                    &provider.pubkey(),
                    &provider_token,
                    &provider_token,
                    &mint,
                    200 * USDC,
                ),
                ix::register_node(
                    &provider.pubkey(),
                    RegisterNodeArgs {
                        index: 0,
                        operator: Keypair::new().pubkey(),
                        hardware: HardwareProfile {
                            gpu_model: "a100-sxm4-80gb".into(),
                            gpu_count: 4,
                            vram_per_gpu_mib: 81_920,
                            compute_capability: 80,
                            cpu_cores: 64,
                            ram_mib: 524_288,
                            disk_gib: 2_000,
                            checkpoint_write_mibps: 800,
                        },
                        readiness: 80,
                        price_per_gpu_hour: USDC,
                    },
                ),
            ],
            &[&provider],
        )
        .await
        .unwrap();
    client
        .send(
            &[ix::submit_job(
                &user.pubkey(),
                &user_token,
                &mint,
                SubmitJobArgs {
                    job_id: 1,
                    spec_hash: [7; 32],
                    requirements: JobRequirements {
                        gpu_count: 1,
                        min_vram_mib: 16_000,
                        min_compute_capability: 70,
                        gpu_models: vec![],
                        min_checkpoint_write_mibps: 100,
                    },
                    terms: JobTerms {
                        checkpoint_interval_secs: 900,
                        max_duration_secs: 86_400,
                        deadline: None,
                        max_price_per_gpu_hour: 2 * USDC,
                        restart_budget: 1,
                    },
                    bond: 10 * USDC,
                    verification_ppm: 0,
                },
            )],
            &[&user],
        )
        .await
        .unwrap();
    let node_key = pda::node(&pda::provider(&provider.pubkey()), 0);
    let job_key = pda::job(&user.pubkey(), 1);
    let node_account = client.rpc().get_account(&node_key).await.unwrap();
    let job_account = client.rpc().get_account(&job_key).await.unwrap();

    drop(localnet);
    println!(
        "a job is {} B, a node {} B",
        job_account.data.len(),
        node_account.data.len()
    );

    // Over the chain, at the size surfpool holds: scans against the index.
    let preload = fleet(chain_nodes, chain_jobs, &node_account, &job_account);
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let localnet = Localnet::start(LocalnetConfig {
        rpc_port: free_port_pair(),
        dir: dir.path().to_path_buf(),
        slot_time_ms: 400,
        preload,
        ..LocalnetConfig::default()
    })
    .await
    .expect("the local chain starts with the fleet");
    let client = localnet.client();
    println!(
        "chain: {chain_nodes} nodes and {chain_jobs} jobs, started in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    // What every scheduler round cost before the index: scans of the jobs
    // and the nodes.
    let mut scans = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        let (j, n) = (
            client.jobs(JobFilter::All).await.unwrap(),
            client.nodes().await.unwrap(),
        );
        assert_eq!((j.len(), n.len()), (chain_jobs, chain_nodes));
        scans.push(t.elapsed());
    }
    let bytes = chain_nodes * node_account.data.len() + chain_jobs * job_account.data.len();
    println!(
        "chain: a scan of jobs and nodes (each round before the index) {:.1} MB of account data, {:.1} MB as base64; median {:.0} ms of 3",
        bytes as f64 / 1e6,
        bytes as f64 * 4.0 / 3.0 / 1e6,
        median(scans).as_secs_f64() * 1e3
    );
    let follow = || ProgramIndex::follow(client.clone());
    measure("chain", follow, chain_nodes, chain_jobs).await;
    drop(localnet);

    // The index's own costs at fleet size, from a source in memory:
    // surfpool 1.6.1 keeps one list of accounts per owner and copies it on
    // every insert, so a chain of 110,000 program accounts takes hours to
    // fill.
    let accounts: Vec<(Pubkey, Vec<u8>)> = fleet(nodes, jobs, &node_account, &job_account)
        .into_iter()
        .map(|(k, a)| (k, a.data))
        .collect();
    let source = Fleet(std::sync::Arc::new(accounts));
    measure("memory", || ProgramIndex::follow(source), nodes, jobs).await;
}

/// `nodes` copies of the node and `jobs` of the job at fresh addresses;
/// nine jobs in ten finished (Completed has Pending's layout: the tag,
/// then a timestamp).
fn fleet(
    nodes: usize,
    jobs: usize,
    node: &solana_account::Account,
    job: &solana_account::Account,
) -> Vec<(Pubkey, solana_account::Account)> {
    let finished = {
        let mut account = job.clone();
        account.data[Job::STATE_OFFSET] = 5;
        account
    };
    (0..nodes)
        .map(|_| (Pubkey::new_unique(), node.clone()))
        .chain((0..jobs).map(|i| {
            let account = if i % 10 == 0 {
                job.clone()
            } else {
                finished.clone()
            };
            (Pubkey::new_unique(), account)
        }))
        .collect()
}

/// The index until it is live (its backfill), the memory it then holds,
/// and a round's snapshot read from it.
async fn measure(source: &str, follow: impl FnOnce() -> ProgramIndex, nodes: usize, jobs: usize) {
    let before = in_use();
    let t = Instant::now();
    let index = follow();
    while !index.is_live() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let backfill = t.elapsed();
    // Let the backfill's answers be dropped before counting.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let held = in_use().saturating_sub(before);
    let mut reads = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        let (j, n, _) = index.read(|s| (s.jobs(), s.nodes(), s.providers()));
        assert_eq!((j.len(), n.len()), (jobs, nodes));
        reads.push(t.elapsed());
    }
    println!(
        "{source}: {nodes} nodes, {jobs} jobs: index backfill {:.0} ms; memory in use grew {:.1} MiB ({} B an account); a round's snapshot from it (jobs, nodes, providers cloned and sorted) median {:.1} ms of 20",
        backfill.as_secs_f64() * 1e3,
        held as f64 / (1024.0 * 1024.0),
        held / (nodes + jobs).max(1),
        median(reads).as_secs_f64() * 1e3
    );
}

/// Accounts served from memory as a node would: every account of a kind
/// at slot 1, and a stream that tells a new slot every second and nothing
/// else.
struct Fleet(std::sync::Arc<Vec<(Pubkey, Vec<u8>)>>);

impl IndexSource for Fleet {
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
