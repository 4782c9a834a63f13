//! Hostile jobs against the real agent, the real local chain and real
//! Docker, all on ONE node: each attack of the hostile image
//! (`examples/hostile`) and each hostile data URI in turn. For every one the
//! job is ended as its own fault with the stop reason of the failure table
//! (docs/job-contract.md), the scheduler's cause for it slashes no one, and
//! the agent keeps serving; afterwards nothing from outside the mounts is in
//! the store or the agent's directories, the loopback server was never
//! contacted, and an honest job on the same node completes with the model of
//! an uninterrupted run, byte for byte. Needs a Docker engine.

mod common;

use common::*;
use mcjs_client::Pubkey;
use mcjs_client::Signer;
use mcjs_client::pda;
use mcjs_client::program::state::{FailureCause, JobState};
use mcjs_protocol::{JobPhase, JobReport, StopReason};
use mcjs_spec::JobSpec;
use sha2::{Digest, Sha256};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const CANARY: &[u8] = b"mcjs-canary-5c1a-provider-wallet-bytes";
/// The one refusal of every `file://` input, whatever the reason: it tells
/// the job's owner nothing about the host's files.
const FILE_REFUSED: &str = "refused: not under an allowed data root, not a readable regular file, or not the declared content";

/// What the hostile job does.
enum Attack {
    /// The hostile image runs with these arguments, declaring this disk.
    Run {
        args: Vec<String>,
        disk: &'static str,
    },
    /// The job declares this input (URI, sha256); its container never starts.
    Data { uri: String, sha256: String },
}

struct Case {
    name: &'static str,
    attack: Attack,
    phase: JobPhase,
    stop: StopReason,
    /// A piece of the reason the agent reports.
    says: &'static str,
}

/// Bytes allocated on the host's disk under `root`, on `root`'s own
/// filesystem (a run's mounted volume is counted as its image file, once).
fn on_disk(root: &std::path::Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(top) = std::fs::symlink_metadata(root) else {
        return 0;
    };
    let mut total = 0u64;
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(meta) = entry.metadata() else { continue };
            if meta.dev() != top.dev() {
                continue; // a mount point: what is under it is in its image
            }
            total += meta.blocks() * 512;
            if meta.is_dir() {
                stack.push(entry.path());
            }
        }
    }
    total
}

fn sha_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// A loopback HTTP "internal service"; counts the connections it accepts.
fn loopback_server() -> (u16, Arc<AtomicUsize>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let hits = Arc::new(AtomicUsize::new(0));
    let h = Arc::clone(&hits);
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            h.fetch_add(1, Ordering::SeqCst);
            drop(conn);
        }
    });
    (port, hits)
}

/// Whether any file under `root` holds `needle` (symlinks not followed).
fn tree_holds(root: &std::path::Path, needle: &[u8]) -> bool {
    let Ok(entries) = std::fs::read_dir(root) else {
        return false;
    };
    entries.flatten().any(|e| {
        let Ok(t) = e.file_type() else { return false };
        let p = e.path();
        if t.is_dir() {
            tree_holds(&p, needle)
        } else if t.is_file() {
            std::fs::read(&p).is_ok_and(|b| b.windows(needle.len()).any(|w| w == needle))
        } else {
            false
        }
    })
}

/// The running container of `node`'s agent, if any.
fn running_container(node: &Pubkey) -> Option<String> {
    let out = std::process::Command::new("docker")
        .args(["ps", "-q", "--filter", &format!("label=mcjs.node={node}")])
        .output()
        .unwrap();
    let id = String::from_utf8(out.stdout).unwrap().trim().to_string();
    (!id.is_empty()).then_some(id)
}

fn docker(args: &[&str]) -> String {
    let out = std::process::Command::new("docker")
        .args(args)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_hostile_job_is_stopped_as_its_own_fault_without_a_slash_and_the_node_then_runs_an_honest_job()
 {
    let w = World::new().await;
    // Host files the job must never get: a "wallet" outside the data roots
    // (the agent's data root is the world's directory), and /etc/passwd.
    let host = tempfile::tempdir().unwrap();
    let wallet = host.path().join("wallet.json");
    std::fs::write(&wallet, CANARY).unwrap();
    let passwd = std::fs::read("/etc/passwd").unwrap();
    let passwd_line = passwd.split(|b| *b == b'\n').next().unwrap().to_vec();
    assert!(
        passwd_line.len() > 8,
        "a first line of /etc/passwd to look for"
    );
    // Inside the data root, a symlink to a device.
    let zero_link = w.dir.path().join("zero-link.csv");
    std::os::unix::fs::symlink("/dev/zero", &zero_link).unwrap();
    let (port, hits) = loopback_server();

    let (agent, cancel, node) = w.agent(30, None).await;
    let provider = pda::provider(&w.provider.pubkey());
    let stake_before = w.client.provider(&provider).await.unwrap().unwrap().stake;

    let run = |args: &[&str], disk| Attack::Run {
        args: args.iter().map(ToString::to_string).collect(),
        disk,
    };
    let url = |p: &std::path::Path| url::Url::from_file_path(p).unwrap().to_string();
    let contract = |name, attack, says| Case {
        name,
        attack,
        phase: JobPhase::Exited,
        stop: StopReason::ContractBroken,
        says,
    };
    let data = |name, uri: String, sha256: String, says| Case {
        name,
        attack: Attack::Data { uri, sha256 },
        phase: JobPhase::DataRejected,
        stop: StopReason::InputRejected,
        says,
    };
    let cases = vec![
        contract(
            "fifo-manifest",
            run(&["fifo-manifest"], "1GiB"),
            "is not a regular file",
        ),
        contract("zero-manifest", run(&["zero-manifest"], "1GiB"), "symlink"),
        // 100,000 files, the state file and the manifest: over the cap of
        // 100,000 entries in one checkpoint.
        contract(
            "many-files",
            run(&["many-files", "100000"], "1GiB"),
            "more than 100000 files",
        ),
        // 8 GiB written against a declared disk of 1 GiB: the run's volume
        // refuses the writes past it, so the node's disk holds about 1 GiB
        // of it at the most (asserted below).
        contract(
            "fill-disk",
            run(&["fill-disk", "8192"], "1GiB"),
            "its declared disk",
        ),
        // Not a breach: the logs are capped; the job runs until it ends
        // (here it is killed from outside, an exit the agent did not cause).
        Case {
            name: "log-flood",
            attack: run(&["log-flood"], "1GiB"),
            phase: JobPhase::Exited,
            stop: StopReason::Exited { code: 137 },
            says: "flood",
        },
        data(
            "file:///dev/zero",
            "file:///dev/zero".into(),
            sha_hex(&[0u8; 1 << 20]),
            FILE_REFUSED,
        ),
        data(
            "symlink in the data root to /dev/zero",
            url(&zero_link),
            sha_hex(&[0u8; 1 << 20]),
            FILE_REFUSED,
        ),
        data(
            "file:///etc/passwd, with its right hash",
            "file:///etc/passwd".into(),
            sha_hex(&passwd),
            FILE_REFUSED,
        ),
        data(
            "a host file outside the data roots, with its right hash",
            url(&wallet),
            sha_hex(CANARY),
            FILE_REFUSED,
        ),
        data(
            "https to a loopback service",
            format!("https://127.0.0.1:{port}/train.csv"),
            sha_hex(b"anything"),
            "internal address",
        ),
        data(
            "https to a loopback service by name",
            format!("https://localhost:{port}/train.csv"),
            sha_hex(b"anything"),
            "internal address",
        ),
    ];

    assert_eq!(
        agent.disk_bound(),
        mcjs_agent::DiskBound::Loop,
        "the hostile suite needs jobs' disks bounded: run it as root with e2fsprogs installed"
    );
    let work_dir = w.dir.path().join("agent-30");
    let peak = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let sampling = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let sampler = {
        let (peak, sampling, work_dir) =
            (Arc::clone(&peak), Arc::clone(&sampling), work_dir.clone());
        std::thread::spawn(move || {
            while sampling.load(Ordering::SeqCst) {
                peak.fetch_max(on_disk(&work_dir), Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    };

    let mut seen = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let mut spec = match &case.attack {
            Attack::Run { args, disk } => {
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                w.hostile_spec(&args, disk)
            }
            Attack::Data { .. } => w.hostile_spec(&["log-flood"], "1GiB"),
        };
        if let Attack::Data { uri, sha256 } = &case.attack {
            spec["data"][0]["uri"] = uri.as_str().into();
            spec["data"][0]["sha256"] = sha256.as_str().into();
        }
        let spec = JobSpec::from_value(&spec).expect("a valid spec");
        let started = Instant::now();
        let job = w.submit_and_assign(&spec, 300 + i as u64, &node).await;
        let ended = |r: &JobReport| {
            r.job == job.to_string() && matches!(r.phase, JobPhase::Exited | JobPhase::DataRejected)
        };
        if case.name == "log-flood" {
            // Let it flood, then check that the node bounds it and serves on.
            let container = w
                .wait_for("the flood to start", 60, async || running_container(&node))
                .await;
            tokio::time::sleep(Duration::from_secs(4)).await;
            assert!(
                !agent.reports().iter().any(&ended),
                "a log flood is no reason to stop a job"
            );
            // The engine keeps no log of it (nothing on the node's disk):
            // the agent reads the output itself, at a bounded rate.
            let driver = docker(&[
                "inspect",
                "--format",
                "{{.HostConfig.LogConfig.Type}}",
                &container,
            ]);
            assert_eq!(driver.trim(), "none");
            let log_path = docker(&["inspect", "--format", "{{.LogPath}}", &container]);
            assert_eq!(log_path.trim(), "", "no log file on the node");
            docker(&["kill", &container]);
        }
        let report = w
            .wait_for(&format!("{} to be stopped", case.name), 120, async || {
                agent.reports().into_iter().find(|r| ended(r))
            })
            .await;
        let took = started.elapsed();
        let exit = report.exit.clone().expect("an exit report");
        assert_eq!(report.phase, case.phase, "{}: {report:?}", case.name);
        assert_eq!(exit.stop, case.stop, "{}: {exit:?}", case.name);
        assert!(
            !exit.stop.slashes(),
            "{}: the provider must not pay",
            case.name
        );
        assert!(
            exit.last_logs.iter().any(|l| l.contains(case.says)),
            "{}: {exit:?}",
            case.name
        );
        // Said in the job's own paths: nothing of the node's layout.
        assert!(
            exit.last_logs
                .iter()
                .all(|l| !l.contains(work_dir.to_str().unwrap())),
            "{}: {exit:?}",
            case.name
        );
        assert!(
            exit.last_logs.len() <= 40,
            "{}: {} lines",
            case.name,
            exit.last_logs.len()
        );
        assert!(
            // 512 bytes of the line, then a note of how much was cut.
            exit.last_logs.iter().all(|l| l.len() <= 512 + 32),
            "{}: a log line over 512 bytes",
            case.name
        );
        if let Attack::Data { sha256, .. } = &case.attack {
            // The refusal shows nothing of the host file.
            assert!(
                exit.last_logs.iter().all(|l| !l.contains(&sha_hex(&passwd))
                    && !l.contains(&sha_hex(CANARY))
                    && !l.contains(sha256.as_str())),
                "{}: {exit:?}",
                case.name
            );
        }
        // The scheduler's decision for this report, sent as it would.
        let cause = w.report_as_scheduler(&job, &node, exit.stop).await;
        assert_eq!(cause, FailureCause::JobError, "{}", case.name);
        let p = w.client.provider(&provider).await.unwrap().unwrap();
        assert_eq!(
            p.stake, stake_before,
            "{}: the provider was slashed",
            case.name
        );
        assert_eq!(p.slashed_total, 0, "{}", case.name);
        let j = w.job(&job).await;
        assert!(
            matches!(
                j.state,
                JobState::Pending { .. } | JobState::Recovering { .. }
            ),
            "{}: requeued with a restart used: {:?}",
            case.name,
            j.state
        );
        assert_eq!(j.restarts_used, 1, "{}", case.name);
        // The node's container is gone before the next job comes.
        w.wait_for(
            &format!("{}'s container to go", case.name),
            60,
            async || running_container(&node).is_none().then_some(()),
        )
        .await;
        // The node's work directory at its fullest while this case ran.
        let case_peak = peak.swap(on_disk(&work_dir), Ordering::SeqCst);
        eprintln!(
            "hostile: {:<58} {:?} -> {:?} in {:.1} s, work dir peak {} MB: {}",
            case.name,
            exit.stop,
            cause,
            took.as_secs_f64(),
            case_peak / 1_000_000,
            exit.last_logs.last().map(String::as_str).unwrap_or("")
        );
        assert!(
            case_peak < 1_300_000_000,
            "{}: the node's work directory reached {case_peak} bytes",
            case.name
        );
        seen.push((case.name, exit.stop, took));
    }
    sampling.store(false, Ordering::SeqCst);
    sampler.join().unwrap();
    assert_eq!(
        hits.load(Ordering::SeqCst),
        0,
        "the loopback service was contacted"
    );

    // The honest job on the same node.
    let train_args = ["--epochs", "4", "--checkpoint-every-steps", "16"];
    let honest = w.spec(&train_args, None);
    let good = w.submit_and_assign(&honest, 399, &node).await;
    let done = w
        .wait_for("the honest job to complete", 180, async || {
            let j = w.job(&good).await;
            matches!(j.state, JobState::Completed { .. }).then_some(j)
        })
        .await;
    cancel.cancel();
    assert!(done.output_hash.is_some());
    // Nothing from outside the mounts reached the store or the agent's files.
    for dir in ["store", "agent-30"] {
        let root = w.dir.path().join(dir);
        assert!(!tree_holds(&root, CANARY), "the wallet reached {dir}");
        assert!(
            !tree_holds(&root, &passwd_line),
            "/etc/passwd reached {dir}"
        );
    }
    w.assert_model_of_uninterrupted_run(&good, &train_args)
        .await;
    remove_containers(&node).await;
    for (name, stop, took) in seen {
        eprintln!(
            "hostile: {name}: {stop:?} after {:.1} s",
            took.as_secs_f64()
        );
    }
}
