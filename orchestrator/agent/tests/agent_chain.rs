//! The agent against the real local chain (surfpool with the MCJS program)
//! and the real Docker engine, running the reference trainer. The test plays
//! the job owner and the scheduler. Needs a Docker engine; fails without one.

mod common;

use common::*;
use mcjs_agent::core::AttestedCheckpoint;
use mcjs_agent::metrics::AgentMetrics;
use mcjs_agent::register::adopt_node;
use mcjs_agent::rpc::RpcChain;
use mcjs_agent::{Agent, AgentConfig};
use mcjs_client::history::McjsEvent;
use mcjs_client::program::instructions::RegisterNodeArgs;
use mcjs_client::program::state::{FailureCause, JobState};
use mcjs_client::{Keypair, Signer, ix, pda};
use mcjs_localnet::USDC;
use mcjs_protocol::{JobPhase, StopReason};
use mcjs_runtime::checkpoint::{Sha256Digest, hash_checkpoint};
use mcjs_runtime::store::{CheckpointStore, ExpectedCheckpoint};
use mcjs_spec::JobSpec;
use object_store::ObjectStore;
use std::sync::Arc;
use std::time::Duration;

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
            mcjs_runtime::confined::Limits::UNLIMITED,
            &w.dir.path().join("verify"),
        )
        .await
        .expect("the attested checkpoint is in the store and hashes to the attested value");
    assert_eq!(hash_checkpoint(&restored.dir, 1).unwrap().hash.0, last.hash);
    // Every attestation in the job's history names a checkpoint hash the agent stored.
    let history = w.client.job_history(&job).await.unwrap();
    let attested: Vec<AttestedCheckpoint> = history
        .iter()
        .filter_map(|e| match &e.event {
            mcjs_client::history::McjsEvent::CheckpointAttested(a) => Some(AttestedCheckpoint {
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
                "{}/output.json",
                mcjs_agent::output::output_prefix(
                    &job.to_string(),
                    done.completed_generation().unwrap()
                )
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
    w.report_failure(&job, &node, j.generation, FailureCause::JobError)
        .await;
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
    let restore_root = agent.job_dir(job, generation).join("restore");
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
            // One node's word that the job cannot succeed anywhere: one
            // restart used, not failed; only another provider's node saying
            // it too fails the job (here every node is one provider's).
            2 => {
                assert_eq!(reported.restarts_used, 1, "exit 2");
                assert!(!reported.job_failed);
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
        standby_schedulers: Vec::new(),
        agent_url: "http://127.0.0.1:0".into(),
        staging: Default::default(),
        disk: mcjs_agent::DiskBound::Auto,
        ups: None,
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
    w.report_failure(&bad, &node, j.generation, FailureCause::JobError)
        .await;
    assert_eq!(
        w.client.provider(&provider).await.unwrap().unwrap().stake,
        stake_before,
        "the provider was slashed for a hostile job"
    );
    let good = w.submit_and_assign(&honest, 21, &node).await;
    let done = w
        .wait_for_explained(
            "the honest job to complete",
            180,
            async || {
                let j = w.job(&good).await;
                matches!(j.state, JobState::Completed { .. }).then_some(j)
            },
            || format!("the agent reported {:?}", agent.reports()),
        )
        .await;
    cancel.cancel();
    assert!(
        !store_holds(&w.dir.path().join("store"), CANARY),
        "a host file reached the store"
    );
    // The honest job's model is that of an uninterrupted run, byte for byte.
    w.assert_model_of_uninterrupted_run(&good, &train_args)
        .await;
    assert!(done.output_hash.is_some());
    remove_containers(&node).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn on_battery_the_running_job_is_checkpointed_and_attested_at_once() {
    use mcjs_hal::probe::dummy_ups::DummyUps;
    let w = World::new().await;
    let ups = DummyUps::start();
    let (_agent, cancel, node) = w.agent_with(0, None, None, Some(ups.target("test"))).await;
    // A minute's checkpoint interval (the spec's), and a run far longer
    // than the test.
    let spec = w.spec(&["--epochs", "2000", "--step-sleep-ms", "25"], None);
    let job = w.submit_and_assign(&spec, 1, &node).await;
    w.wait_for("the job to start", 60, async || {
        matches!(w.job(&job).await.state, JobState::Running { .. }).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(w.job(&job).await.checkpoint_count, 0, "nothing is due yet");

    ups.set("OB DISCHRG", "90", "900");
    let lost_power = std::time::Instant::now();
    let attested = w
        .wait_for("a checkpoint attested on battery", 30, async || {
            let j = w.job(&job).await;
            (j.checkpoint_count >= 1).then_some(j)
        })
        .await;
    let took = lost_power.elapsed();
    // The UPS is read every second, the driver sees the change within its
    // second: what is left is the job's write, the hash, the upload and
    // the attestation.
    eprintln!("on battery -> checkpoint attested on chain: {took:?}");
    assert!(took < Duration::from_secs(20), "{took:?}");
    assert!(
        matches!(attested.state, JobState::Running { .. }),
        "the job runs on"
    );
    cancel.cancel();
    remove_containers(&node).await;
}
