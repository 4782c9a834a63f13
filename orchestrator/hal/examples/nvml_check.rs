//! The HAL's NVML reads on a real card: the probe report, the GPUs' PCI addresses in the
//! order a hardware challenge numbers them, and each GPU's attestation evidence over a
//! fixed nonce, verified as the scheduler verifies it.
//!
//! ```text
//! cargo build --release -p mcjs-hal --example nvml_check
//! nvml_check [--nvml PATH]
//! ```
//!
//! `bench/gpu-challenge.sh` runs it on a lent GPU machine beside the GPU backend's check.
//! Exits non-zero only when NVML cannot be read at all: a card without confidential
//! computing answers "not supported" for its evidence, which is printed, not an error.

use std::path::PathBuf;

use mcjs_challenge::attestation::{self, GpuEvidence};
use mcjs_hal::GpuProbe;
use mcjs_hal::probe::nvml::{NvmlProbe, gpu_attestation, gpu_pci_bus_ids};

const NONCE: [u8; 32] = [0x5a; 32];

fn main() {
    let mut lib: Option<PathBuf> = None;
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        match (flag.as_str(), it.next()) {
            ("--nvml", Some(path)) => lib = Some(path.into()),
            _ => {
                eprintln!("nvml_check: unknown argument {flag}; use --nvml PATH");
                std::process::exit(1);
            }
        }
    }

    let report = NvmlProbe::new(lib.clone()).probe();
    println!(
        "nvml: driver {:?}, cuda {:?}",
        report.driver_version, report.cuda_version
    );
    for gpu in &report.gpus {
        println!("  {gpu:?}");
    }
    for note in &report.notes {
        println!("  note: {note}");
    }

    let addresses = match gpu_pci_bus_ids(lib.as_deref()) {
        Ok(addresses) => addresses,
        Err(e) => {
            eprintln!("nvml_check: {e}");
            std::process::exit(1);
        }
    };
    println!("pci addresses (challenge order): {addresses:?}");

    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    for (gpu, address) in addresses.iter().enumerate() {
        match gpu_attestation(lib.as_deref(), address, NONCE) {
            Err(e) => println!("gpu {gpu} at {address}: attestation: {e}"),
            Ok(evidence) => {
                println!(
                    "gpu {gpu} at {address}: attestation report {} B, certificate chain {} B of PEM",
                    evidence.report.len(),
                    evidence.certificate_chain_pem.len()
                );
                let certificates =
                    match attestation::certificates_from_pem(&evidence.certificate_chain_pem) {
                        Ok(c) => c,
                        Err(e) => {
                            println!("  the chain does not parse: {e}");
                            continue;
                        }
                    };
                let evidence = GpuEvidence {
                    report: evidence.report,
                    certificates,
                };
                match attestation::verify(&evidence, &NONCE, now) {
                    Ok(attested) => println!("  verified: {attested:?}"),
                    Err(e) => println!("  not verified: {e}"),
                }
            }
        }
    }
}
