//! Verified progress, the scheduler's part: which attested intervals the
//! draw selects and who checks them, which decided verifications to apply,
//! and which held payments are due. Pure: the shell fetches the accounts and
//! sends what this returns, one transaction each.

use std::collections::{HashMap, HashSet};

use mcjs_client::Pubkey;
use mcjs_client::ix::{Checkers, CurrentAssignment, DrawProof, drawn_checkers};
use mcjs_client::pda;
use mcjs_client::program::instructions::{
    Draw, first_round_seed, replacement_seed, second_round_seed,
};
use mcjs_client::program::state::{
    CheckerPool, ConfigParams, Job, JobState, MAX_CHECKER_REPLACEMENTS, NO_OPEN_INTERVAL, Node,
    Party, PoolMember, Provider, Segment, SegmentState, Verification, VerificationOutcome,
    VerificationState, sampled, slot_hash_after,
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
    /// The checker pools of the nodes' GPU models (those created): the
    /// program draws every checker from them (state/checker_pool.rs).
    pub pools: &'a [(Pubkey, CheckerPool)],
}

#[derive(Debug, Clone)]
pub enum VerifyAction {
    /// The draw selected the job's latest interval: check it.
    Open {
        job: Pubkey,
        segment_generation: u32,
        interval: u32,
        checkers: Checkers,
        draw: DrawProof,
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
        draw: DrawProof,
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
        draw: DrawProof,
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
    let seed = first_round_seed(&hash, key, interval);
    let (checkers, draw) = choose_checkers(o, job, segment, seed, vec![segment.provider])?;
    Some(VerifyAction::Open {
        job: *key,
        segment_generation: last.generation,
        interval,
        checkers,
        draw,
    })
}

/// A verifier and a referee for a check of `segment`, as the program draws
/// them (`mcjs::instructions::require_drawn`): from the checker pool of the
/// segment's GPU model (the attester's when it was assigned: bitwise
/// results hold only within a hardware class), by `seed`, never of a
/// provider in `exclude`, each provider as likely as the stake it entered
/// with; a drawn member that cannot check (offline, too little stake,
/// another model now, unfit for the job) is passed over and shown. Who
/// heartbeats makes no difference: a drawn checker that stays silent is
/// replaced. `None` (the interval is not checked) when the pool runs out.
pub fn choose_checkers(
    o: &VerifyObservation<'_>,
    job: &Job,
    segment: &Segment,
    seed: [u8; 32],
    exclude: Vec<Pubkey>,
) -> Option<(Checkers, DrawProof)> {
    let (taken, draw) = draw_from_pool(o, job, segment, seed, exclude, 2)?;
    Some((
        Checkers {
            verifier_node: taken[0].node,
            verifier_provider: taken[0].provider,
            referee_node: taken[1].node,
            referee_provider: taken[1].provider,
        },
        draw,
    ))
}

/// `picks` members of the pool of `segment`'s GPU model, as the program
/// draws them, and the proof.
fn draw_from_pool(
    o: &VerifyObservation<'_>,
    job: &Job,
    segment: &Segment,
    seed: [u8; 32],
    exclude: Vec<Pubkey>,
    picks: usize,
) -> Option<(Vec<PoolMember>, DrawProof)> {
    let (pool_key, pool) = o
        .pools
        .iter()
        .find(|(_, p)| p.gpu_model == segment.gpu_model)?;
    let nodes: HashMap<Pubkey, &Node> = o.nodes.iter().map(|(k, n)| (*k, n)).collect();
    let draw = Draw {
        pool,
        seed,
        exclude,
        params: o.params,
        job,
        segment,
        now: o.now,
    };
    drawn_checkers(&draw, *pool_key, picks, |m| {
        Some((
            (*nodes.get(&m.node)?).clone(),
            o.providers.get(&m.provider)?.clone(),
        ))
    })
}

/// A checker of `v` that has not sealed by half the window
/// (`Verification::seal_deadline`), replaced while the program takes one:
/// drawn as [`choose_checkers`] draws, among the providers other than the
/// attester's and the two named, by `replacement_seed`. `None` when nobody is to be replaced or
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
    let exclude = vec![v.provider, v.verifier_provider, v.referee_provider];
    let seed = replacement_seed(key, v.replacements);
    let (taken, draw) = draw_from_pool(o, job, segment, seed, exclude, 1)?;
    Some(VerifyAction::Replace {
        job: v.job,
        verification: *key,
        segment: v.segment,
        role,
        node: taken[0].node,
        provider: taken[0].provider,
        draw,
    })
}

/// Two fresh checkers for a check whose first round's checkers revealed
/// different answers (or one stayed silent after the other revealed),
/// while the program takes them (`Verification::second_round_window`):
/// drawn as [`choose_checkers`] draws, among the providers the check has
/// not involved, by `second_round_seed`. `None` when fewer than two such
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
    let exclude = v.involved_providers().to_vec();
    let (checkers, draw) = choose_checkers(o, job, segment, second_round_seed(key), exclude)?;
    Some(VerifyAction::SecondRound {
        job: v.job,
        verification: *key,
        segment: v.segment,
        checkers,
        draw,
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
