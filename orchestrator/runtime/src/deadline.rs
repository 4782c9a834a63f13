//! Is a job keeping to its checkpoint schedule? A pure function of the times.

use serde::Serialize;
use std::time::{Duration, SystemTime};

/// How late a checkpoint may be before the job is reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckpointDeadline {
    pub interval: Duration,
    /// Slack after `interval` before a missing checkpoint counts as overdue
    /// (writing a large checkpoint takes time).
    pub grace: Duration,
}

impl CheckpointDeadline {
    /// Grace of a quarter of the interval: the checkpoint capability rule
    /// allows writing to take up to 20% of it.
    pub fn with_default_grace(interval: Duration) -> Self {
        Self {
            interval,
            grace: interval / 4,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum DeadlineStatus {
    /// The next checkpoint is due in `due_in`.
    OnTime { due_in: Duration },
    /// Past the interval but within the grace: expected any moment.
    Due { overdue_in: Duration },
    /// Past interval + grace without a checkpoint: report the job.
    Overdue { late_by: Duration },
}

impl DeadlineStatus {
    pub fn is_overdue(&self) -> bool {
        matches!(self, Self::Overdue { .. })
    }
}

/// `last` is the last complete checkpoint, or the start of the job (or of
/// this generation) when there is none yet. A `now` before `last` (a clock
/// step backwards) counts as no time elapsed rather than an error.
pub fn checkpoint_status(
    last: SystemTime,
    policy: CheckpointDeadline,
    now: SystemTime,
) -> DeadlineStatus {
    let elapsed = now.duration_since(last).unwrap_or(Duration::ZERO);
    let limit = policy.interval.saturating_add(policy.grace);
    if elapsed < policy.interval {
        DeadlineStatus::OnTime {
            due_in: policy.interval - elapsed,
        }
    } else if elapsed <= limit {
        DeadlineStatus::Due {
            overdue_in: limit - elapsed,
        }
    } else {
        DeadlineStatus::Overdue {
            late_by: elapsed - limit,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const T0: SystemTime = SystemTime::UNIX_EPOCH;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    fn policy() -> CheckpointDeadline {
        CheckpointDeadline {
            interval: secs(600),
            grace: secs(120),
        }
    }

    #[test]
    fn before_the_interval_is_on_time() {
        assert_eq!(
            checkpoint_status(T0, policy(), T0 + secs(100)),
            DeadlineStatus::OnTime { due_in: secs(500) }
        );
    }

    #[test]
    fn within_the_grace_is_due() {
        assert_eq!(
            checkpoint_status(T0, policy(), T0 + secs(600)),
            DeadlineStatus::Due {
                overdue_in: secs(120)
            }
        );
        assert_eq!(
            checkpoint_status(T0, policy(), T0 + secs(720)),
            DeadlineStatus::Due {
                overdue_in: secs(0)
            }
        );
    }

    #[test]
    fn past_the_grace_is_overdue() {
        let s = checkpoint_status(T0, policy(), T0 + secs(721));
        assert_eq!(s, DeadlineStatus::Overdue { late_by: secs(1) });
        assert!(s.is_overdue());
    }

    #[test]
    fn a_clock_that_stepped_back_is_on_time() {
        assert_eq!(
            checkpoint_status(T0 + secs(50), policy(), T0),
            DeadlineStatus::OnTime { due_in: secs(600) }
        );
    }

    proptest! {
        #[test]
        fn status_only_gets_worse_as_time_passes(a in 0u64..2000, b in 0u64..2000) {
            let rank = |s: DeadlineStatus| match s {
                DeadlineStatus::OnTime { .. } => 0,
                DeadlineStatus::Due { .. } => 1,
                DeadlineStatus::Overdue { .. } => 2,
            };
            let (early, late) = (a.min(b), a.max(b));
            prop_assert!(
                rank(checkpoint_status(T0, policy(), T0 + secs(early)))
                    <= rank(checkpoint_status(T0, policy(), T0 + secs(late)))
            );
        }
    }
}
