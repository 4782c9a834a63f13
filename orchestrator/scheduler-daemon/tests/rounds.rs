//! The daemon's rounds over an in-memory chain: what each round sends, in
//! which transactions, and what it does when the chain refuses them. No
//! process, no validator: the chain is a snapshot and a log of what was sent.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

mod common;
use common::*;

use anchor_lang::Discriminator;
use mcjs::state::*;
use mcjs_client::{ChainError, Instruction, Pubkey, ix, pda};
use mcjs_protocol::store::StoreUrl;
use mcjs_scheduler_daemon::auth::Directory;
use mcjs_scheduler_daemon::chain::{DaemonChain, Snapshot, VerifySnapshot, in_working_set};
use mcjs_scheduler_daemon::metrics::Metrics;
use mcjs_scheduler_daemon::shell::{Daemon, DaemonConfig, Memory, RoundReport};
use mcjs_scheduler_daemon::{Action, DetectorConfig, Liveness};

/// Which transactions the chain refuses.
#[derive(Clone, Copy)]
enum Refuse {
    Nothing,
    /// Any transaction of more than one instruction (an assignment the
    /// program refuses inside a report's transaction fails the whole of it).
    Pairs,
    Everything,
}

struct FakeChain {
    /// Every job on the chain, settled ones included.
    snapshot: Mutex<Snapshot>,
    /// The jobs the last snapshot returned.
    returned: Mutex<Vec<Pubkey>>,
    /// The keys each `jobs_at` was asked for.
    asked: Mutex<Vec<Vec<Pubkey>>>,
    refuse: Refuse,
    /// Every transaction sent, and whether it landed.
    sent: Mutex<Vec<(Vec<Instruction>, bool)>>,
    /// How long each transaction takes to confirm.
    confirm: Duration,
    /// Transactions awaiting confirmation now, and the most at once.
    in_flight: AtomicUsize,
    most_in_flight: AtomicUsize,
}

impl DaemonChain for FakeChain {
    fn scheduler(&self) -> Pubkey {
        key(250)
    }

    async fn deployment(&self) -> Result<ix::Deployment, ChainError> {
        Ok(deployment())
    }

    async fn snapshot(&self) -> Result<Snapshot, ChainError> {
        let mut snapshot = self.snapshot.lock().unwrap().clone();
        snapshot.jobs.retain(|(_, job)| in_working_set(job));
        *self.returned.lock().unwrap() = snapshot.jobs.iter().map(|(k, _)| *k).collect();
        Ok(snapshot)
    }

    async fn jobs_at(&self, keys: &[Pubkey]) -> Result<Vec<(Pubkey, Job)>, ChainError> {
        self.asked.lock().unwrap().push(keys.to_vec());
        let snapshot = self.snapshot.lock().unwrap();
        Ok(snapshot
            .jobs
            .iter()
            .filter(|(key, _)| keys.contains(key))
            .cloned()
            .collect())
    }

    async fn verify_snapshot(&self, _pools: &[Pubkey]) -> Result<VerifySnapshot, ChainError> {
        Ok(VerifySnapshot::default())
    }

    async fn send(&self, instructions: &[Instruction]) -> Result<(), ChainError> {
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.most_in_flight.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(self.confirm).await;
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        let refused = match self.refuse {
            Refuse::Nothing => false,
            Refuse::Pairs => instructions.len() > 1,
            Refuse::Everything => true,
        };
        self.sent
            .lock()
            .unwrap()
            .push((instructions.to_vec(), !refused));
        if refused {
            return Err(ChainError::Transaction {
                message: "custom program error: NodeNotAvailable".into(),
                logs: vec![],
            });
        }
        Ok(())
    }
}

fn deployment() -> ix::Deployment {
    ix::Deployment {
        usdc_mint: key(240),
        treasury: key(241),
    }
}

/// The program instruction `ix` calls, by its discriminator.
fn name(ix: &Instruction) -> &'static str {
    use mcjs::instruction as i;
    let table: [(&[u8], &str); 3] = [
        (i::AssignJob::DISCRIMINATOR, "assign_job"),
        (i::ReportFailure::DISCRIMINATOR, "report_failure"),
        (i::OpenVerification::DISCRIMINATOR, "open_verification"),
    ];
    table
        .iter()
        .find(|(d, _)| ix.data.starts_with(d))
        .map_or("other", |(_, n)| *n)
}

const JOB: u8 = 10;
const LOST: u8 = 20;
const SPARE: u8 = 21;
const LOST_PROVIDER: u8 = 30;
const SPARE_PROVIDER: u8 = 31;
/// When the round runs: the lost node has been silent past the heartbeat
/// timeout, the spare heard from just now.
const NOW: i64 = T0 * MS + 3_001;

/// A job running at generation 4 on a node that went silent, a spare node
/// that fits it, both providers staked.
fn lost_node(verified: bool) -> Snapshot {
    let (job, lost, spare) = (key(JOB), key(LOST), key(SPARE));
    let mut running = JobBuilder::pending()
        .running_on(lost, key(LOST_PROVIDER), 4, T0)
        .0;
    if verified {
        running.verification_ppm = 100_000;
        running.holds_payment = true;
    }
    let mut lost_node = busy(node(key(LOST_PROVIDER), 81_920), job);
    lost_node.index = 0;
    let mut spare_node = node(key(SPARE_PROVIDER), 81_920);
    spare_node.index = 0;
    Snapshot {
        jobs: vec![(job, running)],
        nodes: vec![(lost, lost_node), (spare, spare_node)],
        params: params(),
        providers: HashMap::from([
            (key(LOST_PROVIDER), provider(200_000_000)),
            (key(SPARE_PROVIDER), provider(200_000_000)),
        ]),
    }
}

fn daemon(snapshot: Snapshot, refuse: Refuse) -> Daemon<FakeChain> {
    let mut liveness = Liveness::new(T0 * MS);
    liveness
        .record(heartbeat(key(LOST), vec![]), T0 * MS)
        .unwrap();
    liveness
        .record(heartbeat(key(SPARE), vec![]), T0 * MS + 3_000)
        .unwrap();
    Daemon {
        chain: FakeChain {
            snapshot: Mutex::new(snapshot),
            returned: Mutex::default(),
            asked: Mutex::default(),
            refuse,
            sent: Mutex::default(),
            confirm: Duration::ZERO,
            in_flight: AtomicUsize::new(0),
            most_in_flight: AtomicUsize::new(0),
        },
        config: DaemonConfig {
            rpc_url: "http://127.0.0.1:1".into(),
            fees: Default::default(),
            listen: "127.0.0.1:0".parse().unwrap(),
            tick: Duration::from_millis(100),
            detector: DetectorConfig::default(),
            store: StoreUrl::Dir("/nonexistent".into()),
            sends_in_flight: mcjs_scheduler_daemon::shell::SENDS_IN_FLIGHT,
            index_stream: Default::default(),
            challenge: Default::default(),
        },
        liveness: Arc::new(Mutex::new(liveness)),
        directory: Arc::new(RwLock::new(Directory::from_chain(&[]))),
        metrics: Arc::new(Metrics::new()),
        clock: Arc::new(|| NOW),
        s3: None,
        duties: Default::default(),
        store_sight: Default::default(),
        leading: Default::default(),
        challenged: Default::default(),
        openings: Default::default(),
        standbys: Default::default(),
    }
}

async fn one_round(d: &Daemon<FakeChain>) -> (RoundReport, Vec<(Vec<&'static str>, bool)>) {
    let report = d
        .round(&deployment(), &mut Memory::default())
        .await
        .expect("the round reads the chain");
    let sent = d
        .chain
        .sent
        .lock()
        .unwrap()
        .iter()
        .map(|(ixs, landed)| (ixs.iter().map(name).collect(), *landed))
        .collect();
    (report, sent)
}

fn kinds(actions: &[Action]) -> Vec<&'static str> {
    actions
        .iter()
        .map(|a| match a {
            Action::Assign { .. } => "assign",
            Action::ReportFailure { .. } => "report",
        })
        .collect()
}

#[tokio::test]
async fn a_lost_nodes_job_is_reported_and_placed_in_one_transaction_or_reported_alone() {
    // (the chain refuses, transactions sent and whether each landed, done, refused, jobs left to place at once)
    type Row = (
        Refuse,
        Vec<(Vec<&'static str>, bool)>,
        Vec<&'static str>,
        Vec<&'static str>,
        usize,
    );
    let table: Vec<Row> = vec![
        (
            Refuse::Nothing,
            vec![(vec!["report_failure", "assign_job"], true)],
            vec!["report", "assign"],
            vec![],
            0,
        ),
        // The placement is refused with the report: the report is sent
        // alone, and the next round (at once) places the job.
        (
            Refuse::Pairs,
            vec![
                (vec!["report_failure", "assign_job"], false),
                (vec!["report_failure"], true),
            ],
            vec!["report"],
            vec!["assign"],
            1,
        ),
        (
            Refuse::Everything,
            vec![
                (vec!["report_failure", "assign_job"], false),
                (vec!["report_failure"], false),
            ],
            vec![],
            vec!["assign", "report"],
            0,
        ),
    ];
    for (refuse, sent, done, refused, to_place) in table {
        let d = daemon(lost_node(false), refuse);
        let (report, got) = one_round(&d).await;
        assert_eq!(got, sent, "transactions sent");
        assert_eq!(kinds(&report.done), done, "done");
        assert_eq!(kinds(&report.refused), refused, "refused");
        assert_eq!(report.to_place, to_place, "left to place");
        let placed_on = report.done.iter().find_map(|a| match a {
            Action::Assign { node, .. } => Some(*node),
            _ => None,
        });
        assert!(
            placed_on.is_none_or(|n| n == key(SPARE)),
            "the job goes to the spare node, never back to the lost one"
        );
    }
}

/// A verified job's report carries the Segment of the generation it fences
/// (4), and the assignment riding with it creates the Segment of the
/// generation after the report's (6: the report moves the job to 5, the
/// assignment to 6).
#[tokio::test]
async fn a_verified_jobs_report_and_placement_name_the_segments_of_their_generations() {
    let d = daemon(lost_node(true), Refuse::Nothing);
    let _ = one_round(&d).await;
    let sent = d.chain.sent.lock().unwrap().clone();
    assert_eq!(sent.len(), 1, "one transaction: report and placement");
    let (ixs, _) = &sent[0];
    let job = key(JOB);
    let has = |ix: &Instruction, account: Pubkey| ix.accounts.iter().any(|m| m.pubkey == account);
    assert_eq!(name(&ixs[0]), "report_failure");
    assert!(
        has(&ixs[0], pda::segment(&job, 4)),
        "the report carries generation 4's segment"
    );
    assert_eq!(name(&ixs[1]), "assign_job");
    assert!(
        has(&ixs[1], pda::segment(&job, 6)),
        "the placement creates generation 6's segment"
    );
    assert!(!has(&ixs[1], pda::segment(&job, 5)));
}

/// A report whose provider the round cannot read (closed between the core's
/// reads, or never a provider) is not sent at all: nothing goes to the chain
/// with a guessed payout account, and the round says why.
#[tokio::test]
async fn a_report_whose_accounts_are_not_on_chain_is_not_sent() {
    let mut snapshot = lost_node(false);
    snapshot.providers.remove(&key(LOST_PROVIDER));
    let d = daemon(snapshot, Refuse::Nothing);
    let (report, sent) = one_round(&d).await;
    assert!(
        sent.iter().all(|(ixs, _)| !ixs.contains(&"report_failure")),
        "{sent:?}"
    );
    assert!(kinds(&report.refused).contains(&"report"), "{report:?}");
    assert!(kinds(&report.done).iter().all(|k| *k != "report"));
}

/// A queued job placed on its own: one transaction, nothing to fall back
/// to, and a refusal leaves it queued for the next round.
#[tokio::test]
async fn a_placement_alone_is_one_transaction_and_a_refused_one_waits_for_the_next_round() {
    for (refuse, landed) in [(Refuse::Nothing, true), (Refuse::Everything, false)] {
        let mut snapshot = lost_node(false);
        snapshot.jobs = vec![(key(JOB), JobBuilder::pending().0)];
        snapshot.nodes[0].1.status = NodeStatus::Available;
        snapshot.nodes[0].1.current_job = None;
        let d = daemon(snapshot, refuse);
        let (report, sent) = one_round(&d).await;
        assert_eq!(sent, vec![(vec!["assign_job"], landed)]);
        assert_eq!(report.to_place, 0);
        let (done, refused) = if landed {
            (vec!["assign"], vec![])
        } else {
            (vec![], vec!["assign"])
        };
        assert_eq!(kinds(&report.done), done);
        assert_eq!(kinds(&report.refused), refused);
    }
}

/// An empty fleet fills at the chain's pace: a round's placements are in
/// flight together, not sent one confirmation after another, and each lands.
#[tokio::test]
async fn a_rounds_placements_are_in_flight_together() {
    const N: u8 = 40;
    let mut snapshot = lost_node(false);
    snapshot.jobs = (0..N)
        .map(|i| (key(100 + i), JobBuilder::pending().0))
        .collect();
    snapshot.nodes = (0..N)
        .map(|i| {
            let mut n = node(key(SPARE_PROVIDER), 81_920);
            n.index = u32::from(i);
            (key(150 + i), n)
        })
        .collect();
    let mut d = daemon(snapshot, Refuse::Nothing);
    d.chain.confirm = Duration::from_millis(50);
    {
        let mut live = d.liveness.lock().unwrap();
        for i in 0..N {
            live.record(heartbeat(key(150 + i), vec![]), NOW - 1)
                .unwrap();
        }
    }
    let (report, sent) = one_round(&d).await;
    assert_eq!(sent.len(), usize::from(N));
    assert!(
        sent.iter()
            .all(|(ixs, landed)| *ixs == vec!["assign_job"] && *landed)
    );
    assert_eq!(report.done.len(), usize::from(N));
    let most = d.chain.most_in_flight.load(Ordering::SeqCst);
    assert!(most > 1, "one transaction at a time");
    assert!(
        most <= mcjs_scheduler_daemon::shell::SENDS_IN_FLIGHT,
        "{most} in flight"
    );
}

/// One round over a chain holding `jobs`: the jobs its snapshot returned.
async fn round_over(
    d: &Daemon<FakeChain>,
    memory: &mut Memory,
    jobs: Vec<(Pubkey, Job)>,
) -> Vec<Pubkey> {
    d.chain.snapshot.lock().unwrap().jobs = jobs;
    d.round(&deployment(), memory).await.unwrap();
    let mut returned = d.chain.returned.lock().unwrap().clone();
    returned.sort();
    returned
}

/// A round reads only its working set: a job that settles leaves it, is
/// read once by address to be counted by how it ended, and is never read
/// again; one whose pay is still held stays until it is released; one
/// settled before the process started is never read nor counted.
#[tokio::test]
async fn a_settled_job_leaves_the_working_set_and_is_counted_once() {
    const ENDS: u8 = 40;
    const HELD: u8 = 41;
    const OLD: u8 = 42;
    let running = |generation| {
        JobBuilder::pending()
            .running_on(key(SPARE), key(SPARE_PROVIDER), generation, T0)
            .0
    };
    let completed = |mut job: Job, live_segments| {
        job.state = JobState::Completed { at: T0 };
        job.live_segments = live_segments;
        job
    };
    let mut verified = running(1);
    verified.verification_ppm = 100_000;
    verified.live_segments = 1;
    let mut snapshot = lost_node(false);
    snapshot.jobs = vec![
        (key(ENDS), running(1)),
        (key(HELD), verified.clone()),
        (key(OLD), completed(running(1), 0)),
    ];
    let d = daemon(snapshot, Refuse::Nothing);
    let mut memory = Memory::default();
    let mut both = vec![key(ENDS), key(HELD)];
    both.sort();
    let jobs = d.chain.snapshot.lock().unwrap().jobs.clone();
    let first = round_over(&d, &mut memory, jobs).await;
    assert_eq!(first, both, "the old settled job is not read");
    // ENDS completes and settles; HELD completes with its pay held.
    let second = round_over(
        &d,
        &mut memory,
        vec![
            (key(ENDS), completed(running(1), 0)),
            (key(HELD), completed(verified.clone(), 1)),
            (key(OLD), completed(running(1), 0)),
        ],
    )
    .await;
    assert_eq!(second, vec![key(HELD)]);
    assert_eq!(d.metrics.completed.get(), 2, "both counted as they ended");
    // HELD's segment is released: it settles too.
    let third = round_over(
        &d,
        &mut memory,
        vec![
            (key(ENDS), completed(running(1), 0)),
            (key(HELD), completed(verified, 0)),
            (key(OLD), completed(running(1), 0)),
        ],
    )
    .await;
    assert_eq!(third, Vec::<Pubkey>::new());
    assert_eq!(d.metrics.completed.get(), 2, "none counted twice");
    assert_eq!(
        *d.chain.asked.lock().unwrap(),
        vec![vec![key(ENDS)], vec![key(HELD)]],
        "each read once by address, as it left"
    );
}

/// The index keeps the unsettled jobs apart through every change it hears
/// of: what the round reads is exactly the jobs not settled.
#[test]
fn the_index_keeps_the_unsettled_jobs_apart_as_they_change() {
    use anchor_lang::AccountSerialize;
    use mcjs_client::rpc::IndexState;
    let data = |job: &Job| {
        let mut out = Vec::new();
        job.try_serialize(&mut out).unwrap();
        out
    };
    let unsettled = |index: &IndexState| {
        let mut keys: Vec<Pubkey> = index.unsettled_jobs().iter().map(|(k, _)| *k).collect();
        keys.sort();
        keys
    };
    let (a, b) = (key(50), key(51));
    let mut job = JobBuilder::pending().0;
    let mut index = IndexState::default();
    index.apply(a, 1, Some(&data(&job)));
    job.state = JobState::Completed { at: T0 };
    index.apply(b, 1, Some(&data(&job)));
    assert_eq!(unsettled(&index), vec![a]);
    // Ended with its pay held: still unsettled.
    job.live_segments = 1;
    index.apply(a, 2, Some(&data(&job)));
    assert_eq!(unsettled(&index), vec![a]);
    // An older update is refused and changes nothing.
    job.live_segments = 0;
    index.apply(a, 1, Some(&data(&job)));
    assert_eq!(unsettled(&index), vec![a]);
    // Released: settled.
    index.apply(a, 3, Some(&data(&job)));
    assert_eq!(unsettled(&index), Vec::<Pubkey>::new());
    // A settled job is still held for whoever reads every job.
    assert_eq!(index.jobs().len(), 2);
    // A backfill that lists b running again (a reorg, say) and not a.
    let mut running = JobBuilder::pending().0;
    running.state = JobState::Running { since: T0 };
    index.backfill(
        mcjs_client::decode::AccountKind::Job,
        4,
        &[(b, data(&running))],
    );
    assert_eq!(unsettled(&index), vec![b]);
    assert_eq!(index.jobs().len(), 1);
    // Closed: gone.
    index.apply(b, 5, None);
    assert_eq!(unsettled(&index), Vec::<Pubkey>::new());
}

/// A job on a live node whose last checkpoint was attested 203 s before the
/// round, at an interval of 60 s (allowed 120 s): late, unless the store did
/// not answer for most of that time.
fn late_on_a_live_node() -> Daemon<FakeChain> {
    let (job, spare) = (key(JOB), key(SPARE));
    let running = JobBuilder::pending()
        .running_on(spare, key(SPARE_PROVIDER), 4, T0 - 200)
        .0;
    let mut spare_node = busy(node(key(SPARE_PROVIDER), 81_920), job);
    spare_node.index = 0;
    daemon(
        Snapshot {
            jobs: vec![(job, running)],
            nodes: vec![(spare, spare_node)],
            params: params(),
            providers: HashMap::from([(key(SPARE_PROVIDER), provider(200_000_000))]),
        },
        Refuse::Nothing,
    )
}

#[tokio::test]
async fn no_job_is_judged_late_for_the_time_the_store_did_not_answer() {
    // What the store's probes saw, and what the round reports.
    let table: Vec<(&str, Vec<Option<i64>>, Vec<&'static str>)> = vec![
        (
            "the store always answered",
            vec![Some(T0 - 300)],
            vec!["report"],
        ),
        // Down since before the last attestation, still down now.
        ("down now", vec![Some(T0 - 300), None], vec![]),
        // Down for 150 s of the 203: 53 s late, inside the allowance.
        (
            "down 150 s, back",
            vec![Some(T0 - 190), None, Some(T0 - 40)],
            vec![],
        ),
        // Down for 60 s of the 203: 143 s late, past it.
        (
            "down 60 s, back",
            vec![Some(T0 - 190), None, Some(T0 - 130)],
            vec!["report"],
        ),
        // Never answered since the scheduler started: nothing is judged late.
        ("never answered", vec![None], vec![]),
    ];
    for (case, probes, expected) in table {
        let d = late_on_a_live_node();
        {
            let mut sight = d.store_sight.lock().unwrap();
            for probe in probes {
                match probe {
                    Some(secs) => {
                        sight.answered(secs * MS);
                    }
                    None => {
                        sight.failed();
                    }
                }
            }
        }
        let (report, _) = one_round(&d).await;
        assert_eq!(kinds(&report.done), expected, "{case}");
    }
}

#[tokio::test]
async fn a_restarted_scheduler_judges_lateness_only_from_its_start() {
    // (started, seconds before the round; reported)
    for (started_secs_ago, expected) in [(10, vec![]), (119, vec![]), (125, vec!["report"])] {
        let d = late_on_a_live_node();
        let mut memory = Memory::started_at(NOW - started_secs_ago * MS);
        let report = d
            .round(&deployment(), &mut memory)
            .await
            .expect("the round reads the chain");
        assert_eq!(
            kinds(&report.done),
            expected,
            "started {started_secs_ago} s before the round"
        );
    }
}

/// A scheduler that follows another's lead sends nothing, however dead a
/// node looks to it; when it takes the lease over, its first round judges
/// nobody silent for the time before it led (the lost node last heard
/// from at T0 has a full heartbeat timeout from the takeover), where a
/// scheduler that led all along reports it.
#[tokio::test]
async fn a_follower_sends_nothing_and_a_new_leader_restarts_every_nodes_timer() {
    use mcjs_scheduler_daemon::lease::LeaseRole;
    let d = daemon(lost_node(false), Refuse::Nothing);
    d.leading.set(LeaseRole::Standby {
        holder: key(251),
        term: 3,
    });
    let mut memory = Memory::default();
    let report = d.round(&deployment(), &mut memory).await.unwrap();
    assert_eq!(report, RoundReport::default());
    assert!(
        d.chain.sent.lock().unwrap().is_empty(),
        "a follower sends nothing"
    );

    d.leading.set(LeaseRole::Leader { term: 4 });
    let report = d.round(&deployment(), &mut memory).await.unwrap();
    assert!(
        report
            .done
            .iter()
            .all(|a| !matches!(a, Action::ReportFailure { .. })),
        "no report in the first round after a takeover: {:?}",
        report.done
    );
    assert!(
        d.chain
            .sent
            .lock()
            .unwrap()
            .iter()
            .all(|(ixs, _)| ixs.iter().all(|ix| name(ix) != "report_failure"))
    );

    // The same daemon, had it led all along, reports the lost node at once.
    let leader = daemon(lost_node(false), Refuse::Nothing);
    let (report, _) = one_round(&leader).await;
    assert!(kinds(&report.done).contains(&"report"));
}
