//! What the failure detector could see of each thing a job's progress
//! depends on (the chain, the store): when it last answered, whether it has
//! failed since, and the outages it had. No job is judged late for time
//! inside an outage (`core::excused_ms`): while the chain is unreadable no
//! node can attest and the detector cannot see that one did; while the store
//! is down no checkpoint can be stored, so none can be attested.
//!
//! Pure bookkeeping on times the shell passes in, so it is tested without a
//! clock.

use std::collections::VecDeque;

/// Outages remembered: the detector's allowances are hours at most, so
/// older ones no longer excuse anything.
pub const OUTAGES_KEPT: usize = 64;

/// One dependency's answers and outages.
#[derive(Debug, Default)]
pub struct Sight {
    /// When it last answered, ms.
    last_ok_ms: Option<i64>,
    /// It has failed to answer since then.
    failing: bool,
    /// Closed outages (from the last answer before to the first after),
    /// oldest first; at most [`OUTAGES_KEPT`].
    outages: VecDeque<(i64, i64)>,
}

impl Sight {
    /// A dependency nothing is known of before `at` (the scheduler started
    /// then): everything before counts as one outage, so a job is judged
    /// late only for time after the start, once its node had the chance to
    /// attest again.
    pub fn blind_before(at: i64) -> Self {
        Self {
            last_ok_ms: Some(at),
            failing: false,
            outages: VecDeque::from([(i64::MIN, at)]),
        }
    }

    /// It answered at `now`. Returns the outage this ends, if a failure came
    /// between this answer and the one before.
    pub fn answered(&mut self, now: i64) -> Option<(i64, i64)> {
        let ended = if std::mem::take(&mut self.failing) {
            self.last_ok_ms.map(|last| (last, now))
        } else {
            None
        };
        if let Some(outage) = ended {
            if self.outages.len() == OUTAGES_KEPT {
                self.outages.pop_front();
            }
            self.outages.push_back(outage);
        }
        self.last_ok_ms = Some(now);
        ended
    }

    /// It failed to answer. Returns whether this starts an outage (the
    /// first failure after an answer, or ever).
    pub fn failed(&mut self) -> bool {
        !std::mem::replace(&mut self.failing, true)
    }

    /// Whether its last attempt failed.
    pub fn is_failing(&self) -> bool {
        self.failing
    }

    /// Its closed outages, oldest first.
    pub fn outages(&self) -> impl Iterator<Item = (i64, i64)> + '_ {
        self.outages.iter().copied()
    }

    /// Its closed outages and, while it is failing, the one still running
    /// (from its last answer, or from ever if it never answered, to `now`).
    pub fn outages_until(&self, now: i64) -> impl Iterator<Item = (i64, i64)> + '_ {
        let ongoing = self
            .failing
            .then(|| (self.last_ok_ms.unwrap_or(i64::MIN), now));
        self.outages().chain(ongoing)
    }
}

#[cfg(test)]
mod tests {
    use super::{OUTAGES_KEPT, Sight};

    #[test]
    fn an_outage_runs_from_the_last_answer_before_to_the_first_after_and_old_ones_are_dropped() {
        let mut s = Sight::default();
        assert_eq!(s.answered(1_000), None);
        assert_eq!(s.answered(2_000), None);
        assert_eq!(
            s.outages().count(),
            0,
            "answers without a failure are no outage"
        );
        assert!(s.failed(), "the first failure starts an outage");
        assert!(!s.failed(), "the second continues it");
        assert_eq!(s.answered(9_000), Some((2_000, 9_000)));
        assert_eq!(s.outages().collect::<Vec<_>>(), vec![(2_000, 9_000)]);
        assert_eq!(s.answered(10_000), None);
        assert_eq!(s.outages().count(), 1);
        // A failure before the first answer ever is no outage of a known length.
        let mut fresh = Sight::default();
        fresh.failed();
        assert_eq!(fresh.answered(5_000), None);
        assert_eq!(fresh.outages().count(), 0);
        for i in 0..100 {
            s.failed();
            s.answered(20_000 + i * 10);
        }
        assert_eq!(s.outages().count(), OUTAGES_KEPT);
        assert_eq!(s.outages().last(), Some((20_980, 20_990)));
    }

    #[test]
    fn nothing_before_the_start_is_known() {
        let mut s = Sight::blind_before(5_000);
        assert_eq!(s.outages().collect::<Vec<_>>(), vec![(i64::MIN, 5_000)]);
        assert_eq!(s.answered(6_000), None);
        s.failed();
        assert_eq!(s.answered(9_000), Some((6_000, 9_000)));
        assert_eq!(s.outages().count(), 2);
    }

    #[test]
    fn an_outage_still_running_counts_up_to_now() {
        let mut s = Sight::default();
        s.answered(1_000);
        assert_eq!(s.outages_until(5_000).count(), 0);
        s.failed();
        assert!(s.is_failing());
        assert_eq!(
            s.outages_until(5_000).collect::<Vec<_>>(),
            vec![(1_000, 5_000)]
        );
        assert_eq!(
            s.outages_until(8_000).collect::<Vec<_>>(),
            vec![(1_000, 8_000)]
        );
        s.answered(9_000);
        assert!(!s.is_failing());
        assert_eq!(
            s.outages_until(20_000).collect::<Vec<_>>(),
            vec![(1_000, 9_000)]
        );
        // Never answered: everything up to now is excused until it does.
        let mut never = Sight::default();
        never.failed();
        assert_eq!(
            never.outages_until(3_000).collect::<Vec<_>>(),
            vec![(i64::MIN, 3_000)]
        );
    }
}
