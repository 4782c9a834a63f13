//! The demo's story on a real local chain, through real transactions, and
//! the real dashboard serving it on a loopback port.
//!
//! One provider with two nodes; job 1 runs on node 0, checkpoints, loses its
//! node (the scheduler reports it: a slash into the insurance pool), recovers
//! on node 1 from its checkpoint and completes; job 2 fails fatally; job 3 is
//! cancelled while pending.

#![allow(dead_code)]

use mcjs::instructions::{RegisterNodeArgs, SubmitJobArgs};
use mcjs::state::{FailureCause, HardwareProfile, JobRequirements, JobTerms};
use mcjs_client::{ChainClient, Keypair, Pubkey, Signer, ix, pda};
use mcjs_localnet::{Localnet, LocalnetConfig, USDC, free_port_pair, read_keypair};

pub struct Story {
    pub localnet: Localnet,
    pub client: ChainClient,
    /// `http://127.0.0.1:PORT` of the dashboard.
    pub base: String,
    pub user: Keypair,
    pub scheduler: Keypair,
    pub provider_owner: Keypair,
    pub provider: Pubkey,
    pub nodes: [Pubkey; 2],
    pub operators: [Keypair; 2],
    pub recovered: Pubkey,
    pub failed: Pubkey,
    pub cancelled: Pubkey,
    pub output_hash: [u8; 32],
    _dir: tempfile::TempDir,
    _stop: tokio::sync::oneshot::Sender<()>,
}

fn hardware() -> HardwareProfile {
    HardwareProfile {
        gpu_model: "rtx-6000".into(),
        gpu_count: 2,
        vram_per_gpu_mib: 24_576,
        compute_capability: 75,
        cpu_cores: 16,
        ram_mib: 65_536,
        disk_gib: 1_000,
        checkpoint_write_mibps: 800,
    }
}

fn job(job_id: u64, restart_budget: u8) -> SubmitJobArgs {
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
            restart_budget,
        },
        bond: 10 * USDC,
        verification_ppm: 0,
    }
}

async fn send(client: &ChainClient, ixs: Vec<mcjs_client::Instruction>, signers: &[&Keypair]) {
    client.send(&ixs, signers).await.unwrap();
}

/// Moves the chain's clock `secs` forward and waits until the chain reads it.
async fn advance(client: &ChainClient, secs: i64) {
    let now = client.chain_time().await.unwrap();
    client
        .surfnet_time_travel_to(((now + secs) * 1_000) as u64)
        .await
        .unwrap();
    for _ in 0..200 {
        if client.chain_time().await.unwrap() >= now + secs {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("the chain's clock did not move");
}

impl Story {
    pub async fn build() -> Story {
        let dir = tempfile::tempdir().unwrap();
        let localnet = Localnet::start(LocalnetConfig {
            rpc_port: free_port_pair(),
            dir: dir.path().to_path_buf(),
            slot_time_ms: 20,
            ..LocalnetConfig::default()
        })
        .await
        .expect("the local chain starts");
        let info = localnet.info().clone();
        let client = localnet.client();
        let mint = info.usdc_mint();
        let deployment = client.deployment().await.unwrap();
        let user = read_keypair(&info.wallets.user).unwrap();
        let scheduler = read_keypair(&info.wallets.scheduler).unwrap();
        let owner = read_keypair(&info.wallets.providers[0]).unwrap();
        let owner_token = ix::usdc_account(&owner.pubkey(), &mint);
        let user_token = ix::usdc_account(&user.pubkey(), &mint);
        let operators = [Keypair::new(), Keypair::new()];
        let provider = pda::provider(&owner.pubkey());
        let nodes = [pda::node(&provider, 0), pda::node(&provider, 1)];

        let mut ixs = vec![ix::register_provider(
            &owner.pubkey(),
            &owner_token,
            &owner_token,
            &mint,
            200 * USDC,
        )];
        for (index, operator) in operators.iter().enumerate() {
            ixs.push(ix::register_node(
                &owner.pubkey(),
                RegisterNodeArgs {
                    index: index as u32,
                    operator: operator.pubkey(),
                    hardware: hardware(),
                    readiness: 80,
                    price_per_gpu_hour: USDC,
                },
            ));
        }
        client.send(&ixs, &[&owner]).await.unwrap();

        let [recovered, failed, cancelled] = [1, 2, 3].map(|id| pda::job(&user.pubkey(), id));
        // Job 2 has no restart to spare: one node calling it fatal ends it.
        for (id, budget) in [(1, 1), (2, 0), (3, 1)] {
            client
                .send(
                    &[ix::submit_job(
                        &user.pubkey(),
                        &user_token,
                        &mint,
                        job(id, budget),
                    )],
                    &[&user],
                )
                .await
                .unwrap();
        }

        let attest = |job: Pubkey, node: usize, generation: u32, step: u64| {
            ix::JobAccounts {
                job,
                node: nodes[node],
                provider,
                payout: owner_token,
                refund: job,
                generation,
                segment: None,
                deployment,
            }
            .attest(&operators[node].pubkey(), true, 1, step, [step as u8; 32])
        };

        // Job 1 on node 0: started, one checkpoint, then the node is lost.
        send(
            &client,
            vec![ix::assign_job(
                &scheduler.pubkey(),
                &recovered,
                &nodes[0],
                &provider,
                None,
            )],
            &[&scheduler],
        )
        .await;
        send(
            &client,
            vec![ix::start_job(
                &operators[0].pubkey(),
                &recovered,
                &nodes[0],
                &provider,
                1,
            )],
            &[&owner, &operators[0]],
        )
        .await;
        advance(&client, 300).await;
        send(
            &client,
            vec![attest(recovered, 0, 1, 10)],
            &[&owner, &operators[0]],
        )
        .await;
        send(
            &client,
            vec![
                ix::JobAccounts {
                    job: recovered,
                    node: nodes[0],
                    provider,
                    payout: owner_token,
                    refund: user_token,
                    generation: 1,
                    segment: None,
                    deployment,
                }
                .report_failure(&scheduler.pubkey(), FailureCause::NodeLost),
            ],
            &[&scheduler],
        )
        .await;
        // ... recovers on node 1 from that checkpoint, checkpoints twice, completes.
        send(
            &client,
            vec![ix::assign_job(
                &scheduler.pubkey(),
                &recovered,
                &nodes[1],
                &provider,
                None,
            )],
            &[&scheduler],
        )
        .await;
        // Every assignment and every removal moves the generation on.
        let generation = client.job(&recovered).await.unwrap().unwrap().generation;
        send(
            &client,
            vec![ix::start_job(
                &operators[1].pubkey(),
                &recovered,
                &nodes[1],
                &provider,
                generation,
            )],
            &[&owner, &operators[1]],
        )
        .await;
        advance(&client, 300).await;
        send(
            &client,
            vec![attest(recovered, 1, generation, 20)],
            &[&owner, &operators[1]],
        )
        .await;
        advance(&client, 300).await;
        send(
            &client,
            vec![attest(recovered, 1, generation, 30)],
            &[&owner, &operators[1]],
        )
        .await;
        let output_hash = [0xab; 32];
        send(
            &client,
            vec![
                ix::JobAccounts {
                    job: recovered,
                    node: nodes[1],
                    provider,
                    payout: owner_token,
                    refund: user_token,
                    generation,
                    segment: None,
                    deployment,
                }
                .complete(&operators[1].pubkey(), output_hash),
            ],
            &[&owner, &operators[1]],
        )
        .await;

        // Job 2 on node 1 fails fatally (the job's own fault: no slash).
        send(
            &client,
            vec![ix::assign_job(
                &scheduler.pubkey(),
                &failed,
                &nodes[1],
                &provider,
                None,
            )],
            &[&scheduler],
        )
        .await;
        send(
            &client,
            vec![ix::start_job(
                &operators[1].pubkey(),
                &failed,
                &nodes[1],
                &provider,
                1,
            )],
            &[&owner, &operators[1]],
        )
        .await;
        send(
            &client,
            vec![
                ix::JobAccounts {
                    job: failed,
                    node: nodes[1],
                    provider,
                    payout: owner_token,
                    refund: user_token,
                    generation: 1,
                    segment: None,
                    deployment,
                }
                .report_failure(&scheduler.pubkey(), FailureCause::JobFatal),
            ],
            &[&scheduler],
        )
        .await;

        // Job 3 is cancelled while pending.
        send(
            &client,
            vec![ix::cancel_job(
                &user.pubkey(),
                &cancelled,
                &user_token,
                &mint,
            )],
            &[&user],
        )
        .await;

        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(mcjs_dashboard::serve(listener, client.clone(), async {
            let _ = stopped.await;
        }));

        Story {
            localnet,
            client,
            base,
            user,
            scheduler,
            provider_owner: owner,
            provider,
            nodes,
            operators,
            recovered,
            failed,
            cancelled,
            output_hash,
            _dir: dir,
            _stop: stop,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }
}
