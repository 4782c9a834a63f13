//! The `mcjs` chain commands run as people run them: the built binary
//! against a local chain (surfpool, offline, with the MCJS program), one
//! chain for this file. What the scheduler and the provider's agent do
//! (assign, start, attest, complete) is done here with the chain client,
//! signed with their wallets.

mod common;
use common::fake_k80_nvml;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use mcjs_client::{ChainClient, JobFilter, Keypair, Pubkey, Signer, ix, pda};
use mcjs_localnet::{
    Localnet, LocalnetConfig, LocalnetInfo, free_port_pair, read_keypair, write_keypair,
};
use serde_json::Value;

struct Chain {
    _dir: tempfile::TempDir,
    info: LocalnetInfo,
    runtime: tokio::runtime::Runtime,
    _localnet: Localnet,
}

fn chain() -> &'static Chain {
    static CHAIN: OnceLock<Chain> = OnceLock::new();
    CHAIN.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .unwrap();
        let localnet = runtime
            .block_on(Localnet::start(LocalnetConfig {
                rpc_port: free_port_pair(),
                dir: dir.path().to_path_buf(),
                slot_time_ms: 20,
                ..LocalnetConfig::default()
            }))
            .expect("the local chain starts");
        Chain {
            info: localnet.info().clone(),
            _dir: dir,
            runtime,
            _localnet: localnet,
        }
    })
}

impl Chain {
    fn client(&self) -> ChainClient {
        ChainClient::with_ws(&self.info.rpc_url, &self.info.ws_url)
    }

    fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.runtime.block_on(f)
    }

    fn mcjs(&self, wallet: &Path, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_mcjs"))
            .args(["-u", &self.info.rpc_url, "-k", wallet.to_str().unwrap()])
            .args(args)
            .output()
            .expect("mcjs runs")
    }

    fn provider_wallet(&self, n: usize) -> PathBuf {
        self.info.wallets.providers[n - 1].clone()
    }
}

fn text(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[track_caller]
fn ok_json(out: Output) -> Value {
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out)))
}

fn examples() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/specs")
}

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// Every balance and account a refused command must leave as it was.
#[derive(Debug, PartialEq)]
struct Snapshot {
    sol: Vec<u64>,
    usdc: Vec<u64>,
    accounts: Vec<Option<Vec<u8>>>,
    jobs: Vec<Pubkey>,
}

fn snapshot(chain: &Chain, wallets: &[Pubkey], accounts: &[Pubkey]) -> Snapshot {
    let client = chain.client();
    let mint = chain.info.usdc_mint();
    chain.block_on(async {
        let mut snap = Snapshot {
            sol: vec![],
            usdc: vec![],
            accounts: vec![],
            jobs: vec![],
        };
        for w in wallets {
            snap.sol.push(client.sol_balance(w).await.unwrap());
            snap.usdc.push(
                client
                    .token_balance(&ix::usdc_account(w, &mint))
                    .await
                    .unwrap(),
            );
            snap.jobs.extend(
                client
                    .jobs(JobFilter::Owner(*w))
                    .await
                    .unwrap()
                    .into_iter()
                    .map(|(k, _)| k),
            );
        }
        for a in accounts {
            snap.accounts
                .push(client.account(a).await.unwrap().map(|a| a.data));
        }
        snap
    })
}

#[test]
fn a_job_lives_its_whole_life_by_cli_and_its_audit_verifies_until_tampered_with() {
    let chain = chain();
    let client = chain.client();
    let user_path = chain.info.wallets.user.clone();
    let provider_path = chain.provider_wallet(1);
    let scheduler = read_keypair(&chain.info.wallets.scheduler).unwrap();
    let provider = read_keypair(&provider_path).unwrap();
    let user = read_keypair(&user_path).unwrap();

    // The provider registers with a stake, then its node from a HAL profile.
    let registered = ok_json(chain.mcjs(
        &provider_path,
        &["--output", "json", "provider", "register", "--stake", "200"],
    ));
    assert_eq!(registered["stake"], "200.00");
    let keys = tempfile::tempdir().unwrap();
    let operator_path = keys.path().join("node-operator.json");
    let operator = Keypair::new();
    write_keypair(&operator_path, &operator).unwrap();
    let node = ok_json(chain.mcjs(
        &provider_path,
        &[
            "--output",
            "json",
            "node",
            "register",
            "--profile",
            fixture("node-a100x4.json").to_str().unwrap(),
            "--operator",
            operator_path.to_str().unwrap(),
            "--price",
            "1.5",
        ],
    ));
    let node_key: Pubkey = node["nodes"][0]["node"].as_str().unwrap().parse().unwrap();
    assert_eq!(node["nodes"][0]["gpu_model"], "a100-sxm4-80gb");
    assert_eq!(node["nodes"][0]["gpu_count"], 4);
    assert_eq!(node["nodes"][0]["status"], "available");

    // The user submits a job; its bond leaves the wallet.
    let mint = chain.info.usdc_mint();
    let user_token = ix::usdc_account(&user.pubkey(), &mint);
    let before = chain.block_on(client.token_balance(&user_token)).unwrap();
    let submitted = ok_json(chain.mcjs(
        &user_path,
        &[
            "--output",
            "json",
            "job",
            "submit",
            "--chain-only",
            examples().join("training-a100.json").to_str().unwrap(),
            "--bond",
            "100",
        ],
    ));
    let job_key: Pubkey = submitted["job"].as_str().unwrap().parse().unwrap();
    let spec_hash = Command::new(env!("CARGO_BIN_EXE_mcjs"))
        .args(["spec", "hash", "--output", "json"])
        .arg(examples().join("training-a100.json"))
        .output()
        .unwrap();
    let spec_hash: Value = serde_json::from_slice(&spec_hash.stdout).unwrap();
    assert_eq!(submitted["spec_hash"], spec_hash["sha256"]);
    let after = chain.block_on(client.token_balance(&user_token)).unwrap();
    assert_eq!(before - after, 100_000_000);

    // Someone watches the job live from submission to its end.
    let mut watcher = Command::new(env!("CARGO_BIN_EXE_mcjs"))
        .args([
            "-u",
            &chain.info.rpc_url,
            "--output",
            "json-compact",
            "job",
            "watch",
        ])
        .arg(job_key.to_string())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let (line_tx, line_rx) = std::sync::mpsc::channel::<String>();
    let watched = std::thread::spawn({
        let stdout = watcher.stdout.take().unwrap();
        move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = line_tx.send(line);
            }
        }
    });
    // The watcher has seen the job pending before anything happens to it.
    let first_line = line_rx
        .recv_timeout(Duration::from_secs(30))
        .expect("job watch printed the job's first state");

    // The scheduler assigns it; the provider's agent starts it, attests three
    // checkpoints and completes it.
    let deployment = chain.block_on(client.deployment()).unwrap();
    let provider_account = pda::provider(&provider.pubkey());
    let payout = ix::usdc_account(&provider.pubkey(), &mint);
    chain.block_on(async {
        client
            .send(
                &[ix::assign_job(
                    &scheduler.pubkey(),
                    &job_key,
                    &node_key,
                    &provider_account,
                    None,
                )],
                &[&scheduler],
            )
            .await
            .expect("assign");
        let generation = client.job(&job_key).await.unwrap().unwrap().generation;
        client
            .send(
                &[ix::start_job(
                    &operator.pubkey(),
                    &job_key,
                    &node_key,
                    &provider_account,
                    generation,
                )],
                &[&operator],
            )
            .await
            .expect("start");
        for step in 1..=3u64 {
            client
                .send(
                    &[ix::JobAccounts {
                        job: job_key,
                        node: node_key,
                        provider: provider_account,
                        payout,
                        refund: job_key,
                        generation,
                        segment: None,
                        deployment,
                    }
                    .attest(
                        &operator.pubkey(),
                        true,
                        1,
                        step * 100,
                        [step as u8; 32],
                    )],
                    &[&operator],
                )
                .await
                .expect("attest");
        }
        client
            .send(
                &[ix::JobAccounts {
                    job: job_key,
                    node: node_key,
                    provider: provider_account,
                    payout,
                    refund: user_token,
                    generation,
                    segment: None,
                    deployment,
                }
                .complete(&operator.pubkey(), [0xab; 32])],
                &[&operator],
            )
            .await
            .expect("complete");
    });

    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = watcher.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "job watch did not end when the job completed"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    watched.join().unwrap();
    let lines: Vec<String> = std::iter::once(first_line)
        .chain(line_rx.try_iter())
        .collect();
    assert_eq!(status.code(), Some(0), "{lines:#?}");
    let states: Vec<String> = lines
        .iter()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["state"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(
        states.first().map(String::as_str),
        Some("pending"),
        "{lines:#?}"
    );
    assert_eq!(
        states.last().map(String::as_str),
        Some("completed"),
        "{lines:#?}"
    );

    let status = ok_json(chain.mcjs(
        &user_path,
        &["--output", "json", "job", "status", &job_key.to_string()],
    ));
    assert_eq!(status["state"], "completed");
    assert_eq!(status["checkpoints"], 3);
    assert_eq!(status["last_checkpoint"]["step"], 300);
    assert_eq!(status["output_hash"], hex::encode([0xab; 32]));

    let listed = ok_json(chain.mcjs(
        &user_path,
        &["--output", "json", "job", "list", "--owner", "me"],
    ));
    assert!(
        listed["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|j| j["job"] == job_key.to_string()),
        "{listed}"
    );

    // The auditor rebuilds every step, with its signer, and the chain verifies.
    let audit = chain.mcjs(&user_path, &["audit", "job", &job_key.to_string()]);
    assert_eq!(audit.status.code(), Some(0), "{}", text(&audit));
    assert!(
        String::from_utf8_lossy(&audit.stdout).contains("VERIFIED"),
        "{}",
        text(&audit)
    );
    let audit = ok_json(chain.mcjs(
        &user_path,
        &["--output", "json", "audit", "job", &job_key.to_string()],
    ));
    let events: Vec<&str> = audit["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["event"].as_str().unwrap())
        .collect();
    assert_eq!(
        events,
        [
            "JobSubmitted",
            "JobAssigned",
            "JobStarted",
            "CheckpointAttested",
            "CheckpointAttested",
            "CheckpointAttested",
            "SegmentSettled",
            "JobCompleted"
        ]
    );
    assert_eq!(audit["steps"][0]["signers"][0], user.pubkey().to_string());
    assert_eq!(
        audit["steps"][1]["signers"][0],
        scheduler.pubkey().to_string()
    );
    // The attestations are signed by the node's operator key, not the
    // provider's wallet.
    assert_eq!(
        audit["steps"][3]["signers"][0],
        operator.pubkey().to_string()
    );
    assert_ne!(operator.pubkey(), provider.pubkey());
    assert_eq!(audit["attestations"], 3);
    assert_eq!(audit["recomputed_chain"], status["checkpoint_chain"]);
    assert!(audit["divergence"].is_null());

    let record = ok_json(chain.mcjs(
        &user_path,
        &[
            "--output",
            "json",
            "audit",
            "provider",
            &provider.pubkey().to_string(),
        ],
    ));
    assert_eq!(record["jobs_completed"], 1);
    assert_eq!(record["completion_rate"], 1.0);
    let reliability = &record["reliability"];
    assert_eq!(reliability["assignments"], 1);
    assert_eq!(reliability["completed"], 1);
    assert_eq!(reliability["completed_share"], 1.0);
    assert_eq!(reliability["provider_failures"], 0);
    assert_eq!(reliability["nodes"][0]["completed"], 1);

    // The admin (the program's upgrade authority) publishes the program's
    // IDL where Anchor's tools read it; nobody else can, and a second run
    // sends nothing.
    let refused = chain.mcjs(&user_path, &["admin", "publish-idl"]);
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        err.contains("is not the program's upgrade authority") || err.contains("is not the admin"),
        "{err}"
    );
    assert_eq!(chain.block_on(client.published_idl()).unwrap(), None);
    let file = std::fs::read(examples_root().join("idl/mcjs.json")).unwrap();
    let (_, compressed) = mcjs_client::rpc::compress_idl(&file).unwrap();
    let admin_path = chain.info.wallets.admin.clone();
    let admin = read_keypair(&admin_path).unwrap();
    let published = ok_json(chain.mcjs(&admin_path, &["--output", "json", "admin", "publish-idl"]));
    assert_eq!(published["action"], "published", "{published}");
    assert_eq!(published["idl_account"], ix::idl_address().to_string());
    assert_eq!(published["compressed_bytes"], compressed.len());
    assert_eq!(
        published["writes"],
        compressed
            .len()
            .div_ceil(mcjs_client::rpc::idl_chunk_len(&admin.pubkey()))
    );
    let (authority, on_chain) = chain.block_on(client.published_idl()).unwrap().unwrap();
    assert_eq!((authority, &on_chain), (admin.pubkey(), &compressed));
    let read: Value =
        serde_json::from_slice(&mcjs_client::rpc::decompress_idl(&on_chain).unwrap()).unwrap();
    assert_eq!(
        read,
        serde_json::from_slice::<Value>(&file).unwrap(),
        "the IDL, whole"
    );
    let again = ok_json(chain.mcjs(&admin_path, &["--output", "json", "admin", "publish-idl"]));
    assert_eq!(
        (again["action"].as_str(), again["writes"].as_u64()),
        (Some("already published"), Some(0))
    );

    // An auditor with the ecosystem's tools (solana-py and the published
    // IDL, no MCJS code) reads the same job, node and provider.
    if let Some(python) = auditor_python() {
        // The same job read with the IDL the program published on chain.
        let from_chain = python_audit(
            &python,
            chain,
            &["--idl", "chain", "job", &job_key.to_string()],
        );
        assert_eq!(from_chain["state"], "Completed", "{from_chain}");
        assert_eq!(from_chain["checkpoints"].as_array().unwrap().len(), 3);

        let provider_account = pda::provider(&provider.pubkey());
        let seen = python_audit(&python, chain, &["job", &job_key.to_string()]);
        assert_eq!(seen["state"], "Completed", "{seen}");
        assert_eq!(seen["owner"], user.pubkey().to_string());
        assert_eq!(seen["checkpoint_count"], 3);
        assert_eq!(seen["last_checkpoint"]["step"], 300);
        assert_eq!(seen["checkpoint_chain"], status["checkpoint_chain"]);
        assert_eq!(seen["output_hash"], hex::encode([0xab; 32]));
        let steps: Vec<u64> = seen["checkpoints"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["step"].as_u64().unwrap())
            .collect();
        assert_eq!(steps, [100, 200, 300], "{seen}");
        assert_eq!(seen["checkpoints"][0]["by"], operator.pubkey().to_string());
        // Every event `mcjs audit` rebuilt, in its order, among those the
        // job's transactions logged.
        let logged: Vec<&str> = seen["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e.as_str().unwrap())
            .collect();
        let mut rest = logged.iter();
        assert!(
            events.iter().all(|e| rest.any(|l| l == e)),
            "{events:?} in {logged:?}"
        );
        let settled = seen["payments"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["event"] == "SegmentSettled")
            .expect("the segment's settlement");
        assert_eq!(settled["provider"], provider_account.to_string());
        let account = chain.block_on(client.job(&job_key)).unwrap().unwrap();
        assert_eq!(seen["paid"], account.paid);
        assert_eq!(
            settled["provider_amount"].as_u64().unwrap() + settled["commission"].as_u64().unwrap(),
            account.paid
        );
        let listed = python_audit(&python, chain, &["provider", &provider_account.to_string()]);
        assert_eq!(listed["owner"], provider.pubkey().to_string(), "{listed}");
        assert_eq!(listed["jobs_completed"], 1);
        assert_eq!(listed["nodes"][0]["node"], node_key.to_string());
        assert_eq!(listed["nodes"][0]["gpu_model"], "a100-sxm4-80gb");
        assert!(
            listed["jobs"]
                .as_array()
                .unwrap()
                .iter()
                .any(|j| j["job"] == job_key.to_string() && j["state"] == "Completed"),
            "{listed}"
        );
        // Not an MCJS account: refused by name, nothing printed as if it were.
        let wrong = Command::new(&python)
            .arg(examples_root().join("examples/auditor/audit.py"))
            .args(["--url", &chain.info.rpc_url, "--output", "json", "job"])
            .arg(user.pubkey().to_string())
            .output()
            .unwrap();
        assert_ne!(wrong.status.code(), Some(0));
        assert!(wrong.stdout.is_empty());
    }

    // Rewriting the on-chain commitment is caught, and named.
    let account = chain.block_on(client.account(&job_key)).unwrap().unwrap();
    let mut data = account.data.clone();
    let job = mcjs_client::decode::job(&data).unwrap();
    let at = data
        .windows(32)
        .position(|w| w == job.checkpoint_chain)
        .expect("the chain is in the account data");
    data[at] ^= 0xff;
    chain
        .block_on(client.surfnet_set_account_data(&job_key, &data))
        .unwrap();
    let tampered = chain.mcjs(&user_path, &["audit", "job", &job_key.to_string()]);
    assert_eq!(tampered.status.code(), Some(1), "{}", text(&tampered));
    let out = String::from_utf8_lossy(&tampered.stdout);
    assert!(out.contains("NOT VERIFIED"), "{out}");
    assert!(out.contains("the Job account commits to chain"), "{out}");
    let tampered = ok_json_exit(
        chain.mcjs(
            &user_path,
            &["--output", "json", "audit", "job", &job_key.to_string()],
        ),
        1,
    );
    assert_eq!(tampered["divergence"]["kind"], "commitment");
}

/// The repository's root.
fn examples_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A Python with solana-py for the auditor example
/// (`examples/auditor/audit.py`): `MCJS_AUDITOR_PYTHON`, else `python3` if
/// it imports `solana`; `None` (the check skipped, said on stderr) unless
/// `MCJS_REQUIRE_AUDITOR` is set, as CI sets it.
fn auditor_python() -> Option<PathBuf> {
    let python = std::env::var_os("MCJS_AUDITOR_PYTHON")
        .map_or_else(|| PathBuf::from("python3"), PathBuf::from);
    let imports = Command::new(&python)
        .args(["-c", "import solana, solders"])
        .output()
        .is_ok_and(|o| o.status.success());
    if imports {
        return Some(python);
    }
    assert!(
        std::env::var_os("MCJS_REQUIRE_AUDITOR").is_none(),
        "{} cannot import solana-py: scripts/test.sh installs it (examples/auditor/requirements.txt)",
        python.display()
    );
    eprintln!(
        "skipped the Python auditor: no solana-py (pip install -r examples/auditor/requirements.txt)"
    );
    None
}

#[track_caller]
fn python_audit(python: &Path, chain: &Chain, args: &[&str]) -> Value {
    let out = Command::new(python)
        .arg(examples_root().join("examples/auditor/audit.py"))
        .args(["--url", &chain.info.rpc_url, "--output", "json"])
        .args(args)
        .output()
        .expect("the auditor runs");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out)))
}

#[track_caller]
fn ok_json_exit(out: Output, code: i32) -> Value {
    assert_eq!(out.status.code(), Some(code), "{}", text(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn refused_input_is_explained_and_leaves_the_chain_unchanged() {
    let chain = chain();
    let owner_path = chain.provider_wallet(2);
    let poor_path = chain.provider_wallet(3);
    let owner = read_keypair(&owner_path).unwrap();
    let poor = read_keypair(&poor_path).unwrap();
    let spec = examples().join("training-a100.json");
    let spec = spec.to_str().unwrap();

    // A pending job to misuse.
    let submitted = ok_json(chain.mcjs(
        &owner_path,
        &[
            "--output",
            "json",
            "job",
            "submit",
            "--chain-only",
            spec,
            "--bond",
            "10",
            "--job-id",
            "7",
        ],
    ));
    let job = submitted["job"].as_str().unwrap().to_string();
    let job_key: Pubkey = job.parse().unwrap();
    let before = snapshot(chain, &[owner.pubkey(), poor.pubkey()], &[job_key]);

    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nobody.json");
    let out = chain.mcjs(&missing, &["job", "submit", spec, "--bond", "10"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("no wallet at {}", missing.display())),
        "{err}"
    );
    assert!(err.contains("solana-keygen new"), "{err}");

    let malformed = dir.path().join("bad.json");
    std::fs::write(
        &malformed,
        r#"{"version": 1, "work": {"kind": "interactive"}}"#,
    )
    .unwrap();
    let out = chain.mcjs(
        &poor_path,
        &["job", "submit", malformed.to_str().unwrap(), "--bond", "10"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is not a valid job spec"), "{err}");
    assert!(err.contains("nothing was submitted"), "{err}");

    let out = chain.mcjs(&poor_path, &["job", "submit", spec, "--bond", "5000"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("insufficient funds"), "{err}");
    assert!(
        err.contains("holds 1000.00 USDC, 5000.00 USDC are needed"),
        "{err}"
    );

    let out = chain.mcjs(&poor_path, &["job", "submit", spec, "--bond", "1"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("at least 3.60 USDC"),
        "{}",
        text(&out)
    );

    // A spec that cannot be published locks nothing: no scheduler answers.
    let out = chain.mcjs(
        &poor_path,
        &[
            "job",
            "submit",
            spec,
            "--bond",
            "10",
            "--scheduler",
            "http://127.0.0.1:1",
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("nothing was submitted and no USDC moved"),
        "{err}"
    );

    let out = chain.mcjs(&poor_path, &["job", "status", "not-an-address"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is not a Solana address"),
        "{}",
        text(&out)
    );

    let nowhere = Pubkey::new_unique().to_string();
    let out = chain.mcjs(&poor_path, &["job", "status", &nowhere]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(&format!("no job at {nowhere}")),
        "{}",
        text(&out)
    );

    // An account that is not a job.
    let out = chain.mcjs(&poor_path, &["audit", "job", &chain.info.usdc_mint]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));

    // Someone else's job.
    let out = chain.mcjs(&poor_path, &["job", "cancel", &job]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("sign with the owner's keypair"),
        "{}",
        text(&out)
    );

    // The program's own refusal, by name.
    let out = chain.mcjs(&owner_path, &["job", "resume", &job]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("JobNotPaused: the job is not paused"), "{err}");

    let out = chain.mcjs(
        &owner_path,
        &["job", "submit", spec, "--bond", "10", "--job-id", "7"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("already has a job with id 7"),
        "{}",
        text(&out)
    );

    // No chain at the URL.
    let out = Command::new(env!("CARGO_BIN_EXE_mcjs"))
        .args([
            "-u",
            "http://127.0.0.1:1",
            "-k",
            owner_path.to_str().unwrap(),
            "job",
            "status",
            &job,
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("cannot reach the RPC node at http://127.0.0.1:1"),
        "{}",
        text(&out)
    );

    assert_eq!(
        snapshot(chain, &[owner.pubkey(), poor.pubkey()], &[job_key]),
        before
    );

    // A job on its way cannot be closed: nothing changes.
    let out = chain.mcjs(&owner_path, &["job", "close", &job]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("only a finished job"),
        "{}",
        text(&out)
    );
    assert_eq!(
        snapshot(chain, &[owner.pubkey(), poor.pubkey()], &[job_key]),
        before
    );

    // And the job is still the owner's to cancel: the whole bond comes back.
    let cancelled = ok_json(chain.mcjs(&owner_path, &["--output", "json", "job", "cancel", &job]));
    assert_eq!(cancelled["job"]["state"], "cancelled");
    let after = snapshot(chain, &[owner.pubkey()], &[]);
    assert_eq!(after.usdc[0], before.usdc[0] + 10_000_000);
    // Closed, the job's account is gone (its rent back to the owner).
    let closed = ok_json(chain.mcjs(&owner_path, &["--output", "json", "job", "close", &job]));
    assert_eq!(closed["action"], "closed");
    assert!(closed["job"].is_null(), "{closed}");
    assert!(
        chain
            .block_on(chain.client().job(&job_key))
            .unwrap()
            .is_none(),
        "the job account is closed"
    );
}

#[test]
fn the_config_file_supplies_url_and_wallet_and_flags_override_it() {
    let chain = chain();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yml");
    std::fs::write(
        &config,
        format!(
            "---\njson_rpc_url: \"{}\"\nkeypair_path: {}\ncommitment: confirmed\n",
            chain.info.rpc_url,
            chain.info.wallets.admin.display()
        ),
    )
    .unwrap();
    let run = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_mcjs"))
            .args(["--config", config.to_str().unwrap(), "--output", "json"])
            .args(extra)
            .output()
            .unwrap()
    };
    let shown = ok_json(run(&["admin", "show"]));
    let admin = read_keypair(&chain.info.wallets.admin).unwrap();
    assert_eq!(shown["admin"], admin.pubkey().to_string());
    assert_eq!(shown["usdc_mint"], chain.info.usdc_mint);
    assert_eq!(shown["usdc_decimals"], 6);

    let out = run(&["-u", "http://127.0.0.1:1", "admin", "show"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));

    let out = run(&[
        "admin",
        "init",
        "--usdc-mint",
        &chain.info.usdc_mint,
        "--treasury",
        &chain.info.treasury,
        "--scheduler",
        &admin.pubkey().to_string(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("already initialised"),
        "{}",
        text(&out)
    );
    let user = chain.info.wallets.user.to_str().unwrap().to_string();
    let out = run(&["-k", &user, "admin", "set", "--pause"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is not the admin"),
        "{}",
        text(&out)
    );

    // The admin changes a parameter through the config's wallet.
    let set = ok_json(run(&["admin", "set", "--commission-bps", "600"]));
    assert_eq!(set["commission_bps"], 600);
    let set = ok_json(run(&["admin", "set", "--commission-bps", "500"]));
    assert_eq!(set["commission_bps"], 500);

    // The scheduler lease: standbys named and shown; a stranger's call and
    // the Config's own scheduler as a standby refused.
    let scheduler = read_keypair(&chain.info.wallets.scheduler)
        .unwrap()
        .pubkey()
        .to_string();
    let standby = Keypair::new().pubkey().to_string();
    let set = ok_json(run(&[
        "admin",
        "set-schedulers",
        "--standby",
        &standby,
        "--lease-slots",
        "40",
    ]));
    assert_eq!(set["lease"]["holder"], scheduler);
    assert_eq!(set["lease"]["standbys"][0], standby);
    assert_eq!(set["lease"]["lease_slots"], 40);
    let out = run(&["-k", &user, "admin", "set-schedulers"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is not the admin"),
        "{}",
        text(&out)
    );
    let out = run(&["admin", "set-schedulers", "--standby", &scheduler]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("a member already"),
        "{}",
        text(&out)
    );
    let set = ok_json(run(&["admin", "set-schedulers"]));
    assert_eq!(set["lease"]["standbys"], serde_json::json!([]));
    assert_eq!(set["lease"]["lease_slots"], 25);
}

#[test]
#[cfg_attr(
    not(feature = "localnet"),
    ignore = "needs `mcjs` built with --features localnet"
)]
fn mcjs_localnet_serves_an_initialised_chain_until_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port_pair();
    let mut child = Command::new(env!("CARGO_BIN_EXE_mcjs"))
        .args([
            "localnet",
            "--rpc-port",
            &port.to_string(),
            "--slot-time-ms",
            "20",
            "--dir",
        ])
        .arg(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut banner = String::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !banner.contains("Ctrl-C") {
        let mut line = String::new();
        if stdout.read_line(&mut line).unwrap() == 0 {
            let _ = child.kill();
            panic!("mcjs localnet ended early: {banner}");
        }
        banner.push_str(&line);
        assert!(Instant::now() < deadline, "{banner}");
    }
    let url = format!("http://127.0.0.1:{port}");
    assert!(banner.contains(&format!("RPC URL      {url}")), "{banner}");
    let info = LocalnetInfo::load(dir.path()).unwrap();
    assert_eq!(info.rpc_url, url);
    for wallet in [
        &info.wallets.admin,
        &info.wallets.scheduler,
        &info.wallets.user,
    ]
    .into_iter()
    .chain(&info.wallets.providers)
    {
        let bytes: Vec<u8> =
            serde_json::from_str(&std::fs::read_to_string(wallet).unwrap()).unwrap();
        assert_eq!(bytes.len(), 64, "{}", wallet.display());
    }
    let out = Command::new(env!("CARGO_BIN_EXE_mcjs"))
        .args(["-u", &url, "--output", "json", "admin", "show"])
        .output()
        .unwrap();
    let shown = ok_json(out);
    assert_eq!(shown["usdc_mint"], info.usdc_mint);
    // SIGINT, as Ctrl-C sends.
    unsafe {
        libc_kill(child.id() as i32, 2);
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("mcjs localnet did not stop on Ctrl-C");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(0));
}

unsafe extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}

/// A new wallet with SOL and `usdc` base units, written as a keypair file.
fn fresh_wallet(
    chain: &Chain,
    dir: &Path,
    name: &str,
    usdc: u64,
) -> (mcjs_client::Keypair, PathBuf) {
    use anchor_lang::solana_program::system_instruction;
    use anchor_spl::token::spl_token;
    let admin = read_keypair(&chain.info.wallets.admin).unwrap();
    let wallet = mcjs_client::Keypair::new();
    let mint = chain.info.usdc_mint();
    let mut ixs = vec![
        system_instruction::transfer(&admin.pubkey(), &wallet.pubkey(), 10_000_000_000),
        ix::create_usdc_account(&admin.pubkey(), &wallet.pubkey(), &mint),
    ];
    if usdc > 0 {
        ixs.push(
            spl_token::instruction::mint_to(
                &spl_token::ID,
                &mint,
                &ix::usdc_account(&wallet.pubkey(), &mint),
                &admin.pubkey(),
                &[],
                usdc,
            )
            .unwrap(),
        );
    }
    chain
        .block_on(chain.client().send(&ixs, &[&admin]))
        .unwrap();
    let path = dir.join(format!("{name}.json"));
    mcjs_localnet::write_keypair(&path, &wallet).unwrap();
    (wallet, path)
}

/// A provider registered with a 150 USDC stake and one 4×A100 node whose
/// operator key is returned, at 1.5 USDC per GPU-hour.
fn provider_with_node(chain: &Chain, provider_path: &Path) -> (Keypair, Pubkey) {
    ok_json(chain.mcjs(
        provider_path,
        &["--output", "json", "provider", "register", "--stake", "150"],
    ));
    let operator_path = provider_path.with_file_name("node-operator.json");
    let operator = Keypair::new();
    write_keypair(&operator_path, &operator).unwrap();
    let node = ok_json(chain.mcjs(
        provider_path,
        &[
            "--output",
            "json",
            "node",
            "register",
            "--profile",
            fixture("node-a100x4.json").to_str().unwrap(),
            "--operator",
            operator_path.to_str().unwrap(),
            "--price",
            "1.5",
        ],
    ));
    let node_key: Pubkey = node["nodes"][0]["node"].as_str().unwrap().parse().unwrap();
    (operator, node_key)
}

/// A verified job's pay is held per assignment in a Segment: `job pause`
/// names the assignment's (the program refuses a pause without it,
/// `SegmentRequired`), and the pause holds the pay there for the challenge
/// window instead of paying the provider.
#[test]
fn an_owner_pauses_a_verified_job_and_its_pay_is_held_in_the_assignments_segment() {
    use mcjs::state::SegmentState;
    let chain = chain();
    let client = chain.client();
    let dir = tempfile::tempdir().unwrap();
    let (provider, provider_path) = fresh_wallet(chain, dir.path(), "provider", 300_000_000);
    let (_, owner_path) = fresh_wallet(chain, dir.path(), "owner", 100_000_000);
    let scheduler = read_keypair(&chain.info.wallets.scheduler).unwrap();
    let (operator, node_key) = provider_with_node(chain, &provider_path);
    let mut spec: Value = serde_json::from_str(
        &std::fs::read_to_string(examples().join("training-a100.json")).unwrap(),
    )
    .unwrap();
    spec["verification"] = serde_json::json!({ "sample_rate": 0.1 });
    spec["work"]["determinism"] = "bitwise".into();
    spec["checkpoint"]["every_steps"] = 100.into();
    let spec_path = dir.path().join("verified.json");
    std::fs::write(&spec_path, spec.to_string()).unwrap();
    let submitted = ok_json(chain.mcjs(
        &owner_path,
        &[
            "--output",
            "json",
            "job",
            "submit",
            "--chain-only",
            spec_path.to_str().unwrap(),
            "--bond",
            "20",
        ],
    ));
    let job: Pubkey = submitted["job"].as_str().unwrap().parse().unwrap();
    let provider_account = pda::provider(&provider.pubkey());
    let generation = chain.block_on(async {
        let queued = client.job(&job).await.unwrap().unwrap();
        assert!(queued.verification_ppm > 0);
        let assign = ix::assign_job(
            &scheduler.pubkey(),
            &job,
            &node_key,
            &provider_account,
            Some(queued.generation),
        );
        client.send(&[assign], &[&scheduler]).await.expect("assign");
        let assigned = client.job(&job).await.unwrap().unwrap();
        assert!(assigned.holds_payment, "the assignment holds its pay");
        client
            .send(
                &[ix::start_job(
                    &operator.pubkey(),
                    &job,
                    &node_key,
                    &provider_account,
                    assigned.generation,
                )],
                &[&operator],
            )
            .await
            .expect("start");
        assigned.generation
    });
    let paused = ok_json(chain.mcjs(
        &owner_path,
        &["--output", "json", "job", "pause", &job.to_string()],
    ));
    assert_eq!(paused["job"]["state"], "paused");
    let segments = chain.block_on(client.segments()).unwrap();
    let (_, segment) = segments
        .iter()
        .find(|(key, _)| *key == pda::segment(&job, generation))
        .expect("the assignment's segment");
    assert!(
        matches!(segment.state, SegmentState::Held { .. }),
        "{:?}",
        segment.state
    );
}

/// `examples/specs/training-a100.json` submitted on chain only, with a
/// 20 USDC bond: the job's address, as text and as a key.
fn submit_training_job(chain: &Chain, owner_path: &Path) -> (String, Pubkey) {
    let submitted = ok_json(chain.mcjs(
        owner_path,
        &[
            "--output",
            "json",
            "job",
            "submit",
            "--chain-only",
            examples().join("training-a100.json").to_str().unwrap(),
            "--bond",
            "20",
        ],
    ));
    let job = submitted["job"].as_str().unwrap().to_string();
    let job_key = job.parse().unwrap();
    (job, job_key)
}

/// What the scheduler and the node's agent do to start a queued job: the
/// scheduler assigns it to `node`, the node's operator starts it. Returns
/// the assignment's generation.
fn assign_and_start(
    chain: &Chain,
    job: &Pubkey,
    node: &Pubkey,
    provider: &Pubkey,
    operator: &Keypair,
) -> u32 {
    let client = chain.client();
    let scheduler = read_keypair(&chain.info.wallets.scheduler).unwrap();
    chain.block_on(async {
        client
            .send(
                &[ix::assign_job(
                    &scheduler.pubkey(),
                    job,
                    node,
                    provider,
                    None,
                )],
                &[&scheduler],
            )
            .await
            .expect("assign");
        let generation = client.job(job).await.unwrap().unwrap().generation;
        client
            .send(
                &[ix::start_job(
                    &operator.pubkey(),
                    job,
                    node,
                    provider,
                    generation,
                )],
                &[operator],
            )
            .await
            .expect("start");
        generation
    })
}

/// A node that says the job cannot succeed anywhere (exit 2) is one
/// provider's word: the job runs again, one restart used, and
/// `mcjs job status` tells the owner what was said and what happens next.
/// When another provider's node says it too, the job fails.
#[test]
fn a_job_one_node_calls_fatal_is_shown_so_and_fails_on_a_second_providers_word() {
    let chain = chain();
    let client = chain.client();
    let dir = tempfile::tempdir().unwrap();
    let first_dir = dir.path().join("first");
    let second_dir = dir.path().join("second");
    std::fs::create_dir_all(&first_dir).unwrap();
    std::fs::create_dir_all(&second_dir).unwrap();
    let (first, first_path) = fresh_wallet(chain, &first_dir, "provider", 300_000_000);
    let (second, second_path) = fresh_wallet(chain, &second_dir, "provider", 300_000_000);
    let (owner, owner_path) = fresh_wallet(chain, dir.path(), "owner", 100_000_000);
    let scheduler = read_keypair(&chain.info.wallets.scheduler).unwrap();
    let mint = chain.info.usdc_mint();
    let deployment = chain.block_on(client.deployment()).unwrap();
    let nodes = [
        (&first, provider_with_node(chain, &first_path)),
        (&second, provider_with_node(chain, &second_path)),
    ];
    let (job, job_key) = submit_training_job(chain, &owner_path);
    let owner_token = ix::usdc_account(&owner.pubkey(), &mint);
    let call_fatal = |provider: &Keypair, (operator, node): &(Keypair, Pubkey)| {
        let provider_account = pda::provider(&provider.pubkey());
        let generation = assign_and_start(chain, &job_key, node, &provider_account, operator);
        chain.block_on(async {
            client
                .send(
                    &[ix::JobAccounts {
                        job: job_key,
                        node: *node,
                        provider: provider_account,
                        payout: ix::usdc_account(&provider.pubkey(), &mint),
                        refund: owner_token,
                        generation,
                        segment: None,
                        deployment,
                    }
                    .report_failure(&scheduler.pubkey(), mcjs::state::FailureCause::JobFatal)],
                    &[&scheduler],
                )
                .await
                .expect("the scheduler reports the node's exit 2");
        });
    };

    call_fatal(nodes[0].0, &nodes[0].1);
    let status = ok_json(chain.mcjs(&owner_path, &["--output", "json", "job", "status", &job]));
    assert_eq!(status["state"], "recovering", "{status}");
    assert_eq!(status["restarts_used"], 1, "{status}");
    assert_eq!(
        status["fatal_claim"],
        pda::provider(&first.pubkey()).to_string(),
        "{status}"
    );
    let out = chain.mcjs(&owner_path, &["job", "status", &job]);
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("said the job cannot succeed anywhere")
            && said.contains("fails if another provider's node says so too"),
        "{said}"
    );

    call_fatal(nodes[1].0, &nodes[1].1);
    let status = ok_json(chain.mcjs(&owner_path, &["--output", "json", "job", "status", &job]));
    assert_eq!(status["state"], "failed", "{status}");
    assert_eq!(status["restarts_used"], 1, "{status}");
    assert_eq!(status["fatal_claim"], Value::Null, "{status}");
}

#[test]
fn an_owner_pauses_tops_up_and_resumes_and_anyone_reports_a_stalled_job() {
    let chain = chain();
    let client = chain.client();
    let dir = tempfile::tempdir().unwrap();
    let (provider, provider_path) = fresh_wallet(chain, dir.path(), "provider", 300_000_000);
    let (owner, owner_path) = fresh_wallet(chain, dir.path(), "owner", 100_000_000);
    let (stranger, stranger_path) = fresh_wallet(chain, dir.path(), "stranger", 0);
    let mint = chain.info.usdc_mint();
    let (operator, node_key) = provider_with_node(chain, &provider_path);
    let (job, job_key) = submit_training_job(chain, &owner_path);
    let provider_account = pda::provider(&provider.pubkey());

    let assign_and_start = || {
        assign_and_start(chain, &job_key, &node_key, &provider_account, &operator);
    };
    assign_and_start();

    let paused = ok_json(chain.mcjs(&owner_path, &["--output", "json", "job", "pause", &job]));
    assert_eq!(paused["job"]["state"], "paused");
    assert_eq!(paused["job"]["pause_reason"], "owner");
    let topped = ok_json(chain.mcjs(
        &owner_path,
        &["--output", "json", "job", "top-up", &job, "--amount", "5"],
    ));
    assert_eq!(topped["job"]["bond"], "25.00");
    let resumed = ok_json(chain.mcjs(&owner_path, &["--output", "json", "job", "resume", &job]));
    assert_eq!(resumed["job"]["state"], "recovering");
    assign_and_start();

    // Too early for anyone but the scheduler: the program says so by name.
    let out = chain.mcjs(&stranger_path, &["job", "report-failure", &job]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("JobNotStalled"),
        "{}",
        text(&out)
    );

    // Three 30-minute intervals later without an attestation, anyone may.
    let now = chain.block_on(client.chain_time()).unwrap();
    chain
        .block_on(client.surfnet_time_travel_to(((now + 3 * 1800 + 60) * 1000) as u64))
        .unwrap();
    let owner_token = ix::usdc_account(&owner.pubkey(), &mint);
    let owner_before = chain.block_on(client.token_balance(&owner_token)).unwrap();
    let stranger_token = ix::usdc_account(&stranger.pubkey(), &mint);
    let stranger_before = chain
        .block_on(client.token_balance(&stranger_token))
        .unwrap_or(0);
    let pool_before = chain
        .block_on(client.token_balance(&pda::insurance_pool()))
        .unwrap();
    let reported = ok_json(chain.mcjs(
        &stranger_path,
        &["--output", "json", "job", "report-failure", &job],
    ));
    assert_eq!(reported["job"]["state"], "recovering");
    assert_eq!(
        reported["job"]["restarts_used"], 0,
        "a provider's failure uses none of the owner's restart budget"
    );
    let owner_after = chain.block_on(client.token_balance(&owner_token)).unwrap();
    assert_eq!(
        owner_after, owner_before,
        "nobody profits from a provider's failure: not the owner"
    );
    assert_eq!(
        chain
            .block_on(client.token_balance(&stranger_token))
            .unwrap_or(0),
        stranger_before,
        "nor the reporter"
    );
    assert_eq!(
        chain
            .block_on(client.token_balance(&pda::insurance_pool()))
            .unwrap()
            - pool_before,
        5_000_000,
        "the slash goes to the insurance pool"
    );

    let record = ok_json(chain.mcjs(
        &owner_path,
        &[
            "--output",
            "json",
            "audit",
            "provider",
            &provider.pubkey().to_string(),
        ],
    ));
    assert_eq!(record["failures"], 1);
    assert_eq!(record["slashed_total"], 5_000_000);
    assert_eq!(record["failure_reports"][0]["cause"], "node lost");
    assert_eq!(record["completion_rate"], 0.0);
    let reliability = &record["reliability"];
    assert_eq!(reliability["provider_failures"], 1);
    assert_eq!(reliability["failures_by_cause"]["node_lost"], 1);
    assert_eq!(reliability["completed_share"], 0.0);
    let nodes = ok_json(chain.mcjs(&provider_path, &["--output", "json", "node", "status"]));
    assert_eq!(
        nodes["nodes"][0]["status"], "offline",
        "a lost node goes offline"
    );
    assert_eq!(nodes["nodes"][0]["reliability"]["provider_failures"], 1);
    assert_eq!(
        nodes["nodes"][0]["failures"], 1,
        "the program's own count on the Node agrees with the history"
    );
    assert!(nodes["nodes"][0]["service_secs"].as_u64().is_some());
    assert_eq!(nodes["nodes"][0]["reliability"]["completed_share"], 0.0);

    let audit = chain.mcjs(&owner_path, &["--output", "json", "audit", "job", &job]);
    let audit = ok_json(audit);
    assert_eq!(audit["attestations"], 0);
    assert_eq!(
        audit["steps"].as_array().unwrap().last().unwrap()["event"],
        "FailureReported"
    );

    // The provider takes part of its stake out, after the cooldown.
    ok_json(chain.mcjs(
        &provider_path,
        &["--output", "json", "provider", "add-stake", "10"],
    ));
    let requested = ok_json(chain.mcjs(
        &provider_path,
        &["--output", "json", "provider", "withdraw", "--amount", "50"],
    ));
    assert!(
        requested["pending_withdrawal"]
            .as_str()
            .unwrap()
            .starts_with("50.00 USDC"),
        "{requested}"
    );
    let early = chain.mcjs(&provider_path, &["provider", "withdraw"]);
    assert_eq!(early.status.code(), Some(2), "{}", text(&early));
    assert!(
        String::from_utf8_lossy(&early.stderr).contains("is available from"),
        "{}",
        text(&early)
    );
    let now = chain.block_on(client.chain_time()).unwrap();
    chain
        .block_on(client.surfnet_time_travel_to(((now + 1000) * 1000) as u64))
        .unwrap();
    let withdrawn = ok_json(chain.mcjs(
        &provider_path,
        &["--output", "json", "provider", "withdraw"],
    ));
    assert_eq!(withdrawn["stake"], "105.00", "150 + 10 - 5 slashed - 50");
    assert!(withdrawn["pending_withdrawal"].is_null());
}

#[test]
fn a_provider_registers_a_node_from_a_live_probe_and_updates_its_price() {
    let chain = chain();
    let dir = tempfile::tempdir().unwrap();
    let (provider, provider_path) = fresh_wallet(chain, dir.path(), "k80-provider", 200_000_000);
    ok_json(chain.mcjs(
        &provider_path,
        &["--output", "json", "provider", "register", "--stake", "120"],
    ));
    let checkpoints = dir.path().join("checkpoints");
    std::fs::create_dir(&checkpoints).unwrap();
    let operator = Keypair::new().pubkey().to_string();
    let probe = |extra: &[&str]| {
        let mut args = vec![
            "--output",
            "json",
            "node",
            "register",
            "--probe",
            "--checkpoint-dir",
            checkpoints.to_str().unwrap(),
            "--sample-size",
            "8MiB",
            "--operator",
            &operator,
            "--price",
            "0.4",
        ];
        args.extend_from_slice(extra);
        Command::new(env!("CARGO_BIN_EXE_mcjs"))
            .args([
                "-u",
                &chain.info.rpc_url,
                "-k",
                provider_path.to_str().unwrap(),
            ])
            .args(&args)
            .env_remove("MCJS_NVML_LIB")
            .output()
            .unwrap()
    };

    // Without a GPU (no NVML here) there is nothing to register.
    let before = snapshot(
        chain,
        &[provider.pubkey()],
        &[pda::node(&pda::provider(&provider.pubkey()), 0)],
    );
    let out = probe(&["--nvml-lib", "/nonexistent/libnvidia-ml.so.1"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("shows no GPU"),
        "{}",
        text(&out)
    );
    assert_eq!(
        snapshot(
            chain,
            &[provider.pubkey()],
            &[pda::node(&pda::provider(&provider.pubkey()), 0)]
        ),
        before
    );

    let lib = fake_k80_nvml(dir.path());
    let node = ok_json(probe(&["--nvml-lib", lib.to_str().unwrap()]));
    let n = &node["nodes"][0];
    assert_eq!(n["gpu_model"], "k80");
    assert_eq!(n["gpu_count"], 2);
    assert_eq!(n["vram_per_gpu_mib"], 12288);
    assert_eq!(n["compute_capability"], 37);
    assert!(n["checkpoint_write_mibps"].as_u64().unwrap() > 0, "{n}");
    assert!(n["readiness"].as_u64().unwrap() <= 100);
    assert_eq!(n["price_per_gpu_hour"], "0.40");

    let updated = ok_json(chain.mcjs(
        &provider_path,
        &["--output", "json", "node", "update", "0", "--price", "0.5"],
    ));
    assert_eq!(updated["nodes"][0]["price_per_gpu_hour"], "0.50");
    assert_eq!(
        updated["nodes"][0]["gpu_model"], "k80",
        "the hardware is kept"
    );
    let listed = ok_json(chain.mcjs(
        &provider_path,
        &[
            "--output",
            "json",
            "node",
            "status",
            "--provider",
            &provider.pubkey().to_string(),
        ],
    ));
    assert_eq!(listed["nodes"].as_array().unwrap().len(), 1);
    assert_eq!(listed["nodes"][0]["node"], n["node"]);
}

/// From a script to a job without writing JSON: `mcjs spec init` writes a
/// commented starting spec that validates as written (and will not
/// overwrite one), `mcjs job run --dry-run` prints a spec that `mcjs spec
/// validate` accepts and the bond it would lock, and each bad input is
/// refused by name before anything is uploaded or locked: a data file that
/// is not there, a GPU model no node on the chain has, a bond below the
/// minimum.
#[test]
fn job_run_checks_everything_before_it_moves_anything_and_its_dry_run_spec_validates() {
    use sha2::Digest;
    let chain = chain();
    let dir = tempfile::tempdir().unwrap();
    let (_, provider_path) = fresh_wallet(chain, dir.path(), "run-provider", 1_000_000_000);
    std::fs::create_dir_all(dir.path().join("provider")).unwrap();
    let provider_path = {
        let moved = dir.path().join("provider").join("wallet.json");
        std::fs::rename(&provider_path, &moved).unwrap();
        moved
    };
    provider_with_node(chain, &provider_path);
    let (owner, owner_path) = fresh_wallet(chain, dir.path(), "run-owner", 100_000_000);
    let path = |p: &Path| p.to_str().unwrap().to_string();

    let spec = dir.path().join("job.json");
    let out = chain.mcjs(&owner_path, &["spec", "init", &path(&spec)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let written = std::fs::read_to_string(&spec).unwrap();
    assert!(written.contains("// 1. The work"), "{written}");
    let report = ok_json(chain.mcjs(
        &owner_path,
        &["--output", "json", "spec", "validate", &path(&spec)],
    ));
    assert_eq!(report["files"][0]["status"], "valid", "{report}");
    std::fs::write(&spec, "{}").unwrap();
    let out = chain.mcjs(&owner_path, &["spec", "init", &path(&spec)]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--force"));
    assert_eq!(std::fs::read_to_string(&spec).unwrap(), "{}");

    let data = dir.path().join("train.csv");
    std::fs::write(&data, "x,y\n1,0\n0,1\n").unwrap();
    let sha = hex::encode(sha2::Sha256::digest(std::fs::read(&data).unwrap()));
    let image = format!("mcjs-pytorch@sha256:{}", "ab".repeat(32));
    let run = |data: &Path, extra: &[&str]| {
        let mut args = vec![
            "job".to_string(),
            "run".into(),
            "--image".into(),
            image.clone(),
            "--data".into(),
            path(data),
            "--duration".into(),
            "2h".into(),
            "--gpus".into(),
            "2".into(),
            "--max-price".into(),
            "1.50".into(),
            "--scheduler".into(),
            "http://127.0.0.1:9".into(),
            "--artifact".into(),
            "model.pt".into(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        args.extend(["--", "python3", "/opt/mcjs/train.py", "--epochs", "3"].map(String::from));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        chain.mcjs(&owner_path, &args)
    };
    let before = snapshot(chain, &[owner.pubkey()], &[]);

    let out = run(&data, &["--dry-run"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let printed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(printed["work"]["image"], image.as_str());
    assert_eq!(printed["work"]["command"], serde_json::json!(["python3"]));
    assert_eq!(
        printed["work"]["args"],
        serde_json::json!(["/opt/mcjs/train.py", "--epochs", "3"])
    );
    assert_eq!(printed["data"][0]["name"], "train.csv");
    assert_eq!(printed["data"][0]["sha256"], sha.as_str());
    assert_eq!(
        printed["data"][0]["uri"],
        format!("file://{}", data.display())
    );
    assert_eq!(printed["request"]["hardware"]["gpu_count"], 2);
    let err = String::from_utf8_lossy(&out.stderr);
    // 2 GPUs at 1.50 USDC an hour for 2 h.
    assert!(err.contains("bond: 6.00 USDC"), "{err}");
    assert!(err.contains("nothing was uploaded or locked"), "{err}");
    let dry = dir.path().join("dry.json");
    std::fs::write(&dry, &out.stdout).unwrap();
    let report = ok_json(chain.mcjs(
        &owner_path,
        &["--output", "json", "spec", "validate", &path(&dry)],
    ));
    assert_eq!(report["files"][0]["status"], "valid", "{report}");

    let refusals: [(&Path, &[&str], &str); 3] = [
        (
            &dir.path().join("nowhere.csv"),
            &[],
            "nowhere.csv: cannot read it",
        ),
        (
            &data,
            &["--gpu-model", "mi300x"],
            "no node on this chain can run the job",
        ),
        (&data, &["--bond", "0.01"], "--bond 0.01 USDC is too small"),
    ];
    for (data, extra, says) in refusals {
        let out = run(data, extra);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {}", text(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{extra:?}: {err}");
        assert!(err.contains("nothing was uploaded or locked"), "{err}");
    }
    assert_eq!(snapshot(chain, &[owner.pubkey()], &[]), before);
}
