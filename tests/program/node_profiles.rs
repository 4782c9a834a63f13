//! Node profiles the program holds: a normalised GPU model name (the
//! program's copy of `mcjs_spec::gpu::normalize_model`'s rule, held to it
//! here), 1 to 16 GPUs, sizes within bounds, readiness at most 100; refused
//! at registration and at update alike.

use mcjs::errors::McjsError;
use mcjs::instructions::*;
use mcjs::state::*;
use mcjs_client::{ix, pda};
use mcjs_spec::gpu::normalize_model;
use solana_keypair::Keypair;
use solana_signer::Signer;

use crate::harness::*;

/// A profile change, what it is called, and the error it must meet.
fn malformed_profiles() -> Vec<(&'static str, HardwareProfile, McjsError)> {
    let with_model = |model: &str| HardwareProfile {
        gpu_model: model.into(),
        ..a100_80gb()
    };
    vec![
        (
            "a raw NVML name",
            with_model("NVIDIA  RTX_A6000"),
            McjsError::InvalidGpuModel,
        ),
        ("an empty model", with_model(""), McjsError::InvalidGpuModel),
        (
            "a double dash",
            with_model("a100--x"),
            McjsError::InvalidGpuModel,
        ),
        (
            "a leading dash",
            with_model("-a100"),
            McjsError::InvalidGpuModel,
        ),
        (
            "a trailing dash",
            with_model("a100-"),
            McjsError::InvalidGpuModel,
        ),
        ("upper case", with_model("A100"), McjsError::InvalidGpuModel),
        (
            "33 bytes",
            with_model(&"a".repeat(33)),
            McjsError::InvalidGpuModel,
        ),
        (
            "no GPU",
            HardwareProfile {
                gpu_count: 0,
                ..a100_80gb()
            },
            McjsError::InvalidHardwareProfile,
        ),
        (
            "17 GPUs",
            HardwareProfile {
                gpu_count: 17,
                ..a100_80gb()
            },
            McjsError::InvalidHardwareProfile,
        ),
        (
            "no VRAM",
            HardwareProfile {
                vram_per_gpu_mib: 0,
                ..a100_80gb()
            },
            McjsError::InvalidHardwareProfile,
        ),
        (
            "a compute capability of 0",
            HardwareProfile {
                compute_capability: 0,
                ..a100_80gb()
            },
            McjsError::InvalidHardwareProfile,
        ),
    ]
}

#[test]
fn malformed_node_profiles_are_refused_at_registration_and_nothing_changes() {
    let mut env = Env::new();
    let provider = env.provider_with_nodes(200 * USDC, &[], USDC);
    let before = env.snapshot();
    let register = |hardware: HardwareProfile, readiness: u8| {
        ix::register_node(
            &provider.key(),
            RegisterNodeArgs {
                index: 0,
                operator: Keypair::new().pubkey(),
                hardware,
                readiness,
                price_per_gpu_hour: USDC,
            },
        )
    };
    for (what, hardware, expected) in malformed_profiles() {
        let outcome = env.send(&[register(hardware, 90)], &[&provider.wallet.kp]);
        assert!(outcome.is_err(), "{what} was accepted");
        expect_error(outcome, expected);
    }
    expect_error(
        env.send(&[register(a100_80gb(), 101)], &[&provider.wallet.kp]),
        McjsError::InvalidReadiness,
    );
    env.assert_unchanged(&before);
    assert!(env.account(&pda::node(&provider.pda, 0)).is_none());
    assert_eq!(env.provider(&provider.pda).node_count, 0);

    // The edges themselves are accepted.
    let edge = HardwareProfile {
        gpu_model: format!("rtx-a6000{}", "x".repeat(32 - 9)),
        gpu_count: 16,
        ..a100_80gb()
    };
    env.send(&[register(edge.clone(), 100)], &[&provider.wallet.kp])
        .unwrap();
    assert_eq!(env.node(&pda::node(&provider.pda, 0)).hardware, edge);
}

#[test]
fn malformed_node_profiles_are_refused_at_update_by_the_wallet_or_the_operator() {
    let mut env = Env::new();
    let provider = env.provider_with_nodes(200 * USDC, &[a100_80gb()], USDC);
    let operator = provider.operator(0).insecure_clone();
    let before = env.snapshot();
    for signer in [&provider.wallet.kp, &operator] {
        for (what, hardware, expected) in malformed_profiles() {
            let update = ix::update_node(
                &signer.pubkey(),
                &provider.pda,
                0,
                UpdateNodeArgs {
                    hardware: Some(hardware),
                    ..Default::default()
                },
            );
            let outcome = env.send(&[update], &[signer]);
            assert!(outcome.is_err(), "{what} was accepted");
            expect_error(outcome, expected);
        }
        let update = ix::update_node(
            &signer.pubkey(),
            &provider.pda,
            0,
            UpdateNodeArgs {
                readiness: Some(101),
                ..Default::default()
            },
        );
        expect_error(env.send(&[update], &[signer]), McjsError::InvalidReadiness);
    }
    env.assert_unchanged(&before);
    assert_eq!(env.node(&provider.nodes[0]).hardware, a100_80gb());
}

/// GPU names as NVML reports them.
const NVML_NAMES: &[&str] = &[
    "NVIDIA H200",
    "NVIDIA H100 80GB HBM3",
    "NVIDIA H100 PCIe",
    "Tesla V100-SXM2-32GB",
    "Tesla K80",
    "Tesla T4",
    "NVIDIA A100-SXM4-80GB",
    "NVIDIA A100-PCIE-40GB",
    "NVIDIA A10G",
    "NVIDIA L40S",
    "NVIDIA GeForce RTX 4090",
    "NVIDIA GeForce RTX 3060 Laptop GPU",
    "NVIDIA GeForce GTX 1080 Ti",
    "Quadro RTX 8000",
    "Quadro P4000 with Max-Q Design",
    "NVIDIA RTX A6000",
    "NVIDIA RTX 6000 Ada Generation",
    "NVIDIA GH200 480GB",
];

/// Real names whose normal form is longer than the program holds
/// ([`MAX_GPU_MODEL_LEN`]): refused for their length alone.
const NVML_NAMES_LONGER_THAN_THE_PROGRAM_HOLDS: &[&str] = &[
    "Quadro RTX 5000 with Max-Q Design",
    "NVIDIA GeForce RTX 2070 Super with Max-Q Design",
    "NVIDIA RTX PRO 6000 Blackwell Server Edition",
];

/// Inputs that stress the rule: spacing, case, separators, lengths.
const TRICKY_NAMES: &[&str] = &[
    "NVIDIA  RTX_A6000",
    "  nvidia   a100  ",
    "NVIDIA",
    "nvidia ",
    "Tesla",
    "",
    " ",
    "_",
    "a100--x",
    "a100__x",
    "-a100",
    "a100-",
    "a100.",
    ".a100",
    "a100+",
    "mi300x",
    "gb200-nvl72",
    "rtx-4090+",
    "h100-sxm5-80gb",
    "A100",
    "a100 (80gb)",
    "a100/80gb",
    "ä100",
    "NVIDIA Tesla V100",
    "tesla nvidia v100",
    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
];

#[test]
fn the_program_and_the_spec_agree_on_normalised_gpu_model_names() {
    // Every name the program accepts is already normalised: the spec
    // leaves it as it is.
    for name in NVML_NAMES.iter().chain(TRICKY_NAMES) {
        for candidate in [name.to_string(), normalize_model(name)] {
            if is_normalized_model(&candidate) {
                assert_eq!(
                    normalize_model(&candidate),
                    candidate,
                    "the program accepts {candidate:?}, which the spec would change"
                );
            }
        }
    }
    // Every real GPU, once normalised, is a name the program holds.
    for name in NVML_NAMES {
        let normalised = normalize_model(name);
        assert!(
            is_normalized_model(&normalised),
            "the program refuses {normalised:?}, the normal form of {name:?}"
        );
    }
    // Too long for the account: cut to MAX_GPU_MODEL_LEN bytes, a name is
    // accepted only once a '-' left at the cut is dropped too (a plain cut
    // of "geforce-rtx-2070-super-with-max-q-design" ends in '-').
    for name in NVML_NAMES_LONGER_THAN_THE_PROGRAM_HOLDS {
        let normalised = normalize_model(name);
        assert!(normalised.len() > MAX_GPU_MODEL_LEN, "{name:?}");
        assert!(!is_normalized_model(&normalised), "{name:?}");
        let cut = normalised[..MAX_GPU_MODEL_LEN].trim_end_matches('-');
        assert!(is_normalized_model(cut), "{cut:?}");
    }
    assert!(!is_normalized_model(
        &normalize_model("NVIDIA GeForce RTX 2070 Super with Max-Q Design")[..MAX_GPU_MODEL_LEN]
    ));
    // Spot checks of the normal forms the fleet registers under.
    for (raw, normal) in [
        ("NVIDIA H200", "h200"),
        ("Tesla V100-SXM2-32GB", "v100-sxm2-32gb"),
        ("NVIDIA A100-SXM4-80GB", "a100-sxm4-80gb"),
        ("NVIDIA GeForce RTX 4090", "geforce-rtx-4090"),
        ("Quadro RTX 8000", "quadro-rtx-8000"),
        ("NVIDIA RTX A6000", "rtx-a6000"),
        ("NVIDIA  RTX_A6000", "rtx-a6000"),
    ] {
        assert_eq!(normalize_model(raw), normal);
        assert!(is_normalized_model(normal));
    }
    // What the program refuses outright.
    for refused in [
        "", "A100", "a100--x", "-a100", "a100-", "a100 x", "a100_x", "ä100",
    ] {
        assert!(!is_normalized_model(refused), "{refused:?}");
    }
    assert!(is_normalized_model(&"x".repeat(32)));
    assert!(!is_normalized_model(&"x".repeat(33)));
}

#[test]
fn the_program_and_the_scheduler_agree_on_node_bounds() {
    use mcjs_spec::node_limits::{self as limits, NodeSizes};
    // The program's copy of each bound equals the scheduler's.
    assert_eq!(MAX_GPU_COUNT, limits::MAX_NODE_GPUS);
    assert_eq!(MAX_VRAM_PER_GPU_MIB, limits::MAX_VRAM_PER_GPU_MIB);
    assert_eq!(MAX_COMPUTE_CAPABILITY, limits::MAX_COMPUTE_CAPABILITY_SM);
    assert_eq!(MAX_RAM_MIB, limits::MAX_RAM_MIB);
    assert_eq!(MAX_DISK_GIB, limits::MAX_DISK_GIB);
    assert_eq!(
        MAX_CHECKPOINT_WRITE_MIBPS,
        limits::MAX_CHECKPOINT_WRITE_MIBPS
    );
    assert_eq!(MAX_READINESS, limits::MAX_READINESS);
    // And on a table of profiles at and past each edge: whatever the program
    // registers, the scheduler can place on (the program also refuses zeros
    // the scheduler tolerates).
    let base = a100_80gb();
    let mut table = vec![base.clone()];
    for gpus in [0, 1, 16, 17, 255] {
        table.push(HardwareProfile {
            gpu_count: gpus,
            ..base.clone()
        });
    }
    for vram in [0, 1, 1 << 20, (1 << 20) + 1, u32::MAX] {
        table.push(HardwareProfile {
            vram_per_gpu_mib: vram,
            ..base.clone()
        });
    }
    for cc in [0, 9, 10, 999, 1000, u16::MAX] {
        table.push(HardwareProfile {
            compute_capability: cc,
            ..base.clone()
        });
    }
    for ram in [0, 1, 64 << 20, (64 << 20) + 1, u32::MAX] {
        table.push(HardwareProfile {
            ram_mib: ram,
            ..base.clone()
        });
    }
    for disk in [0, 1 << 20, (1 << 20) + 1, u32::MAX] {
        table.push(HardwareProfile {
            disk_gib: disk,
            ..base.clone()
        });
    }
    for bw in [0, 1 << 20, (1 << 20) + 1, u32::MAX] {
        table.push(HardwareProfile {
            checkpoint_write_mibps: bw,
            ..base.clone()
        });
    }
    let mut accepted = 0;
    for hw in &table {
        let sizes = NodeSizes {
            gpu_count: hw.gpu_count,
            vram_per_gpu_mib: hw.vram_per_gpu_mib,
            compute_capability_sm: hw.compute_capability,
            ram_mib: hw.ram_mib,
            disk_gib: hw.disk_gib,
            checkpoint_write_mibps: hw.checkpoint_write_mibps,
            readiness: 90,
        };
        if hw.validate().is_ok() {
            accepted += 1;
            assert!(
                sizes.check().is_ok(),
                "the program registers {hw:?}, which the scheduler would skip"
            );
        }
    }
    assert!(accepted >= 10, "the table exercises accepted profiles too");
}
