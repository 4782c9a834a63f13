//! Reliability-aware placement: a job prefers the nodes most likely to survive its expected
//! duration, as estimated from each node's record, without giving up the scarcity rule.

mod common;

use common::*;
use mcjs_scheduler::*;

const DAY_SECS: i64 = 24 * 3600;

fn weighing() -> PlacementConfig {
    PlacementConfig {
        reliability: ReliabilityWeighing {
            enabled: true,
            ..ReliabilityWeighing::default()
        },
        ..PlacementConfig::default()
    }
}

fn record(node: u64, failures: u32, hours_in_service: f64) -> ServiceRecord {
    ServiceRecord {
        node: NodeId(node),
        failures,
        hours_in_service,
    }
}

fn plan_for(
    config: PlacementConfig,
    nodes: Vec<FleetNode>,
    jobs: &[QueuedJob],
    history: &[ServiceRecord],
    expected_secs: &[i64],
) -> Plan {
    let fleet = FleetIndex::new(nodes).expect("valid fleet");
    let request = PlanRequest::new(jobs, NOW)
        .with_history(history)
        .with_expected_secs(expected_secs);
    ScarcityAware { config }.plan(&fleet, &request)
}

/// Node 1 has the better readiness but failed 30 times in 60 days; node 2 failed once.
fn flaky_and_steady() -> (Vec<FleetNode>, Vec<ServiceRecord>) {
    let nodes = vec![node(1).readiness(95), node(2).readiness(70)];
    let history = vec![record(1, 30, 1440.0), record(2, 1, 1440.0)];
    (nodes, history)
}

#[test]
fn a_job_takes_the_node_more_likely_to_survive_it_over_a_readier_one() {
    let (nodes, history) = flaky_and_steady();
    let plan = plan_for(weighing(), nodes, &[job(10)], &history, &[DAY_SECS]);
    assert_eq!(node_of(&plan, 10), Some(2));
}

#[test]
fn without_the_switch_history_is_ignored_and_readiness_decides() {
    let (nodes, history) = flaky_and_steady();
    let plan = plan_for(
        PlacementConfig::default(),
        nodes,
        &[job(10)],
        &history,
        &[DAY_SECS],
    );
    assert_eq!(node_of(&plan, 10), Some(1));
}

#[test]
fn without_expected_durations_for_every_job_no_job_weighs_reliability() {
    let (nodes, history) = flaky_and_steady();
    let plan = plan_for(
        weighing(),
        nodes,
        &[job(10), job(11)],
        &history,
        &[DAY_SECS],
    );
    // Both are placed in readiness order, the older first.
    assert_eq!(plan.placements.len(), 2);
    let (nodes, history) = flaky_and_steady();
    let plan = plan_for(weighing(), nodes, &[job(10)], &history, &[]);
    assert_eq!(node_of(&plan, 10), Some(1));
}

#[test]
fn a_new_node_is_preferred_to_a_flaky_one_but_not_to_a_proven_one() {
    // The fleet's rate comes from nodes 1 and 2 (31 failures in 2,880 hours); node 3 is new.
    let nodes = vec![
        node(1).readiness(95),
        node(3).readiness(90),
        node(2).readiness(70),
    ];
    let history = vec![record(1, 30, 1440.0), record(2, 1, 1440.0)];
    let plan = plan_for(
        weighing(),
        nodes.clone(),
        &[job(10), job(11)],
        &history,
        &[DAY_SECS, DAY_SECS],
    );
    assert_eq!(node_of(&plan, 10), Some(2), "the proven node goes first");
    assert_eq!(
        node_of(&plan, 11),
        Some(3),
        "then the new one, before the flaky one"
    );
}

#[test]
fn a_node_with_no_history_is_not_starved_when_every_node_is_new() {
    let nodes = vec![node(1).readiness(95), node(2).readiness(70)];
    let plan = plan_for(weighing(), nodes, &[job(10)], &[], &[DAY_SECS]);
    assert_eq!(
        node_of(&plan, 10),
        Some(1),
        "readiness decides among equals"
    );
}

#[test]
fn reliability_does_not_hand_a_scarce_node_to_a_common_job_while_a_narrow_one_waits() {
    // The only 80 GB node is spotless; the common node fails daily. The common job is older.
    let nodes = vec![node(1).a100_80(), node(2)];
    let history = vec![record(1, 0, 5000.0), record(2, 60, 1440.0)];
    let jobs = [job(10).submitted(NOW - 7200), job(11).needs_vram_gib(80)];
    let plan = plan_for(
        weighing(),
        nodes,
        &jobs,
        &history,
        &[3 * DAY_SECS, 3 * DAY_SECS],
    );
    assert_eq!(node_of(&plan, 11), Some(1));
    assert_eq!(node_of(&plan, 10), Some(2));
}

#[test]
fn a_common_job_searches_only_classes_about_as_lightly_loaded_as_its_first() {
    // Two spotless 80 GB nodes that an 80 GB job needs, one flaky common node. Both jobs are
    // in the same tier, so the older common job chooses first.
    let nodes = vec![node(1).a100_80(), node(2).a100_80(), node(3)];
    let history = vec![
        record(1, 0, 5000.0),
        record(2, 0, 5000.0),
        record(3, 60, 1440.0),
    ];
    let jobs = [job(10).submitted(NOW - 7200), job(11).needs_vram_gib(80)];
    let durations = [3 * DAY_SECS, 3 * DAY_SECS];
    let plan = plan_for(weighing(), nodes.clone(), &jobs, &history, &durations);
    assert_eq!(
        node_of(&plan, 10),
        Some(3),
        "the 80 GB class carries more load"
    );
    assert!(matches!(node_of(&plan, 11), Some(1 | 2)));
    // With no limit on load the common job still leaves the spotless 80 GB nodes: a
    // narrower shape (the 80 GB job) depends on them.
    let unbounded = PlacementConfig {
        reliability: ReliabilityWeighing {
            load_slack_percent: 10_000,
            ..weighing().reliability
        },
        ..weighing()
    };
    let plan = plan_for(unbounded, nodes.clone(), &jobs, &history, &durations);
    assert_eq!(node_of(&plan, 10), Some(3));
    // Without the 80 GB job, nobody narrower depends on them, and with no limit on load
    // the common job takes a spotless one.
    let plan = plan_for(unbounded, nodes, &jobs[..1], &history, &durations[..1]);
    assert!(matches!(node_of(&plan, 10), Some(1 | 2)));
}

#[test]
fn a_recovering_job_still_avoids_the_node_that_failed_it() {
    let (nodes, history) = flaky_and_steady();
    let plan = plan_for(
        weighing(),
        nodes,
        &[job(10).recovering_from(2)],
        &history,
        &[DAY_SECS],
    );
    assert_eq!(node_of(&plan, 10), Some(1));
}

#[test]
fn with_a_survival_target_a_short_job_leaves_the_steady_node_to_a_long_one() {
    let config = PlacementConfig {
        reliability: ReliabilityWeighing {
            enabled: true,
            survival_target_percent: 90,
            ..ReliabilityWeighing::default()
        },
        ..PlacementConfig::default()
    };
    // Node 1 fails about every other day: it survives one hour with ~98%, three days rarely.
    let nodes = vec![node(1).readiness(95), node(2).readiness(70)];
    let history = vec![record(1, 30, 1440.0), record(2, 1, 1440.0)];
    let short_first = [job(10).submitted(NOW - 7200), job(11)];
    let plan = plan_for(
        config,
        nodes.clone(),
        &short_first,
        &history,
        &[3600, 3 * DAY_SECS],
    );
    assert_eq!(
        node_of(&plan, 10),
        Some(1),
        "the short job meets the target on node 1"
    );
    assert_eq!(node_of(&plan, 11), Some(2));
    // Without the target the short job, planned first, takes the steady node.
    let plan = plan_for(
        weighing(),
        nodes,
        &short_first,
        &history,
        &[3600, 3 * DAY_SECS],
    );
    assert_eq!(node_of(&plan, 10), Some(2));
}

#[test]
fn a_config_written_before_the_switch_still_reads_and_keeps_it_off() {
    let old = r#"{"failure_backoff_base_secs":600,"failure_backoff_max_secs":86400,
        "urgent_within_secs":86400,"max_hold_secs":7200}"#;
    let config: PlacementConfig = serde_json::from_str(old).expect("reads");
    assert_eq!(config, PlacementConfig::default());
    assert!(!config.reliability.enabled);
}
