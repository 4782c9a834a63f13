//! How far a job has come and how far it has to go, from the rows of its
//! metrics file (`mcjs job metrics`) and the targets its spec declares:
//! the step, the step rate, and an estimate of the time and cost to finish.
//! Pure: `mcjs job watch` reads the rows and prints what this says.

use serde::Serialize;
use serde_json::{Map, Value};

use crate::cmd::job::metrics::MetricsRow;

/// The rows a rate is measured over, at most: the latest, so that the
/// estimate follows a job that speeds up or slows down.
const RATE_WINDOW: usize = 20;

/// What `mcjs job watch` says of a job's progress.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Progress {
    /// The step of the latest row that names one.
    pub step: u64,
    pub epoch: Option<u64>,
    /// Steps per second over the latest rows of the current run.
    pub steps_per_sec: Option<f64>,
    /// The step the job aims for: the spec's `target_steps`, or its
    /// `target_epochs` at the steps per epoch the rows show.
    pub target_step: Option<u64>,
    pub eta_secs: Option<u64>,
    /// What the time to finish costs at the assignment's rate (USDC base
    /// units), if billed throughout.
    pub cost_to_finish: Option<u64>,
    /// The latest row, whole.
    pub latest: Map<String, Value>,
}

fn number(row: &MetricsRow, key: &str) -> Option<u64> {
    row.metrics.get(key).and_then(Value::as_u64)
}

/// The job's progress from its metrics `rows` (oldest first): the rate is
/// measured within the latest generation only (a move restarts the clock
/// and may resume behind), over its latest [`RATE_WINDOW`] rows.
pub fn estimate(
    rows: &[MetricsRow],
    target_steps: Option<u64>,
    target_epochs: Option<u32>,
    rate_per_hour: u64,
) -> Option<Progress> {
    let with_step: Vec<&MetricsRow> = rows
        .iter()
        .filter(|r| number(r, "step").is_some())
        .collect();
    let last = *with_step.last()?;
    let step = number(last, "step")?;
    let epoch = number(last, "epoch");
    let run: Vec<&&MetricsRow> = with_step
        .iter()
        .filter(|r| r.generation == last.generation)
        .collect();
    let window = &run[run.len().saturating_sub(RATE_WINDOW)..];
    let steps_per_sec = match (window.first(), window.last()) {
        (Some(a), Some(b)) if b.at_ms > a.at_ms => {
            let steps = number(b, "step")?.checked_sub(number(a, "step")?)?;
            Some(steps as f64 * 1_000.0 / (b.at_ms - a.at_ms) as f64).filter(|r| *r > 0.0)
        }
        _ => None,
    };
    let per_epoch = epoch
        .filter(|e| *e > 0)
        .map(|e| step.div_ceil(e))
        .filter(|s| *s > 0);
    let target_step = target_steps.or_else(|| {
        let epochs = u64::from(target_epochs?);
        Some(per_epoch?.saturating_mul(epochs))
    });
    let eta_secs = match (target_step, steps_per_sec) {
        (Some(target), Some(rate)) => {
            Some((target.saturating_sub(step) as f64 / rate).ceil() as u64)
        }
        _ => None,
    };
    let cost_to_finish = eta_secs.map(|secs| {
        u64::try_from(u128::from(rate_per_hour) * u128::from(secs) / 3_600).unwrap_or(u64::MAX)
    });
    Some(Progress {
        step,
        epoch,
        steps_per_sec,
        target_step,
        eta_secs,
        cost_to_finish,
        latest: last.metrics.clone(),
    })
}

impl Progress {
    /// One line for a terminal: `step 1200/5000 (3.1/s, 20m25s to go, ~0.41
    /// USDC) loss=0.41 accuracy=0.93`.
    pub fn line(&self) -> String {
        let mut out = match self.target_step {
            Some(target) => format!("step {}/{target}", self.step),
            None => format!("step {}", self.step),
        };
        let mut parts = Vec::new();
        if let Some(rate) = self.steps_per_sec {
            parts.push(format!("{rate:.1}/s"));
        }
        if let Some(eta) = self.eta_secs {
            parts.push(format!("{} to go", super::view::human_secs(eta as i64)));
        }
        if let Some(cost) = self.cost_to_finish {
            parts.push(format!("~{} USDC", crate::chain::usdc(cost)));
        }
        if !parts.is_empty() {
            out.push_str(&format!(" ({})", parts.join(", ")));
        }
        for (key, value) in &self.latest {
            if key == "step" || key == "epoch" {
                continue;
            }
            let shown = match value {
                Value::Number(n) => n
                    .as_f64()
                    .filter(|f| f.fract() != 0.0)
                    .map_or_else(|| n.to_string(), |f| format!("{f:.4}")),
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            out.push_str(&format!(" {key}={shown}"));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(generation: u32, at_s: u64, json: &str) -> MetricsRow {
        let Value::Object(metrics) = serde_json::from_str(json).unwrap() else {
            panic!("an object");
        };
        MetricsRow {
            generation,
            at_ms: at_s * 1_000,
            metrics,
        }
    }

    #[test]
    fn the_rate_is_the_current_runs_and_the_target_comes_from_epochs() {
        // 10 steps per epoch; the first node ran fast, the second runs at
        // 2 steps a second from step 40.
        let rows = [
            row(1, 0, r#"{"step": 10, "epoch": 1}"#),
            row(1, 1, r#"{"step": 30, "epoch": 3}"#),
            row(2, 100, r#"{"step": 40, "epoch": 4, "loss": 0.5}"#),
            row(2, 110, r#"{"step": 60, "epoch": 6, "loss": 0.25}"#),
        ];
        let p = estimate(&rows, None, Some(10), 7_200_000).unwrap();
        assert_eq!((p.step, p.epoch), (60, Some(6)));
        assert_eq!(p.steps_per_sec, Some(2.0));
        assert_eq!(p.target_step, Some(100));
        assert_eq!(p.eta_secs, Some(20));
        assert_eq!(p.cost_to_finish, Some(40_000), "20 s at 7.2 USDC/h");
        assert_eq!(
            p.line(),
            "step 60/100 (2.0/s, 0m20s to go, ~0.04 USDC) loss=0.2500"
        );
        // A declared target step wins; one row gives no rate.
        let p = estimate(&rows[..1], Some(500), Some(10), 1).unwrap();
        assert_eq!(
            (p.target_step, p.steps_per_sec, p.eta_secs),
            (Some(500), None, None)
        );
        assert!(estimate(&[row(1, 0, r#"{"loss": 1}"#)], None, None, 1).is_none());
    }
}
