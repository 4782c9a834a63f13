//! The checkpoint rule every MCJS component applies: the HAL when it answers "can this node
//! checkpoint on schedule", the spec when it writes the on-chain requirement summary, and the
//! scheduler when it matches a job to a node. One copy, so that the three can never disagree
//! about whether a node keeps up.
//!
//! - **Time.** A checkpoint write may take at most `1 / WRITE_BUDGET_DIVISOR` (20%) of the
//!   interval: the job then spends at most a fifth of its wall time blocked on checkpoints,
//!   and a write that runs up to 5x slow still finishes before the next one is due. A node
//!   needs `ceil(S_MiB * 5 / I)` MiB/s, computed exactly on bytes (never on a rounded size).
//! - **Space.** Free space holds the `keep` kept checkpoints plus the one being written.

const MIB: u128 = 1 << 20;

/// The interval is this many times the longest acceptable write.
pub const WRITE_BUDGET_DIVISOR: u64 = 5;

/// The largest fraction of the interval a checkpoint write may take.
pub const MAX_WRITE_FRACTION: f64 = 1.0 / WRITE_BUDGET_DIVISOR as f64;

/// The write bandwidth, in MiB/s, that writes `size_bytes` within 20% of `interval_secs`:
/// `ceil(size_bytes * 5 / (interval_secs * 2^20))`.
///
/// No checkpoint needs nothing; a positive size every 0 s needs more than any disk has
/// (`u64::MAX`), and so does any need beyond 64 bits.
pub fn required_write_mibps(size_bytes: u64, interval_secs: u64) -> u64 {
    if size_bytes == 0 {
        return 0;
    }
    if interval_secs == 0 {
        return u64::MAX;
    }
    let needed = (u128::from(size_bytes) * u128::from(WRITE_BUDGET_DIVISOR))
        .div_ceil(u128::from(interval_secs) * MIB);
    u64::try_from(needed).unwrap_or(u64::MAX)
}

/// The free space, in bytes, that holds `keep` kept checkpoints plus the one being written.
/// Exact: a `u64` size times at most 2^32 fits in 128 bits.
pub fn required_free_bytes(size_bytes: u64, keep: u32) -> u128 {
    u128::from(size_bytes) * (u128::from(keep) + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bandwidth_rule_on_tricky_sizes_and_intervals() {
        const GIB: u64 = 1 << 30;
        let table: &[(u64, u64, u64)] = &[
            // (size bytes, interval s, MiB/s)
            (10 * GIB, 900, 57), // ceil(10240 * 5 / 900) = ceil(56.9)
            (1 << 20, 5, 1),     // exactly 1 MiB/s
            (1 << 20, 6, 1),
            (1, 3600, 1),              // any positive size needs at least 1 MiB/s
            (0, 3600, 0),              // no checkpoint needs nothing
            (0, 0, 0),                 // ... even with no interval
            (1, 0, u64::MAX),          // a checkpoint every 0 s needs infinite bandwidth
            ((1 << 20) + 1, 9, 1),     // exact on bytes: 5.0000048 / 9 -> 1, not 2
            (4 * GIB, 1800, 12),       // ceil(4096 * 5 / 1800) = ceil(11.38)
            (120 * GIB, 1800, 342),    // ceil(122880 * 5 / 1800) = ceil(341.3)
            (360 * (1 << 20), 360, 5), // boundary: exactly 5 MiB/s, not 6
            (
                u64::MAX,
                1,
                (u128::from(u64::MAX) * 5).div_ceil(1 << 20) as u64,
            ),
        ];
        for &(size, interval, expected) in table {
            assert_eq!(
                required_write_mibps(size, interval),
                expected,
                "size {size} every {interval} s"
            );
        }
    }

    #[test]
    fn space_rule_counts_the_checkpoint_being_written() {
        assert_eq!(required_free_bytes(10, 2), 30);
        assert_eq!(required_free_bytes(10, 0), 10);
        assert_eq!(
            required_free_bytes(u64::MAX, u32::MAX),
            u128::from(u64::MAX) << 32
        );
    }
}
