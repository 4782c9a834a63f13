//! The agent's shell with the runtime's fake engine and an in-memory chain:
//! its decisions about hostile jobs, without Docker or a validator. The
//! fake engine runs nothing, so the test writes what a hostile container
//! would into the job's mounts.

use anchor_lang::solana_program::instruction::Instruction;
use mcjs_agent::chain::{AgentChain, ChainFailure};
use mcjs_agent::core::Attested;
use mcjs_agent::metrics::AgentMetrics;
use mcjs_agent::{Agent, AgentConfig, StagingPolicy, put_spec};
use mcjs_client::ix::Deployment;
use mcjs_client::program::state::{
    HardwareProfile, Job, JobRequirements, JobState, JobTerms, Node, NodeStatus, Provider,
};
use mcjs_client::{Pubkey, pda};
use mcjs_protocol::{JobPhase, StopReason};
use mcjs_runtime::fake::FakeEngine;
use mcjs_spec::JobSpec;
use object_store::ObjectStore;
use sha2::{Digest, Sha256};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// One provider with node 0, holding whatever jobs the test puts on it.
struct FakeChain {
    authority: Pubkey,
    jobs: Mutex<Vec<(Pubkey, Job)>>,
}

impl FakeChain {
    fn node(&self) -> Pubkey {
        pda::node(&pda::provider(&self.authority), 0)
    }
}

impl AgentChain for FakeChain {
    fn authority(&self) -> Pubkey {
        self.authority
    }

    fn sign(&self, _message: &[u8]) -> [u8; 64] {
        // No scheduler listens in these tests: nothing checks it.
        [0; 64]
    }

    async fn jobs_on_node(&self, _node: Pubkey) -> Result<Vec<(Pubkey, Job)>, ChainFailure> {
        Ok(self.jobs.lock().unwrap().clone())
    }

    async fn attested(&self, _job: Pubkey) -> Result<Vec<Attested>, ChainFailure> {
        Ok(Vec::new())
    }

    async fn node(&self, node: Pubkey) -> Result<Option<Node>, ChainFailure> {
        Ok(Some(Node {
            provider: pda::provider(&self.authority),
            index: 0,
            operator: self.authority,
            hardware: HardwareProfile {
                gpu_model: "a100-sxm4-80gb".into(),
                gpu_count: 1,
                vram_per_gpu_mib: 81_920,
                compute_capability: 80,
                cpu_cores: 8,
                ram_mib: 65_536,
                disk_gib: 100,
                checkpoint_write_mibps: 1000,
            },
            readiness: 100,
            price_per_gpu_hour: 1,
            status: NodeStatus::Busy,
            status_since: 0,
            current_job: self.jobs.lock().unwrap().first().map(|(k, _)| *k),
            bump: 0,
        })
        .filter(|_| node == self.node()))
    }

    async fn provider(&self, _provider: Pubkey) -> Result<Option<Provider>, ChainFailure> {
        Ok(Some(Provider {
            owner: self.authority,
            payout: Pubkey::new_unique(),
            stake: 100,
            pending_withdrawal: None,
            active_assignments: 1,
            node_count: 1,
            jobs_completed: 0,
            failures: 0,
            slashed_total: 0,
            registered_at: 0,
            bump: 0,
            vault_bump: 0,
        }))
    }

    async fn deployment(&self) -> Result<Deployment, ChainFailure> {
        Ok(Deployment {
            usdc_mint: Pubkey::new_unique(),
            treasury: Pubkey::new_unique(),
        })
    }

    async fn send(&self, _ix: Instruction) -> Result<(), ChainFailure> {
        // Confirmed; the chain's state is what the test says it is.
        Ok(())
    }
}

fn job_account(node: Pubkey, spec_hash: [u8; 32]) -> Job {
    Job {
        owner: Pubkey::new_unique(),
        state: JobState::Assigned { since: 0 },
        node: Some(node),
        provider: None,
        job_id: 1,
        spec_hash,
        terms: JobTerms {
            checkpoint_interval_secs: 60,
            max_duration_secs: 3600,
            deadline: None,
            max_price_per_gpu_hour: 2,
            restart_budget: 3,
        },
        bond: 1,
        paid: 0,
        generation: 1,
        rate_per_hour: 1,
        last_checkpoint: None,
        checkpoint_chain: [0; 32],
        checkpoint_count: 0,
        progress_mark: 0,
        accrued: 0,
        billed_secs: 0,
        restarts_used: 0,
        output_hash: None,
        submitted_at: 0,
        first_running_at: None,
        finished_at: None,
        refund_account: Pubkey::new_unique(),
        bump: 0,
        vault_bump: 0,
        requirements: JobRequirements {
            gpu_count: 1,
            min_vram_mib: 0,
            min_compute_capability: 0,
            gpu_models: Vec::new(),
            min_checkpoint_write_mibps: 0,
        },
        last_failure: None,
        compensated: 0,
        verification_ppm: 0,
        prev_checkpoint: None,
        last_attest_slot: 0,
        last_interval_amount: 0,
        open_verifications: 0,
        holds_payment: false,
        held: 0,
        live_segments: 0,
        barred_provider: None,
        last_opened_interval: 0,
        checks_settled_at: 0,
    }
}

struct Setup {
    t: tempfile::TempDir,
    agent: Agent<FakeChain, Arc<FakeEngine>>,
    engine: Arc<FakeEngine>,
    cancel: CancellationToken,
    job: Pubkey,
}

/// An agent on the fake engine with one job assigned whose input is `uri`.
async fn setup(uri: impl FnOnce(&Path) -> (String, String)) -> Setup {
    let t = tempfile::tempdir().unwrap();
    let datasets = t.path().join("datasets");
    std::fs::create_dir_all(&datasets).unwrap();
    std::fs::create_dir_all(t.path().join("store")).unwrap();
    let store: Arc<dyn ObjectStore> = Arc::new(
        object_store::local::LocalFileSystem::new_with_prefix(t.path().join("store")).unwrap(),
    );
    let (uri, sha) = uri(&datasets);
    let mut json: serde_json::Value = serde_json::from_str(&mcjs_cluster::workload::spec_json(
        &format!("sha256:{}", "ab".repeat(32)),
        "file:///x",
        &sha,
        &[],
        3,
    ))
    .unwrap();
    json["data"][0]["uri"] = uri.into();
    let spec = JobSpec::from_value(&json).expect("a valid spec");
    let spec_hash = put_spec(store.as_ref(), &spec).await.unwrap();
    let chain = FakeChain {
        authority: Pubkey::new_unique(),
        jobs: Mutex::new(Vec::new()),
    };
    let job = Pubkey::new_unique();
    chain
        .jobs
        .lock()
        .unwrap()
        .push((job, job_account(chain.node(), spec_hash)));
    let engine = Arc::new(FakeEngine::new());
    let config = AgentConfig {
        node: chain.node(),
        work_dir: t.path().join("agent"),
        tick: Duration::from_millis(50),
        max_checkpoint_interval: None,
        hash_threads: 1,
        scheduler: None,
        agent_url: "http://127.0.0.1:0".into(),
        staging: StagingPolicy {
            data_roots: vec![datasets],
            ..Default::default()
        },
        // The fake engine writes nothing: its runs need no volume.
        disk: mcjs_agent::DiskBound::Watch,
    };
    let agent = Agent::with_engine(
        chain,
        config,
        store,
        AgentMetrics::new(),
        Arc::clone(&engine),
    )
    .await
    .unwrap();
    let cancel = CancellationToken::new();
    let (a, c) = (agent.clone(), cancel.clone());
    tokio::spawn(async move { a.run(c).await.unwrap() });
    Setup {
        t,
        agent,
        engine,
        cancel,
        job,
    }
}

async fn wait_for<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(Instant::now() < until, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn honest_input(datasets: &Path) -> (String, String) {
    let csv = mcjs_cluster::workload::dataset(16);
    std::fs::write(datasets.join("train.csv"), &csv).unwrap();
    (
        url::Url::from_file_path(datasets.join("train.csv"))
            .unwrap()
            .to_string(),
        hex::encode(Sha256::digest(csv.as_bytes())),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checkpoint_with_a_symlink_to_a_host_file_stops_the_job_as_its_own_fault() {
    let s = setup(honest_input).await;
    let canary = s.t.path().join("wallet.json");
    std::fs::write(&canary, b"canary-5e1f").unwrap();
    let container = wait_for("the container", || s.engine.started().first().cloned()).await;
    // What the hostile container writes into its checkpoint mount.
    let ckpt = container.mounts.checkpoints.join("step-1");
    std::fs::create_dir_all(&ckpt).unwrap();
    std::os::unix::fs::symlink(&canary, ckpt.join("state.bin")).unwrap();
    std::fs::write(
        ckpt.join("mcjs-manifest.json"),
        r#"{"format":"mcjs-checkpoint/1","epoch":0,"step":1}"#,
    )
    .unwrap();
    let report = wait_for("the job to be stopped", || {
        s.agent
            .reports()
            .into_iter()
            .find(|r| r.job == s.job.to_string() && r.phase == JobPhase::Exited)
    })
    .await;
    let exit = report.exit.unwrap();
    assert_eq!(exit.stop, StopReason::ContractBroken, "{exit:?}");
    assert!(!exit.stop.slashes());
    assert!(exit.last_logs[0].contains("checkpoint refused"), "{exit:?}");
    let id = mcjs_runtime::engine::ContainerId("fake-1".into());
    wait_for("the container to be removed", || {
        s.engine
            .container(&id)
            .is_some_and(|c| c.removed)
            .then_some(())
    })
    .await;
    s.cancel.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_input_outside_the_data_roots_is_rejected_data_and_no_container_starts() {
    let s = setup(|_| {
        (
            "file:///etc/passwd".into(),
            hex::encode(Sha256::digest(b"anything")),
        )
    })
    .await;
    let report = wait_for("the data to be rejected", || {
        s.agent
            .reports()
            .into_iter()
            .find(|r| r.phase == JobPhase::DataRejected)
    })
    .await;
    assert_eq!(report.job, s.job.to_string());
    assert!(s.engine.started().is_empty());
    s.cancel.cancel();
}
