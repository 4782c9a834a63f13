//! The program index at fleet scale, on the local chain: fills it with
//! `MCJS_BENCH_NODES` nodes (default 10,000) and `MCJS_BENCH_JOBS` jobs
//! (default 100,000; nine in ten of them finished) through
//! `surfnet_setAccount`, then measures what a scheduler pays to read them:
//! a scan of the program (what every round did before the index), the
//! index's backfill, the memory it holds, and the round's snapshot read
//! from memory.
//!
//!   cargo bench -p mcjs-localnet --bench index_scale
//!
//! The accounts are copies of one node and one job created by ordinary
//! transactions, at fresh addresses, so every one decodes as the program
//! wrote it.

use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use mcjs::instructions::{RegisterNodeArgs, SubmitJobArgs};
use mcjs::state::{HardwareProfile, Job, JobRequirements, JobTerms};
use mcjs_client::rpc::ProgramIndex;
use mcjs_client::{JobFilter, Keypair, PROGRAM_ID, Pubkey, Signer, ix, pda};
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

    // Copies at fresh addresses; nine jobs in ten finished (Completed has
    // Pending's layout: the tag, then a timestamp).
    let started = Instant::now();
    let finished = {
        let mut data = job_account.data.clone();
        data[Job::STATE_OFFSET] = 5;
        data
    };
    let writes = (0..nodes)
        .map(|_| (node_account.lamports, node_account.data.clone()))
        .chain((0..jobs).map(|i| {
            let data = if i % 10 == 0 {
                job_account.data.clone()
            } else {
                finished.clone()
            };
            (job_account.lamports, data)
        }));
    let set = futures_util::stream::iter(writes)
        .map(|(lamports, data)| {
            let client = client.clone();
            async move {
                client
                    .surfnet_set_account(&Pubkey::new_unique(), lamports, &PROGRAM_ID, &data)
                    .await
                    .unwrap()
            }
        })
        .buffer_unordered(32)
        .count()
        .await;
    println!(
        "created {set} accounts ({nodes} nodes, {jobs} jobs) in {:.1} s",
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
        assert_eq!((j.len(), n.len()), (jobs + 1, nodes + 1));
        scans.push(t.elapsed());
    }
    let account_bytes = (nodes + 1) * node_account.data.len() + (jobs + 1) * job_account.data.len();

    let before = in_use();
    let t = Instant::now();
    let index = ProgramIndex::follow(client.clone());
    while !index.is_live() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let backfill = t.elapsed();
    // Let the chain's answers be dropped before counting.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let held = in_use().saturating_sub(before);
    assert_eq!(index.read(|s| s.jobs().len()), jobs + 1);

    let mut reads = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        let (j, n, p) = index.read(|s| (s.jobs(), s.nodes(), s.providers()));
        assert_eq!((j.len(), n.len(), p.len()), (jobs + 1, nodes + 1, 1));
        reads.push(t.elapsed());
    }
    println!(
        "account data: {:.1} MB ({} B a job, {} B a node); base64 on the wire about {:.1} MB a scan",
        account_bytes as f64 / 1e6,
        job_account.data.len(),
        node_account.data.len(),
        account_bytes as f64 * 4.0 / 3.0 / 1e6
    );
    println!(
        "scan of jobs and nodes (a round before the index): median {:.0} ms of 3",
        median(scans).as_secs_f64() * 1e3
    );
    println!(
        "index backfill (subscribe, six scans, decode): {:.0} ms; memory in use grew {:.1} MiB ({} B an account)",
        backfill.as_secs_f64() * 1e3,
        held as f64 / (1024.0 * 1024.0),
        held / (nodes + jobs + 2)
    );
    println!(
        "a round's snapshot from the index (jobs, nodes, providers cloned and sorted): median {:.1} ms of 20",
        median(reads).as_secs_f64() * 1e3
    );
}
