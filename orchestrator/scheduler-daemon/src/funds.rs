//! The scheduler's SOL: it pays the fees of every transaction it sends and
//! the rent of every Segment and Verification it opens (returned when they
//! close). A scheduler that runs dry can place nothing, report nothing and
//! open no check, so it watches its balance and says so an hour ahead.
//!
//! Pure bookkeeping on samples the shell reads (`getBalance` every
//! [`FUNDS_EVERY`]); the spending rate is the balance's net fall over the
//! last hour, refunds of rent included.

use std::collections::VecDeque;
use std::time::Duration;

/// How often the scheduler reads its balance.
pub const FUNDS_EVERY: Duration = Duration::from_secs(60);

/// The window the spending rate is measured over.
const WINDOW_MS: i64 = 60 * 60 * 1_000;

/// Balance samples (ms, lamports), oldest first, covering at most the last
/// hour and the one sample before it.
#[derive(Debug, Default)]
pub struct Funds {
    samples: VecDeque<(i64, u64)>,
}

/// What the samples say now.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FundsView {
    pub lamports: u64,
    /// Net lamports spent per hour, over the samples of the last hour; none
    /// until two samples a minute apart exist.
    pub per_hour: Option<u64>,
}

impl FundsView {
    /// The balance cannot cover the next hour at the measured rate.
    pub fn short(&self) -> bool {
        self.per_hour.is_some_and(|rate| self.lamports < rate)
    }

    /// Hours the balance lasts at the measured rate (none while nothing is
    /// spent).
    pub fn hours_left(&self) -> Option<f64> {
        self.per_hour
            .filter(|rate| *rate > 0)
            .map(|rate| self.lamports as f64 / rate as f64)
    }
}

impl Funds {
    /// The balance read at `now`.
    pub fn record(&mut self, now: i64, lamports: u64) -> FundsView {
        self.samples.push_back((now, lamports));
        // Keep one sample at or before the window's start, so a full hour is measured.
        while self.samples.len() > 2 && self.samples[1].0 <= now - WINDOW_MS {
            self.samples.pop_front();
        }
        let (first_ms, first) = self.samples[0];
        let elapsed = now.saturating_sub(first_ms);
        let per_hour = (elapsed >= 60_000).then(|| {
            let spent = u128::from(first.saturating_sub(lamports));
            let rate = spent * WINDOW_MS as u128 / elapsed as u128;
            u64::try_from(rate).unwrap_or(u64::MAX)
        });
        FundsView { lamports, per_hour }
    }
}

#[cfg(test)]
mod tests {
    use super::{Funds, FundsView};

    const MIN: i64 = 60_000;

    #[test]
    fn the_rate_is_the_net_fall_over_the_last_hour() {
        let mut f = Funds::default();
        assert_eq!(
            f.record(0, 1_000_000),
            FundsView {
                lamports: 1_000_000,
                per_hour: None
            },
            "one sample says nothing of a rate"
        );
        // 10,000 lamports in 10 minutes: 60,000 an hour.
        let v = f.record(10 * MIN, 990_000);
        assert_eq!(v.per_hour, Some(60_000));
        assert!(!v.short());
        assert_eq!(v.hours_left(), Some(16.5));
        // Rent returned: the net fall counts.
        let v = f.record(20 * MIN, 1_000_000);
        assert_eq!(v.per_hour, Some(0));
        assert_eq!(v.hours_left(), None);
    }

    #[test]
    fn a_balance_below_an_hours_spending_is_short() {
        let mut f = Funds::default();
        f.record(0, 100_000);
        for m in 1..=30 {
            f.record(m * MIN, 100_000 - m as u64 * 3_000);
        }
        // 90,000 spent in 30 minutes: 180,000 an hour, 10,000 left.
        let v = f.record(31 * MIN, 7_000);
        assert!(v.short(), "{v:?}");
    }

    #[test]
    fn only_the_last_hour_is_measured() {
        let mut f = Funds::default();
        // Spent heavily two hours ago, nothing since.
        f.record(0, 10_000_000);
        f.record(10 * MIN, 1_000_000);
        for m in 11..=190 {
            f.record(m * MIN, 1_000_000);
        }
        let v = f.record(191 * MIN, 1_000_000);
        assert_eq!(v.per_hour, Some(0));
        assert!(!v.short());
    }
}
