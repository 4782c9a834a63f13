//! Fixtures shared by the integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// Compiles the fake NVML library with the given `-D` variants into `dir/libnvidia-ml.so.1`
/// and writes its configuration beside it (`libnvidia-ml.so.1.conf`, which it reads on init).
pub fn fake_nvml(dir: &Path, defines: &[&str], config: &str) -> PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fake_nvml/fake_nvml.c");
    let lib = dir.join("libnvidia-ml.so.1");
    let compiler = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let mut cmd = Command::new(&compiler);
    cmd.args([
        "-shared", "-fPIC", "-O1", "-Wall", "-Wextra", "-Werror", "-o",
    ])
    .arg(&lib)
    .arg(&source)
    .arg("-ldl");
    for d in defines {
        cmd.arg(format!("-D{d}"));
    }
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {compiler}: {e}"));
    assert!(
        out.status.success(),
        "compiling the fake nvml failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(dir.join("libnvidia-ml.so.1.conf"), config).unwrap();
    lib
}

pub const A100_NODE: &str = "\
driver 550.54.15
cuda 12040
gpu
name NVIDIA A100-SXM4-80GB
uuid GPU-4b1a6f0e-2d55-43b2-9a54-a2d1e1b0c001
memory_mib 81920
cc 8 0
pci 00000000:07:00.0
pci_device_id 0x20b210de
temperature 34
power_mw 400000
ecc 1
ecc_uncorrected_volatile 0
ecc_uncorrected_aggregate 0
ecc_corrected_volatile 0
mig 0
";

/// One K80 board: two GK210 GPUs, 12 GiB each, on driver branch R470 (its last).
pub const K80_NODE: &str = "\
driver 470.256.02
cuda 11040
gpu
name Tesla K80
uuid GPU-0b7a1c2d-0000-4000-8000-00000000k801
memory_mib 12288
cc 3 7
pci 00000000:05:00.0
temperature 47
power_mw 149000
ecc 1
ecc_uncorrected_volatile 0
ecc_uncorrected_aggregate 2
ecc_corrected_volatile 11
gpu
name Tesla K80
uuid GPU-0b7a1c2d-0000-4000-8000-00000000k802
memory_mib 12288
cc 3 7
pci 00000000:04:00.0
temperature 52
power_mw 149000
ecc 1
ecc_uncorrected_volatile 0
ecc_uncorrected_aggregate 0
ecc_corrected_volatile 0
";
