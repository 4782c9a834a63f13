//! The checkpoint capability rule, table-driven.

mod common;

use common::{GIB, node};
use mcjs_hal::{CapabilityError, checkpoint_capability};

const MIB: u64 = 1 << 20;

struct Case {
    name: &'static str,
    write_mibps: f64,
    samples: usize,
    cov: f64,
    free: u64,
    size: u64,
    every: u64,
    keep: u32,
    capable: bool,
    /// A fragment each reason must contain, in order.
    reasons: &'static [&'static str],
}

const CASES: &[Case] = &[
    Case {
        name: "10 GiB every 15 min on a fast stable disk",
        write_mibps: 200.0,
        samples: 4,
        cov: 0.05,
        free: 100 * GIB,
        size: 10 * GIB,
        every: 900,
        keep: 3,
        capable: true,
        reasons: &[],
    },
    Case {
        name: "10 GiB every 15 min needs 57 MiB/s, 56 is short",
        write_mibps: 56.0,
        samples: 4,
        cov: 0.05,
        free: 100 * GIB,
        size: 10 * GIB,
        every: 900,
        keep: 3,
        capable: false,
        reasons: &["at least 57 MiB/s is needed"],
    },
    Case {
        name: "write taking exactly 20% of the interval passes",
        write_mibps: 50.0,
        samples: 4,
        cov: 0.0,
        free: 100 * GIB,
        size: 9000 * MIB,
        every: 900,
        keep: 3,
        capable: true,
        reasons: &[],
    },
    Case {
        name: "write taking just over 20% fails",
        write_mibps: 49.99,
        samples: 4,
        cov: 0.0,
        free: 100 * GIB,
        size: 9000 * MIB,
        every: 900,
        keep: 3,
        capable: false,
        reasons: &["more than 20% of the 900 s interval"],
    },
    Case {
        name: "free space for exactly keep+1 checkpoints passes",
        write_mibps: 500.0,
        samples: 4,
        cov: 0.1,
        free: 40 * GIB,
        size: 10 * GIB,
        every: 900,
        keep: 3,
        capable: true,
        reasons: &[],
    },
    Case {
        name: "one byte less than keep+1 checkpoints fails",
        write_mibps: 500.0,
        samples: 4,
        cov: 0.1,
        free: 40 * GIB - 1,
        size: 10 * GIB,
        every: 900,
        keep: 3,
        capable: false,
        reasons: &["needed for 3 kept checkpoints plus the one being written"],
    },
    Case {
        name: "keeping one checkpoint needs room for two",
        write_mibps: 500.0,
        samples: 4,
        cov: 0.1,
        free: 20 * GIB,
        size: 10 * GIB,
        every: 900,
        keep: 1,
        capable: true,
        reasons: &[],
    },
    Case {
        name: "coefficient of variation 0.25 is still stable",
        write_mibps: 500.0,
        samples: 4,
        cov: 0.25,
        free: 100 * GIB,
        size: 10 * GIB,
        every: 900,
        keep: 3,
        capable: true,
        reasons: &[],
    },
    Case {
        name: "coefficient of variation 0.26 is unstable",
        write_mibps: 500.0,
        samples: 4,
        cov: 0.26,
        free: 100 * GIB,
        size: 10 * GIB,
        every: 900,
        keep: 3,
        capable: false,
        reasons: &["unstable"],
    },
    Case {
        name: "a single sample cannot show stability",
        write_mibps: 500.0,
        samples: 1,
        cov: 0.0,
        free: 100 * GIB,
        size: 10 * GIB,
        every: 900,
        keep: 3,
        capable: false,
        reasons: &["only 1 write bandwidth sample"],
    },
    Case {
        name: "slow, full and erratic fails all three rules",
        write_mibps: 10.0,
        samples: 4,
        cov: 0.5,
        free: GIB,
        size: 10 * GIB,
        every: 900,
        keep: 3,
        capable: false,
        reasons: &["at least 57 MiB/s", "free space", "unstable"],
    },
    Case {
        name: "a huge checkpoint overflowing the free space arithmetic fails",
        write_mibps: 1e12,
        samples: 4,
        cov: 0.0,
        free: u64::MAX,
        size: u64::MAX / 2,
        every: 86_400,
        keep: 3,
        capable: false,
        reasons: &["overflows"],
    },
];

#[test]
fn capability_follows_the_rule_for_every_case() {
    for case in CASES {
        let profile = node()
            .with_gpu(common::a100("00000000:07:00.0"))
            .with_storage(case.write_mibps, case.samples, case.cov, case.free)
            .build();
        let cap = checkpoint_capability(&profile, case.size, case.every, case.keep).unwrap();
        assert_eq!(
            cap.capable, case.capable,
            "{}: {:?}",
            case.name, cap.reasons
        );
        assert_eq!(
            cap.reasons.len(),
            case.reasons.len(),
            "{}: {:?}",
            case.name,
            cap.reasons
        );
        for (reason, fragment) in cap.reasons.iter().zip(case.reasons) {
            assert!(
                reason.contains(fragment),
                "{}: {reason:?} lacks {fragment:?}",
                case.name
            );
        }
    }
}

#[test]
fn expected_time_and_headroom_come_from_the_measured_bandwidth() {
    let profile = node().with_storage(200.0, 4, 0.05, 100 * GIB).build();
    let cap = checkpoint_capability(&profile, 10 * GIB, 900, 3).unwrap();
    let t = cap.expected_write_secs.unwrap();
    assert!((t - 51.2).abs() < 1e-9, "{t}");
    assert!((cap.headroom.unwrap() - 51.2 / 900.0).abs() < 1e-12);
    assert_eq!(cap.required_write_mibps, 57);
    assert_eq!(cap.required_free_bytes, Some(40 * GIB));
}

#[test]
fn a_node_without_measured_storage_is_not_capable() {
    let profile = node().build();
    let cap = checkpoint_capability(&profile, GIB, 900, 3).unwrap();
    assert!(!cap.capable);
    assert_eq!(cap.expected_write_secs, None);
    assert!(cap.reasons[0].contains("not measured"));
}

#[test]
fn zero_size_interval_or_keep_is_rejected() {
    let profile = node().with_storage(200.0, 4, 0.05, 100 * GIB).build();
    assert_eq!(
        checkpoint_capability(&profile, 0, 900, 3),
        Err(CapabilityError::ZeroSize)
    );
    assert_eq!(
        checkpoint_capability(&profile, GIB, 0, 3),
        Err(CapabilityError::ZeroInterval)
    );
    assert_eq!(
        checkpoint_capability(&profile, GIB, 900, 0),
        Err(CapabilityError::ZeroKeep)
    );
}
