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

use mcjs::state::{Job, JobState};
use mcjs_client::rpc::JobFilter;
use mcjs_client::{ChainClient, ChainError, Keypair, Pubkey, Signer, ix};
use tokio_util::sync::CancellationToken;
use tracing::{info, instrument, warn};

use crate::auth::Directory;
use crate::core::{AccountKind, Action, DetectorConfig, Observation, cause_name, reconcile};
use crate::gateway::{self, GatewayState, S3Error, S3Store};
use crate::liveness::Liveness;
use crate::metrics::Metrics;
use crate::server::{Clock, ServerState, router};
use crate::verify::{VerifyAction, VerifyObservation, verify_duties};
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
    pub listen: SocketAddr,
    pub tick: Duration,
    pub detector: DetectorConfig,
    /// The deployment's store, published at `/v1/store`; for `s3://` the
    /// daemon holds its credentials and runs the gateway.
    pub store: StoreUrl,
}

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error(transparent)]
    Chain(#[from] ChainError),
    #[error(
        "{key} is not the scheduler authority of this deployment ({expected}); pass the scheduler's keypair"
    )]
    NotScheduler { key: Pubkey, expected: Pubkey },
    #[error(transparent)]
    Store(#[from] S3Error),
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

/// What the shell remembers between rounds, for metrics only: the chain
/// holds everything that decides anything.
#[derive(Default)]
struct Memory {
    seen_running: HashSet<Pubkey>,
    seen_finished: HashSet<Pubkey>,
    /// job → (when its failure was reported, ms; the generation that
    /// fenced the failed node: a new assignment runs above it).
    recovering_since: HashMap<Pubkey, (i64, u32)>,
    last_waiting: HashMap<Pubkey, String>,
    last_skipped: HashMap<Pubkey, String>,
}

pub struct Daemon {
    pub client: ChainClient,
    pub scheduler: Keypair,
    pub config: DaemonConfig,
    pub liveness: Arc<Mutex<Liveness>>,
    /// Who may speak for each node; read from the chain before the first
    /// heartbeat is served and again every round.
    pub directory: Arc<RwLock<Directory>>,
    pub metrics: Arc<Metrics>,
    pub clock: Clock,
    /// The store's credentials, for an `s3://` store.
    pub s3: Option<Arc<S3Store>>,
}

impl Daemon {
    /// Checks that `scheduler` is the deployment's scheduler authority.
    pub async fn connect(
        config: DaemonConfig,
        scheduler: Keypair,
        clock: Clock,
    ) -> Result<Self, DaemonError> {
        let client = ChainClient::new(&config.rpc_url);
        let (_, chain_config) = client.config().await?;
        if chain_config.scheduler != scheduler.pubkey() {
            return Err(DaemonError::NotScheduler {
                key: scheduler.pubkey(),
                expected: chain_config.scheduler,
            });
        }
        let s3 = match &config.store {
            StoreUrl::S3(location) => Some(Arc::new(S3Store::new(location.clone(), |k| {
                std::env::var(k).ok()
            })?)),
            StoreUrl::Dir(_) => None,
        };
        let directory = Directory::from_chain(&client.nodes().await?);
        let now = clock();
        Ok(Self {
            client,
            scheduler,
            config,
            liveness: Arc::new(Mutex::new(Liveness::new(now))),
            directory: Arc::new(RwLock::new(directory)),
            metrics: Arc::new(Metrics::new()),
            clock,
            s3,
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
        };
        let gateway = GatewayState {
            url: self.config.store.clone(),
            s3: self.s3.clone(),
            client: ChainClient::new(&self.config.rpc_url),
            metrics: self.metrics.clone(),
            clock: self.clock.clone(),
            directory: self.directory.clone(),
            limits: Arc::new(gateway::GatewayLimits::standard()),
        };
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
        info!(listen = %self.config.listen, rpc = %self.config.rpc_url, "scheduler started");

        let mut memory = Memory::default();
        let deployment = self.client.deployment().await?;
        let mut again = false;
        loop {
            // A job just taken off a failed node is placed at once, not a tick later.
            let pause = if again {
                Duration::ZERO
            } else {
                self.config.tick
            };
            tokio::select! {
                _ = cancel.cancelled() => break,
                _ = tokio::time::sleep(pause) => {}
                // An agent's stream dropped: judge it as soon as its grace is over.
                _ = wake.notified() => {
                    let grace = self.config.detector.disconnect_grace_ms.max(0) as u64;
                    tokio::time::sleep(Duration::from_millis(grace + 20)).await;
                }
            }
            again = match self.round(&deployment, &mut memory).await {
                Ok(reported) => reported > 0,
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

    #[instrument(skip_all)]
    async fn round(
        &self,
        deployment: &ix::Deployment,
        memory: &mut Memory,
    ) -> Result<usize, ChainError> {
        let jobs = self.client.jobs(JobFilter::All).await?;
        let nodes = self.client.nodes().await?;
        *self.directory.write().expect("node directory") = Directory::from_chain(&nodes);
        let params = self.client.config().await?.1.params;
        let min_stake = params.min_provider_stake;
        let providers: HashMap<Pubkey, mcjs::state::Provider> =
            self.client.providers().await?.into_iter().collect();
        let understaked: HashSet<Pubkey> = providers
            .iter()
            .filter(|(_, p)| p.committed_stake() < min_stake)
            .map(|(key, _)| *key)
            .collect();
        let now = (self.clock)();
        self.observe_metrics(&jobs, now, memory);
        let decision = {
            let liveness = self.liveness.lock().expect("liveness table");
            reconcile(
                &Observation {
                    now_ms: now,
                    jobs: &jobs,
                    nodes: &nodes,
                    liveness: &liveness,
                    understaked: &understaked,
                },
                &self.config.detector,
            )
        };
        for kind in [AccountKind::Node, AccountKind::Job] {
            let count = decision.skipped.iter().filter(|s| s.kind == kind).count();
            self.metrics
                .skipped_accounts
                .with_label_values(&[kind.name()])
                .set(count as i64);
        }
        // Logged when an account starts being skipped or its reason changes, not every round.
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
        for waiting in &decision.waiting {
            if memory.last_waiting.get(&waiting.job) != Some(&waiting.reason) {
                info!(job = %waiting.job, reason = %waiting.reason, "job waits");
                memory
                    .last_waiting
                    .insert(waiting.job, waiting.reason.clone());
            }
        }
        let by_key: HashMap<Pubkey, &Job> = jobs.iter().map(|(k, j)| (*k, j)).collect();
        let mut reported = 0;
        // A job reported failed and placed again in the same round: its
        // assignment rides in the report's transaction.
        let (mut follow_ups, actions): (HashMap<Pubkey, Action>, Vec<Action>) = {
            let reports: HashSet<Pubkey> = decision
                .actions
                .iter()
                .filter_map(|a| match a {
                    Action::ReportFailure { job, .. } => Some(*job),
                    Action::Assign { .. } => None,
                })
                .collect();
            let (paired, rest): (Vec<Action>, Vec<Action>) = decision
                .actions
                .into_iter()
                .partition(|a| matches!(a, Action::Assign { job, .. } if reports.contains(job)));
            (
                paired
                    .into_iter()
                    .map(|a| match &a {
                        Action::Assign { job, .. } | Action::ReportFailure { job, .. } => (*job, a),
                    })
                    .collect(),
                rest,
            )
        };
        for action in actions {
            let follow_up = match &action {
                Action::ReportFailure { job, .. } => follow_ups.remove(job),
                Action::Assign { .. } => None,
            };
            let mut done = vec![];
            let mut placed = false;
            let mut result = Err(ChainError::Rpc("not sent".into()));
            if let Some(assign) = &follow_up {
                result = self
                    .execute_all(&[&action, assign], &by_key, deployment, &params)
                    .await;
                if result.is_ok() {
                    placed = true;
                    done.push(assign.clone());
                } else if let Err(err) = &result {
                    info!(%assign, error = %err, "report and placement together refused; reporting alone");
                }
            }
            if result.is_err() {
                result = self
                    .execute_all(&[&action], &by_key, deployment, &params)
                    .await;
            }
            match result {
                Ok(()) => {
                    done.insert(0, action);
                    for action in done {
                        info!(%action, "done");
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
                                // Not placed with it: place it in a round at once.
                                if !placed {
                                    reported += 1;
                                }
                            }
                        }
                    }
                }
                Err(err) => {
                    self.metrics.transaction_errors.inc();
                    warn!(%action, error = %err, "action refused; the next round starts from the chain again");
                }
            }
        }
        if let Err(err) = self
            .verification_round(&jobs, &nodes, &providers, &params, deployment)
            .await
        {
            warn!(error = %err, "verification duties failed; retrying next round");
        }
        Ok(reported)
    }

    /// Draws attested intervals for verification, applies decided
    /// verifications and releases held payments that are due
    /// (`crate::verify`), one transaction each.
    async fn verification_round(
        &self,
        jobs: &[(Pubkey, Job)],
        nodes: &[(Pubkey, mcjs::state::Node)],
        providers: &HashMap<Pubkey, mcjs::state::Provider>,
        params: &mcjs::state::ConfigParams,
        deployment: &ix::Deployment,
    ) -> Result<(), ChainError> {
        // Segments and verifications exist only for verified jobs, and such
        // a job cannot be closed while any payment of it is held.
        if !jobs.iter().any(|(_, j)| j.verification_ppm > 0) {
            return Ok(());
        }
        let verifications = self.client.verifications(None).await?;
        let segments = self.client.segments().await?;
        let slot_hashes = self.client.slot_hashes().await?;
        let now = self.client.chain_time().await?;
        let alive: HashSet<Pubkey> = {
            let liveness = self.liveness.lock().expect("liveness table");
            let (now_ms, detector) = ((self.clock)(), &self.config.detector);
            nodes
                .iter()
                .map(|(key, _)| *key)
                .filter(|key| {
                    liveness.is_alive(
                        key,
                        now_ms,
                        detector.heartbeat_timeout_ms,
                        detector.disconnect_grace_ms,
                    )
                })
                .collect()
        };
        let duties = verify_duties(&VerifyObservation {
            alive: &alive,
            now,
            params,
            jobs,
            nodes,
            providers,
            verifications: &verifications,
            segments: &segments,
            slot_hashes: &slot_hashes,
        });
        let me = self.scheduler.pubkey();
        for duty in duties {
            let ix = match &duty {
                VerifyAction::Open {
                    job,
                    segment_generation,
                    attester_node,
                    interval,
                    checkers,
                } => ix::open_verification(
                    &me,
                    job,
                    *segment_generation,
                    attester_node,
                    *interval,
                    checkers,
                ),
                VerifyAction::Resolve {
                    job,
                    verification,
                    owner_token,
                    loser,
                    current,
                } => ix::resolve_verification(
                    &me,
                    job,
                    verification,
                    owner_token,
                    deployment,
                    *loser,
                    *current,
                ),
                VerifyAction::Release { job, segment } => {
                    ix::release_segment(&me, job, segment, deployment)
                }
            };
            match self.client.send(&[ix], &[&self.scheduler]).await {
                Ok(_) => info!(action = duty.name(), job = %duty.job(), "done"),
                Err(err) => {
                    self.metrics.transaction_errors.inc();
                    warn!(action = duty.name(), job = %duty.job(), error = %err, "verification duty refused; the next round starts from the chain again");
                }
            }
        }
        Ok(())
    }

    /// Sends `actions` in one transaction.
    async fn execute_all(
        &self,
        actions: &[&Action],
        jobs: &HashMap<Pubkey, &Job>,
        deployment: &ix::Deployment,
        params: &mcjs::state::ConfigParams,
    ) -> Result<(), ChainError> {
        let mut instructions = Vec::with_capacity(actions.len());
        // A report before an assignment in the same transaction moves the
        // job one generation on: the new segment is one further.
        let mut reported = HashSet::new();
        for action in actions {
            let offset = match action {
                Action::Assign { job, .. } => u32::from(reported.contains(job)),
                Action::ReportFailure { job, .. } => {
                    reported.insert(*job);
                    0
                }
            };
            instructions.push(
                self.instruction(action, jobs, deployment, params, offset)
                    .await?,
            );
        }
        self.client
            .send(&instructions, &[&self.scheduler])
            .await
            .map(|_| ())
    }

    async fn instruction(
        &self,
        action: &Action,
        jobs: &HashMap<Pubkey, &Job>,
        deployment: &ix::Deployment,
        params: &mcjs::state::ConfigParams,
        generation_offset: u32,
    ) -> Result<mcjs_client::Instruction, ChainError> {
        let me = self.scheduler.pubkey();
        let instruction = match action {
            Action::Assign {
                job,
                node,
                provider,
            } => {
                let assign = ix::assign_job(&me, job, node, provider);
                match jobs.get(job) {
                    Some(state) if ix::assignment_holds_payment(state, params) => {
                        let generation = state.generation + generation_offset;
                        ix::with_new_segment(assign, job, generation)
                    }
                    _ => assign,
                }
            }
            Action::ReportFailure {
                job,
                node,
                provider,
                generation,
                cause,
                ..
            } => {
                let payout = self
                    .client
                    .provider(provider)
                    .await?
                    .map(|p| p.payout)
                    .ok_or_else(|| ChainError::Rpc(format!("provider {provider} vanished")))?;
                let refund = jobs
                    .get(job)
                    .map(|j| j.refund_account)
                    .ok_or_else(|| ChainError::Rpc(format!("job {job} vanished")))?;
                let segment = jobs.get(job).and_then(|j| ix::segment_of(job, j));
                ix::with_segment(
                    ix::report_failure(
                        &me,
                        job,
                        node,
                        provider,
                        &payout,
                        &refund,
                        deployment,
                        mcjs::instructions::ReportFailureArgs {
                            generation: *generation,
                            cause: *cause,
                        },
                    ),
                    segment,
                )
            }
        };
        Ok(instruction)
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
            if job.state.is_terminal() && memory.seen_finished.insert(*key) {
                if matches!(job.state, JobState::Completed { .. }) {
                    self.metrics.completed.inc();
                } else {
                    self.metrics.ended_unsuccessfully.inc();
                }
            }
        }
    }
}
