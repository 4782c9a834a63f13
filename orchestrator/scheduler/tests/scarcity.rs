mod common;

use common::*;
use mcjs_scheduler::*;

#[test]
fn a_common_job_does_not_take_the_only_80gb_node_while_an_80gb_job_waits() {
    // The common job is older, so age alone would give it the first pick.
    let nodes = vec![node(1).a100_80(), node(2).busy()];
    let jobs = [job(10).submitted(NOW - 7200), job(11).needs_vram_gib(80)];
    let plan = plan(nodes, &jobs);
    assert_eq!(node_of(&plan, 11), Some(1));
    assert_eq!(node_of(&plan, 10), None);
}

#[test]
fn both_baselines_hand_the_80gb_node_to_the_older_common_job() {
    for policy in [
        &FirstFit::default() as &dyn PlacementPolicy,
        &BestFit::default(),
    ] {
        let nodes = vec![node(1).a100_80(), node(2).busy()];
        let jobs = [job(10).submitted(NOW - 7200), job(11).needs_vram_gib(80)];
        let plan = plan_with(policy, nodes, &jobs);
        assert_eq!(node_of(&plan, 10), Some(1), "{}", policy.name());
    }
}

#[test]
fn a_common_job_takes_common_hardware_when_both_are_free() {
    let nodes = vec![node(1).a100_80().readiness(100), node(2).readiness(50)];
    let plan = plan(nodes, &[job(10)]);
    assert_eq!(node_of(&plan, 10), Some(2));
}

#[test]
fn a_common_job_may_use_a_scarce_node_nobody_else_needs() {
    let nodes = vec![node(1).a100_80(), node(2).busy()];
    let plan = plan(nodes, &[job(10)]);
    assert_eq!(node_of(&plan, 10), Some(1));
}

#[test]
fn expected_scarce_arrivals_hold_the_scarce_node_for_a_while() {
    let nodes = vec![node(1).a100_80(), node(2).busy()];
    let fleet = FleetIndex::new(nodes).unwrap();
    let scarce = job(0).needs_vram_gib(80);
    let expected = [ExpectedDemand {
        hardware: scarce.hardware.clone(),
        checkpoint: scarce.checkpoint,
        jobs: 1.0,
    }];
    let fresh = [job(10).submitted(NOW - 60)];
    let request = PlanRequest::new(&fresh, NOW).with_expected(&expected);
    let plan = ScarcityAware::default().plan(&fleet, &request);
    assert_eq!(node_of(&plan, 10), None);
    let reason = reason_of(&plan, 10).unwrap().to_string();
    assert!(reason.contains("held for scarcer jobs"), "{reason}");

    // Holds never starve anyone: after max_hold_secs the job may take it.
    let patient = [job(10).submitted(NOW - 3 * 3600)];
    let request = PlanRequest::new(&patient, NOW).with_expected(&expected);
    let plan = ScarcityAware::default().plan(&fleet, &request);
    assert_eq!(node_of(&plan, 10), Some(1));
}

#[test]
fn a_recovering_job_avoids_the_node_that_failed_it_when_another_fits() {
    let nodes = vec![node(1).readiness(100), node(2).readiness(40)];
    let plan = plan(nodes, &[job(10).recovering_from(1)]);
    assert_eq!(node_of(&plan, 10), Some(2));
}

#[test]
fn a_recovering_job_returns_to_its_node_when_nothing_else_fits() {
    let nodes = vec![node(1), node(2).busy()];
    let plan = plan(nodes, &[job(10).recovering_from(1)]);
    assert_eq!(node_of(&plan, 10), Some(1));
}

#[test]
fn the_most_urgent_deadline_is_served_first_then_the_oldest_job() {
    let nodes = vec![node(1)];
    let jobs = [
        job(10).submitted(NOW - 9000),
        job(11).submitted(NOW - 100).deadline(NOW + 3600),
        job(12).submitted(NOW - 100).deadline(NOW + 1800),
    ];
    assert_eq!(node_of(&plan(nodes.clone(), &jobs), 12), Some(1));

    let no_deadlines = [job(10).submitted(NOW - 100), job(11).submitted(NOW - 9000)];
    assert_eq!(node_of(&plan(nodes.clone(), &no_deadlines), 11), Some(1));

    // A deadline weeks away is not urgent: age decides.
    let far = [
        job(10).submitted(NOW - 9000),
        job(11).deadline(NOW + 30 * 86400),
    ];
    assert_eq!(node_of(&plan(nodes, &far), 10), Some(1));
}

#[test]
fn among_equal_nodes_the_readiest_wins_then_the_cheapest() {
    let nodes = vec![
        node(1).readiness(70),
        node(2).readiness(95),
        node(3).readiness(90),
    ];
    assert_eq!(node_of(&plan(nodes, &[job(10)]), 10), Some(2));

    let nodes = vec![
        node(1).price(USDC),
        node(2).price(USDC / 4),
        node(3).price(USDC / 2),
    ];
    assert_eq!(node_of(&plan(nodes, &[job(10)]), 10), Some(2));
}

#[test]
fn nodes_that_failed_recently_back_off_exponentially() {
    let config = PlacementConfig::default();
    // Third consecutive failure: 4 x the base back-off.
    let failed_at = NOW - 3 * config.failure_backoff_base_secs;
    let plan1 = plan(vec![node(1).failed(failed_at, 3)], &[job(10)]);
    assert_eq!(node_of(&plan1, 10), None);
    let reason = reason_of(&plan1, 10).unwrap();
    match reason {
        Unplaced::NoneAvailable(a) => {
            assert_eq!(a.recently_failed, 1);
            assert_eq!(
                a.next_retry_unix,
                Some(failed_at + 4 * config.failure_backoff_base_secs)
            );
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(
        reason
            .to_string()
            .starts_with("all 1 capable node failed recently")
    );
    let plan2 = plan(vec![node(1).failed(failed_at, 2)], &[job(10)]);
    assert_eq!(node_of(&plan2, 10), Some(1));
}

#[test]
fn every_waiting_job_says_why() {
    let nodes = vec![
        node(1).busy(),
        node(2).offline(),
        node(3).a100_80().price(9 * USDC),
    ];
    let jobs = [
        job(10).needs_vram_gib(160),
        job(11).needs_vram_gib(80).max_price(USDC),
        job(12).models(&["h100"]),
        job(13)
            .models(&["a100"])
            .needs_vram_gib(16)
            .max_price(20 * USDC),
        job(14).models(&["H100"]),
    ];
    let mut jobs = jobs.to_vec();
    jobs[3].hardware.gpu_count = 8;
    let plan = plan(nodes, &jobs);
    let text = |j| reason_of(&plan, j).unwrap().to_string();
    assert_eq!(text(10), "no node has 160 GiB of vram per gpu");
    assert_eq!(
        text(11),
        "all 1 capable node cost more than 1.00 USDC per gpu-hour (cheapest free 9.00 USDC)"
    );
    assert_eq!(text(12), "no node has a gpu model in [h100]");
    assert_eq!(text(13), "no node has 8 gpus");
    assert_eq!(
        text(14),
        "invalid job: gpu model \"H100\" is not normalised: write \"h100\""
    );
    let busy_and_offline = plan_with(
        &ScarcityAware::default(),
        vec![node(1).busy(), node(2).offline()],
        &[job(20)],
    );
    assert_eq!(
        reason_of(&busy_and_offline, 20).unwrap().to_string(),
        "none of 2 capable nodes can take it now: 1 busy, 1 offline"
    );
}

#[test]
fn checkpoint_capability_is_a_hard_requirement() {
    // 10 GiB every 900 s needs ceil(10240 x 5 / 900) = 57 MiB/s and 30 GiB for 2 kept + 1.
    let mut slow = node(1);
    slow.checkpoint_write_mibps = 56;
    let mut small = node(2);
    small.disk_free_gib = 29;
    let mut unstable = node(3);
    unstable.bandwidth_stable = false;
    let plan1 = plan(
        vec![slow.clone(), small.clone(), unstable.clone()],
        &[job(10)],
    );
    assert_eq!(node_of(&plan1, 10), None);
    assert_eq!(
        reason_of(&plan1, 10).unwrap(),
        &Unplaced::NoSingleCapableNode
    );

    slow.checkpoint_write_mibps = 57;
    let plan2 = plan(vec![slow], &[job(10)]);
    assert_eq!(node_of(&plan2, 10), Some(1));
}

#[test]
fn a_bad_fleet_is_rejected_with_the_reason() {
    let err = FleetIndex::new(vec![node(1), node(1)]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "node 1 appears twice: each node id must be unique"
    );
    let err = FleetIndex::new(vec![node(2).readiness(120)]).unwrap_err();
    assert!(err.to_string().contains("readiness 120"));
}

#[test]
fn building_a_fleet_keeps_the_good_nodes_and_names_each_bad_one() {
    let mut unnormalised = node(3);
    unnormalised.gpu_model = "NVIDIA  RTX_A6000".into();
    let mut no_gpus = node(4);
    no_gpus.gpu_count = 0;
    let mut huge_disk = node(6);
    huge_disk.disk_free_gib = u32::MAX;
    let (fleet, rejected) = FleetIndex::build(vec![
        node(1),
        node(1),
        node(2).readiness(200),
        unnormalised,
        no_gpus,
        node(5),
        huge_disk,
    ]);
    let kept: Vec<u64> = fleet.nodes().iter().map(|n| n.id.0).collect();
    assert_eq!(kept, vec![1, 5]);
    let reasons: Vec<String> = rejected.iter().map(|e| e.to_string()).collect();
    assert_eq!(
        reasons,
        vec![
            "node 1 appears twice: each node id must be unique",
            "node 2 reports an impossible profile: readiness 200 is outside 0..=100",
            "node 3 model \"NVIDIA  RTX_A6000\" is not normalised: write \"rtx-a6000\"",
            "node 4 reports an impossible profile: gpu count 0 is outside 1..=16",
            "node 6 reports an impossible profile: 4294967295 GiB of free disk is more than 1048576",
        ]
    );
    // The kept nodes plan as usual.
    let plan = ScarcityAware::default().plan(&fleet, &PlanRequest::new(&[job(10), job(11)], NOW));
    assert_eq!(plan.placements.len(), 2);
}
