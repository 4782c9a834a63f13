//! The agent's shell with the runtime's fake engine and an in-memory chain:
//! its decisions about hostile jobs, without Docker or a validator. The
//! fake engine runs nothing, so the test writes what a hostile container
//! would into the job's mounts.

use anchor_lang::solana_program::instruction::Instruction;
use mcjs_agent::chain::{AgentChain, ChainFailure, Check, NodeIdentity, chain_job};
use mcjs_agent::core::AttestedCheckpoint;
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
    jobs: Arc<Mutex<Vec<(Pubkey, Job)>>>,
    /// Verifications the node is named in, as the chain would list them.
    checks: Arc<Mutex<Vec<Check>>>,
    /// Every instruction sent (each confirmed).
    sent: Arc<Mutex<Vec<Instruction>>>,
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

    async fn checks(&self, _node: Pubkey) -> Result<Vec<Check>, ChainFailure> {
        Ok(self.checks.lock().unwrap().clone())
    }

    async fn attested(&self, _job: Pubkey) -> Result<Vec<AttestedCheckpoint>, ChainFailure> {
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
            failures: 0,
            service_secs: 0,
            challenge: Default::default(),
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
            held_segments: 0,
        }))
    }

    async fn deployment(&self) -> Result<Deployment, ChainFailure> {
        Ok(Deployment {
            usdc_mint: Pubkey::new_unique(),
            treasury: Pubkey::new_unique(),
        })
    }

    async fn send(&self, ix: Instruction) -> Result<(), ChainFailure> {
        // Confirmed; the chain's state is what the test says it is.
        self.sent.lock().unwrap().push(ix);
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
            attested: false,
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
        assignment_earned: 0,
        restore_floor: None,
        fatal_claim: None,
    }
}

struct Setup {
    t: tempfile::TempDir,
    agent: Agent<FakeChain, Arc<FakeEngine>>,
    /// The chain's view, for the test to change.
    jobs: Arc<Mutex<Vec<(Pubkey, Job)>>>,
    checks: Arc<Mutex<Vec<Check>>>,
    sent: Arc<Mutex<Vec<Instruction>>>,
    node: Pubkey,
    spec_hash: [u8; 32],
    engine: Arc<FakeEngine>,
    cancel: CancellationToken,
    job: Pubkey,
}

/// An agent on the fake engine with one job assigned whose input is `uri`.
/// The agent's view of a job says from when an attestation may exhaust its
/// bond: the first second the program's own rule says so, or never.
#[test]
fn an_attestation_may_exhaust_the_bond_from_the_first_second_the_program_says() {
    let node = Pubkey::new_unique();
    let me = NodeIdentity {
        node,
        provider: Pubkey::new_unique(),
        payout: Pubkey::new_unique(),
        deployment: Deployment {
            usdc_mint: Pubkey::new_unique(),
            treasury: Pubkey::new_unique(),
        },
    };
    // (bond, accrued, rate per hour, progress mark)
    let cases = [
        (1, 0, 1, 0),
        (3_600, 0, 7_200, 1_700_000_000),
        (10, 10, 5, 100),
        (1_000_000, 0, 1, 0),
        (u64::MAX, 0, u64::MAX, -5),
    ];
    for (bond, accrued, rate, mark) in cases {
        let mut job = job_account(node, [0; 32]);
        (job.bond, job.accrued, job.rate_per_hour, job.progress_mark) = (bond, accrued, rate, mark);
        let view = chain_job(Pubkey::new_unique(), &job, &me).expect("a job on the node");
        let may = |at: i64| job.attestation_may_exhaust_bond(at, u8::MAX);
        match view.bond_exhaustible_from {
            Some(from) => {
                assert!(may(from), "{bond} {accrued} {rate} {mark}");
                assert!(
                    from == i64::MIN || !may(from - 1),
                    "{bond} {accrued} {rate} {mark}"
                );
            }
            None => assert!(!may(i64::MAX), "{bond} {accrued} {rate} {mark}"),
        }
    }
}

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
        jobs: Arc::default(),
        checks: Arc::default(),
        sent: Arc::default(),
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
        standby_schedulers: Vec::new(),
        agent_url: "http://127.0.0.1:0".into(),
        staging: StagingPolicy {
            data_roots: vec![datasets],
            ..Default::default()
        },
        // The fake engine writes nothing: its runs need no volume.
        disk: mcjs_agent::DiskBound::Watch,
        ups: None,
    };
    let (jobs, checks, sent, node) = (
        Arc::clone(&chain.jobs),
        Arc::clone(&chain.checks),
        Arc::clone(&chain.sent),
        chain.node(),
    );
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
        jobs,
        checks,
        sent,
        node,
        spec_hash,
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

/// A verification naming this node's agent as verifier, of another node's
/// job run from the same spec: its first interval, from scratch to step 64.
fn due_check(node: Pubkey, spec_hash: [u8; 32]) -> Check {
    use mcjs_client::program::state::{CheckpointRecord, Party, Verification, VerificationState};
    let other = Pubkey::new_unique();
    let job = Pubkey::new_unique();
    Check {
        key: Pubkey::new_unique(),
        verification: Verification {
            job,
            verifier_node: node,
            referee_node: Pubkey::new_unique(),
            node: other,
            state: VerificationState::Open,
            interval: 1,
            segment: Pubkey::new_unique(),
            provider: Pubkey::new_unique(),
            verifier_provider: Pubkey::new_unique(),
            verifier_payout: Pubkey::new_unique(),
            referee_provider: Pubkey::new_unique(),
            referee_payout: Pubkey::new_unique(),
            from: None,
            to: CheckpointRecord {
                hash: [7; 32],
                epoch: 1,
                step: 64,
                time: 0,
                generation: 1,
            },
            interval_amount: 1,
            earned_to: 1,
            possession_key: [9; 32],
            verifier_commitment: None,
            referee_commitment: None,
            verifier_answer: None,
            referee_answer: None,
            draw_slot: 1,
            opened_at: 0,
            resolved_at: None,
            fees: 0,
            slashed: 0,
            rent_payer: Pubkey::new_unique(),
            bump: 0,
            replacements: 0,
            first_round: None,
            output: false,
        },
        role: Party::Verifier,
        job: job_account(other, spec_hash),
    }
}

fn is_check(c: &mcjs_runtime::fake::FakeContainer) -> bool {
    !c.spec
        .labels
        .iter()
        .any(|(k, _)| k == mcjs_agent::shell::GENERATION_LABEL)
}

/// A one-GPU node drawn to check while its own one-GPU job runs: the check
/// waits (no container) until the job leaves the node, then runs; when the
/// chain assigns the node a job again, the check's container is removed
/// before the paid run's starts. A check and the paid job never hold the
/// node's GPU at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_never_runs_on_the_gpus_of_the_nodes_paid_job() {
    let s = setup(honest_input).await;
    wait_for("the paid job's container", || {
        (s.engine
            .containers()
            .iter()
            .filter(|c| !is_check(c))
            .count()
            == 1)
            .then_some(())
    })
    .await;
    s.checks
        .lock()
        .unwrap()
        .push(due_check(s.node, s.spec_hash));
    // Several of the checker's rounds (500 ms) and retries (3 s): no check
    // container while the paid job holds the GPU.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(
        !s.engine.containers().iter().any(is_check),
        "a check started beside the paid job on a one-GPU node"
    );

    // The job leaves the node: the check gets the GPU.
    let (job, account) = s.jobs.lock().unwrap().pop().expect("the paid job");
    wait_for("the check's container", || {
        s.engine.containers().iter().find(|c| is_check(c)).cloned()
    })
    .await;
    let paid_running = s
        .engine
        .containers()
        .iter()
        .filter(|c| !is_check(c) && !c.removed && c.exit.is_none())
        .count();
    assert_eq!(
        paid_running, 0,
        "the paid container is gone before the check runs"
    );

    // The chain assigns the node a job again: the check gives the GPU back
    // (its container removed) and only then does the paid run start.
    let mut again = account.clone();
    again.generation = 2;
    s.jobs.lock().unwrap().push((job, again));
    let paid_again = wait_for("the paid job's second container", || {
        let all = s.engine.containers();
        let paid: Vec<_> = all.iter().filter(|c| !is_check(c)).collect();
        (paid.len() == 2).then(|| all.clone())
    })
    .await;
    let check = paid_again.iter().find(|c| is_check(c)).unwrap();
    assert!(
        check.removed,
        "the check still held the GPU when the paid run started"
    );
    s.cancel.cancel();
}

/// A check of an interval whose start is in no store: the node tries the
/// restore again (a listing may lag) and, after the last try, seals that
/// the start is unavailable, without ever starting the check's container.
/// The commitment opens to exactly that answer under the node's salt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_whose_start_cannot_be_restored_seals_start_unavailable() {
    use mcjs_client::program::instructions::CheckerStep;
    use mcjs_client::program::state::{CheckAnswer, CheckpointRecord, check_commitment};
    let s = setup(honest_input).await;
    // No paid job on the node: the check has its GPU.
    s.jobs.lock().unwrap().clear();
    let mut check = due_check(s.node, s.spec_hash);
    check.verification.interval = 2;
    check.verification.from = Some(CheckpointRecord {
        hash: [5; 32],
        epoch: 1,
        step: 32,
        time: 0,
        generation: 1,
    });
    check.verification.to.step = 64;
    let key = check.key;
    s.checks.lock().unwrap().push(check);
    let seal = wait_for("the check's seal", || {
        s.sent
            .lock()
            .unwrap()
            .iter()
            .find(|ix| ix.accounts.iter().any(|m| m.pubkey == key))
            .cloned()
    })
    .await;
    // The fake chain signs with zeros: the salt is their digest.
    let salt: [u8; 32] = Sha256::digest([0u8; 64]).into();
    let expected = check_commitment(&key, &s.node, &CheckAnswer::StartUnavailable, &salt);
    let authority = seal.accounts[0].pubkey;
    assert_eq!(
        seal.data,
        mcjs_client::ix::attest_verification(
            &authority,
            &s.node,
            &key,
            CheckerStep::Seal {
                commitment: expected
            },
        )
        .data,
        "the seal commits to \"start unavailable\""
    );
    assert!(
        !s.engine.containers().iter().any(is_check),
        "a check whose start cannot be restored starts no container"
    );
    s.cancel.cancel();
}

/// The agent enters its node in the checker pool of its GPU model as it
/// starts (the program draws every checker from the pool), signed by the
/// node's operator key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_enters_its_node_in_its_models_checker_pool() {
    let s = setup(honest_input).await;
    let pool = pda::checker_pool("a100-sxm4-80gb");
    let entered = wait_for("the pool entry", || {
        s.sent
            .lock()
            .unwrap()
            .iter()
            .find(|ix| ix.accounts.iter().any(|m| m.pubkey == pool))
            .cloned()
    })
    .await;
    let authority = entered.accounts[0].pubkey;
    assert_eq!(
        entered,
        mcjs_client::ix::enter_checker_pool(
            &authority,
            &s.node,
            &pda::provider(&authority),
            "a100-sxm4-80gb"
        )
    );
    assert!(entered.accounts[0].is_signer);
    s.cancel.cancel();
}
