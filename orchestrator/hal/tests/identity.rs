//! Same hardware, same identity: whatever strings the vendor or the OS used to describe it.

mod common;

use mcjs_hal::probe::{GpuObservation, GpuProbeReport, HostObservation, assemble};
use mcjs_hal::profile::{ContainerRuntime, GpuVendor, NodeProfile};

fn runtime() -> ContainerRuntime {
    ContainerRuntime {
        endpoint: "unix:///var/run/docker.sock".into(),
        reachable: true,
        version: Some("27.3.1".into()),
        api_version: Some("1.47".into()),
        error: None,
    }
}

fn profile(
    host: HostObservation,
    driver: &str,
    gpus: Vec<GpuObservation>,
    taken_at: u64,
) -> NodeProfile {
    let report = GpuProbeReport {
        vendor: GpuVendor::Nvidia,
        driver_version: Some(driver.into()),
        cuda_version: None,
        gpus,
        notes: vec![],
    };
    assemble(
        host,
        vec![report],
        runtime(),
        None,
        vec![],
        taken_at,
        vec![],
    )
}

fn gpu(name: &str, pci: &str, temp: u32) -> GpuObservation {
    GpuObservation {
        raw_name: name.into(),
        vram_total_bytes: 81920 << 20,
        compute_capability: Some((8, 0)),
        pci_bus_id: pci.into(),
        temperature_celsius: Some(temp),
        ..Default::default()
    }
}

fn ubuntu_host() -> HostObservation {
    HostObservation {
        cpu_model_raw: "Intel(R) Xeon(R) Platinum 8358 CPU @ 2.60GHz".into(),
        cpu_cores: 128,
        ram_bytes: 1024 * 1024 * 1024 * 1024 + 123 * 1024, // a few KiB of slack below a MiB
        os_name: "Ubuntu".into(),
        os_version: "22.04".into(),
        kernel: "5.15.0-105-generic".into(),
        arch: "x86_64".into(),
    }
}

#[test]
fn two_descriptions_of_the_same_node_normalise_to_one_identity() {
    let on_ubuntu = profile(
        ubuntu_host(),
        "550.54.15",
        vec![
            gpu("NVIDIA A100-SXM4-80GB", "00000000:07:00.0", 33),
            gpu("NVIDIA A100-SXM4-80GB", "00000000:0B:00.0", 35),
        ],
        1_700_000_000,
    );
    // Another distribution and driver: trademark-free CPU string, the pre-"NVIDIA" naming with
    // underscores, short PCI domain, GPUs enumerated in another order, other temperatures.
    let on_rocky = profile(
        HostObservation {
            cpu_model_raw: "Intel Xeon Platinum 8358 Processor".into(),
            os_name: "Rocky Linux".into(),
            os_version: "9.3".into(),
            kernel: "5.14.0-362.el9.x86_64".into(),
            arch: "X86_64".into(),
            ..ubuntu_host()
        },
        "535.161.08",
        vec![
            gpu("A100_SXM4_80GB", "0000:0b:00.0", 61),
            gpu("a100 sxm4 80gb", "0000:07:00.0", 58),
        ],
        1_800_000_000,
    );

    assert_eq!(on_ubuntu.identity, on_rocky.identity);
    assert_eq!(on_ubuntu.fingerprint, on_rocky.fingerprint);
    assert_eq!(on_ubuntu.chain_summary(), on_rocky.chain_summary());
    assert_eq!(on_ubuntu.identity.cpu.model, "intel-xeon-platinum-8358");
    assert_eq!(on_ubuntu.identity.gpus[1].pci_bus_id, "0000:0b:00.0");
    // What differs is kept, but outside the identity.
    assert_ne!(on_ubuntu.platform, on_rocky.platform);
    assert_ne!(on_ubuntu.measurements, on_rocky.measurements);
    assert_eq!(on_rocky.measurements.gpus[0].pci_bus_id, "0000:07:00.0");
    assert_eq!(on_rocky.measurements.gpus[0].temperature_celsius, Some(58));
}

#[test]
fn different_hardware_has_a_different_fingerprint() {
    let base = profile(
        ubuntu_host(),
        "550",
        vec![gpu("NVIDIA A100-SXM4-80GB", "0000:07:00.0", 30)],
        1,
    );
    let mut smaller = gpu("NVIDIA A100-SXM4-40GB", "0000:07:00.0", 30);
    smaller.vram_total_bytes = 40960 << 20;
    let other = profile(ubuntu_host(), "550", vec![smaller], 1);
    assert_ne!(base.fingerprint, other.fingerprint);
    let moved = profile(
        ubuntu_host(),
        "550",
        vec![gpu("NVIDIA A100-SXM4-80GB", "0000:08:00.0", 30)],
        1,
    );
    assert_ne!(base.fingerprint, moved.fingerprint);
}

#[test]
fn the_fingerprint_is_the_sha256_of_the_identity_and_round_trips_through_json() {
    let p = profile(
        ubuntu_host(),
        "550",
        vec![gpu("NVIDIA A100-SXM4-80GB", "0000:07:00.0", 30)],
        1,
    );
    assert_eq!(p.fingerprint.len(), 64);
    let json = serde_json::to_string(&p).unwrap();
    let back: NodeProfile = serde_json::from_str(&json).unwrap();
    assert_eq!(back, p);
    assert_eq!(back.identity.fingerprint(), p.fingerprint);
}

#[test]
fn the_chain_summary_registers_the_largest_group_and_caps_the_model_length() {
    let mut long = gpu(
        "NVIDIA Some Very Long Accelerator Model Name With Many Words",
        "0000:01:00.0",
        30,
    );
    long.compute_capability = Some((9, 0));
    let mixed = profile(
        ubuntu_host(),
        "550",
        vec![
            long,
            gpu("NVIDIA A100-SXM4-80GB", "0000:02:00.0", 30),
            gpu("NVIDIA A100-SXM4-80GB", "0000:03:00.0", 30),
        ],
        1,
    );
    let s = mixed.chain_summary();
    assert_eq!(
        (s.gpu_model.as_str(), s.gpu_count, s.compute_capability),
        ("a100-sxm4-80gb", 2, 80)
    );
    assert_eq!(s.cpu_cores, 128);
    assert_eq!(s.ram_mib, 1024 * 1024);

    let only_long = profile(
        ubuntu_host(),
        "550",
        vec![gpu(
            "NVIDIA Some Very Long Accelerator Model Name With Many Words",
            "0000:01:00.0",
            30,
        )],
        1,
    );
    let s = only_long.chain_summary();
    assert_eq!(s.gpu_model.len(), 32);
    assert_eq!(s.gpu_model, "some-very-long-accelerator-model");
    // A cut that lands on a separator drops it: the program refuses a
    // model name ending in '-'.
    let cut_on_separator = profile(
        ubuntu_host(),
        "550",
        vec![gpu(
            "NVIDIA GeForce RTX 2070 Super with Max-Q Design",
            "0000:01:00.0",
            30,
        )],
        1,
    );
    let s = cut_on_separator.chain_summary();
    assert_eq!(s.gpu_model, "geforce-rtx-2070-super-with-max");
}
