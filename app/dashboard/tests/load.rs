//! How long the job page takes for a long job: 1,000 checkpoints, each
//! attested in its own transaction as agents do. Slow to set up (a minute
//! or more), so run on demand:
//! `cargo test -p mcjs-dashboard --test load -- --ignored --nocapture`.

mod common;

use std::time::{Duration, Instant};

use common::Story;
use mcjs::instructions::SubmitJobArgs;
use mcjs::state::{JobRequirements, JobTerms};
use mcjs_client::{Signer, ix, pda};
use mcjs_localnet::USDC;

const CHECKPOINTS: u64 = 1_000;

#[tokio::test(flavor = "multi_thread")]
#[ignore = "sends 1,000 transactions; run on demand"]
async fn a_job_with_a_thousand_checkpoints_loads_and_verifies() {
    let story = Story::build().await;
    let client = &story.client;
    let info = story.localnet.info().clone();
    let mint = info.usdc_mint();
    let deployment = client.deployment().await.unwrap();
    let user_token = ix::usdc_account(&story.user.pubkey(), &mint);
    let owner_token = ix::usdc_account(&story.provider_owner.pubkey(), &mint);
    let job = pda::job(&story.user.pubkey(), 9);
    let node = story.nodes[1];
    let operator = &story.operators[1];
    client
        .send(
            &[ix::submit_job(
                &story.user.pubkey(),
                &user_token,
                &mint,
                SubmitJobArgs {
                    job_id: 9,
                    spec_hash: [9; 32],
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
                },
            )],
            &[&story.user],
        )
        .await
        .unwrap();
    client
        .send(
            &[ix::assign_job(
                &story.scheduler.pubkey(),
                &job,
                &node,
                &story.provider,
                None,
            )],
            &[&story.scheduler],
        )
        .await
        .unwrap();
    let generation = client.job(&job).await.unwrap().unwrap().generation;
    client
        .send(
            &[ix::start_job(
                &operator.pubkey(),
                &job,
                &node,
                &story.provider,
                generation,
            )],
            &[&story.provider_owner, operator],
        )
        .await
        .unwrap();
    let started = Instant::now();
    for step in 1..=CHECKPOINTS {
        let mut hash = [0u8; 32];
        hash[..8].copy_from_slice(&step.to_le_bytes());
        client
            .send(
                &[ix::JobAccounts {
                    job,
                    node,
                    provider: story.provider,
                    payout: owner_token,
                    refund: job,
                    generation,
                    segment: None,
                    deployment,
                }
                .attest(&operator.pubkey(), true, 1, step, hash)],
                &[&story.provider_owner, operator],
            )
            .await
            .unwrap();
    }
    eprintln!(
        "{CHECKPOINTS} attestations sent in {:.1?}",
        started.elapsed()
    );

    let http = reqwest::Client::new();
    let url = story.url(&format!("/job/{job}"));
    let mut times = Vec::new();
    for _ in 0..3 {
        let started = Instant::now();
        let page = http.get(&url).send().await.unwrap();
        assert!(page.status().is_success());
        let body = page.text().await.unwrap();
        times.push(started.elapsed());
        assert!(body.contains(r#"id="audit-badge">verified<"#));
        assert_eq!(
            body.matches("<tr class=\"verified\"").count(),
            CHECKPOINTS as usize
        );
    }
    let best = times.iter().min().copied().unwrap_or(Duration::ZERO);
    eprintln!("job page with {CHECKPOINTS} checkpoints: {times:.2?} (best {best:.2?})");
    story.localnet.stop();
}
