//! Heartbeat sequence numbers that stay above everything the node ever sent,
//! across agent restarts and a clock stepped back.
//!
//! The scheduler refuses a heartbeat whose sequence is not above the last
//! one it accepted from the node (a replay). The sequence floors on the
//! clock ([`mcjs_protocol::auth::next_sequence`]), so a restarted agent
//! whose clock went back (NTP, a dead RTC battery) would start below what
//! it sent before, be refused, and its node be reported lost. So the agent
//! writes a reservation ahead of what it sends (a minute of sequence
//! numbers at a time, one small write a minute) and starts above it.

use std::path::{Path, PathBuf};

/// How far ahead of the last sequence sent the reservation is written:
/// sequences are microseconds, so one minute of heartbeats.
pub const RESERVE: u64 = 60_000_000;

#[derive(Debug)]
pub struct Sequence {
    last: Option<u64>,
    /// Nothing at or above this was ever sent; persisted at `path`.
    reserved: u64,
    path: PathBuf,
    /// Reservations written since the start (for tests and logs).
    pub writes: u32,
}

impl Sequence {
    /// Continues above the reservation in `path` (none: from the clock).
    pub fn open(path: &Path) -> Self {
        let reserved = std::fs::read_to_string(path)
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .unwrap_or(0);
        Self {
            last: (reserved > 0).then_some(reserved),
            reserved,
            path: path.to_path_buf(),
            writes: 0,
        }
    }

    /// The next sequence number; renews the reservation when it reaches it.
    pub fn next(&mut self, now_unix_ms: i64) -> u64 {
        let next = mcjs_protocol::auth::next_sequence(self.last, now_unix_ms);
        self.last = Some(next);
        if next >= self.reserved {
            let reserved = next.saturating_add(RESERVE);
            match write_atomically(&self.path, reserved) {
                Ok(()) => {
                    self.reserved = reserved;
                    self.writes += 1;
                }
                Err(e) => {
                    tracing::warn!(path = %self.path.display(), error = %e, "cannot keep the heartbeat sequence: a restart with the clock stepped back would be refused as a replay");
                }
            }
        }
        next
    }
}

fn write_atomically(path: &Path, value: u64) -> std::io::Result<()> {
    use std::io::Write;
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(value.to_string().as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_restart_with_the_clock_stepped_back_continues_above_what_was_sent() {
        let t = tempfile::tempdir().unwrap();
        let path = t.path().join("heartbeat.seq");
        let mut before = Sequence::open(&path);
        let mut sent = Vec::new();
        // Two minutes of heartbeats every 500 ms.
        for i in 0..240 {
            sent.push(before.next(1_800_000_000_000 + i * 500));
        }
        assert!(sent.windows(2).all(|w| w[0] < w[1]));
        assert!(
            before.writes <= 3,
            "{} reservations written for 240 heartbeats",
            before.writes
        );
        // The agent restarts with its clock an hour behind.
        let mut after = Sequence::open(&path);
        let first = after.next(1_800_000_000_000 - 3_600_000);
        assert!(first > *sent.last().unwrap(), "{first} after {sent:?}");
        // Without the file, the clock alone would have started below.
        let mut forgetful = Sequence::open(&t.path().join("none"));
        assert!(forgetful.next(1_800_000_000_000 - 3_600_000) < *sent.last().unwrap());
    }

    #[test]
    fn an_unreadable_reservation_starts_from_the_clock() {
        let t = tempfile::tempdir().unwrap();
        let path = t.path().join("heartbeat.seq");
        std::fs::write(&path, "not a number").unwrap();
        let mut s = Sequence::open(&path);
        assert_eq!(s.next(1_000), 1_000_000);
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            (1_000_000 + RESERVE).to_string()
        );
    }
}
