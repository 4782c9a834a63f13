//! The local chain and the chain client against it.

mod common;

use std::time::Duration;

use common::{job, state_of, until};
use futures_util::StreamExt;
use mcjs::instructions::RegisterNodeArgs;
use mcjs::state::{HardwareProfile, JobState};
use mcjs_client::history::McjsEvent;
use mcjs_client::rpc::ProgramIndex;
use mcjs_client::{ChainClient, JobFilter, Keypair, Signer, ix, pda};
use mcjs_localnet::{Localnet, LocalnetConfig, LocalnetInfo, USDC, free_port_pair, read_keypair};

async fn start(dir: &std::path::Path) -> Localnet {
    Localnet::start(LocalnetConfig {
        rpc_port: free_port_pair(),
        dir: dir.to_path_buf(),
        slot_time_ms: 20,
        ..LocalnetConfig::default()
    })
    .await
    .expect("the local chain starts")
}

#[tokio::test(flavor = "multi_thread")]
async fn start_initialises_the_program_funds_the_wallets_and_a_restart_keeps_the_addresses() {
    let dir = tempfile::tempdir().unwrap();
    let localnet = start(dir.path()).await;
    let info = LocalnetInfo::load(dir.path()).unwrap();
    assert_eq!(&info, localnet.info());
    let client = localnet.client();

    let (_, config) = client.config().await.unwrap();
    let admin = read_keypair(&info.wallets.admin).unwrap();
    let scheduler = read_keypair(&info.wallets.scheduler).unwrap();
    assert_eq!(config.admin, admin.pubkey());
    assert_eq!(config.scheduler, scheduler.pubkey());
    assert_eq!(config.usdc_mint, info.usdc_mint());
    assert_eq!(config.usdc_decimals, 6);
    assert_eq!(config.treasury, info.treasury());

    let mint = info.usdc_mint();
    let user = read_keypair(&info.wallets.user).unwrap();
    assert_eq!(
        client
            .token_balance(&ix::usdc_account(&user.pubkey(), &mint))
            .await
            .unwrap(),
        10_000 * USDC
    );
    assert_eq!(info.wallets.providers.len(), 3);
    for path in &info.wallets.providers {
        let provider = read_keypair(path).unwrap();
        assert_eq!(
            client
                .token_balance(&ix::usdc_account(&provider.pubkey(), &mint))
                .await
                .unwrap(),
            1_000 * USDC
        );
        assert!(client.sol_balance(&provider.pubkey()).await.unwrap() >= 100_000_000_000);
        assert!(
            client
                .provider(&pda::provider(&provider.pubkey()))
                .await
                .unwrap()
                .is_none(),
            "providers start unregistered"
        );
    }

    // The Config's creation is in the transaction logs, as on a cluster.
    let history = client.account_history(&pda::config()).await.unwrap();
    assert!(
        history.iter().any(
            |e| matches!(&e.event, McjsEvent::ConfigInitialized(c) if c.admin == admin.pubkey())
        ),
        "{history:?}"
    );
    localnet.stop();

    let again = start(dir.path()).await;
    assert_eq!(again.info().usdc_mint, info.usdc_mint);
    assert_eq!(again.info().treasury, info.treasury);
    assert_eq!(again.info().wallets, info.wallets);
    assert_ne!(again.info().rpc_url, info.rpc_url);
    assert_eq!(
        again.client().config().await.unwrap().1.admin,
        admin.pubkey()
    );
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

#[tokio::test(flavor = "multi_thread")]
async fn jobs_are_found_by_owner_state_and_node_and_watched_with_or_without_the_websocket() {
    let dir = tempfile::tempdir().unwrap();
    let localnet = start(dir.path()).await;
    let info = localnet.info().clone();
    let client = localnet.client();
    let mint = info.usdc_mint();
    let user = read_keypair(&info.wallets.user).unwrap();
    let scheduler = read_keypair(&info.wallets.scheduler).unwrap();
    let provider = read_keypair(&info.wallets.providers[0]).unwrap();
    let provider_token = ix::usdc_account(&provider.pubkey(), &mint);
    let user_token = ix::usdc_account(&user.pubkey(), &mint);

    client
        .send(
            &[
                ix::register_provider(
                    &provider.pubkey(),
                    &provider_token,
                    &provider_token,
                    &mint,
                    200 * USDC,
                ),
                ix::register_node(
                    &provider.pubkey(),
                    RegisterNodeArgs {
                        index: 0,
                        operator: Keypair::new().pubkey(),
                        hardware: hardware(),
                        readiness: 80,
                        price_per_gpu_hour: USDC,
                    },
                ),
            ],
            &[&provider],
        )
        .await
        .unwrap();
    let provider_account = pda::provider(&provider.pubkey());
    let node = pda::node(&provider_account, 0);
    let jobs: Vec<_> = [1, 2, 3].map(|id| pda::job(&user.pubkey(), id)).into();
    for id in [1, 2, 3] {
        client
            .send(
                &[ix::submit_job(&user.pubkey(), &user_token, &mint, job(id))],
                &[&user],
            )
            .await
            .unwrap();
    }

    // Watch job 2 over the websocket (polling so slow that only the websocket
    // can deliver in time), and again by polling (no websocket there).
    let websocket_only = localnet
        .client()
        .with_poll_interval(Duration::from_secs(3_600));
    // Each as a stream of the account's data, so that the three are one type.
    type Updates =
        futures_util::stream::BoxStream<'static, Result<Option<Vec<u8>>, mcjs_client::ChainError>>;
    fn data<S, A: 'static>(s: S, bytes: fn(A) -> Vec<u8>) -> Updates
    where
        S: futures_util::Stream<Item = Result<Option<A>, mcjs_client::ChainError>> + Send + 'static,
    {
        Box::pin(s.map(move |r| r.map(|a| a.map(bytes))))
    }
    let mut live = data(websocket_only.watch_account(jobs[1]), |a| a.data);
    let polling = ChainClient::with_ws(&info.rpc_url, "ws://127.0.0.1:1");
    let mut polled = data(polling.watch_account(jobs[1]), |a| a.data);
    // And followed through a websocket whose connections are all closed
    // before the change: it subscribes again, and the change arrives.
    let resets = Resetting::open(info.ws_url.trim_start_matches("ws://")).await;
    let followed_client = ChainClient::with_ws(&info.rpc_url, &resets.url())
        .with_poll_interval(Duration::from_secs(3_600));
    let mut followed = data(followed_client.follow_account(jobs[1]), |a| a.data);
    for stream in [&mut live, &mut polled, &mut followed] {
        let first = tokio::time::timeout(Duration::from_secs(10), stream.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap()
            .expect("the job exists");
        let first = mcjs_client::decode::job(&first).unwrap();
        assert!(matches!(first.state, JobState::Pending { .. }));
    }

    resets.reset();
    client
        .send(
            &[ix::assign_job(
                &scheduler.pubkey(),
                &jobs[1],
                &node,
                &provider_account,
                None,
            )],
            &[&scheduler],
        )
        .await
        .unwrap();

    for stream in [&mut live, &mut polled, &mut followed] {
        let assigned = tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                let account = stream.next().await.unwrap().unwrap().unwrap();
                let job = mcjs_client::decode::job(&account).unwrap();
                if matches!(job.state, JobState::Assigned { .. }) {
                    return job;
                }
            }
        })
        .await
        .expect("the assignment is seen");
        assert_eq!(assigned.node, Some(node));
    }

    let by_owner = client.jobs(JobFilter::Owner(user.pubkey())).await.unwrap();
    assert_eq!(
        by_owner.iter().map(|(k, _)| *k).collect::<Vec<_>>(),
        jobs,
        "in submission order"
    );
    let pending = client
        .jobs(JobFilter::State(JobState::Pending { since: 0 }))
        .await
        .unwrap();
    assert_eq!(
        pending.iter().map(|(k, _)| *k).collect::<Vec<_>>(),
        [jobs[0], jobs[2]]
    );
    let assigned = client
        .jobs(JobFilter::State(JobState::Assigned { since: 0 }))
        .await
        .unwrap();
    assert_eq!(assigned.len(), 1);
    assert_eq!(assigned[0].0, jobs[1]);
    let on_node = client.jobs(JobFilter::Node(node)).await.unwrap();
    assert_eq!(on_node.len(), 1);
    assert_eq!(on_node[0].0, jobs[1]);
    assert_eq!(client.jobs(JobFilter::All).await.unwrap().len(), 3);
    let nodes = client.nodes_of(&provider_account).await.unwrap();
    assert_eq!(nodes.len(), 1);
    assert_eq!(nodes[0].1.current_job, Some(jobs[1]));

    let history = client.job_history(&jobs[1]).await.unwrap();
    let names: Vec<_> = history.iter().map(|e| e.event.name()).collect();
    assert_eq!(names, ["JobSubmitted", "JobAssigned"]);
    assert_eq!(history[1].signers, vec![scheduler.pubkey()]);
    assert!(history[0].slot <= history[1].slot);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_index_follows_the_program_through_a_dropped_stream_and_its_closes() {
    let dir = tempfile::tempdir().unwrap();
    let localnet = start(dir.path()).await;
    let info = localnet.info().clone();
    let client = localnet.client();
    let mint = info.usdc_mint();
    let user = read_keypair(&info.wallets.user).unwrap();
    let user_token = ix::usdc_account(&user.pubkey(), &mint);
    let jobs: Vec<_> = [1, 2, 3].map(|id| pda::job(&user.pubkey(), id)).into();
    let submit = |id| ix::submit_job(&user.pubkey(), &user_token, &mint, job(id));
    client.send(&[submit(1)], &[&user]).await.unwrap();

    // One index whose websocket connections are all closed mid-way and
    // that never backfills on its own; one that backfills every second.
    let resets = Resetting::open(info.ws_url.trim_start_matches("ws://")).await;
    let followed = ProgramIndex::follow_every(
        ChainClient::with_ws(&info.rpc_url, &resets.url()),
        Duration::from_secs(3_600),
    );
    let reconciled = ProgramIndex::follow_every(client.clone(), Duration::from_secs(1));
    for index in [&followed, &reconciled] {
        until(index, "the backfill", |s| {
            s.config().is_some() && state_of(s, &jobs[0]).is_some()
        })
        .await;
    }
    assert_eq!(followed.read(|s| s.backfills), 1);

    // Seen from the stream, not a backfill.
    client.send(&[submit(2)], &[&user]).await.unwrap();
    until(&followed, "a job submitted after it started", |s| {
        state_of(s, &jobs[1]).is_some()
    })
    .await;
    // A change of an account it holds, from the stream too, after the
    // index read that account by address at a later slot than its
    // subscription's (a node may stamp every update with the latter).
    tokio::time::sleep(Duration::from_millis(200)).await;
    followed.refresh(&client, &[jobs[1]]).await.unwrap();
    client
        .send(
            &[ix::cancel_job(&user.pubkey(), &jobs[1], &user_token, &mint)],
            &[&user],
        )
        .await
        .unwrap();
    until(&followed, "a held job cancelled", |s| {
        state_of(s, &jobs[1]).is_some_and(|tag| tag != 0)
    })
    .await;
    assert_eq!(followed.read(|s| s.backfills), 1, "no backfill was needed");
    assert!(followed.read(|s| s.updates) >= 2);

    // The stream drops; what changes while it is down is found on the
    // resync, and the index is not live before it has resynced.
    resets.reset();
    client.send(&[submit(3)], &[&user]).await.unwrap();
    client
        .send(
            &[ix::cancel_job(&user.pubkey(), &jobs[0], &user_token, &mint)],
            &[&user],
        )
        .await
        .unwrap();
    until(&followed, "what changed while its stream was down", |s| {
        state_of(s, &jobs[2]).is_some() && state_of(s, &jobs[0]) != Some(0)
    })
    .await;
    assert!(followed.read(|s| s.backfills) >= 2, "it resynced");

    // A closed account leaves the program without a notification: the
    // index that backfills drops it at its next backfill, the other when
    // its owner reads back what it wrote.
    client
        .send(
            &[ix::close_job(&user.pubkey(), &jobs[0], &user_token, &mint)],
            &[&user],
        )
        .await
        .unwrap();
    until(&reconciled, "the closed job gone", |s| {
        state_of(s, &jobs[0]).is_none()
    })
    .await;
    assert!(
        followed.read(|s| state_of(s, &jobs[0]).is_some()),
        "no stream tells of a close"
    );
    followed.refresh(&client, &[jobs[0]]).await.unwrap();
    assert!(followed.read(|s| state_of(s, &jobs[0]).is_none()));

    // What a verification round reads besides the index: the sysvars, in
    // one call, as two reads by address give them.
    let (hashes, now) = client.draw_sysvars().await.unwrap();
    assert!(hashes.len() >= 48, "SlotHashes: {} bytes", hashes.len());
    // Entries (slot u64, hash) after a u64 count, newest first: the two
    // reads are a few slots apart at most.
    let newest = |h: &[u8]| u64::from_le_bytes(h[8..16].try_into().unwrap());
    let again = client.slot_hashes().await.unwrap();
    assert!(newest(&again) >= newest(&hashes) && newest(&again) - newest(&hashes) < 50);
    assert!((now - client.chain_time().await.unwrap()).abs() <= 2);

    // Both hold what a scan of the program finds, account for account.
    let scanned = client.jobs(JobFilter::All).await.unwrap();
    for index in [&followed, &reconciled] {
        let held = index.read(|s| s.jobs());
        assert_eq!(
            held.iter()
                .map(|(k, j)| (*k, j.state.clone()))
                .collect::<Vec<_>>(),
            scanned
                .iter()
                .map(|(k, j)| (*k, j.state.clone()))
                .collect::<Vec<_>>()
        );
        assert_eq!(
            index.read(|s| s.nodes().len()),
            client.nodes().await.unwrap().len()
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_refused_transaction_is_named_after_the_program_that_refused_it() {
    let dir = tempfile::tempdir().unwrap();
    let localnet = start(dir.path()).await;
    let info = localnet.info().clone();
    let client = localnet.client();
    let mint = info.usdc_mint();
    let provider = read_keypair(&info.wallets.providers[1]).unwrap();
    let token = ix::usdc_account(&provider.pubkey(), &mint);

    // More stake than the wallet holds: the token program refuses the transfer.
    let err = client
        .send(
            &[ix::register_provider(
                &provider.pubkey(),
                &token,
                &token,
                &mint,
                5_000 * USDC,
            )],
            &[&provider],
        )
        .await
        .unwrap_err();
    assert_eq!(err.program_error_name(), Some("InsufficientFunds"), "{err}");
    assert!(err.to_string().starts_with("spl-token refused"), "{err}");

    // A node without a provider account: Anchor's own check, named.
    let err = client
        .send(
            &[ix::register_node(
                &provider.pubkey(),
                RegisterNodeArgs {
                    index: 0,
                    operator: Keypair::new().pubkey(),
                    hardware: hardware(),
                    readiness: 80,
                    price_per_gpu_hour: USDC,
                },
            )],
            &[&provider],
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.program_error_name(),
        Some("AccountNotInitialized"),
        "{err}"
    );
    assert!(!err.logs().is_empty());

    // The program's own error.
    let user = read_keypair(&info.wallets.user).unwrap();
    let mut small = job(9);
    small.bond = 1;
    let err = client
        .send(
            &[ix::submit_job(
                &user.pubkey(),
                &ix::usdc_account(&user.pubkey(), &mint),
                &mint,
                small,
            )],
            &[&user],
        )
        .await
        .unwrap_err();
    assert_eq!(err.program_error_name(), Some("BondTooSmall"), "{err}");
    assert!(
        client
            .job(&pda::job(&user.pubkey(), 9))
            .await
            .unwrap()
            .is_none()
    );
}

/// The program the chain runs is the one `MCJS_PROGRAM_SO` names, deployed by
/// loader transactions with the admin as its upgrade authority and metered
/// as bytecode; nobody else can replace it. Without the variable, the native
/// build, with no programdata.
#[tokio::test(flavor = "multi_thread")]
async fn the_program_is_the_elf_deployed_by_loader_transactions_and_only_its_authority_upgrades_it()
{
    let dir = tempfile::tempdir().unwrap();
    let localnet = start(dir.path()).await;
    let info = localnet.info().clone();
    let client = localnet.client();
    let admin = read_keypair(&info.wallets.admin).unwrap();
    let Some(elf) = mcjs_svm::program_elf_from_env() else {
        assert_eq!(info.program.build, "native");
        assert_eq!(client.upgrade_authority(&mcjs::ID).await.unwrap(), None);
        return;
    };
    assert_eq!(info.program.build, "sbf");
    assert_eq!(info.program.elf_bytes, Some(elf.len()));
    let chunk = mcjs_client::rpc::chunk_len(&admin.pubkey(), &mcjs_client::Pubkey::new_unique());
    let transactions = info.program.deploy_transactions.unwrap();
    assert!(
        transactions >= elf.len().div_ceil(chunk) + 2,
        "at least one write a chunk, the buffer and the deployment: {transactions}"
    );
    let programdata = mcjs_client::Pubkey::find_program_address(
        &[mcjs::ID.as_ref()],
        &anchor_lang::solana_program::bpf_loader_upgradeable::ID,
    )
    .0;
    let stored = client.account(&programdata).await.unwrap().unwrap().data;
    assert_eq!(
        &stored[45..45 + elf.len()],
        elf,
        "the deployed bytes are the ELF's"
    );
    assert_eq!(
        client.upgrade_authority(&mcjs::ID).await.unwrap(),
        Some(Some(admin.pubkey()))
    );

    // A deployment returns only once the chain is past its slot: a program
    // deployed in one slot can be invoked only from a later one (Agave).
    let second = mcjs_client::Keypair::new();
    client
        .deploy_program(&admin, &second, &elf, &admin.pubkey(), &|_, _| {})
        .await
        .expect("a second copy deploys");
    let returned_at = client.rpc().get_slot().await.unwrap();
    let data = client
        .account(
            &mcjs_client::Pubkey::find_program_address(
                &[second.pubkey().as_ref()],
                &anchor_lang::solana_program::bpf_loader_upgradeable::ID,
            )
            .0,
        )
        .await
        .unwrap()
        .unwrap()
        .data;
    let deployed_in = u64::from_le_bytes(data[4..12].try_into().unwrap());
    assert!(
        returned_at > deployed_in,
        "deployed in slot {deployed_in}, returned at slot {returned_at}"
    );

    // Executed as metered bytecode, under the limit the client asked for.
    let sig = client
        .send(
            &[ix::update_config(
                &admin.pubkey(),
                None,
                mcjs::instructions::UpdateConfigArgs {
                    admin: None,
                    scheduler: None,
                    params: None,
                    paused: Some(false),
                },
            )],
            &[&admin],
        )
        .await
        .unwrap();
    let logs = client.transaction_logs(&sig).await.unwrap();
    let consumed = logs
        .iter()
        .find_map(|line| {
            let rest = line.strip_prefix(&format!("Program {} consumed ", mcjs::ID))?;
            let (used, rest) = rest.split_once(" of ")?;
            Some((
                used.parse::<u32>().ok()?,
                rest.split(' ').next()?.parse::<u32>().ok()?,
            ))
        })
        .unwrap_or_else(|| panic!("no compute line for the program: {logs:?}"));
    assert!(consumed.0 > 1_000, "bytecode is metered: {consumed:?}");
    assert!(consumed.1 < 200_000, "a limit was asked for: {consumed:?}");

    // A stranger's upgrade and a second deployment are refused; the code stays.
    let stranger = read_keypair(&info.wallets.providers[0]).unwrap();
    let err = client
        .upgrade_program(&stranger, &mcjs::ID, &elf[..elf.len() / 2], &|_, _| {})
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("refused") || err.to_string().contains("failed"),
        "{err}"
    );
    let err = client
        .deploy_program(
            &admin,
            &mcjs_localnet::program_keypair(),
            elf,
            &admin.pubkey(),
            &|_, _| {},
        )
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("already holds an account"),
        "{err}"
    );
    let stored = client.account(&programdata).await.unwrap().unwrap().data;
    assert_eq!(&stored[45..45 + elf.len()], elf);
    assert_eq!(
        client.upgrade_authority(&mcjs::ID).await.unwrap(),
        Some(Some(admin.pubkey()))
    );
}

/// A TCP proxy to a websocket whose connections can all be closed at once,
/// as an endpoint's load balancer restarting does.
struct Resetting {
    listen: std::net::SocketAddr,
    connections: std::sync::Arc<std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Resetting {
    async fn open(target: &str) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let listen = listener.local_addr().unwrap();
        let target = target.to_string();
        let connections = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let held = connections.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let target = target.clone();
                held.lock().unwrap().push(tokio::spawn(async move {
                    if let Ok(mut outbound) = tokio::net::TcpStream::connect(&target).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                }));
            }
        });
        Self {
            listen,
            connections,
            task,
        }
    }

    fn url(&self) -> String {
        format!("ws://{}", self.listen)
    }

    /// Closes every connection open now.
    fn reset(&self) {
        for c in self.connections.lock().unwrap().drain(..) {
            c.abort();
        }
    }
}

impl Drop for Resetting {
    fn drop(&mut self) {
        self.task.abort();
        self.reset();
    }
}

/// The index tells a scheduler of a job waiting for a node as the stream
/// brings it (so it is placed at once, not at the next tick), and of
/// nothing else: a cancelled job, or no change at all, wakes no one.
#[tokio::test(flavor = "multi_thread")]
async fn the_index_wakes_a_scheduler_for_a_job_waiting_for_a_node_and_for_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let localnet = start(dir.path()).await;
    let info = localnet.info().clone();
    let client = localnet.client();
    let mint = info.usdc_mint();
    let user = read_keypair(&info.wallets.user).unwrap();
    let user_token = ix::usdc_account(&user.pubkey(), &mint);
    let index = ProgramIndex::follow_every(client.clone(), Duration::from_secs(3_600));
    until(&index, "the backfill", |s| s.config().is_some()).await;
    let quiet = |index: &ProgramIndex| {
        let index = index.clone();
        async move {
            tokio::time::timeout(Duration::from_millis(1_500), index.job_to_place())
                .await
                .is_err()
        }
    };
    assert!(quiet(&index).await, "nothing waits for a node yet");

    let key = pda::job(&user.pubkey(), 1);
    client
        .send(
            &[ix::submit_job(&user.pubkey(), &user_token, &mint, job(1))],
            &[&user],
        )
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(10), index.job_to_place())
        .await
        .expect("a submitted job wakes the scheduler");
    let tag = |state: JobState| Some(mcjs_client::rpc::state_tag(&state));
    assert_eq!(
        index.read(|s| state_of(s, &key)),
        tag(JobState::Pending { since: 0 }),
        "woken by the job it now holds"
    );

    client
        .send(
            &[ix::cancel_job(&user.pubkey(), &key, &user_token, &mint)],
            &[&user],
        )
        .await
        .unwrap();
    until(&index, "the cancellation", |s| {
        state_of(s, &key) == tag(JobState::Cancelled { at: 0 })
    })
    .await;
    assert!(quiet(&index).await, "a cancelled job wakes no one");
}
