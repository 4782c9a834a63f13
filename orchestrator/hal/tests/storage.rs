//! The storage probe against a real directory.

use mcjs_hal::probe::storage::{StorageProbeConfig, StorageProbeError, measure};

#[test]
fn a_real_directory_is_measured_and_left_clean() {
    let dir = tempfile::tempdir().unwrap();
    let config = StorageProbeConfig {
        total_bytes: 8 << 20,
        samples: 4,
    };
    let m = measure(dir.path(), &config).unwrap();

    assert_eq!(
        m.path,
        std::fs::canonicalize(dir.path())
            .unwrap()
            .display()
            .to_string()
    );
    assert!(
        !m.filesystem.is_empty() && m.filesystem != "unknown",
        "{}",
        m.filesystem
    );
    assert!(m.total_bytes > 0 && m.free_bytes > 0 && m.free_bytes <= m.total_bytes);
    for bw in [&m.write, &m.read] {
        assert_eq!(bw.bytes_per_sample, 2 << 20);
        assert_eq!(bw.samples_mibps.len(), 4);
        assert!(
            bw.samples_mibps.iter().all(|s| s.is_finite() && *s > 0.0),
            "{bw:?}"
        );
        assert!(bw.mean_mibps > 0.0 && bw.mean_mibps.is_finite());
        assert!(bw.cov >= 0.0 && bw.cov.is_finite());
    }
    assert!(m.read_method.contains("posix_fadvise"));
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(left.is_empty(), "probe files left behind: {left:?}");
}

#[test]
fn a_missing_directory_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    let err = measure(&missing, &StorageProbeConfig::default()).unwrap_err();
    assert!(matches!(err, StorageProbeError::NotADirectory(_)));
    assert!(err.to_string().contains("nope"));
}

#[test]
fn samples_below_one_mib_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let err = measure(
        dir.path(),
        &StorageProbeConfig {
            total_bytes: 1 << 20,
            samples: 4,
        },
    )
    .unwrap_err();
    assert!(
        matches!(err, StorageProbeError::SamplesTooSmall { samples: 4, .. }),
        "{err}"
    );
    let err = measure(
        dir.path(),
        &StorageProbeConfig {
            total_bytes: 64 << 20,
            samples: 0,
        },
    )
    .unwrap_err();
    assert!(
        matches!(err, StorageProbeError::SamplesTooSmall { samples: 0, .. }),
        "{err}"
    );
}

#[test]
fn a_read_only_directory_fails_and_leaves_nothing() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let ro = dir.path().join("ro");
    std::fs::create_dir(&ro).unwrap();
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555)).unwrap();
    let result = measure(
        &ro,
        &StorageProbeConfig {
            total_bytes: 4 << 20,
            samples: 2,
        },
    );
    // Root ignores directory permissions; only check the failure when it applies.
    if running_as_root() {
        assert!(result.is_ok());
    } else {
        assert!(matches!(
            result,
            Err(StorageProbeError::Io {
                action: "create",
                ..
            })
        ));
    }
    assert_eq!(std::fs::read_dir(&ro).unwrap().count(), 0);
}

fn running_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .is_some_and(|l| l.split_whitespace().nth(1) == Some("0"))
}
