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

use mcjs_hal::NodeProfile;
use mcjs_hal::probe::{GpuObservation, GpuProbeReport, HostObservation, assemble};
use mcjs_hal::profile::{BandwidthSamples, ContainerRuntime, GpuVendor, StorageMeasurement};

/// A node fixture built through the same normalisation as a probe.
pub struct NodeBuilder {
    gpus: Vec<GpuObservation>,
    storage: Option<StorageMeasurement>,
    docker: bool,
}

pub fn node() -> NodeBuilder {
    NodeBuilder {
        gpus: Vec::new(),
        storage: None,
        docker: true,
    }
}

pub fn a100(pci: &str) -> GpuObservation {
    GpuObservation {
        raw_name: "NVIDIA A100-SXM4-80GB".into(),
        uuid: Some(format!("GPU-{pci}")),
        vram_total_bytes: 81920 << 20,
        compute_capability: Some((8, 0)),
        pci_bus_id: pci.into(),
        temperature_celsius: Some(40),
        power_limit_milliwatts: Some(400_000),
        ecc_enabled: Some(true),
        ecc_uncorrected_volatile: Some(0),
        ecc_uncorrected_aggregate: Some(0),
        ecc_corrected_volatile: Some(0),
        mig_enabled: Some(false),
    }
}

impl NodeBuilder {
    pub fn with_gpu(mut self, gpu: GpuObservation) -> Self {
        self.gpus.push(gpu);
        self
    }

    /// Storage measured at `mibps` over `samples` equal samples (spread to give `cov`), `free_gib` free.
    pub fn with_storage(mut self, mibps: f64, samples: usize, cov: f64, free_bytes: u64) -> Self {
        // Half the samples at mean*(1+cov), half at mean*(1-cov): population CoV = cov.
        let samples_mibps: Vec<f64> = (0..samples)
            .map(|i| {
                if samples < 2 {
                    mibps
                } else if i % 2 == 0 {
                    mibps * (1.0 + cov)
                } else {
                    mibps * (1.0 - cov)
                }
            })
            .collect();
        let bw = BandwidthSamples {
            bytes_per_sample: 16 << 20,
            samples_mibps,
            mean_mibps: mibps,
            cov,
        };
        self.storage = Some(StorageMeasurement {
            path: "/var/lib/mcjs/checkpoints".into(),
            filesystem: "ext4".into(),
            total_bytes: free_bytes.saturating_mul(2),
            free_bytes,
            write: bw.clone(),
            read: bw,
            read_method: "sequential read after posix_fadvise(DONTNEED)".into(),
        });
        self
    }

    pub fn without_docker(mut self) -> Self {
        self.docker = false;
        self
    }

    pub fn build(self) -> NodeProfile {
        let host = HostObservation {
            cpu_model_raw: "AMD EPYC 7763 64-Core Processor".into(),
            cpu_cores: 64,
            ram_bytes: 512 << 30,
            os_name: "Ubuntu".into(),
            os_version: "22.04".into(),
            kernel: "5.15.0-105-generic".into(),
            arch: "x86_64".into(),
        };
        let report = GpuProbeReport {
            vendor: GpuVendor::Nvidia,
            driver_version: Some("550.54.15".into()),
            cuda_version: Some("12.4".into()),
            gpus: self.gpus,
            notes: vec![],
        };
        let runtime = ContainerRuntime {
            endpoint: "unix:///var/run/docker.sock".into(),
            reachable: self.docker,
            version: self.docker.then(|| "27.3.1".to_string()),
            api_version: self.docker.then(|| "1.47".to_string()),
            error: (!self.docker).then(|| "connection refused".to_string()),
        };
        assemble(
            host,
            vec![report],
            runtime,
            self.storage,
            vec![],
            1_700_000_000,
            vec![],
        )
    }
}

pub const GIB: u64 = 1 << 30;
