//! The thin async shell around [`crate::core`]: an idempotent reconcile loop
//! re-driven every tick, whose actions run as tracked tasks that report back
//! as events. Shutdown: a `CancellationToken` to tell, a `TaskTracker` to wait.

use crate::chain::{AgentChain, ChainFailure, NodeIdentity};
use crate::core::{Action, ChainJob, Core, CorePolicy, Event};
use crate::metrics::AgentMetrics;
use gpu_desk::GpuDesk;
use launch::RunCtx;
use mcjs_client::Pubkey;
use mcjs_protocol::fault::{EXIT_BAD_INPUT, EXIT_DONE, EXIT_PREEMPTED};
use mcjs_protocol::{JobReport, StopReason};
use mcjs_runtime::docker::DockerEngine;
use mcjs_runtime::engine::ContainerEngine;
use mcjs_runtime::staging::{DataCache, StagingPolicy};
use mcjs_runtime::volume::{self, DiskBound};
use node::NodeEnv;
use object_store::ObjectStore;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

mod actions;
mod api;
mod challenge;
mod check_finder;
mod checks;
mod gpu_desk;
mod heartbeat;
mod launch;
mod node;
mod output;
mod power;
mod run_dirs;
mod standby;
mod transactions;

pub use api::{router, serve};

/// Label carrying the assignment generation on every job container.
pub const GENERATION_LABEL: &str = "mcjs.generation";

#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// The Node account this agent runs; the chain's signing key must be its operator key.
    pub node: Pubkey,
    /// Cache, per-job directories (data, checkpoints, output, restore).
    pub work_dir: PathBuf,
    /// How often the loop reconciles with the chain.
    pub tick: Duration,
    /// Checkpoints are enforced at least this often, whatever a job asks.
    pub max_checkpoint_interval: Option<Duration>,
    /// Hashing threads per checkpoint (0: one per core).
    pub hash_threads: usize,
    /// Heartbeats go here (`http://host:port`), when set; the store
    /// gateway and check duties are asked here.
    pub scheduler: Option<String>,
    /// Other schedulers of the deployment (standbys of the lease): the
    /// heartbeats go to each as well, so that whichever takes the lease
    /// over knows from its first round who is alive.
    pub standby_schedulers: Vec<String>,
    /// The agent's own API, announced in heartbeats.
    pub agent_url: String,
    /// Where job inputs may come from (data roots, internal networks).
    pub staging: StagingPolicy,
    /// How a job's disk is held to its declaration ([`DiskBound::Auto`]:
    /// a loop-mounted volume where this host allows it).
    pub disk: DiskBound,
    /// The node's UPS, read every [`POWER_POLL`]: on battery, every running
    /// job is asked for a checkpoint at once.
    pub ups: Option<mcjs_hal::probe::ups::UpsTarget>,
}

impl AgentConfig {
    /// Every scheduler the agent speaks to: its own, then the standbys.
    pub fn schedulers(&self) -> impl Iterator<Item = &String> {
        self.scheduler.iter().chain(&self.standby_schedulers)
    }
}

/// How often the agent reads the node's UPS.
pub const POWER_POLL: Duration = Duration::from_secs(1);

/// Why the agent could not run.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error(transparent)]
    Chain(#[from] ChainFailure),
    #[error("provider account {provider} of node {node} does not exist")]
    NoProvider { provider: Pubkey, node: Pubkey },
    #[error(
        "node {node} is not registered: the provider registers it with `mcjs node register --operator <KEY>`"
    )]
    NoNode { node: Pubkey },
    #[error(
        "this key ({key}) is not the operator key of node {node}: run the agent with the node's operator key"
    )]
    NotOperator { node: Pubkey, key: Pubkey },
    #[error(transparent)]
    Engine(#[from] mcjs_runtime::engine::EngineError),
    #[error("cannot list the job containers: {0}")]
    List(String),
    #[error(
        "jobs' disks cannot be bounded on this host ({0}); run the agent as root with e2fsprogs installed, or pass --disk-bound watch"
    )]
    DiskBound(#[source] mcjs_runtime::volume::VolumeError),
}

/// What the job runner keeps of the jobs on this node, beside its
/// [`Core`]: owned by the runner and the tasks its actions run.
struct RunnerState {
    /// Each job on this node as last seen on chain; the warm standby
    /// watches it too (it fetches no copy of a job this node runs).
    known: watch::Sender<HashMap<Pubkey, ChainJob>>,
    runs: Mutex<HashMap<(Pubkey, u32), Arc<RunCtx>>>,
    /// When each checkpoint was stored, for the attestation latency.
    stored_at: Mutex<HashMap<(Pubkey, u64), Instant>>,
    /// Each running assignment's log shipper, flushed before an attestation.
    log_flushers: Mutex<HashMap<(Pubkey, u32), mcjs_runtime::logs::LogFlusher>>,
    /// The job reports, for the heartbeats and the agent's API.
    reports: watch::Sender<Vec<JobReport>>,
    /// The node's power for the heartbeat (`None`: no UPS, or unread).
    power: watch::Sender<Option<mcjs_protocol::NodePower>>,
    /// The checkpoints this node keeps as a warm standby ([`standby`]):
    /// fetched by the standby task, taken by a launch.
    standby: Arc<standby::StandbyCopies>,
}

/// The job runner: the reconcile loop around [`Core`] and the tasks its
/// actions run. It shares with the agent's other actors (the checker, the
/// challenger, the heartbeats) only the node ([`NodeEnv`]) and channels:
/// the GPUs through a [`GpuDesk`], its reports and the node's power
/// through watch channels.
struct JobRunner<C, E> {
    node: Arc<NodeEnv<C, E>>,
    gpus: GpuDesk,
    jobs: Arc<RunnerState>,
}

impl<C, E> Clone for JobRunner<C, E> {
    fn clone(&self) -> Self {
        Self {
            node: Arc::clone(&self.node),
            gpus: self.gpus.clone(),
            jobs: Arc::clone(&self.jobs),
        }
    }
}

type EventTx = mpsc::UnboundedSender<(Pubkey, u32, Event)>;

/// The node agent, on Docker by default; any [`ContainerEngine`] (the
/// runtime's fake one in tests) through [`Agent::with_engine`]. [`Agent::run`]
/// starts its actors: the job runner, the checker, the challenger and the
/// heartbeats.
pub struct Agent<C: AgentChain, E: ContainerEngine + 'static = DockerEngine> {
    node: Arc<NodeEnv<C, E>>,
    /// The node's GPUs (its profile on chain).
    gpu_count: u32,
    /// The job runner's latest reports.
    reports: watch::Sender<Vec<JobReport>>,
}

impl<C: AgentChain, E: ContainerEngine + 'static> Clone for Agent<C, E> {
    fn clone(&self) -> Self {
        Self {
            node: Arc::clone(&self.node),
            gpu_count: self.gpu_count,
            reports: self.reports.clone(),
        }
    }
}

impl<C: AgentChain> Agent<C> {
    /// Connects to the Docker engine; see [`Agent::with_engine`].
    pub async fn new(
        chain: C,
        config: AgentConfig,
        store: Arc<dyn ObjectStore>,
        metrics: AgentMetrics,
    ) -> Result<Self, AgentError> {
        let engine = DockerEngine::connect().await?;
        Self::with_engine(chain, config, store, metrics, engine).await
    }
}

impl<C: AgentChain, E: ContainerEngine + 'static> Agent<C, E> {
    /// Reads the provider's payout account; jobs run on `engine`. The node
    /// must be registered with the chain's signing key as its operator key
    /// ([`crate::register::adopt_node`]).
    pub async fn with_engine(
        chain: C,
        config: AgentConfig,
        store: Arc<dyn ObjectStore>,
        metrics: AgentMetrics,
        engine: E,
    ) -> Result<Self, AgentError> {
        let node = config.node;
        let node_account = chain.node(node).await?.ok_or(AgentError::NoNode { node })?;
        let key = chain.authority();
        if node_account.operator != key {
            return Err(AgentError::NotOperator { node, key });
        }
        let provider = node_account.provider;
        let provider_account = chain
            .provider(provider)
            .await?
            .ok_or(AgentError::NoProvider { provider, node })?;
        let deployment = chain.deployment().await?;
        let cache = DataCache::with_policy(config.work_dir.join("cache"), config.staging.clone());
        let mut config = config;
        let (asked, runs) = (config.disk, config.work_dir.join("runs"));
        config.disk = tokio::task::spawn_blocking(move || {
            std::fs::create_dir_all(&runs).map_err(|source| volume::VolumeError::Io {
                path: runs.clone(),
                source,
            })?;
            asked.resolve(&runs)
        })
        .await
        .expect("disk bound probe")
        .map_err(AgentError::DiskBound)?;
        tracing::info!(disk_bound = ?config.disk, "jobs' disks");
        Ok(Self {
            node: Arc::new(NodeEnv {
                chain: Arc::new(chain),
                engine,
                me: NodeIdentity {
                    node,
                    provider,
                    payout: provider_account.payout,
                    deployment,
                },
                store,
                cache,
                metrics,
                host_gpus: std::path::Path::new("/dev/nvidiactl").exists(),
                config,
            }),
            gpu_count: u32::from(node_account.hardware.gpu_count),
            reports: watch::Sender::default(),
        })
    }

    pub fn node(&self) -> Pubkey {
        self.node.me.node
    }

    /// Where an assignment's directories are (`data`, `checkpoints`,
    /// `output`, `restore`).
    pub fn job_dir(&self, job: Pubkey, generation: u32) -> PathBuf {
        self.node.job_dir(job, generation)
    }

    /// How this agent holds jobs to their declared disk (never
    /// [`DiskBound::Auto`]: resolved when the agent started).
    pub fn disk_bound(&self) -> DiskBound {
        self.node.config.disk
    }

    pub fn metrics(&self) -> &AgentMetrics {
        &self.node.metrics
    }

    /// The latest job reports (what the heartbeat carries).
    pub fn reports(&self) -> Vec<JobReport> {
        self.reports.borrow().clone()
    }

    /// Runs until `cancel` fires. Containers keep running when the agent
    /// stops: the next start adopts them.
    pub async fn run(&self, cancel: CancellationToken) -> Result<(), AgentError> {
        let runner = JobRunner {
            node: Arc::clone(&self.node),
            gpus: GpuDesk::open(self.gpu_count),
            jobs: Arc::new(RunnerState {
                known: watch::Sender::default(),
                runs: Mutex::default(),
                stored_at: Mutex::default(),
                log_flushers: Mutex::default(),
                reports: self.reports.clone(),
                power: watch::Sender::default(),
                standby: Arc::default(),
            }),
        };
        runner.run(cancel).await
    }
}

impl<C: AgentChain, E: ContainerEngine + 'static> JobRunner<C, E> {
    /// The reconcile loop, until `cancel` fires; the agent's other actors
    /// run beside it ([`JobRunner::spawn_companions`]).
    async fn run(&self, cancel: CancellationToken) -> Result<(), AgentError> {
        let s = &self.node;
        let tracker = TaskTracker::new();
        let (tx, mut rx) = mpsc::unbounded_channel();
        let mut waiters = Waiters::from_now();
        let mut core = Core::new(CorePolicy {
            max_checkpoint_interval: s.config.max_checkpoint_interval,
        });
        let found = self.find_containers().await?;
        waiters.adopted = found.iter().map(|c| c.id.clone()).collect();
        core.found_containers(found);
        let mut reads = ChainReads::new(s.chain.changes(s.me.node));
        let mut power_rx = self.spawn_companions(&tracker, &cancel, reads.watched);
        let mut tick = tokio::time::interval(s.config.tick);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let mut node_changed = false;
            let mut job_changed = false;
            let woke = tokio::select! {
                _ = cancel.cancelled() => break,
                _ = tick.tick() => true,
                Some(()) = next_change(reads.node_watch.as_mut()) => {
                    tick.reset();
                    node_changed = true;
                    true
                }
                Some(()) = next_change(reads.job_watch.as_mut().map(|(_, w)| w)) => {
                    tick.reset();
                    job_changed = true;
                    true
                }
                Some(state) = power_rx.recv() => {
                    self.jobs.power.send_replace(power::for_heartbeat(state));
                    let actions = core.on_power(state, SystemTime::now());
                    if !actions.is_empty() {
                        tracing::warn!(power = %state, actions = actions.len(), "the node's power changed: acting on its running jobs");
                    }
                    self.execute_all(actions, &tx, &tracker);
                    false
                }
                Some((job, generation, event)) = rx.recv() => {
                    self.observe(&event);
                    let actions = core.on_event(job, generation, event, SystemTime::now());
                    self.execute_all(actions, &tx, &tracker);
                    false
                }
            };
            let chain_now = woke && reads.due(node_changed || job_changed);
            if chain_now && (node_changed || reads.status_checked.elapsed() > NODE_STATUS_EVERY) {
                self.bring_back(&mut reads, &tracker);
            }
            let actions = if chain_now {
                self.read_chain(&mut core, &mut reads).await
            } else if woke {
                core.on_tick(SystemTime::now())
            } else {
                Vec::new()
            };
            self.execute_all(actions, &tx, &tracker);
            self.wait_for_new_containers(&core, &mut waiters, &tx, &tracker);
            self.publish(&core);
        }
        tracker.close();
        // Waiters wait on containers that outlive the agent: do not wait for them.
        tokio::time::timeout(Duration::from_secs(2), tracker.wait())
            .await
            .ok();
        Ok(())
    }

    /// Starts what runs beside the reconcile loop: heartbeats to every
    /// scheduler, the checker, hardware challenges, the warm standby and,
    /// with a UPS, its reader, whose changes come back on the channel.
    fn spawn_companions(
        &self,
        tracker: &TaskTracker,
        cancel: &CancellationToken,
        watched: bool,
    ) -> mpsc::UnboundedReceiver<mcjs_hal::probe::ups::PowerState> {
        let s = &self.node;
        for url in s.config.schedulers() {
            let heart = heartbeat::Heart {
                chain: Arc::clone(&s.chain),
                me: s.me,
                agent_url: s.config.agent_url.clone(),
                sequence: s.config.work_dir.join("heartbeat.seq"),
                reports: self.jobs.reports.subscribe(),
                power: self.jobs.power.subscribe(),
            };
            tracker.spawn(heartbeat::heartbeats(heart, url.clone(), cancel.clone()));
        }
        let checker = checks::Checker::new(Arc::clone(s), self.gpus.clone(), watched);
        tracker.spawn(checker.run(cancel.clone()));
        let challenger = challenge::Challenger {
            chain: Arc::clone(&s.chain),
            me: s.me,
            schedulers: s.config.schedulers().cloned().collect(),
        };
        tracker.spawn(challenge::answer_challenges(challenger, cancel.clone()));
        tracker.spawn(standby::stand_by(
            Arc::clone(s),
            Arc::clone(&self.jobs.standby),
            self.jobs.known.subscribe(),
            cancel.clone(),
        ));
        let (power_tx, power_rx) = mpsc::unbounded_channel();
        if let Some(ups) = s.config.ups.clone() {
            tracker.spawn(power::watch_power(ups, power_tx, cancel.clone()));
        }
        power_rx
    }

    /// A reported failure takes the node offline; once this agent can reach
    /// the chain again (a partition healed), it puts it back. One look at a
    /// time.
    fn bring_back(&self, reads: &mut ChainReads, tracker: &TaskTracker) {
        if reads.bringing_back.swap(true, Ordering::SeqCst) {
            return;
        }
        reads.status_checked = Instant::now();
        let (shared, bringing_back) = (Arc::clone(&self.node), Arc::clone(&reads.bringing_back));
        tracker.spawn(async move {
            if let Ok(Some(node)) = shared.chain.node(shared.me.node).await {
                match crate::register::bring_back(&*shared.chain, &node).await {
                    Ok(true) => tracing::info!(node = %shared.me.node, "node back in service after a reported failure"),
                    Ok(false) => {}
                    Err(e) => tracing::warn!(error = %e.message, "cannot put the node back in service"),
                }
            }
            bringing_back.store(false, Ordering::SeqCst);
        });
    }

    /// Reads the node's jobs and tells the core; follows the job the node
    /// holds for changes. A failed read holds every job as it is.
    async fn read_chain(&self, core: &mut Core, reads: &mut ChainReads) -> Vec<Action> {
        match self.snapshot().await {
            Ok(snapshot) => {
                reads.next_read = Instant::now() + RECONCILE_EVERY;
                if reads.watched {
                    let held = snapshot.first().map(|j| j.key);
                    if reads.job_watch.as_ref().map(|(k, _)| *k) != held {
                        reads.job_watch =
                            held.and_then(|key| self.node.chain.changes(key).map(|w| (key, w)));
                    }
                }
                core.on_chain(&snapshot, SystemTime::now())
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the chain; holding every job as it is");
                reads.next_read = Instant::now() + READ_RETRY;
                core.on_tick(SystemTime::now())
            }
        }
    }

    /// Gives every running container without one a waiter for its exit and
    /// a shipper of its printed lines: launched ones, and those adopted
    /// after a restart.
    fn wait_for_new_containers(
        &self,
        core: &Core,
        waiters: &mut Waiters,
        tx: &EventTx,
        tracker: &TaskTracker,
    ) {
        for a in core.jobs.values() {
            if let crate::core::RunPhase::Running { container } = &a.phase
                && waiters.waiting.insert(container.clone())
            {
                let this = self.clone();
                let (job, generation, container, tx) =
                    (a.job, a.generation, container.clone(), tx.clone());
                let logs = self.ship_logs(
                    job,
                    generation,
                    &container,
                    waiters.agent_started,
                    waiters.adopted.contains(&container),
                );
                tracker.spawn(
                    async move { this.wait_exit(job, generation, container, tx, logs).await },
                );
            }
        }
    }

    fn publish(&self, core: &Core) {
        let s = &self.node;
        self.jobs.reports.send_replace(core.reports());
        s.metrics.jobs.reset();
        for a in core.jobs.values() {
            let phase = serde_json::to_value(a.phase.wire())
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            s.metrics.jobs.with_label_values(&[&phase]).inc();
        }
    }

    fn observe(&self, event: &Event) {
        let m = &self.node.metrics;
        match event {
            Event::DataRejected { .. } => m.data_rejected.inc(),
            Event::Exited(exit) => m
                .exits
                .with_label_values(&[match exit.stop_reason() {
                    StopReason::Exited { code: EXIT_DONE } => "done",
                    StopReason::Exited {
                        code: EXIT_BAD_INPUT,
                    } => "bad_input",
                    StopReason::Exited {
                        code: EXIT_PREEMPTED,
                    } => "preempted",
                    StopReason::OutOfMemory => "out_of_memory",
                    StopReason::EngineFailure => "engine_lost",
                    _ => "crashed",
                }])
                .inc(),
            _ => {}
        }
    }

    async fn snapshot(&self) -> Result<Vec<ChainJob>, ChainFailure> {
        let s = &self.node;
        let jobs = s.chain.chain_jobs(&s.me).await?;
        let mut paid_gpus = 0u32;
        self.jobs.known.send_modify(|known| {
            for job in &jobs {
                paid_gpus = paid_gpus.saturating_add(job.gpus);
                known.insert(job.key, job.clone());
            }
        });
        // The paid job's GPUs come first: a check holding any of them is
        // told to stop (it is tried again when GPUs are free).
        let stopped = self.gpus.set_paid(paid_gpus).await;
        if stopped > 0 {
            tracing::info!(
                checks = stopped,
                paid_gpus,
                "a check gives its GPUs back to this node's paid job"
            );
        }
        Ok(jobs)
    }

    /// The job as last read on chain, when it was.
    pub(super) fn known(&self, job: Pubkey) -> Option<ChainJob> {
        self.jobs.known.borrow().get(&job).cloned()
    }
}

/// How often the agent checks, without a change of its node's account, that
/// a reported failure has not left its node offline. A report changes the
/// node's account, which the agent hears of at once (and reads again after
/// every resubscription, so a healed partition is seen): this is only for a
/// change that was missed.
const NODE_STATUS_EVERY: Duration = Duration::from_secs(60);

pub use output::OUTPUT_RETRY_FOR;

/// How often an agent whose chain tells it of changes reads its node and job
/// anyway: a change missed while a subscription was down is seen by then.
pub const RECONCILE_EVERY: Duration = Duration::from_secs(30);

/// How long after a failed read of its node and job the agent tries again
/// (sooner when either account changes).
const READ_RETRY: Duration = Duration::from_secs(2);

/// Changes of one account ([`AgentChain::changes`]).
type ChangeStream = futures_util::stream::BoxStream<'static, ()>;

/// When the reconcile loop reads the chain. An assignment changes the
/// node's account, an attestation or a fencing the job's: the chain is read
/// when either changes (and every [`RECONCILE_EVERY`] in case a change was
/// missed), not on every tick. A chain that cannot tell is read every tick.
struct ChainReads {
    node_watch: Option<ChangeStream>,
    /// The job the node holds, and its changes.
    job_watch: Option<(Pubkey, ChangeStream)>,
    /// Whether the chain tells of changes.
    watched: bool,
    next_read: Instant,
    /// When the node's status was last looked at ([`NODE_STATUS_EVERY`]).
    status_checked: Instant,
    /// A look at the node's status is under way.
    bringing_back: Arc<AtomicBool>,
}

impl ChainReads {
    fn new(node_watch: Option<ChangeStream>) -> Self {
        Self {
            watched: node_watch.is_some(),
            node_watch,
            job_watch: None,
            next_read: Instant::now(),
            status_checked: Instant::now(),
            bringing_back: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Whether a wake of the loop reads the chain: always where the chain
    /// cannot tell of changes, else on a change or once the next read is due.
    fn due(&self, changed: bool) -> bool {
        !self.watched || changed || Instant::now() >= self.next_read
    }
}

/// The containers the loop waits on, and what their log shippers start from.
struct Waiters {
    /// Lines a container printed before this agent ran were shipped by the
    /// one that did (or lost with it): they are followed from here (Unix
    /// seconds).
    agent_started: i64,
    /// Containers running before this agent: their metrics files are
    /// followed from where they are now, as their printed lines are.
    adopted: HashSet<String>,
    /// Containers with a waiter.
    waiting: HashSet<String>,
}

impl Waiters {
    fn from_now() -> Self {
        let agent_started = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or_default()
            .saturating_sub(1);
        Self {
            agent_started,
            adopted: HashSet::new(),
            waiting: HashSet::new(),
        }
    }
}

/// The next change on `watch`; never, without one.
async fn next_change(watch: Option<&mut ChangeStream>) -> Option<()> {
    match watch {
        Some(w) => futures_util::StreamExt::next(w).await,
        None => std::future::pending().await,
    }
}

/// Label carrying the node account on every job container, so that agents of
/// several nodes on one host leave each other's containers alone.
pub const NODE_LABEL: &str = "mcjs.node";
