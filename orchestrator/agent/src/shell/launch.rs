//! An assignment's container: its run context (spec, checkpoint pipeline,
//! directories), the restore of its last attested checkpoint, the container
//! the spec asks for and the GPUs it gets; waiting for it to end, what it
//! wrote (its output) and how much disk it uses.

use super::run_dirs::writable;
use super::{AgentError, EventTx, GENERATION_LABEL, JobRunner, NODE_LABEL};
use crate::chain::AgentChain;
use crate::core::{AttestedCheckpoint, ContainerExit, Event, FoundContainer, UploadedCheckpoint};
use crate::fault::{Found, classify};
use crate::spec_store::{SpecStoreError, get_spec};
use mcjs_client::Pubkey;
use mcjs_protocol::StopReason;
use mcjs_protocol::fault::EXIT_DONE;
use mcjs_runtime::docker::JOB_LABEL;
use mcjs_runtime::engine::{ContainerEngine, ContainerId};
use mcjs_runtime::launch::{LaunchError, launch};
use mcjs_runtime::store::{CheckpointPipeline, CheckpointStore, ExpectedCheckpoint, StoreError};
use mcjs_spec::JobSpec;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the agent knows about one assignment beyond the core's state.
pub(super) struct RunCtx {
    pub(super) spec: JobSpec,
    pub(super) pipeline: CheckpointPipeline,
    pub(super) output_dir: PathBuf,
    /// When the job's disk use was last measured.
    pub(super) measured_at: Mutex<Option<Instant>>,
    /// Held by a look for checkpoints: the periodic one and the one after
    /// the container exits must not both read a checkpoint the other is
    /// storing and removing (the loser found it gone, and a checkpoint that
    /// vanishes mid-read is the job's fault).
    pub(super) collecting: tokio::sync::Mutex<()>,
}

/// How often a running job's disk use is measured.
const FOOTPRINT_EVERY: Duration = Duration::from_secs(2);

/// How long a paid run waits for a check to give its GPUs back: a check
/// notices within a poll and removes its container.
const PAID_GPU_WAIT: Duration = Duration::from_secs(30);

impl<C: AgentChain, E: ContainerEngine + 'static> JobRunner<C, E> {
    /// The job containers this node's agents left running (found at start,
    /// by their labels), for the core to adopt or remove.
    pub(super) async fn find_containers(&self) -> Result<Vec<FoundContainer>, AgentError> {
        let list = self
            .node
            .engine
            .list_labelled(GENERATION_LABEL)
            .await
            .map_err(|e| AgentError::List(e.to_string()))?;
        let mut found = Vec::new();
        for c in list {
            let labels = c.labels;
            let (Some(id), Some(job), Some(generation)) = (
                Some(c.id.0),
                labels.get(JOB_LABEL).and_then(|j| j.parse::<Pubkey>().ok()),
                labels
                    .get(GENERATION_LABEL)
                    .and_then(|g| g.parse::<u32>().ok()),
            ) else {
                continue;
            };
            if labels.get(NODE_LABEL) != Some(&self.node.me.node.to_string()) {
                continue;
            }
            let running = c.running;
            found.push(FoundContainer {
                id,
                job,
                generation,
                running,
            });
        }
        Ok(found)
    }

    /// The context of an assignment, rebuilt from the spec store when the
    /// agent adopted its container after a restart.
    pub(super) async fn ctx(&self, job: Pubkey, generation: u32) -> Result<Arc<RunCtx>, String> {
        let s = &self.node;
        if let Some(ctx) = self
            .jobs
            .runs
            .lock()
            .expect("runs lock")
            .get(&(job, generation))
        {
            return Ok(Arc::clone(ctx));
        }
        let spec_hash = self
            .known(job)
            .map(|j| j.spec_hash)
            .ok_or_else(|| format!("job {job} is not on this node"))?;
        let spec = get_spec(s.store.as_ref(), &spec_hash)
            .await
            .map_err(|e| e.to_string())?;
        let ctx = Arc::new(
            self.run_ctx(job, generation, spec)
                .map_err(|e| e.to_string())?,
        );
        // Two looks rebuilding it at once share the first one kept.
        let kept = self
            .jobs
            .runs
            .lock()
            .expect("runs lock")
            .entry((job, generation))
            .or_insert(ctx)
            .clone();
        Ok(kept)
    }

    pub(super) fn run_ctx(
        &self,
        job: Pubkey,
        generation: u32,
        spec: JobSpec,
    ) -> Result<RunCtx, mcjs_runtime::store::StoreError> {
        let dir = self.node.job_dir(job, generation);
        let store = CheckpointStore::new(
            Arc::clone(&self.node.store),
            usize::from(spec.checkpoint.keep),
        );
        Ok(RunCtx {
            pipeline: CheckpointPipeline {
                store,
                job_id: job.to_string(),
                generation,
                local_root: writable(&dir).join("checkpoints"),
                hash_threads: self.node.config.hash_threads,
                limits: crate::fault::checkpoint_limits(&spec),
                every_steps: spec.checkpoint.every_steps,
            },
            output_dir: writable(&dir).join("output"),
            measured_at: Mutex::new(None),
            collecting: tokio::sync::Mutex::new(()),
            spec,
        })
    }

    pub(super) async fn launch(
        &self,
        job: Pubkey,
        generation: u32,
        restore: Option<AttestedCheckpoint>,
    ) -> Event {
        let s = &self.node;
        let started = Instant::now();
        let failed = |stop: StopReason, reason: String| {
            tracing::warn!(%job, generation, %reason, "the job cannot be launched");
            Event::LaunchFailed { stop, reason }
        };
        let Some(chain_job) = self.known(job) else {
            // Only a fenced assignment gets here: nothing is reported for it.
            return failed(StopReason::StartRefused, "the job left this node".into());
        };
        let spec = patiently(
            "read the job's spec",
            || get_spec(s.store.as_ref(), &chain_job.spec_hash),
            |e| matches!(e, SpecStoreError::Store { .. }),
        )
        .await;
        let spec = match spec {
            Ok(spec) => spec,
            Err(e) => return classify(Found::Spec(&e)),
        };
        let ctx = match self.run_ctx(job, generation, spec) {
            Ok(c) => Arc::new(c),
            Err(e) => return failed(StopReason::StoreUnavailable, e.to_string()),
        };
        let dir = self.node.job_dir(job, generation);
        let spec = &ctx.spec;
        if spec.output.dir.as_str() != mcjs_spec::DEFAULT_OUTPUT_DIR {
            return failed(
                StopReason::SpecUnusable,
                format!(
                    "output dir {} is not supported by this agent; use the default {}",
                    spec.output.dir.as_str(),
                    mcjs_spec::DEFAULT_OUTPUT_DIR
                ),
            );
        }
        let restoring = async {
            let Some(last) = restore else {
                return Ok(None);
            };
            self.restore(job, &ctx, last, dir.join("restore"), started)
                .await
                .map(Some)
                .map_err(|reason| failed(StopReason::RestoreFailed, reason))
        };
        // The run's volume is made while the checkpoint downloads: neither
        // needs the other (the restore goes beside the volume, not on it).
        let (restored, mounted) = tokio::join!(restoring, self.node.mount_run(&dir, spec));
        let restore_dir = match (restored, mounted) {
            (Ok(restore_dir), Ok(())) => restore_dir,
            (Err(event), _) => {
                self.node.clear_run(dir).await;
                return event;
            }
            (Ok(_), Err(reason)) => {
                self.node.clear_run(dir).await;
                return failed(StopReason::NodeDiskFull, reason);
            }
        };
        let interval = crate::core::checkpoint_interval(
            chain_job.checkpoint_interval,
            s.config.max_checkpoint_interval,
        );
        let (mut cspec, inputs) = s.container(job, spec, &dir, restore_dir, interval).await;
        cspec.labels = vec![
            (GENERATION_LABEL.to_string(), generation.to_string()),
            (NODE_LABEL.to_string(), s.me.node.to_string()),
        ];
        let gpus = u32::from(spec.request.hardware.gpu_count);
        self.gpus_cleared_for_paid(job, gpus).await;
        let devices = self.gpus.paid_devices(gpus).await;
        cspec.resources.gpus = s.gpu_request(job, devices);
        let launched = launch(&s.engine, &s.cache, &inputs, &cspec).await;
        if launched.is_err() {
            self.node.clear_run(dir).await;
        }
        match launched {
            Ok((id, staged)) => {
                tracing::info!(%job, generation, container = %id, inputs = staged.len(), ms = started.elapsed().as_millis() as u64, "job container running");
                self.gpus.paid_started((job, generation), gpus);
                self.jobs
                    .runs
                    .lock()
                    .expect("runs lock")
                    .insert((job, generation), ctx);
                Event::Launched { container: id.0 }
            }
            Err(LaunchError::Staging { source: e, .. }) => {
                tracing::error!(%job, generation, error = %e, "input not staged: the job is not started");
                classify(Found::Staging(&e))
            }
            Err(e) => {
                tracing::warn!(%job, generation, reason = %e, "the job cannot be launched");
                classify(Found::Launch(&e))
            }
        }
    }

    /// Restores the job's last attested checkpoint (`last`) into
    /// `restore_root`: a warm standby's copy, moved into place, else the
    /// store's, verified against the attested hash (an earlier attested one
    /// when the last cannot be fetched or verified).
    async fn restore(
        &self,
        job: Pubkey,
        ctx: &RunCtx,
        last: AttestedCheckpoint,
        restore_root: PathBuf,
        started: Instant,
    ) -> Result<PathBuf, String> {
        let s = &self.node;
        let job_id = job.to_string();
        let restore_from = async |expected: &[ExpectedCheckpoint]| {
            patiently(
                "restore the last checkpoint",
                || {
                    ctx.pipeline.store.restore(
                        &job_id,
                        expected,
                        ctx.pipeline.limits,
                        &restore_root,
                    )
                },
                StoreError::is_unavailable,
            )
            .await
        };
        // Kept on this node as the job's warm standby: moved into
        // place, not downloaded.
        if let Some(copy) = self.jobs.standby.take(job, last.step, last.hash).await {
            match super::standby::move_copy(&copy, &restore_root).await {
                Ok(dir) => {
                    ctx.pipeline.store.adopt(&job_id, &copy.checkpoint);
                    tracing::info!(%job, step = last.step, bytes = copy.checkpoint.total_bytes(), ms = started.elapsed().as_millis() as u64, standby = true, "restoring from checkpoint");
                    return Ok(dir);
                }
                Err(e) => {
                    tracing::warn!(%job, error = %e, "cannot use the standby copy; downloading the checkpoint");
                }
            }
        }
        // The last attested checkpoint, named by the job's account,
        // is what a restore almost always uses: the job's history
        // (a transaction read per attestation, growing with the job)
        // is read only when it cannot be fetched or verified.
        let mut expected = vec![ExpectedCheckpoint {
            step: last.step,
            hash: last.hash,
        }];
        let mut restored = restore_from(&expected).await;
        if matches!(&restored, Err(e) if !e.is_unavailable()) {
            match s.chain.attested(job).await {
                Ok(history) => {
                    let before = expected.len();
                    expected.extend(
                        history
                            .into_iter()
                            .filter(|a| (a.epoch, a.step) < (last.epoch, last.step))
                            .map(|a| ExpectedCheckpoint {
                                step: a.step,
                                hash: a.hash,
                            }),
                    );
                    if expected.len() > before {
                        restored = restore_from(&expected).await;
                    }
                }
                Err(e) => {
                    tracing::warn!(%job, error = %e, "cannot read the job's attestation history; only the last checkpoint could be restored")
                }
            }
        }
        match restored {
            Ok(r) => {
                for skipped in &r.skipped {
                    tracing::warn!(%job, %skipped, "checkpoint skipped on restore");
                }
                tracing::info!(%job, step = r.checkpoint.step, bytes = r.checkpoint.total_bytes(), ms = started.elapsed().as_millis() as u64, "restoring from checkpoint");
                Ok(r.dir)
            }
            Err(e) => Err(e.to_string()),
        }
    }

    /// Waits until no check holds any of the paid job's first `n` GPUs: a
    /// check told to stop (the snapshot that saw the job did) removes its
    /// container within a poll. Bounded: a check that has not let go by then
    /// is logged, and the paid run starts.
    pub(super) async fn gpus_cleared_for_paid(&self, job: Pubkey, n: u32) {
        self.gpus.set_paid(n).await;
        let waited = Instant::now();
        while !self.gpus.clear_for_paid(n).await {
            if waited.elapsed() >= PAID_GPU_WAIT {
                tracing::error!(%job, gpus = n, "a check still holds this node's GPUs; the paid job starts anyway");
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub(super) async fn collect(&self, job: Pubkey, ctx: &RunCtx) -> Event {
        let s = &self.node;
        let _one_look = ctx.collecting.lock().await;
        let started = Instant::now();
        match ctx.pipeline.collect().await {
            Ok(stored) => {
                let mut out = Vec::new();
                let n = stored.len().max(1) as f64;
                for c in stored {
                    let bytes = c.total_bytes();
                    let secs = started.elapsed().as_secs_f64() / n;
                    s.metrics.checkpoint_seconds.observe(secs);
                    s.metrics.checkpoint_bytes.observe(bytes as f64);
                    if secs > 0.0 {
                        s.metrics.hash_bytes_per_second.set(bytes as f64 / secs);
                    }
                    let Ok(epoch) = u32::try_from(c.epoch) else {
                        return Event::CollectFailed {
                            reason: format!(
                                "checkpoint epoch {} does not fit the chain's u32",
                                c.epoch
                            ),
                        };
                    };
                    tracing::info!(%job, step = c.step, hash = %c.hash, bytes, "checkpoint stored");
                    self.jobs
                        .stored_at
                        .lock()
                        .expect("lock")
                        .insert((job, c.step), Instant::now());
                    out.push(UploadedCheckpoint {
                        epoch,
                        step: c.step,
                        hash: c.hash,
                    });
                }
                if let Some(reason) = self.footprint(ctx).await {
                    return classify(Found::Footprint(reason));
                }
                Event::CheckpointsCollected { stored: out }
            }
            Err(e) => match classify(Found::Checkpoint(&e)) {
                // The owner reads this: in its container's paths, not the
                // node's.
                Event::JobFault { reason } => Event::JobFault {
                    reason: crate::fault::in_container_terms(
                        &reason,
                        &ctx.pipeline.local_root,
                        &ctx.output_dir,
                    ),
                },
                other => other,
            },
        }
    }

    /// What the job uses of the disk, over its declaration; measured at most
    /// every [`FOOTPRINT_EVERY`].
    pub(super) async fn footprint(&self, ctx: &RunCtx) -> Option<String> {
        {
            let mut at = ctx.measured_at.lock().expect("measured lock");
            if at.is_some_and(|t| t.elapsed() < FOOTPRINT_EVERY) {
                return None;
            }
            *at = Some(Instant::now());
        }
        let job_dir = ctx.output_dir.parent()?.to_path_buf();
        let spec = ctx.spec.clone();
        tokio::task::spawn_blocking(move || crate::fault::footprint(&job_dir, &spec))
            .await
            .ok()
            .flatten()
    }

    /// Follows a running container's output (and its metrics file) into the
    /// store, from `since`
    /// (unix seconds: for a container adopted after a restart, what it
    /// printed while no agent ran is not shipped again; its metrics file
    /// is followed from its end, `adopted`). The handle ends
    /// once the container's output has ended and its last chunk is stored.
    pub(super) fn ship_logs(
        &self,
        job: Pubkey,
        generation: u32,
        container: &str,
        since: i64,
        adopted: bool,
    ) -> tokio::task::JoinHandle<mcjs_runtime::logs::ShipReport> {
        use mcjs_runtime::logs;
        let s = Arc::clone(&self.node);
        let (sink, source) = logs::channel();
        let started_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or_default();
        // What the spec lets one run keep (`output.logs_cap`), where the
        // run's context is known (a container adopted after a restart
        // before it is: the default).
        let cap = self
            .jobs
            .runs
            .lock()
            .expect("runs lock")
            .get(&(job, generation))
            .and_then(|ctx| ctx.spec.output.logs_cap)
            .map_or(logs::DEFAULT_CAP_BYTES, |cap| cap.0);
        let chunker = logs::LogChunker::new(&job.to_string(), generation, started_ms, cap);
        let shipper = tokio::spawn(logs::ship(Arc::clone(&s.store), chunker, source));
        self.jobs
            .log_flushers
            .lock()
            .expect("flushers lock")
            .insert((job, generation), sink.flusher());
        // The job's metrics file goes the same way, as `metrics` lines,
        // until its printed lines end (the container ended).
        let (stop_metrics, metrics_stopped) = tokio::sync::oneshot::channel();
        let metrics = writable(&s.job_dir(job, generation)).join("metrics");
        tokio::spawn(logs::tail_metrics(
            metrics,
            sink.clone(),
            metrics_stopped,
            adopted,
        ));
        let id = ContainerId(container.to_string());
        tokio::spawn(async move {
            if let Err(e) = s.engine.follow_output(&id, since, sink).await {
                tracing::warn!(%job, generation, error = %e, "cannot follow the job's output: its lines are not shipped");
            }
            let _ = stop_metrics.send(());
        });
        shipper
    }

    pub(super) async fn wait_exit(
        &self,
        job: Pubkey,
        generation: u32,
        container: String,
        tx: EventTx,
        logs: tokio::task::JoinHandle<mcjs_runtime::logs::ShipReport>,
    ) {
        let s = &self.node;
        let exit = match s.engine.wait(&ContainerId(container.clone())).await {
            Ok(r) => ContainerExit {
                code: r.code,
                oom_killed: r.oom_killed,
                engine_lost: false,
                last_logs: r.last_log_lines,
            },
            Err(e) => {
                tracing::warn!(%job, %container, error = %e, "lost the container");
                ContainerExit {
                    code: -1,
                    oom_killed: false,
                    engine_lost: true,
                    last_logs: vec![e.to_string()],
                }
            }
        };
        // The job's last lines are shipped while the node may still write
        // its logs: before the completion or report that ends that.
        self.jobs
            .log_flushers
            .lock()
            .expect("flushers lock")
            .remove(&(job, generation));
        match tokio::time::timeout(LOGS_DRAIN_FOR, logs).await {
            Ok(Ok(report)) => {
                tracing::debug!(%job, generation, lines = report.lines, chunks = report.chunks, dropped = report.dropped_lines, "job output shipped")
            }
            _ => {
                tracing::warn!(%job, generation, "the job's last lines were not all shipped in time")
            }
        }
        // The checkpoints written just before the exit are attested before
        // the job is completed or reported.
        if let Ok(ctx) = self.ctx(job, generation).await {
            let event = self.collect(job, &ctx).await;
            let _ = tx.send((job, generation, event));
        }
        // A write past the declared disk was refused by the volume: the job
        // failed on its own declaration.
        if exit.code != EXIT_DONE
            && !exit.engine_lost
            && self.node.disk_full(&self.node.job_dir(job, generation))
        {
            let reason = format!(
                "filled its declared disk of {} bytes: writes past it were refused",
                self.ctx(job, generation)
                    .await
                    .map_or(0, |c| c.spec.request.hardware.disk.0)
            );
            tracing::warn!(%job, generation, %reason, "the job ran out of its own disk");
            let _ = tx.send((job, generation, Event::JobFault { reason }));
        }
        tracing::info!(%job, generation, code = exit.code, oom_killed = exit.oom_killed, "job container exited");
        let _ = tx.send((job, generation, Event::Exited(exit)));
    }
}

/// How long a launch waits out a store it cannot reach (an outage of the
/// store or of the gateway that signs its URLs) before the run is given up
/// as [`StopReason::StoreUnavailable`] / [`StopReason::RestoreFailed`]:
/// well inside the scheduler's start timeout, so waiting costs nobody a
/// failure, and long enough for a gateway whose chain endpoint refuses it
/// for a while.
pub(crate) const STORE_PATIENCE: Duration = Duration::from_secs(120);
/// How long an exited container's last lines may take to reach the store
/// before its exit is handled anyway.
const LOGS_DRAIN_FOR: Duration = Duration::from_secs(10);
/// The first wait after a refused or failed store request. Short: the
/// refusal a launch meets most is the store gateway's, whose chain view is a
/// moment behind this agent's (it hears of the assignment over its own
/// subscription and asks for the spec at once); waited out for a whole
/// second, that refusal held provisioning at about 1.1 s instead of 0.14 s
/// (bench/results/recovery-before-after.txt).
const FIRST_STORE_RETRY: Duration = Duration::from_millis(250);
const MAX_STORE_RETRY: Duration = Duration::from_secs(16);

/// `op`, tried again while it fails in a way `unavailable` calls the
/// store's (not the job's: a missing or corrupt object is answered at
/// once), backing off from 250 ms to 16 s, for at most [`STORE_PATIENCE`].
pub(crate) async fn patiently<T, E: std::fmt::Display, F: Future<Output = Result<T, E>>>(
    what: &str,
    mut op: impl FnMut() -> F,
    unavailable: impl Fn(&E) -> bool,
) -> Result<T, E> {
    let started = Instant::now();
    let mut delay = FIRST_STORE_RETRY;
    loop {
        match op().await {
            Err(e) if unavailable(&e) && started.elapsed() + delay <= STORE_PATIENCE => {
                tracing::warn!(error = %e, retry_in = ?delay, "cannot {what}: the store is unreachable; trying again");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(MAX_STORE_RETRY);
            }
            other => return other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[tokio::test]
    async fn a_store_that_comes_back_is_waited_for_and_a_missing_object_is_not() {
        // Unreachable once, then answering: the second try's answer.
        let calls = AtomicU32::new(0);
        let started = Instant::now();
        let got = patiently(
            "read",
            || async {
                match calls.fetch_add(1, Ordering::SeqCst) {
                    0 => Err("connection refused"),
                    _ => Ok(7),
                }
            },
            |e| *e == "connection refused",
        )
        .await;
        assert_eq!(got, Ok(7));
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        assert!(
            started.elapsed() >= FIRST_STORE_RETRY,
            "it waited before trying again"
        );

        // An answer about what the store holds is returned at once.
        let calls = AtomicU32::new(0);
        let got: Result<u32, &str> = patiently(
            "read",
            || async {
                calls.fetch_add(1, Ordering::SeqCst);
                Err("not found")
            },
            |e| *e == "connection refused",
        )
        .await;
        assert_eq!(got, Err("not found"));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn only_an_unreachable_store_is_waited_for() {
        let unreachable = StoreError::Object {
            action: "list",
            path: "jobs/x".into(),
            source: object_store::Error::Generic {
                store: "S3",
                source: "502 Bad Gateway".into(),
            },
        };
        assert!(unreachable.is_unavailable());
        let missing = StoreError::Object {
            action: "list",
            path: "jobs/x".into(),
            source: object_store::Error::NotFound {
                path: "jobs/x".into(),
                source: "gone".into(),
            },
        };
        assert!(!missing.is_unavailable());
        let none = StoreError::NoUsableCheckpoint {
            job_id: "x".into(),
            tried: Vec::new(),
        };
        assert!(!none.is_unavailable());
    }
}
