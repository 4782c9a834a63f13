//! The thin async shell around [`crate::core`]: an idempotent reconcile loop
//! re-driven every tick, whose actions run as tracked tasks that report back
//! as events. Shutdown: a `CancellationToken` to tell, a `TaskTracker` to wait.

use crate::chain::{AgentChain, ChainFailure, NodeIdentity};
use crate::core::{Action, ChainJob, Core, CorePolicy, Event, OUTPUT_ATTESTED, Tx, TxFailure};
use crate::gpus::GpuLedger;
use crate::metrics::AgentMetrics;
use futures_util::FutureExt;
use launch::RunCtx;
use mcjs_client::Pubkey;
use mcjs_protocol::fault::{EXIT_BAD_INPUT, EXIT_DONE, EXIT_PREEMPTED};
use mcjs_protocol::{JobReport, StopReason};
use mcjs_runtime::docker::DockerEngine;
use mcjs_runtime::engine::{ContainerEngine, ContainerId, EngineError, JobSignal};
use mcjs_runtime::staging::{DataCache, StagingPolicy};
use mcjs_runtime::volume::{self, DiskBound};
use object_store::ObjectStore;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

mod api;
mod challenge;
mod check_finder;
mod checks;
mod heartbeat;
mod launch;
mod output;
mod power;
mod run_dirs;
mod standby;
mod transactions;

pub use api::{router, serve};

/// Whether a removal left no container behind (removed now, or already gone).
fn gone(removed: &Result<(), EngineError>) -> bool {
    matches!(removed, Ok(()) | Err(EngineError::UnknownContainer(_)))
}

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

struct Shared<C, E = DockerEngine> {
    chain: C,
    engine: E,
    config: AgentConfig,
    /// This node's accounts, as every instruction of its assignments names them.
    me: NodeIdentity,
    store: Arc<dyn ObjectStore>,
    store_root: Arc<dyn ObjectStore>,
    cache: DataCache,
    metrics: AgentMetrics,
    /// Each job on this node as last seen on chain.
    known: Mutex<HashMap<Pubkey, ChainJob>>,
    runs: Mutex<HashMap<(Pubkey, u32), Arc<RunCtx>>>,
    /// When each checkpoint was stored, for the attestation latency.
    stored_at: Mutex<HashMap<(Pubkey, u64), Instant>>,
    /// Each running assignment's log shipper, flushed before an attestation.
    log_flushers: Mutex<HashMap<(Pubkey, u32), mcjs_runtime::logs::LogFlusher>>,
    reports: Mutex<Vec<JobReport>>,
    /// The node's power for the heartbeat (`None`: no UPS, or unread).
    power: Mutex<Option<mcjs_protocol::NodePower>>,
    /// Whether this host can give containers GPUs.
    host_gpus: bool,
    /// Which of the node's GPUs the paid job and checks hold
    /// ([`crate::gpus`]): kept whether or not the host has GPUs, so a check
    /// waits for the node's declared GPUs either way.
    gpus: Mutex<GpuLedger>,
    /// The checkpoints this node keeps as a warm standby ([`standby`]).
    standby: standby::StandbyCopies,
}

type EventTx = mpsc::UnboundedSender<(Pubkey, u32, Event)>;

/// The node agent, on Docker by default; any [`ContainerEngine`] (the
/// runtime's fake one in tests) through [`Agent::with_engine`].
pub struct Agent<C: AgentChain, E: ContainerEngine + 'static = DockerEngine> {
    shared: Arc<Shared<C, E>>,
}

impl<C: AgentChain, E: ContainerEngine + 'static> Clone for Agent<C, E> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
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
            shared: Arc::new(Shared {
                chain,
                engine,
                me: NodeIdentity {
                    node,
                    provider,
                    payout: provider_account.payout,
                    deployment,
                },
                store_root: Arc::clone(&store),
                store,
                cache,
                metrics,
                known: Mutex::default(),
                runs: Mutex::default(),
                stored_at: Mutex::default(),
                log_flushers: Mutex::default(),
                reports: Mutex::default(),
                power: Mutex::default(),
                host_gpus: std::path::Path::new("/dev/nvidiactl").exists(),
                gpus: Mutex::new(GpuLedger::new(u32::from(node_account.hardware.gpu_count))),
                standby: Default::default(),
                config,
            }),
        })
    }

    pub fn node(&self) -> Pubkey {
        self.shared.me.node
    }

    /// How this agent holds jobs to their declared disk (never
    /// [`DiskBound::Auto`]: resolved when the agent started).
    pub fn disk_bound(&self) -> DiskBound {
        self.shared.config.disk
    }

    pub fn metrics(&self) -> &AgentMetrics {
        &self.shared.metrics
    }

    /// The latest job reports (what the heartbeat carries).
    pub fn reports(&self) -> Vec<JobReport> {
        self.shared.reports.lock().expect("reports lock").clone()
    }

    /// Runs until `cancel` fires. Containers keep running when the agent
    /// stops: the next start adopts them.
    pub async fn run(&self, cancel: CancellationToken) -> Result<(), AgentError> {
        let s = &self.shared;
        let tracker = TaskTracker::new();
        let (tx, mut rx) = mpsc::unbounded_channel();
        // Lines a container printed before this agent ran were shipped by
        // the one that did (or lost with it): follow from here.
        let agent_started = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or_default()
            .saturating_sub(1);
        let mut core = Core::new(CorePolicy {
            max_checkpoint_interval: s.config.max_checkpoint_interval,
        });
        let found = self.find_containers().await?;
        // Containers running before this agent: their metrics files are
        // followed from where they are now, as their printed lines are.
        let adopted: HashSet<String> = found.iter().map(|c| c.id.clone()).collect();
        core.found_containers(found);
        for url in s
            .config
            .scheduler
            .iter()
            .chain(&s.config.standby_schedulers)
        {
            tracker.spawn(heartbeat::heartbeats(
                Arc::clone(s),
                url.clone(),
                cancel.clone(),
            ));
        }
        // An assignment changes the node's account, an attestation or a
        // fencing the job's: the chain is read when either changes (and
        // every `RECONCILE_EVERY` in case a change was missed), not on every
        // tick. A chain that cannot tell is read every tick.
        let mut node_watch = s.chain.changes(s.me.node);
        let watched = node_watch.is_some();
        let mut job_watch: Option<(Pubkey, ChangeStream)> = None;
        let mut next_read = Instant::now();
        tracker.spawn(self.clone().checker(cancel.clone(), watched));
        tracker.spawn(challenge::answer_challenges(Arc::clone(s), cancel.clone()));
        tracker.spawn(standby::stand_by(Arc::clone(s), cancel.clone()));
        let (power_tx, mut power_rx) = mpsc::unbounded_channel();
        if let Some(ups) = s.config.ups.clone() {
            tracker.spawn(power::watch_power(ups, power_tx, cancel.clone()));
        }
        let mut waiting: HashSet<String> = HashSet::new();
        let mut tick = tokio::time::interval(s.config.tick);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // A reported failure takes the node offline; once this agent can
        // reach the chain again (a partition healed), it puts it back.
        let mut status_checked = Instant::now();
        let checking = Arc::new(std::sync::atomic::AtomicBool::new(false));
        loop {
            let mut node_changed = false;
            let mut job_changed = false;
            let woke = tokio::select! {
                _ = cancel.cancelled() => break,
                _ = tick.tick() => true,
                Some(()) = next_change(node_watch.as_mut()) => {
                    tick.reset();
                    node_changed = true;
                    true
                }
                Some(()) = next_change(job_watch.as_mut().map(|(_, w)| w)) => {
                    tick.reset();
                    job_changed = true;
                    true
                }
                Some(state) = power_rx.recv() => {
                    *s.power.lock().expect("power lock") = power::for_heartbeat(state);
                    let actions = core.on_power(state, SystemTime::now());
                    if !actions.is_empty() {
                        tracing::warn!(power = %state, actions = actions.len(), "the node's power changed: acting on its running jobs");
                    }
                    for action in actions {
                        self.execute(action, &tx, &tracker);
                    }
                    false
                }
                Some((job, generation, event)) = rx.recv() => {
                    self.observe(&event);
                    for action in core.on_event(job, generation, event, SystemTime::now()) {
                        self.execute(action, &tx, &tracker);
                    }
                    false
                }
            };
            let chain_now =
                woke && (!watched || node_changed || job_changed || Instant::now() >= next_read);
            if chain_now
                && (node_changed || status_checked.elapsed() > NODE_STATUS_EVERY)
                && !checking.swap(true, std::sync::atomic::Ordering::SeqCst)
            {
                status_checked = Instant::now();
                let (shared, checking) = (Arc::clone(s), Arc::clone(&checking));
                tracker.spawn(async move {
                    if let Ok(Some(node)) = shared.chain.node(shared.me.node).await {
                        match crate::register::bring_back(&shared.chain, &node).await {
                            Ok(true) => tracing::info!(node = %shared.me.node, "node back in service after a reported failure"),
                            Ok(false) => {}
                            Err(e) => tracing::warn!(error = %e.message, "cannot put the node back in service"),
                        }
                    }
                    checking.store(false, std::sync::atomic::Ordering::SeqCst);
                });
            }
            let actions = if chain_now {
                match self.snapshot().await {
                    Ok(snapshot) => {
                        next_read = Instant::now() + RECONCILE_EVERY;
                        if watched {
                            let held = snapshot.first().map(|j| j.key);
                            if job_watch.as_ref().map(|(k, _)| *k) != held {
                                job_watch =
                                    held.and_then(|key| s.chain.changes(key).map(|w| (key, w)));
                            }
                        }
                        core.on_chain(&snapshot, SystemTime::now())
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot read the chain; holding every job as it is");
                        next_read = Instant::now() + READ_RETRY;
                        core.on_tick(SystemTime::now())
                    }
                }
            } else if woke {
                core.on_tick(SystemTime::now())
            } else {
                Vec::new()
            };
            for action in actions {
                self.execute(action, &tx, &tracker);
            }
            // Containers adopted after a restart get a waiter too.
            for a in core.jobs.values() {
                if let crate::core::Phase::Running { container } = &a.phase
                    && waiting.insert(container.clone())
                {
                    let this = self.clone();
                    let (job, generation, container, tx) =
                        (a.job, a.generation, container.clone(), tx.clone());
                    let logs = self.ship_logs(
                        job,
                        generation,
                        &container,
                        agent_started,
                        adopted.contains(&container),
                    );
                    tracker.spawn(async move {
                        this.wait_exit(job, generation, container, tx, logs).await
                    });
                }
            }
            self.publish(&core);
        }
        tracker.close();
        // Waiters wait on containers that outlive the agent: do not wait for them.
        tokio::time::timeout(Duration::from_secs(2), tracker.wait())
            .await
            .ok();
        Ok(())
    }

    fn publish(&self, core: &Core) {
        let s = &self.shared;
        *s.reports.lock().expect("reports lock") = core.reports();
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
        let m = &self.shared.metrics;
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
        let s = &self.shared;
        let jobs = s.chain.chain_jobs(&s.me).await?;
        let mut paid_gpus = 0u32;
        let mut known = s.known.lock().expect("known lock");
        for job in &jobs {
            paid_gpus = paid_gpus.saturating_add(job.gpus);
            known.insert(job.key, job.clone());
        }
        drop(known);
        // The paid job's GPUs come first: a check holding any of them is
        // told to stop (it is tried again when GPUs are free).
        let stopped = s.gpus.lock().expect("gpus lock").set_paid(paid_gpus);
        if !stopped.is_empty() {
            tracing::info!(
                checks = stopped.len(),
                paid_gpus,
                "a check gives its GPUs back to this node's paid job"
            );
        }
        Ok(jobs)
    }

    /// The job as last read on chain, when it was.
    pub(super) fn known(&self, job: Pubkey) -> Option<ChainJob> {
        self.shared
            .known
            .lock()
            .expect("known lock")
            .get(&job)
            .cloned()
    }

    fn execute(&self, action: Action, tx: &EventTx, tracker: &TaskTracker) {
        let this = self.clone();
        let tx = tx.clone();
        tracker.spawn(async move {
            if let Some((job, generation, event)) = this.perform(action).await {
                let _ = tx.send((job, generation, event));
            }
        });
    }

    async fn perform(&self, action: Action) -> Option<(Pubkey, u32, Event)> {
        let s = &self.shared;
        match action {
            Action::Launch {
                job,
                generation,
                restore,
            } => {
                // `start_job` follows the launch: its blockhash is fetched meanwhile.
                s.chain.warm();
                Some((job, generation, self.launch(job, generation, restore).await))
            }
            Action::Collect { job, generation } => {
                // Whatever happens, the core hears back: a look that never
                // reported would stop every later one for the job.
                let look = async {
                    match self.ctx(job, generation).await {
                        Ok(ctx) => self.collect(job, &ctx).await,
                        Err(reason) => Event::CollectFailed { reason },
                    }
                };
                let event = match std::panic::AssertUnwindSafe(look).catch_unwind().await {
                    Ok(event) => event,
                    Err(panic) => Event::CollectFailed {
                        reason: format!(
                            "collecting the checkpoints panicked ({}); they are collected again",
                            panic_message(&*panic)
                        ),
                    },
                };
                Some((job, generation, event))
            }
            Action::SignalCheckpoint {
                job,
                container,
                generation,
            } => {
                if let Err(e) = s
                    .engine
                    .signal(&ContainerId(container), JobSignal::Checkpoint)
                    .await
                {
                    tracing::warn!(%job, error = %e, "cannot signal the job to checkpoint");
                }
                tracing::info!(%job, generation, "checkpoint signal sent");
                None
            }
            Action::Prune {
                job,
                generation,
                below,
                floor,
            } => {
                if let Ok(ctx) = self.ctx(job, generation).await
                    && let Err(e) = ctx
                        .pipeline
                        .store
                        .prune(&job.to_string(), below, floor.as_ref())
                        .await
                {
                    tracing::warn!(%job, error = %e, "cannot prune old checkpoints");
                }
                None
            }
            Action::CollectOutput { job, generation } => {
                Some((job, generation, self.store_output(job, generation).await))
            }
            Action::Send {
                job,
                generation,
                tx,
            } => {
                let started = Instant::now();
                let result = self.send(job, generation, &tx).await;
                let kind = match tx {
                    Tx::Start => "start_job",
                    Tx::Attest { .. } => "attest_checkpoint",
                    Tx::Complete { .. } => "complete_job",
                };
                let attested_output = matches!(&result, Err(f) if f.program_error.as_deref() == Some(OUTPUT_ATTESTED));
                let outcome = if result.is_ok() || attested_output {
                    "confirmed"
                } else {
                    "failed"
                };
                s.metrics
                    .transactions
                    .with_label_values(&[kind, outcome])
                    .inc();
                match &result {
                    Ok(()) => {
                        tracing::info!(%job, generation, ?tx, ms = started.elapsed().as_millis() as u64, "transaction confirmed");
                        if let Tx::Attest { step, .. } = &tx
                            && let Some(at) =
                                s.stored_at.lock().expect("lock").remove(&(job, *step))
                        {
                            s.metrics
                                .attestation_latency_seconds
                                .observe(at.elapsed().as_secs_f64());
                        }
                    }
                    Err(e) if attested_output => {
                        tracing::info!(%job, generation, %e, "output attested")
                    }
                    Err(e) => {
                        tracing::warn!(%job, generation, ?tx, error = %e, "transaction failed")
                    }
                }
                let event = match result {
                    Ok(()) => Event::TxConfirmed(tx),
                    Err(f) => Event::TxFailed {
                        tx,
                        failure: TxFailure {
                            message: f.message,
                            retryable: f.retryable,
                            program_error: f.program_error,
                        },
                    },
                };
                Some((job, generation, event))
            }
            Action::Stop {
                job,
                generation,
                container,
            } => {
                s.metrics.fenced.inc();
                let removed = s.engine.remove(&ContainerId(container.clone())).await;
                if gone(&removed) {
                    tracing::warn!(%job, generation, %container, "fenced container stopped");
                    self.paid_gone(job, generation);
                    self.clear_run(self.job_dir(job, generation)).await;
                } else if let Err(e) = removed {
                    tracing::warn!(%job, generation, %container, error = %e, "cannot stop the fenced container");
                }
                None
            }
            Action::Remove {
                job,
                generation,
                container,
            } => {
                if gone(&s.engine.remove(&ContainerId(container)).await) {
                    self.paid_gone(job, generation);
                    self.clear_run(self.job_dir(job, generation)).await;
                }
                Some((job, generation, Event::Removed))
            }
            Action::RemoveStray { container, run } => {
                tracing::info!(%container, "removing a container of no current assignment");
                let removed = s.engine.remove(&ContainerId(container)).await;
                if let (true, Some((job, generation))) = (gone(&removed), run) {
                    self.paid_gone(job, generation);
                    self.clear_run(self.job_dir(job, generation)).await;
                }
                None
            }
            Action::FlagOverdue {
                job,
                generation,
                late_by,
            } => {
                s.metrics.overdue.inc();
                tracing::warn!(%job, generation, late_by_secs = late_by.as_secs(), "the job missed its checkpoint deadline");
                None
            }
        }
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

/// What a caught panic said.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("no message")
}
