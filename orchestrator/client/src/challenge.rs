//! The hardware challenge between the chain and its pure core (`mcjs_challenge`): a Node's
//! record becomes the challenge's parameters, draws and answers, and a verdict becomes what
//! `record_challenge` takes. The scheduler (the checker), the agent (the node) and the
//! auditors all go through here, so they read the record the same way.

use std::time::Duration;

use anchor_lang::prelude::Pubkey;
use mcjs::state::{
    ChallengeFailure, ChallengeSizing, ChallengeVerdict, HardwareChallenge, Node, slot_hash_after,
};
use mcjs_challenge::bounds::BoundsTable;
use mcjs_challenge::{
    ClaimError, Draws, Failure, NodeAnswers, NodeClaim, Params, PhaseTimes, Sizing, Verdict,
};

/// The challenge's sizing as the program records it, and back.
pub fn sizing_on_chain(sizing: &Sizing, memory_shift: u8) -> ChallengeSizing {
    ChallengeSizing {
        fill_percent: sizing.fill_percent,
        max_width: sizing.max_width,
        passes: sizing.passes,
        rows_opened: sizing.rows_opened,
        memory_shift,
    }
}

pub fn sizing_of(on_chain: &ChallengeSizing) -> Sizing {
    Sizing {
        fill_percent: on_chain.fill_percent,
        max_width: on_chain.max_width,
        passes: on_chain.passes,
        rows_opened: on_chain.rows_opened,
    }
}

/// What `node` claims, sized as its challenge in flight says.
pub fn claim_of(key: &Pubkey, node: &Node, challenge: &HardwareChallenge) -> NodeClaim {
    NodeClaim {
        node: key.to_bytes(),
        model: node.hardware.gpu_model.clone(),
        gpu_count: node.hardware.gpu_count,
        vram_per_gpu_mib: node.hardware.vram_per_gpu_mib,
        sizing: sizing_of(&challenge.sizing),
        memory_shift: challenge.sizing.memory_shift,
    }
}

/// Each GPU's parameters, once the program has drawn the challenge seed (at the node's
/// commitment), or from the seed a node reads in the SlotHashes sysvar before it commits
/// ([`seed_for_commit`]).
pub fn params_of(
    table: &BoundsTable<'_>,
    key: &Pubkey,
    node: &Node,
    challenge: &HardwareChallenge,
    seed: &[u8; 32],
) -> Result<Vec<Params>, ClaimError> {
    claim_of(key, node, challenge).params(table, seed)
}

/// The challenge seed a node answers: the hash of the first slot after the request, read
/// from the SlotHashes sysvar's data exactly as the program draws it. `None` until that
/// slot has been recorded.
pub fn seed_for_commit(challenge: &HardwareChallenge, slot_hashes: &[u8]) -> Option<[u8; 32]> {
    slot_hash_after(slot_hashes, challenge.requested_slot).map(|(_, hash)| hash)
}

/// The held seed, once the commitment has landed: the first slot hash after it.
pub fn seed_for_hold(challenge: &HardwareChallenge, slot_hashes: &[u8]) -> Option<[u8; 32]> {
    let commit = challenge.commit?;
    slot_hash_after(slot_hashes, commit.slot).map(|(_, hash)| hash)
}

/// The open seed, once the held digest has landed: the first slot hash after it (what
/// `record_challenge` draws and logs).
pub fn seed_for_open(challenge: &HardwareChallenge, slot_hashes: &[u8]) -> Option<[u8; 32]> {
    let hold = challenge.hold?;
    slot_hash_after(slot_hashes, hold.slot).map(|(_, hash)| hash)
}

/// Both answers, their draws and their times, when both have landed.
pub fn answers_of(
    challenge: &HardwareChallenge,
    open_seed: [u8; 32],
) -> Option<(Draws, NodeAnswers)> {
    let (commit, hold) = (challenge.commit?, challenge.hold?);
    let (commit_secs, held_secs) = challenge.phase_secs();
    let times = PhaseTimes {
        commit: Duration::from_secs(u64::from(commit_secs?)),
        held: Duration::from_secs(u64::from(held_secs?)),
    };
    Some((
        Draws {
            held_seed: hold.seed.hash,
            open_seed,
        },
        NodeAnswers {
            commitment: commit.answer,
            held_digest: hold.answer,
            times,
        },
    ))
}

/// What the program records of a verdict.
pub fn verdict_on_chain(verdict: &Verdict) -> ChallengeVerdict {
    match verdict {
        Verdict::Passed(profile) => ChallengeVerdict::Passed {
            held_kib_per_gpu: u32::try_from(profile.held_bytes >> 10).unwrap_or(u32::MAX),
        },
        Verdict::Unbounded => ChallengeVerdict::Unbounded,
        Verdict::Failed(failure) => ChallengeVerdict::Failed(failure_on_chain(failure)),
    }
}

pub fn failure_on_chain(failure: &Failure) -> ChallengeFailure {
    match failure {
        Failure::Unanswered { .. } => ChallengeFailure::Unanswered,
        Failure::Late { .. } => ChallengeFailure::Late,
        Failure::Malformed(_) => ChallengeFailure::Malformed,
        Failure::HeldChainMismatch => ChallengeFailure::HeldChainMismatch,
        Failure::BadProof { .. } => ChallengeFailure::BadProof,
        Failure::HeldMismatch { .. } => ChallengeFailure::HeldMismatch,
        Failure::FreivaldsMismatch { .. } => ChallengeFailure::FreivaldsMismatch,
    }
}
