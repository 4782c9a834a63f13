//! The hardware challenge between the chain and its pure core (`mcjs_challenge`): a Node's
//! record becomes the challenge's parameters, draws and answers, and a verdict becomes what
//! `record_challenge` takes. The scheduler (the checker), the agent (the node) and the
//! auditors all go through here, so they read the record the same way.

use std::collections::HashMap;
use std::time::Duration;

use anchor_lang::prelude::Pubkey;
use mcjs::state::{
    ChallengeFailure, ChallengeSizing, ChallengeVerdict, GpuAttestation, HardwareChallenge,
    MAX_ATTESTED_GPUS, MAX_CHIP_NAME, Node, slot_hash_after,
};
use mcjs_challenge::attestation::{AttestationError, Attested, GpuEvidence, evidence_digest};
use mcjs_challenge::bounds::BoundsTable;
use mcjs_challenge::{
    ClaimError, Draws, Failure, NodeAnswers, NodeClaim, NodeOpening, Params, PhaseTimes, Sizing,
    Verdict,
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

/// The cards each node's standing proof attests, by device id, from nodes' accounts: a card
/// is credited to one node at a time.
pub fn attested_cards<'a>(
    nodes: impl IntoIterator<Item = (&'a Pubkey, &'a Node)>,
) -> HashMap<u64, Pubkey> {
    let mut cards = HashMap::new();
    for (key, node) in nodes {
        let attestation = node.challenge.proven.and_then(|p| p.attestation);
        for id in attestation.iter().flat_map(|a| a.device_ids) {
            if id != 0 {
                cards.entry(id).or_insert(*key);
            }
        }
    }
    cards
}

/// An attestation judged against an earlier read of the accounts, held again to the cards
/// credited since (`held`: [`attested_cards`] of the round, with what this round recorded):
/// kept whole, and its cards added to `held`, when no other node holds any of them; else
/// `None` (two nodes judged at once cannot both be credited one card). Returns the other
/// node that holds a card, for the log.
pub fn credit_once(
    node: &Pubkey,
    attestation: GpuAttestation,
    held: &mut HashMap<u64, Pubkey>,
) -> Result<GpuAttestation, (u64, Pubkey)> {
    let cards = attestation.device_ids.into_iter().filter(|id| *id != 0);
    if let Some(clash) = cards.clone().find_map(|id| {
        held.get(&id)
            .filter(|other| *other != node)
            .map(|other| (id, *other))
    }) {
        return Err(clash);
    }
    for id in cards {
        held.insert(id, *node);
    }
    Ok(attestation)
}

/// A device id as NVIDIA's identity certificate writes it (16 hex digits) as the chain keeps
/// it; `None` for anything else, or 0.
pub fn device_id_on_chain(device_id: &str) -> Option<u64> {
    if device_id.is_empty() || device_id.len() > 16 {
        return None;
    }
    u64::from_str_radix(device_id, 16)
        .ok()
        .filter(|id| *id != 0)
}

/// What the chain records of a node's attestation, from each GPU's checked evidence
/// (`mcjs_challenge::attest_node`, in GPU order, the evidence in `opening`): each GPU whose
/// evidence verified, of the first such GPU's chip, whose card no other node's proof holds
/// (`elsewhere`, [`attested_cards`]) and that no earlier GPU of this node named, is credited
/// with its device id. `None` when no GPU is. The second value says, per GPU not credited,
/// why.
pub fn attestation_on_chain(
    node: &Pubkey,
    checked: &[Option<Result<Attested, AttestationError>>],
    opening: &NodeOpening,
    elsewhere: &HashMap<u64, Pubkey>,
) -> (Option<GpuAttestation>, Vec<(usize, String)>) {
    let mut chip: Option<[u8; MAX_CHIP_NAME]> = None;
    let mut device_ids = [0u64; MAX_ATTESTED_GPUS];
    let mut credited: Vec<(usize, &GpuEvidence)> = Vec::new();
    let mut refused = Vec::new();
    for (gpu, result) in checked.iter().enumerate() {
        let attested = match result {
            None => continue,
            Some(Err(why)) => {
                refused.push((gpu, why.to_string()));
                continue;
            }
            Some(Ok(attested)) => attested,
        };
        let Some(evidence) = opening.gpus.get(gpu).and_then(|g| g.attestation.as_ref()) else {
            continue;
        };
        let why = (|| {
            if gpu >= MAX_ATTESTED_GPUS {
                return Err(format!("a node has at most {MAX_ATTESTED_GPUS} GPUs"));
            }
            let name = attested.chip.as_bytes();
            if name.is_empty()
                || name.len() > MAX_CHIP_NAME
                || !name.iter().all(u8::is_ascii_alphanumeric)
            {
                return Err(format!("chip name {:?} cannot be recorded", attested.chip));
            }
            let mut this_chip = [0u8; MAX_CHIP_NAME];
            this_chip[..name.len()].copy_from_slice(name);
            if chip.is_some_and(|c| c != this_chip) {
                return Err(format!(
                    "chip {} is not the node's first attested GPU's",
                    attested.chip
                ));
            }
            let id = device_id_on_chain(&attested.device_id)
                .ok_or_else(|| format!("device id {:?} cannot be recorded", attested.device_id))?;
            if let Some(other) = elsewhere.get(&id).filter(|other| *other != node) {
                return Err(format!(
                    "card {} is attested for node {other}: one card is credited to one node",
                    attested.device_id
                ));
            }
            if device_ids.contains(&id) {
                return Err(format!(
                    "card {} is named by another of this node's GPUs",
                    attested.device_id
                ));
            }
            chip = Some(this_chip);
            device_ids[gpu] = id;
            Ok(())
        })();
        match why {
            Ok(()) => credited.push((gpu, evidence)),
            Err(why) => refused.push((gpu, why)),
        }
    }
    let record = chip.map(|chip| GpuAttestation {
        chip,
        device_ids,
        evidence: evidence_digest(&credited),
    });
    (record, refused)
}

/// The chip name an attestation record keeps, as text.
pub fn chip_name(attestation: &GpuAttestation) -> String {
    let end = attestation
        .chip
        .iter()
        .position(|b| *b == 0)
        .unwrap_or(MAX_CHIP_NAME);
    String::from_utf8_lossy(&attestation.chip[..end]).into_owned()
}

/// "2 of 2 GPUs attested by NVIDIA (GH100)", for people.
pub fn attestation_summary(attestation: &GpuAttestation, gpu_count: u8) -> String {
    format!(
        "{} of {gpu_count} GPUs attested by NVIDIA ({})",
        attestation.attested(),
        chip_name(attestation)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcjs_challenge::{GpuOpening, Opening};

    fn evidence(byte: u8) -> GpuEvidence {
        GpuEvidence {
            report: vec![byte; 40],
            certificates: vec![vec![byte; 8], vec![byte ^ 1; 8]],
        }
    }

    fn opening(gpus: usize) -> NodeOpening {
        NodeOpening {
            gpus: (0..gpus)
                .map(|i| GpuOpening {
                    commitment: [0; 32],
                    held_digest: [0; 32],
                    opening: Opening {
                        held_roots: Vec::new(),
                        rows: Vec::new(),
                    },
                    attestation: Some(evidence(i as u8)),
                })
                .collect(),
        }
    }

    fn card(chip: &str, id: &str) -> Option<Result<Attested, AttestationError>> {
        Some(Ok(Attested {
            chip: chip.into(),
            device_id: id.into(),
            driver_version: None,
            vbios_version: None,
            measurements: Vec::new(),
        }))
    }

    #[test]
    fn each_card_verified_is_recorded_once_for_one_node() {
        let (node, other) = (Pubkey::new_unique(), Pubkey::new_unique());
        let opening = opening(4);
        let checked = vec![
            card("GH100", "48B02D92494BADF4"),
            card("GH100", "0000000000000A11"),
            card("GH100", "48b02d92494badf4"), // the first card again
            card("GH100", "00000000000000B2"),
        ];
        // Card B2 is held by another node's proof; A11 by this node's own last proof.
        let elsewhere = HashMap::from([(0xB2, other), (0xA11, node)]);
        let (record, refused) = attestation_on_chain(&node, &checked, &opening, &elsewhere);
        let record = record.expect("two GPUs credited");
        assert_eq!(
            &record.device_ids[..5],
            &[0x48B0_2D92_494B_ADF4, 0xA11, 0, 0, 0]
        );
        assert_eq!(chip_name(&record), "GH100");
        assert_eq!(
            record.evidence,
            evidence_digest(&[(0, &evidence(0)), (1, &evidence(1))]),
            "bound to the credited GPUs' evidence"
        );
        assert!(record.validate(4).is_ok(), "the program takes it");
        let reasons: Vec<(usize, bool)> = refused
            .iter()
            .map(|(gpu, why)| (*gpu, why.contains("card")))
            .collect();
        assert_eq!(reasons, [(2, true), (3, true)]);
        assert!(
            refused[1].1.contains(&other.to_string()),
            "{}",
            refused[1].1
        );
    }

    /// Two nodes judged against the same read of the accounts, both naming one card: the
    /// first recorded is credited, the second's attestation is dropped whole.
    #[test]
    fn one_card_judged_for_two_nodes_at_once_is_credited_once() {
        let (first, second) = (Pubkey::new_unique(), Pubkey::new_unique());
        let record = |ids: &[u64]| {
            let mut device_ids = [0u64; MAX_ATTESTED_GPUS];
            device_ids[..ids.len()].copy_from_slice(ids);
            GpuAttestation {
                chip: *b"GH100\0\0\0",
                device_ids,
                evidence: [0; 32],
            }
        };
        // The first node's own earlier proof held 0xA1: its re-check keeps it.
        let mut held = HashMap::from([(0xA1, first)]);
        assert!(credit_once(&first, record(&[0xA1, 0xA2]), &mut held).is_ok());
        assert_eq!(
            credit_once(&second, record(&[0xB1, 0xA2]), &mut held),
            Err((0xA2, first))
        );
        assert_eq!(held.get(&0xB1), None, "nothing of a dropped record is held");
        assert!(credit_once(&second, record(&[0xB1]), &mut held).is_ok());
        assert_eq!(held.get(&0xB1), Some(&second));
    }

    #[test]
    fn evidence_refused_or_unrecordable_is_not_credited() {
        let node = Pubkey::new_unique();
        let opening = opening(6);
        let checked = vec![
            None,
            Some(Err(AttestationError::Nonce)),
            card("GH100", "not hex"),
            card("GH100", "0"),
            card("GH100", "148B02D92494BADF4"), // 17 digits
            card("GH100 ", "01"),               // not letters and digits
        ];
        let (record, refused) = attestation_on_chain(&node, &checked, &opening, &HashMap::new());
        assert_eq!(record, None);
        assert_eq!(
            refused.iter().map(|(gpu, _)| *gpu).collect::<Vec<_>>(),
            [1, 2, 3, 4, 5]
        );

        // A second chip on the node is not the first's.
        let checked = vec![card("GH100", "01"), card("AD102", "02")];
        let (record, refused) = attestation_on_chain(&node, &checked, &opening, &HashMap::new());
        assert_eq!(record.map(|r| r.attested()), Some(1));
        assert_eq!(refused.len(), 1);
        assert!(refused[0].1.contains("AD102"), "{}", refused[0].1);
    }
}
