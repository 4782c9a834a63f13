//! The standard description of a node, whatever its vendor, driver or OS.
//!
//! A profile has three parts that change at different speeds:
//! - [`HardwareIdentity`]: what the hardware *is*, normalised so that the same machine
//!   described by different drivers or distributions yields byte-identical identity
//!   (and the same [`HardwareIdentity::fingerprint`]);
//! - [`PlatformInfo`]: the software around it and settings an operator can change
//!   (OS, kernel, driver, ECC/MIG modes, container runtime), kept with their raw strings;
//! - [`Measurements`]: numbers that vary from one probe to the next (temperatures,
//!   error counters, bandwidths, free space, latencies).

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use utoipa::ToSchema;

use crate::normalize;

/// Version of the profile layout, bumped on incompatible changes.
pub const PROFILE_SCHEMA_VERSION: u32 = 1;

/// Everything the HAL knows about one node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct NodeProfile {
    pub schema_version: u32,
    /// Normalised, stable description of the hardware.
    pub identity: HardwareIdentity,
    /// sha256 (hex) of the canonical JSON of `identity`: equal for equal hardware.
    pub fingerprint: String,
    pub platform: PlatformInfo,
    pub measurements: Measurements,
    /// Why a part of the profile is missing or degraded (e.g. no NVML library).
    pub notes: Vec<String>,
}

/// GPU vendors the probe layer knows about.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, ToSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum GpuVendor {
    Nvidia,
    Amd,
    Intel,
}

impl fmt::Display for GpuVendor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            GpuVendor::Nvidia => "nvidia",
            GpuVendor::Amd => "amd",
            GpuVendor::Intel => "intel",
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct HardwareIdentity {
    /// GPUs sorted by PCI bus id.
    pub gpus: Vec<GpuIdentity>,
    pub cpu: CpuIdentity,
    pub ram_mib: u32,
    /// Machine architecture as Rust names it (`x86_64`, `aarch64`).
    pub arch: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct GpuIdentity {
    pub vendor: GpuVendor,
    /// Normalised model name (`a100-sxm4-80gb`, `k80`).
    pub model: String,
    pub vram_mib: u32,
    /// Compute capability as major*10+minor (3.7 -> 37); absent when the vendor has none.
    pub compute_capability: Option<u16>,
    /// PCI address in the canonical `dddd:bb:dd.f` form, lowercase.
    pub pci_bus_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CpuIdentity {
    /// Normalised model (`intel-xeon-gold-6248`), trademarks and clock suffix removed.
    pub model: String,
    /// Logical CPUs usable by jobs.
    pub cores: u16,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PlatformInfo {
    pub os_name: String,
    pub os_version: String,
    pub kernel: String,
    pub cpu_model_raw: String,
    /// One entry per GPU vendor whose driver answered.
    pub gpu_drivers: Vec<GpuDriverInfo>,
    /// Per-GPU raw strings and settings, in the order of `identity.gpus`.
    pub gpus: Vec<GpuPlatform>,
    pub container_runtime: ContainerRuntime,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct GpuDriverInfo {
    pub vendor: GpuVendor,
    pub driver_version: String,
    /// CUDA version the driver supports (`12.4`), NVIDIA only.
    pub cuda_version: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct GpuPlatform {
    pub pci_bus_id: String,
    /// The name exactly as the driver reported it.
    pub raw_name: String,
    pub uuid: Option<String>,
    pub ecc_enabled: Option<bool>,
    pub mig_enabled: Option<bool>,
    pub power_limit_watts: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ContainerRuntime {
    /// Where the runtime was looked for (`unix:///var/run/docker.sock`).
    pub endpoint: String,
    pub reachable: bool,
    pub version: Option<String>,
    pub api_version: Option<String>,
    /// Why it is unreachable, when it is.
    pub error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, ToSchema)]
pub struct Measurements {
    /// Seconds since the Unix epoch when the probe ran (taken by the caller).
    pub taken_at_unix: u64,
    pub gpus: Vec<GpuHealth>,
    pub storage: Option<StorageMeasurement>,
    pub network: Vec<NetworkMeasurement>,
    /// The node's UPS, when one was named (`--ups`).
    #[serde(default)]
    pub power: Option<crate::probe::ups::PowerReading>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct GpuHealth {
    pub pci_bus_id: String,
    pub temperature_celsius: Option<u32>,
    /// Uncorrected ECC errors since the driver loaded.
    pub ecc_uncorrected_volatile: Option<u64>,
    /// Uncorrected ECC errors over the board's lifetime.
    pub ecc_uncorrected_aggregate: Option<u64>,
    pub ecc_corrected_volatile: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct StorageMeasurement {
    /// The checkpoint directory, canonicalised.
    pub path: String,
    /// Filesystem type as the kernel names it (`ext4`, `xfs`, `overlay`, `tmpfs`).
    pub filesystem: String,
    pub total_bytes: u64,
    /// Space available to an unprivileged writer.
    pub free_bytes: u64,
    /// Sustained write bandwidth, each sample written then fsync'd.
    pub write: BandwidthSamples,
    /// Read bandwidth of the same files, for restores.
    pub read: BandwidthSamples,
    /// What the read figure measures (cache eviction method, caveats).
    pub read_method: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct BandwidthSamples {
    pub bytes_per_sample: u64,
    /// One figure per sample, MiB/s.
    pub samples_mibps: Vec<f64>,
    /// Total bytes over total time, MiB/s.
    pub mean_mibps: f64,
    /// Coefficient of variation (population standard deviation / mean) of the samples.
    pub cov: f64,
}

impl BandwidthSamples {
    /// Builds the summary from per-sample durations of equally sized samples.
    pub fn from_durations(bytes_per_sample: u64, secs: &[f64]) -> Self {
        let mib = bytes_per_sample as f64 / MIB;
        let samples_mibps: Vec<f64> = secs.iter().map(|s| mib / s.max(1e-9)).collect();
        let total_secs: f64 = secs.iter().sum();
        let mean_mibps = if total_secs > 0.0 {
            mib * secs.len() as f64 / total_secs
        } else {
            0.0
        };
        Self {
            bytes_per_sample,
            cov: coefficient_of_variation(&samples_mibps),
            samples_mibps,
            mean_mibps,
        }
    }
}

/// Population coefficient of variation; 0 for fewer than two samples (callers check the count).
pub fn coefficient_of_variation(values: &[f64]) -> f64 {
    if values.len() < 2 {
        return 0.0;
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    if mean <= 0.0 {
        return f64::INFINITY;
    }
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
    var.sqrt() / mean
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct NetworkMeasurement {
    /// What the target is (`checkpoint_store`, `rpc`).
    pub target: String,
    pub url: String,
    /// Median TCP connect time over the attempts, milliseconds.
    pub connect_ms: Option<f64>,
    pub http_status: Option<u16>,
    pub http_bytes: Option<u64>,
    /// Time from sending the GET to the last body byte, milliseconds.
    pub http_ms: Option<f64>,
    /// Body bytes over `http_ms`; meaningful only when the URL serves a large object.
    pub throughput_mibps: Option<f64>,
    pub error: Option<String>,
}

pub(crate) const MIB: f64 = 1024.0 * 1024.0;

/// The summary a node registers on chain (fixed-size fields, see the shared conventions).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct HardwareSummary {
    /// Normalised model of the node's main GPU group, at most 32 bytes.
    pub gpu_model: String,
    pub gpu_count: u8,
    pub vram_per_gpu_mib: u32,
    /// Compute capability as sm number (major*10+minor).
    pub compute_capability: u16,
    pub cpu_cores: u16,
    pub ram_mib: u32,
    /// Free space of the checkpoint directory, GiB (rounded down).
    pub disk_gib: u32,
    /// Sustained fsync'd write bandwidth, MiB/s (rounded down).
    pub checkpoint_write_mibps: u32,
}

/// Longest GPU model name the chain account stores.
pub const CHAIN_GPU_MODEL_MAX_BYTES: usize = 32;

impl HardwareIdentity {
    /// Builds an identity, normalising and ordering its parts so that equal hardware compares equal.
    pub fn new(mut gpus: Vec<GpuIdentity>, cpu: CpuIdentity, ram_mib: u32, arch: &str) -> Self {
        gpus.sort_by(|a, b| {
            a.pci_bus_id
                .cmp(&b.pci_bus_id)
                .then_with(|| a.model.cmp(&b.model))
        });
        Self {
            gpus,
            cpu,
            ram_mib,
            arch: arch.trim().to_ascii_lowercase(),
        }
    }

    /// sha256 of the canonical JSON encoding (sorted keys, no whitespace), hex.
    pub fn fingerprint(&self) -> String {
        let value = serde_json::to_value(self).expect("identity is plain data");
        let canonical = canonical_json(&value);
        hex(&Sha256::digest(canonical.as_bytes()))
    }
}

/// JSON with object keys sorted at every level: the identity holds only strings and integers,
/// so this is its RFC 8785 form.
fn canonical_json(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::Object(map) => {
            let sorted: BTreeMap<&String, String> =
                map.iter().map(|(k, v)| (k, canonical_json(v))).collect();
            let body: Vec<String> = sorted
                .into_iter()
                .map(|(k, v)| format!("{}:{v}", serde_json::Value::String(k.clone())))
                .collect();
            format!("{{{}}}", body.join(","))
        }
        serde_json::Value::Array(items) => {
            format!(
                "[{}]",
                items
                    .iter()
                    .map(canonical_json)
                    .collect::<Vec<_>>()
                    .join(",")
            )
        }
        other => other.to_string(),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl NodeProfile {
    /// Assembles a profile; the fingerprint is derived here so it can never disagree with `identity`.
    pub fn new(
        identity: HardwareIdentity,
        platform: PlatformInfo,
        measurements: Measurements,
        notes: Vec<String>,
    ) -> Self {
        Self {
            schema_version: PROFILE_SCHEMA_VERSION,
            fingerprint: identity.fingerprint(),
            identity,
            platform,
            measurements,
            notes,
        }
    }

    /// What the node registers on chain.
    ///
    /// A node with mixed GPUs registers its largest group of identical GPUs (same model, VRAM
    /// and compute capability; ties go to the higher compute capability, then more VRAM), since a
    /// job's request names one model and one VRAM floor.
    pub fn chain_summary(&self) -> HardwareSummary {
        let mut groups: BTreeMap<(&str, u32, u16), u32> = BTreeMap::new();
        for gpu in &self.identity.gpus {
            let key = (
                gpu.model.as_str(),
                gpu.vram_mib,
                gpu.compute_capability.unwrap_or(0),
            );
            *groups.entry(key).or_default() += 1;
        }
        let main = groups
            .into_iter()
            .max_by(|(ka, na), (kb, nb)| na.cmp(nb).then(ka.2.cmp(&kb.2)).then(ka.1.cmp(&kb.1)));
        let (gpu_model, gpu_count, vram_per_gpu_mib, compute_capability) = match main {
            Some(((model, vram, cc), count)) => (
                // A cut can end on a separator, which the program refuses.
                normalize::truncate_utf8(model, CHAIN_GPU_MODEL_MAX_BYTES)
                    .trim_end_matches(|c: char| !c.is_ascii_alphanumeric())
                    .to_string(),
                u8::try_from(count).unwrap_or(u8::MAX),
                vram,
                cc,
            ),
            None => (String::new(), 0, 0, 0),
        };
        let storage = self.measurements.storage.as_ref();
        HardwareSummary {
            gpu_model,
            gpu_count,
            vram_per_gpu_mib,
            compute_capability,
            cpu_cores: self.identity.cpu.cores,
            ram_mib: self.identity.ram_mib,
            disk_gib: storage
                .map(|s| u32::try_from(s.free_bytes >> 30).unwrap_or(u32::MAX))
                .unwrap_or(0),
            checkpoint_write_mibps: storage
                .map(|s| floor_to_u32(s.write.mean_mibps))
                .unwrap_or(0),
        }
    }

    pub fn docker_reachable(&self) -> bool {
        self.platform.container_runtime.reachable
    }
}

pub(crate) fn floor_to_u32(value: f64) -> u32 {
    if value.is_finite() && value > 0.0 {
        value.floor().min(u32::MAX as f64) as u32
    } else {
        0
    }
}

impl fmt::Display for HardwareSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} x {} ({} MiB, sm {}), {} cpu cores, {} MiB ram, {} GiB free disk, {} MiB/s checkpoint write",
            self.gpu_count,
            if self.gpu_model.is_empty() {
                "no gpu"
            } else {
                &self.gpu_model
            },
            self.vram_per_gpu_mib,
            self.compute_capability,
            self.cpu_cores,
            self.ram_mib,
            self.disk_gib,
            self.checkpoint_write_mibps
        )
    }
}

fn opt<T: fmt::Display>(value: &Option<T>) -> String {
    value
        .as_ref()
        .map_or_else(|| "-".to_string(), |v| v.to_string())
}

impl fmt::Display for NodeProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let id = &self.identity;
        let p = &self.platform;
        writeln!(f, "fingerprint  {}", self.fingerprint)?;
        writeln!(
            f,
            "os           {} {} (kernel {}, {})",
            p.os_name, p.os_version, p.kernel, id.arch
        )?;
        writeln!(
            f,
            "cpu          {} x {} ({})",
            id.cpu.cores, id.cpu.model, p.cpu_model_raw
        )?;
        writeln!(f, "ram          {} MiB", id.ram_mib)?;
        for d in &p.gpu_drivers {
            writeln!(
                f,
                "gpu driver   {} {} (cuda {})",
                d.vendor,
                d.driver_version,
                opt(&d.cuda_version)
            )?;
        }
        if id.gpus.is_empty() {
            writeln!(f, "gpus         none")?;
        }
        for (i, g) in id.gpus.iter().enumerate() {
            let plat = p.gpus.iter().find(|x| x.pci_bus_id == g.pci_bus_id);
            let health = self
                .measurements
                .gpus
                .iter()
                .find(|x| x.pci_bus_id == g.pci_bus_id);
            let cc = g
                .compute_capability
                .map_or_else(|| "-".to_string(), |c| format!("{}.{}", c / 10, c % 10));
            writeln!(
                f,
                "gpu {i}        {} [{}] {} MiB, compute {cc}, pci {}",
                g.model,
                plat.map_or("", |x| x.raw_name.as_str()),
                g.vram_mib,
                g.pci_bus_id
            )?;
            if let Some(x) = plat {
                writeln!(
                    f,
                    "             ecc {}, mig {}, power limit {} W",
                    opt(&x.ecc_enabled),
                    opt(&x.mig_enabled),
                    opt(&x.power_limit_watts)
                )?;
            }
            if let Some(h) = health {
                writeln!(
                    f,
                    "             temperature {} C, uncorrected ecc errors {} (volatile) {} (aggregate)",
                    opt(&h.temperature_celsius),
                    opt(&h.ecc_uncorrected_volatile),
                    opt(&h.ecc_uncorrected_aggregate)
                )?;
            }
        }
        let c = &p.container_runtime;
        if c.reachable {
            writeln!(
                f,
                "docker       {} (api {}) at {}",
                opt(&c.version),
                opt(&c.api_version),
                c.endpoint
            )?;
        } else {
            writeln!(
                f,
                "docker       unreachable at {}: {}",
                c.endpoint,
                opt(&c.error)
            )?;
        }
        match &self.measurements.storage {
            Some(s) => {
                writeln!(
                    f,
                    "storage      {} ({}), {:.1} GiB free of {:.1} GiB",
                    s.path,
                    s.filesystem,
                    s.free_bytes as f64 / (MIB * 1024.0),
                    s.total_bytes as f64 / (MIB * 1024.0)
                )?;
                writeln!(
                    f,
                    "             write {:.1} MiB/s with fsync (cov {:.3}, {} x {} MiB)",
                    s.write.mean_mibps,
                    s.write.cov,
                    s.write.samples_mibps.len(),
                    s.write.bytes_per_sample as f64 / MIB
                )?;
                writeln!(
                    f,
                    "             read {:.1} MiB/s (cov {:.3}; {})",
                    s.read.mean_mibps, s.read.cov, s.read_method
                )?;
            }
            None => writeln!(f, "storage      not measured")?,
        }
        if let Some(power) = &self.measurements.power {
            match &power.error {
                Some(e) => writeln!(f, "power        UPS {}: {e}", power.ups)?,
                None => {
                    write!(f, "power        UPS {} {}", power.ups, power.state)?;
                    if let Some(status) = &power.status {
                        write!(f, " ({status})")?;
                    }
                    if let Some(charge) = power.charge_percent {
                        write!(f, ", battery {charge:.0}%")?;
                    }
                    if let Some(runtime) = power.runtime_secs {
                        write!(f, ", {runtime} s left")?;
                    }
                    writeln!(f)?;
                }
            }
        }
        for n in &self.measurements.network {
            match &n.error {
                Some(e) => writeln!(f, "network      {} {}: {e}", n.target, n.url)?,
                None => writeln!(
                    f,
                    "network      {} {}: connect {} ms, http {} in {} ms, {} MiB/s",
                    n.target,
                    n.url,
                    n.connect_ms.map_or("-".into(), |v| format!("{v:.2}")),
                    opt(&n.http_status),
                    n.http_ms.map_or("-".into(), |v| format!("{v:.2}")),
                    n.throughput_mibps.map_or("-".into(), |v| format!("{v:.2}"))
                )?,
            }
        }
        writeln!(f, "summary      {}", self.chain_summary())?;
        for note in &self.notes {
            writeln!(f, "note         {note}")?;
        }
        Ok(())
    }
}
