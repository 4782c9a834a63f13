mod common;

use common::*;
use mcjs_scheduler::*;
use proptest::prelude::*;
use std::collections::HashSet;

const MODELS: [&str; 5] = [
    "geforce-rtx-4090",
    "a100-sxm4-80gb",
    "a100-pcie-40gb",
    "k80",
    "v100-sxm2-32gb",
];
const ALLOW: [&str; 6] = [
    "a100",
    "k80",
    "geforce-rtx-4090",
    "a100-80gb",
    "v100",
    "h100",
];

fn arb_node(id: u64) -> impl Strategy<Value = FleetNode> {
    (
        (
            0..MODELS.len(),
            1u8..=8,
            prop::sample::select(vec![12u32, 24, 40, 80]),
            prop::sample::select(vec![37u16, 70, 80, 90]),
        ),
        (
            prop::sample::select(vec![(470u32, 0u32), (535, 0), (550, 54)]),
            1u16..=64,
            1u32..=512,
        ),
        (
            0u32..=400,
            0u32..=400,
            any::<bool>(),
            0u8..=100,
            1u64..=10,
            any::<bool>(),
        ),
        (0u8..3, prop::option::of(-7200i64..=0), 0u32..4),
    )
        .prop_map(
            move |(
                (m, gpus, vram, cc),
                (driver, cpu, ram),
                (disk, bw, stable, readiness, price, attested),
                (status, failed, failures),
            )| FleetNode {
                id: NodeId(id),
                gpu_model: MODELS[m].into(),
                gpu_count: gpus,
                vram_per_gpu_mib: vram * 1024,
                compute_capability: cc,
                driver,
                cpu_cores: cpu,
                ram_mib: ram * 1024,
                disk_free_gib: disk,
                checkpoint_write_mibps: bw,
                bandwidth_stable: stable,
                attested,
                readiness,
                price_per_gpu_hour: price * USDC / 4,
                status: [
                    NodeAvailability::Available,
                    NodeAvailability::Busy,
                    NodeAvailability::Offline,
                ][status as usize],
                last_failure_unix: failed.map(|d| NOW + d),
                consecutive_failures: failures,
            },
        )
}

fn arb_job(id: u64) -> impl Strategy<Value = QueuedJob> {
    (
        (
            1u8..=8,
            prop::sample::select(vec![0u32, 16, 24, 40, 80]),
            prop::sample::select(vec![0u16, 37, 70, 80, 90]),
            prop::sample::subsequence(ALLOW.to_vec(), 0..=2),
        ),
        (
            prop::option::of(prop::sample::select(vec![
                (470u32, 0u32),
                (535, 0),
                (550, 0),
            ])),
            0u16..=32,
            0u32..=256,
            0u32..=200,
            0u32..=100,
        ),
        (0u64..=60, 0u32..=3600, 0u8..=3, prop::bool::weighted(0.2)),
        (
            1u64..=10,
            prop::option::of(0i64..=200_000),
            0i64..=20_000,
            prop::option::of(0u64..12),
        ),
    )
        .prop_map(
            move |(
                (gpus, vram, cc, models),
                (driver, cpu, ram, disk, min_bw),
                (size_gib, interval, keep, attested),
                (price, deadline, age, recovering),
            )| QueuedJob {
                id: JobId(id),
                hardware: HardwareRequirements {
                    gpu_count: gpus,
                    min_vram_mib: vram * 1024,
                    min_compute_capability: cc,
                    gpu_models: models.into_iter().map(String::from).collect(),
                    min_checkpoint_write_mibps: min_bw,
                    min_cpu_cores: cpu,
                    min_ram_mib: ram * 1024,
                    min_disk_gib: disk,
                    min_driver: driver,
                    attested,
                },
                checkpoint: CheckpointPolicy {
                    size_bytes: size_gib << 30,
                    interval_secs: interval,
                    keep_checkpoints: keep,
                },
                terms: Terms {
                    max_price_per_gpu_hour: price * USDC / 4,
                    deadline_unix: deadline.map(|d| NOW + d),
                    submitted_unix: NOW - age,
                    recovering_from: recovering.map(NodeId),
                },
            },
        )
}

fn arb_case() -> impl Strategy<Value = (Vec<FleetNode>, Vec<QueuedJob>)> {
    (1usize..14, 1usize..12).prop_flat_map(|(n, j)| {
        (
            (0..n as u64).map(arb_node).collect::<Vec<_>>(),
            (0..j as u64).map(arb_job).collect::<Vec<_>>(),
        )
    })
}

/// A node of a real fleet: one of a few kinds, with its own measured bandwidth (±30%), free
/// disk (30-100%) and RAM (up to 600 MiB under nominal), as the HAL reports them.
fn arb_measured_node(id: u64) -> impl Strategy<Value = FleetNode> {
    (
        0usize..3,
        (0.7f64..=1.3, 0.3f64..=1.0, 0u32..=600),
        (0u8..=100, 1u64..=10, 0u8..3, any::<bool>()),
        (prop::option::of(-7200i64..=0), 0u32..3),
    )
        .prop_map(
            move |(
                kind,
                (bw, disk, ram_drop),
                (readiness, price, status, attested),
                (failed, failures),
            )| {
                let (model, gpus, vram_gib, cc, driver, ram_gib, disk_gib, bw_mibps) = [
                    ("geforce-rtx-4090", 1, 24, 89, (550, 0), 64, 2000, 900),
                    ("a100-sxm4-80gb", 8, 80, 80, (550, 0), 512, 8000, 4000),
                    ("k80", 4, 12, 37, (470, 0), 256, 1000, 300),
                ][kind];
                FleetNode {
                    id: NodeId(id),
                    gpu_model: model.into(),
                    gpu_count: gpus,
                    vram_per_gpu_mib: vram_gib * 1024,
                    compute_capability: cc,
                    driver,
                    cpu_cores: 8 * gpus as u16,
                    ram_mib: ram_gib * 1024 - ram_drop,
                    disk_free_gib: (disk_gib as f64 * disk) as u32,
                    checkpoint_write_mibps: (bw_mibps as f64 * bw) as u32,
                    bandwidth_stable: true,
                    attested,
                    readiness,
                    price_per_gpu_hour: price * USDC / 4,
                    status: [
                        NodeAvailability::Available,
                        NodeAvailability::Busy,
                        NodeAvailability::Offline,
                    ][status as usize],
                    last_failure_unix: failed.map(|d| NOW + d),
                    consecutive_failures: failures,
                }
            },
        )
}

/// A job whose measured needs land in the same ranges as the nodes' values, so that needs
/// fall inside the index's buckets as well as between them.
fn arb_measured_job(id: u64) -> impl Strategy<Value = QueuedJob> {
    (
        arb_job(id),
        prop::sample::select(vec![0u32, 30_000, 60_000, 65_000, 65_536, 262_000, 524_000]),
        0u32..=8000,
        0u32..=5000,
        (0u64..=2000, 60u32..=3600, 0u8..=3),
    )
        .prop_map(|(mut job, ram, disk, bw, (size_gib, interval, keep))| {
            job.hardware.gpu_count = job.hardware.gpu_count.min(4);
            job.hardware.gpu_models.clear();
            job.hardware.min_cpu_cores = 0;
            job.hardware.min_ram_mib = ram;
            job.hardware.min_disk_gib = disk;
            job.hardware.min_checkpoint_write_mibps = bw;
            job.checkpoint = CheckpointPolicy {
                size_bytes: size_gib << 30,
                interval_secs: interval,
                keep_checkpoints: keep,
            };
            job
        })
}

fn arb_measured_case() -> impl Strategy<Value = (Vec<FleetNode>, Vec<QueuedJob>)> {
    (1usize..40, 1usize..12).prop_flat_map(|(n, j)| {
        (
            (0..n as u64).map(arb_measured_node).collect::<Vec<_>>(),
            (0..j as u64).map(arb_measured_job).collect::<Vec<_>>(),
        )
    })
}

/// Small random fleets with independent values, and real-looking fleets with per-node
/// measured values.
fn arb_any_case() -> impl Strategy<Value = (Vec<FleetNode>, Vec<QueuedJob>)> {
    prop_oneof![arb_case(), arb_measured_case()]
}

/// The hard requirements, written out independently of the placement code.
fn violations(job: &QueuedJob, node: &FleetNode, config: &PlacementConfig) -> Vec<&'static str> {
    let hw = &job.hardware;
    let ck = &job.checkpoint;
    let mut v = Vec::new();
    let mut check = |ok: bool, what| {
        if !ok {
            v.push(what)
        }
    };
    check(node.status == NodeAvailability::Available, "status");
    if let (Some(at), n) = (node.last_failure_unix, node.consecutive_failures)
        && n > 0
    {
        let backoff =
            (config.failure_backoff_base_secs << (n - 1)).min(config.failure_backoff_max_secs);
        check(NOW >= at + backoff, "backoff");
    }
    check(node.gpu_count >= hw.gpu_count, "gpu count");
    let model_ok = hw.gpu_models.is_empty()
        || hw
            .gpu_models
            .iter()
            .any(|e| node.gpu_model == *e || node.gpu_model.starts_with(&format!("{e}-")));
    check(model_ok, "model");
    check(node.vram_per_gpu_mib >= hw.min_vram_mib, "vram");
    check(
        node.compute_capability >= hw.min_compute_capability,
        "compute capability",
    );
    check(hw.min_driver.is_none_or(|d| node.driver >= d), "driver");
    check(node.cpu_cores >= hw.min_cpu_cores, "cpu");
    check(node.ram_mib >= hw.min_ram_mib, "ram");
    check(node.disk_free_gib >= hw.min_disk_gib, "disk");
    check(
        node.checkpoint_write_mibps >= hw.min_checkpoint_write_mibps,
        "on-chain bandwidth",
    );
    let bw = node.checkpoint_write_mibps as u128;
    check(
        bw * ck.interval_secs as u128 * (1 << 20) >= ck.size_bytes as u128 * 5,
        "checkpoint write time over 20% of the interval",
    );
    check(
        (node.disk_free_gib as u128) << 30
            >= ck.size_bytes as u128 * (ck.keep_checkpoints as u128 + 1),
        "checkpoint space",
    );
    check(
        node.bandwidth_stable || (ck.size_bytes == 0 && hw.min_checkpoint_write_mibps == 0),
        "stable bandwidth",
    );
    check(node.attested || !hw.attested, "attested");
    check(
        node.price_per_gpu_hour <= job.terms.max_price_per_gpu_hour,
        "price",
    );
    v
}

fn policies() -> [Box<dyn PlacementPolicy>; 3] {
    [
        Box::new(ScarcityAware::default()),
        Box::new(FirstFit::default()),
        Box::new(BestFit::default()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn no_placement_violates_a_hard_requirement((nodes, jobs) in arb_any_case()) {
        let fleet = FleetIndex::new(nodes.clone()).unwrap();
        for policy in policies() {
            let plan = policy.plan(&fleet, &PlanRequest::new(&jobs, NOW));
            for p in &plan.placements {
                let job = jobs.iter().find(|j| j.id == p.job).unwrap();
                let node = nodes.iter().find(|n| n.id == p.node).unwrap();
                let v = violations(job, node, &PlacementConfig::default());
                prop_assert!(v.is_empty(), "{} placed {} on {}: {:?}", policy.name(), p.job, p.node, v);
            }
        }
    }

    #[test]
    fn no_node_is_double_booked_and_every_job_is_accounted_for((nodes, jobs) in arb_any_case()) {
        let fleet = FleetIndex::new(nodes).unwrap();
        for policy in policies() {
            let plan = policy.plan(&fleet, &PlanRequest::new(&jobs, NOW));
            let booked: HashSet<_> = plan.placements.iter().map(|p| p.node).collect();
            prop_assert_eq!(booked.len(), plan.placements.len());
            let mut seen: Vec<JobId> = plan.placements.iter().map(|p| p.job)
                .chain(plan.unplaced.iter().map(|u| u.job)).collect();
            seen.sort();
            let mut ids: Vec<JobId> = jobs.iter().map(|j| j.id).collect();
            ids.sort();
            prop_assert_eq!(seen, ids);
            for u in &plan.unplaced {
                prop_assert!(!u.reason.to_string().is_empty());
            }
        }
    }

    #[test]
    fn every_waiting_job_whose_nodes_are_free_and_affordable_is_held_or_placed((nodes, jobs) in arb_any_case()) {
        // A reason must be true: "all busy" means none of the capable nodes is free.
        let fleet = FleetIndex::new(nodes).unwrap();
        let plan = ScarcityAware::default().plan(&fleet, &PlanRequest::new(&jobs, NOW));
        for u in &plan.unplaced {
            if let Unplaced::NoneAvailable(a) = &u.reason {
                prop_assert_eq!(
                    a.capable,
                    a.offline + a.busy + a.recently_failed + a.too_expensive + a.held_for_scarcer_jobs
                );
                // Without expected demand nothing is held.
                prop_assert_eq!(a.held_for_scarcer_jobs, 0);
            }
        }
    }

    #[test]
    fn the_same_input_gives_the_same_plan_whatever_the_node_order((nodes, jobs) in arb_any_case()) {
        for policy in policies() {
            let fleet = FleetIndex::new(nodes.clone()).unwrap();
            let first = policy.plan(&fleet, &PlanRequest::new(&jobs, NOW));
            let again = policy.plan(&fleet, &PlanRequest::new(&jobs, NOW));
            prop_assert_eq!(&first, &again);
            let reversed = FleetIndex::new(nodes.iter().rev().cloned()).unwrap();
            let mut placements = policy.plan(&reversed, &PlanRequest::new(&jobs, NOW)).placements;
            let mut expected = first.placements.clone();
            placements.sort_by_key(|p| p.job);
            expected.sort_by_key(|p| p.job);
            prop_assert_eq!(placements, expected, "{}", policy.name());
        }
    }

    #[test]
    fn incremental_updates_plan_like_a_fresh_index((nodes, jobs) in arb_any_case(), flips in prop::collection::vec(0u8..3, 40), shrink in prop::collection::vec(any::<bool>(), 40)) {
        let mut fleet = FleetIndex::new(nodes.clone()).unwrap();
        let mut updated = nodes.clone();
        for ((node, flip), shrink) in updated.iter_mut().zip(&flips).zip(&shrink) {
            node.status = [NodeAvailability::Available, NodeAvailability::Busy, NodeAvailability::Offline][*flip as usize];
            fleet.set_status(node.id, node.status).unwrap();
            if *shrink {
                // A new measurement moves the node to another bucket.
                node.disk_free_gib = node.disk_free_gib * 2 / 3;
                node.checkpoint_write_mibps = node.checkpoint_write_mibps * 5 / 4;
                fleet.upsert(node.clone()).unwrap();
            }
        }
        let fresh = FleetIndex::new(updated).unwrap();
        let policy = ScarcityAware::default();
        prop_assert_eq!(
            policy.plan(&fleet, &PlanRequest::new(&jobs, NOW)),
            policy.plan(&fresh, &PlanRequest::new(&jobs, NOW))
        );
    }

    #[test]
    fn bucketing_hides_no_node_from_a_lone_job((nodes, jobs) in arb_any_case()) {
        // Alone in the queue, with nothing expected, a job is placed exactly when some node
        // meets all of its needs by the independent check: bucket floors never cost a fit.
        let fleet = FleetIndex::new(nodes.clone()).unwrap();
        for job in &jobs {
            let fits = nodes
                .iter()
                .any(|n| violations(job, n, &PlacementConfig::default()).is_empty());
            for policy in policies() {
                let plan = policy.plan(&fleet, &PlanRequest::new(std::slice::from_ref(job), NOW));
                prop_assert_eq!(plan.placements.len() == 1, fits, "{} {:?}", policy.name(), plan.unplaced);
            }
        }
    }

    #[test]
    fn a_bucket_floor_is_reached_by_every_value_of_its_bucket(value in any::<u32>()) {
        let floor = bucket_floor(value);
        prop_assert!(floor <= value);
        prop_assert!(floor as u64 * 3 > value as u64 * 2 || value < 4, "{floor} for {value}");
        prop_assert_eq!(bucket_floor(floor), floor);
        prop_assert!(bucket_ceiling(floor) >= value);
        prop_assert_eq!(bucket_floor(bucket_ceiling(floor)), floor);
    }

    #[test]
    fn measured_fleets_stay_few_classes(nodes in prop::collection::vec(arb_measured_node(0), 200..400)) {
        let nodes = nodes.into_iter().enumerate().map(|(i, mut n)| { n.id = NodeId(i as u64); n });
        let fleet = FleetIndex::new(nodes).unwrap();
        // 3 kinds x at most 3 bandwidth x 4 disk x 2 ram buckets, whatever the fleet size.
        prop_assert!(fleet.class_count() <= 72, "{} classes", fleet.class_count());
    }
}
