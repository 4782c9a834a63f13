//! A node's and a provider's reliability record, computed from chain history
//! alone (the program's events, oldest first) and the chain's clock.
//!
//! Definitions (docs/ARCHITECTURE.md, "A reliability record from the chain"):
//!
//! * An **assignment** is one `JobAssigned` event: a job, at one generation,
//!   placed on one node of one provider at the event's `at`. It ends at the
//!   first of these events for the same job that follows it:
//!   - **completed**: `JobCompleted` of that generation;
//!   - **failed**, by cause: `FailureReported` whose `failed_generation` is
//!     that generation. A cause the program counts against the provider
//!     (`FailureCause::is_infrastructure`: node lost, container died,
//!     checkpoint overdue; the ones it slashes and adds to
//!     `Provider.failures`) is a **provider failure**; the others (job
//!     error, job yielded, job fatal) are the **job's faults** and never
//!     count against the node or its provider;
//!   - **taken off**: `JobPaused` of that generation (by its owner, or its
//!     bond ran out), a `VerificationResolved` that rolled the job back
//!     (a proven-wrong interval takes the job off its node), or a newer
//!     `JobAssigned` of the job when the history read holds no end for the
//!     older one;
//!   - otherwise it is **open** (the job is still on the node). A job is
//!     cancelled or expires only while on no node, so neither ends an
//!     assignment.
//! * **Time in service** is the sum, over the assignments, of the time from
//!   the assignment's `at` to its end's `at`, or to `now` (the chain's
//!   clock) for an open one: the hours the node held a job, the only time in
//!   which it can fail one. Time a node is registered but idle is not
//!   counted (the events give no time for a node's status changes, and an
//!   idle node is not at risk), so the rate below is a failure rate per
//!   hour of exposure, what a placement needs to estimate a job's chance of
//!   surviving D more hours.
//! * **Failures per 100 hours in service** = provider failures × 100 / hours
//!   in service; `None` while there is no time in service.
//! * **Share of assignments completed** = completed / (completed + provider
//!   failures); `None` while neither happened. Open and taken-off
//!   assignments and the job's faults are in neither term.
//! * A node or provider with no assignment in the history has **no
//!   history**: both rates are `None`, never 0% or 100%.
//!
//! For a provider, the record is over all its nodes' assignments, and it
//! also counts the verifications it lost (`VerificationResolved` that
//! slashed it: a wrong result, not a lost assignment). Read over its whole
//! history, provider failures plus verification losses is the account's
//! `Provider.failures`, which the program increments on every slash.
//!
//! The record is of the history read: an end whose `JobAssigned` is older
//! than the history read (a capped read) is not counted, since its time in
//! service is unknown.

use std::collections::{BTreeMap, HashMap};

use anchor_lang::prelude::Pubkey;
use mcjs::state::{FailureCause, VerificationOutcome};
use serde::Serialize;

use mcjs_client::history::{HistoryEntry, McjsEvent, cause_name};

const SECONDS_PER_HOUR: f64 = 3_600.0;

/// How an assignment ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AssignmentEnd {
    Completed,
    Failed(FailureCause),
    /// Paused, rolled back after a proven-wrong interval, or superseded by a
    /// newer assignment with no end in the history read.
    TakenOff,
}

/// One assignment, from its `JobAssigned` to what ended it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssignmentRecord {
    pub job: Pubkey,
    pub node: Pubkey,
    pub provider: Pubkey,
    pub generation: u32,
    pub assigned_at: i64,
    /// When and how it ended; `None` while open.
    pub end: Option<(i64, AssignmentEnd)>,
}

impl AssignmentRecord {
    /// From assignment to its end, or to `now` while open; never negative.
    pub fn seconds_in_service(&self, now: i64) -> u64 {
        let until = self.end.map_or(now, |(at, _)| at);
        u64::try_from(until.saturating_sub(self.assigned_at)).unwrap_or(0)
    }
}

/// Every assignment in a history (oldest first), in the order assigned.
pub fn assignments(history: &[HistoryEntry]) -> Vec<AssignmentRecord> {
    /// Ends the job's open assignment, if it is of `generation` (any, for `None`).
    fn end(
        all: &mut [AssignmentRecord],
        open: &mut HashMap<Pubkey, usize>,
        job: &Pubkey,
        generation: Option<u32>,
        at: i64,
        how: AssignmentEnd,
    ) {
        if let Some(&i) = open.get(job)
            && generation.is_none_or(|g| all[i].generation == g)
        {
            all[i].end = Some((at, how));
            open.remove(job);
        }
    }

    let mut all: Vec<AssignmentRecord> = Vec::new();
    // The job's assignment not yet ended, by index into `all`.
    let mut open: HashMap<Pubkey, usize> = HashMap::new();
    for entry in history {
        match &entry.event {
            McjsEvent::JobAssigned(e) => {
                end(
                    &mut all,
                    &mut open,
                    &e.job,
                    None,
                    e.at,
                    AssignmentEnd::TakenOff,
                );
                open.insert(e.job, all.len());
                all.push(AssignmentRecord {
                    job: e.job,
                    node: e.node,
                    provider: e.provider,
                    generation: e.generation,
                    assigned_at: e.at,
                    end: None,
                });
            }
            McjsEvent::JobCompleted(e) => end(
                &mut all,
                &mut open,
                &e.job,
                Some(e.generation),
                e.at,
                AssignmentEnd::Completed,
            ),
            McjsEvent::FailureReported(e) => end(
                &mut all,
                &mut open,
                &e.job,
                Some(e.failed_generation),
                e.at,
                AssignmentEnd::Failed(e.cause),
            ),
            McjsEvent::JobPaused(e) => end(
                &mut all,
                &mut open,
                &e.job,
                Some(e.generation),
                e.at,
                AssignmentEnd::TakenOff,
            ),
            McjsEvent::VerificationResolved(e) if e.rolled_back => end(
                &mut all,
                &mut open,
                &e.job,
                None,
                e.at,
                AssignmentEnd::TakenOff,
            ),
            _ => {}
        }
    }
    all
}

/// The record of a set of assignments: a node's or a provider's.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Reliability {
    pub assignments: u32,
    pub completed: u32,
    /// Failures the program counts against the provider (slashed).
    pub provider_failures: u32,
    /// Failures that were the job's own (no slash); not held against anyone.
    pub job_faults: u32,
    /// Every failure, provider's and job's alike, by cause (`node_lost`, …).
    pub failures_by_cause: BTreeMap<&'static str, u32>,
    pub taken_off: u32,
    pub open: u32,
    pub seconds_in_service: u64,
    /// The first assignment's time; `None`: no history.
    pub since: Option<i64>,
    /// Provider failures per 100 hours in service; `None` without time in service.
    pub failures_per_100_hours: Option<f64>,
    /// Completed / (completed + provider failures); `None` while neither happened.
    pub completed_share: Option<f64>,
}

impl Reliability {
    /// The record of `assignments`, open ones counted up to `now`.
    pub fn of<'a>(assignments: impl IntoIterator<Item = &'a AssignmentRecord>, now: i64) -> Self {
        let mut r = Reliability::default();
        for a in assignments {
            r.assignments += 1;
            r.seconds_in_service += a.seconds_in_service(now);
            r.since = Some(r.since.map_or(a.assigned_at, |s| s.min(a.assigned_at)));
            match a.end {
                None => r.open += 1,
                Some((_, AssignmentEnd::Completed)) => r.completed += 1,
                Some((_, AssignmentEnd::TakenOff)) => r.taken_off += 1,
                Some((_, AssignmentEnd::Failed(cause))) => {
                    *r.failures_by_cause.entry(cause_name(&cause)).or_default() += 1;
                    if cause.is_infrastructure() {
                        r.provider_failures += 1;
                    } else {
                        r.job_faults += 1;
                    }
                }
            }
        }
        r.failures_per_100_hours = (r.seconds_in_service > 0)
            .then(|| f64::from(r.provider_failures) * 100.0 / r.hours_in_service());
        let ended_on_provider = r.completed + r.provider_failures;
        r.completed_share =
            (ended_on_provider > 0).then(|| f64::from(r.completed) / f64::from(ended_on_provider));
        r
    }

    pub fn hours_in_service(&self) -> f64 {
        self.seconds_in_service as f64 / SECONDS_PER_HOUR
    }

    /// No assignment in the history read: nothing to judge by.
    pub fn has_history(&self) -> bool {
        self.assignments > 0
    }
}

/// One node's record.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeReliability {
    pub node: String,
    #[serde(flatten)]
    pub record: Reliability,
}

/// A provider's record, over all its nodes, and each node's.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProviderReliability {
    pub provider: String,
    #[serde(flatten)]
    pub record: Reliability,
    /// Verifications that proved the provider wrong and slashed it.
    pub verification_losses: u32,
    /// Every node the history names for the provider (registered or
    /// assigned), in the order first named; one with no assignment has no
    /// history.
    pub nodes: Vec<NodeReliability>,
}

/// A node's record from a history that holds its assignments (the node's
/// own, or its provider's).
pub fn node_reliability(node: &Pubkey, history: &[HistoryEntry], now: i64) -> Reliability {
    let all = assignments(history);
    Reliability::of(all.iter().filter(|a| a.node == *node), now)
}

/// A provider's record from its history.
pub fn provider_reliability(
    provider: &Pubkey,
    history: &[HistoryEntry],
    now: i64,
) -> ProviderReliability {
    let all = assignments(history);
    let mut nodes: Vec<Pubkey> = Vec::new();
    let mut verification_losses = 0;
    for entry in history {
        let named = match &entry.event {
            McjsEvent::NodeRegistered(e) if e.provider == *provider => Some(e.node),
            McjsEvent::JobAssigned(e) if e.provider == *provider => Some(e.node),
            McjsEvent::VerificationResolved(e)
                if e.outcome == VerificationOutcome::ProviderWrong
                    && e.slashed_provider == Some(*provider) =>
            {
                verification_losses += 1;
                None
            }
            _ => None,
        };
        if let Some(node) = named
            && !nodes.contains(&node)
        {
            nodes.push(node);
        }
    }
    ProviderReliability {
        provider: provider.to_string(),
        record: Reliability::of(all.iter().filter(|a| a.provider == *provider), now),
        verification_losses,
        nodes: nodes
            .iter()
            .map(|node| NodeReliability {
                node: node.to_string(),
                record: Reliability::of(all.iter().filter(|a| a.node == *node), now),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcjs::events::{
        FailureReported, JobAssigned, JobCompleted, JobPaused, NodeRegistered, VerificationResolved,
    };
    use mcjs::state::{HardwareProfile, PauseReason};

    const HOUR: i64 = 3_600;

    fn key(n: u8) -> Pubkey {
        Pubkey::new_from_array([n; 32])
    }

    const PROVIDER: u8 = 3;
    const OTHER_PROVIDER: u8 = 4;
    const NODE_A: u8 = 10;
    const NODE_B: u8 = 11;
    const NODE_IDLE: u8 = 12;
    const NODE_ELSEWHERE: u8 = 13;

    /// A history built event by event, one transaction each, in chain order.
    #[derive(Default)]
    struct History(Vec<HistoryEntry>);

    impl History {
        fn push(mut self, event: McjsEvent) -> Self {
            let n = self.0.len() as u64;
            self.0.push(HistoryEntry {
                signature: format!("sig{n}"),
                slot: n,
                block_time: None,
                signers: vec![key(9)],
                event,
            });
            self
        }

        fn registered(self, node: u8, provider: u8) -> Self {
            self.push(McjsEvent::NodeRegistered(NodeRegistered {
                node: key(node),
                provider: key(provider),
                index: u32::from(node),
                operator: key(8),
                hardware: HardwareProfile {
                    gpu_model: "a100-sxm4-80gb".into(),
                    gpu_count: 1,
                    vram_per_gpu_mib: 81_920,
                    compute_capability: 80,
                    cpu_cores: 16,
                    ram_mib: 65_536,
                    disk_gib: 500,
                    checkpoint_write_mibps: 1_000,
                },
                readiness: 90,
                price_per_gpu_hour: 1,
            }))
        }

        fn assigned(self, job: u8, generation: u32, node: u8, provider: u8, at: i64) -> Self {
            self.push(McjsEvent::JobAssigned(JobAssigned {
                job: key(job),
                node: key(node),
                provider: key(provider),
                generation,
                rate_per_hour: 1,
                by: key(7),
                at,
            }))
        }

        fn completed(self, job: u8, generation: u32, node: u8, at: i64) -> Self {
            self.push(McjsEvent::JobCompleted(JobCompleted {
                job: key(job),
                node: key(node),
                generation,
                output_hash: [1; 32],
                refund: 0,
                by: key(8),
                at,
            }))
        }

        fn failed(
            self,
            job: u8,
            generation: u32,
            node: u8,
            provider: u8,
            cause: FailureCause,
            at: i64,
        ) -> Self {
            self.push(McjsEvent::FailureReported(FailureReported {
                job: key(job),
                node: key(node),
                provider: key(provider),
                failed_generation: generation,
                cause,
                slashed: if cause.is_infrastructure() { 5 } else { 0 },
                slashed_to: key(6),
                restarts_used: 0,
                job_failed: false,
                refund: 0,
                by: key(7),
                at,
            }))
        }

        fn paused(self, job: u8, generation: u32, at: i64) -> Self {
            self.push(McjsEvent::JobPaused(JobPaused {
                job: key(job),
                generation,
                reason: PauseReason::Owner,
                by: key(5),
                at,
            }))
        }

        fn proven_wrong(self, job: u8, provider: u8, rolled_back: bool, at: i64) -> Self {
            self.push(McjsEvent::VerificationResolved(VerificationResolved {
                job: key(job),
                verification: key(20),
                interval: 1,
                outcome: VerificationOutcome::ProviderWrong,
                slashed_provider: Some(key(provider)),
                slashed: 5,
                fees: 0,
                refund: 0,
                rolled_back,
                restore_point: None,
                by: key(7),
                at,
            }))
        }
    }

    /// Provider 3 has nodes A and B (and C, registered, never assigned);
    /// provider 4 has one node, which takes over job 2 at the end.
    ///
    /// | node | job | gen | from | to | end |
    /// | A | 1 | 1 | 0 h | 10 h | completed |
    /// | B | 5 | 1 | 0 h | 5 h | completed |
    /// | A | 2 | 1 | 10 h | 12 h | node lost (provider's failure) |
    /// | B | 2 | 2 | 12 h | 13 h | job error (the job's fault) |
    /// | other | 2 | 3 | 13 h | now | open, another provider's |
    /// | A | 4 | 1 | 14 h | 14.5 h | paused by its owner |
    /// | B | 3 | 1 | 14 h | now = 19 h | open |
    fn fixed_history() -> Vec<HistoryEntry> {
        History::default()
            .registered(NODE_A, PROVIDER)
            .registered(NODE_B, PROVIDER)
            .registered(NODE_IDLE, PROVIDER)
            .registered(NODE_ELSEWHERE, OTHER_PROVIDER)
            .assigned(1, 1, NODE_A, PROVIDER, 0)
            .assigned(5, 1, NODE_B, PROVIDER, 0)
            .completed(5, 1, NODE_B, 5 * HOUR)
            .completed(1, 1, NODE_A, 10 * HOUR)
            .assigned(2, 1, NODE_A, PROVIDER, 10 * HOUR)
            // The program moves the job in the transaction that reports it.
            .failed(2, 1, NODE_A, PROVIDER, FailureCause::NodeLost, 12 * HOUR)
            .assigned(2, 2, NODE_B, PROVIDER, 12 * HOUR)
            .failed(2, 2, NODE_B, PROVIDER, FailureCause::JobError, 13 * HOUR)
            .assigned(2, 3, NODE_ELSEWHERE, OTHER_PROVIDER, 13 * HOUR)
            // A completed job's interval, checked later, proven wrong.
            .proven_wrong(1, PROVIDER, false, 13 * HOUR + 60)
            .assigned(4, 1, NODE_A, PROVIDER, 14 * HOUR)
            .paused(4, 1, 14 * HOUR + HOUR / 2)
            .assigned(3, 1, NODE_B, PROVIDER, 14 * HOUR)
            .0
    }

    const NOW: i64 = 19 * HOUR;

    fn close(actual: Option<f64>, expected: f64) {
        let actual = actual.expect("a rate, not `no history`");
        assert!(
            (actual - expected).abs() < 1e-12,
            "{actual} is not {expected}"
        );
    }

    #[test]
    fn a_node_that_lost_a_job_counts_it_against_its_hours_in_service() {
        let a = node_reliability(&key(NODE_A), &fixed_history(), NOW);
        assert_eq!(a.assignments, 3);
        assert_eq!(a.completed, 1);
        assert_eq!(a.provider_failures, 1);
        assert_eq!(a.job_faults, 0);
        assert_eq!(a.taken_off, 1, "the paused job");
        assert_eq!(a.open, 0);
        assert_eq!(a.failures_by_cause, BTreeMap::from([("node_lost", 1)]));
        // 10 h + 2 h + 0.5 h.
        assert_eq!(a.seconds_in_service, 45_000);
        assert_eq!(a.hours_in_service(), 12.5);
        assert_eq!(a.since, Some(0));
        close(a.failures_per_100_hours, 8.0);
        close(a.completed_share, 0.5);
    }

    #[test]
    fn a_job_fault_is_not_held_against_the_node_and_an_open_assignment_counts_up_to_now() {
        let b = node_reliability(&key(NODE_B), &fixed_history(), NOW);
        assert_eq!(b.assignments, 3);
        assert_eq!(b.completed, 1);
        assert_eq!(b.provider_failures, 0);
        assert_eq!(b.job_faults, 1);
        assert_eq!(b.open, 1);
        assert_eq!(b.failures_by_cause, BTreeMap::from([("job_error", 1)]));
        // 5 h completed + 1 h to the job's error + 5 h open (14 h to now, 19 h).
        assert_eq!(b.seconds_in_service, 11 * 3_600);
        close(b.failures_per_100_hours, 0.0);
        close(b.completed_share, 1.0);
    }

    #[test]
    fn a_provider_is_the_sum_of_its_nodes_and_lists_each_of_them() {
        let p = provider_reliability(&key(PROVIDER), &fixed_history(), NOW);
        let r = &p.record;
        assert_eq!(r.assignments, 6);
        assert_eq!(r.completed, 2);
        assert_eq!(r.provider_failures, 1);
        assert_eq!(r.job_faults, 1);
        assert_eq!(r.taken_off, 1);
        assert_eq!(r.open, 1);
        assert_eq!(
            r.failures_by_cause,
            BTreeMap::from([("job_error", 1), ("node_lost", 1)])
        );
        // Node A's 12.5 h and node B's 11 h; not the other provider's node.
        assert_eq!(r.seconds_in_service, 84_600);
        close(r.failures_per_100_hours, 100.0 / 23.5);
        close(r.completed_share, 2.0 / 3.0);
        // The account's `failures` would count the slash for the lost node
        // and the one for the proven-wrong interval.
        assert_eq!(p.verification_losses, 1);
        assert_eq!(r.provider_failures + p.verification_losses, 2);

        let nodes: Vec<&str> = p.nodes.iter().map(|n| n.node.as_str()).collect();
        assert_eq!(
            nodes,
            [
                key(NODE_A).to_string(),
                key(NODE_B).to_string(),
                key(NODE_IDLE).to_string()
            ]
        );
        assert_eq!(
            p.nodes[0].record,
            node_reliability(&key(NODE_A), &fixed_history(), NOW)
        );
        assert_eq!(
            p.nodes[1].record,
            node_reliability(&key(NODE_B), &fixed_history(), NOW)
        );
    }

    #[test]
    fn a_node_with_no_assignment_has_no_history_not_a_perfect_record() {
        let p = provider_reliability(&key(PROVIDER), &fixed_history(), NOW);
        let idle = &p.nodes[2].record;
        assert!(!idle.has_history());
        assert_eq!(idle.assignments, 0);
        assert_eq!(idle.seconds_in_service, 0);
        assert_eq!(idle.since, None);
        assert_eq!(idle.failures_per_100_hours, None);
        assert_eq!(idle.completed_share, None);

        let nobody = provider_reliability(&key(99), &fixed_history(), NOW);
        assert!(!nobody.record.has_history());
        assert!(nobody.nodes.is_empty());
        assert_eq!(nobody.record.completed_share, None);
        assert_eq!(nobody.record.failures_per_100_hours, None);
    }

    #[test]
    fn another_providers_node_keeps_its_own_record() {
        let elsewhere = node_reliability(&key(NODE_ELSEWHERE), &fixed_history(), NOW);
        assert_eq!(elsewhere.assignments, 1);
        assert_eq!(elsewhere.open, 1);
        assert_eq!(elsewhere.seconds_in_service, 6 * 3_600);
        close(elsewhere.failures_per_100_hours, 0.0);
        assert_eq!(
            elsewhere.completed_share, None,
            "nothing ended on it: no share"
        );
        let other = provider_reliability(&key(OTHER_PROVIDER), &fixed_history(), NOW);
        assert_eq!(other.record.assignments, 1);
        assert_eq!(other.verification_losses, 0);
    }

    #[test]
    fn an_end_of_another_generation_does_not_end_the_assignment() {
        // A stale report of generation 1 after the job moved to generation 2.
        let history = History::default()
            .assigned(1, 2, NODE_A, PROVIDER, 0)
            .failed(1, 1, NODE_A, PROVIDER, FailureCause::NodeLost, HOUR)
            .completed(1, 2, NODE_A, 2 * HOUR)
            .0;
        let a = node_reliability(&key(NODE_A), &history, NOW);
        assert_eq!((a.completed, a.provider_failures), (1, 0));
        assert_eq!(a.seconds_in_service, 2 * 3_600);
    }

    #[test]
    fn a_rollback_takes_the_job_off_and_an_end_without_its_assignment_is_not_counted() {
        let history = History::default()
            // Its assignment is older than the history read.
            .completed(7, 1, NODE_A, 0)
            .assigned(1, 1, NODE_A, PROVIDER, 0)
            .proven_wrong(1, PROVIDER, true, 3 * HOUR)
            .0;
        let a = node_reliability(&key(NODE_A), &history, NOW);
        assert_eq!(a.assignments, 1);
        assert_eq!((a.completed, a.taken_off, a.open), (0, 1, 0));
        assert_eq!(a.seconds_in_service, 3 * 3_600);
        assert_eq!(a.completed_share, None);
    }
}
