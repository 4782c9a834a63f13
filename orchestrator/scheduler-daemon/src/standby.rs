//! Warm standbys (a spec's `checkpoint.standby`): for each job that asks, a
//! free node that keeps the job's latest attested checkpoint on its disk,
//! so that when the job's node is lost the job starts there without a
//! download. Pure: chosen by the decision core each round
//! ([`crate::core::reconcile`]), served to agents at
//! [`mcjs_protocol::STANDBY_PATH`], and granted reads by the store gate
//! (`store_gate::Caller::Node::standby`).
//!
//! A standby is a free node: it takes no job's place. A node stands by for
//! one job at a time; a standby given a job of its own, lost, or no longer
//! fit for the job is replaced in the next round; a job that loses its node
//! is placed on its standby first, if the planner would place it there.

use std::collections::{BTreeMap, HashMap, HashSet};

use mcjs::state::{Job, JobState, Node};
use mcjs_client::Pubkey;
use mcjs_protocol::{StandbyDuties, StandbyJob};

use crate::core::{Action, DetectorConfig, Observation, free_nodes, planned_alone};

/// Which node stands by for which job (job → node).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Standbys {
    by_job: BTreeMap<Pubkey, Pubkey>,
}

impl Standbys {
    pub fn node_of(&self, job: &Pubkey) -> Option<Pubkey> {
        self.by_job.get(job).copied()
    }

    pub fn is_empty(&self) -> bool {
        self.by_job.is_empty()
    }

    pub fn len(&self) -> usize {
        self.by_job.len()
    }

    /// Whether `node` already stands by for a job.
    pub fn holds(&self, node: &Pubkey) -> bool {
        self.by_job.values().any(|n| n == node)
    }

    pub fn insert(&mut self, job: Pubkey, node: Pubkey) {
        self.by_job.insert(job, node);
    }

    pub fn iter(&self) -> impl Iterator<Item = (&Pubkey, &Pubkey)> {
        self.by_job.iter()
    }
}

/// As a map of base58 keys, job → node.
impl serde::Serialize for Standbys {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        let mut map = s.serialize_map(Some(self.by_job.len()))?;
        for (job, node) in &self.by_job {
            map.serialize_entry(&job.to_string(), &node.to_string())?;
        }
        map.end()
    }
}

/// Whether a job is where a standby serves it: on a node, its run not over.
pub fn stands_by_for(job: &Job) -> bool {
    job.node.is_some()
        && !job.output_attested()
        && matches!(
            job.state,
            JobState::Assigned { .. } | JobState::Running { .. }
        )
}

/// The round's standbys as agents and the store gate read them: by node,
/// the jobs (with their accounts as the round read them).
#[derive(Clone, Debug, Default)]
pub struct StandbyBook {
    by_node: HashMap<Pubkey, Vec<(Pubkey, Job)>>,
}

impl StandbyBook {
    pub fn new(standbys: &Standbys, jobs: &[(Pubkey, Job)]) -> Self {
        let accounts: HashMap<&Pubkey, &Job> = jobs.iter().map(|(k, j)| (k, j)).collect();
        let mut by_node: HashMap<Pubkey, Vec<(Pubkey, Job)>> = HashMap::new();
        for (job, node) in standbys.iter() {
            if let Some(account) = accounts.get(job) {
                by_node
                    .entry(*node)
                    .or_default()
                    .push((*job, (*account).clone()));
            }
        }
        Self { by_node }
    }

    /// The jobs `node` stands by for, with their accounts.
    pub fn jobs_of(&self, node: &Pubkey) -> Vec<(Pubkey, Job)> {
        self.by_node.get(node).cloned().unwrap_or_default()
    }

    /// What `node`'s agent is told ([`mcjs_protocol::STANDBY_PATH`]).
    pub fn duties(&self, node: &Pubkey) -> StandbyDuties {
        StandbyDuties {
            jobs: self
                .by_node
                .get(node)
                .into_iter()
                .flatten()
                .map(|(key, job)| StandbyJob {
                    job: key.to_string(),
                    spec: hex::encode(job.spec_hash),
                    step: job.last_checkpoint.map(|c| c.step),
                    hash: job.last_checkpoint.map(|c| hex::encode(c.hash)),
                })
                .collect(),
        }
    }
}

/// The jobs among `jobs` whose spec asks for a standby, given what is known
/// of each spec (`wants`: spec hash → asks).
pub fn wanting(jobs: &[(Pubkey, Job)], wants: &HashMap<[u8; 32], bool>) -> HashSet<Pubkey> {
    jobs.iter()
        .filter(|(_, job)| wants.get(&job.spec_hash).copied().unwrap_or(false))
        .map(|(key, _)| *key)
        .collect()
}

/// The round's standbys: for each job on a node whose spec asks for one, a
/// free node that this round's placements left free and that stands by for
/// no other job, of another provider where one fits. The last round's is
/// kept while it stays free and fit, so that a node's copy is not thrown
/// away for an equal one.
pub(crate) fn choose(
    obs: &Observation<'_>,
    config: &DetectorConfig,
    failing_nodes: &HashSet<Pubkey>,
    actions: &[Action],
) -> Standbys {
    let mut chosen = Standbys::default();
    if obs.standby_wanted.is_empty() {
        return chosen;
    }
    let mut taken: HashSet<Pubkey> = HashSet::new();
    let mut moving: HashSet<Pubkey> = HashSet::new();
    for action in actions {
        match action {
            Action::Assign { node, .. } => {
                taken.insert(*node);
            }
            Action::ReportFailure { job, .. } => {
                moving.insert(*job);
            }
        }
    }
    let free: Vec<(Pubkey, &Node)> = free_nodes(obs, config, failing_nodes)
        .into_iter()
        .filter(|(key, _)| !taken.contains(key))
        .collect();
    let serving: Vec<(&Pubkey, &Job)> = obs
        .jobs
        .iter()
        .filter(|(key, job)| {
            obs.standby_wanted.contains(key) && !moving.contains(key) && stands_by_for(job)
        })
        .map(|(key, job)| (key, job))
        .collect();
    // Kept first, so that a new choice never takes a kept one's node.
    let mut unserved = Vec::new();
    for (key, job) in serving {
        let kept = obs.standbys.node_of(key).and_then(|node| {
            let found = free.iter().find(|(k, _)| *k == node)?;
            planned_alone(obs, config, job, std::slice::from_ref(found))
        });
        match kept {
            Some(node) if !chosen.holds(&node) => chosen.insert(*key, node),
            _ => unserved.push((key, job)),
        }
    }
    for (key, job) in unserved {
        let open: Vec<(Pubkey, &Node)> = free
            .iter()
            .filter(|(k, _)| !chosen.holds(k) && Some(*k) != job.node)
            .copied()
            .collect();
        let elsewhere: Vec<(Pubkey, &Node)> = open
            .iter()
            .filter(|(_, n)| Some(n.provider) != job.provider)
            .copied()
            .collect();
        if let Some(node) = planned_alone(obs, config, job, &elsewhere)
            .or_else(|| planned_alone(obs, config, job, &open))
        {
            chosen.insert(*key, node);
        }
    }
    chosen
}
