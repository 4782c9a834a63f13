//! The network's completion rate (`mcjs_spec::gauge`) from the chain alone: which jobs ended,
//! how and when, and the rate over the jobs that ended in a window of chain time.
//!
//! Where an end is read:
//!
//! * a Job account in a terminal state records the time it entered it
//!   (`JobState::Completed { at }`, `Failed`, `Cancelled`, `Expired`): every job whose account
//!   is open has its end and its time from the account itself;
//! * a job whose account was closed (`close_job`, after it ended) is known only from its
//!   history: its end event (`JobCompleted`; `FailureReported` that failed the job;
//!   `JobCancelled`; `JobExpired`), each of which carries the chain's time. A closed job whose
//!   end is older than the history read is not counted.
//!
//! So every end counted has a chain time; none is guessed. A job's address is never revived
//! (job ids only grow), so one job ends once.

use std::collections::BTreeMap;

use anchor_lang::prelude::Pubkey;
use mcjs::state::JobState;
pub use mcjs_spec::gauge::{COMPLETION_LINE_PERCENT, EndCounts, JobEnd};
use serde::Serialize;

use mcjs_client::history::{HistoryEntry, McjsEvent};

/// The end a job's state records, and when it was entered; `None` while the job has not ended.
pub fn end_of(state: &JobState) -> Option<(JobEnd, i64)> {
    match *state {
        JobState::Completed { at } => Some((JobEnd::Completed, at)),
        JobState::Failed { at } => Some((JobEnd::Failed, at)),
        JobState::Cancelled { at } => Some((JobEnd::Cancelled, at)),
        JobState::Expired { at } => Some((JobEnd::Expired, at)),
        JobState::Pending { .. }
        | JobState::Assigned { .. }
        | JobState::Running { .. }
        | JobState::Paused { .. }
        | JobState::Recovering { .. } => None,
    }
}

/// The job an event ends, how and when; `None` for an event that ends no job.
pub fn end_in(event: &McjsEvent) -> Option<(Pubkey, JobEnd, i64)> {
    match event {
        McjsEvent::JobCompleted(e) => Some((e.job, JobEnd::Completed, e.at)),
        McjsEvent::FailureReported(e) if e.job_failed => Some((e.job, JobEnd::Failed, e.at)),
        McjsEvent::JobCancelled(e) => Some((e.job, JobEnd::Cancelled, e.at)),
        McjsEvent::JobExpired(e) => Some((e.job, JobEnd::Expired, e.at)),
        _ => None,
    }
}

/// Every job end on the chain: from each open Job account's state, and, for jobs with no
/// open account, from their end events in `history` (oldest first).
pub fn job_ends<'a>(
    accounts: impl IntoIterator<Item = (&'a Pubkey, &'a JobState)>,
    history: &[HistoryEntry],
) -> BTreeMap<Pubkey, (JobEnd, i64)> {
    let mut open = Vec::new();
    let mut ends = BTreeMap::new();
    for (key, state) in accounts {
        open.push(*key);
        if let Some(end) = end_of(state) {
            ends.insert(*key, end);
        }
    }
    open.sort();
    for (job, end, at) in history.iter().filter_map(|e| end_in(&e.event)) {
        if open.binary_search(&job).is_err() {
            ends.insert(job, (end, at));
        }
    }
    ends
}

/// The completion rate over the jobs that ended in a window of chain time.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompletionRate {
    /// The window: ends at or after `from` (`to` minus `window_secs`), `to` being the chain's
    /// clock when read.
    pub window_secs: i64,
    pub from: i64,
    pub to: i64,
    #[serde(flatten)]
    pub counts: EndCounts,
    /// Completed + failed: what the rate is over.
    pub ended: u64,
    /// Completed / ended; `None` (JSON `null`) when no job ended in the window.
    pub rate: Option<f64>,
    /// The founders' line, as a fraction (0.8).
    pub line: f64,
    /// Whether the rate is at or above the line; `None` when no job ended.
    pub meets_line: Option<bool>,
}

impl CompletionRate {
    /// The rate over `ends` (how and when each job ended) that fall in the `window_secs` up to
    /// `now`, the chain's clock. An end stamped after `now` (it landed while the chain was
    /// read) is in the window.
    pub fn over<'a>(
        ends: impl IntoIterator<Item = &'a (JobEnd, i64)>,
        now: i64,
        window_secs: i64,
    ) -> Self {
        let from = now.saturating_sub(window_secs);
        let counts = EndCounts::of(
            ends.into_iter()
                .filter(|(_, at)| *at >= from)
                .map(|(end, _)| *end),
        );
        CompletionRate {
            window_secs,
            from,
            to: now,
            counts,
            ended: counts.ended(),
            rate: counts.completion_rate(),
            line: COMPLETION_LINE_PERCENT as f64 / 100.0,
            meets_line: counts.meets_line(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcjs::events::{FailureReported, JobCancelled, JobCompleted, JobExpired};
    use mcjs::state::{FailureCause, PauseReason};

    const DAY: i64 = 86_400;
    const NOW: i64 = 1_800_000_000;

    fn key(n: u8) -> Pubkey {
        Pubkey::new_from_array([n; 32])
    }

    fn entry(event: McjsEvent) -> HistoryEntry {
        HistoryEntry {
            signature: "sig".into(),
            slot: 1,
            block_time: None,
            signers: vec![],
            event,
        }
    }

    fn failure(job: Pubkey, job_failed: bool, at: i64) -> McjsEvent {
        McjsEvent::FailureReported(FailureReported {
            job,
            node: key(200),
            provider: key(201),
            failed_generation: 1,
            cause: FailureCause::NodeLost,
            slashed: 0,
            slashed_to: key(202),
            restarts_used: 1,
            job_failed,
            refund: 0,
            by: key(203),
            at,
        })
    }

    /// Open accounts: 3 completed and 1 failed in the window, 1 completed before it, 2
    /// cancelled and 1 expired, 3 not ended. Closed accounts, from the history: 1 completed
    /// and 1 failed in the window, 1 cancelled. The history also holds events of open jobs
    /// and a failure that only sent its job back to the queue; none is counted twice.
    #[test]
    fn the_rate_counts_completed_over_completed_and_failed_in_the_window() {
        let states = [
            (key(1), JobState::Completed { at: NOW - DAY }),
            (key(2), JobState::Completed { at: NOW - 59 * DAY }),
            (key(3), JobState::Completed { at: NOW - 60 * DAY }),
            (key(4), JobState::Completed { at: NOW - 61 * DAY }),
            (key(5), JobState::Failed { at: NOW - 2 * DAY }),
            (key(6), JobState::Cancelled { at: NOW - DAY }),
            (key(7), JobState::Cancelled { at: NOW - 3 * DAY }),
            (key(8), JobState::Expired { at: NOW - DAY }),
            (key(9), JobState::Running { since: NOW - DAY }),
            (key(10), JobState::Recovering { since: NOW - DAY }),
            (
                key(11),
                JobState::Paused {
                    since: NOW - DAY,
                    reason: PauseReason::Owner,
                },
            ),
        ];
        let history = vec![
            // Of open jobs: the account wins, so nothing here changes the count.
            entry(McjsEvent::JobCompleted(JobCompleted {
                job: key(1),
                node: key(200),
                generation: 1,
                output_hash: [0; 32],
                refund: 0,
                by: key(203),
                at: NOW - DAY,
            })),
            entry(failure(key(9), false, NOW - 2 * DAY)),
            // Closed jobs.
            entry(McjsEvent::JobCompleted(JobCompleted {
                job: key(20),
                node: key(200),
                generation: 2,
                output_hash: [0; 32],
                refund: 0,
                by: key(203),
                at: NOW - 10 * DAY,
            })),
            entry(failure(key(21), false, NOW - 12 * DAY)),
            entry(failure(key(21), true, NOW - 11 * DAY)),
            entry(McjsEvent::JobCancelled(JobCancelled {
                job: key(22),
                refund: 0,
                by: key(203),
                at: NOW - 5 * DAY,
            })),
        ];
        let ends = job_ends(states.iter().map(|(k, s)| (k, s)), &history);
        assert_eq!(ends.len(), 11, "{ends:?}");
        assert_eq!(ends[&key(21)], (JobEnd::Failed, NOW - 11 * DAY));

        let rate = CompletionRate::over(ends.values(), NOW, 60 * DAY);
        assert_eq!(
            rate.counts,
            EndCounts {
                completed: 4,
                failed: 2,
                cancelled: 3,
                expired: 1
            }
        );
        assert_eq!(rate.ended, 6);
        assert_eq!(rate.rate, Some(4.0 / 6.0));
        assert_eq!(rate.meets_line, Some(false));
        assert_eq!((rate.from, rate.to), (NOW - 60 * DAY, NOW));

        let all_time = CompletionRate::over(ends.values(), NOW, i64::MAX);
        assert_eq!(all_time.counts.completed, 5);
        assert_eq!(all_time.rate, Some(5.0 / 7.0));

        let last_week = CompletionRate::over(ends.values(), NOW, 7 * DAY);
        assert_eq!(
            last_week.counts,
            EndCounts {
                completed: 1,
                failed: 1,
                cancelled: 3,
                expired: 1
            }
        );
        assert_eq!(last_week.rate, Some(0.5));
    }

    #[test]
    fn with_only_cancelled_and_expired_jobs_no_job_has_ended() {
        let states = [
            (key(1), JobState::Cancelled { at: NOW - DAY }),
            (key(2), JobState::Pending { since: NOW - DAY }),
        ];
        let history = vec![entry(McjsEvent::JobExpired(JobExpired {
            job: key(3),
            refund: 0,
            by: key(203),
            at: NOW - DAY,
        }))];
        let ends = job_ends(states.iter().map(|(k, s)| (k, s)), &history);
        let rate = CompletionRate::over(ends.values(), NOW, 60 * DAY);
        assert_eq!(
            rate.counts,
            EndCounts {
                completed: 0,
                failed: 0,
                cancelled: 1,
                expired: 1
            }
        );
        assert_eq!(rate.ended, 0);
        assert_eq!(rate.rate, None);
        assert_eq!(rate.meets_line, None);
        let json = serde_json::to_value(&rate).unwrap();
        assert_eq!(json["rate"], serde_json::Value::Null);
        assert_eq!(json["cancelled"], 1);
        assert_eq!(json["line"], 0.8);

        let empty = CompletionRate::over(&[], NOW, 60 * DAY);
        assert_eq!((empty.ended, empty.rate), (0, None));
    }
}
