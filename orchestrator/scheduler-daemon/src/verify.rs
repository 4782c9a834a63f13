//! Verified progress, the scheduler's part: which attested intervals the
//! draw selects and who checks them, which decided verifications to apply,
//! and which held payments are due. Pure: the shell fetches the accounts and
//! sends what this returns, one transaction each.

use std::collections::{HashMap, HashSet};

use mcjs_client::Pubkey;
use mcjs_client::ix::{Checkers, CurrentAssignment};
use mcjs_client::pda;
use mcjs_client::program::state::{
    ConfigParams, Job, JobState, MAX_CHECKER_REPLACEMENTS, NO_OPEN_INTERVAL, Node, NodeStatus,
    Party, Provider, Segment, SegmentState, Verification, VerificationOutcome, VerificationState,
    sampled, slot_hash_after,
};
use sha2::{Digest, Sha256};

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
    /// Nodes whose agents sent a heartbeat recently and are not on battery:
    /// only they are drawn as checkers (a node that is registered but never
    /// runs an agent would only ever stay silent; one on battery is moving
    /// its own jobs off).
    pub alive: &'a HashSet<Pubkey>,
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
    /// The first round's checkers disagreed: name two fresh ones.
    SecondRound {
        job: Pubkey,
        verification: Pubkey,
        segment: Pubkey,
        checkers: Checkers,
    },
    /// A verified job's output is attested, its draw has had its time, no
    /// check is open and its node has not completed it within a liveness
    /// window: complete it (anyone may; the node may be gone).
    Finish {
        job: Pubkey,
        node: Pubkey,
        provider: Pubkey,
        payout: Pubkey,
        refund: Pubkey,
        generation: u32,
        output_hash: [u8; 32],
    },
    /// A named checker has not sealed by half the window: name another.
    Replace {
        job: Pubkey,
        verification: Pubkey,
        segment: Pubkey,
        role: Party,
        node: Pubkey,
        provider: Pubkey,
    },
}

impl VerifyAction {
    pub fn name(&self) -> &'static str {
        match self {
            VerifyAction::Open { .. } => "open_verification",
            VerifyAction::Resolve { .. } => "resolve_verification",
            VerifyAction::Release { .. } => "release_segment",
            VerifyAction::Replace { .. } => "replace_checker",
            VerifyAction::SecondRound { .. } => "open_second_round",
            VerifyAction::Finish { .. } => "complete_job",
        }
    }

    pub fn job(&self) -> Pubkey {
        match self {
            VerifyAction::Open { job, .. }
            | VerifyAction::Resolve { job, .. }
            | VerifyAction::Release { job, .. }
            | VerifyAction::Replace { job, .. }
            | VerifyAction::SecondRound { job, .. }
            | VerifyAction::Finish { job, .. } => *job,
        }
    }
}

/// Whether `job` has an attested interval the draw has not opened: the
/// draw may still select it (until [`passed_over`] says it cannot).
fn undrawn(job: &Job, params: &ConfigParams) -> bool {
    job.verification_ppm > 0
        && params.challenge_window_secs > 0
        && job.last_attest_slot != NO_OPEN_INTERVAL
        && job.checkpoint_count > job.last_opened_interval
}

/// Whether the duties may have something to do for `job` that only the
/// chain's clock and slot hashes can tell: an open verification (resolve
/// it, serve its checkers their duties), a segment other than the one on
/// its node (release it when due), or an attested interval not yet drawn
/// and not `passed_over`. With none of these for any job a round reads
/// nothing for the duties: a verified job between its draws costs no call.
pub fn needs_chain_read(job: &Job, params: &ConfigParams, passed_over: bool) -> bool {
    if job.verification_ppm == 0 {
        return false;
    }
    if job.open_verifications > 0 || job.output_attested() {
        return true;
    }
    // The segment of the assignment on a node is paid out only when it
    // leaves the node; any other is held until its release.
    let on_node = u32::from(matches!(
        job.state,
        JobState::Assigned { .. } | JobState::Running { .. }
    ));
    if job.live_segments > on_node {
        return true;
    }
    undrawn(job, params) && !passed_over
}

/// Whether the draw of `job`'s latest attested interval is settled and
/// opened nothing, for good: the challenge window has passed, the sysvar
/// no longer reaches back to the attestation, or the slot hash after it
/// did not sample it. (A draw that found no checkers, or no slot after the
/// attestation yet, may still open it later: not passed over.)
pub fn passed_over(o: &VerifyObservation<'_>, key: &Pubkey, job: &Job) -> bool {
    if !undrawn(job, o.params) {
        return false;
    }
    let Some(last) = job.last_checkpoint else {
        return false;
    };
    if o.now
        > last
            .time
            .saturating_add(i64::from(o.params.challenge_window_secs))
    {
        return true;
    }
    let newest = o
        .slot_hashes
        .get(8..16)
        .and_then(|b| b.try_into().ok())
        .map(u64::from_le_bytes);
    match slot_hash_after(o.slot_hashes, job.last_attest_slot) {
        Some((_, hash)) => !sampled(&hash, key, job.checkpoint_count, job.verification_ppm),
        // The slots after it are known, yet none is listed: too old.
        None => newest.is_some_and(|newest| newest > job.last_attest_slot),
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
        if let Some(action) = finish(o, key, job) {
            out.push(action);
        }
    }
    let jobs: HashMap<Pubkey, &Job> = o.jobs.iter().map(|(k, j)| (*k, j)).collect();
    for (key, v) in o.verifications {
        if let Some(action) = resolve(o, v, &jobs) {
            out.push(action);
        } else if let Some(action) = replace(o, key, v, &jobs, &segments) {
            out.push(action);
        } else if let Some(action) = second_round(o, key, v, &jobs, &segments) {
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

/// A job whose output is attested completes once the draw has had its
/// time and no check is open. Its node does that itself; the scheduler
/// does it a liveness window later (the program's billing window, from the
/// attestation or the last check's end), for a node that is gone.
fn finish(o: &VerifyObservation<'_>, key: &Pubkey, job: &Job) -> Option<VerifyAction> {
    if !job.output_attested() || job.open_verifications > 0 {
        return None;
    }
    let attested = job.last_checkpoint?.time;
    let window = job
        .terms
        .billing_window_secs(o.params.liveness_factor)
        .ok()?
        .max(u64::from(o.params.draw_secs));
    let since = attested.max(job.checks_settled_at);
    if o.now < since.saturating_add(i64::try_from(window).ok()?) {
        return None;
    }
    let provider = job.provider?;
    Some(VerifyAction::Finish {
        job: *key,
        node: job.node?,
        provider,
        payout: o.providers.get(&provider)?.payout,
        refund: job.refund_account,
        generation: job.generation,
        output_hash: job.output_hash?,
    })
}

fn draw(
    o: &VerifyObservation<'_>,
    key: &Pubkey,
    job: &Job,
    opened: &HashSet<(Pubkey, u32)>,
    segments: &HashMap<Pubkey, &Segment>,
) -> Option<VerifyAction> {
    // A job that ended since its latest attestation (completed, or failed
    // fatally) is still drawn while that interval's pay is held.
    if job.verification_ppm == 0
        || o.params.challenge_window_secs == 0
        || job.last_attest_slot == NO_OPEN_INTERVAL
        || job.checkpoint_count <= job.last_opened_interval
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
    let checkers = choose_checkers(o, job, segment.provider, &segment.gpu_model, &hash)?;
    Some(VerifyAction::Open {
        job: *key,
        segment_generation: last.generation,
        interval,
        checkers,
    })
}

/// A verifier and a referee of two providers other than `claimed`: drawn
/// by the draw's slot hash among the providers with a node that could run
/// the job, of `gpu_model` (the attester's when it was assigned, which its
/// segment keeps: bitwise results hold only within a hardware class), not
/// offline and in `alive`, each provider weighted by the stake that backs
/// it, at most one node per provider. Idle or busy makes no difference, so
/// a node kept idle (priced out of every job) gains no more draws than its
/// provider's stake buys. `None` (the interval is not drawn) when fewer
/// than two providers qualify.
pub fn choose_checkers(
    o: &VerifyObservation<'_>,
    job: &Job,
    claimed: Pubkey,
    gpu_model: &str,
    hash: &[u8; 32],
) -> Option<Checkers> {
    let pool = CheckerPool::new(o, job, gpu_model);
    let (verifier_node, verifier_provider) = pool.pick(&[claimed], word(hash, 0), word(hash, 1))?;
    let (referee_node, referee_provider) =
        pool.pick(&[claimed, verifier_provider], word(hash, 2), word(hash, 3))?;
    Some(Checkers {
        verifier_node,
        verifier_provider,
        referee_node,
        referee_provider,
    })
}

/// The `i`th little-endian u64 of a 32-byte draw.
fn word(hash: &[u8; 32], i: usize) -> u64 {
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&hash[8 * i..8 * i + 8]);
    u64::from_le_bytes(bytes)
}

/// The providers that may check a job's interval, as [`choose_checkers`]
/// says: in a fixed order (their keys), each with its stake and its
/// fitting nodes (sorted).
struct CheckerPool {
    providers: Vec<(Pubkey, u64, Vec<Pubkey>)>,
}

impl CheckerPool {
    fn new(o: &VerifyObservation<'_>, job: &Job, gpu_model: &str) -> Self {
        let fits = |key: &Pubkey, n: &Node| {
            n.status != NodeStatus::Offline
                && o.alive.contains(key)
                && n.hardware.gpu_model == gpu_model
                && job.requirements.check(&n.hardware).is_ok()
        };
        let mut providers: Vec<(Pubkey, u64, Vec<Pubkey>)> = Vec::new();
        for (key, node) in o.nodes.iter().filter(|(k, n)| fits(k, n)) {
            let Some(stake) = o
                .providers
                .get(&node.provider)
                .map(|p| p.committed_stake())
                .filter(|s| *s >= o.params.min_provider_stake && *s > 0)
            else {
                continue;
            };
            match providers.iter_mut().find(|(p, ..)| *p == node.provider) {
                Some((_, _, nodes)) => nodes.push(*key),
                None => providers.push((node.provider, stake, vec![*key])),
            }
        }
        providers.sort_by_key(|(p, ..)| *p);
        for (_, _, nodes) in &mut providers {
            nodes.sort();
        }
        CheckerPool { providers }
    }

    /// One node of a provider not in `exclude`, the provider drawn by
    /// `draw` weighted by stake, the node by `node_draw`.
    fn pick(&self, exclude: &[Pubkey], draw: u64, node_draw: u64) -> Option<(Pubkey, Pubkey)> {
        let pool: Vec<&(Pubkey, u64, Vec<Pubkey>)> = self
            .providers
            .iter()
            .filter(|(p, ..)| !exclude.contains(p))
            .collect();
        let total: u128 = pool.iter().map(|(_, s, _)| u128::from(*s)).sum();
        if total == 0 {
            return None;
        }
        let mut at = u128::from(draw) % total;
        for (provider, stake, nodes) in pool {
            if at < u128::from(*stake) {
                let node = nodes[(node_draw % nodes.len() as u64) as usize];
                return Some((node, *provider));
            }
            at -= u128::from(*stake);
        }
        None
    }
}

/// A checker of `v` that has not sealed by half the window
/// (`Verification::seal_deadline`), replaced while the program takes one:
/// drawn as [`choose_checkers`] draws, among the providers other than the
/// attester's and the two named, by
/// `sha256("mcjs-replace-checker/1" ‖ verification ‖ replacements)`, so
/// that anyone can recompute it. `None` when nobody is to be replaced or
/// no other provider qualifies (the check then ends on what it has).
fn replace(
    o: &VerifyObservation<'_>,
    key: &Pubkey,
    v: &Verification,
    jobs: &HashMap<Pubkey, &Job>,
    segments: &HashMap<Pubkey, &Segment>,
) -> Option<VerifyAction> {
    let window = o.params.challenge_window_secs;
    if v.state != VerificationState::Open
        || v.replacements >= MAX_CHECKER_REPLACEMENTS
        || o.now <= v.seal_deadline(window)
        || o.now > v.opened_at.saturating_add(i64::from(window))
    {
        return None;
    }
    let role = [Party::Verifier, Party::Referee]
        .into_iter()
        .find(|r| v.commitment(*r).is_none())?;
    let job = jobs.get(&v.job)?;
    let segment = segments.get(&v.segment)?;
    let draw: [u8; 32] = Sha256::new()
        .chain_update(b"mcjs-replace-checker/1")
        .chain_update(key.as_ref())
        .chain_update([v.replacements])
        .finalize()
        .into();
    let pool = CheckerPool::new(o, job, &segment.gpu_model);
    let exclude = [v.provider, v.verifier_provider, v.referee_provider];
    let (node, provider) = pool.pick(&exclude, word(&draw, 0), word(&draw, 1))?;
    Some(VerifyAction::Replace {
        job: v.job,
        verification: *key,
        segment: v.segment,
        role,
        node,
        provider,
    })
}

/// Two fresh checkers for a check whose first round's checkers revealed
/// different answers (or one stayed silent after the other revealed),
/// while the program takes them (`Verification::second_round_window`):
/// drawn as [`choose_checkers`] draws, among the providers the check has
/// not involved, by `sha256("mcjs-second-round/1" ‖ verification)`, so
/// that anyone can recompute it. `None` when fewer than two such
/// providers qualify (the check then ends on what the first round
/// revealed).
fn second_round(
    o: &VerifyObservation<'_>,
    key: &Pubkey,
    v: &Verification,
    jobs: &HashMap<Pubkey, &Job>,
    segments: &HashMap<Pubkey, &Segment>,
) -> Option<VerifyAction> {
    let (from, until) = v.second_round_window(o.params.challenge_window_secs)?;
    if o.now < from || o.now > until {
        return None;
    }
    let job = jobs.get(&v.job)?;
    let segment = segments.get(&v.segment)?;
    let draw: [u8; 32] = Sha256::new()
        .chain_update(b"mcjs-second-round/1")
        .chain_update(key.as_ref())
        .finalize()
        .into();
    let pool = CheckerPool::new(o, job, &segment.gpu_model);
    let mut exclude = v.involved_providers().to_vec();
    let (verifier_node, verifier_provider) = pool.pick(&exclude, word(&draw, 0), word(&draw, 1))?;
    exclude.push(verifier_provider);
    let (referee_node, referee_provider) = pool.pick(&exclude, word(&draw, 2), word(&draw, 3))?;
    Some(VerifyAction::SecondRound {
        job: v.job,
        verification: *key,
        segment: v.segment,
        checkers: Checkers {
            verifier_node,
            verifier_provider,
            referee_node,
            referee_provider,
        },
    })
}

fn resolve(
    o: &VerifyObservation<'_>,
    v: &Verification,
    jobs: &HashMap<Pubkey, &Job>,
) -> Option<VerifyAction> {
    // Past its window (and a dispute's time for a second round) it is
    // decided on what was revealed by then.
    let outcome = v.resolution(o.now, o.params.challenge_window_secs)?;
    let job = jobs.get(&v.job)?;
    // A segment already proven wrong is not punished twice: its later
    // intervals' ProviderWrong moves nothing.
    let refunded = o
        .segments
        .iter()
        .any(|(k, s)| *k == v.segment && s.state == SegmentState::Refunded);
    let loser = match outcome {
        VerificationOutcome::ProviderWrong if !refunded => Some(v.provider),
        _ => None,
    };
    let past_interval = job
        .last_checkpoint
        .is_some_and(|l| (l.epoch, l.step) >= (v.to.epoch, v.to.step));
    let current = match (outcome, job.node, job.provider) {
        (VerificationOutcome::ProviderWrong, Some(node), Some(provider))
            if job.state.is_on_node() && past_interval && !refunded =>
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
