//! NVIDIA GPUs through NVML (`nvml-wrapper`, which loads the library at run time).
//!
//! nvml-wrapper resolves every symbol when it loads the library but reports a missing one
//! only when it is called, so each optional query (ECC, power, MIG) degrades to `None` on any
//! failure. Two cases need care beyond that:
//! - drivers before R510 (the last for Kepler boards such as the K80 is R470) have no
//!   `nvmlDeviceGetMemoryInfo_v2`, the only one the wrapper calls; the v1 entry point is
//!   called directly then;
//! - dropping an `Nvml` whose library lacks `nvmlShutdown` panics, so such a handle is leaked.

use std::ffi::OsStr;
use std::mem::{self, ManuallyDrop};
use std::path::PathBuf;

use nvml_wrapper::enum_wrappers::device::{EccCounter, MemoryError, TemperatureSensor};
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};

use super::{GpuObservation, GpuProbe, GpuProbeReport};
use crate::profile::GpuVendor;

/// NVIDIA probe; `lib_path` overrides the system `libnvidia-ml.so.1`.
#[derive(Debug, Clone, Default)]
pub struct NvmlProbe {
    lib_path: Option<PathBuf>,
}

impl NvmlProbe {
    pub fn new(lib_path: Option<PathBuf>) -> Self {
        Self { lib_path }
    }
}

impl GpuProbe for NvmlProbe {
    fn vendor(&self) -> GpuVendor {
        GpuVendor::Nvidia
    }

    fn probe(&self) -> GpuProbeReport {
        let mut builder = Nvml::builder();
        if let Some(path) = &self.lib_path {
            builder.lib_path(path.as_os_str());
        }
        let library = self.lib_path.as_deref().map_or_else(
            || "libnvidia-ml.so.1".to_string(),
            |p| p.display().to_string(),
        );
        let nvml = match builder.init() {
            Ok(nvml) => ManuallyDrop::new(nvml),
            Err(err) => {
                return GpuProbeReport::unavailable(
                    GpuVendor::Nvidia,
                    init_failure(&library, &err),
                );
            }
        };
        let report = read_all(&nvml);
        if nvml.lib().nvmlShutdown.is_ok() {
            drop(ManuallyDrop::into_inner(nvml));
        }
        report
    }
}

/// One GPU's attestation evidence as NVML hands it out (Hopper and later, with a driver that
/// offers it): the report the GPU made for a nonce, and its attestation certificate chain
/// (PEM). `mcjs_challenge::attestation` verifies it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttestationEvidence {
    pub report: Vec<u8>,
    pub certificate_chain_pem: Vec<u8>,
}

/// Runs `work` on an initialised NVML (`lib_path` overrides the system library), shutting it
/// down after where the library can.
fn with_nvml<T>(
    lib_path: Option<&std::path::Path>,
    work: impl FnOnce(&Nvml) -> Result<T, String>,
) -> Result<T, String> {
    let mut builder = Nvml::builder();
    if let Some(path) = lib_path {
        builder.lib_path(path.as_os_str());
    }
    let library = lib_path.map_or_else(
        || "libnvidia-ml.so.1".to_string(),
        |p| p.display().to_string(),
    );
    let nvml = ManuallyDrop::new(builder.init().map_err(|e| init_failure(&library, &e))?);
    let result = work(&nvml);
    if nvml.lib().nvmlShutdown.is_ok() {
        drop(ManuallyDrop::into_inner(nvml));
    }
    result
}

/// The PCI address of each GPU NVML sees, in the canonical form
/// ([`crate::normalize::pci_bus_id`]), sorted: the order of a node's GPUs in its profile and
/// in its hardware challenge (GPU `i` of a challenge is the `i`-th here, whatever order CUDA
/// or NVML number them in).
pub fn gpu_pci_bus_ids(lib_path: Option<&std::path::Path>) -> Result<Vec<String>, String> {
    with_nvml(lib_path, |nvml| {
        let mut ids: Vec<String> = addressed_devices(nvml)?
            .into_iter()
            .map(|(address, _)| address)
            .collect();
        ids.sort();
        Ok(ids)
    })
}

/// Every GPU NVML sees, opened once, with its canonical PCI address.
fn addressed_devices(nvml: &Nvml) -> Result<Vec<(String, Device<'_>)>, String> {
    let count = nvml
        .device_count()
        .map_err(|e| format!("cannot count devices ({e})"))?;
    (0..count)
        .map(|index| {
            let device = nvml
                .device_by_index(index)
                .map_err(|e| format!("gpu {index}: cannot open it ({e})"))?;
            let info = device
                .pci_info()
                .map_err(|e| format!("gpu {index}: cannot read its pci address ({e})"))?;
            Ok((crate::normalize::pci_bus_id(&info.bus_id), device))
        })
        .collect()
}

/// Asks the GPU at PCI address `pci_bus_id` (any form [`crate::normalize::pci_bus_id`]
/// reads) for its attestation report over `nonce` and its certificate chain: the card that
/// answered a challenge is found by its address, not by an index another library may number
/// differently. Errors name what failed; a GPU or driver without attestation answers "not
/// supported".
pub fn gpu_attestation(
    lib_path: Option<&std::path::Path>,
    pci_bus_id: &str,
    nonce: [u8; 32],
) -> Result<AttestationEvidence, String> {
    let wanted = crate::normalize::pci_bus_id(pci_bus_id);
    with_nvml(lib_path, |nvml| {
        let device = addressed_devices(nvml)?
            .into_iter()
            .find_map(|(address, device)| (address == wanted).then_some(device))
            .ok_or_else(|| format!("no gpu at pci {wanted}"))?;
        let report = device
            .confidential_compute_gpu_attestation_report(nonce)
            .map_err(|e| format!("gpu {wanted}: no attestation report ({e})"))?;
        let chain = device
            .confidential_compute_gpu_certificate()
            .map_err(|e| format!("gpu {wanted}: no attestation certificate ({e})"))?;
        Ok(AttestationEvidence {
            report: report.attestation_report,
            certificate_chain_pem: chain.attestation_cert_chain,
        })
    })
}

fn init_failure(library: &str, err: &NvmlError) -> String {
    match err {
        NvmlError::LibloadingError(e) => {
            format!("no nvidia gpus: cannot load the nvml library {library} ({e})")
        }
        NvmlError::FailedToLoadSymbol(sym) => {
            format!("no nvidia gpus: the nvml library {library} is unusable ({sym})")
        }
        NvmlError::DriverNotLoaded => "no nvidia gpus: the nvidia driver is not loaded".to_string(),
        other => format!("no nvidia gpus: nvml failed to initialise ({other})"),
    }
}

fn read_all(nvml: &Nvml) -> GpuProbeReport {
    let mut notes = Vec::new();
    let driver_version = nvml.sys_driver_version().ok();
    let cuda_version = nvml
        .sys_cuda_driver_version()
        .ok()
        .map(|v| format!("{}.{}", v / 1000, (v % 1000) / 10));
    let count = match nvml.device_count() {
        Ok(n) => n,
        Err(e) => {
            notes.push(format!("cannot count devices ({e})"));
            0
        }
    };
    let mut gpus = Vec::new();
    for index in 0..count {
        match nvml.device_by_index(index) {
            Ok(device) => match observe(nvml, &device) {
                Ok(gpu) => gpus.push(gpu),
                Err(e) => notes.push(format!("gpu {index} skipped: {e}")),
            },
            Err(e) => notes.push(format!("gpu {index} skipped: cannot open it ({e})")),
        }
    }
    if count == 0 && notes.is_empty() {
        notes.push("no nvidia gpus: nvml reports no devices".to_string());
    }
    GpuProbeReport {
        vendor: GpuVendor::Nvidia,
        driver_version,
        cuda_version,
        gpus,
        notes,
    }
}

/// Name, memory and PCI address are required (a GPU without them cannot be scheduled);
/// everything else is optional.
fn observe(nvml: &Nvml, device: &Device<'_>) -> Result<GpuObservation, String> {
    let raw_name = device
        .name()
        .map_err(|e| format!("cannot read its name ({e})"))?;
    let vram_total_bytes = memory_total(nvml, device)?;
    let pci_bus_id = device
        .pci_info()
        .map(|p| p.bus_id)
        .map_err(|e| format!("cannot read its pci address ({e})"))?;
    let ecc_enabled = device.is_ecc_enabled().ok().map(|m| m.currently_enabled);
    // Counters are meaningful only with ECC on; drivers answer NotSupported otherwise.
    let counter = |error, counter| {
        ecc_enabled
            .filter(|on| *on)
            .and_then(|_| device.total_ecc_errors(error, counter).ok())
    };
    Ok(GpuObservation {
        raw_name,
        uuid: device.uuid().ok(),
        vram_total_bytes,
        compute_capability: device
            .cuda_compute_capability()
            .ok()
            .and_then(|c| Some((u32::try_from(c.major).ok()?, u32::try_from(c.minor).ok()?))),
        pci_bus_id,
        temperature_celsius: device.temperature(TemperatureSensor::Gpu).ok(),
        power_limit_milliwatts: device
            .enforced_power_limit()
            .or_else(|_| device.power_management_limit())
            .ok(),
        ecc_enabled,
        ecc_uncorrected_volatile: counter(MemoryError::Uncorrected, EccCounter::Volatile),
        ecc_uncorrected_aggregate: counter(MemoryError::Uncorrected, EccCounter::Aggregate),
        ecc_corrected_volatile: counter(MemoryError::Corrected, EccCounter::Volatile),
        mig_enabled: device
            .mig_mode()
            .ok()
            .map(|m| m.current == nvml_wrapper_sys::bindings::NVML_DEVICE_MIG_ENABLE),
    })
}

fn memory_total(nvml: &Nvml, device: &Device<'_>) -> Result<u64, String> {
    match device.memory_info() {
        Ok(info) => Ok(info.total),
        Err(NvmlError::FailedToLoadSymbol(_)) => {
            let Ok(v1) = nvml.lib().nvmlDeviceGetMemoryInfo.as_ref() else {
                return Err(
                    "cannot read its memory: the library has no nvmlDeviceGetMemoryInfo".into(),
                );
            };
            // SAFETY: the handle comes from this library instance, which outlives the call, and
            // the out-parameter is a zeroed struct of the layout the v1 entry point writes.
            unsafe {
                let mut info: nvml_wrapper_sys::bindings::nvmlMemory_t = mem::zeroed();
                let code = v1(device.handle(), &mut info);
                if code == nvml_wrapper_sys::bindings::nvmlReturn_enum_NVML_SUCCESS {
                    Ok(info.total)
                } else {
                    Err(format!("cannot read its memory (nvml error {code})"))
                }
            }
        }
        Err(e) => Err(format!("cannot read its memory ({e})")),
    }
}

/// Loads an NVML library and reports what it says; `path` as given to the loader.
pub fn probe_library(path: &OsStr) -> GpuProbeReport {
    NvmlProbe::new(Some(PathBuf::from(path))).probe()
}
