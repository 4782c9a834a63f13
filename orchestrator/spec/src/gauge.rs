//! MCJS's key gauge, the **completion rate**: jobs completed / jobs that ended (completed +
//! failed), over a window. Cancelled and expired jobs are counted apart and are in neither
//! term (an owner who gives a job up, or a deadline no node could meet, says nothing of how
//! well the network runs the jobs it starts); jobs not yet ended are not in it. The founders'
//! line is 80%.
//!
//! One owner of the definition: the dashboard's overview (over the chain, through
//! `mcjs_ledger::completion`), the fleet simulator and the fault suite's soak all count here.

use serde::Serialize;

/// The founders' line, in percent: a network whose completion rate is under it is failing
/// its owners.
pub const COMPLETION_LINE_PERCENT: u64 = 80;

/// How a job ended: the program's four terminal states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum JobEnd {
    Completed,
    Failed,
    Cancelled,
    Expired,
}

/// Job ends counted by kind, and the completion rate they give.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct EndCounts {
    pub completed: u64,
    pub failed: u64,
    pub cancelled: u64,
    pub expired: u64,
}

impl EndCounts {
    pub fn of(ends: impl IntoIterator<Item = JobEnd>) -> Self {
        let mut counts = Self::default();
        for end in ends {
            counts.count(end);
        }
        counts
    }

    pub fn count(&mut self, end: JobEnd) {
        match end {
            JobEnd::Completed => self.completed += 1,
            JobEnd::Failed => self.failed += 1,
            JobEnd::Cancelled => self.cancelled += 1,
            JobEnd::Expired => self.expired += 1,
        }
    }

    /// The jobs the rate is over: completed and failed.
    pub fn ended(&self) -> u64 {
        self.completed + self.failed
    }

    /// Completed / (completed + failed); `None` while no job has ended, never 0% or 100%.
    pub fn completion_rate(&self) -> Option<f64> {
        (self.ended() > 0).then(|| self.completed as f64 / self.ended() as f64)
    }

    /// Whether the rate is at or above [`COMPLETION_LINE_PERCENT`], compared exactly (in
    /// integers, so 4 of 5 is on the line); `None` while no job has ended.
    pub fn meets_line(&self) -> Option<bool> {
        (self.ended() > 0).then(|| {
            u128::from(self.completed) * 100
                >= u128::from(self.ended()) * u128::from(COMPLETION_LINE_PERCENT)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use JobEnd::*;

    #[test]
    fn cancelled_and_expired_jobs_are_counted_apart_from_the_rate() {
        let counts = EndCounts::of([
            Completed, Completed, Completed, Failed, Cancelled, Cancelled, Expired,
        ]);
        assert_eq!(
            counts,
            EndCounts {
                completed: 3,
                failed: 1,
                cancelled: 2,
                expired: 1
            }
        );
        assert_eq!(counts.ended(), 4);
        assert_eq!(counts.completion_rate(), Some(0.75));
        assert_eq!(counts.meets_line(), Some(false));
    }

    #[test]
    fn with_no_job_ended_there_is_no_rate_not_zero_or_one_hundred_percent() {
        let counts = EndCounts::of([Cancelled, Expired]);
        assert_eq!(counts.ended(), 0);
        assert_eq!(counts.completion_rate(), None);
        assert_eq!(counts.meets_line(), None);
        assert_eq!(EndCounts::default().completion_rate(), None);
    }

    #[test]
    fn four_of_five_is_on_the_line_and_meets_it() {
        let on = EndCounts::of([Completed, Completed, Completed, Completed, Failed]);
        assert_eq!(on.completion_rate(), Some(0.8));
        assert_eq!(on.meets_line(), Some(true));
        let under = EndCounts::of([Completed, Completed, Completed, Failed]);
        assert_eq!(under.meets_line(), Some(false));
        assert_eq!(EndCounts::of([Failed]).completion_rate(), Some(0.0));
        assert_eq!(EndCounts::of([Completed]).meets_line(), Some(true));
    }
}
