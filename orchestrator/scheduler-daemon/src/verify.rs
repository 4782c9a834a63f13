//! Verified progress, the scheduler's part: which attested intervals the
//! draw selects and who checks them, which decided verifications to apply,
//! and which held payments are due. Pure: the shell fetches the accounts and
//! sends what this returns, one transaction each.

use std::collections::{HashMap, HashSet};

use mcjs_client::Pubkey;
use mcjs_client::ix::{Checkers, CurrentAssignment};
use mcjs_client::pda;
use mcjs_client::program::state::{
    ConfigParams, Job, NO_OPEN_INTERVAL, Node, NodeStatus, Provider, Segment, SegmentState,
    Verification, VerificationOutcome, VerificationState, sampled, slot_hash_after,
};

/// What the chain says, as the verification duties need it.
pub struct VerifyObservation<'a> {
    /// The chain's clock (unix seconds).
    pub now: i64,
    pub params: &'a ConfigParams,
    pub jobs: &'a [(Pubkey, Job)],
    pub nodes: &'a [(Pubkey, Node)],
    pub providers: &'a HashMap<Pubkey, Provider>,
    pub verifications: &'a [(Pubkey, Verification)],
    pub segments: &'a [(Pubkey, Segment)],
    /// The SlotHashes sysvar's raw data.
    pub slot_hashes: &'a [u8],
}

#[derive(Debug, Clone)]
pub enum VerifyAction {
    /// The draw selected the job's latest interval: check it.
    Open {
        job: Pubkey,
        segment_generation: u32,
        interval: u32,
        checkers: Checkers,
    },
    /// A verification is decided (or its checkers stayed silent too long).
    Resolve {
        job: Pubkey,
        verification: Box<Verification>,
        owner_token: Pubkey,
        loser: Option<Pubkey>,
        current: Option<CurrentAssignment>,
    },
    /// A held payment is due (or a refunded one can close).
    Release { job: Pubkey, segment: Box<Segment> },
}

impl VerifyAction {
    pub fn name(&self) -> &'static str {
        match self {
            VerifyAction::Open { .. } => "open_verification",
            VerifyAction::Resolve { .. } => "resolve_verification",
            VerifyAction::Release { .. } => "release_segment",
        }
    }

    pub fn job(&self) -> Pubkey {
        match self {
            VerifyAction::Open { job, .. }
            | VerifyAction::Resolve { job, .. }
            | VerifyAction::Release { job, .. } => *job,
        }
    }
}

/// Every verification duty due now.
pub fn verify_duties(o: &VerifyObservation<'_>) -> Vec<VerifyAction> {
    let mut out = Vec::new();
    let opened: HashSet<(Pubkey, u32)> = o
        .verifications
        .iter()
        .map(|(_, v)| (v.job, v.interval))
        .collect();
    let segments: HashMap<Pubkey, &Segment> = o.segments.iter().map(|(k, s)| (*k, s)).collect();
    for (key, job) in o.jobs {
        if let Some(action) = draw(o, key, job, &opened, &segments) {
            out.push(action);
        }
    }
    let jobs: HashMap<Pubkey, &Job> = o.jobs.iter().map(|(k, j)| (*k, j)).collect();
    for (_, v) in o.verifications {
        if let Some(action) = resolve(o, v, &jobs) {
            out.push(action);
        }
    }
    for (_, s) in o.segments {
        let due = match s.state {
            SegmentState::Held { release_at } => o.now >= release_at,
            SegmentState::Refunded => true,
            SegmentState::OnNode => false,
        };
        if due && s.open_verifications == 0 {
            out.push(VerifyAction::Release {
                job: s.job,
                segment: Box::new(s.clone()),
            });
        }
    }
    out
}

fn draw(
    o: &VerifyObservation<'_>,
    key: &Pubkey,
    job: &Job,
    opened: &HashSet<(Pubkey, u32)>,
    segments: &HashMap<Pubkey, &Segment>,
) -> Option<VerifyAction> {
    if job.verification_ppm == 0
        || o.params.challenge_window_secs == 0
        || job.state.is_terminal()
        || job.last_attest_slot == NO_OPEN_INTERVAL
    {
        return None;
    }
    let last = job.last_checkpoint?;
    if o.now
        > last
            .time
            .saturating_add(i64::from(o.params.challenge_window_secs))
    {
        return None;
    }
    let interval = job.checkpoint_count;
    if opened.contains(&(*key, interval)) {
        return None;
    }
    let segment = segments.get(&pda::segment(key, last.generation))?;
    if segment.state == SegmentState::Refunded {
        return None;
    }
    // Not yet drawable (the slot after the attestation has not ended) or
    // too old for the sysvar: wait, or give up.
    let (_, hash) = slot_hash_after(o.slot_hashes, job.last_attest_slot)?;
    if !sampled(&hash, key, interval, job.verification_ppm) {
        return None;
    }
    let checkers = choose_checkers(o, job, segment.provider, &hash)?;
    Some(VerifyAction::Open {
        job: *key,
        segment_generation: last.generation,
        interval,
        checkers,
    })
}

/// A verifier and a referee of two providers other than `claimed`, whose
/// nodes could run the job and whose stake backs them; idle nodes first,
/// picked by the draw's slot hash so that no provider knows in advance who
/// will check it.
fn choose_checkers(
    o: &VerifyObservation<'_>,
    job: &Job,
    claimed: Pubkey,
    hash: &[u8; 32],
) -> Option<Checkers> {
    let fits = |n: &Node| {
        n.provider != claimed
            && n.status != NodeStatus::Offline
            && job.requirements.check(&n.hardware).is_ok()
            && o.providers
                .get(&n.provider)
                .is_some_and(|p| p.committed_stake() >= o.params.min_provider_stake)
    };
    let all: Vec<&(Pubkey, Node)> = o.nodes.iter().filter(|(_, n)| fits(n)).collect();
    let mut candidates = all.clone();
    let idle = |n: &Node| n.status == NodeStatus::Available;
    if candidates.iter().any(|(_, n)| idle(n)) {
        candidates.retain(|(_, n)| idle(n));
    }
    let pick = |from: &[&(Pubkey, Node)], salt: usize| -> Option<(Pubkey, Pubkey)> {
        if from.is_empty() {
            return None;
        }
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(&hash[8 * salt..8 * salt + 8]);
        let (key, node) = from[(u64::from_le_bytes(bytes) % from.len() as u64) as usize];
        Some((*key, node.provider))
    };
    let (verifier_node, verifier_provider) = pick(&candidates, 1)?;
    let others: Vec<&(Pubkey, Node)> = candidates
        .iter()
        .copied()
        .filter(|(_, n)| n.provider != verifier_provider)
        .collect();
    let (referee_node, referee_provider) = pick(&others, 2).or_else(|| {
        // Every idle node belongs to one provider: take a busy one.
        let busy: Vec<&(Pubkey, Node)> = all
            .iter()
            .copied()
            .filter(|(_, n)| n.provider != verifier_provider)
            .collect();
        pick(&busy, 2)
    })?;
    Some(Checkers {
        verifier_node,
        verifier_provider,
        referee_node,
        referee_provider,
    })
}

fn resolve(
    o: &VerifyObservation<'_>,
    v: &Verification,
    jobs: &HashMap<Pubkey, &Job>,
) -> Option<VerifyAction> {
    let outcome = match v.state {
        VerificationState::Decided { outcome } => outcome,
        state
            if state.is_pending()
                && o.now
                    > v.opened_at
                        .saturating_add(i64::from(o.params.challenge_window_secs)) =>
        {
            VerificationOutcome::Inconclusive
        }
        _ => return None,
    };
    let job = jobs.get(&v.job)?;
    let loser = match outcome {
        VerificationOutcome::VerifierWrong => Some(v.verifier_provider),
        VerificationOutcome::ProviderWrong => Some(v.provider),
        VerificationOutcome::Confirmed | VerificationOutcome::Inconclusive => None,
    };
    let past_interval = job
        .last_checkpoint
        .is_some_and(|l| (l.epoch, l.step) >= (v.to.epoch, v.to.step));
    let current = match (outcome, job.node, job.provider) {
        (VerificationOutcome::ProviderWrong, Some(node), Some(provider))
            if job.state.is_on_node() && past_interval =>
        {
            let payout = o.providers.get(&provider)?.payout;
            let current_segment = pda::segment(&v.job, job.generation);
            Some(CurrentAssignment {
                node,
                provider: (provider != v.provider).then_some(provider),
                provider_payout: payout,
                segment: (job.holds_payment && current_segment != v.segment)
                    .then_some(current_segment),
            })
        }
        _ => None,
    };
    Some(VerifyAction::Resolve {
        job: v.job,
        verification: Box::new(v.clone()),
        owner_token: job.refund_account,
        loser,
        current,
    })
}
