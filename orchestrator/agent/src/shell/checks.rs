//! Verification checks: re-executing another provider's attested interval
//! when this node is drawn as its verifier or referee, and answering in two
//! steps (docs/verification.md): seal the answer (hash and possession
//! digest) in a commitment, then reveal it once both checkers have sealed.

use super::NODE_LABEL;
use super::check_finder::CheckFinder;
use super::gpu_desk::{CheckGpus, GpuDesk};
use super::node::NodeEnv;
use super::run_dirs::writable;
use crate::chain::{AgentChain, Check, CheckedJob};
use crate::checking::{CheckBook, Listed, Next, Step, Tried};
use crate::spec_store::get_spec;
use mcjs_client::Pubkey;
use mcjs_client::ix;
use mcjs_client::program::instructions::CheckerStep;
use mcjs_client::program::state::{CheckAnswer, CheckpointRecord, Party, check_commitment};
use mcjs_protocol::fault::EXIT_DONE;
use mcjs_runtime::checkpoint::hash_possessed_checkpoint_in;
use mcjs_runtime::checkpoint::{Sha256Digest, complete_checkpoints_in};
use mcjs_runtime::confined::ConfinedDir;
use mcjs_runtime::engine::{ContainerEngine, ContainerId};
use mcjs_runtime::launch::launch;
use mcjs_runtime::store::StoreError;
use mcjs_runtime::store::{CheckpointStore, ExpectedCheckpoint};
use mcjs_spec::JobSpec;
use sha2::{Digest, Sha256};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// How often the agent asks the scheduler what it owes as a checker (or,
/// on a chain that cannot tell of changes, scans the chain for it).
const CHECKS_EVERY: Duration = Duration::from_millis(500);

/// How long after a failed check the agent tries it again.
const CHECK_RETRY: Duration = Duration::from_secs(3);

/// Check runs at once on one node: a check re-executes a whole interval, so
/// a node named in many checks runs them one after another rather than
/// starving its own paid job.
const CHECKS_AT_ONCE: usize = 1;

/// A check run may take this many times its job's checkpoint interval (and
/// `CHECK_START_ALLOWANCE` for the container and the restore) before it is
/// stopped and tried again.
const CHECK_INTERVALS_ALLOWED: u32 = 4;
const CHECK_START_ALLOWANCE: Duration = Duration::from_secs(300);

/// Why a check gave no answer.
enum CheckFailure {
    /// The interval's start could not be restored from the store.
    StartUnavailable(String),
    /// The node's paid job holds the GPUs the check needs
    /// ([`crate::gpus`]): tried again, quietly, until they are free.
    Busy(crate::gpus::Busy),
    /// Anything else (the spec, the engine, the run): tried again.
    Other(String),
}

/// The checker: one of the agent's actors. It owns the checks in hand and
/// the answers sealed ([`CheckBook`], shared only by its own tasks), and
/// shares with the job runner the node ([`NodeEnv`]) and, through the
/// [`GpuDesk`], the node's GPUs.
pub(super) struct Checker<C, E> {
    node: Arc<NodeEnv<C, E>>,
    gpus: GpuDesk,
    /// The chain tells of changes ([`AgentChain::changes`]), so this is a
    /// deployment where scans of the program are to be avoided: the checks
    /// are learnt from the scheduler ([`CheckFinder`]).
    watched: bool,
    book: Arc<Mutex<CheckBook>>,
    /// At most [`CHECKS_AT_ONCE`] check runs.
    runs: Arc<tokio::sync::Semaphore>,
}

impl<C, E> Clone for Checker<C, E> {
    fn clone(&self) -> Self {
        Self {
            node: Arc::clone(&self.node),
            gpus: self.gpus.clone(),
            watched: self.watched,
            book: Arc::clone(&self.book),
            runs: Arc::clone(&self.runs),
        }
    }
}

impl<C: AgentChain, E: ContainerEngine + 'static> Checker<C, E> {
    pub(super) fn new(node: Arc<NodeEnv<C, E>>, gpus: GpuDesk, watched: bool) -> Self {
        Self {
            node,
            gpus,
            watched,
            book: Arc::default(),
            runs: Arc::new(tokio::sync::Semaphore::new(CHECKS_AT_ONCE)),
        }
    }

    /// Acts on the verifications this node is named in while the agent
    /// runs: runs the check and seals its answer while the verification is
    /// open, reveals the sealed answer once both checkers have sealed.
    pub(super) async fn run(self, cancel: CancellationToken) {
        let s = &self.node;
        let tracker = TaskTracker::new();
        let mut tick = tokio::time::interval(s.config.tick.max(CHECKS_EVERY));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut finder = CheckFinder::new(s.config.scheduler.as_deref(), s.me.node, self.watched);
        let mut renew_at = Instant::now();
        loop {
            tokio::select! {
                _ = cancel.cancelled() => break,
                _ = tick.tick() => {}
            }
            if Instant::now() >= renew_at {
                renew_at = Instant::now() + self.renew_pool_entry().await;
            }
            let listed = match finder.find(&*s.chain, s.me.node, Instant::now()).await {
                Ok(listed) => listed,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read this node's verification tasks");
                    continue;
                }
            };
            let states: Vec<Listed> = listed
                .iter()
                .map(|c| Listed {
                    id: (c.key, c.role),
                    state: c.verification.state,
                    job: c.verification.job,
                    interval: c.verification.interval,
                })
                .collect();
            let taken = self.book.lock().expect("check book").take(&states);
            for (id, step) in taken {
                let Some(check) = listed.iter().find(|c| (c.key, c.role) == id).cloned() else {
                    continue;
                };
                let this = self.clone();
                let stale = Arc::clone(&finder.stale);
                tracker.spawn(async move {
                    let done = match step {
                        Step::Seal => this.seal(&check).await,
                        Step::Reveal => this.reveal(&check).await,
                    };
                    if !done {
                        tokio::time::sleep(CHECK_RETRY).await;
                    }
                    this.book.lock().expect("check book").done(&id);
                    stale.store(true, std::sync::atomic::Ordering::SeqCst);
                });
            }
        }
        tracker.close();
    }

    /// Enters this node in the checker pool of its GPU model, or renews its
    /// entry (state/checker_pool.rs): the program draws checkers only from
    /// the pool, and an entry not renewed for `POOL_MEMBERSHIP_SECS` is
    /// passed over. An offline node does not (it would be passed over). When
    /// to renew next: a quarter of the membership, or a minute after a
    /// failure.
    async fn renew_pool_entry(&self) -> Duration {
        use mcjs_client::program::state::{NodeStatus, POOL_RENEW_SECS};
        let s = &self.node;
        let retry = Duration::from_secs(60);
        let node = match s.chain.node(s.me.node).await {
            Ok(Some(node)) => node,
            Ok(None) => return retry,
            Err(e) => {
                tracing::debug!(error = %e, "cannot read the node to renew its checker pool entry");
                return retry;
            }
        };
        if node.status == NodeStatus::Offline {
            return retry;
        }
        let ix = mcjs_client::ix::enter_checker_pool(
            &s.chain.authority(),
            &s.me.node,
            &node.provider,
            &node.hardware.gpu_model,
        );
        match s.chain.send(ix).await {
            Ok(()) => {
                tracing::info!(gpu_model = %node.hardware.gpu_model, "entered in the checker pool");
                Duration::from_secs(POOL_RENEW_SECS.unsigned_abs())
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot enter the node in its checker pool; trying again in a minute");
                retry
            }
        }
    }

    /// Runs the check and seals its answer; `false` to try again later.
    async fn seal(&self, check: &Check) -> bool {
        let v = &check.verification;
        let role = role(check.role);
        let id = (check.key, check.role);
        let known = self.known_answer(check);
        let answer = match known {
            Some(answer) => answer,
            None => {
                let Ok(_run) = self.runs.acquire().await else {
                    return false;
                };
                let tried = match self.check(check).await {
                    Ok(answer) => Tried::Answered(answer),
                    Err(CheckFailure::StartUnavailable(e)) => {
                        tracing::warn!(job = %v.job, interval = v.interval, role, error = %e, "cannot restore the interval's start");
                        Tried::StartUnavailable
                    }
                    Err(CheckFailure::Busy(busy)) => {
                        tracing::debug!(job = %v.job, interval = v.interval, role, %busy, "the check waits for GPUs");
                        Tried::Busy
                    }
                    Err(CheckFailure::Other(e)) => {
                        tracing::warn!(job = %v.job, interval = v.interval, role, error = %e, "cannot check the interval; trying again shortly");
                        Tried::Failed
                    }
                };
                match self.book.lock().expect("check book").tried(&id, tried) {
                    Next::Seal(answer) => answer,
                    Next::Retry | Next::WaitForGpus => return false,
                }
            }
        };
        self.book.lock().expect("check book").seal(id, answer);
        // Kept on disk before the seal is sent: an agent restarted after
        // sealing still opens its commitment.
        if let Err(e) = self.keep_answer(check, &answer) {
            tracing::warn!(job = %v.job, interval = v.interval, role, error = %e, "cannot keep the check's answer on disk; not sealing");
            return false;
        }
        let salt = self.salt(&check.key, check.role);
        let commitment = check_commitment(&check.key, &self.node.me.node, &answer, &salt);
        let ix = ix::attest_verification(
            &self.node.chain.authority(),
            &self.node.me.node,
            &check.key,
            CheckerStep::Seal { commitment },
        );
        match self.node.chain.send(ix).await {
            Ok(()) => {
                tracing::info!(job = %v.job, interval = v.interval, role, answer = %describe(&answer), "interval checked; answer sealed");
                true
            }
            Err(e) => {
                tracing::warn!(job = %v.job, interval = v.interval, role, error = %e, "sealing the check's answer refused");
                false
            }
        }
    }

    /// Reveals the answer this node sealed; `false` to try again later.
    async fn reveal(&self, check: &Check) -> bool {
        let v = &check.verification;
        let role = role(check.role);
        let id = (check.key, check.role);
        let known = self.known_answer(check);
        let Some(answer) = known else {
            // No other answer opens the commitment.
            tracing::warn!(job = %v.job, interval = v.interval, role, "no sealed answer to reveal (it was lost from this node's work directory)");
            return true;
        };
        let salt = self.salt(&check.key, check.role);
        let ix = ix::attest_verification(
            &self.node.chain.authority(),
            &self.node.me.node,
            &check.key,
            CheckerStep::Reveal { answer, salt },
        );
        match self.node.chain.send(ix).await {
            Ok(()) => {
                tracing::info!(job = %v.job, interval = v.interval, role, answer = %describe(&answer), "check answer revealed");
                self.book.lock().expect("check book").revealed(&id);
                let _ = std::fs::remove_file(self.answer_path(check));
                true
            }
            Err(e) => {
                tracing::warn!(job = %v.job, interval = v.interval, role, error = %e, "revealing the check's answer refused");
                false
            }
        }
    }

    /// The answer sealed for this check: in memory, else kept on disk by an
    /// earlier run of the agent.
    fn known_answer(&self, check: &Check) -> Option<CheckAnswer> {
        let sealed = self
            .book
            .lock()
            .expect("check book")
            .sealed(&(check.key, check.role));
        sealed.or_else(|| self.kept_answer(check))
    }

    /// Where a sealed answer is kept until it is revealed.
    fn answer_path(&self, check: &Check) -> PathBuf {
        self.node
            .config
            .work_dir
            .join("sealed")
            .join(format!("{}-{}", check.key, role(check.role)))
    }

    /// Writes the answer (then syncs and renames it into place).
    fn keep_answer(&self, check: &Check, answer: &CheckAnswer) -> std::io::Result<()> {
        use std::io::Write;
        let path = self.answer_path(check);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let tmp = path.with_extension("tmp");
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(encode_answer(answer).as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, &path)
    }

    /// The answer kept for this check, if any and readable.
    fn kept_answer(&self, check: &Check) -> Option<CheckAnswer> {
        decode_answer(&std::fs::read_to_string(self.answer_path(check)).ok()?)
    }

    /// The salt of this node's commitment: derived from a signature of the
    /// node's operator key, so nobody else can compute it and the agent
    /// needs to keep nothing but the answer.
    fn salt(&self, verification: &Pubkey, role: Party) -> [u8; 32] {
        let mut message = b"mcjs-check-salt/1".to_vec();
        message.extend_from_slice(verification.as_ref());
        message.extend_from_slice(self::role(role).as_bytes());
        Sha256::digest(self.node.chain.sign(&message)).into()
    }

    /// Re-executes a verified interval: restores its start checkpoint (none:
    /// from scratch) from the store, verified against the chain, runs the
    /// job's image exactly as a paid run is started (the spec fixes the
    /// checkpoint steps, so nothing tells the job it is being checked),
    /// stops the container once the job has checkpointed at or past the
    /// interval's end step, and hashes that checkpoint as the attestation
    /// hash is defined, with its possession digest under the
    /// verification's key.
    async fn check(&self, check: &Check) -> Result<CheckAnswer, CheckFailure> {
        // GPUs the node's paid job does not hold, or no check yet.
        let checked = CheckedJob::of(check);
        let gpus = self
            .gpus
            .hold_check(checked.gpus)
            .await
            .map_err(CheckFailure::Busy)?;
        let s = &self.node;
        let spec = get_spec(s.store.as_ref(), &checked.spec_hash)
            .await
            .map_err(|e| CheckFailure::Other(format!("spec: {e}")))?;
        // Laid out and named as a paid run's directory is, on a disk of the
        // declared size as a paid run's is.
        let dir = s.run_dir(&format!("check/{}/{}", check.key, role(check.role)));
        s.clear_run(dir.clone()).await;
        let answer = self.check_in(check, &spec, &dir, &gpus).await;
        s.clear_run(dir).await;
        drop(gpus);
        answer
    }

    async fn check_in(
        &self,
        check: &Check,
        spec: &JobSpec,
        dir: &std::path::Path,
        gpus: &CheckGpus,
    ) -> Result<CheckAnswer, CheckFailure> {
        let s = &self.node;
        let v = &check.verification;
        let job = v.job;
        let restore = match v.from {
            None => None,
            Some(from) => Some(self.restore_start(job, from, spec, dir).await?),
        };
        let interval = crate::core::checkpoint_interval(
            CheckedJob::of(check).checkpoint_interval,
            s.config.max_checkpoint_interval,
        );
        let (mut cspec, inputs) = s.container(job, spec, dir, restore, interval).await;
        cspec.labels = vec![(NODE_LABEL.to_string(), s.me.node.to_string())];
        cspec.resources.gpus = s.gpu_request(job, gpus.devices());
        s.mount_run(dir, spec).await.map_err(CheckFailure::Other)?;
        let started = Instant::now();
        let (id, _) = launch(&s.engine, &s.cache, &inputs, &cspec)
            .await
            .map_err(|e| CheckFailure::Other(format!("launch: {e}")))?;
        let limit = interval * CHECK_INTERVALS_ALLOWED + CHECK_START_ALLOWANCE;
        let target = v.to.step;
        let run = async {
            if v.output {
                self.run_to_exit(&id, dir, spec).await
            } else {
                self.run_to_step(&id, dir, spec, target).await
            }
        };
        let reached = tokio::select! {
            reached = tokio::time::timeout(limit, run) => reached,
            // The chain gave the node a paid job that needs these GPUs.
            _ = gpus.stop().cancelled() => Ok(Err(CheckFailure::Other(
                "stopped: this node's paid job needs the check's GPUs; tried again when they are free".into(),
            ))),
        };
        // Stopped at once, as a fenced paid run is: no signal, no grace.
        let _ = s.engine.remove(&id).await;
        let name = reached.map_err(|_| {
            CheckFailure::Other(format!(
                "the check ran past its limit of {} s without {} and was stopped",
                limit.as_secs(),
                if v.output {
                    "finishing".to_string()
                } else {
                    format!("a checkpoint at step {target}")
                }
            ))
        })??;
        s.metrics
            .check_seconds
            .observe(started.elapsed().as_secs_f64());
        self.hash_reached(dir, spec, v.output, &name, v.possession_key)
            .await
    }

    /// Restores the checked interval's start (`from`) from the store into
    /// the run's `restore` directory.
    async fn restore_start(
        &self,
        job: Pubkey,
        from: CheckpointRecord,
        spec: &JobSpec,
        dir: &std::path::Path,
    ) -> Result<PathBuf, CheckFailure> {
        let s = &self.node;
        let store = CheckpointStore::new(Arc::clone(&s.store), 1);
        let expected = [ExpectedCheckpoint {
            step: from.step,
            hash: Sha256Digest(from.hash),
        }];
        let restored = store
            .restore(
                &job.to_string(),
                &expected,
                crate::fault::checkpoint_limits(spec),
                &dir.join("restore"),
            )
            .await
            .map_err(|e| {
                let text = format!("restoring step {}: {e}", from.step);
                // Only a store that answered (not there, or not
                // matching its attested hash) says the start is
                // unavailable: a refused or failed request (the
                // gateway's chain view behind, an outage) is tried
                // again, never answered as the provider's fault.
                match e {
                    StoreError::NoUsableCheckpoint { .. } if !e.store_failed() => {
                        CheckFailure::StartUnavailable(text)
                    }
                    _ => CheckFailure::Other(text),
                }
            })?;
        Ok(restored.dir)
    }

    /// Hashes what the check run reached (`reached`, the name of its
    /// checkpoint, or of its output directory for the last interval) as the
    /// attestation hash is defined, with its possession digest under `key`.
    async fn hash_reached(
        &self,
        dir: &std::path::Path,
        spec: &JobSpec,
        output: bool,
        reached: &str,
        key: [u8; 32],
    ) -> Result<CheckAnswer, CheckFailure> {
        let s = &self.node;
        let reached = reached.to_string();
        // The output is read and hashed as the job's node stored it: every
        // file of the output directory, within the output's limits.
        let (root, limits) = if output {
            (writable(dir), crate::fault::output_limits(spec))
        } else {
            (
                writable(dir).join("checkpoints"),
                crate::fault::checkpoint_limits(spec),
            )
        };
        let threads = s.config.hash_threads;
        let found = tokio::task::spawn_blocking(move || {
            let root = ConfinedDir::open(&root).map_err(|e| e.to_string())?;
            let dir = root.open_dir(&reached).map_err(|e| e.to_string())?;
            hash_possessed_checkpoint_in(&dir, limits, threads, &key).map_err(|e| e.to_string())
        })
        .await
        .map_err(|e| CheckFailure::Other(e.to_string()))?
        .map_err(CheckFailure::Other)?;
        Ok(CheckAnswer::Reproduced {
            hash: found.digest.hash.0,
            possession: found.possession.0,
        })
    }

    /// Waits for a check run of the last interval (`Verification::output`)
    /// to finish, held to its spec's disk as a paid run is: the name of its
    /// output directory once it exits 0. Any other exit gives no answer.
    async fn run_to_exit(
        &self,
        id: &ContainerId,
        dir: &std::path::Path,
        spec: &JobSpec,
    ) -> Result<String, CheckFailure> {
        let s = &self.node;
        let exited = s.engine.wait(id);
        tokio::pin!(exited);
        loop {
            let ended = tokio::select! {
                exit = &mut exited => Some(exit),
                _ = tokio::time::sleep(CHECK_FOOTPRINT_EVERY) => None,
            };
            match ended {
                Some(Ok(exit)) if exit.code == EXIT_DONE => return Ok("output".to_string()),
                Some(Ok(exit)) => {
                    return Err(CheckFailure::Other(format!(
                        "the check's container exited {} instead of finishing with its output (last lines: {:?})",
                        exit.code, exit.last_log_lines
                    )));
                }
                Some(Err(e)) => {
                    return Err(CheckFailure::Other(format!(
                        "the check's container was lost: {e}"
                    )));
                }
                None => {}
            }
            let (job_dir, spec) = (writable(dir), spec.clone());
            if let Ok(Some(over)) =
                tokio::task::spawn_blocking(move || crate::fault::footprint(&job_dir, &spec)).await
            {
                return Err(CheckFailure::Other(format!(
                    "the check run was stopped: it {over}"
                )));
            }
        }
    }

    /// Watches a check run's checkpoint directory until the job has written
    /// a complete checkpoint at `target` or past it, and returns the name of
    /// the first such (lowest step). Checkpoints before the target are
    /// removed as they appear, and the run is held to its spec's disk, as a
    /// paid run is. A run that ends first, or breaks those bounds, gives no
    /// answer.
    async fn run_to_step(
        &self,
        id: &ContainerId,
        dir: &std::path::Path,
        spec: &JobSpec,
        target: u64,
    ) -> Result<String, CheckFailure> {
        let s = &self.node;
        let exited = s.engine.wait(id);
        tokio::pin!(exited);
        let mut measured = Instant::now();
        loop {
            let ended = tokio::select! {
                exit = &mut exited => Some(exit),
                _ = tokio::time::sleep(CHECK_POLL) => None,
            };
            if let Some(name) = reached_step(writable(dir).join("checkpoints"), target).await? {
                return Ok(name);
            }
            if let Some(exit) = ended {
                return Err(CheckFailure::Other(match exit {
                    Ok(exit) => format!(
                        "the check's container exited {} before a checkpoint at step {target} (last lines: {:?})",
                        exit.code, exit.last_log_lines
                    ),
                    Err(e) => format!("the check's container was lost: {e}"),
                }));
            }
            if measured.elapsed() >= CHECK_FOOTPRINT_EVERY {
                measured = Instant::now();
                let (job_dir, spec) = (writable(dir), spec.clone());
                if let Ok(Some(over)) =
                    tokio::task::spawn_blocking(move || crate::fault::footprint(&job_dir, &spec))
                        .await
                {
                    return Err(CheckFailure::Other(format!(
                        "the check run was stopped: it {over}"
                    )));
                }
            }
        }
    }
}

/// How often a check run's checkpoint directory is looked at: the job runs
/// on past its target step for at most about this long.
const CHECK_POLL: Duration = Duration::from_millis(250);
const CHECK_FOOTPRINT_EVERY: Duration = Duration::from_secs(2);

/// The complete checkpoint at or past `target` with the lowest step, if the
/// job has written one; complete checkpoints before `target` are removed.
async fn reached_step(root: PathBuf, target: u64) -> Result<Option<String>, CheckFailure> {
    tokio::task::spawn_blocking(move || {
        let Ok(confined) = ConfinedDir::open(&root) else {
            return Ok(None); // nothing written yet
        };
        let found = complete_checkpoints_in(&confined)
            .map_err(|e| CheckFailure::Other(format!("the check run's checkpoints: {e}")))?;
        let mut reached: Option<(u64, String)> = None;
        for c in found {
            if c.manifest.step < target {
                let _ = std::fs::remove_dir_all(&c.dir);
            } else if reached
                .as_ref()
                .is_none_or(|(step, _)| c.manifest.step < *step)
            {
                reached = Some((c.manifest.step, c.name));
            }
        }
        Ok(reached.map(|(_, name)| name))
    })
    .await
    .map_err(|e| CheckFailure::Other(e.to_string()))?
}

fn role(role: Party) -> &'static str {
    match role {
        Party::Verifier => "verifier",
        Party::Referee => "referee",
    }
}

/// A kept answer, one line: `reproduced <hash hex> <possession hex>` or
/// `start-unavailable`.
fn encode_answer(answer: &CheckAnswer) -> String {
    match answer {
        CheckAnswer::Reproduced { hash, possession } => {
            format!(
                "reproduced {} {}\n",
                hex::encode(hash),
                hex::encode(possession)
            )
        }
        CheckAnswer::StartUnavailable => "start-unavailable\n".to_string(),
    }
}

fn decode_answer(text: &str) -> Option<CheckAnswer> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let digest = |h: &str| -> Option<[u8; 32]> { hex::decode(h).ok()?.try_into().ok() };
    match words.as_slice() {
        ["reproduced", hash, possession] => Some(CheckAnswer::Reproduced {
            hash: digest(hash)?,
            possession: digest(possession)?,
        }),
        ["start-unavailable"] => Some(CheckAnswer::StartUnavailable),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_answer_reads_back_as_sealed_and_junk_reads_as_none() {
        for answer in [
            CheckAnswer::Reproduced {
                hash: [7; 32],
                possession: [9; 32],
            },
            CheckAnswer::StartUnavailable,
        ] {
            assert_eq!(decode_answer(&encode_answer(&answer)), Some(answer));
        }
        for junk in [
            "",
            "reproduced 00",
            "reproduced zz zz",
            "start-unavailable x",
        ] {
            assert_eq!(decode_answer(junk), None, "{junk:?}");
        }
    }
}

fn describe(answer: &CheckAnswer) -> String {
    match answer {
        CheckAnswer::Reproduced { hash, .. } => hex::encode(hash),
        CheckAnswer::StartUnavailable => "start unavailable".to_string(),
    }
}
