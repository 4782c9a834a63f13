//! Helpers shared by the CLI's integration tests.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The fake NVML of the HAL's tests, reporting one K80 board (two GPUs) on driver 470.
pub fn fake_k80_nvml(dir: &Path) -> PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../orchestrator/hal/tests/fake_nvml/fake_nvml.c");
    let lib = dir.join("libnvidia-ml.so.1");
    let status = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .args(["-shared", "-fPIC", "-O1", "-DFAKE_NVML_R470", "-o"])
        .arg(&lib)
        .arg(&source)
        .arg("-ldl")
        .status()
        .unwrap();
    assert!(status.success());
    let gpu = |pci: &str| {
        format!(
            "gpu\nname Tesla K80\nmemory_mib 12288\ncc 3 7\npci {pci}\ntemperature 45\necc 1\necc_uncorrected_volatile 0\n"
        )
    };
    let config = format!(
        "driver 470.256.02\ncuda 11040\n{}{}",
        gpu("00000000:04:00.0"),
        gpu("00000000:05:00.0")
    );
    std::fs::write(dir.join("libnvidia-ml.so.1.conf"), config).unwrap();
    lib
}
