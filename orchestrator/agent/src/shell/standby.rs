//! The node as a warm standby (a spec's `checkpoint.standby`): the
//! scheduler names, at [`mcjs_protocol::STANDBY_PATH`], the jobs this node
//! stands by for and each one's latest attested checkpoint; the agent
//! fetches that checkpoint as it is attested, verified against the hash as
//! any restore is, into `work/standby/<job>/`. When the job comes to this
//! node, its launch takes the copy instead of downloading it
//! ([`StandbyCopies::take`]), if the chain's checkpoint is the one copied.

use super::node::NodeEnv;
use crate::chain::AgentChain;
use crate::core::ChainJob;
use crate::spec_store::get_spec;
use mcjs_client::Pubkey;
use mcjs_protocol::{STANDBY_PATH, StandbyDuties};
use mcjs_runtime::checkpoint::Sha256Digest;
use mcjs_runtime::engine::ContainerEngine;
use mcjs_runtime::store::Restored;
use mcjs_runtime::store::{CheckpointStore, ExpectedCheckpoint};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// How often the scheduler is asked what this node stands by for.
const ASK_EVERY: Duration = Duration::from_secs(1);
/// How long a copy the scheduler no longer names is kept: a job whose node
/// was just lost leaves the list in the round that sends it here.
const LINGER: Duration = Duration::from_secs(120);
/// After a failed fetch, the same checkpoint is tried again this much later.
const RETRY_AFTER: Duration = Duration::from_secs(10);
/// How long the scheduler may take to answer.
const ASK_TIMEOUT: Duration = Duration::from_secs(2);

/// A verified copy of a job's checkpoint, and when the scheduler last named
/// the job.
struct Copy {
    restored: Restored,
    named_at: Instant,
}

/// The copies this node keeps as a standby, and the one being fetched.
#[derive(Default)]
pub(super) struct StandbyCopies {
    copies: Mutex<HashMap<Pubkey, Copy>>,
    /// The checkpoint being fetched now (job, step, hash), while `fetch` is
    /// held: a launch of that job waits for it rather than fetch it twice.
    in_flight: Mutex<Option<(Pubkey, u64, Sha256Digest)>>,
    fetch: tokio::sync::Mutex<()>,
}

impl StandbyCopies {
    /// The copy of `job`'s checkpoint `step` of `hash`, taken out (the
    /// launch moves its directory), waiting for it if it is being fetched.
    pub async fn take(&self, job: Pubkey, step: u64, hash: Sha256Digest) -> Option<Restored> {
        let fetching = *self.in_flight.lock().expect("standby lock") == Some((job, step, hash));
        if fetching {
            let _done = self.fetch.lock().await;
        }
        let mut copies = self.copies.lock().expect("standby lock");
        let matches = copies.get(&job).is_some_and(|c| {
            c.restored.checkpoint.step == step && c.restored.checkpoint.hash == hash
        });
        matches
            .then(|| copies.remove(&job))
            .flatten()
            .map(|c| c.restored)
    }

    fn holds(&self, job: &Pubkey, step: u64, hash: &Sha256Digest) -> bool {
        self.copies
            .lock()
            .expect("standby lock")
            .get(job)
            .is_some_and(|c| {
                c.restored.checkpoint.step == step && c.restored.checkpoint.hash == *hash
            })
    }

    /// Marks the `named` jobs as named now; returns the copies of jobs not
    /// named for [`LINGER`], removed.
    fn named(&self, named: &HashSet<Pubkey>, now: Instant) -> Vec<Restored> {
        let mut copies = self.copies.lock().expect("standby lock");
        for (job, copy) in copies.iter_mut() {
            if named.contains(job) {
                copy.named_at = now;
            }
        }
        let stale: Vec<Pubkey> = copies
            .iter()
            .filter(|(_, c)| now.duration_since(c.named_at) > LINGER)
            .map(|(job, _)| *job)
            .collect();
        stale
            .into_iter()
            .filter_map(|job| copies.remove(&job))
            .map(|c| c.restored)
            .collect()
    }

    /// Keeps `restored` as `job`'s copy; returns the one it replaces.
    fn keep(&self, job: Pubkey, restored: Restored, now: Instant) -> Option<Restored> {
        self.copies
            .lock()
            .expect("standby lock")
            .insert(
                job,
                Copy {
                    restored,
                    named_at: now,
                },
            )
            .map(|c| c.restored)
    }
}

/// The jobs the scheduler at `url` names this node a standby of, with their
/// spec hash and latest attested checkpoint; `None` when it does not answer.
async fn ask(
    http: &reqwest::Client,
    url: &str,
    node: Pubkey,
) -> Option<Vec<(Pubkey, [u8; 32], Option<(u64, Sha256Digest)>)>> {
    let duties: StandbyDuties = http
        .get(format!(
            "{}{STANDBY_PATH}/{node}",
            url.trim_end_matches('/')
        ))
        .send()
        .await
        .and_then(|r| r.error_for_status())
        .ok()?
        .json()
        .await
        .ok()?;
    let hex32 = |s: &str| -> Option<[u8; 32]> { hex::decode(s).ok()?.try_into().ok() };
    Some(
        duties
            .jobs
            .iter()
            .filter_map(|j| {
                let job = j.job.parse().ok()?;
                let spec = hex32(&j.spec)?;
                let at = match (j.step, j.hash.as_deref().and_then(hex32)) {
                    (Some(step), Some(hash)) => Some((step, Sha256Digest(hash))),
                    _ => None,
                };
                Some((job, spec, at))
            })
            .collect(),
    )
}

/// Keeps this node's standby copies current until `cancel`: asks the
/// schedulers every [`ASK_EVERY`], fetches a named job's newly attested
/// checkpoint, and deletes the copies of jobs no longer named.
pub(super) async fn stand_by<C: AgentChain, E: ContainerEngine>(
    s: Arc<NodeEnv<C, E>>,
    copies: Arc<StandbyCopies>,
    on_node: watch::Receiver<HashMap<Pubkey, ChainJob>>,
    cancel: CancellationToken,
) {
    let urls: Vec<String> = s.config.schedulers().cloned().collect();
    if urls.is_empty() {
        return;
    }
    let http = reqwest::Client::builder()
        .timeout(ASK_TIMEOUT)
        .build()
        .expect("an HTTP client");
    let root = s.config.work_dir.join("standby");
    // A restarted agent fetches again what it keeps.
    let _ = tokio::fs::remove_dir_all(&root).await;
    let mut failed: HashMap<(Pubkey, u64), Instant> = HashMap::new();
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(ASK_EVERY) => {}
        }
        let mut named = HashMap::new();
        for url in &urls {
            for (job, spec, at) in ask(&http, url, s.me.node).await.unwrap_or_default() {
                named.entry(job).or_insert((spec, at));
            }
        }
        let now = Instant::now();
        let listed: HashSet<Pubkey> = named.keys().copied().collect();
        for stale in copies.named(&listed, now) {
            tracing::info!(job_dir = %stale.dir.display(), "standby copy deleted: the job is no longer this node's to stand by for");
            let _ = tokio::fs::remove_dir_all(&stale.dir).await;
        }
        failed.retain(|_, at| now.duration_since(*at) < RETRY_AFTER);
        for (job, (spec, at)) in named {
            let Some((step, hash)) = at else { continue };
            let on_this_node = on_node.borrow().contains_key(&job);
            if on_this_node || copies.holds(&job, step, &hash) || failed.contains_key(&(job, step))
            {
                continue;
            }
            if cancel.is_cancelled() {
                return;
            }
            let dest = root.join(job.to_string());
            match fetch(&s, &copies, job, spec, step, hash, &dest).await {
                Ok(()) => {}
                Err(e) => {
                    tracing::warn!(%job, step, error = %e, "cannot fetch the checkpoint this node stands by for; trying again later");
                    failed.insert((job, step), Instant::now());
                }
            }
        }
    }
}

/// Fetches `job`'s checkpoint `step` of `hash` into `dest` (verified, as a
/// restore is) and keeps it as the job's copy.
async fn fetch<C, E>(
    s: &NodeEnv<C, E>,
    copies: &StandbyCopies,
    job: Pubkey,
    spec: [u8; 32],
    step: u64,
    hash: Sha256Digest,
    dest: &Path,
) -> Result<(), String> {
    let started = Instant::now();
    let spec = get_spec(s.store.as_ref(), &spec)
        .await
        .map_err(|e| e.to_string())?;
    let _fetching = copies.fetch.lock().await;
    *copies.in_flight.lock().expect("standby lock") = Some((job, step, hash));
    let restored = CheckpointStore::new(Arc::clone(&s.store), 1)
        .restore(
            &job.to_string(),
            &[ExpectedCheckpoint { step, hash }],
            crate::fault::checkpoint_limits(&spec),
            dest,
        )
        .await;
    let kept = restored.map(|r| {
        tracing::info!(%job, step, bytes = r.checkpoint.total_bytes(), ms = started.elapsed().as_millis() as u64, "standby copy ready");
        copies.keep(job, r, Instant::now())
    });
    *copies.in_flight.lock().expect("standby lock") = None;
    match kept {
        Ok(Some(old)) => {
            let _ = tokio::fs::remove_dir_all(&old.dir).await;
            Ok(())
        }
        Ok(None) => Ok(()),
        Err(e) => Err(e.to_string()),
    }
}

/// Moves a standby copy into `restore_root` as the launch's restore; the
/// restored directory, or why not (the launch then downloads).
pub(super) async fn move_copy(copy: &Restored, restore_root: &Path) -> std::io::Result<PathBuf> {
    tokio::fs::create_dir_all(restore_root).await?;
    let dir = restore_root.join(&copy.checkpoint.key);
    let _ = tokio::fs::remove_dir_all(&dir).await;
    tokio::fs::rename(&copy.dir, &dir).await?;
    Ok(dir)
}
