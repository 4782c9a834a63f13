//! A job container's output, read once and at a bounded rate.
//!
//! The engine keeps no log of a job container (log driver `none`): the
//! agent attaches to the container's stdout and stderr before it starts and
//! reads them itself, at most [`OUTPUT_BYTES_PER_SEC`]. The attach stream
//! pushes back: a job that prints faster than that waits on its own writes,
//! so a flood costs the job that prints it, not the node's other jobs (the
//! engine, writing a json-file log, spent about a core on a flood that
//! slowed the job beside it by 55%; bench/results/log-flood.txt). What is
//! read goes three ways ([`Tap`]): the last [`LOG_TAIL`] lines for the exit
//! report, at most [`LOG_LINES_PER_SEC`] lines a second into the agent's own
//! log, and every line to the shipper of the job's logs once one follows
//! (kept until then, at most [`PENDING_LINES`]).

use crate::logs::{LogLine, LogSink, LogStream};
use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;

/// How many of a container's last lines are kept for its exit report.
pub const LOG_TAIL: usize = 40;
/// A kept line longer than this is cut: the tail travels in heartbeats.
pub const LOG_LINE_MAX: usize = 512;
/// Lines per second of one job forwarded into the agent's own log; the
/// rest are counted and dropped, so a flood does not drown the agent's log.
pub const LOG_LINES_PER_SEC: u32 = 200;
/// Bytes of one container's output read per second, at most: beyond it the
/// job's own writes wait.
pub const OUTPUT_BYTES_PER_SEC: usize = 1 << 20;
/// Lines kept for the shipper between the container's start and the
/// moment one follows its output.
pub const PENDING_LINES: usize = 1_024;
/// A line still without its newline is taken as a line at this size.
const PARTIAL_MAX: usize = crate::logs::LINE_MAX;

/// A log line as the agent keeps it: at most [`LOG_LINE_MAX`] bytes.
pub fn bounded_line(line: &str) -> String {
    if line.len() <= LOG_LINE_MAX {
        return line.to_string();
    }
    let mut end = LOG_LINE_MAX;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes cut)", &line[..end], line.len() - end)
}

/// Splits one stream's bytes into lines, across the engine's frames (a
/// write of the job's is not a line).
#[derive(Debug, Default)]
pub struct LineSplitter {
    partial: Vec<u8>,
}

impl LineSplitter {
    pub fn push(&mut self, bytes: &[u8]) -> Vec<String> {
        let mut lines = Vec::new();
        for piece in bytes.split_inclusive(|b| *b == b'\n') {
            match piece.split_last() {
                Some((b'\n', line)) => {
                    self.partial.extend_from_slice(line);
                    lines.push(self.take());
                }
                _ => {
                    self.partial.extend_from_slice(piece);
                    if self.partial.len() >= PARTIAL_MAX {
                        lines.push(self.take());
                    }
                }
            }
        }
        lines
    }

    /// What is left once the stream ends (a last line without a newline).
    pub fn finish(&mut self) -> Option<String> {
        (!self.partial.is_empty()).then(|| self.take())
    }

    fn take(&mut self) -> String {
        let bytes = std::mem::take(&mut self.partial);
        let text = String::from_utf8_lossy(&bytes);
        text.strip_suffix('\r').unwrap_or(&text).to_string()
    }
}

/// At most `per_sec` bytes a second, by tenths of a second: `spend` waits
/// out the tenth once its share is gone (a whole second's bytes at once
/// would be more lines than the shipper's channel holds).
#[derive(Debug)]
pub struct Budget {
    per_tick: usize,
    window: Instant,
    used: usize,
}

const TICK: Duration = Duration::from_millis(100);

impl Budget {
    pub fn new(per_sec: usize) -> Self {
        Self {
            per_tick: (per_sec / 10).max(1),
            window: Instant::now(),
            used: 0,
        }
    }

    pub async fn spend(&mut self, bytes: usize) {
        if self.window.elapsed() >= TICK {
            self.window = Instant::now();
            self.used = 0;
        }
        self.used += bytes;
        if self.used > self.per_tick {
            tokio::time::sleep_until(self.window + TICK).await;
            self.window = Instant::now();
            self.used = 0;
        }
    }
}

#[derive(Default)]
struct TapState {
    tail: VecDeque<String>,
    sink: Option<LogSink>,
    pending: VecDeque<LogLine>,
    pending_dropped: u64,
    ended: bool,
    /// Into the agent's log this second, and dropped from it.
    window: Option<Instant>,
    forwarded: u32,
    dropped: u64,
}

/// Where one container's output goes (see the module's documentation).
pub struct Tap {
    job_id: String,
    state: Mutex<TapState>,
    ended: tokio::sync::watch::Sender<bool>,
}

impl Tap {
    pub fn new(job_id: &str) -> Self {
        Self {
            job_id: job_id.to_string(),
            state: Mutex::new(TapState::default()),
            ended: tokio::sync::watch::channel(false).0,
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, TapState> {
        self.state.lock().expect("output tap lock")
    }

    /// One line the container printed, read at `at_ms`.
    pub fn line(&self, stream: LogStream, text: &str, at_ms: u64) {
        let mut s = self.state();
        if !text.is_empty() {
            let kept = bounded_line(text);
            let now = Instant::now();
            if s.window
                .is_none_or(|w| now.duration_since(w) >= Duration::from_secs(1))
            {
                if s.dropped > 0 {
                    tracing::warn!(job_id = %self.job_id, dropped = s.dropped, "job log lines over the rate limit dropped");
                }
                (s.window, s.forwarded, s.dropped) = (Some(now), 0, 0);
            }
            if s.forwarded < LOG_LINES_PER_SEC {
                s.forwarded += 1;
                let name = if stream == LogStream::Stderr {
                    "stderr"
                } else {
                    "stdout"
                };
                tracing::info!(job_id = %self.job_id, stream = name, "{kept}");
            } else {
                s.dropped += 1;
            }
            s.tail.push_back(kept);
            if s.tail.len() > LOG_TAIL {
                s.tail.pop_front();
            }
        }
        let line = LogLine::new(at_ms, stream, text);
        match &s.sink {
            Some(sink) => sink.send(line),
            None if s.pending.len() < PENDING_LINES => s.pending.push_back(line),
            None => s.pending_dropped += 1,
        }
    }

    /// The output ended (the container exited, or it was removed): the
    /// shipper's sink is let go, and whoever follows returns.
    pub fn end(&self) {
        let mut s = self.state();
        if s.dropped > 0 {
            tracing::warn!(job_id = %self.job_id, dropped = s.dropped, "job log lines over the rate limit dropped");
            s.dropped = 0;
        }
        s.ended = true;
        s.sink = None;
        drop(s);
        self.ended.send_replace(true);
    }

    /// Sends everything kept so far into `sink`, then every line to come;
    /// the returned receiver says when the output has ended.
    pub fn follow(&self, sink: LogSink) -> tokio::sync::watch::Receiver<bool> {
        let mut s = self.state();
        if s.pending_dropped > 0 {
            sink.send(LogLine::new(
                s.pending.front().map_or(0, |l| l.at_ms),
                LogStream::Mcjs,
                &format!(
                    "{} lines this job printed before its output was followed were dropped",
                    s.pending_dropped
                ),
            ));
            s.pending_dropped = 0;
        }
        for line in s.pending.drain(..) {
            sink.send(line);
        }
        if !s.ended {
            s.sink = Some(sink);
        }
        self.ended.subscribe()
    }

    /// The last [`LOG_TAIL`] lines, each cut at [`LOG_LINE_MAX`].
    pub fn tail(&self) -> Vec<String> {
        self.state().tail.iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_split_across_frames_and_a_missing_newline_waits() {
        let mut s = LineSplitter::default();
        assert_eq!(s.push(b"one\ntw"), ["one"]);
        assert_eq!(s.push(b"o\r\n\nthree"), ["two", ""]);
        assert_eq!(s.finish().as_deref(), Some("three"));
        assert_eq!(s.finish(), None);
    }

    #[test]
    fn a_line_without_end_is_taken_at_its_cap() {
        let mut s = LineSplitter::default();
        let lines = s.push(&vec![b'x'; PARTIAL_MAX * 2 + 10]);
        assert_eq!(lines.len(), 1, "one line at the cap, the rest waits");
        assert_eq!(
            lines[0].len(),
            PARTIAL_MAX * 2 + 10,
            "a frame is kept whole"
        );
        let mut s = LineSplitter::default();
        let mut taken = Vec::new();
        for _ in 0..3 {
            taken.extend(s.push(&vec![b'y'; PARTIAL_MAX / 2 + 1]));
        }
        assert_eq!(taken.len(), 1);
        assert!(taken[0].len() >= PARTIAL_MAX);
    }

    #[tokio::test(start_paused = true)]
    async fn reading_past_the_budget_waits_out_the_tenth_of_a_second() {
        let mut b = Budget::new(10_000);
        let start = Instant::now();
        b.spend(600).await;
        assert_eq!(start.elapsed(), Duration::ZERO);
        b.spend(600).await;
        assert_eq!(start.elapsed(), TICK);
        b.spend(900).await;
        assert_eq!(start.elapsed(), TICK);
        // A second's worth takes a second.
        let start = Instant::now();
        for _ in 0..100 {
            b.spend(100).await;
        }
        assert!(
            start.elapsed() >= Duration::from_millis(900),
            "{:?}",
            start.elapsed()
        );
    }

    #[tokio::test]
    async fn lines_before_the_follower_are_kept_bounded_and_the_tail_is_the_last_forty() {
        let tap = Tap::new("job");
        for i in 0..(PENDING_LINES + 10) {
            tap.line(LogStream::Stdout, &format!("line {i}"), i as u64);
        }
        let (sink, mut source) = crate::logs::channel();
        let mut ended = tap.follow(sink);
        tap.line(LogStream::Stderr, "after", 0);
        tap.end();
        ended.wait_for(|e| *e).await.unwrap();
        let got = source.drain_for_tests();
        assert!(got[0].text.contains("10 lines"), "{:?}", got[0]);
        assert_eq!(got[1].text, "line 0");
        assert_eq!(got.len(), 1 + PENDING_LINES + 1);
        assert_eq!(got.last().unwrap().text, "after");
        let tail = tap.tail();
        assert_eq!(tail.len(), LOG_TAIL);
        assert_eq!(tail.last().unwrap(), "after");
    }
}
