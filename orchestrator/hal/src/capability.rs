//! Can this node write a checkpoint of S bytes every I seconds, keeping K of them, reliably?
//!
//! The rule (owned by `mcjs_spec::checkpoint`; shared by the HAL, the spec and the scheduler):
//!
//! (a) **Time.** With the measured sustained fsync'd write bandwidth B (total bytes over total
//!     time of the probe samples), writing S takes `S / B` seconds. That must be at most 20% of
//!     the interval: a job then spends at most a fifth of its wall time blocked on checkpoints,
//!     and a write that runs slow by up to 5x still finishes before the next one is due.
//!     Equivalently the job needs `ceil(S_MiB * 5 / I)` MiB/s.
//! (b) **Space.** Free space must hold the K kept checkpoints plus the one being written:
//!     `free >= S * (K + 1)`.
//! (c) **Stability.** The bandwidth samples must agree: coefficient of variation <= 0.25 over
//!     at least two samples. An erratic disk (shared, throttled, failing) makes the mean a poor
//!     prediction of the next write.
//!
//! All three must hold; every one that fails adds a reason.

use std::fmt;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::profile::{MIB, NodeProfile};

/// The time and space rules are the job specification's (one copy for the HAL, the spec's
/// requirement summary and the scheduler).
pub use mcjs_spec::checkpoint::{MAX_WRITE_FRACTION, required_write_mibps};
/// Largest coefficient of variation of the write samples.
pub const MAX_WRITE_COV: f64 = 0.25;
/// Fewest samples from which stability can be judged.
pub const MIN_STABILITY_SAMPLES: usize = 2;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Capability {
    pub capable: bool,
    pub size_bytes: u64,
    pub interval_secs: u64,
    pub keep: u32,
    /// `S / B`; absent when the write bandwidth was not measured.
    pub expected_write_secs: Option<f64>,
    /// Fraction of the interval the write takes (`expected_write_secs / interval_secs`).
    pub headroom: Option<f64>,
    /// `ceil(S_MiB * 5 / I)`: the bandwidth that surely suffices.
    pub required_write_mibps: u64,
    pub measured_write_mibps: Option<f64>,
    pub write_cov: Option<f64>,
    /// `S * (keep + 1)`; absent when it overflows 64 bits.
    pub required_free_bytes: Option<u64>,
    pub free_bytes: Option<u64>,
    /// Every rule that failed, in words.
    pub reasons: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CapabilityError {
    #[error("checkpoint size must be greater than zero")]
    ZeroSize,
    #[error("checkpoint interval must be greater than zero seconds")]
    ZeroInterval,
    #[error(
        "keep must be at least 1 (the number of checkpoints retained besides the one being written)"
    )]
    ZeroKeep,
}

/// Applies the rule above to a profile. Pure: only the profile's recorded measurements count.
pub fn checkpoint_capability(
    profile: &NodeProfile,
    size_bytes: u64,
    interval_secs: u64,
    keep: u32,
) -> Result<Capability, CapabilityError> {
    if size_bytes == 0 {
        return Err(CapabilityError::ZeroSize);
    }
    if interval_secs == 0 {
        return Err(CapabilityError::ZeroInterval);
    }
    if keep == 0 {
        return Err(CapabilityError::ZeroKeep);
    }
    let size_mib = size_bytes as f64 / MIB;
    let required_write_mibps = required_write_mibps(size_bytes, interval_secs);
    let required_free_bytes =
        u64::try_from(mcjs_spec::checkpoint::required_free_bytes(size_bytes, keep)).ok();
    let storage = profile.measurements.storage.as_ref();
    let mut reasons = Vec::new();

    let measured = storage
        .map(|s| s.write.mean_mibps)
        .filter(|b| *b > 0.0 && b.is_finite());
    let expected_write_secs = measured.map(|b| size_mib / b);
    let headroom = expected_write_secs.map(|t| t / interval_secs as f64);
    match (storage, measured, expected_write_secs) {
        (None, ..) => reasons.push(
            "checkpoint storage was not measured: probe with a checkpoint directory".to_string(),
        ),
        (Some(_), None, _) | (Some(_), _, None) => {
            reasons.push("checkpoint storage write bandwidth measured as zero".to_string())
        }
        (Some(_), Some(b), Some(t)) => {
            // Compared as S*5 <= B*I to stay exact at the boundary.
            if size_mib / MAX_WRITE_FRACTION > b * interval_secs as f64 {
                reasons.push(format!(
                    "writing {size_mib:.0} MiB at {b:.1} MiB/s takes {t:.1} s, more than {:.0}% of the {interval_secs} s interval ({:.1} s); at least {required_write_mibps} MiB/s is needed",
                    MAX_WRITE_FRACTION * 100.0,
                    interval_secs as f64 * MAX_WRITE_FRACTION
                ));
            }
        }
    }

    if let Some(s) = storage {
        match required_free_bytes {
            None => reasons.push(format!(
                "{size_bytes} bytes x {} checkpoints overflows any disk",
                u64::from(keep) + 1
            )),
            Some(needed) if s.free_bytes < needed => reasons.push(format!(
                "free space {:.1} GiB is less than {:.1} GiB needed for {keep} kept checkpoints plus the one being written",
                s.free_bytes as f64 / (MIB * 1024.0),
                needed as f64 / (MIB * 1024.0)
            )),
            Some(_) => {}
        }
        let n = s.write.samples_mibps.len();
        if n < MIN_STABILITY_SAMPLES {
            reasons.push(format!(
                "only {n} write bandwidth sample(s); at least {MIN_STABILITY_SAMPLES} are needed to judge stability"
            ));
        } else if s.write.cov.is_nan() || s.write.cov > MAX_WRITE_COV {
            reasons.push(format!(
                "write bandwidth is unstable: coefficient of variation {:.3} exceeds {MAX_WRITE_COV}",
                s.write.cov
            ));
        }
    }

    Ok(Capability {
        capable: reasons.is_empty(),
        size_bytes,
        interval_secs,
        keep,
        expected_write_secs,
        headroom,
        required_write_mibps,
        measured_write_mibps: measured,
        write_cov: storage.map(|s| s.write.cov),
        required_free_bytes,
        free_bytes: storage.map(|s| s.free_bytes),
        reasons,
    })
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let size_gib = self.size_bytes as f64 / (MIB * 1024.0);
        writeln!(
            f,
            "{}: checkpoint {size_gib:.2} GiB every {} s, keeping {}",
            if self.capable {
                "capable"
            } else {
                "not capable"
            },
            self.interval_secs,
            self.keep
        )?;
        if let (Some(t), Some(h)) = (self.expected_write_secs, self.headroom) {
            writeln!(
                f,
                "  write takes {t:.1} s = {:.1}% of the interval (limit {:.0}%)",
                h * 100.0,
                MAX_WRITE_FRACTION * 100.0
            )?;
        }
        writeln!(
            f,
            "  bandwidth needed {} MiB/s, measured {}",
            self.required_write_mibps,
            self.measured_write_mibps
                .map_or_else(|| "-".to_string(), |b| format!("{b:.1} MiB/s"))
        )?;
        if let (Some(need), Some(free)) = (self.required_free_bytes, self.free_bytes) {
            writeln!(
                f,
                "  space needed {:.1} GiB, free {:.1} GiB",
                need as f64 / (MIB * 1024.0),
                free as f64 / (MIB * 1024.0)
            )?;
        }
        for reason in &self.reasons {
            writeln!(f, "  - {reason}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn required_bandwidth_matches_the_shared_formula() {
        // 10 GiB every 15 minutes: ceil(10240 * 5 / 900) = 57.
        assert_eq!(required_write_mibps(10 << 30, 900), 57);
        assert_eq!(required_write_mibps(1 << 20, 5), 1);
        assert_eq!(required_write_mibps(1, 3600), 1);
        assert_eq!(
            required_write_mibps(u64::MAX, 1),
            (u128::from(u64::MAX) * 5).div_ceil(1 << 20) as u64
        );
    }
}
