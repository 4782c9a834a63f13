//! How long `job submit` takes to be confirmed on the local chain.
//!
//! For each slot time, starts a local chain and measures, over N jobs:
//! * `client`: `ChainClient::send` of one `submit_job` transaction, from
//!   signing to the commitment (processed, confirmed);
//! * `cli`: the whole `mcjs job submit` command as a person runs it
//!   (process start, spec validation, reads, send, confirmation), when
//!   `--mcjs PATH` names the built binary.
//!
//! cargo run -p mcjs-localnet --example submit_latency -- [--runs N] [--mcjs PATH] [--slots 400,20]

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use mcjs::instructions::SubmitJobArgs;
use mcjs::state::{JobRequirements, JobTerms};
use mcjs_client::{ChainClient, Signer, ix};
use mcjs_localnet::{Localnet, LocalnetConfig, USDC, free_port_pair, read_keypair};
use solana_commitment_config::CommitmentLevel;

fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}

fn args(job_id: u64) -> SubmitJobArgs {
    SubmitJobArgs {
        job_id,
        spec_hash: [7; 32],
        requirements: JobRequirements {
            gpu_count: 1,
            min_vram_mib: 0,
            min_compute_capability: 0,
            gpu_models: vec![],
            min_checkpoint_write_mibps: 0,
            attested: false,
        },
        terms: JobTerms {
            checkpoint_interval_secs: 600,
            max_duration_secs: 3_600,
            deadline: None,
            max_price_per_gpu_hour: USDC,
            restart_budget: 1,
        },
        bond: USDC,
        verification_ppm: 0,
    }
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let mut runs = 15usize;
    let mut mcjs: Option<PathBuf> = None;
    let mut slots = vec![400u64, 20];
    let mut argv = std::env::args().skip(1);
    while let Some(a) = argv.next() {
        match a.as_str() {
            "--runs" => runs = argv.next().unwrap().parse().unwrap(),
            "--mcjs" => mcjs = Some(argv.next().unwrap().into()),
            "--slots" => {
                slots = argv
                    .next()
                    .unwrap()
                    .split(',')
                    .map(|s| s.parse().unwrap())
                    .collect()
            }
            other => panic!("unknown argument {other}"),
        }
    }
    let spec =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/specs/training-a100.json");

    for slot_time_ms in slots {
        let dir = tempfile::tempdir().unwrap();
        let started = Instant::now();
        let localnet = Localnet::start(LocalnetConfig {
            rpc_port: free_port_pair(),
            dir: dir.path().to_path_buf(),
            slot_time_ms,
            ..LocalnetConfig::default()
        })
        .await
        .unwrap();
        let startup = started.elapsed();
        let user = read_keypair(&localnet.info().wallets.user).unwrap();
        let mint = localnet.info().usdc_mint();
        let token = ix::usdc_account(&user.pubkey(), &mint);
        let mut job_id = 1_000u64;
        for level in [CommitmentLevel::Processed, CommitmentLevel::Confirmed] {
            let client: ChainClient = localnet.client().with_commitment(level);
            let mut times = Vec::new();
            for _ in 0..runs {
                job_id += 1;
                let ixs = [ix::submit_job(&user.pubkey(), &token, &mint, args(job_id))];
                let t = Instant::now();
                client.send(&ixs, &[&user]).await.unwrap();
                times.push(t.elapsed());
            }
            println!(
                "slot {slot_time_ms:>3} ms  client send+confirm ({level:?}): median {:>4} ms  min {:>4} ms  max {:>4} ms  (n={runs})",
                median(times.clone()).as_millis(),
                times.iter().min().unwrap().as_millis(),
                times.iter().max().unwrap().as_millis(),
            );
        }
        if let Some(bin) = &mcjs {
            let mut times = Vec::new();
            for _ in 0..runs {
                job_id += 1;
                let t = Instant::now();
                let out = Command::new(bin)
                    .args(["-u", localnet.rpc_url(), "-k"])
                    .arg(&localnet.info().wallets.user)
                    .args(["job", "submit", "--chain-only"])
                    .arg(&spec)
                    .args(["--bond", "10", "--job-id", &job_id.to_string()])
                    .output()
                    .unwrap();
                times.push(t.elapsed());
                assert!(
                    out.status.success(),
                    "{}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            println!(
                "slot {slot_time_ms:>3} ms  mcjs job submit (whole command, confirmed): median {:>4} ms  min {:>4} ms  max {:>4} ms  (n={runs})",
                median(times.clone()).as_millis(),
                times.iter().min().unwrap().as_millis(),
                times.iter().max().unwrap().as_millis(),
            );
        }
        println!(
            "slot {slot_time_ms:>3} ms  localnet start + initialise: {} ms",
            startup.as_millis()
        );
        localnet.stop();
    }
}
