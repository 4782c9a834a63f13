//! What the agent's real-chain tests share: a local chain (surfpool with the
//! MCJS program), the provider, the job owner and the scheduler's keys, the
//! checkpoint store, the test images, and an agent per node with its
//! operator key. Needs a Docker engine.
#![allow(dead_code)]

use mcjs_agent::metrics::AgentMetrics;
use mcjs_agent::register::adopt_node;
use mcjs_agent::rpc::RpcChain;
use mcjs_agent::{Agent, AgentConfig, put_spec};
use mcjs_client::program::instructions::RegisterNodeArgs;
use mcjs_client::program::state::Job;
use mcjs_client::{ChainClient, Keypair, Pubkey, Signer, ix, pda};
pub use mcjs_localnet::free_port_pair;
use mcjs_localnet::{Localnet, LocalnetConfig, USDC, read_keypair};
use mcjs_spec::JobSpec;
use object_store::ObjectStore;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn trainer_image() -> &'static str {
    static IMAGE: OnceLock<String> = OnceLock::new();
    IMAGE.get_or_init(|| {
        mcjs_cluster::workload::build_trainer_image().expect("the trainer image builds")
    })
}

pub struct World {
    _localnet: Localnet,
    pub dir: tempfile::TempDir,
    pub client: ChainClient,
    pub user: Keypair,
    pub scheduler: Keypair,
    pub provider: Keypair,
    pub store: Arc<dyn ObjectStore>,
    pub mint: Pubkey,
    pub treasury: Pubkey,
}

impl Drop for World {
    /// The agents' run volumes still mounted (a test that stops its agent
    /// under a running job leaves them, as a real node would for the next
    /// agent to adopt) go with the test's directory.
    fn drop(&mut self) {
        mcjs_runtime::volume::release_all_under(self.dir.path());
    }
}

impl World {
    pub async fn new() -> World {
        // The agent's log, shown with a failing test's output
        // (`RUST_LOG` to change what is kept; warnings by default).
        let _ = tracing_subscriber::fmt()
            .with_test_writer()
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_default_env()
                    .unwrap_or_else(|_| "warn".into()),
            )
            .try_init();
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

    pub fn spec(&self, args: &[&str], data_sha256: Option<&str>) -> JobSpec {
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
    pub async fn submit_and_assign(&self, spec: &JobSpec, job_id: u64, node: &Pubkey) -> Pubkey {
        let job = self.submit(spec, job_id).await;
        self.assign(&job, node).await;
        job
    }

    /// Publishes the spec and submits the job with a bond of 1 USDC.
    pub async fn submit(&self, spec: &JobSpec, job_id: u64) -> Pubkey {
        let hash = put_spec(self.store.as_ref(), spec).await.unwrap();
        let args = ix::submit_args(spec, job_id, USDC);
        assert_eq!(args.spec_hash, hash, "the store keys a spec by its hash");
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

    pub async fn assign(&self, job: &Pubkey, node: &Pubkey) {
        let provider = pda::provider(&self.provider.pubkey());
        self.client
            .send(
                &[ix::assign_job(
                    &self.scheduler.pubkey(),
                    job,
                    node,
                    &provider,
                    None,
                )],
                &[&self.scheduler],
            )
            .await
            .expect("assign the job");
    }

    /// Registers node `index` from the 4×A100 profile and starts its agent.
    pub async fn agent(
        &self,
        index: u32,
        max_interval: Option<Duration>,
    ) -> (Agent<RpcChain>, CancellationToken, Pubkey) {
        self.agent_of(index, max_interval, None).await
    }

    /// Starts the real scheduler daemon (placement, failure detection,
    /// signed heartbeats) with the deployment's scheduler key; returns its URL.
    pub async fn scheduler_daemon(&self) -> (String, CancellationToken) {
        use mcjs_scheduler_daemon::shell::{Daemon, DaemonConfig};
        let listen: std::net::SocketAddr =
            format!("127.0.0.1:{}", free_port_pair()).parse().unwrap();
        let config = DaemonConfig {
            rpc_url: self.client.url().to_string(),
            fees: Default::default(),
            listen,
            tick: Duration::from_millis(300),
            detector: Default::default(),
            store: mcjs_protocol::store::StoreUrl::Dir(self.dir.path().join("store")),
            sends_in_flight: mcjs_scheduler_daemon::shell::SENDS_IN_FLIGHT,
            index_stream: Default::default(),
            challenge: Default::default(),
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
    pub async fn agent_of(
        &self,
        index: u32,
        max_interval: Option<Duration>,
        scheduler: Option<String>,
    ) -> (Agent<RpcChain>, CancellationToken, Pubkey) {
        self.agent_with(index, max_interval, scheduler, None).await
    }

    /// Like [`Self::agent_of`], reading the node's UPS when given.
    pub async fn agent_with(
        &self,
        index: u32,
        max_interval: Option<Duration>,
        scheduler: Option<String>,
        ups: Option<mcjs_hal::probe::ups::UpsTarget>,
    ) -> (Agent<RpcChain>, CancellationToken, Pubkey) {
        let profile: mcjs_hal::NodeProfile = serde_json::from_str(include_str!(
            "../../../../app/cli/tests/fixtures/node-a100x4.json"
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
            standby_schedulers: Vec::new(),
            agent_url: "http://127.0.0.1:0".into(),
            staging: mcjs_runtime::staging::StagingPolicy {
                data_roots: vec![self.dir.path().to_path_buf()],
                ..Default::default()
            },
            disk: mcjs_agent::DiskBound::Auto,
            ups,
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

    /// Asserts that `job`'s stored model is byte-identical to an
    /// uninterrupted run of the trainer with `train_args`.
    pub async fn assert_model_of_uninterrupted_run(&self, job: &Pubkey, train_args: &[&str]) {
        let mut args: Vec<String> = ["--data", "train.csv", "--batch-size", "32"]
            .iter()
            .chain(train_args.iter())
            .map(ToString::to_string)
            .collect();
        args.retain(|a| !a.is_empty());
        let reference = mcjs_cluster::workload::uninterrupted_run(
            trainer_image(),
            self.dir.path(),
            &self.dir.path().join("reference"),
            &args,
        )
        .expect("the reference run");
        let prefix = mcjs_agent::output::output_prefix(
            &job.to_string(),
            self.job(job)
                .await
                .completed_generation()
                .expect("the job completed"),
        );
        let read = |path: String| async move {
            self.store
                .get(&object_store::path::Path::from(path))
                .await
                .unwrap()
                .bytes()
                .await
                .unwrap()
        };
        let descriptor: mcjs_agent::output::StoredOutput =
            serde_json::from_slice(&read(format!("{prefix}/output.json")).await).unwrap();
        let stored = read(format!(
            "{}/model.bin",
            descriptor.files_prefix(&prefix).unwrap()
        ))
        .await;
        assert!(
            stored.as_ref() == std::fs::read(reference).unwrap().as_slice(),
            "the honest job's model differs from an uninterrupted run"
        );
    }

    pub async fn job(&self, key: &Pubkey) -> Job {
        self.client.job(key).await.unwrap().expect("the job exists")
    }

    pub async fn balance(&self, owner: &Pubkey) -> u64 {
        self.client
            .token_balance(&ix::usdc_account(owner, &self.mint))
            .await
            .unwrap()
    }

    pub async fn wait_for<T>(
        &self,
        what: &str,
        secs: u64,
        check: impl AsyncFnMut() -> Option<T>,
    ) -> T {
        self.wait_for_explained(what, secs, check, String::new)
            .await
    }

    /// As [`World::wait_for`]; a timeout says what `explain` finds then
    /// (what the agent reported, say), so a failure can be read.
    pub async fn wait_for_explained<T>(
        &self,
        what: &str,
        secs: u64,
        mut check: impl AsyncFnMut() -> Option<T>,
        explain: impl Fn() -> String,
    ) -> T {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            if let Some(v) = check().await {
                return v;
            }
            if Instant::now() >= deadline {
                panic!("timed out waiting for {what}: {}", explain());
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// Removes every container the agent of `node` left running.
pub async fn remove_containers(node: &Pubkey) {
    let _ = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "docker rm -f $(docker ps -aq --filter label=mcjs.node={node}) 2>/dev/null"
        ))
        .output();
}

pub fn hostile_image() -> &'static str {
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
pub fn store_holds(root: &Path, needle: &[u8]) -> bool {
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

impl World {
    /// What the scheduler does with `stop`, reported by the agent of `node`
    /// for `job`: the protocol's table names the on-chain cause, and the
    /// scheduler reports it. Returns the cause sent.
    pub async fn report_as_scheduler(
        &self,
        job: &Pubkey,
        node: &Pubkey,
        stop: mcjs_protocol::StopReason,
    ) -> mcjs_client::program::state::FailureCause {
        let cause = mcjs_scheduler_daemon::core::failure_cause(
            stop.chain_cause().expect("a stop that is someone's fault"),
        );
        let generation = self.job(job).await.generation;
        self.report_failure(job, node, generation, cause).await;
        cause
    }

    /// The scheduler reports assignment `generation` of `job` on `node`
    /// failed with `cause`.
    pub async fn report_failure(
        &self,
        job: &Pubkey,
        node: &Pubkey,
        generation: u32,
        cause: mcjs_client::program::state::FailureCause,
    ) {
        let on = ix::JobAccounts {
            job: *job,
            node: *node,
            provider: pda::provider(&self.provider.pubkey()),
            payout: ix::usdc_account(&self.provider.pubkey(), &self.mint),
            refund: ix::usdc_account(&self.user.pubkey(), &self.mint),
            generation,
            segment: None,
            deployment: self.client.deployment().await.unwrap(),
        };
        self.client
            .send(
                &[on.report_failure(&self.scheduler.pubkey(), cause)],
                &[&self.scheduler],
            )
            .await
            .expect("report the failure");
    }

    /// The hostile image running `args`, declaring `disk` (e.g. "4MiB") and
    /// the usual dataset input.
    pub fn hostile_spec(&self, args: &[&str], disk: &str) -> serde_json::Value {
        let mut spec = serde_json::to_value(self.spec(&[], None)).unwrap();
        let digest = hostile_image().trim_start_matches("sha256:").to_string();
        spec["work"]["image"] = format!("mcjs-hostile@sha256:{digest}").into();
        spec["work"]["command"] = serde_json::json!(["/mcjs-hostile"]);
        spec["work"]["args"] = serde_json::json!(args);
        spec["request"]["hardware"]["disk"] = disk.into();
        spec
    }
}
