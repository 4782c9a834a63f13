//! The hardware challenge duties (`challenges`), pure: which nodes are challenged, which
//! answered challenges are judged, which are recorded unanswered.

use std::collections::{HashMap, HashSet};

mod common;
use common::*;

use mcjs::state::*;
use mcjs_client::Pubkey;
use mcjs_scheduler_daemon::challenges::{
    ChallengeAction, ChallengeObservation, ChallengePolicy, challenge_duties, standard_sizing,
};

/// The SlotHashes sysvar's data for `slots`, newest first, each slot's hash `[slot; 32]`.
fn slot_hashes(slots: &[u64]) -> Vec<u8> {
    let mut data = (slots.len() as u64).to_le_bytes().to_vec();
    for slot in slots {
        data.extend(slot.to_le_bytes());
        data.extend([*slot as u8; 32]);
    }
    data
}

fn policy() -> ChallengePolicy {
    ChallengePolicy {
        enabled: true,
        answer_secs: 60,
        retry_secs: 3_600,
        recheck_secs: 0,
        ..Default::default()
    }
}

fn duties(
    now: i64,
    nodes: &[(Pubkey, Node)],
    alive: &[Pubkey],
    hashes: &[u8],
    policy: &ChallengePolicy,
) -> Vec<ChallengeAction> {
    duties_after(now, nodes, alive, hashes, policy, &HashMap::new())
}

/// As [`duties`], with the times this scheduler last requested each node.
fn duties_after(
    now: i64,
    nodes: &[(Pubkey, Node)],
    alive: &[Pubkey],
    hashes: &[u8],
    policy: &ChallengePolicy,
    requested_at: &HashMap<Pubkey, i64>,
) -> Vec<ChallengeAction> {
    let alive: HashSet<Pubkey> = alive.iter().copied().collect();
    challenge_duties(&ChallengeObservation {
        now,
        nodes,
        alive: &alive,
        slot_hashes: hashes,
        policy,
        requested_at,
    })
}

fn in_flight(requested_slot: u64, at: i64) -> HardwareChallenge {
    HardwareChallenge::new(standard_sizing(0), requested_slot, at)
}

fn step(slot: u64, at: i64) -> ChallengeStepRecord {
    ChallengeStepRecord {
        seed: SlotDraw {
            slot: slot - 1,
            hash: [1; 32],
        },
        answer: [2; 32],
        slot,
        at,
    }
}

#[test]
fn a_live_free_node_never_challenged_is_challenged_and_no_other() {
    let p = key(30);
    let (fresh, busy_node, silent) = (key(20), key(21), key(22));
    let nodes = [
        (fresh, node(p, 81_920)),
        (busy_node, busy(node(p, 81_920), key(10))),
        (silent, node(p, 81_920)),
    ];
    let hashes = slot_hashes(&[9, 8]);
    let live = [fresh, busy_node];
    assert_eq!(
        duties(T0, &nodes, &live, &hashes, &policy()),
        vec![ChallengeAction::Request { node: fresh }]
    );
    // Off: nothing is requested.
    let off = ChallengePolicy {
        enabled: false,
        ..policy()
    };
    assert!(duties(T0, &nodes, &live, &hashes, &off).is_empty());
    // At most `max_in_flight` at once, fleet-wide.
    let mut flying = node(p, 81_920);
    flying.challenge.in_flight = Some(in_flight(5, T0));
    let full = ChallengePolicy {
        max_in_flight: 1,
        ..policy()
    };
    let nodes = [(fresh, node(p, 81_920)), (key(23), flying)];
    assert!(duties(T0, &nodes, &[fresh, key(23)], &hashes, &full).is_empty());
}

#[test]
fn a_verdict_that_proved_nothing_is_retried_after_its_time_and_a_proof_at_random() {
    let p = key(30);
    let n = key(20);
    let hashes = slot_hashes(&[9]);
    let mut failed = node(p, 81_920);
    failed.challenge.last = Some(ChallengeResult::Failed(ChallengeFailure::Late));
    failed.challenge.last_at = T0;
    let nodes = [(n, failed)];
    assert!(duties(T0 + 3_599, &nodes, &[n], &hashes, &policy()).is_empty());
    assert_eq!(
        duties(T0 + 3_600, &nodes, &[n], &hashes, &policy()),
        vec![ChallengeAction::Request { node: n }]
    );

    let mut proven = node(p, 81_920);
    proven.challenge.last = Some(ChallengeResult::Passed);
    proven.challenge.last_at = T0;
    let nodes = [(n, proven)];
    // No re-checks: never again.
    assert!(duties(T0 + 1_000_000, &nodes, &[n], &hashes, &policy()).is_empty());
    // A re-check drawn every round on average (recheck = round): always drawn.
    let every_round = ChallengePolicy {
        recheck_secs: 1,
        round_secs: 1,
        ..policy()
    };
    assert_eq!(
        duties(T0 + 1, &nodes, &[n], &hashes, &every_round),
        vec![ChallengeAction::Request { node: n }]
    );
    // One in a thousand rounds: over many slot hashes, about that share is drawn.
    let rare = ChallengePolicy {
        recheck_secs: 1_000,
        round_secs: 1,
        ..policy()
    };
    let drawn = (0..20_000u64)
        .filter(|slot| {
            let mut data = 1u64.to_le_bytes().to_vec();
            data.extend(slot.to_le_bytes());
            let mut hash = [0u8; 32];
            hash[..8].copy_from_slice(&slot.to_le_bytes());
            data.extend(hash);
            !duties(T0 + 1, &nodes, &[n], &data, &rare).is_empty()
        })
        .count();
    assert!(
        (5..=40).contains(&drawn),
        "{drawn} of 20,000 rounds drew a re-check"
    );
}

/// Re-checks are drawn by provider: a drawn provider's proven, free, live nodes are all
/// challenged in the same round (past `max_in_flight`, which would otherwise let one card
/// answer for them in turn), its busy node is not, and another provider is drawn apart.
#[test]
fn a_drawn_providers_proven_nodes_are_rechecked_all_at_once() {
    let (a, b) = (key(30), key(31));
    let proven = |provider| {
        let mut n = node(provider, 81_920);
        n.challenge.last = Some(ChallengeResult::Passed);
        n.challenge.last_at = T0;
        n
    };
    let a_nodes = [key(20), key(21), key(22)];
    let (b_node, a_busy) = (key(23), key(24));
    let nodes = [
        (a_nodes[0], proven(a)),
        (b_node, proven(b)),
        (a_nodes[1], proven(a)),
        (a_busy, busy(proven(a), key(10))),
        (a_nodes[2], proven(a)),
    ];
    let live = [a_nodes[0], a_nodes[1], a_nodes[2], b_node, a_busy];
    let rare = ChallengePolicy {
        recheck_secs: 50,
        round_secs: 1,
        max_in_flight: 1,
        ..policy()
    };
    let (mut a_rounds, mut b_rounds, mut apart) = (0, 0, 0);
    for slot in 0..4_000u64 {
        let mut data = 1u64.to_le_bytes().to_vec();
        data.extend(slot.to_le_bytes());
        let mut hash = [0u8; 32];
        hash[..8].copy_from_slice(&slot.to_le_bytes());
        data.extend(hash);
        let asked: HashSet<Pubkey> = duties(T0 + 1, &nodes, &live, &data, &rare)
            .iter()
            .map(ChallengeAction::node)
            .collect();
        let of_a = a_nodes.iter().filter(|k| asked.contains(k)).count();
        assert!(
            of_a == 0 || of_a == 3,
            "round {slot}: {of_a} of the provider's 3 nodes asked"
        );
        assert!(!asked.contains(&a_busy), "a busy node is not challenged");
        let b_asked = asked.contains(&b_node);
        a_rounds += usize::from(of_a == 3);
        b_rounds += usize::from(b_asked);
        apart += usize::from((of_a == 3) != b_asked);
    }
    // About 80 rounds of 4,000 each (1 in 50).
    assert!((40..=130).contains(&a_rounds), "{a_rounds}");
    assert!((40..=130).contains(&b_rounds), "{b_rounds}");
    assert!(apart > 60, "providers are drawn apart: {apart}");
}

#[test]
fn an_answered_challenge_is_judged_once_its_open_slot_exists_and_a_silent_one_recorded() {
    let p = key(30);
    let n = key(20);
    let unanswered = ChallengeAction::Record {
        node: n,
        verdict: ChallengeVerdict::Failed(ChallengeFailure::Unanswered),
    };
    // Requested, no commitment: waits its time, then is recorded unanswered (even with
    // requests off: a challenge in flight is always seen to its end).
    let mut asked = node(p, 81_920);
    asked.challenge.in_flight = Some(in_flight(5, T0));
    let nodes = [(n, asked)];
    let hashes = slot_hashes(&[9, 8, 7, 6]);
    let off = ChallengePolicy {
        enabled: false,
        ..policy()
    };
    assert!(duties(T0 + 60, &nodes, &[n], &hashes, &off).is_empty());
    assert_eq!(
        duties(T0 + 61, &nodes, &[n], &hashes, &off),
        vec![unanswered.clone()]
    );

    // Both answers in; the open seed is the first slot hash after the held digest's.
    let mut answered = in_flight(5, T0);
    answered.commit = Some(step(6, T0 + 2));
    answered.hold = Some(step(8, T0 + 4));
    let mut held = node(p, 81_920);
    held.challenge.in_flight = Some(answered);
    let nodes = [(n, held)];
    assert_eq!(
        duties(T0 + 5, &nodes, &[n], &hashes, &policy()),
        vec![ChallengeAction::Judge {
            node: n,
            challenge: answered,
            open_seed: [9; 32],
            overdue: false,
        }]
    );
    // Its open slot not recorded yet: wait; past the time with none: unanswered.
    let early = slot_hashes(&[8, 7]);
    assert!(duties(T0 + 5, &nodes, &[n], &early, &policy()).is_empty());
    assert_eq!(
        duties(T0 + 65, &nodes, &[n], &early, &policy()),
        vec![unanswered]
    );
    // Overdue with the seed there: judged if the opening came, else unanswered (the shell).
    assert_eq!(
        duties(T0 + 65, &nodes, &[n], &hashes, &policy()),
        vec![ChallengeAction::Judge {
            node: n,
            challenge: answered,
            open_seed: [9; 32],
            overdue: true,
        }]
    );
}

/// A node that sheds its challenge by changing its profile (the program then clears the
/// challenge and the last verdict, so the node is due again at once) is asked again only
/// after the policy's spacing: it cannot make the scheduler pay a request every round.
#[test]
fn a_node_is_asked_at_most_once_per_spacing_whatever_it_does_between() {
    let n = key(20);
    let nodes = [(n, node(key(30), 81_920))];
    let hashes = slot_hashes(&[9]);
    let asked = HashMap::from([(n, T0)]);
    let policy = ChallengePolicy {
        request_spacing_secs: 600,
        ..policy()
    };
    assert!(duties_after(T0 + 599, &nodes, &[n], &hashes, &policy, &asked).is_empty());
    assert_eq!(
        duties_after(T0 + 600, &nodes, &[n], &hashes, &policy, &asked),
        vec![ChallengeAction::Request { node: n }]
    );
}

/// The cards other nodes' standing proofs hold, read from their accounts as the scheduler
/// reads them before judging (`attested_cards`): a proof's non-zero device ids, none from a
/// node without a proof or a proof without attestation.
#[test]
fn the_cards_attested_are_read_from_the_nodes_standing_proofs() {
    let p = key(30);
    let attested = |ids: &[u64]| {
        let mut n = node(p, 81_920);
        let mut device_ids = [0u64; MAX_ATTESTED_GPUS];
        device_ids[..ids.len()].copy_from_slice(ids);
        n.challenge.proven = Some(ProvenHardware {
            gpu_count: 2,
            vram_per_gpu_mib: 81_920,
            held_kib_per_gpu: 1,
            memory_shift: 0,
            commit_secs: 1,
            held_secs: 1,
            at: T0,
            attestation: Some(GpuAttestation {
                chip: *b"GH100\0\0\0",
                device_ids,
                evidence: [0; 32],
            }),
        });
        n
    };
    let mut unattested = attested(&[0x99]);
    unattested.challenge.proven.as_mut().unwrap().attestation = None;
    let mut unproven = attested(&[0x98]);
    unproven.challenge.proven = None;
    let nodes = [
        (key(20), attested(&[0xA1, 0, 0xA2])),
        (key(21), attested(&[0, 0xB1])),
        (key(22), unattested),
        (key(23), unproven),
    ];
    let cards = mcjs_client::challenge::attested_cards(nodes.iter().map(|(k, n)| (k, n)));
    assert_eq!(
        cards,
        HashMap::from([(0xA1, key(20)), (0xA2, key(20)), (0xB1, key(21))])
    );
}
