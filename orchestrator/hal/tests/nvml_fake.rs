//! The NVML probe against a fake libnvidia-ml loaded through nvml-wrapper's real loader.

mod common;

use mcjs_hal::NodeProfile;
use mcjs_hal::probe::nvml::{NvmlProbe, gpu_attestation, gpu_pci_bus_ids};
use mcjs_hal::probe::{GpuProbe, HostObservation, assemble, docker};
use mcjs_hal::profile::GpuVendor;

fn profile_from(report: mcjs_hal::probe::GpuProbeReport) -> NodeProfile {
    let host = HostObservation {
        cpu_model_raw: "AMD EPYC 7763 64-Core Processor".into(),
        cpu_cores: 64,
        ram_bytes: 512 << 30,
        os_name: "Ubuntu".into(),
        os_version: "22.04".into(),
        kernel: "5.15.0".into(),
        arch: "x86_64".into(),
    };
    let runtime = docker::probe(&docker::DockerEndpoint::Unix("/nonexistent".into()));
    assemble(
        host,
        vec![report],
        runtime,
        None,
        vec![],
        1_700_000_000,
        vec![],
    )
}

#[test]
fn an_a100_node_is_profiled_with_its_model_memory_and_compute_capability() {
    let dir = tempfile::tempdir().unwrap();
    let lib = common::fake_nvml(dir.path(), &[], common::A100_NODE);
    let report = NvmlProbe::new(Some(lib)).probe();
    assert_eq!(report.vendor, GpuVendor::Nvidia);
    assert_eq!(report.notes, Vec::<String>::new());
    assert_eq!(report.driver_version.as_deref(), Some("550.54.15"));
    assert_eq!(report.cuda_version.as_deref(), Some("12.4"));

    let profile = profile_from(report);
    let gpus = &profile.identity.gpus;
    assert_eq!(gpus.len(), 1);
    assert_eq!(gpus[0].model, "a100-sxm4-80gb");
    assert_eq!(gpus[0].vram_mib, 81920);
    assert_eq!(gpus[0].compute_capability, Some(80));
    assert_eq!(gpus[0].pci_bus_id, "0000:07:00.0");
    let platform = &profile.platform.gpus[0];
    assert_eq!(platform.raw_name, "NVIDIA A100-SXM4-80GB");
    assert_eq!(platform.ecc_enabled, Some(true));
    assert_eq!(platform.mig_enabled, Some(false));
    assert_eq!(platform.power_limit_watts, Some(400));
    let health = &profile.measurements.gpus[0];
    assert_eq!(health.temperature_celsius, Some(34));
    assert_eq!(health.ecc_uncorrected_volatile, Some(0));

    let summary = profile.chain_summary();
    assert_eq!(
        (
            summary.gpu_model.as_str(),
            summary.gpu_count,
            summary.vram_per_gpu_mib,
            summary.compute_capability
        ),
        ("a100-sxm4-80gb", 1, 81920, 80)
    );
}

#[test]
fn a_k80_on_driver_470_is_profiled_through_the_v1_memory_call() {
    let dir = tempfile::tempdir().unwrap();
    let lib = common::fake_nvml(dir.path(), &["FAKE_NVML_R470"], common::K80_NODE);
    let report = NvmlProbe::new(Some(lib)).probe();
    assert_eq!(
        report.notes,
        Vec::<String>::new(),
        "every gpu should be read"
    );
    assert_eq!(report.driver_version.as_deref(), Some("470.256.02"));
    assert_eq!(report.cuda_version.as_deref(), Some("11.4"));

    let profile = profile_from(report);
    let gpus = &profile.identity.gpus;
    assert_eq!(gpus.len(), 2);
    for gpu in gpus {
        assert_eq!(gpu.model, "k80");
        assert_eq!(gpu.vram_mib, 12 * 1024);
        assert_eq!(gpu.compute_capability, Some(37));
    }
    // Ordered by PCI address, not by driver index.
    assert_eq!(gpus[0].pci_bus_id, "0000:04:00.0");
    assert_eq!(profile.measurements.gpus[0].temperature_celsius, Some(52));
    assert_eq!(
        profile.measurements.gpus[1].ecc_uncorrected_aggregate,
        Some(2)
    );
    assert_eq!(
        profile.measurements.gpus[1].ecc_corrected_volatile,
        Some(11)
    );
    // Kepler has no MIG: the query answers NotSupported and the field stays empty.
    assert!(
        profile
            .platform
            .gpus
            .iter()
            .all(|g| g.mig_enabled.is_none())
    );

    let summary = profile.chain_summary();
    assert_eq!(summary.gpu_model, "k80");
    assert_eq!(summary.gpu_count, 2);
    assert_eq!(summary.vram_per_gpu_mib, 12288);
    assert_eq!(summary.compute_capability, 37);
}

#[test]
fn without_v1_or_v2_memory_queries_a_gpu_is_skipped_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let config = common::A100_NODE.replace("memory_mib 81920\n", "");
    let lib = common::fake_nvml(dir.path(), &[], &config);
    let report = NvmlProbe::new(Some(lib)).probe();
    assert!(report.gpus.is_empty());
    assert_eq!(report.notes.len(), 1);
    assert!(
        report.notes[0].contains("gpu 0 skipped: cannot read its memory"),
        "{:?}",
        report.notes
    );
}

#[test]
fn optional_queries_the_board_does_not_support_degrade_to_none() {
    let dir = tempfile::tempdir().unwrap();
    let config = "driver 535.1\ngpu\nname NVIDIA GeForce RTX 4090\nmemory_mib 24564\ncc 8 9\npci 00000000:01:00.0\n";
    let lib = common::fake_nvml(dir.path(), &[], config);
    let report = NvmlProbe::new(Some(lib)).probe();
    assert_eq!(report.cuda_version, None);
    let gpu = &report.gpus[0];
    assert_eq!(gpu.compute_capability, Some((8, 9)));
    assert_eq!(
        (
            gpu.ecc_enabled,
            gpu.ecc_uncorrected_volatile,
            gpu.temperature_celsius,
            gpu.power_limit_milliwatts,
            gpu.mig_enabled,
            gpu.uuid.clone()
        ),
        (None, None, None, None, None, None)
    );
}

#[test]
fn no_nvml_library_means_no_gpus_and_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("libnvidia-ml.so.1");
    let report = NvmlProbe::new(Some(missing.clone())).probe();
    assert!(report.gpus.is_empty());
    assert_eq!(report.driver_version, None);
    assert_eq!(report.notes.len(), 1);
    assert!(
        report.notes[0].starts_with("no nvidia gpus: cannot load the nvml library"),
        "{}",
        report.notes[0]
    );
    assert!(report.notes[0].contains(&missing.display().to_string()));

    let profile = profile_from(report);
    assert!(profile.identity.gpus.is_empty());
    assert_eq!(profile.chain_summary().gpu_count, 0);
    assert!(
        profile
            .notes
            .iter()
            .any(|n| n.starts_with("nvidia: no nvidia gpus"))
    );
}

#[test]
fn a_driver_that_is_not_loaded_means_no_gpus_and_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let lib = common::fake_nvml(dir.path(), &[], "init_error 9\n");
    let report = NvmlProbe::new(Some(lib)).probe();
    assert!(report.gpus.is_empty());
    assert_eq!(
        report.notes,
        vec!["no nvidia gpus: the nvidia driver is not loaded".to_string()]
    );
}

#[test]
fn a_library_without_init_is_reported_not_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let lib = common::fake_nvml(dir.path(), &["FAKE_NVML_NO_INIT"], common::A100_NODE);
    let report = NvmlProbe::new(Some(lib)).probe();
    assert!(report.gpus.is_empty());
    assert!(
        report.notes[0].contains("nvmlInit_v2"),
        "{}",
        report.notes[0]
    );
}

#[test]
fn a_library_without_shutdown_is_probed_without_panicking() {
    let dir = tempfile::tempdir().unwrap();
    let lib = common::fake_nvml(dir.path(), &["FAKE_NVML_NO_SHUTDOWN"], common::A100_NODE);
    let report = NvmlProbe::new(Some(lib)).probe();
    assert_eq!(report.gpus.len(), 1);
    assert_eq!(report.gpus[0].vram_total_bytes, 81920 << 20);
}

/// The attestation entry points through the real loader: the fake hands out NVIDIA's real
/// GH100 report and chain whatever nonce it is asked for, as a node replaying a genuine card
/// would. The evidence verifies for the nonce it was made for and is refused for any other.
/// NVML numbers the cards out of PCI order here: the card is found by its address, and the
/// challenge's order is the addresses'.
#[test]
fn a_gpus_attestation_evidence_is_read_through_nvml_and_a_replay_is_refused() {
    let fixtures =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../challenge/tests/fixtures/nvidia");
    let config = format!(
        "driver 550.90.07\ngpu\nname NVIDIA A100-SXM4-80GB\nmemory_mib 81920\n\
         pci 00000000:02:00.0\ngpu\nname NVIDIA H100 80GB HBM3\nmemory_mib 81559\n\
         pci 00000000:01:00.0\nattestation_report {}\nattestation_chain {}\n",
        fixtures.join("gh100-attestation-report.hex").display(),
        fixtures.join("gh100-cert-chain.pem").display(),
    );
    let dir = tempfile::tempdir().unwrap();
    let lib = common::fake_nvml(dir.path(), &[], &config);
    let made_for: [u8; 32] = (0..32)
        .map(|i| {
            u8::from_str_radix(
                &"931d8dd0add203ac3d8b4fbde75e115278eefcdceac5b87671a748f32364dfcb"
                    [2 * i..2 * i + 2],
                16,
            )
            .unwrap()
        })
        .collect::<Vec<_>>()
        .try_into()
        .unwrap();
    let now = 1_796_083_200; // 2026-12-01

    assert_eq!(
        gpu_pci_bus_ids(Some(&lib)).unwrap(),
        ["0000:01:00.0", "0000:02:00.0"],
        "the challenge's order is the cards' addresses'"
    );
    let read = |pci: &str, nonce| {
        let evidence = gpu_attestation(Some(&lib), pci, nonce)?;
        Ok::<_, String>(mcjs_challenge::attestation::GpuEvidence {
            report: evidence.report,
            certificates: mcjs_challenge::attestation::certificates_from_pem(
                &evidence.certificate_chain_pem,
            )
            .map_err(|e| e.to_string())?,
        })
    };
    let evidence = read("0000:01:00.0", made_for).expect("the H100 attests");
    assert_eq!(evidence.certificates.len(), 5);
    let attested = mcjs_challenge::attestation::verify(&evidence, &made_for, now).unwrap();
    assert_eq!(
        (attested.chip.as_str(), attested.device_id.as_str()),
        ("GH100", "48B02D92494BADF4")
    );

    let fresh = [7u8; 32];
    let replayed = read("00000000:01:00.0", fresh).expect("the fake answers any nonce");
    assert_eq!(
        mcjs_challenge::attestation::verify(&replayed, &fresh, now),
        Err(mcjs_challenge::attestation::AttestationError::Nonce)
    );

    let none = read("0000:02:00.0", fresh).unwrap_err();
    assert!(
        none.contains("gpu 0000:02:00.0: no attestation report"),
        "{none}"
    );
    let absent = read("0000:03:00.0", fresh).unwrap_err();
    assert!(absent.contains("no gpu at pci 0000:03:00.0"), "{absent}");
}
