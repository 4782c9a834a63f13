//! Jobs by state over the last hour, replayed from the program's events,
//! and drawn as an inline SVG on the server; the completion rate against
//! its line, drawn the same way.

use std::collections::BTreeMap;
use std::fmt::Write;

use mcjs_client::Pubkey;
use mcjs_client::history::{HistoryEntry, McjsEvent};
use mcjs_ledger::completion::CompletionRate;
use serde::Serialize;

use crate::data::JOB_STATES;

/// The window the chart covers, and how many samples it takes across it.
pub const WINDOW_SECS: i64 = 3_600;
pub const SAMPLES: i64 = 13;

#[derive(Debug, Serialize)]
pub struct Timeline {
    pub from: i64,
    pub to: i64,
    /// One sample every `WINDOW_SECS / (SAMPLES - 1)` seconds, oldest first.
    pub samples: Vec<Sample>,
}

#[derive(Debug, Serialize)]
pub struct Sample {
    pub at: i64,
    /// Jobs in each state at that moment (states with none are left out).
    pub counts: BTreeMap<&'static str, u32>,
}

/// The state a job enters with an event, or `None` when the event does not
/// move it (`Some("")` when the account is closed).
fn entered(event: &McjsEvent) -> Option<&'static str> {
    Some(match event {
        McjsEvent::JobSubmitted(_) => "pending",
        McjsEvent::JobAssigned(_) => "assigned",
        McjsEvent::JobStarted(_) => "running",
        McjsEvent::JobPaused(_) => "paused",
        McjsEvent::JobResumed(_) => "recovering",
        McjsEvent::FailureReported(e) if e.job_failed => "failed",
        McjsEvent::FailureReported(_) => "recovering",
        McjsEvent::JobCompleted(_) => "completed",
        McjsEvent::JobCancelled(_) => "cancelled",
        McjsEvent::JobExpired(_) => "expired",
        McjsEvent::JobClosed(_) => "",
        _ => return None,
    })
}

/// Replays `history` (oldest first) and counts jobs by state at each sample
/// of the hour that ends at `now` (the chain's clock).
pub fn jobs_by_state(history: &[HistoryEntry], now: i64) -> Timeline {
    let mut transitions: Vec<(i64, Pubkey, &'static str)> = history
        .iter()
        .filter_map(|entry| {
            let job = entry.event.job()?;
            let state = entered(&entry.event)?;
            let at = entry.event.at().or(entry.block_time)?;
            Some((at, job, state))
        })
        .collect();
    // Chain order is kept for events at the same second.
    transitions.sort_by_key(|(at, _, _)| *at);

    let from = now - WINDOW_SECS;
    let step = WINDOW_SECS / (SAMPLES - 1);
    let mut states: BTreeMap<Pubkey, &'static str> = BTreeMap::new();
    let mut next = 0;
    let samples = (0..SAMPLES)
        .map(|i| {
            let at = from + i * step;
            while let Some((t, job, state)) = transitions.get(next).copied()
                && t <= at
            {
                if state.is_empty() {
                    states.remove(&job);
                } else {
                    states.insert(job, state);
                }
                next += 1;
            }
            let mut counts = BTreeMap::new();
            for state in states.values() {
                *counts.entry(*state).or_insert(0) += 1;
            }
            Sample { at, counts }
        })
        .collect();
    Timeline {
        from,
        to: now,
        samples,
    }
}

/// Colours per state, readable on white and distinguishable in grey.
pub fn colour(state: &str) -> &'static str {
    match state {
        "pending" => "#9aa5b1",
        "assigned" => "#7cb7e8",
        "running" => "#1f77b4",
        "paused" => "#e8c547",
        "recovering" => "#ff7f0e",
        "completed" => "#2ca02c",
        "failed" => "#d62728",
        "cancelled" => "#6b5b95",
        "expired" => "#8c564b",
        _ => "#444444",
    }
}

/// A stacked bar chart of the timeline. Only numbers and the program's own
/// state names go into it, so the markup is safe to inline.
pub fn svg(timeline: &Timeline) -> String {
    const W: f64 = 720.0;
    const H: f64 = 220.0;
    const LEFT: f64 = 40.0;
    const BOTTOM: f64 = 30.0;
    const TOP: f64 = 10.0;
    let max = timeline
        .samples
        .iter()
        .map(|s| s.counts.values().sum::<u32>())
        .max()
        .unwrap_or(0)
        .max(1);
    let plot_h = H - BOTTOM - TOP;
    let slot = (W - LEFT - 10.0) / timeline.samples.len().max(1) as f64;
    let bar = slot * 0.7;
    let mut out = String::new();
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="100%" role="img" aria-label="jobs by state over the last hour" class="chart">"#
    );
    for tick in [0, max / 2, max] {
        let y = TOP + plot_h - plot_h * f64::from(tick) / f64::from(max);
        let _ = write!(
            out,
            r##"<line x1="{LEFT}" x2="{}" y1="{y:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" font-size="11" text-anchor="end" fill="#555">{tick}</text>"##,
            W - 10.0,
            LEFT - 6.0,
            y + 4.0
        );
    }
    let n = timeline.samples.len();
    for (i, sample) in timeline.samples.iter().enumerate() {
        let x = LEFT + slot * i as f64 + (slot - bar) / 2.0;
        let mut y = TOP + plot_h;
        for state in JOB_STATES {
            let count = sample.counts.get(state).copied().unwrap_or(0);
            if count == 0 {
                continue;
            }
            let h = plot_h * f64::from(count) / f64::from(max);
            y -= h;
            let _ = write!(
                out,
                r#"<rect x="{x:.1}" y="{y:.1}" width="{bar:.1}" height="{h:.1}" fill="{}"><title>{state}: {count}</title></rect>"#,
                colour(state)
            );
        }
        let minutes_ago = (timeline.to - sample.at) / 60;
        let label = if i + 1 == n {
            "now".to_string()
        } else {
            format!("-{minutes_ago}m")
        };
        let _ = write!(
            out,
            r##"<text x="{:.1}" y="{}" font-size="11" text-anchor="middle" fill="#555">{label}</text>"##,
            x + bar / 2.0,
            H - 10.0
        );
    }
    out.push_str("</svg>");
    out
}

/// The completion rate as a bar from 0% to 100%, with the founders' line
/// drawn across it: green at or above the line, red under it, an empty
/// track when no job has ended. Only numbers go into it.
pub fn completion_svg(completion: &CompletionRate) -> String {
    const W: f64 = 720.0;
    const H: f64 = 70.0;
    const LEFT: f64 = 10.0;
    const RIGHT: f64 = 10.0;
    const TOP: f64 = 18.0;
    const BAR: f64 = 24.0;
    let track = W - LEFT - RIGHT;
    let x_of = |fraction: f64| LEFT + track * fraction.clamp(0.0, 1.0);
    let line_percent = completion.line * 100.0;
    let mut out = String::new();
    let _ = write!(
        out,
        r##"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="100%" role="img" aria-label="completion rate against the {line_percent:.0}% line" class="chart completion-chart"><rect x="{LEFT}" y="{TOP}" width="{track}" height="{BAR}" fill="#eeeeee"/>"##
    );
    if let Some(rate) = completion.rate {
        let fill = if completion.meets_line == Some(true) {
            colour("completed")
        } else {
            colour("failed")
        };
        let _ = write!(
            out,
            r#"<rect class="rate" x="{LEFT}" y="{TOP}" width="{:.1}" height="{BAR}" fill="{fill}"><title>completion rate {:.1}%</title></rect>"#,
            x_of(rate) - LEFT,
            rate * 100.0
        );
    }
    let x = x_of(completion.line);
    let _ = write!(
        out,
        r##"<line class="line" x1="{x:.1}" x2="{x:.1}" y1="{}" y2="{}" stroke="#222222" stroke-width="2" stroke-dasharray="4 3"/><text x="{x:.1}" y="{}" font-size="11" text-anchor="middle" fill="#222222">{line_percent:.0}% line</text>"##,
        TOP - 4.0,
        TOP + BAR + 4.0,
        TOP - 7.0
    );
    for (fraction, label, anchor) in [(0.0, "0%", "start"), (1.0, "100%", "end")] {
        let _ = write!(
            out,
            r##"<text x="{:.1}" y="{}" font-size="11" text-anchor="{anchor}" fill="#555">{label}</text>"##,
            x_of(fraction),
            TOP + BAR + 16.0
        );
    }
    out.push_str("</svg>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcjs::events::{JobCompleted, JobSubmitted};

    fn entry(event: McjsEvent) -> HistoryEntry {
        HistoryEntry {
            signature: "sig".into(),
            slot: 1,
            block_time: None,
            signers: vec![],
            event,
        }
    }

    #[test]
    fn a_job_is_counted_in_the_state_it_held_at_each_sample() {
        let job = Pubkey::new_from_array([1; 32]);
        let now = 10_000;
        let history = vec![
            entry(McjsEvent::JobSubmitted(JobSubmitted {
                job,
                owner: job,
                job_id: 1,
                spec_hash: [0; 32],
                bond: 1,
                at: now - 2_000,
            })),
            entry(McjsEvent::JobCompleted(JobCompleted {
                job,
                node: job,
                generation: 1,
                output_hash: [0; 32],
                refund: 0,
                by: job,
                at: now - 100,
            })),
        ];
        let timeline = jobs_by_state(&history, now);
        assert_eq!(timeline.samples.len() as i64, SAMPLES);
        assert!(timeline.samples[0].counts.is_empty(), "not yet submitted");
        assert_eq!(timeline.samples[6].counts.get("pending"), Some(&1));
        assert_eq!(timeline.samples[12].counts.get("completed"), Some(&1));
        assert!(svg(&timeline).contains("completed: 1"));
    }

    #[test]
    fn the_completion_bar_fills_to_the_rate_with_the_line_at_80_percent() {
        use mcjs_ledger::completion::{CompletionRate, JobEnd};
        let half = CompletionRate::over(&[(JobEnd::Completed, 0), (JobEnd::Failed, 0)], 0, 10);
        let svg = completion_svg(&half);
        // A 700-wide track from x=10: half of it, and the line at 80%.
        assert!(
            svg.contains(r#"class="rate" x="10" y="18" width="350.0""#),
            "{svg}"
        );
        assert!(svg.contains(r#"x1="570.0" x2="570.0""#), "{svg}");
        assert!(svg.contains(colour("failed")), "under the line: {svg}");
        assert!(svg.contains("completion rate 50.0%"), "{svg}");

        let none = completion_svg(&CompletionRate::over(&[(JobEnd::Expired, 0)], 0, 10));
        assert!(!none.contains("class=\"rate\""), "{none}");
        assert!(none.contains("80% line"), "{none}");
    }
}
