//! The job's metrics file (`MCJS_METRICS_FILE`), followed as it grows:
//! its complete lines, each a JSON object, go into the run's log stream as
//! the stream `metrics` ([`super::ship`] keeps them in chunks of their own).

use super::{LINE_MAX, LogLine, LogSink, LogStream, now_ms};
use std::time::Duration;

/// How often the job's metrics file is read for new lines.
pub const METRICS_EVERY: Duration = Duration::from_secs(1);
/// The most of the metrics file read in one look: a job that writes faster
/// is read on at the next.
const METRICS_READ_MAX: usize = 1 << 20;

/// The lines of a metrics file as it grows: bytes in, in order; complete
/// lines out, each a JSON object or said as not one. Pure: [`tail_metrics`]
/// reads the file.
#[derive(Debug, Default)]
pub struct MetricsLines {
    partial: Vec<u8>,
    /// A line past [`LINE_MAX`] is being skipped to its end.
    skipping: bool,
}

impl MetricsLines {
    /// The complete lines in `bytes` (with what came before), as log lines
    /// at `at_ms`: a JSON object as a `Metrics` line (compact), anything
    /// else as an `Mcjs` line that says it was skipped. Blank lines are
    /// nothing; a line longer than [`LINE_MAX`] is skipped and said.
    pub fn push(&mut self, bytes: &[u8], at_ms: u64) -> Vec<LogLine> {
        let mut out = Vec::new();
        for piece in bytes.split_inclusive(|b| *b == b'\n') {
            let complete = piece.ends_with(b"\n");
            let piece = piece.strip_suffix(b"\n").unwrap_or(piece);
            if !self.skipping {
                self.partial.extend_from_slice(piece);
                if self.partial.len() > LINE_MAX {
                    self.partial.clear();
                    self.skipping = true;
                    out.push(LogLine::new(
                        at_ms,
                        LogStream::Mcjs,
                        &format!("a line of the metrics file is over {LINE_MAX} bytes: skipped"),
                    ));
                }
            }
            if complete {
                if !self.skipping {
                    out.extend(Self::line(&std::mem::take(&mut self.partial), at_ms));
                }
                self.skipping = false;
            }
        }
        out
    }

    fn line(bytes: &[u8], at_ms: u64) -> Option<LogLine> {
        let text = String::from_utf8_lossy(bytes);
        let text = text.trim();
        if text.is_empty() {
            return None;
        }
        Some(
            match serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(text) {
                Ok(object) => LogLine::new(
                    at_ms,
                    LogStream::Metrics,
                    &serde_json::Value::Object(object).to_string(),
                ),
                Err(_) => LogLine::new(
                    at_ms,
                    LogStream::Mcjs,
                    &format!("a line of the metrics file is not a JSON object: skipped: {text}"),
                ),
            },
        )
    }
}

/// Follows the job's metrics file (`contract::METRICS_FILE` in `dir`, the
/// host side of `MCJS_METRICS_FILE`'s directory), every [`METRICS_EVERY`],
/// into `sink` beside its printed lines, until `stop` fires (the container
/// ended); then reads what is left. A file not yet written is waited for;
/// one that shrinks (the job began it again) is read from its start.
/// `from_end`: only what is written from now on (an agent adopting a
/// running container after a restart ships no line twice).
pub async fn tail_metrics(
    dir: std::path::PathBuf,
    sink: LogSink,
    mut stop: tokio::sync::oneshot::Receiver<()>,
    from_end: bool,
) {
    let mut lines = MetricsLines::default();
    let mut offset = if from_end {
        let dir = dir.clone();
        tokio::task::spawn_blocking(move || metrics_len(&dir))
            .await
            .unwrap_or(0)
    } else {
        0
    };
    loop {
        let last = tokio::select! {
            _ = &mut stop => true,
            _ = tokio::time::sleep(METRICS_EVERY) => false,
        };
        loop {
            let (dir, from) = (dir.clone(), offset);
            let Ok(Ok((read, next))) =
                tokio::task::spawn_blocking(move || read_metrics(&dir, from)).await
            else {
                break;
            };
            offset = next;
            let more = read.len() == METRICS_READ_MAX;
            for line in lines.push(&read, now_ms()) {
                sink.send(line);
            }
            if !(last && more) {
                break;
            }
        }
        if last {
            return;
        }
    }
}

/// The metrics file's length now (0: none, or not a regular file).
fn metrics_len(dir: &std::path::Path) -> u64 {
    crate::confined::ConfinedDir::open(dir)
        .ok()
        .and_then(|d| {
            d.open_file_if_present(crate::contract::METRICS_FILE)
                .ok()
                .flatten()
        })
        .map_or(0, |(_, len)| len)
}

/// Up to [`METRICS_READ_MAX`] bytes of the metrics file in `dir` from
/// `offset` (from its start if it is now shorter), and where the next read
/// begins. The file is the job's: read confined to `dir`, no link
/// followed, a regular file only ([`crate::confined::ConfinedDir`]).
fn read_metrics(
    dir: &std::path::Path,
    offset: u64,
) -> Result<(Vec<u8>, u64), crate::confined::ConfinedError> {
    use std::io::{Read, Seek, SeekFrom};
    let dir = crate::confined::ConfinedDir::open(dir)?;
    let Some((mut file, len)) = dir.open_file_if_present(crate::contract::METRICS_FILE)? else {
        return Ok((Vec::new(), 0));
    };
    let from = if len < offset { 0 } else { offset };
    let io = |source| crate::confined::ConfinedError::Io {
        path: crate::contract::METRICS_FILE.to_string(),
        source,
    };
    file.seek(SeekFrom::Start(from)).map_err(io)?;
    let mut bytes = Vec::new();
    file.take(METRICS_READ_MAX as u64)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    let next = from + bytes.len() as u64;
    Ok((bytes, next))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::logs::channel;

    fn texts(lines: &[LogLine]) -> Vec<(LogStream, &str)> {
        lines.iter().map(|l| (l.stream, l.text.as_str())).collect()
    }

    /// Lines split across reads come out whole, once; a JSON object is a
    /// metrics line (compact), anything else is said and skipped, a blank
    /// line is nothing, and a line past the cap is skipped to its end.
    #[test]
    fn the_metrics_file_comes_out_line_by_line_objects_only() {
        let mut m = MetricsLines::default();
        assert!(
            m.push(b"{\"step\": 1, ", 1).is_empty(),
            "no line is complete"
        );
        let out = m.push(b"\"loss\": 0.5}\n\n[1,2]\nnot json\n{\"step\":2}", 2);
        assert_eq!(
            texts(&out),
            vec![
                (LogStream::Metrics, r#"{"loss":0.5,"step":1}"#),
                (
                    LogStream::Mcjs,
                    "a line of the metrics file is not a JSON object: skipped: [1,2]"
                ),
                (
                    LogStream::Mcjs,
                    "a line of the metrics file is not a JSON object: skipped: not json"
                ),
            ]
        );
        assert_eq!(out[0].at_ms, 2);
        assert_eq!(
            texts(&m.push(b"\n", 3)),
            vec![(LogStream::Metrics, r#"{"step":2}"#)]
        );
        let long = vec![b'x'; LINE_MAX + 10];
        let out = m.push(&long, 4);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].stream, LogStream::Mcjs);
        assert!(m.push(b"xxxx", 5).is_empty(), "the long line is skipped");
        assert_eq!(
            texts(&m.push(b"\n{\"step\":3}\n", 6)),
            vec![(LogStream::Metrics, r#"{"step":3}"#)],
            "the next line is read again"
        );
    }

    /// The file as the job writes it: each line once, in order, across
    /// looks; its lines written after the container ended are read before
    /// the tail stops; a link in its place is not followed.
    #[tokio::test]
    async fn the_metrics_file_is_followed_until_the_run_ends() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(crate::contract::METRICS_FILE);
        let (sink, mut source) = channel();
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let tail = tokio::spawn(tail_metrics(dir.path().to_path_buf(), sink, stopped, false));
        std::fs::write(&file, b"{\"step\":1}\n{\"st").unwrap();
        tokio::time::sleep(METRICS_EVERY * 2).await;
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&file)
            .unwrap();
        f.write_all(b"ep\":2}\n{\"step\":3}\n").unwrap();
        stop.send(()).unwrap();
        tail.await.unwrap();
        let mut got = Vec::new();
        while let Ok(line) = source.rx.try_recv() {
            got.push(line.text);
        }
        assert_eq!(got, vec![r#"{"step":1}"#, r#"{"step":2}"#, r#"{"step":3}"#]);

        let other = tempfile::tempdir().unwrap();
        std::fs::write(other.path().join("secret"), b"{\"secret\":1}\n").unwrap();
        std::os::unix::fs::symlink(other.path().join("secret"), &file.with_extension("x")).unwrap();
        std::fs::remove_file(&file).unwrap();
        std::fs::rename(file.with_extension("x"), &file).unwrap();
        assert!(
            read_metrics(dir.path(), 0).is_err(),
            "a link is not followed"
        );
    }
}
