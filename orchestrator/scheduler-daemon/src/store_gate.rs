//! Who may touch which object of the shared store: a pure function of the
//! request and what the chain says now (docs/store.md, "Who may touch what").
//!
//! The shell reads the caller's jobs from the chain (the jobs on the node,
//! or the jobs the wallet owns) and asks [`authorize`] about every operation
//! before it performs or signs any of them.

use mcjs::state::{Job, JobState};
use mcjs_client::Pubkey;
use mcjs_protocol::store::{ObjectKind, StoreOp};

/// Who is asking, proven by its signature, with the jobs the chain gives it.
#[derive(Debug)]
pub enum Caller<'a> {
    /// A node's agent (signed with the node's operator key), the jobs
    /// assigned to the node now, and the jobs it is checking now (named
    /// verifier or referee of an open verification it has not answered):
    /// of those it may read the spec, the owner's inputs and the interval's
    /// start, never the checkpoints after it, and write nothing.
    Node {
        node: Pubkey,
        jobs: &'a [(Pubkey, Job)],
        checking: &'a [Checking],
        /// The jobs the scheduler named this node a warm standby of
        /// (`checkpoint.standby`): of those it may read the spec, the
        /// listing and descriptors, and the latest attested checkpoint,
        /// and write nothing.
        standby: &'a [(Pubkey, Job)],
        /// The objects in `users/` that specs name as inputs
        /// ([`spec_inputs`]): a node reads of `users/` only an object the
        /// spec of one of those jobs names, under that job's owner.
        inputs: &'a [SpecInput],
    },
    /// A wallet and the jobs it owns.
    Owner {
        owner: Pubkey,
        jobs: &'a [(Pubkey, Job)],
    },
}

/// A job a node is checking, and the step of the interval's start (none:
/// the job's start, so no checkpoint to read).
#[derive(Debug, Clone)]
pub struct Checking {
    pub job: Pubkey,
    pub account: Job,
    /// The interval checked: of one job's checks, a node is given only the
    /// earliest it has not answered.
    pub interval: u32,
    pub start_step: Option<u64>,
}

/// An object of `users/` a spec names as an input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecInput {
    pub spec_hash: [u8; 32],
    pub path: String,
}

/// The objects of `users/` that the spec (of hash `spec_hash`) names as
/// `s3://` inputs in this store. Whose they are is checked by [`authorize`]
/// against each job's owner: a spec that names another wallet's object
/// grants nothing of it.
pub fn spec_inputs(
    spec_hash: [u8; 32],
    spec: &mcjs_spec::JobSpec,
    location: &mcjs_protocol::store::S3Location,
) -> Vec<SpecInput> {
    spec.data
        .iter()
        .filter_map(|input| url::Url::parse(input.uri.as_str()).ok())
        .filter_map(|uri| location.path_of_uri(&uri))
        .filter(|path| matches!(ObjectKind::classify(path), ObjectKind::UserData { .. }))
        .map(|path| SpecInput { spec_hash, path })
        .collect()
}

/// The jobs whose specs say what a node may read of `users/`: those
/// assigned to it now and those it is checking now.
pub fn granting<'j>(
    node: &'j Pubkey,
    jobs: &'j [(Pubkey, Job)],
    checking: &'j [Checking],
) -> impl Iterator<Item = &'j Job> {
    jobs.iter()
        .filter(move |(_, j)| active_on(j, node))
        .map(|(_, j)| j)
        .chain(checking.iter().map(|c| &c.account))
}

/// A job is the node's to work on while it is assigned to it or running there.
fn active_on(job: &Job, node: &Pubkey) -> bool {
    job.node.as_ref() == Some(node)
        && matches!(
            job.state,
            JobState::Assigned { .. } | JobState::Running { .. }
        )
}

/// Checkpoints of `job` below the returned step may be deleted: older than
/// the last attested one (no longer needed to resume) and, for a verified
/// job, older than its latest interval's start (still to be checked), with
/// nothing deleted while a check of it is open.
fn prunable(job: &Job) -> Option<u64> {
    let last = job.last_checkpoint?;
    if job.verification_ppm == 0 {
        return Some(last.step);
    }
    if job.open_verifications > 0 {
        return None;
    }
    Some(
        job.prev_checkpoint
            .map_or(last.step, |p| p.step.min(last.step)),
    )
}

/// Whether the checkpoint `generation`/`step` is the job's restore floor
/// (`Job::restore_floor`): where a lie found in its latest interval sends
/// it back. Kept whatever its age, so that a caught liar cannot take the
/// job down with it by deleting it, and an honest prune never does.
fn pinned(job: &Job, generation: u32, step: u64) -> bool {
    job.restore_floor
        .is_some_and(|f| f.generation == generation && f.step == step)
}

/// A copy inside the store: only by a node, from one object of a job's
/// checkpoints to another of the same job, and only if the node may read the
/// one and write the other (so a checker, which writes nothing, copies
/// nothing, and no node copies into another generation's checkpoints or
/// out of another job's).
fn authorize_copy(path: &str, from: &str, caller: &Caller<'_>) -> Result<(), String> {
    let object = |p: &str| match ObjectKind::classify(p) {
        ObjectKind::Checkpoint {
            job, key: Some(_), ..
        } => Some(job.to_string()),
        _ => None,
    };
    match (object(path), object(from), caller) {
        (Some(to_job), Some(from_job), Caller::Node { .. }) if to_job == from_job => {}
        _ => {
            return Err(format!(
                "{path}: a copy goes from one of a job's checkpoints to another of the same job, by the job's node"
            ));
        }
    }
    authorize(
        &StoreOp::Get {
            path: from.to_string(),
        },
        caller,
    )?;
    authorize(
        &StoreOp::Put {
            path: path.to_string(),
            size: None,
        },
        caller,
    )
}

/// A warm standby reads what a restore of the job's latest attested
/// checkpoint reads (the listing, the descriptors, that checkpoint's files)
/// and writes nothing: it may become the job's node, never write as one.
fn read_as_standby(
    op: &StoreOp,
    path: &str,
    key: Option<&str>,
    generation: Option<u32>,
    step: Option<u64>,
    job: &Job,
) -> Result<(), String> {
    if op.writes() {
        return Err(format!("{path}: a standby writes nothing"));
    }
    let latest = job.last_checkpoint.map(|c| (c.generation, c.step));
    match (key, generation.zip(step)) {
        (None, _) => Ok(()),
        (Some(_), _) if path.ends_with("/checkpoint.json") => Ok(()),
        (Some(_), Some(at)) if Some(at) == latest => Ok(()),
        _ => Err(format!(
            "{path}: a standby reads only the job's latest attested checkpoint{}",
            latest.map_or(" (none yet)".to_string(), |(g, s)| format!(
                " (step {s} of generation {g})"
            ))
        )),
    }
}

fn find<'j>(jobs: &'j [(Pubkey, Job)], job: &str) -> Option<&'j Job> {
    jobs.iter()
        .find(|(key, _)| key.to_string() == job)
        .map(|(_, j)| j)
}

/// Whether `caller` may perform `op`; the error says why not.
pub fn authorize(op: &StoreOp, caller: &Caller<'_>) -> Result<(), String> {
    if let StoreOp::Copy { path, from } = op {
        return authorize_copy(path, from, caller);
    }
    let path = op.path();
    let kind = ObjectKind::classify(path);
    let writes = op.writes();
    let deny = |why: &str| Err(format!("{path}: {why}"));
    match caller {
        Caller::Node {
            node,
            jobs,
            checking,
            standby,
            inputs,
        } => match kind {
            ObjectKind::Spec { hash } => {
                if writes {
                    return deny(
                        "specs are published through the scheduler, never written by a node",
                    );
                }
                let wanted = hex_lower(hash);
                if granting(node, jobs, checking)
                    .chain(standby.iter().map(|(_, j)| j))
                    .any(|j| hex::encode(j.spec_hash) == wanted)
                {
                    Ok(())
                } else {
                    deny("no job on this node has this spec")
                }
            }
            ObjectKind::Checkpoint {
                job,
                key,
                generation,
                step,
            } => {
                let Some(j) = find(jobs, job).filter(|j| active_on(j, node)) else {
                    // Of several checks of one job, only the earliest the
                    // node has not answered: the start of a later interval
                    // is the end of an earlier one, which the node must
                    // reproduce, not read.
                    let Some(c) = checking
                        .iter()
                        .filter(|c| c.job.to_string() == job)
                        .min_by_key(|c| c.interval)
                    else {
                        return match find(standby, job) {
                            Some(j) => read_as_standby(op, path, key, generation, step, j),
                            None => deny("the job is not assigned to this node"),
                        };
                    };
                    if writes {
                        return deny("a checker writes nothing");
                    }
                    // A checker lists the job's checkpoints and their
                    // descriptors (plain file hashes: what the chain's
                    // attestations already commit to) and restores the
                    // interval's start; the bytes of any later checkpoint
                    // (the end it must reproduce) stay out of its reach.
                    let descriptor = path.ends_with("/checkpoint.json");
                    return match (key, step) {
                        (None, _) => Ok(()),
                        (Some(_), _) if descriptor => Ok(()),
                        (Some(_), Some(s)) if Some(s) == c.start_step => Ok(()),
                        _ => deny(
                            "a checker reads only the start of the earliest interval of the job it has not answered",
                        ),
                    };
                };
                if !writes {
                    return Ok(());
                }
                let Some(_) = key else {
                    return deny("writes go to one checkpoint, never the job's whole directory");
                };
                let deletes = matches!(op, StoreOp::Delete { .. });
                match (generation, step) {
                    (Some(g), Some(s)) if deletes && pinned(j, g, s) => deny(&format!(
                        "step {s} of generation {g} is where the job goes back to if its latest interval is proven wrong; it is kept"
                    )),
                    (Some(_), Some(s)) if deletes && prunable(j).is_some_and(|b| s < b) => Ok(()),
                    // Its own upload that was never attested (a failed one).
                    (Some(g), Some(s))
                        if deletes
                            && g == j.generation
                            && j.last_checkpoint.is_none_or(|c| s > c.step) =>
                    {
                        Ok(())
                    }
                    (Some(g), _) if g == j.generation && !deletes => Ok(()),
                    (Some(g), Some(s)) if g == j.generation && deletes => deny(&format!(
                        "step {s} may still be restored or checked (the job keeps {})",
                        prunable(j).map_or(
                            "every checkpoint while a check is open".to_string(),
                            |b| format!("step {b} and later")
                        )
                    )),
                    (Some(g), _) => deny(&format!(
                        "written under generation {g}, but the job is at generation {}; a node writes only its own assignment's checkpoints",
                        j.generation
                    )),
                    (None, _) => deny("not a checkpoint key (<step>-g<generation>-<nonce>)"),
                }
            }
            // Written once (create-only grants) and never deleted: what the
            // owner pays for cannot be replaced or removed by the node, even
            // with a grant it obtained before it was paid.
            ObjectKind::Output { .. } if matches!(op, StoreOp::Delete { .. }) => {
                deny("a job's output, once stored, stays: no node deletes it")
            }
            ObjectKind::Output { job, generation } => match find(jobs, job) {
                Some(j) if active_on(j, node) && generation == Some(j.generation) => Ok(()),
                Some(j) if active_on(j, node) => deny(&format!(
                    "a node writes and reads only its own generation's output (output/g{})",
                    j.generation
                )),
                _ => deny("the job is not assigned to this node"),
            },
            // The lines the job prints, shipped as it runs: the node writes
            // (and rotates, past the job's log cap) its own generation's.
            ObjectKind::Logs { job, generation } => match find(jobs, job) {
                Some(j) if active_on(j, node) && generation == Some(j.generation) => Ok(()),
                Some(j) if active_on(j, node) => deny(&format!(
                    "a node writes only its own generation's logs (logs/g{})",
                    j.generation
                )),
                _ => deny("the job is not assigned to this node"),
            },
            ObjectKind::UserData { owner } => {
                if writes {
                    return deny("an owner's data is written by its owner only");
                }
                if matches!(op, StoreOp::List { .. }) {
                    return deny(
                        "a node reads the inputs its jobs name, never a listing of an owner's data",
                    );
                }
                let named = |j: &Job| {
                    j.owner.to_string() == owner
                        && inputs
                            .iter()
                            .any(|i| i.spec_hash == j.spec_hash && i.path == path)
                };
                if granting(node, jobs, checking).any(named) {
                    Ok(())
                } else {
                    deny(
                        "no spec of a job on this node names it as an input (s3:// inputs must be under the job owner's users/<owner>/ prefix)",
                    )
                }
            }
            ObjectKind::Other => deny("outside the store's layout"),
        },
        Caller::Owner { owner, jobs } => match kind {
            ObjectKind::Spec { hash } => {
                if writes {
                    return deny(
                        "publish specs with `mcjs job submit` (the scheduler checks their hash)",
                    );
                }
                let wanted = hex_lower(hash);
                if jobs
                    .iter()
                    .any(|(_, j)| j.owner == *owner && hex::encode(j.spec_hash) == wanted)
                {
                    Ok(())
                } else {
                    deny("none of this wallet's jobs has this spec")
                }
            }
            ObjectKind::Checkpoint { job, .. }
            | ObjectKind::Output { job, .. }
            | ObjectKind::Logs { job, .. } => {
                if writes {
                    return deny(
                        "a job's checkpoints, output and logs are written by its node only",
                    );
                }
                match find(jobs, job) {
                    Some(j) if j.owner == *owner => Ok(()),
                    _ => deny("not a job of this wallet"),
                }
            }
            ObjectKind::UserData { owner: o } if o == owner.to_string() => Ok(()),
            ObjectKind::UserData { .. } => deny("another wallet's data"),
            ObjectKind::Other => deny("outside the store's layout"),
        },
    }
}

fn hex_lower(hash: &str) -> String {
    hash.to_ascii_lowercase()
}

#[cfg(test)]
mod tests;
