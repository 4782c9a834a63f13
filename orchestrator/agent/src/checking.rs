//! Verification checks, the node's decisions: which of the checks the chain
//! lists for this node to take up now, and what a try of a check comes to
//! (an answer to seal, another try later, or a wait for GPUs). Pure: the
//! shell ([`crate::shell`]'s checks) runs the containers, keeps answers on
//! disk and sends the transactions.

use std::collections::{HashMap, HashSet};

use mcjs_client::Pubkey;
use mcjs_client::program::state::{CheckAnswer, Party, VerificationState};

/// A start the store cannot give (missing, or not matching its attested
/// hash) is answered as such only after this many tries: a listing may lag,
/// a store may be briefly unreachable.
pub const START_TRIES: u32 = 3;

/// One check of this node: a verification and the role the node plays in it.
pub type CheckId = (Pubkey, Party);

/// A check the chain lists for this node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Listed {
    pub id: CheckId,
    pub state: VerificationState,
    /// The job checked and the interval.
    pub job: Pubkey,
    pub interval: u32,
}

/// What a check asks of the node now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Re-execute the interval (unless an answer is already known) and seal the answer.
    Seal,
    /// Reveal the answer sealed earlier.
    Reveal,
}

/// What one try of a check came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tried {
    /// The interval was re-executed: this is the answer.
    Answered(CheckAnswer),
    /// The interval's start could not be restored from the store.
    StartUnavailable,
    /// The node's paid job holds the GPUs the check needs.
    Busy,
    /// Anything else (the spec, the engine, the run).
    Failed,
}

/// What to do after a try.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Seal this answer.
    Seal(CheckAnswer),
    /// Try again after the retry pause.
    Retry,
    /// Try again, quietly, when the GPUs may be free.
    WaitForGpus,
}

/// The checks this node has in hand, the answers it sealed and the failed
/// restores of each check's start.
#[derive(Debug, Default)]
pub struct CheckBook {
    active: HashSet<CheckId>,
    sealed: HashMap<CheckId, CheckAnswer>,
    start_failures: HashMap<CheckId, u32>,
}

impl CheckBook {
    /// The checks the chain lists now that are not already in hand, each
    /// with the step it asks for; they are in hand until [`done`](Self::done).
    /// What the chain no longer lists (resolved, or timed out) is forgotten.
    ///
    /// Of one job's checks to seal, only the earliest interval is taken (the
    /// later ones once it is answered and no longer listed): the store
    /// gateway gives a checker the start of that interval only, since the
    /// start of a later one is the end of an earlier one, which the checker
    /// must reproduce, not read.
    pub fn take(&mut self, listed: &[Listed]) -> Vec<(CheckId, Step)> {
        let ids: HashSet<CheckId> = listed.iter().map(|l| l.id).collect();
        self.start_failures.retain(|id, _| ids.contains(id));
        let mut earliest: HashMap<Pubkey, u32> = HashMap::new();
        for l in listed.iter().filter(|l| l.state == VerificationState::Open) {
            let first = earliest.entry(l.job).or_insert(l.interval);
            *first = (*first).min(l.interval);
        }
        let mut out = Vec::new();
        for l in listed {
            let step = match l.state {
                VerificationState::Open if earliest.get(&l.job) == Some(&l.interval) => Step::Seal,
                VerificationState::Open => continue,
                VerificationState::Revealing => Step::Reveal,
                _ => continue,
            };
            if self.active.insert(l.id) {
                out.push((l.id, step));
            }
        }
        out
    }

    /// A step is over, whichever way: the chain says what is due next (a
    /// reveal after the seal), and a step it took is no longer listed.
    pub fn done(&mut self, id: &CheckId) {
        self.active.remove(id);
    }

    /// What a try of `id` came to. A start that cannot be restored
    /// [`START_TRIES`] times in a row is the answer (`StartUnavailable`:
    /// the provider who attested it cannot show it); any other failure is
    /// tried again without ever becoming an answer.
    pub fn tried(&mut self, id: &CheckId, tried: Tried) -> Next {
        match tried {
            Tried::Answered(answer) => {
                self.start_failures.remove(id);
                Next::Seal(answer)
            }
            Tried::StartUnavailable => {
                let n = self.start_failures.entry(*id).or_default();
                *n += 1;
                if *n >= START_TRIES {
                    self.start_failures.remove(id);
                    Next::Seal(CheckAnswer::StartUnavailable)
                } else {
                    Next::Retry
                }
            }
            Tried::Busy => Next::WaitForGpus,
            Tried::Failed => Next::Retry,
        }
    }

    /// The answer sealed for `id` in this run of the agent.
    pub fn sealed(&self, id: &CheckId) -> Option<CheckAnswer> {
        self.sealed.get(id).copied()
    }

    /// `answer` is (about to be) sealed for `id`: a later try seals the same
    /// answer, and the reveal opens it.
    pub fn seal(&mut self, id: CheckId, answer: CheckAnswer) {
        self.sealed.insert(id, answer);
    }

    /// The answer was revealed: nothing more to keep.
    pub fn revealed(&mut self, id: &CheckId) {
        self.sealed.remove(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const REPRODUCED: CheckAnswer = CheckAnswer::Reproduced {
        hash: [1; 32],
        possession: [2; 32],
    };

    fn id(n: u8) -> CheckId {
        (Pubkey::new_from_array([n; 32]), Party::Verifier)
    }

    #[test]
    fn what_a_sequence_of_tries_comes_to() {
        use Next::*;
        use Tried::*;
        let table: Vec<(Vec<Tried>, Vec<Next>)> = vec![
            (vec![Answered(REPRODUCED)], vec![Seal(REPRODUCED)]),
            // The start is missing three times in a row: that is the answer.
            (
                vec![StartUnavailable, StartUnavailable, StartUnavailable],
                vec![Retry, Retry, Seal(CheckAnswer::StartUnavailable)],
            ),
            // A store that comes back in time: the interval is re-executed.
            (
                vec![StartUnavailable, StartUnavailable, Answered(REPRODUCED)],
                vec![Retry, Retry, Seal(REPRODUCED)],
            ),
            // Busy GPUs and other failures never become an answer, nor count
            // towards an unavailable start.
            (
                vec![Busy, Failed, Busy, Failed, Failed, Failed],
                vec![WaitForGpus, Retry, WaitForGpus, Retry, Retry, Retry],
            ),
            (
                vec![
                    StartUnavailable,
                    Failed,
                    Busy,
                    StartUnavailable,
                    StartUnavailable,
                ],
                vec![
                    Retry,
                    Retry,
                    WaitForGpus,
                    Retry,
                    Seal(CheckAnswer::StartUnavailable),
                ],
            ),
        ];
        for (tries, expected) in table {
            let mut book = CheckBook::default();
            let got: Vec<Next> = tries.iter().map(|t| book.tried(&id(1), *t)).collect();
            assert_eq!(got, expected, "{tries:?}");
        }
    }

    #[test]
    fn a_restore_that_failed_for_one_check_counts_for_no_other() {
        let mut book = CheckBook::default();
        let (a, b) = (id(1), id(2));
        book.tried(&a, Tried::StartUnavailable);
        book.tried(&a, Tried::StartUnavailable);
        assert_eq!(book.tried(&b, Tried::StartUnavailable), Next::Retry);
        // The same verification in the other role is another check.
        let referee = (a.0, Party::Referee);
        assert_eq!(book.tried(&referee, Tried::StartUnavailable), Next::Retry);
        assert_eq!(
            book.tried(&a, Tried::StartUnavailable),
            Next::Seal(CheckAnswer::StartUnavailable)
        );
    }

    fn listed(n: u8, state: VerificationState) -> Listed {
        Listed {
            id: id(n),
            state,
            job: Pubkey::new_from_array([100 + n; 32]),
            interval: 1,
        }
    }

    #[test]
    fn a_listed_check_is_taken_once_until_its_step_is_done() {
        use VerificationState as V;
        let mut book = CheckBook::default();
        let listed = [listed(1, V::Open), listed(2, V::Revealing)];
        assert_eq!(
            book.take(&listed),
            vec![(id(1), Step::Seal), (id(2), Step::Reveal)]
        );
        // Still listed and still in hand: nothing new.
        assert_eq!(book.take(&listed), vec![]);
        book.done(&id(1));
        assert_eq!(book.take(&listed), vec![(id(1), Step::Seal)]);
        // A verification in any other state asks nothing of its checkers.
        book.done(&id(1));
        let resolved = V::Resolved {
            outcome: mcjs_client::program::state::VerificationOutcome::Confirmed,
        };
        assert_eq!(book.take(&[self::listed(1, resolved)]), vec![]);
    }

    /// Checks of one job are sealed in interval order, whatever order the
    /// chain lists them in; reveals and other jobs' checks do not wait.
    #[test]
    fn of_one_jobs_checks_only_the_earliest_interval_is_taken_to_seal() {
        use VerificationState as V;
        let job = Pubkey::new_from_array([9; 32]);
        let of_job = |n: u8, state, interval| Listed {
            id: id(n),
            state,
            job,
            interval,
        };
        let mut book = CheckBook::default();
        let listed = [
            of_job(1, V::Open, 7),
            of_job(2, V::Open, 5),
            of_job(3, V::Revealing, 4),
            listed(4, V::Open),
        ];
        assert_eq!(
            book.take(&listed),
            vec![
                (id(2), Step::Seal),
                (id(3), Step::Reveal),
                (id(4), Step::Seal)
            ]
        );
        // Interval 5 still unanswered: 7 waits, even with 5 out of hand.
        book.done(&id(2));
        assert_eq!(book.take(&listed), vec![(id(2), Step::Seal)]);
        // Interval 5 sealed: the chain lists it no more (or as Revealing),
        // and 7 is taken.
        book.done(&id(2));
        let after = [of_job(1, V::Open, 7), of_job(2, V::Revealing, 5)];
        assert_eq!(
            book.take(&after),
            vec![(id(1), Step::Seal), (id(2), Step::Reveal)]
        );
    }

    #[test]
    fn a_check_the_chain_stops_listing_starts_over_if_listed_again() {
        let mut book = CheckBook::default();
        book.tried(&id(1), Tried::StartUnavailable);
        book.tried(&id(1), Tried::StartUnavailable);
        // Resolved (its checkers timed out) and gone from the list.
        book.take(&[]);
        assert_eq!(book.tried(&id(1), Tried::StartUnavailable), Next::Retry);
    }

    #[test]
    fn a_sealed_answer_is_kept_until_revealed() {
        let mut book = CheckBook::default();
        assert_eq!(book.sealed(&id(1)), None);
        book.seal(id(1), REPRODUCED);
        assert_eq!(book.sealed(&id(1)), Some(REPRODUCED));
        assert_eq!(book.sealed(&id(2)), None);
        book.revealed(&id(1));
        assert_eq!(book.sealed(&id(1)), None);
    }
}
