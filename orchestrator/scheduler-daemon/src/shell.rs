//! The async shell: observe the chain, run the core, send what it decides.
//!
//! Every round starts from what the chain says now, so the loop is
//! idempotent: after a crash a new daemon simply carries on, and a
//! transaction that raced another (a job assigned twice, a failure reported
//! twice) is refused by the program and forgotten.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use futures_util::StreamExt as _;
use mcjs::state::{Job, JobState};
use mcjs_client::{ChainClient, ChainError, Keypair, Pubkey, Signer, ix};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, instrument, warn};

use crate::auth::Directory;
pub use crate::chain::{DaemonChain, LiveChain, Snapshot};

mod duties;
mod standby;
use crate::challenges::{ChallengeObservation, ChallengePolicy, Openings};
use crate::core::{AccountKind, Action, DetectorConfig, Observation, cause_name, reconcile};
use crate::duties::CheckRoster;
use crate::gateway::{self, GatewayState, S3Error, S3Store};
use crate::lease::{Leading, LeaseRole, LeaseStep, lease_step};
use crate::liveness::Liveness;
use crate::metrics::Metrics;
use crate::server::{Clock, ServerState, router};
use crate::sight::Sight;
use crate::standby::StandbyBook;
use crate::transactions::duties::{ChallengeRead, Judged, Judgement, Left, ToJudge};
use crate::transactions::{self, Duty, Planned, Unplanned, plan_challenges, plan_checks};
use crate::verify::{VerifyObservation, needs_chain_read, passed_over};
pub use crate::watch::{
    STORE_PROBE_EVERY, STORE_PROBE_TIMEOUT, hold_lease, probe_store, watch_funds,
};
use mcjs_protocol::peer::{PeerLimit, PerPeer};
use mcjs_protocol::store::StoreUrl;

/// What one address may ask of the scheduler's HTTP port (heartbeats, the
/// fleet view, metrics, the store gateway), before anything else is read: 200
/// requests a second, in bursts of 1,000. An agent sends one long-lived
/// heartbeat request and a store request per checkpoint part, so a provider
/// with hundreds of nodes behind one address stays well inside it.
pub const PER_PEER: PeerLimit = PeerLimit {
    period: Duration::from_millis(5),
    burst: 1_000,
};

/// The scheduler's HTTP routes as it serves them: heartbeats, the fleet view,
/// metrics and the store gateway, each address held to `per_peer`. Serve it
/// with `into_make_service_with_connect_info::<SocketAddr>()`.
pub fn public_app(state: ServerState, gateway: GatewayState, per_peer: &PerPeer) -> axum::Router {
    router(state)
        .merge(gateway::routes(gateway))
        .layer(per_peer.layer())
}

#[derive(Clone, Debug)]
pub struct DaemonConfig {
    pub rpc_url: String,
    /// What the scheduler's transactions offer as priority fees, where not
    /// the client's default.
    pub fees: Option<mcjs_client::compute::FeePolicy>,
    pub listen: SocketAddr,
    pub tick: Duration,
    pub detector: DetectorConfig,
    /// The deployment's store, published at `/v1/store`; for `s3://` the
    /// daemon holds its credentials and runs the gateway.
    pub store: StoreUrl,
    /// Transactions of one round in flight at once (at least 1);
    /// [`SENDS_IN_FLIGHT`] by default.
    pub sends_in_flight: usize,
    /// Where the program index hears of changes.
    pub index_stream: IndexStream,
    /// Hardware challenges (`mcjs scheduler --challenge-hardware`; off by default).
    pub challenge: ChallengePolicy,
}

pub use crate::index_stream::IndexStream;

impl DaemonConfig {
    fn client(&self) -> ChainClient {
        let client = ChainClient::new(&self.rpc_url);
        match self.fees {
            Some(fees) => client.with_fees(fees),
            None => client,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error(transparent)]
    Chain(#[from] ChainError),
    #[error(
        "{key} is neither this deployment's scheduler ({expected}) nor one of its standbys; pass the scheduler's keypair, or name this key a standby with `mcjs admin set-schedulers --standby {key}`"
    )]
    NotScheduler { key: Pubkey, expected: Pubkey },
    #[error(
        "this build has no Yellowstone gRPC source; build with `--features yellowstone`, or follow the RPC node's websocket (leave out --yellowstone)"
    )]
    NoYellowstone,
    #[error(transparent)]
    Store(#[from] S3Error),
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

/// What the shell remembers between rounds, for metrics and logs, and the
/// periods in which it could not read the chain (which the failure detector
/// excuses, as it does the store's outages: [`Daemon::store_sight`]): the
/// chain holds everything else that decides anything.
#[derive(Default)]
pub struct Memory {
    /// When rounds read the chain, and when they could not.
    chain: Sight,
    /// The last round's working set: a job gone from it since has settled
    /// (or closed), and is read once by address to count how it ended.
    working: HashSet<Pubkey>,
    /// Of the working set, the jobs already seen running and seen ended
    /// (each counted once in the metrics).
    seen_running: HashSet<Pubkey>,
    seen_finished: HashSet<Pubkey>,
    /// Attested intervals (job, interval) whose draw is settled and opened
    /// nothing (`verify::passed_over`): no round reads the chain for them.
    passed_over: HashSet<(Pubkey, u32)>,
    /// job → (when its failure was reported, ms; the generation that
    /// fenced the failed node: a new assignment runs above it).
    recovering_since: HashMap<Pubkey, (i64, u32)>,
    last_waiting: HashMap<Pubkey, String>,
    last_skipped: HashMap<Pubkey, String>,
    /// The last round's decision was braked (logged once per episode).
    braking: bool,
    /// The last round followed another scheduler's lead.
    following: bool,
    /// When the challenge duties last considered requests (ms, the daemon's clock): at
    /// most every [`CHALLENGE_IDLE_READ_MS`].
    challenges_read_at: Option<i64>,
    /// When this scheduler last requested each node's challenge (chain seconds), kept for
    /// the policy's request spacing.
    challenges_requested_at: HashMap<Pubkey, i64>,
    /// The last round's warm standbys (job → node): kept while they stay
    /// free and fit.
    standbys: crate::standby::Standbys,
    /// Whether each spec read asks for a standby (`checkpoint.standby`), by
    /// spec hash: a spec is stored under its hash, so this never goes stale.
    spec_wants_standby: HashMap<[u8; 32], bool>,
    /// Openings being judged, off the rounds: node → (the challenge's request slot, its
    /// judge). A round records the verdict once the judge's thread has ended.
    judging: HashMap<Pubkey, (u64, duties::Judge)>,
}

/// How often the challenge duties consider requesting challenges (reading the chain's
/// clock and slot hashes for it): the re-check draw's round.
pub const CHALLENGE_IDLE_READ_MS: i64 = 10_000;

/// Transactions of one round in flight at once, by default. With 400 ms
/// slots and 100 ms of latency per call, 16 place 200 jobs on 200 idle
/// nodes at about 31 a second, one at a time at 2.5
/// (bench/results/placement.txt); more in flight helps only where the
/// endpoint allows more calls than a public one does.
pub const SENDS_IN_FLIGHT: usize = 16;

impl Memory {
    /// What a scheduler started at `now` knows: nothing before it. A job is
    /// judged late only for time after the start (the grace after a restart
    /// or a takeover: every node has the chance to attest again first);
    /// heartbeats are judged from the start by the liveness table.
    pub fn started_at(now: i64) -> Self {
        Self {
            chain: Sight::blind_before(now),
            ..Self::default()
        }
    }

    /// A round read the chain at `now`: a failed read since the last one
    /// makes the time between them an outage.
    pub fn read_chain(&mut self, now: i64) {
        if let Some((from, to)) = self.chain.answered(now) {
            tracing::info!(
                outage_ms = to.saturating_sub(from),
                "the chain is readable again; no job is judged late for the time it was not"
            );
        }
    }

    /// A round could not read the chain.
    pub fn chain_unreadable(&mut self) {
        self.chain.failed();
    }

    /// The chain's closed outages.
    pub fn outages(&self) -> impl Iterator<Item = (i64, i64)> + '_ {
        self.chain.outages()
    }
}

/// What the shell logs of a planned transaction's actions: each that
/// landed, and each refused (after its fallback, where it has one).
trait Sent: Send {
    fn landed(&self);
    fn refused(&self, error: &ChainError);
}

impl Sent for Action {
    fn landed(&self) {
        info!(action = %self, "done");
    }

    fn refused(&self, error: &ChainError) {
        warn!(action = %self, error = %error, "action refused; the next round starts from the chain again");
    }
}

/// What one round did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RoundReport {
    /// Actions whose transaction landed, in the order they were sent.
    pub done: Vec<Action>,
    /// Actions whose transaction the chain refused (or that could not be
    /// built), left for the next round to decide again.
    pub refused: Vec<Action>,
    /// Jobs reported failed and not placed with the report: a round runs
    /// again at once to place them.
    pub to_place: usize,
}

pub struct Daemon<C = LiveChain> {
    pub chain: C,
    pub config: DaemonConfig,
    pub liveness: Arc<Mutex<Liveness>>,
    /// Who may speak for each node; read from the chain before the first
    /// heartbeat is served and again every round.
    pub directory: Arc<RwLock<Directory>>,
    pub metrics: Arc<Metrics>,
    pub clock: Clock,
    /// The store's credentials, for an `s3://` store.
    pub s3: Option<Arc<S3Store>>,
    /// What each node owes as a checker, from the last verification read:
    /// served to agents so that none scans the program for its checks.
    pub duties: Arc<RwLock<CheckRoster>>,
    /// Whether the store answers the scheduler's probes ([`probe_store`]),
    /// and its outages: the failure detector excuses them as it does the
    /// chain's.
    pub store_sight: Arc<Mutex<Sight>>,
    /// Whether this scheduler holds the lease and acts, or follows
    /// ([`hold_lease`] keeps it to the chain).
    pub leading: Arc<Leading>,
    /// The hardware challenges in flight at the last round (node → its request's slot),
    /// and the openings agents sent for them.
    pub challenged: Arc<RwLock<HashMap<Pubkey, u64>>>,
    pub openings: Arc<Mutex<Openings>>,
    /// The warm standbys of the last round, served to agents and to the
    /// store gate.
    pub standbys: Arc<RwLock<StandbyBook>>,
}

impl Daemon {
    /// Checks that `scheduler` is a member of the deployment's scheduler
    /// lease (the Config's scheduler or a standby).
    pub async fn connect(
        config: DaemonConfig,
        scheduler: Keypair,
        clock: Clock,
    ) -> Result<Self, DaemonError> {
        let client = config.client();
        client.config().await?;
        let view = client.lease_view().await?;
        let step = lease_step(&view, &scheduler.pubkey());
        if step == LeaseStep::Outsider {
            return Err(DaemonError::NotScheduler {
                key: scheduler.pubkey(),
                expected: view.config.scheduler,
            });
        }
        let s3 = match &config.store {
            StoreUrl::S3(location) => Some(Arc::new(S3Store::new(location.clone(), |k| {
                std::env::var(k).ok()
            })?)),
            StoreUrl::Dir(_) => None,
        };
        let index = config.index_stream.follow(&client)?;
        let directory = Directory::from_chain(&client.nodes().await?);
        let now = clock();
        Ok(Self {
            chain: LiveChain {
                index: Some(index),
                client,
                scheduler,
            },
            config,
            liveness: Arc::new(Mutex::new(Liveness::new(now))),
            directory: Arc::new(RwLock::new(directory)),
            metrics: Arc::new(Metrics::new()),
            clock,
            s3,
            duties: Arc::default(),
            store_sight: Arc::default(),
            leading: Arc::new(Leading::new(LeaseRole::after(step, false))),
            challenged: Arc::default(),
            openings: Arc::default(),
            standbys: Arc::default(),
        })
    }

    /// Serves heartbeats and runs the reconcile loop until `cancel`.
    pub async fn run(self, cancel: CancellationToken) -> Result<(), DaemonError> {
        let wake = Arc::new(tokio::sync::Notify::new());
        let listener = tokio::net::TcpListener::bind(self.config.listen)
            .await
            .map_err(|source| DaemonError::Listen {
                addr: self.config.listen,
                source,
            })?;
        let state = ServerState {
            liveness: self.liveness.clone(),
            directory: self.directory.clone(),
            metrics: self.metrics.clone(),
            clock: self.clock.clone(),
            heartbeat_timeout_ms: self.config.detector.heartbeat_timeout_ms,
            disconnect_grace_ms: self.config.detector.disconnect_grace_ms,
            wake: Arc::clone(&wake),
            session: crate::server::new_session(),
            duties: Arc::clone(&self.duties),
            standbys: Arc::clone(&self.standbys),
            challenged: Arc::clone(&self.challenged),
            openings: Arc::clone(&self.openings),
        };
        let gateway = GatewayState {
            url: self.config.store.clone(),
            s3: self.s3.clone(),
            client: self.config.client(),
            metrics: self.metrics.clone(),
            clock: self.clock.clone(),
            directory: self.directory.clone(),
            limits: Arc::new(gateway::GatewayLimits::standard()),
            views: Default::default(),
            index: self.chain.index.clone(),
            standbys: Arc::clone(&self.standbys),
        };
        if let Some(s3) = &self.s3 {
            tokio::spawn(probe_store(
                Arc::clone(s3),
                Arc::clone(&self.store_sight),
                self.metrics.clone(),
                self.clock.clone(),
                cancel.clone(),
            ));
        }
        tokio::spawn(hold_lease(
            self.chain.client.clone(),
            self.chain.scheduler.insecure_clone(),
            Arc::clone(&self.leading),
            self.metrics.clone(),
            cancel.clone(),
        ));
        tokio::spawn(watch_funds(
            self.chain.client.clone(),
            self.chain.scheduler.pubkey(),
            self.metrics.clone(),
            self.clock.clone(),
            cancel.clone(),
        ));
        let per_peer = PerPeer::new(PER_PEER);
        let app = public_app(state, gateway, &per_peer);
        tokio::spawn(
            per_peer.forget_idle_every(Duration::from_secs(60), cancel.clone().cancelled_owned()),
        );
        let server_cancel = cancel.clone();
        let server = tokio::spawn(async move {
            let _ = axum::serve(
                listener,
                app.into_make_service_with_connect_info::<SocketAddr>(),
            )
            .with_graceful_shutdown(server_cancel.cancelled_owned())
            .await;
        });
        info!(listen = %self.config.listen, rpc = %self.config.rpc_url, role = ?self.leading.role(), "scheduler started");

        let mut memory = Memory::started_at((self.clock)());
        let deployment = self.chain.deployment().await?;
        let mut again = false;
        loop {
            // A job just taken off a failed node is placed at once, not a tick later.
            let pause = if again {
                Duration::ZERO
            } else {
                self.config.tick
            };
            let index = self.chain.index.clone();
            let to_place = async move {
                match index {
                    Some(index) => index.job_to_place().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = cancel.cancelled() => break,
                _ = tokio::time::sleep(pause) => {}
                // A job waits for a node (submitted, or taken off its node):
                // placed now, not at the next tick. Many at once are one wake.
                _ = to_place => {}
                // An agent's stream dropped: judge it as soon as its grace
                // is over, with a blockhash fetched meanwhile for the report.
                _ = wake.notified() => {
                    self.chain.warm();
                    let grace = self.config.detector.disconnect_grace_ms.max(0) as u64;
                    tokio::time::sleep(Duration::from_millis(grace + 20)).await;
                }
            }
            again = match self.round(&deployment, &mut memory).await {
                Ok(report) => report.to_place > 0,
                Err(err) => {
                    // The error policy: log and try again next round.
                    warn!(error = %err, "reconcile round failed; retrying");
                    false
                }
            };
        }
        let _ = server.await;
        info!("scheduler stopped");
        Ok(())
    }
}

impl<C: DaemonChain> Daemon<C> {
    /// One round: read the chain, decide ([`reconcile`]), send what was
    /// decided ([`transactions::plan`]), then the verification and hardware
    /// challenge duties ([`transactions::duties`]). A refused transaction is
    /// logged and forgotten: the next round decides again from what the
    /// chain says then.
    #[instrument(skip_all)]
    pub async fn round(
        &self,
        deployment: &ix::Deployment,
        memory: &mut Memory,
    ) -> Result<RoundReport, ChainError> {
        let snapshot = match self.chain.snapshot().await {
            Ok(snapshot) => snapshot,
            Err(err) => {
                memory.chain_unreadable();
                return Err(err);
            }
        };
        memory.read_chain((self.clock)());
        let Snapshot {
            jobs,
            nodes,
            params,
            providers,
        } = &snapshot;
        *self.directory.write().expect("node directory") = Directory::from_chain(nodes);
        if !self.lead_or_follow(memory) {
            return Ok(RoundReport::default());
        }
        let understaked: HashSet<Pubkey> = providers
            .iter()
            .filter(|(_, p)| p.committed_stake() < params.min_provider_stake)
            .map(|(key, _)| *key)
            .collect();
        let now = (self.clock)();
        self.observe_metrics(jobs, now, memory);
        self.observe_departures(jobs, memory).await;
        let outages: Vec<(i64, i64)> = memory
            .chain
            .outages_until(now)
            .chain(
                self.store_sight
                    .lock()
                    .expect("store sight")
                    .outages_until(now),
            )
            .collect();
        let standby_wanted = crate::standby::wanting(jobs, &memory.spec_wants_standby);
        let decision = {
            let liveness = self.liveness.lock().expect("liveness table");
            reconcile(
                &Observation {
                    now_ms: now,
                    jobs,
                    nodes,
                    liveness: &liveness,
                    understaked: &understaked,
                    outages: &outages,
                    require_proven_hardware: params.require_proven_hardware,
                    standby_wanted: &standby_wanted,
                    standbys: &memory.standbys,
                },
                &self.config.detector,
            )
        };
        self.name_standbys(&decision.standbys, jobs, memory);
        self.log_decision(&decision, memory);
        let by_key: HashMap<Pubkey, &Job> = jobs.iter().map(|(k, j)| (*k, j)).collect();
        let (planned, unplanned) = transactions::plan(
            decision.actions,
            &transactions::Accounts {
                scheduler: self.chain.scheduler(),
                deployment,
                params,
                jobs: &by_key,
                providers,
            },
        );
        let mut report = RoundReport::default();
        for Unplanned { action, reason } in unplanned {
            self.metrics.transaction_errors.inc();
            warn!(%action, %reason, "action not sent; the next round starts from the chain again");
            report.refused.push(action);
        }
        // Placements and reports of one round touch different jobs and
        // nodes (the core never places a job on a node being reported), so
        // they go out together, at the chain's pace rather than one
        // confirmation at a time; their outcomes are taken in plan order.
        let outcomes = self.send_all(planned, self.config.sends_in_flight).await;
        for (landed, refused) in outcomes {
            report.refused.extend(refused);
            let Some(landed) = landed else { continue };
            let placed: HashSet<Pubkey> = landed
                .actions
                .iter()
                .filter_map(|a| match a {
                    Action::Assign { job, .. } => Some(*job),
                    Action::ReportFailure { .. } => None,
                })
                .collect();
            for action in landed.actions {
                match &action {
                    Action::Assign { job, .. } => {
                        self.metrics.assignments.inc();
                        memory.last_waiting.remove(job);
                    }
                    Action::ReportFailure {
                        job,
                        cause,
                        generation,
                        ..
                    } => {
                        self.metrics
                            .failures
                            .with_label_values(&[cause_name(cause)])
                            .inc();
                        memory.recovering_since.insert(*job, (now, generation + 1));
                        if !placed.contains(job) {
                            report.to_place += 1;
                        }
                    }
                }
                report.done.push(action);
            }
        }
        self.read_standby_wishes(jobs, memory).await;
        if let Err(err) = self.verification_round(&snapshot, deployment, memory).await {
            warn!(error = %err, "verification duties failed; retrying next round");
        }
        if let Err(err) = self.challenge_round(&snapshot, memory).await {
            warn!(error = %err, "hardware challenge duties failed; retrying next round");
        }
        Ok(report)
    }

    /// Whether this round acts: only while this scheduler holds the lease.
    /// A follower keeps a memory that knows nothing before now, so that
    /// when it takes over it judges no job late, and no node silent, for
    /// the time before it led (the grace after a takeover).
    fn lead_or_follow(&self, memory: &mut Memory) -> bool {
        let now = (self.clock)();
        let role = self.leading.role();
        if !role.leads() {
            *memory = Memory::started_at(now);
            memory.following = true;
            return false;
        }
        if memory.following {
            *memory = Memory::started_at(now);
            self.liveness
                .lock()
                .expect("liveness table")
                .restart_timers(now);
            info!(
                ?role,
                "took over as the acting scheduler: nobody is judged late or silent for the time before"
            );
        }
        true
    }

    /// Sends what a plan produced, `in_flight` transactions at a time (at
    /// least 1), each with its fallback when refused ([`Self::send_planned`]);
    /// logs what landed in plan order and returns each transaction's outcome
    /// (what landed, the actions refused) in that order.
    async fn send_all<A: Sent>(
        &self,
        planned: Vec<Planned<A>>,
        in_flight: usize,
    ) -> Vec<(Option<Planned<A>>, Vec<A>)> {
        let mut sending = futures_util::stream::iter(planned)
            .map(|planned| self.send_planned(planned))
            .buffered(in_flight.max(1));
        let mut outcomes = Vec::new();
        while let Some(outcome) = sending.next().await {
            for action in outcome.0.iter().flat_map(|landed| &landed.actions) {
                action.landed();
            }
            outcomes.push(outcome);
        }
        outcomes
    }

    /// Sends one planned transaction, and its fallback when it is refused,
    /// each refusal counted in `mcjs_transaction_errors`. Returns what landed
    /// and the actions refused.
    async fn send_planned<A: Sent>(&self, planned: Planned<A>) -> (Option<Planned<A>>, Vec<A>) {
        let mut sent = planned;
        let mut refused = Vec::new();
        loop {
            match self.chain.send(&sent.instructions).await {
                Ok(()) => return (Some(sent), refused),
                Err(err) => {
                    self.metrics.transaction_errors.inc();
                    match sent.fallback.take() {
                        Some(fallback) => {
                            info!(error = %err, "report and placement together refused; reporting alone");
                            // The fallback carries a prefix of the actions.
                            refused.extend(sent.actions.into_iter().skip(fallback.actions.len()));
                            sent = *fallback;
                        }
                        None => {
                            for action in &sent.actions {
                                action.refused(&err);
                            }
                            refused.extend(sent.actions);
                            return (None, refused);
                        }
                    }
                }
            }
        }
    }

    /// Skipped accounts and waiting jobs, logged when an account starts
    /// being skipped or its reason changes, not every round.
    fn log_decision(&self, decision: &crate::core::Decision, memory: &mut Memory) {
        for kind in [AccountKind::Node, AccountKind::Job] {
            let count = decision.skipped.iter().filter(|s| s.kind == kind).count();
            self.metrics
                .skipped_accounts
                .with_label_values(&[kind.name()])
                .set(count as i64);
        }
        memory
            .last_skipped
            .retain(|key, _| decision.skipped.iter().any(|s| s.account == *key));
        for skipped in &decision.skipped {
            if memory.last_skipped.get(&skipped.account) != Some(&skipped.reason) {
                warn!(kind = skipped.kind.name(), account = %skipped.account, reason = %skipped.reason, "account skipped: it cannot be scheduled");
                memory
                    .last_skipped
                    .insert(skipped.account, skipped.reason.clone());
            }
        }
        match &decision.brake {
            Some(brake) => {
                self.metrics.brake_held.set(brake.held.len() as i64);
                self.metrics.brake_rounds.inc();
                if !std::mem::replace(&mut memory.braking, true) {
                    warn!(
                        silent = brake.silent,
                        holding = brake.holding,
                        held = brake.held.len(),
                        "mass failure brake: {} of the {} nodes holding a job look dead at once; no node is reported lost until the evidence is per node (a checkpoint overdue on chain) or the share falls",
                        brake.silent,
                        brake.holding
                    );
                }
            }
            None => {
                self.metrics.brake_held.set(0);
                if std::mem::take(&mut memory.braking) {
                    info!("mass failure brake released");
                }
            }
        }
        for waiting in &decision.waiting {
            if memory.last_waiting.get(&waiting.job) != Some(&waiting.reason) {
                info!(job = %waiting.job, reason = %waiting.reason, "job waits");
                memory
                    .last_waiting
                    .insert(waiting.job, waiting.reason.clone());
            }
        }
    }

    fn observe_metrics(&self, jobs: &[(Pubkey, Job)], now: i64, memory: &mut Memory) {
        let queued = jobs.iter().filter(|(_, j)| j.state.can_assign()).count();
        self.metrics.queue_length.set(queued as i64);
        for (key, job) in jobs {
            if let (Some(first), false) = (job.first_running_at, memory.seen_running.contains(key))
            {
                memory.seen_running.insert(*key);
                self.metrics
                    .submission_to_running_seconds
                    .observe((first - job.submitted_at).max(0) as f64);
            }
            if let JobState::Running { .. } = job.state
                && let Some((reported_ms, generation)) = memory.recovering_since.get(key).copied()
                && job.generation > generation
            {
                memory.recovering_since.remove(key);
                self.metrics
                    .recovery_seconds
                    .observe((now - reported_ms).max(0) as f64 / 1_000.0);
            }
            self.count_finished(key, job, memory);
        }
    }

    /// Counts `job` in the metrics the first time it is seen ended.
    fn count_finished(&self, key: &Pubkey, job: &Job, memory: &mut Memory) {
        if job.state.is_terminal() && memory.seen_finished.insert(*key) {
            if matches!(job.state, JobState::Completed { .. }) {
                self.metrics.completed.inc();
            } else {
                self.metrics.ended_unsuccessfully.inc();
            }
        }
    }

    /// The jobs that left the working set since the last round settled (or
    /// were closed): each is read once by address and counted by how it
    /// ended, unless it was already counted; then forgotten, so that what
    /// the shell remembers is bounded by the working set too. Jobs settled
    /// before this process started are never read: the counters count what
    /// ended while it ran.
    async fn observe_departures(&self, jobs: &[(Pubkey, Job)], memory: &mut Memory) {
        let now: HashSet<Pubkey> = jobs.iter().map(|(key, _)| *key).collect();
        let left: Vec<Pubkey> = memory
            .working
            .iter()
            .filter(|key| !now.contains(key))
            .copied()
            .collect();
        let mut keep = now;
        if !left.is_empty() {
            match self.chain.jobs_at(&left).await {
                Ok(gone) => {
                    for (key, job) in &gone {
                        self.count_finished(key, job, memory);
                    }
                }
                Err(error) => {
                    // Read again next round.
                    debug!(%error, jobs = left.len(), "could not read the jobs that left the working set");
                    keep.extend(left);
                }
            }
        }
        memory.seen_running.retain(|key| keep.contains(key));
        memory.seen_finished.retain(|key| keep.contains(key));
        memory.passed_over.retain(|(key, _)| keep.contains(key));
        memory.working = keep;
    }
}
