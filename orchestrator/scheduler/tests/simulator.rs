use mcjs_scheduler::sim::{SimConfig, Workload, World, simulate};
use mcjs_scheduler::*;

fn small() -> SimConfig {
    SimConfig {
        seed: 3,
        nodes: 200,
        days: 2.0,
        ..SimConfig::default()
    }
}

#[test]
fn a_seed_replays_the_same_run() {
    let config = small();
    let workload = Workload::scarce_heavy();
    let a = simulate(
        &ScarcityAware::default(),
        &workload,
        &World::draw(&workload, &config),
        &config,
    );
    let b = simulate(
        &ScarcityAware::default(),
        &workload,
        &World::draw(&workload, &config),
        &config,
    );
    assert_eq!(format!("{a:?}"), format!("{b:?}"));
    assert!(a.completed > 0 && a.completed < a.submitted);
    assert!(a.node_crashes > 0 && a.job_interruptions > 0);
    assert!(a.wasted_gpu_hours > 0.0);
}

#[test]
fn scarce_jobs_wait_less_under_scarcity_aware_placement() {
    let config = small();
    let workload = Workload::balanced();
    let world = World::draw(&workload, &config);
    let ours = simulate(&ScarcityAware::default(), &workload, &world, &config);
    let first = simulate(&FirstFit::default(), &workload, &world, &config);
    assert!(ours.scarce_jobs > 0);
    assert!(
        ours.scarce_waited < first.scarce_waited,
        "scarcity-aware {} vs first-fit {}",
        ours.scarce_waited,
        first.scarce_waited
    );
}
