//! Probes: each reads one part of the node into raw observations; [`assemble`] normalises
//! the observations into a [`NodeProfile`]. GPU vendors plug in through [`GpuProbe`].

pub mod docker;
pub mod dummy_ups;
pub mod host;
pub mod network;
pub mod nvml;
pub mod storage;
pub mod ups;

use std::path::PathBuf;

use crate::normalize;
use crate::profile::{
    ContainerRuntime, CpuIdentity, GpuDriverInfo, GpuHealth, GpuIdentity, GpuPlatform, GpuVendor,
    HardwareIdentity, Measurements, NetworkMeasurement, NodeProfile, PlatformInfo,
    StorageMeasurement,
};

/// What a GPU driver said about one device, before normalisation.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GpuObservation {
    pub raw_name: String,
    pub uuid: Option<String>,
    pub vram_total_bytes: u64,
    /// (major, minor).
    pub compute_capability: Option<(u32, u32)>,
    pub pci_bus_id: String,
    pub temperature_celsius: Option<u32>,
    pub power_limit_milliwatts: Option<u32>,
    pub ecc_enabled: Option<bool>,
    pub ecc_uncorrected_volatile: Option<u64>,
    pub ecc_uncorrected_aggregate: Option<u64>,
    pub ecc_corrected_volatile: Option<u64>,
    pub mig_enabled: Option<bool>,
}

/// What one vendor's probe found. A vendor whose driver is absent reports no GPUs and a reason;
/// that is a normal outcome, not an error.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuProbeReport {
    pub vendor: GpuVendor,
    pub driver_version: Option<String>,
    pub cuda_version: Option<String>,
    pub gpus: Vec<GpuObservation>,
    /// Why GPUs (or some of their fields) could not be read.
    pub notes: Vec<String>,
}

impl GpuProbeReport {
    pub fn unavailable(vendor: GpuVendor, reason: String) -> Self {
        Self {
            vendor,
            driver_version: None,
            cuda_version: None,
            gpus: Vec::new(),
            notes: vec![reason],
        }
    }
}

/// One GPU vendor's probe. Implementations never fail: what they cannot read they explain
/// in [`GpuProbeReport::notes`].
pub trait GpuProbe: Send + Sync {
    fn vendor(&self) -> GpuVendor;
    fn probe(&self) -> GpuProbeReport;
}

/// What the host said about itself, before normalisation.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct HostObservation {
    pub cpu_model_raw: String,
    pub cpu_cores: u32,
    pub ram_bytes: u64,
    pub os_name: String,
    pub os_version: String,
    pub kernel: String,
    pub arch: String,
}

/// Normalises raw observations into a profile. Pure: the same observations give the same
/// profile, and hardware described with different vendor or OS strings gives the same identity.
pub fn assemble(
    host: HostObservation,
    gpu_reports: Vec<GpuProbeReport>,
    container_runtime: ContainerRuntime,
    storage: Option<StorageMeasurement>,
    network: Vec<NetworkMeasurement>,
    taken_at_unix: u64,
    mut notes: Vec<String>,
) -> NodeProfile {
    let mut identities = Vec::new();
    let mut platforms = Vec::new();
    let mut health = Vec::new();
    let mut drivers = Vec::new();
    for report in gpu_reports {
        if let Some(version) = &report.driver_version {
            drivers.push(GpuDriverInfo {
                vendor: report.vendor,
                driver_version: version.trim().to_string(),
                cuda_version: report.cuda_version.clone(),
            });
        }
        for note in &report.notes {
            notes.push(format!("{}: {note}", report.vendor));
        }
        for gpu in report.gpus {
            let pci_bus_id = normalize::pci_bus_id(&gpu.pci_bus_id);
            identities.push(GpuIdentity {
                vendor: report.vendor,
                model: normalize::gpu_model(&gpu.raw_name),
                vram_mib: u32::try_from(gpu.vram_total_bytes >> 20).unwrap_or(u32::MAX),
                compute_capability: gpu
                    .compute_capability
                    .and_then(|(major, minor)| u16::try_from(major * 10 + minor).ok()),
                pci_bus_id: pci_bus_id.clone(),
            });
            platforms.push(GpuPlatform {
                pci_bus_id: pci_bus_id.clone(),
                raw_name: gpu.raw_name.clone(),
                uuid: gpu.uuid.clone(),
                ecc_enabled: gpu.ecc_enabled,
                mig_enabled: gpu.mig_enabled,
                power_limit_watts: gpu.power_limit_milliwatts.map(|mw| mw / 1000),
            });
            health.push(GpuHealth {
                pci_bus_id,
                temperature_celsius: gpu.temperature_celsius,
                ecc_uncorrected_volatile: gpu.ecc_uncorrected_volatile,
                ecc_uncorrected_aggregate: gpu.ecc_uncorrected_aggregate,
                ecc_corrected_volatile: gpu.ecc_corrected_volatile,
            });
        }
    }
    let identity = HardwareIdentity::new(
        identities,
        CpuIdentity {
            model: normalize::cpu_model(&host.cpu_model_raw),
            cores: u16::try_from(host.cpu_cores).unwrap_or(u16::MAX),
        },
        u32::try_from(host.ram_bytes >> 20).unwrap_or(u32::MAX),
        &host.arch,
    );
    let order = |id: &str| identity.gpus.iter().position(|g| g.pci_bus_id == id);
    platforms.sort_by_key(|p| order(&p.pci_bus_id));
    health.sort_by_key(|h| order(&h.pci_bus_id));
    NodeProfile::new(
        identity,
        PlatformInfo {
            os_name: host.os_name,
            os_version: host.os_version,
            kernel: host.kernel,
            cpu_model_raw: host.cpu_model_raw,
            gpu_drivers: drivers,
            gpus: platforms,
            container_runtime,
        },
        Measurements {
            taken_at_unix,
            gpus: health,
            storage,
            network,
            power: None,
        },
        notes,
    )
}

/// What to probe and how hard.
#[derive(Debug, Clone)]
pub struct ProbeConfig {
    /// Where checkpoints will be written; its storage is measured when set.
    pub checkpoint_dir: Option<PathBuf>,
    pub storage: storage::StorageProbeConfig,
    /// Another NVML library to load instead of the system's `libnvidia-ml.so.1`.
    pub nvml_lib: Option<PathBuf>,
    pub docker_endpoint: docker::DockerEndpoint,
    /// Network targets as (name, url), e.g. ("checkpoint_store", "https://..."), ("rpc", "...").
    pub network_targets: Vec<(String, String)>,
    /// The node's UPS, read over NUT.
    pub ups: Option<ups::UpsTarget>,
}

impl Default for ProbeConfig {
    fn default() -> Self {
        Self {
            checkpoint_dir: None,
            storage: storage::StorageProbeConfig::default(),
            nvml_lib: None,
            docker_endpoint: docker::DockerEndpoint::from_env(),
            network_targets: Vec::new(),
            ups: None,
        }
    }
}

/// Probes the whole node. Blocking parts (NVML, disk) run on the blocking pool.
///
/// Fails only when the checkpoint directory cannot be measured; everything else degrades into
/// notes, since an unusable checkpoint directory is a configuration error the operator must fix.
pub async fn probe_node(
    config: &ProbeConfig,
    taken_at_unix: u64,
) -> Result<NodeProfile, storage::StorageProbeError> {
    let blocking_config = config.clone();
    let blocking = tokio::task::spawn_blocking(move || {
        let host = host::observe();
        let nvml_probe = nvml::NvmlProbe::new(blocking_config.nvml_lib.clone());
        let gpu_reports = vec![nvml_probe.probe()];
        let runtime = docker::probe(&blocking_config.docker_endpoint);
        let storage = blocking_config
            .checkpoint_dir
            .as_ref()
            .map(|dir| storage::measure(dir, &blocking_config.storage))
            .transpose();
        (host, gpu_reports, runtime, storage)
    });
    let network = network::measure_all(&config.network_targets).await;
    let power = match &config.ups {
        Some(target) => Some(ups::read(target).await),
        None => None,
    };
    let (host, gpu_reports, runtime, storage) =
        blocking.await.map_err(|e| storage::StorageProbeError::Io {
            action: "run the probe",
            path: PathBuf::new(),
            source: std::io::Error::other(e.to_string()),
        })?;
    let storage = storage?;
    let mut notes = Vec::new();
    if storage.is_none() {
        notes.push("storage: no checkpoint directory given, bandwidth not measured".to_string());
    }
    let mut profile = assemble(
        host,
        gpu_reports,
        runtime,
        storage,
        network,
        taken_at_unix,
        notes,
    );
    profile.measurements.power = power;
    Ok(profile)
}
