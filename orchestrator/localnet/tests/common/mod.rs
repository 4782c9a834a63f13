//! What the local chain's tests share: a job to submit, and waiting on the
//! program index. Each test file uses some of it.
#![allow(dead_code)]

use std::time::Duration;

use mcjs::instructions::SubmitJobArgs;
use mcjs::state::{JobRequirements, JobTerms};
use mcjs_client::rpc::{IndexState, Indexed, ProgramIndex};
use mcjs_localnet::USDC;

/// A job for 1 GPU at 16 GB, 10 USDC of bond, told apart by its id.
pub fn job(job_id: u64) -> SubmitJobArgs {
    SubmitJobArgs {
        job_id,
        spec_hash: [job_id as u8; 32],
        requirements: JobRequirements {
            gpu_count: 1,
            min_vram_mib: 16_000,
            min_compute_capability: 70,
            gpu_models: vec![],
            min_checkpoint_write_mibps: 100,
            attested: false,
        },
        terms: JobTerms {
            checkpoint_interval_secs: 600,
            max_duration_secs: 7_200,
            deadline: None,
            max_price_per_gpu_hour: 2 * USDC,
            restart_budget: 1,
        },
        bond: 10 * USDC,
        verification_ppm: 0,
    }
}

/// Waits (10 s at most) until `index` is live and `holds` says yes.
pub async fn until(index: &ProgramIndex, what: &str, holds: impl Fn(&IndexState) -> bool) {
    until_within(index, what, 10, holds).await
}

/// As [`until`], waiting `secs` at most.
pub async fn until_within(
    index: &ProgramIndex,
    what: &str,
    secs: u64,
    holds: impl Fn(&IndexState) -> bool,
) {
    let deadline = std::time::Instant::now() + Duration::from_secs(secs);
    while index.live(&holds) != Some(true) {
        assert!(
            std::time::Instant::now() < deadline,
            "the index never showed {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub fn state_of(index: &IndexState, key: &mcjs_client::Pubkey) -> Option<u8> {
    match index.get(key) {
        Some(Indexed::Job(job)) => Some(mcjs_client::rpc::state_tag(&job.state)),
        _ => None,
    }
}
