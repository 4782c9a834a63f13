//! The hardware challenge, the scheduler's part (docs/hardware-challenge.md): which nodes to
//! challenge, which challenges are answered and ready to judge, and which went unanswered.
//! Pure: the shell reads the chain and the openings agents sent, judges off the round loop
//! and sends what this returns, one transaction each.

use std::collections::{HashMap, HashSet};

use mcjs_challenge::NodeOpening;
use mcjs_client::Pubkey;
use mcjs_client::challenge::seed_for_open;
use mcjs_client::program::state::{
    ChallengeFailure, ChallengeResult, ChallengeSizing, ChallengeVerdict, HardwareChallenge, Node,
    NodeStatus,
};
use sha2::{Digest as _, Sha256};

/// When and how the scheduler challenges nodes (`mcjs scheduler --challenge-hardware`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChallengePolicy {
    /// Off by default: no challenge is requested (a node's proof is still read by
    /// placement when the Config requires one).
    pub enabled: bool,
    pub sizing: ChallengeSizing,
    /// Seconds a node has for each step (the commitment after the request, the held
    /// digest after the commitment, the opening after the held digest) before the
    /// challenge is recorded `Unanswered`.
    pub answer_secs: i64,
    /// Seconds after a verdict that proved nothing (a failure, or a model without a
    /// measured bound) before the node is challenged again.
    pub retry_secs: i64,
    /// Mean seconds between unannounced re-checks of a proven node (0: none). Each round
    /// draws each provider with probability `round_secs / recheck_secs` from the newest
    /// slot hash, so a node cannot tell when the next comes, and a drawn provider's proven
    /// nodes are all challenged at once: one card cannot answer for several nodes in turn.
    pub recheck_secs: i64,
    /// The reconcile period, seconds (for the re-check draw).
    pub round_secs: i64,
    /// Challenges in flight at once, fleet-wide: each holds its node's GPUs, and its
    /// opening is held in the scheduler's memory until judged. A drawn provider's re-checks
    /// go out together while any room is left, so one provider may take the count over by
    /// its node count less one.
    pub max_in_flight: usize,
    /// The least seconds between two requests of one node, whatever happened between: a
    /// node that changes its profile (which voids the challenge in flight, and makes it
    /// due again) cannot make the scheduler pay a request every round.
    pub request_spacing_secs: i64,
}

/// The standard sizing (`mcjs_challenge::Sizing::STANDARD`) at a memory scale of
/// 2^-`memory_shift`.
pub fn standard_sizing(memory_shift: u8) -> ChallengeSizing {
    mcjs_client::challenge::sizing_on_chain(&mcjs_challenge::Sizing::STANDARD, memory_shift)
}

impl Default for ChallengePolicy {
    fn default() -> Self {
        Self {
            enabled: false,
            sizing: standard_sizing(0),
            answer_secs: 600,
            retry_secs: 6 * 3_600,
            recheck_secs: 7 * 24 * 3_600,
            round_secs: 1,
            max_in_flight: 4,
            request_spacing_secs: 600,
        }
    }
}

/// What the chain says, as the challenge duties need it.
pub struct ChallengeObservation<'a> {
    /// The chain's clock (unix seconds).
    pub now: i64,
    pub nodes: &'a [(Pubkey, Node)],
    /// Nodes whose agents sent a heartbeat recently: only they are asked (a node that
    /// never runs an agent would only ever fail).
    pub alive: &'a HashSet<Pubkey>,
    /// The SlotHashes sysvar's raw data.
    pub slot_hashes: &'a [u8],
    pub policy: &'a ChallengePolicy,
    /// When this scheduler last requested each node's challenge (chain seconds).
    pub requested_at: &'a HashMap<Pubkey, i64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChallengeAction {
    /// Challenge the node's claimed hardware.
    Request { node: Pubkey },
    /// Both answers landed and the open seed exists: judge the node's opening (if it has
    /// sent one) and record the verdict. `overdue`: the opening's time is up, so no opening
    /// means `Unanswered`.
    Judge {
        node: Pubkey,
        challenge: HardwareChallenge,
        open_seed: [u8; 32],
        overdue: bool,
    },
    /// A step was not answered in time.
    Record {
        node: Pubkey,
        verdict: ChallengeVerdict,
    },
}

impl ChallengeAction {
    pub fn name(&self) -> &'static str {
        match self {
            ChallengeAction::Request { .. } => "request_challenge",
            ChallengeAction::Judge { .. } | ChallengeAction::Record { .. } => "record_challenge",
        }
    }

    pub fn node(&self) -> Pubkey {
        match self {
            ChallengeAction::Request { node }
            | ChallengeAction::Judge { node, .. }
            | ChallengeAction::Record { node, .. } => *node,
        }
    }
}

/// The round's challenge duties, node by node; a drawn provider's re-checks all at once.
pub fn challenge_duties(obs: &ChallengeObservation<'_>) -> Vec<ChallengeAction> {
    let policy = obs.policy;
    let mut actions = Vec::new();
    let mut flying = obs
        .nodes
        .iter()
        .filter(|(_, node)| node.challenge.in_flight.is_some())
        .count();
    // Re-checks by provider, in the order each provider's first node comes.
    let mut rechecks: Vec<(Pubkey, Vec<Pubkey>)> = Vec::new();
    for (key, node) in obs.nodes {
        match &node.challenge.in_flight {
            Some(challenge) => {
                if let Some(action) = in_flight(obs, key, challenge) {
                    actions.push(action);
                }
            }
            None if !policy.enabled => {}
            None => match due(obs, key, node) {
                Due::Now if flying < policy.max_in_flight => {
                    flying += 1;
                    actions.push(ChallengeAction::Request { node: *key })
                }
                Due::Recheck => match rechecks.iter_mut().find(|(p, _)| *p == node.provider) {
                    Some((_, keys)) => keys.push(*key),
                    None => rechecks.push((node.provider, vec![*key])),
                },
                Due::Now | Due::No => {}
            },
        }
    }
    for (_, keys) in rechecks {
        if flying >= policy.max_in_flight {
            break;
        }
        flying += keys.len();
        actions.extend(
            keys.into_iter()
                .map(|node| ChallengeAction::Request { node }),
        );
    }
    actions
}

/// Whether a node with no challenge in flight is challenged this round.
enum Due {
    No,
    /// Never challenged under its profile, or its last verdict proved nothing and the
    /// retry time has passed.
    Now,
    /// Proven, and its provider drawn for an unannounced re-check.
    Recheck,
}

fn in_flight(
    obs: &ChallengeObservation<'_>,
    key: &Pubkey,
    challenge: &HardwareChallenge,
) -> Option<ChallengeAction> {
    let unanswered = ChallengeAction::Record {
        node: *key,
        verdict: ChallengeVerdict::Failed(ChallengeFailure::Unanswered),
    };
    let last_step_at = match (challenge.commit, challenge.hold) {
        (_, Some(hold)) => hold.at,
        (Some(commit), None) => commit.at,
        (None, None) => challenge.requested_at,
    };
    let overdue = obs.now.saturating_sub(last_step_at) > obs.policy.answer_secs;
    if challenge.hold.is_none() {
        return overdue.then_some(unanswered);
    }
    match seed_for_open(challenge, obs.slot_hashes) {
        Some(open_seed) => Some(ChallengeAction::Judge {
            node: *key,
            challenge: *challenge,
            open_seed,
            overdue,
        }),
        // The open slot is not recorded yet (wait), or no longer reachable: then no pass
        // can be recorded, and the node gets its answer's time before it is failed.
        None => overdue.then_some(unanswered),
    }
}

/// Whether a node with no challenge in flight is challenged now: a free, live node never
/// challenged under its profile (just registered, or its profile changed), one whose last
/// verdict proved nothing once the retry time has passed, and a proven one when its
/// provider is drawn.
fn due(obs: &ChallengeObservation<'_>, key: &Pubkey, node: &Node) -> Due {
    let free = node.status == NodeStatus::Available && node.current_job.is_none();
    if !free || !obs.alive.contains(key) {
        return Due::No;
    }
    let policy = obs.policy;
    if obs
        .requested_at
        .get(key)
        .is_some_and(|at| obs.now.saturating_sub(*at) < policy.request_spacing_secs)
    {
        return Due::No;
    }
    let since = obs.now.saturating_sub(node.challenge.last_at);
    match node.challenge.last {
        None => Due::Now,
        Some(ChallengeResult::Passed) => {
            if policy.recheck_secs > 0 && drawn(obs.slot_hashes, &node.provider, policy) {
                Due::Recheck
            } else {
                Due::No
            }
        }
        Some(ChallengeResult::Unbounded | ChallengeResult::Failed(_))
            if since >= policy.retry_secs =>
        {
            Due::Now
        }
        Some(_) => Due::No,
    }
}

/// The unannounced re-check of a provider's nodes: `sha256(newest slot hash ‖ provider)`
/// below the share `round_secs / recheck_secs` of the u64 range.
fn drawn(slot_hashes: &[u8], provider: &Pubkey, policy: &ChallengePolicy) -> bool {
    let Some(newest) = slot_hashes.get(16..48) else {
        return false;
    };
    let digest = Sha256::new()
        .chain_update(b"mcjs-challenge/1/recheck")
        .chain_update(newest)
        .chain_update(provider.as_ref())
        .finalize();
    let draw = u64::from_le_bytes(digest[..8].try_into().expect("8 bytes"));
    let share = u128::from(u64::MAX) * policy.round_secs.max(1) as u128
        / policy.recheck_secs.max(1) as u128;
    u128::from(draw) < share
}

/// The openings agents sent (`POST /v1/challenge/opening`), one per node: the latest for
/// the challenge requested at its slot.
#[derive(Debug, Default)]
pub struct Openings {
    by_node: HashMap<Pubkey, (u64, NodeOpening)>,
}

impl Openings {
    pub fn insert(&mut self, node: Pubkey, requested_slot: u64, opening: NodeOpening) {
        self.by_node.insert(node, (requested_slot, opening));
    }

    /// The node's opening of the challenge requested at `requested_slot`.
    pub fn get(&self, node: &Pubkey, requested_slot: u64) -> Option<&NodeOpening> {
        self.by_node
            .get(node)
            .filter(|(slot, _)| *slot == requested_slot)
            .map(|(_, opening)| opening)
    }

    /// Forgets openings of challenges no longer in flight.
    pub fn retain_in_flight(&mut self, nodes: &[(Pubkey, Node)]) {
        let live: HashMap<Pubkey, u64> = nodes
            .iter()
            .filter_map(|(key, node)| node.challenge.in_flight.map(|c| (*key, c.requested_slot)))
            .collect();
        self.by_node
            .retain(|node, (slot, _)| live.get(node) == Some(slot));
    }

    pub fn len(&self) -> usize {
        self.by_node.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_node.is_empty()
    }
}
