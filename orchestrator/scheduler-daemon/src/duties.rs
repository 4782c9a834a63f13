//! What each node owes as a checker, from the round's read of the program's
//! Verification accounts, served to agents at
//! [`mcjs_protocol::CHECKS_PATH`] so that none of them scans the program
//! for its own checks. The list is a hint: an agent reads what it names by
//! address and acts only on what the chain confirms, so a stale or wrong
//! list costs a check at most a round's delay, never a wrong answer.

use std::collections::HashMap;

use mcjs_client::Pubkey;
use mcjs_client::program::state::Verification;
use mcjs_client::rpc::due_roles;

/// Per checker node, the verifications in which it must act now.
#[derive(Clone, Debug, Default)]
pub struct CheckRoster {
    by_node: HashMap<Pubkey, Vec<Pubkey>>,
    /// The chain time of the read they come from (0 before the first).
    read_at: i64,
}

impl CheckRoster {
    /// From one read of every Verification account, at chain time `now`.
    pub fn from_verifications(verifications: &[(Pubkey, Verification)], now: i64) -> Self {
        let mut ordered: Vec<&(Pubkey, Verification)> = verifications.iter().collect();
        ordered.sort_by_key(|(_, v)| (v.job, v.interval));
        let mut by_node: HashMap<Pubkey, Vec<Pubkey>> = HashMap::new();
        for (key, v) in ordered {
            for node in [v.verifier_node, v.referee_node] {
                if !due_roles(v, &node).is_empty() {
                    let owed = by_node.entry(node).or_default();
                    if !owed.contains(key) {
                        owed.push(*key);
                    }
                }
            }
        }
        Self {
            by_node,
            read_at: now,
        }
    }

    /// What `node` owes, as served.
    pub fn of(&self, node: &Pubkey) -> mcjs_protocol::CheckDuties {
        mcjs_protocol::CheckDuties {
            verifications: self
                .by_node
                .get(node)
                .map(|keys| keys.iter().map(Pubkey::to_string).collect())
                .unwrap_or_default(),
            read_at: self.read_at,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcjs_client::program::state::{CheckpointRecord, VerificationOutcome, VerificationState};

    fn verification(job: Pubkey, interval: u32, verifier: Pubkey, referee: Pubkey) -> Verification {
        Verification {
            job,
            verifier_node: verifier,
            referee_node: referee,
            node: Pubkey::new_unique(),
            state: VerificationState::Open,
            interval,
            segment: Pubkey::new_unique(),
            provider: Pubkey::new_unique(),
            verifier_provider: Pubkey::new_unique(),
            verifier_payout: Pubkey::new_unique(),
            referee_provider: Pubkey::new_unique(),
            referee_payout: Pubkey::new_unique(),
            from: None,
            to: CheckpointRecord {
                hash: [1; 32],
                epoch: 1,
                step: 10,
                time: 0,
                generation: 1,
            },
            interval_amount: 1,
            earned_to: 1,
            possession_key: [0; 32],
            verifier_commitment: None,
            referee_commitment: None,
            verifier_answer: None,
            referee_answer: None,
            draw_slot: 0,
            opened_at: 0,
            resolved_at: None,
            fees: 0,
            slashed: 0,
            rent_payer: Pubkey::new_unique(),
            bump: 0,
            replacements: 0,
            first_round: None,
            output: false,
        }
    }

    /// A node owes a seal while it has not sealed, nothing while the other
    /// checker has not, a reveal once both have, and nothing once resolved;
    /// the list comes ordered by job and interval, whatever the read's order.
    #[test]
    fn each_checker_is_told_what_it_owes_now_and_nothing_else() {
        let (a, b, c, job) = (
            Pubkey::new_unique(),
            Pubkey::new_unique(),
            Pubkey::new_unique(),
            Pubkey::new_unique(),
        );
        let keys: Vec<Pubkey> = (0..4).map(|_| Pubkey::new_unique()).collect();
        let later = verification(job, 5, a, b);
        let earlier = verification(job, 4, a, b);
        let mut a_sealed = verification(job, 6, a, b);
        a_sealed.verifier_commitment = Some([2; 32]);
        let mut revealing = verification(job, 3, a, c);
        revealing.state = VerificationState::Revealing;
        revealing.verifier_commitment = Some([2; 32]);
        revealing.referee_commitment = Some([3; 32]);
        let mut resolved = verification(job, 2, c, b);
        resolved.state = VerificationState::Resolved {
            outcome: VerificationOutcome::Confirmed,
        };
        let read = vec![
            (keys[0], later),
            (keys[1], earlier),
            (keys[2], a_sealed),
            (keys[3], revealing),
            (Pubkey::new_unique(), resolved),
        ];
        let duties = CheckRoster::from_verifications(&read, 42);
        let owed = |n: &Pubkey| duties.of(n).verifications;
        let s = |k: &Pubkey| k.to_string();
        assert_eq!(owed(&a), vec![s(&keys[3]), s(&keys[1]), s(&keys[0])]);
        assert_eq!(owed(&b), vec![s(&keys[1]), s(&keys[0]), s(&keys[2])]);
        assert_eq!(owed(&c), vec![s(&keys[3])]);
        assert!(owed(&Pubkey::new_unique()).is_empty());
        assert_eq!(duties.of(&a).read_at, 42);
    }
}
