//! A job's printed lines, shipped off the node as it runs: the container's
//! stdout and stderr, in chunks, to `jobs/<job>/logs/g<generation>/` in the
//! shared store (`layout::log_chunk`), where its owner reads them with
//! `mcjs job logs` (and nobody else: docs/store.md). A node that dies takes
//! at most the last [`FLUSH_EVERY`] of lines with it, and none printed
//! before an attested checkpoint: the agent flushes ([`LogFlusher`]) before
//! each attestation. The job's metrics file goes the same way
//! ([`tail_metrics`], the stream `metrics`).
//!
//! Bounded everywhere: a line is cut at [`LINE_MAX`] bytes; the engine's
//! follower hands lines over a bounded channel and drops (and counts) what
//! does not fit, so a job that floods its output grows no queue here (and
//! the engine reads a container's output at a bounded rate, so the flood
//! waits on its own writes: `docker::output`,
//! `orchestrator/agent/benches/log_flood.rs`); a generation keeps at most its cap (default [`DEFAULT_CAP_BYTES`])
//! in the store, its oldest chunks deleted past it; and while the store
//! does not answer, at most [`PENDING_MAX_BYTES`] wait on the node. Every
//! loss is said in the stream itself, as a line of the `mcjs` stream.
//!
//! [`LogChunker`] decides (pure, tested on its own); [`ship`] moves bytes.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, PutPayload};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

mod metrics;
pub use metrics::{METRICS_EVERY, MetricsLines, tail_metrics};

/// How often a run's lines are shipped, at most: what `mcjs job logs
/// --follow` lags behind the job.
pub const FLUSH_EVERY: Duration = Duration::from_secs(2);
/// A chunk is shipped at once when its lines reach this size.
pub const CHUNK_BYTES: usize = 256 * 1024;
/// The largest chunk a reader takes: an agent's are [`CHUNK_BYTES`] and
/// one line more. A larger object under a job's logs was not written by
/// an agent, and is not read into memory.
pub const MAX_CHUNK_BYTES: u64 = 4 << 20;
/// A line longer than this is cut (its head kept, the cut said).
pub const LINE_MAX: usize = 16 * 1024;
/// What one generation keeps in the store unless the spec says otherwise.
pub const DEFAULT_CAP_BYTES: u64 = 64 << 20;
/// What one generation keeps of its metrics lines, beside (not within) its
/// cap: they go in chunks of their own, so that a flood of printed lines
/// rotates out no progress, and a flood of metrics no printed line.
pub const METRICS_CAP_BYTES: u64 = 16 << 20;
/// What waits on the node while the store does not answer.
pub const PENDING_MAX_BYTES: usize = 8 << 20;
/// Lines in flight between the engine's follower and the shipper.
pub const CHANNEL_LINES: usize = 4_096;

/// Which stream a line came from; `Mcjs` is MCJS's own word in the stream
/// (lines dropped, chunks rotated out); `Metrics` a line of the job's
/// metrics file (`MCJS_METRICS_FILE`), a JSON object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogStream {
    Stdout,
    Stderr,
    Mcjs,
    Metrics,
}

/// One line of a chunk (JSON, one per line of the object).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogLine {
    /// When the node read it (unix ms).
    #[serde(rename = "t")]
    pub at_ms: u64,
    #[serde(rename = "s")]
    pub stream: LogStream,
    #[serde(rename = "l")]
    pub text: String,
}

impl LogLine {
    /// A line cut to [`LINE_MAX`] bytes (on a character boundary).
    pub fn new(at_ms: u64, stream: LogStream, text: &str) -> Self {
        let text = if text.len() <= LINE_MAX {
            text.to_string()
        } else {
            let mut end = LINE_MAX;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            format!("{} [line cut: {} bytes]", &text[..end], text.len())
        };
        Self {
            at_ms,
            stream,
            text,
        }
    }
}

/// Where an engine's follower puts a container's lines: never blocks; a
/// line that does not fit is counted and said later.
#[derive(Clone, Debug)]
pub struct LogSink {
    tx: mpsc::Sender<LogLine>,
    dropped: Arc<AtomicU64>,
    flush: LogFlusher,
}

impl LogSink {
    pub fn send(&self, line: LogLine) {
        if self.tx.try_send(line).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A handle that asks [`ship`] to store what it has now, without
    /// keeping the stream open (the shipper ends when every sink is gone).
    pub fn flusher(&self) -> LogFlusher {
        self.flush.clone()
    }
}

/// Asks a run's shipper to store every line it has received, now.
#[derive(Clone, Debug)]
pub struct LogFlusher {
    tx: mpsc::Sender<tokio::sync::oneshot::Sender<()>>,
}

impl LogFlusher {
    /// Whether every line the shipper had received when asked is in the
    /// store (false: the store did not take them, or the run's shipping
    /// has ended). The agent asks before each attestation, so that what a
    /// job printed before a checkpoint is stored before the checkpoint is
    /// on chain.
    pub async fn flush(&self) -> bool {
        let (done, stored) = tokio::sync::oneshot::channel();
        if self.tx.send(done).await.is_err() {
            return false;
        }
        stored.await.is_ok()
    }
}

/// A channel from an engine's follower to [`ship`].
pub fn channel() -> (LogSink, LogSource) {
    let (tx, rx) = mpsc::channel(CHANNEL_LINES);
    let (flush_tx, flush_rx) = mpsc::channel(16);
    let dropped = Arc::new(AtomicU64::new(0));
    (
        LogSink {
            tx,
            dropped: Arc::clone(&dropped),
            flush: LogFlusher { tx: flush_tx },
        },
        LogSource {
            rx,
            dropped,
            flush_rx,
        },
    )
}

pub struct LogSource {
    rx: mpsc::Receiver<LogLine>,
    dropped: Arc<AtomicU64>,
    flush_rx: mpsc::Receiver<tokio::sync::oneshot::Sender<()>>,
}

impl LogSource {
    /// The next line a sink sent; `None` once every sink is gone and the
    /// channel is empty. (`ship` is the reader in the agent; this is for
    /// whoever reads the lines themselves.)
    pub async fn recv(&mut self) -> Option<LogLine> {
        self.rx.recv().await
    }
}

#[cfg(test)]
impl LogSource {
    /// What the sinks have sent and the channel still holds.
    pub(crate) fn drain_for_tests(&mut self) -> Vec<LogLine> {
        let mut lines = Vec::new();
        while let Ok(line) = self.rx.try_recv() {
            lines.push(line);
        }
        lines
    }
}

/// A chunk to put: its path and bytes, and whether it holds the job's
/// metrics lines (kept under their own cap) or its printed ones.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chunk {
    pub path: String,
    pub bytes: Vec<u8>,
    pub metrics: bool,
}

/// Chunks in the store, oldest first, with their sizes, under one cap.
#[derive(Debug)]
struct Kept {
    cap: u64,
    chunks: VecDeque<(String, u64)>,
    bytes: u64,
}

impl Kept {
    fn new(cap: u64) -> Self {
        Self {
            cap: cap.max(CHUNK_BYTES as u64),
            chunks: VecDeque::new(),
            bytes: 0,
        }
    }

    /// Adds a stored chunk; returns what leaves to keep within the cap,
    /// oldest first (never the one just stored).
    fn add(&mut self, chunk: &Chunk) -> Vec<String> {
        self.chunks
            .push_back((chunk.path.clone(), chunk.bytes.len() as u64));
        self.bytes += chunk.bytes.len() as u64;
        let mut out = Vec::new();
        while self.bytes > self.cap && self.chunks.len() > 1 {
            let (path, size) = self.chunks.pop_front().expect("more than one kept");
            self.bytes -= size;
            out.push(path);
        }
        out
    }
}

/// The decisions of one run's shipping: which lines go in which chunk,
/// which chunks leave the store past the cap, and what the stream says of
/// its own losses. Pure: [`ship`] does the I/O.
#[derive(Debug)]
pub struct LogChunker {
    job: String,
    generation: u32,
    run_started_ms: u64,
    seq: u32,
    /// Printed lines (and MCJS's own), then metrics lines.
    buffers: [Vec<u8>; 2],
    kept: [Kept; 2],
}

impl LogChunker {
    pub fn new(job: &str, generation: u32, run_started_ms: u64, cap_bytes: u64) -> Self {
        Self {
            job: job.to_string(),
            generation,
            run_started_ms,
            seq: 0,
            buffers: [Vec::new(), Vec::new()],
            kept: [Kept::new(cap_bytes), Kept::new(METRICS_CAP_BYTES)],
        }
    }

    /// Adds a line; a full buffer comes back as a chunk.
    pub fn push(&mut self, line: &LogLine) -> Option<Chunk> {
        let i = usize::from(line.stream == LogStream::Metrics);
        serde_json::to_writer(&mut self.buffers[i], line).expect("a log line serialises");
        self.buffers[i].push(b'\n');
        (self.buffers[i].len() >= CHUNK_BYTES).then(|| self.take(i))
    }

    /// What is buffered, as chunks (printed lines first; none if nothing is).
    pub fn flush(&mut self) -> Vec<Chunk> {
        let mut chunks = Vec::new();
        for i in 0..2 {
            if !self.buffers[i].is_empty() {
                chunks.push(self.take(i));
            }
        }
        chunks
    }

    fn take(&mut self, i: usize) -> Chunk {
        let path = mcjs_protocol::store::layout::log_chunk(
            &self.job,
            self.generation,
            self.run_started_ms,
            self.seq,
        );
        self.seq = self.seq.saturating_add(1);
        Chunk {
            path,
            bytes: std::mem::take(&mut self.buffers[i]),
            metrics: i == 1,
        }
    }

    /// `chunk` is in the store: the chunks to delete so that the run keeps
    /// within its cap (metrics chunks within theirs), oldest first (never
    /// the one just stored).
    pub fn stored(&mut self, chunk: &Chunk) -> Vec<String> {
        self.kept[usize::from(chunk.metrics)].add(chunk)
    }
}

/// What one run's shipping did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ShipReport {
    pub lines: u64,
    pub chunks: u64,
    /// Lines dropped on the node: faster than the channel, or while the
    /// store did not answer for longer than [`PENDING_MAX_BYTES`] lasts.
    pub dropped_lines: u64,
    /// Chunks deleted to keep within the cap.
    pub rotated: u64,
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or_default()
}

/// Ships `source`'s lines into `store` until every sink is dropped (the
/// container's output ended), then the rest: one chunk every
/// [`FLUSH_EVERY`] or [`CHUNK_BYTES`], whichever comes first. A store that
/// does not answer is tried again at the next flush, what waits bounded by
/// [`PENDING_MAX_BYTES`].
pub async fn ship(
    store: Arc<dyn ObjectStore>,
    mut chunker: LogChunker,
    mut source: LogSource,
) -> ShipReport {
    let mut report = ShipReport::default();
    let mut pending: VecDeque<Chunk> = VecDeque::new();
    let mut lost_pending = 0u64;
    let mut said_dropped = 0u64;
    let mut tick = tokio::time::interval(FLUSH_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    // Who asked for a flush, answered once what it asked for is stored.
    let mut waiting_flush: Vec<tokio::sync::oneshot::Sender<()>> = Vec::new();
    loop {
        // A chunk full, the flush tick, a flush asked for, or the end:
        // ship what there is.
        let (ended, due) = tokio::select! {
            line = source.rx.recv() => match line {
                Some(line) => {
                    report.lines += 1;
                    match chunker.push(&line) {
                        Some(chunk) => {
                            pending.push_back(chunk);
                            (false, true)
                        }
                        None => (false, false),
                    }
                }
                None => (true, true),
            },
            Some(done) = source.flush_rx.recv() => {
                waiting_flush.push(done);
                // Every line received so far goes in this flush.
                while let Ok(line) = source.rx.try_recv() {
                    report.lines += 1;
                    if let Some(chunk) = chunker.push(&line) {
                        pending.push_back(chunk);
                    }
                }
                (false, true)
            }
            _ = tick.tick() => (false, true),
        };
        if !due {
            continue;
        }
        let dropped = source.dropped.load(Ordering::Relaxed);
        if dropped > said_dropped || lost_pending > 0 {
            let text = format!(
                "{} lines of this job's output were dropped on the node (printed faster than they could be shipped, or while the store did not answer)",
                dropped - said_dropped + lost_pending
            );
            report.dropped_lines += dropped - said_dropped + lost_pending;
            said_dropped = dropped;
            lost_pending = 0;
            if let Some(chunk) = chunker.push(&LogLine::new(now_ms(), LogStream::Mcjs, &text)) {
                pending.push_back(chunk);
            }
        }
        pending.extend(chunker.flush());
        while let Some(chunk) = pending.front() {
            let path = ObjectPath::from(chunk.path.as_str());
            match store
                .put(&path, PutPayload::from(chunk.bytes.clone()))
                .await
            {
                Ok(_) => {
                    let chunk = pending.pop_front().expect("a front chunk");
                    report.chunks += 1;
                    for old in chunker.stored(&chunk) {
                        report.rotated += 1;
                        if let Err(e) = store.delete(&ObjectPath::from(old.as_str())).await {
                            tracing::warn!(path = %old, error = %e, "a log chunk past the job's cap could not be deleted");
                        }
                    }
                }
                Err(e) => {
                    tracing::warn!(path = %chunk.path, error = %e, "job log chunk not stored; tried again at the next flush");
                    break;
                }
            }
        }
        if pending.is_empty() {
            for done in waiting_flush.drain(..) {
                let _ = done.send(());
            }
        } else {
            // Not stored: the askers hear so now, not at a later flush.
            waiting_flush.clear();
        }
        let mut waiting: usize = pending.iter().map(|c| c.bytes.len()).sum();
        while waiting > PENDING_MAX_BYTES {
            let chunk = pending.pop_front().expect("bytes are waiting");
            waiting -= chunk.bytes.len();
            lost_pending += chunk.bytes.iter().filter(|b| **b == b'\n').count() as u64;
        }
        if ended {
            if !pending.is_empty() {
                tracing::warn!(
                    chunks = pending.len(),
                    "the job's output ended while the store did not answer: its last lines stay on the node"
                );
            }
            return report;
        }
    }
}

/// A chunk read back: its lines.
pub fn parse_chunk(bytes: &[u8]) -> Vec<LogLine> {
    bytes
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .filter_map(|l| serde_json::from_slice(l).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A flush stores every line sent before it, at once: not at the next
    /// tick (the clock is paused, and would have to move for a tick), and
    /// says so; once the run's shipping has ended, a flush says it could not.
    #[tokio::test(start_paused = true)]
    async fn a_flush_stores_what_was_sent_before_it_without_waiting_for_the_tick() {
        let store: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
        let (sink, source) = channel();
        let flusher = sink.flusher();
        let chunker = LogChunker::new("J", 2, 1_765_000_000_000, DEFAULT_CAP_BYTES);
        let shipper = tokio::spawn(ship(Arc::clone(&store), chunker, source));
        tokio::task::yield_now().await;
        let started = tokio::time::Instant::now();
        for i in 0..3u64 {
            sink.send(LogLine::new(i, LogStream::Stdout, &format!("before {i}")));
        }
        assert!(flusher.flush().await, "stored");
        assert!(started.elapsed() < FLUSH_EVERY, "not at the tick");
        use futures_util::TryStreamExt;
        let paths: Vec<String> = store
            .list(Some(&ObjectPath::from("jobs/J/logs")))
            .map_ok(|m| m.location.to_string())
            .try_collect()
            .await
            .unwrap();
        let mut lines = Vec::new();
        for p in &paths {
            let bytes = store.get(&ObjectPath::from(p.as_str())).await.unwrap();
            lines.extend(parse_chunk(&bytes.bytes().await.unwrap()));
        }
        let texts: Vec<&str> = lines.iter().map(|l| l.text.as_str()).collect();
        assert_eq!(texts, ["before 0", "before 1", "before 2"]);
        drop(sink);
        shipper.await.unwrap();
        assert!(!flusher.flush().await, "the run's shipping has ended");
    }

    fn line(i: usize, len: usize) -> LogLine {
        LogLine::new(i as u64, LogStream::Stdout, &"x".repeat(len))
    }

    #[test]
    fn lines_go_in_order_into_chunks_named_in_order() {
        let mut c = LogChunker::new("J", 3, 1_765_000_000_000, DEFAULT_CAP_BYTES);
        let mut chunks = Vec::new();
        for i in 0..100 {
            chunks.extend(c.push(&line(i, 10_000)));
        }
        chunks.extend(c.flush());
        assert!(c.flush().is_empty(), "nothing left");
        assert!(chunks.len() >= 4);
        let mut names: Vec<&str> = chunks.iter().map(|c| c.path.as_str()).collect();
        let in_order = names.clone();
        names.sort();
        assert_eq!(names, in_order);
        let back: Vec<u64> = chunks
            .iter()
            .flat_map(|c| parse_chunk(&c.bytes))
            .map(|l| l.at_ms)
            .collect();
        assert_eq!(back, (0..100).collect::<Vec<u64>>());
        assert_eq!(
            mcjs_protocol::store::parse_log_chunk(&chunks[1].path),
            Some((3, 1_765_000_000_000, 1))
        );
    }

    #[test]
    fn past_its_cap_a_run_deletes_its_oldest_chunks() {
        let cap = 3 * CHUNK_BYTES as u64;
        let mut c = LogChunker::new("J", 1, 1, cap);
        let mut stored = Vec::new();
        let mut deleted = Vec::new();
        for i in 0..400 {
            if let Some(chunk) = c.push(&line(i, 10_000)) {
                deleted.extend(c.stored(&chunk));
                stored.push((chunk.path, chunk.bytes.len() as u64));
            }
        }
        assert!(stored.len() > 4 && !deleted.is_empty());
        let names: Vec<String> = stored.iter().map(|(p, _)| p.clone()).collect();
        assert_eq!(deleted, names[..deleted.len()].to_vec(), "oldest first");
        let kept: u64 = stored[deleted.len()..].iter().map(|(_, n)| n).sum();
        assert!(kept <= cap, "{kept} kept of a {cap} cap");
        let one_more = stored[deleted.len() - 1].1;
        assert!(kept + one_more > cap, "no more deleted than the cap needs");
    }

    /// A flood of printed lines rotates out no metrics line, and a flood of
    /// metrics no printed line: each kind keeps within its own cap.
    #[test]
    fn printed_lines_and_metrics_rotate_each_within_its_own_cap() {
        let cap = 3 * CHUNK_BYTES as u64;
        let mut c = LogChunker::new("J", 1, 1, cap);
        let metric =
            |i: usize| LogLine::new(i as u64, LogStream::Metrics, &format!("{{\"step\":{i}}}"));
        let mut stored: Vec<Chunk> = Vec::new();
        let mut deleted: Vec<String> = Vec::new();
        fn keep(
            c: &mut LogChunker,
            chunks: Vec<Chunk>,
            stored: &mut Vec<Chunk>,
            deleted: &mut Vec<String>,
        ) {
            for chunk in chunks {
                deleted.extend(c.stored(&chunk));
                stored.push(chunk);
            }
        }
        for i in 0..10 {
            let pushed = c.push(&metric(i));
            keep(
                &mut c,
                pushed.into_iter().collect(),
                &mut stored,
                &mut deleted,
            );
        }
        let flushed = c.flush();
        keep(&mut c, flushed, &mut stored, &mut deleted);
        for i in 0..400 {
            let pushed = c.push(&line(i, 10_000));
            keep(
                &mut c,
                pushed.into_iter().collect(),
                &mut stored,
                &mut deleted,
            );
        }
        let metrics_paths: Vec<String> = stored
            .iter()
            .filter(|c| c.metrics)
            .map(|c| c.path.clone())
            .collect();
        assert_eq!(metrics_paths.len(), 1);
        assert!(!deleted.is_empty(), "printed lines past the cap rotated");
        assert!(
            !deleted.contains(&metrics_paths[0]),
            "the metrics chunk stays"
        );
        let metrics: Vec<LogLine> = stored
            .iter()
            .filter(|c| c.metrics)
            .flat_map(|c| parse_chunk(&c.bytes))
            .collect();
        assert_eq!(metrics.len(), 10);
        assert!(metrics.iter().all(|l| l.stream == LogStream::Metrics));
        // A flood of metrics rotates metrics only.
        let printed_kept: Vec<String> = stored
            .iter()
            .filter(|c| !c.metrics && !deleted.contains(&c.path))
            .map(|c| c.path.clone())
            .collect();
        let before = deleted.len();
        for i in 0..(METRICS_CAP_BYTES as usize / 1000 + 2000) {
            let pushed = c.push(&LogLine::new(
                0,
                LogStream::Metrics,
                &"m".repeat(1000 - 40 + (i % 2)),
            ));
            keep(
                &mut c,
                pushed.into_iter().collect(),
                &mut stored,
                &mut deleted,
            );
        }
        assert!(deleted.len() > before, "metrics past their cap rotated");
        assert!(deleted[before..].iter().all(|p| !printed_kept.contains(p)));
    }

    #[test]
    fn a_long_line_is_cut_and_says_so() {
        let l = LogLine::new(0, LogStream::Stderr, &"é".repeat(LINE_MAX));
        assert!(l.text.len() < LINE_MAX + 64);
        assert!(
            l.text
                .ends_with(&format!("[line cut: {} bytes]", 2 * LINE_MAX))
        );
    }

    #[tokio::test]
    async fn a_runs_lines_reach_the_store_in_order_and_a_flood_is_counted_not_queued() {
        let store: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
        let (sink, source) = channel();
        let chunker = LogChunker::new("J", 2, 1_765_000_000_000, DEFAULT_CAP_BYTES);
        let shipper = tokio::spawn(ship(Arc::clone(&store), chunker, source));
        // More than the channel holds, at once: the rest is counted.
        let n = CHANNEL_LINES * 3;
        for i in 0..n {
            sink.send(LogLine::new(
                i as u64,
                LogStream::Stdout,
                &format!("line {i}"),
            ));
        }
        drop(sink);
        let report = shipper.await.unwrap();
        assert_eq!(report.lines + report.dropped_lines, n as u64);
        assert!(report.dropped_lines > 0);
        use futures_util::TryStreamExt;
        let mut paths: Vec<String> = store
            .list(Some(&ObjectPath::from("jobs/J/logs")))
            .map_ok(|m| m.location.to_string())
            .try_collect()
            .await
            .unwrap();
        paths.sort();
        let mut lines = Vec::new();
        for p in &paths {
            let bytes = store
                .get(&ObjectPath::from(p.as_str()))
                .await
                .unwrap()
                .bytes()
                .await
                .unwrap();
            lines.extend(parse_chunk(&bytes));
        }
        let printed: Vec<&LogLine> = lines
            .iter()
            .filter(|l| l.stream == LogStream::Stdout)
            .collect();
        assert_eq!(printed.len() as u64, report.lines);
        assert!(
            printed.windows(2).all(|w| w[0].at_ms < w[1].at_ms),
            "in order, once each"
        );
        let said = lines.iter().find(|l| l.stream == LogStream::Mcjs).unwrap();
        assert!(
            said.text
                .starts_with(&format!("{} lines", report.dropped_lines))
        );
    }
}
