//! The agent against the real local chain (surfpool with the MCJS program)
//! and the real Docker engine, running the reference trainer. The test plays
//! the job owner and the scheduler. Needs a Docker engine; fails without one.

use mcjs_agent::core::Attested;
use mcjs_agent::metrics::AgentMetrics;
use mcjs_agent::register::adopt_node;
use mcjs_agent::rpc::RpcChain;
use mcjs_agent::{Agent, AgentConfig, put_spec};
use mcjs_client::history::McjsEvent;
use mcjs_client::program::instructions::{RegisterNodeArgs, ReportFailureArgs, SubmitJobArgs};
use mcjs_client::program::state::{FailureCause, Job, JobRequirements, JobState, JobTerms};
use mcjs_client::{ChainClient, Keypair, Pubkey, Signer, ix, pda};
use mcjs_localnet::{Localnet, LocalnetConfig, USDC, read_keypair};
use mcjs_protocol::{JobPhase, StopReason};
use mcjs_runtime::checkpoint::{Sha256Digest, hash_checkpoint};
use mcjs_runtime::store::{CheckpointStore, ExpectedCheckpoint};
use mcjs_spec::JobSpec;
use object_store::ObjectStore;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn trainer_image() -> &'static str {
    static IMAGE: OnceLock<String> = OnceLock::new();
    IMAGE.get_or_init(|| {
        let out =
            std::process::Command::new(workspace_root().join("examples/trainer/build-image.sh"))
                .output()
                .expect("run examples/trainer/build-image.sh");
        assert!(
            out.status.success(),
            "building the trainer image failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    })
}

fn free_port_pair() -> u16 {
    loop {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        if port < 65000 && std::net::TcpListener::bind(("127.0.0.1", port + 1)).is_ok() {
            return port;
        }
    }
}

struct World {
    _localnet: Localnet,
    dir: tempfile::TempDir,
    client: ChainClient,
    user: Keypair,
    scheduler: Keypair,
    provider: Keypair,
    store: Arc<dyn ObjectStore>,
    mint: Pubkey,
    treasury: Pubkey,
}

impl World {
    async fn new() -> World {
        let dir = tempfile::tempdir().unwrap();
        let localnet = Localnet::start(LocalnetConfig {
            rpc_port: free_port_pair(),
            dir: dir.path().join("chain"),
            slot_time_ms: 20,
            ..LocalnetConfig::default()
        })
        .await
        .expect("start the local chain");
        let info = localnet.info().clone();
        let client = localnet.client();
        let user = read_keypair(&info.wallets.user).unwrap();
        let scheduler = read_keypair(&info.wallets.scheduler).unwrap();
        let provider = read_keypair(&info.wallets.providers[0]).unwrap();
        let mint: Pubkey = info.usdc_mint.parse().unwrap();
        let treasury: Pubkey = info.treasury.parse().unwrap();
        let token = ix::usdc_account(&provider.pubkey(), &mint);
        client
            .send(
                &[ix::register_provider(
                    &provider.pubkey(),
                    &token,
                    &token,
                    &mint,
                    100 * USDC,
                )],
                &[&provider],
            )
            .await
            .expect("register the provider");
        std::fs::create_dir_all(dir.path().join("store")).unwrap();
        let store: Arc<dyn ObjectStore> = Arc::new(
            object_store::local::LocalFileSystem::new_with_prefix(dir.path().join("store"))
                .unwrap(),
        );
        World {
            _localnet: localnet,
            dir,
            client,
            user,
            scheduler,
            provider,
            store,
            mint,
            treasury,
        }
    }

    fn spec(&self, args: &[&str], data_sha256: Option<&str>) -> JobSpec {
        let data = mcjs_cluster::workload::dataset(256);
        let src = self.dir.path().join("train.csv");
        std::fs::write(&src, &data).unwrap();
        let sha = data_sha256
            .map(str::to_string)
            .unwrap_or_else(|| hex::encode(Sha256::digest(data.as_bytes())));
        let image = trainer_image().strip_prefix("sha256:").unwrap().to_string();
        let mut all_args = vec!["--data", "train.csv", "--batch-size", "32"];
        all_args.extend_from_slice(args);
        let json = serde_json::json!({
            "version": 1,
            "work": {
                "kind": "training",
                "model_id": "mcjs/mlp",
                "image": format!("mcjs-trainer@sha256:{image}"),
                "command": ["/mcjs-trainer", "train"],
                "args": all_args,
                "queue_tolerant": true
            },
            "data": [{
                "name": "train.csv",
                "role": "dataset",
                "uri": url::Url::from_file_path(&src).unwrap().to_string(),
                "sha256": sha
            }],
            "request": {
                "hardware": {"gpu_count": 1, "cpu_cores": 1, "ram": "256MiB", "disk": "1GiB"},
                "duration": {"mode": "until_done", "limit": "1h"},
                "max_price_per_gpu_hour": "2.00"
            },
            "output": {
                "produces": ["model"],
                "destination": "file:///tmp/mcjs-out",
                "required_artifacts": ["model.bin", "metrics.json"]
            },
            "checkpoint": {"interval": "1m", "max_size": "1MiB", "keep": 3, "restart_budget": 3}
        });
        JobSpec::from_value(&json).expect("a valid spec")
    }

    /// Publishes the spec, submits the job with a bond of 1 USDC and assigns it to `node`.
    async fn submit_and_assign(&self, spec: &JobSpec, job_id: u64, node: &Pubkey) -> Pubkey {
        let job = self.submit(spec, job_id).await;
        self.assign(&job, node).await;
        job
    }

    /// Publishes the spec and submits the job with a bond of 1 USDC.
    async fn submit(&self, spec: &JobSpec, job_id: u64) -> Pubkey {
        let hash = put_spec(self.store.as_ref(), spec).await.unwrap();
        let summary = spec.requirement_summary();
        let terms = spec.terms();
        let args = SubmitJobArgs {
            job_id,
            spec_hash: hash,
            requirements: JobRequirements {
                gpu_count: summary.gpu_count,
                min_vram_mib: summary.min_vram_mib,
                min_compute_capability: summary.min_compute_capability,
                gpu_models: summary.gpu_models,
                min_checkpoint_write_mibps: summary.min_checkpoint_write_mibps,
            },
            terms: JobTerms {
                checkpoint_interval_secs: terms.checkpoint_interval_secs,
                max_duration_secs: terms.max_duration_secs,
                deadline: terms.deadline_unix,
                max_price_per_gpu_hour: terms.max_price_per_gpu_hour,
                restart_budget: terms.restart_budget,
            },
            bond: USDC,
        };
        let owner = self.user.pubkey();
        let owner_token = ix::usdc_account(&owner, &self.mint);
        self.client
            .send(
                &[ix::submit_job(&owner, &owner_token, &self.mint, args)],
                &[&self.user],
            )
            .await
            .expect("submit the job");
        pda::job(&owner, job_id)
    }

    async fn assign(&self, job: &Pubkey, node: &Pubkey) {
        let provider = pda::provider(&self.provider.pubkey());
        self.client
            .send(
                &[ix::assign_job(
                    &self.scheduler.pubkey(),
                    job,
                    node,
                    &provider,
                )],
                &[&self.scheduler],
            )
            .await
            .expect("assign the job");
    }

    /// Registers node `index` from the 4×A100 profile and starts its agent.
    async fn agent(
        &self,
        index: u32,
        max_interval: Option<Duration>,
    ) -> (Agent<RpcChain>, CancellationToken, Pubkey) {
        self.agent_of(index, max_interval, None).await
    }

    /// Starts the real scheduler daemon (placement, failure detection,
    /// signed heartbeats) with the deployment's scheduler key; returns its URL.
    async fn scheduler_daemon(&self) -> (String, CancellationToken) {
        use mcjs_scheduler_daemon::shell::{Daemon, DaemonConfig};
        let listen: std::net::SocketAddr =
            format!("127.0.0.1:{}", free_port_pair()).parse().unwrap();
        let config = DaemonConfig {
            rpc_url: self.client.url().to_string(),
            listen,
            tick: Duration::from_millis(300),
            detector: Default::default(),
        };
        let daemon = Daemon::connect(
            config,
            self.scheduler.insecure_clone(),
            mcjs_scheduler_daemon::server::system_clock(),
        )
        .await
        .expect("the scheduler daemon connects");
        let cancel = CancellationToken::new();
        let c = cancel.clone();
        tokio::spawn(async move { daemon.run(c).await.expect("the daemon runs") });
        (format!("http://{listen}"), cancel)
    }

    /// Like [`Self::agent`], heartbeating to `scheduler` when given.
    async fn agent_of(
        &self,
        index: u32,
        max_interval: Option<Duration>,
        scheduler: Option<String>,
    ) -> (Agent<RpcChain>, CancellationToken, Pubkey) {
        let profile: mcjs_hal::NodeProfile = serde_json::from_str(include_str!(
            "../../../app/cli/tests/fixtures/node-a100x4.json"
        ))
        .unwrap();
        // The provider registers the node with its wallet and an operator
        // key; the agent holds only the operator key.
        let operator = Keypair::new();
        let provider_account = pda::provider(&self.provider.pubkey());
        let node = pda::node(&provider_account, index);
        self.client
            .send(
                &[
                    ix::register_node(
                        &self.provider.pubkey(),
                        RegisterNodeArgs {
                            index,
                            operator: operator.pubkey(),
                            hardware: mcjs_agent::register::hardware(&profile),
                            readiness: mcjs_hal::readiness(&profile).score,
                            price_per_gpu_hour: 3 * USDC / 2,
                        },
                    ),
                    ix::fund_operator(&self.provider.pubkey(), &operator.pubkey(), 100_000_000),
                ],
                &[&self.provider],
            )
            .await
            .expect("register the node");
        let chain = RpcChain::new(self.client.clone(), operator);
        adopt_node(&chain, node, &profile)
            .await
            .expect("the agent adopts its node");
        let config = AgentConfig {
            node,
            work_dir: self.dir.path().join(format!("agent-{index}")),
            tick: Duration::from_millis(200),
            max_checkpoint_interval: max_interval,
            hash_threads: 2,
            scheduler,
            agent_url: "http://127.0.0.1:0".into(),
            staging: mcjs_runtime::staging::StagingPolicy {
                data_roots: vec![self.dir.path().to_path_buf()],
                ..Default::default()
            },
        };
        let agent = Agent::new(chain, config, Arc::clone(&self.store), AgentMetrics::new())
            .await
            .expect("start the agent");
        let cancel = CancellationToken::new();
        let (a, c) = (agent.clone(), cancel.clone());
        tokio::spawn(async move { a.run(c).await.expect("the agent runs") });
        let node = agent.node();
        (agent, cancel, node)
    }

    async fn job(&self, key: &Pubkey) -> Job {
        self.client.job(key).await.unwrap().expect("the job exists")
    }

    async fn balance(&self, owner: &Pubkey) -> u64 {
        self.client
            .token_balance(&ix::usdc_account(owner, &self.mint))
            .await
            .unwrap()
    }

    async fn wait_for<T>(
        &self,
        what: &str,
        secs: u64,
        mut check: impl AsyncFnMut() -> Option<T>,
    ) -> T {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            if let Some(v) = check().await {
                return v;
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// Removes every container the agent of `node` left running.
async fn remove_containers(node: &Pubkey) {
    let _ = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "docker rm -f $(docker ps -aq --filter label=mcjs.node={node}) 2>/dev/null"
        ))
        .output();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_job_runs_is_attested_completes_and_pays_the_provider() {
    let w = World::new().await;
    let (agent, cancel, node) = w.agent(0, None).await;
    let spec = w.spec(
        &[
            "--epochs",
            "6",
            "--step-sleep-ms",
            "25",
            "--checkpoint-every-steps",
            "16",
        ],
        None,
    );
    let owner = w.user.pubkey();
    let owner_before = w.balance(&owner).await;
    let provider_before = w.balance(&w.provider.pubkey()).await;
    let treasury_before = w.client.token_balance(&w.treasury).await.unwrap();
    let job = w.submit_and_assign(&spec, 1, &node).await;
    let done = w
        .wait_for("the job to complete", 120, async || {
            let j = w.job(&job).await;
            matches!(j.state, JobState::Completed { .. }).then_some(j)
        })
        .await;
    cancel.cancel();
    // Checkpoints were attested, and the newest attested hash is that of the stored files.
    assert!(
        done.checkpoint_count >= 2,
        "{} attestations",
        done.checkpoint_count
    );
    let last = done.last_checkpoint.expect("a checkpoint was attested");
    let store = CheckpointStore::new(Arc::clone(&w.store), 3);
    let restored = store
        .restore(
            &job.to_string(),
            &[ExpectedCheckpoint {
                step: last.step,
                hash: Sha256Digest(last.hash),
            }],
            &w.dir.path().join("verify"),
        )
        .await
        .expect("the attested checkpoint is in the store and hashes to the attested value");
    assert_eq!(hash_checkpoint(&restored.dir, 1).unwrap().hash.0, last.hash);
    // Every attestation in the job's history names a checkpoint hash the agent stored.
    let history = w.client.job_history(&job).await.unwrap();
    let attested: Vec<Attested> = history
        .iter()
        .filter_map(|e| match &e.event {
            mcjs_client::history::McjsEvent::CheckpointAttested(a) => Some(Attested {
                epoch: a.epoch,
                step: a.step,
                hash: Sha256Digest(a.checkpoint_hash),
                generation: a.generation,
            }),
            _ => None,
        })
        .collect();
    assert_eq!(attested.len() as u32, done.checkpoint_count);
    // The output hash is that of the stored output.
    let output: mcjs_agent::output::StoredOutput = serde_json::from_slice(
        &w.store
            .get(&object_store::path::Path::from(format!(
                "jobs/{job}/output/output.json"
            )))
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(done.output_hash, Some(output.hash.0));
    assert!(output.files.iter().any(|f| f.path == "model.bin"));
    // Money: the provider got what was paid minus the commission, the owner the rest of the bond back.
    let paid = done.paid;
    assert!(paid > 0, "the provider was paid for checkpointed progress");
    let commission = paid * 500 / 10_000;
    assert_eq!(
        w.balance(&w.provider.pubkey()).await - provider_before,
        paid - commission
    );
    assert_eq!(
        w.client.token_balance(&w.treasury).await.unwrap() - treasury_before,
        commission
    );
    assert_eq!(owner_before - w.balance(&owner).await, paid);
    let metrics = agent.metrics().render();
    assert!(
        metrics
            .contains("mcjs_agent_transactions_total{outcome=\"confirmed\",tx=\"complete_job\"} 1"),
        "{metrics}"
    );
    remove_containers(&node).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn data_that_does_not_match_its_hash_is_refused_and_nothing_is_billed() {
    let w = World::new().await;
    let (agent, cancel, node) = w.agent(1, None).await;
    let spec = w.spec(&["--epochs", "1"], Some(&"ab".repeat(32)));
    let job = w.submit_and_assign(&spec, 2, &node).await;
    w.wait_for("the data to be rejected", 60, async || {
        agent
            .reports()
            .iter()
            .any(|r| r.job == job.to_string() && r.phase == JobPhase::DataRejected)
            .then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let j = w.job(&job).await;
    assert!(
        matches!(j.state, JobState::Assigned { .. }),
        "never started: {:?}",
        j.state
    );
    assert_eq!(j.paid, 0);
    assert_eq!(agent.metrics().data_rejected.get(), 1);
    let containers = std::process::Command::new("docker")
        .args(["ps", "-aq", "--filter", &format!("label=mcjs.node={node}")])
        .output()
        .unwrap();
    assert!(containers.stdout.is_empty(), "no container was started");
    cancel.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_job_that_never_checkpoints_is_flagged() {
    let w = World::new().await;
    // One step takes a minute: the job cannot answer the checkpoint signal.
    let (agent, cancel, node) = w.agent(2, Some(Duration::from_secs(2))).await;
    let spec = w.spec(&["--epochs", "1", "--step-sleep-ms", "60000"], None);
    let job = w.submit_and_assign(&spec, 3, &node).await;
    w.wait_for("the missed deadline to be flagged", 60, async || {
        agent
            .reports()
            .iter()
            .any(|r| r.job == job.to_string() && r.checkpoint_overdue)
            .then_some(())
    })
    .await;
    assert_eq!(agent.metrics().overdue.get(), 1);
    assert!(matches!(w.job(&job).await.state, JobState::Running { .. }));
    cancel.cancel();
    remove_containers(&node).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_crash_is_reported_and_the_next_assignment_restores_past_a_corrupt_checkpoint() {
    let w = World::new().await;
    let (agent, cancel, node) = w.agent(3, None).await;
    // Checkpoints at steps 10, 20, 30, 40; the process dies after step 45.
    let spec = w.spec(
        &[
            "--epochs",
            "20",
            "--step-sleep-ms",
            "20",
            "--checkpoint-every-steps",
            "10",
            "--halt-at-step",
            "45",
        ],
        None,
    );
    let job = w.submit_and_assign(&spec, 4, &node).await;
    let report = w
        .wait_for("the crash to be reported", 90, async || {
            agent
                .reports()
                .into_iter()
                .find(|r| r.job == job.to_string() && r.phase == JobPhase::Exited)
        })
        .await;
    let exit = report.exit.expect("an exit report");
    assert_eq!(exit.stop, StopReason::Exited { code: 86 });
    assert!(!exit.stop.slashes());
    assert!(!exit.last_logs.is_empty());
    let j = w
        .wait_for("every checkpoint to be attested", 30, async || {
            let j = w.job(&job).await;
            (j.last_checkpoint.map(|c| c.step) == Some(40)).then_some(j)
        })
        .await;
    // The scheduler reports the failure; the newest checkpoint rots in the store.
    let owner_token = ix::usdc_account(&w.user.pubkey(), &w.mint);
    let provider = pda::provider(&w.provider.pubkey());
    let payout = ix::usdc_account(&w.provider.pubkey(), &w.mint);
    let deployment = w.client.deployment().await.unwrap();
    w.client
        .send(
            &[ix::report_failure(
                &w.scheduler.pubkey(),
                &job,
                &node,
                &provider,
                &payout,
                &owner_token,
                &deployment,
                ReportFailureArgs {
                    generation: j.generation,
                    cause: FailureCause::JobError,
                },
            )],
            &[&w.scheduler],
        )
        .await
        .expect("report the failure");
    let ckpts = w.dir.path().join(format!("store/jobs/{job}/checkpoints"));
    let newest = std::fs::read_dir(&ckpts)
        .unwrap()
        .map(|e| e.unwrap().path())
        .max()
        .unwrap();
    assert!(
        newest
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("00000000000000000040-")
    );
    let state = newest.join("files/state.bin");
    let mut bytes = std::fs::read(&state).unwrap();
    bytes[0] ^= 0xff;
    std::fs::write(&state, bytes).unwrap();
    w.assign(&job, &node).await;
    // Removal and reassignment each move the generation on.
    let generation = w.job(&job).await.generation;
    assert_eq!(generation, j.generation + 2);
    let restore_root = w
        .dir
        .path()
        .join(format!("agent-3/jobs/{job}/g{generation}/restore"));
    let restored = w
        .wait_for("the restore", 60, async || {
            if let Some(r) = agent
                .reports()
                .iter()
                .find(|r| r.generation == generation && r.exit.is_some())
            {
                panic!("the new assignment failed: {r:?}");
            }
            std::fs::read_dir(&restore_root).ok().and_then(|entries| {
                entries
                    .filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .find(|n| !n.starts_with('.'))
            })
        })
        .await;
    assert!(
        restored.starts_with("00000000000000000030-"),
        "fell back to step 30: {restored}"
    );
    // The job runs again under the new generation.
    w.wait_for("the job to run again", 60, async || {
        let j = w.job(&job).await;
        (matches!(j.state, JobState::Running { .. }) && j.generation == generation).then_some(())
    })
    .await;
    cancel.cancel();
    remove_containers(&node).await;
}

/// The failure table in real containers under the real agent and the real
/// scheduler daemon: jobs that end themselves with 137, 75, 2 and 86 never
/// slash their provider, and each ends as the table says.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn jobs_that_end_themselves_never_slash_their_provider() {
    let w = World::new().await;
    let (url, stop_scheduler) = w.scheduler_daemon().await;
    let provider = pda::provider(&w.provider.pubkey());
    let stake_before = w.client.provider(&provider).await.unwrap().unwrap().stake;
    let mut agents = Vec::new();
    for index in 20..24 {
        agents.push(w.agent_of(index, None, Some(url.clone())).await);
    }
    // Checkpoint at step 20, then the job ends itself at step 25 with `code`.
    let mut jobs = Vec::new();
    for (i, code) in [137u8, 75, 2, 86].into_iter().enumerate() {
        let code_arg = code.to_string();
        let spec = w.spec(
            &[
                "--epochs",
                "20",
                "--step-sleep-ms",
                "20",
                "--checkpoint-every-steps",
                "10",
                "--halt-at-step",
                "25",
                "--halt-code",
                &code_arg,
            ],
            None,
        );
        jobs.push((code, w.submit(&spec, 40 + i as u64).await));
    }
    for (code, job) in &jobs {
        let reported = w
            .wait_for(&format!("exit {code} to be reported"), 120, async || {
                let history = w.client.job_history(job).await.ok()?;
                history.into_iter().find_map(|e| match e.event {
                    McjsEvent::FailureReported(f) => Some(f),
                    _ => None,
                })
            })
            .await;
        assert_eq!(reported.slashed, 0, "exit {code} slashed its provider");
        let expected = match code {
            75 => FailureCause::JobYielded,
            2 => FailureCause::JobFatal,
            _ => FailureCause::JobError,
        };
        assert_eq!(reported.cause, expected, "exit {code}");
        match code {
            // Requeued from its checkpoint; the budget is untouched.
            75 => {
                assert_eq!(reported.restarts_used, 0);
                assert!(!reported.job_failed);
            }
            // Failed at once, the rest of the bond refunded.
            2 => {
                assert!(reported.job_failed);
                assert_eq!(reported.restarts_used, 0);
                assert!(reported.refund > 0);
                let j = w.job(job).await;
                assert!(matches!(j.state, JobState::Failed { .. }), "{:?}", j.state);
            }
            // The job's own crash: one restart of its budget.
            _ => {
                assert_eq!(reported.restarts_used, 1, "exit {code}");
                assert!(!reported.job_failed);
            }
        }
    }
    let after = w.client.provider(&provider).await.unwrap().unwrap();
    assert_eq!(
        after.stake, stake_before,
        "the provider's stake is untouched"
    );
    assert_eq!(after.slashed_total, 0);
    stop_scheduler.cancel();
    for (_, cancel, node) in agents {
        cancel.cancel();
        remove_containers(&node).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_agent_runs_only_with_its_nodes_operator_key_never_a_wallet_that_can_withdraw() {
    let w = World::new().await;
    let profile: mcjs_hal::NodeProfile = serde_json::from_str(include_str!(
        "../../../app/cli/tests/fixtures/node-a100x4.json"
    ))
    .unwrap();
    // The node, registered by the provider's wallet with operator key A.
    let operator = Keypair::new();
    let provider = pda::provider(&w.provider.pubkey());
    let node = pda::node(&provider, 7);
    w.client
        .send(
            &[
                ix::register_node(
                    &w.provider.pubkey(),
                    RegisterNodeArgs {
                        index: 7,
                        operator: operator.pubkey(),
                        hardware: mcjs_agent::register::hardware(&profile),
                        readiness: 50,
                        price_per_gpu_hour: USDC,
                    },
                ),
                ix::fund_operator(&w.provider.pubkey(), &operator.pubkey(), 100_000_000),
            ],
            &[&w.provider],
        )
        .await
        .expect("register the node");
    let before = w.client.node(&node).await.unwrap().unwrap();

    // The provider's own wallet: it owns the stake, so the agent refuses it.
    let wallet_chain = RpcChain::new(w.client.clone(), w.provider.insecure_clone());
    let err = adopt_node(&wallet_chain, node, &profile).await.unwrap_err();
    assert!(
        matches!(err, mcjs_agent::register::RegisterError::WalletKey { .. }),
        "{err}"
    );
    // A key that is not the node's operator key.
    let stranger = Keypair::new();
    let stranger_chain = RpcChain::new(w.client.clone(), stranger.insecure_clone());
    let err = adopt_node(&stranger_chain, node, &profile)
        .await
        .unwrap_err();
    assert!(
        matches!(err, mcjs_agent::register::RegisterError::NotOperator { .. }),
        "{err}"
    );
    let config = |node| AgentConfig {
        node,
        work_dir: w.dir.path().join("agent-identity"),
        tick: Duration::from_millis(200),
        max_checkpoint_interval: None,
        hash_threads: 1,
        scheduler: None,
        agent_url: "http://127.0.0.1:0".into(),
        staging: Default::default(),
    };
    assert!(
        Agent::new(
            stranger_chain,
            config(node),
            Arc::clone(&w.store),
            AgentMetrics::new()
        )
        .await
        .is_err(),
        "a stranger's key runs no node"
    );
    // Refusals changed nothing on chain.
    assert_eq!(
        w.client.node(&node).await.unwrap().unwrap().readiness,
        before.readiness
    );

    // The operator key adopts its node: the measured readiness is reported.
    let chain = RpcChain::new(w.client.clone(), operator.insecure_clone());
    let adopted = adopt_node(&chain, node, &profile).await.expect("adopt");
    assert_eq!(adopted.operator, operator.pubkey().to_string());
    let after = w.client.node(&node).await.unwrap().unwrap();
    assert_eq!(after.readiness, mcjs_hal::readiness(&profile).score);
    assert_eq!(
        after.price_per_gpu_hour, USDC,
        "the operator key cannot touch the price"
    );

    // The provider rotates the key: the old one is fenced at once.
    let rotated = Keypair::new();
    w.client
        .send(
            &[
                ix::update_node(
                    &w.provider.pubkey(),
                    &provider,
                    7,
                    mcjs_client::program::instructions::UpdateNodeArgs {
                        operator: Some(rotated.pubkey()),
                        ..Default::default()
                    },
                ),
                ix::fund_operator(&w.provider.pubkey(), &rotated.pubkey(), 100_000_000),
            ],
            &[&w.provider],
        )
        .await
        .expect("rotate the operator key");
    let err = adopt_node(&chain, node, &profile).await.unwrap_err();
    assert!(
        matches!(err, mcjs_agent::register::RegisterError::NotOperator { .. }),
        "{err}"
    );
    let rotated_chain = RpcChain::new(w.client.clone(), rotated);
    adopt_node(&rotated_chain, node, &profile)
        .await
        .expect("the new key adopts the node");
}

fn hostile_image() -> &'static str {
    static IMAGE: OnceLock<String> = OnceLock::new();
    IMAGE.get_or_init(|| {
        let out =
            std::process::Command::new(workspace_root().join("examples/hostile/build-image.sh"))
                .output()
                .expect("run examples/hostile/build-image.sh");
        assert!(
            out.status.success(),
            "building the hostile image failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    })
}

/// Whether any object in the store holds `needle`.
fn store_holds(root: &Path, needle: &[u8]) -> bool {
    let Ok(entries) = std::fs::read_dir(root) else {
        return false;
    };
    entries.flatten().any(|e| {
        let p = e.path();
        if p.is_dir() {
            store_holds(&p, needle)
        } else {
            std::fs::read(&p).is_ok_and(|b| b.windows(needle.len()).any(|w| w == needle))
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_job_swapping_in_symlinks_to_host_files_is_stopped_as_its_own_fault_and_an_honest_job_on_the_node_then_completes()
 {
    const CANARY: &[u8] = b"mcjs-canary-0b9d-provider-wallet-bytes";
    let w = World::new().await;
    let canary = w.dir.path().join("wallet.json");
    std::fs::write(&canary, CANARY).unwrap();
    let (agent, cancel, node) = w.agent(5, None).await;
    let train_args = ["--epochs", "4", "--checkpoint-every-steps", "16"];
    let honest = w.spec(&train_args, None);
    let mut hostile = serde_json::to_value(w.spec(&[], None)).unwrap();
    let digest = hostile_image().trim_start_matches("sha256:").to_string();
    hostile["work"]["image"] = format!("mcjs-hostile@sha256:{digest}").into();
    hostile["work"]["command"] = serde_json::json!(["/mcjs-hostile"]);
    hostile["work"]["args"] =
        serde_json::json!(["symlink-race", canary.display().to_string(), "30"]);
    let hostile = JobSpec::from_value(&hostile).expect("a valid spec");
    let provider = pda::provider(&w.provider.pubkey());
    let stake_before = w.client.provider(&provider).await.unwrap().unwrap().stake;
    let bad = w.submit_and_assign(&hostile, 20, &node).await;

    let report = w
        .wait_for("the hostile job to be stopped", 120, async || {
            agent
                .reports()
                .into_iter()
                .find(|r| r.job == bad.to_string() && r.phase == JobPhase::Exited)
        })
        .await;
    let exit = report.exit.expect("an exit report");
    assert_eq!(exit.stop, StopReason::ContractBroken, "{exit:?}");
    assert!(!exit.stop.slashes(), "the provider must not pay: {exit:?}");
    assert!(
        exit.last_logs
            .iter()
            .any(|l| l.contains("checkpoint refused")),
        "{exit:?}"
    );
    // What the scheduler does with an exit that is not the infrastructure's:
    // a job error, which slashes no one. Then the node takes the honest job.
    let j = w.job(&bad).await;
    let owner_token = ix::usdc_account(&w.user.pubkey(), &w.mint);
    let payout = ix::usdc_account(&w.provider.pubkey(), &w.mint);
    let deployment = w.client.deployment().await.unwrap();
    w.client
        .send(
            &[ix::report_failure(
                &w.scheduler.pubkey(),
                &bad,
                &node,
                &provider,
                &payout,
                &owner_token,
                &deployment,
                ReportFailureArgs {
                    generation: j.generation,
                    cause: FailureCause::JobError,
                },
            )],
            &[&w.scheduler],
        )
        .await
        .expect("report the failure");
    assert_eq!(
        w.client.provider(&provider).await.unwrap().unwrap().stake,
        stake_before,
        "the provider was slashed for a hostile job"
    );
    let good = w.submit_and_assign(&honest, 21, &node).await;
    let done = w
        .wait_for("the honest job to complete", 180, async || {
            let j = w.job(&good).await;
            matches!(j.state, JobState::Completed { .. }).then_some(j)
        })
        .await;
    cancel.cancel();
    assert!(
        !store_holds(&w.dir.path().join("store"), CANARY),
        "a host file reached the store"
    );
    // The honest job's model is that of an uninterrupted run, byte for byte.
    let mut args: Vec<String> = ["--data", "train.csv", "--batch-size", "32"]
        .iter()
        .chain(train_args.iter())
        .map(ToString::to_string)
        .collect();
    args.retain(|a| !a.is_empty());
    let reference = mcjs_cluster::workload::uninterrupted_run(
        trainer_image(),
        w.dir.path(),
        &w.dir.path().join("reference"),
        &args,
    )
    .expect("the reference run");
    let stored = w
        .store
        .get(&object_store::path::Path::from(format!(
            "jobs/{good}/output/files/model.bin"
        )))
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert!(
        stored.as_ref() == std::fs::read(reference).unwrap().as_slice(),
        "the honest job's model differs from an uninterrupted run"
    );
    assert!(done.output_hash.is_some());
    remove_containers(&node).await;
}
