//! Prometheus metrics of the scheduler daemon.

use crate::core::AccountKind;
use prometheus::{
    Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
    TextEncoder,
};

pub struct Metrics {
    registry: Registry,
    pub queue_length: IntGauge,
    pub submission_to_running_seconds: Histogram,
    pub recovery_seconds: Histogram,
    pub failures: IntCounterVec,
    pub completed: IntCounter,
    pub ended_unsuccessfully: IntCounter,
    pub assignments: IntCounter,
    pub heartbeats: IntCounter,
    /// Agent requests refused, by reason (`mcjs_protocol::Refusal::label`).
    pub refused: IntCounterVec,
    pub transaction_errors: IntCounter,
    /// Store gateway requests refused, by reason (a `Refusal` label, "denied"
    /// for an operation the chain does not allow, "invalid_spec").
    pub store_refused: IntCounterVec,
    /// Store operations granted (URLs signed or performed).
    pub store_grants: IntCounter,
    /// Accounts the last round left out of placement because they cannot be scheduled, by
    /// kind ("node", "job"): anything above zero is a malformed account to look at.
    pub skipped_accounts: IntGaugeVec,
    /// 1 while the store answers the scheduler's probes, 0 while it does
    /// not (and no job is judged late).
    pub store_up: IntGauge,
    pub leader: IntGauge,
    pub lease_term: IntGauge,
    /// Reports of lost nodes the brake on mass failure held in the last
    /// round (0 when it did not hold), and rounds it held.
    pub brake_held: IntGauge,
    pub brake_rounds: IntCounter,
    /// The scheduler's SOL balance, and its net spending over the last hour
    /// (`crate::funds`).
    pub scheduler_lamports: IntGauge,
    pub scheduler_spend_per_hour: IntGauge,
}

impl Metrics {
    pub fn new() -> Self {
        let registry = Registry::new();
        let buckets = vec![0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0, 7200.0];
        let m = Self {
            queue_length: IntGauge::new("mcjs_queue_length", "Jobs pending or recovering").unwrap(),
            submission_to_running_seconds: Histogram::with_opts(
                HistogramOpts::new(
                    "mcjs_submission_to_running_seconds",
                    "Time from a job's submission to its first running state",
                )
                .buckets(buckets.clone()),
            )
            .unwrap(),
            recovery_seconds: Histogram::with_opts(
                HistogramOpts::new(
                    "mcjs_recovery_seconds",
                    "Time from reporting a failure to the job running again",
                )
                .buckets(buckets),
            )
            .unwrap(),
            failures: IntCounterVec::new(
                Opts::new("mcjs_failures_total", "Failures reported, by cause"),
                &["cause"],
            )
            .unwrap(),
            completed: IntCounter::new("mcjs_jobs_completed_total", "Jobs seen completed").unwrap(),
            ended_unsuccessfully: IntCounter::new(
                "mcjs_jobs_ended_unsuccessfully_total",
                "Jobs seen failed, cancelled or expired",
            )
            .unwrap(),
            assignments: IntCounter::new("mcjs_assignments_total", "Jobs assigned").unwrap(),
            heartbeats: IntCounter::new("mcjs_heartbeats_total", "Heartbeats received").unwrap(),
            refused: IntCounterVec::new(
                Opts::new(
                    "mcjs_agent_requests_refused_total",
                    "Agent requests refused (unsigned, badly signed, foreign, stale, replayed), by reason",
                ),
                &["reason"],
            )
            .unwrap(),
            transaction_errors: IntCounter::new(
                "mcjs_transaction_errors_total",
                "Transactions the chain refused or that could not be sent",
            )
            .unwrap(),
            store_refused: IntCounterVec::new(
                Opts::new(
                    "mcjs_store_requests_refused_total",
                    "Store gateway requests refused, by reason",
                ),
                &["reason"],
            )
            .unwrap(),
            store_grants: IntCounter::new(
                "mcjs_store_grants_total",
                "Store operations granted (URLs signed or performed)",
            )
            .unwrap(),
            skipped_accounts: IntGaugeVec::new(
                Opts::new(
                    "mcjs_skipped_accounts",
                    "Accounts left out of the last placement round because they cannot be scheduled, by kind",
                ),
                &["kind"],
            )
            .unwrap(),
            store_up: IntGauge::new(
                "mcjs_store_up",
                "1 while the store answers the scheduler's probes (an s3:// store), 0 while it does not",
            )
            .unwrap(),
            leader: IntGauge::new(
                "mcjs_scheduler_leader",
                "1 while this scheduler holds the lease and acts, 0 while it follows another",
            )
            .unwrap(),
            lease_term: IntGauge::new(
                "mcjs_scheduler_lease_term",
                "The scheduler lease's term as this scheduler last read it",
            )
            .unwrap(),
            brake_held: IntGauge::new(
                "mcjs_mass_failure_brake_held",
                "Reports of lost nodes held by the brake on mass failure in the last round",
            )
            .unwrap(),
            brake_rounds: IntCounter::new(
                "mcjs_mass_failure_brake_rounds_total",
                "Rounds in which the brake on mass failure held reports of lost nodes",
            )
            .unwrap(),
            scheduler_lamports: IntGauge::new(
                "mcjs_scheduler_lamports",
                "The scheduler's SOL balance, in lamports",
            )
            .unwrap(),
            scheduler_spend_per_hour: IntGauge::new(
                "mcjs_scheduler_spent_lamports_per_hour",
                "The scheduler's net SOL spending (fees and rent, less rent returned) over the last hour",
            )
            .unwrap(),
            registry,
        };
        for c in [
            Box::new(m.queue_length.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(m.submission_to_running_seconds.clone()),
            Box::new(m.recovery_seconds.clone()),
            Box::new(m.failures.clone()),
            Box::new(m.completed.clone()),
            Box::new(m.ended_unsuccessfully.clone()),
            Box::new(m.assignments.clone()),
            Box::new(m.heartbeats.clone()),
            Box::new(m.refused.clone()),
            Box::new(m.transaction_errors.clone()),
            Box::new(m.skipped_accounts.clone()),
            Box::new(m.store_refused.clone()),
            Box::new(m.store_grants.clone()),
            Box::new(m.store_up.clone()),
            Box::new(m.leader.clone()),
            Box::new(m.lease_term.clone()),
            Box::new(m.brake_held.clone()),
            Box::new(m.brake_rounds.clone()),
            Box::new(m.scheduler_lamports.clone()),
            Box::new(m.scheduler_spend_per_hour.clone()),
        ] {
            m.registry.register(c).expect("metric names are unique");
        }
        // Every reason shows from the start, at zero, so an alert can rate() it.
        for reason in mcjs_protocol::Refusal::LABELS {
            m.refused.with_label_values(&[reason]);
            m.store_refused.with_label_values(&[reason]);
        }
        for reason in ["denied", "invalid_spec"] {
            m.store_refused.with_label_values(&[reason]);
        }
        // Present at zero from the start, so that a dashboard can tell "none" from "unknown".
        for kind in [AccountKind::Node, AccountKind::Job] {
            m.skipped_accounts.with_label_values(&[kind.name()]).set(0);
        }
        m
    }

    pub fn render(&self) -> Result<String, String> {
        TextEncoder::new()
            .encode_to_string(&self.registry.gather())
            .map_err(|e| e.to_string())
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skipped_accounts_are_exported_by_kind_from_the_start() {
        let m = Metrics::new();
        let text = m.render().unwrap();
        assert!(
            text.contains("mcjs_skipped_accounts{kind=\"node\"} 0"),
            "{text}"
        );
        assert!(
            text.contains("mcjs_skipped_accounts{kind=\"job\"} 0"),
            "{text}"
        );
        m.skipped_accounts.with_label_values(&["node"]).set(3);
        assert!(
            m.render()
                .unwrap()
                .contains("mcjs_skipped_accounts{kind=\"node\"} 3")
        );
    }
}
