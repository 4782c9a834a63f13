//! How likely a node is to run a job of a given length without failing, estimated from what
//! the chain records of it: how often it failed and how long it has been in service.
//!
//! Failures of one node are taken as a Poisson process of unknown rate λ (failures per hour in
//! service) with a Gamma prior: `λ ~ Gamma(shape = a0, rate = b0)`, `a0` failures seen in `b0`
//! hours. A node that failed `f` times in `h` hours has the posterior `Gamma(a0 + f, b0 + h)`,
//! and the chance that it runs `D` more hours without failing, averaged over that posterior, is
//!
//! ```text
//! P(survive D) = E[exp(-λ D)] = ((b0 + h) / (b0 + h + D)) ^ (a0 + f)
//! ```
//!
//! The prior is the fleet's own: its mean `a0 / b0` is the fleet's failures per hour in service,
//! its weight `b0` a fixed number of hours ([`FailurePrior::from_fleet`]). A node with no history
//! therefore looks like an average node of the fleet, neither starved nor favoured, and its own
//! record outweighs the prior once its hours in service pass `b0`.

use crate::types::NodeId;
use serde::{Deserialize, Serialize};

/// What the chain records of one node: failures (every time it went offline or lost a job) and
/// hours in service (online, idle or busy) since it registered.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ServiceRecord {
    pub node: NodeId,
    pub failures: u32,
    pub hours_in_service: f64,
}

/// A Gamma prior on a node's failure rate: as if it had failed `failures` times in `hours`
/// hours in service before its own record began.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct FailurePrior {
    pub failures: f64,
    pub hours: f64,
}

impl FailurePrior {
    /// The prior that makes a node without history look like the fleet's average node: the
    /// fleet's failures per hour in service (all records pooled), weighted as `weight_hours`
    /// hours of service. With no service recorded anywhere the rate is unknown and taken as 0,
    /// so that every node without history ranks alike.
    pub fn from_fleet<'a>(
        records: impl IntoIterator<Item = &'a ServiceRecord>,
        weight_hours: f64,
    ) -> Self {
        let (failures, hours) = records.into_iter().fold((0.0, 0.0), |(f, h), r| {
            (f + r.failures as f64, h + non_negative(r.hours_in_service))
        });
        let weight = non_negative(weight_hours);
        let rate = if hours > 0.0 { failures / hours } else { 0.0 };
        Self {
            failures: rate * weight,
            hours: weight,
        }
    }

    /// The expected failures per hour of a node without history.
    pub fn rate_per_hour(&self) -> f64 {
        if self.hours > 0.0 {
            self.failures / self.hours
        } else {
            0.0
        }
    }
}

fn non_negative(h: f64) -> f64 {
    if h.is_finite() && h > 0.0 { h } else { 0.0 }
}

/// The chance that a node with this record runs `duration_hours` more hours without failing
/// (see the module documentation for the formula). Negative or non-finite hours count as none;
/// a duration of zero or less is always survived.
pub fn survival_probability(
    failures: u32,
    hours_in_service: f64,
    prior: FailurePrior,
    duration_hours: f64,
) -> f64 {
    let d = non_negative(duration_hours);
    if d == 0.0 {
        return 1.0;
    }
    let shape = non_negative(prior.failures) + failures as f64;
    let rate = non_negative(prior.hours) + non_negative(hours_in_service);
    if shape == 0.0 {
        return 1.0;
    }
    if rate == 0.0 {
        // Failures with no hour of service behind them: as unreliable as can be.
        return 0.0;
    }
    // (rate / (rate + d))^shape, computed as exp(-shape * ln(1 + d / rate)) for precision.
    (-shape * (d / rate).ln_1p()).exp()
}

#[cfg(test)]
mod tests {
    use super::*;

    const WEEK: f64 = 168.0;

    fn record(node: u64, failures: u32, hours_in_service: f64) -> ServiceRecord {
        ServiceRecord {
            node: NodeId(node),
            failures,
            hours_in_service,
        }
    }

    /// One failure per 100 hours on average, weighted as one week.
    fn prior() -> FailurePrior {
        FailurePrior {
            failures: WEEK / 100.0,
            hours: WEEK,
        }
    }

    #[test]
    fn the_fleet_prior_has_the_fleets_rate_and_the_chosen_weight() {
        let fleet = [record(1, 3, 200.0), record(2, 1, 200.0), record(3, 0, 0.0)];
        let prior = FailurePrior::from_fleet(&fleet, WEEK);
        assert!((prior.rate_per_hour() - 4.0 / 400.0).abs() < 1e-12);
        assert_eq!(prior.hours, WEEK);
    }

    #[test]
    fn a_fleet_without_service_gives_every_new_node_certain_survival() {
        let prior = FailurePrior::from_fleet(&[record(1, 0, 0.0)], WEEK);
        assert_eq!(prior.rate_per_hour(), 0.0);
        assert_eq!(survival_probability(0, 0.0, prior, 72.0), 1.0);
    }

    #[test]
    fn a_new_node_survives_as_the_fleet_prior_predicts() {
        // (168 / (168 + 24)) ^ 1.68
        let expected = (WEEK / (WEEK + 24.0)).powf(WEEK / 100.0);
        let p = survival_probability(0, 0.0, prior(), 24.0);
        assert!((p - expected).abs() < 1e-12, "{p} vs {expected}");
    }

    #[test]
    fn a_new_node_ranks_between_a_proven_node_and_a_flaky_one() {
        // Both have a year of service: one failed once, one failed every 20 hours.
        let year = 24.0 * 365.0;
        let proven = survival_probability(1, year, prior(), 72.0);
        let new = survival_probability(0, 0.0, prior(), 72.0);
        let flaky = survival_probability((year / 20.0) as u32, year, prior(), 72.0);
        assert!(proven > new && new > flaky, "{proven} {new} {flaky}");
    }

    #[test]
    fn a_long_record_at_the_fleet_rate_approaches_the_exponential_survival() {
        let hours = 1e6;
        let p = survival_probability(10_000, hours, prior(), 50.0);
        assert!((p - (-0.01f64 * 50.0).exp()).abs() < 1e-4, "{p}");
    }

    #[test]
    fn longer_jobs_and_more_failures_survive_less() {
        let short = survival_probability(2, 500.0, prior(), 2.0);
        let long = survival_probability(2, 500.0, prior(), 72.0);
        assert!(short > long);
        let more = survival_probability(5, 500.0, prior(), 72.0);
        assert!(long > more);
        let older = survival_probability(2, 5000.0, prior(), 72.0);
        assert!(
            older > long,
            "the same failures over more hours is a better record"
        );
    }

    #[test]
    fn nonsense_inputs_give_a_probability() {
        assert_eq!(survival_probability(3, 100.0, prior(), 0.0), 1.0);
        assert_eq!(survival_probability(3, 100.0, prior(), -5.0), 1.0);
        assert_eq!(survival_probability(3, 100.0, prior(), f64::NAN), 1.0);
        let p = survival_probability(3, f64::NAN, prior(), 10.0);
        assert_eq!(p, survival_probability(3, 0.0, prior(), 10.0));
        let no_prior = FailurePrior {
            failures: 0.0,
            hours: 0.0,
        };
        assert_eq!(survival_probability(2, 0.0, no_prior, 10.0), 0.0);
        for f in [0, 1, 10, 1000] {
            let p = survival_probability(f, 100.0, prior(), 1e9);
            assert!((0.0..=1.0).contains(&p), "{p}");
        }
    }
}
