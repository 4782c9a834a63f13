use mcjs_scheduler::sim::{IncidentKind, SimConfig, Workload, World, failure_scales, simulate};
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

#[test]
fn the_completion_rate_counts_only_the_jobs_that_completed_or_failed() {
    let config = SimConfig {
        restart_budget: Some(0),
        ..small()
    };
    let workload = Workload::balanced();
    let r = simulate(
        &ScarcityAware::default(),
        &workload,
        &World::draw(&workload, &config),
        &config,
    );
    let unfinished = r.unfinished_queued + r.unfinished_running;
    assert_eq!(r.ended() + unfinished, r.submitted);
    assert!(r.failed > 0 && r.expired > 0 && unfinished > 0, "{r}");
    let rate = r.completed as f64 / (r.completed + r.failed) as f64;
    assert_eq!(r.completion_rate(), rate);
    assert!(
        rate > r.completed as f64 / r.submitted as f64,
        "unfinished jobs are not failures"
    );
}

#[test]
fn jobs_fail_only_once_their_restarts_are_spent() {
    let workload = Workload::balanced();
    let run = |budget| {
        let config = SimConfig {
            restart_budget: budget,
            ..small()
        };
        simulate(
            &ScarcityAware::default(),
            &workload,
            &World::draw(&workload, &config),
            &config,
        )
    };
    let (none, one, never) = (run(Some(0)), run(Some(1)), run(None));
    assert!(
        none.failed > one.failed,
        "{} vs {}",
        none.failed,
        one.failed
    );
    assert_eq!(never.failed, 0);
    assert!(never.job_interruptions > 0);
}

#[test]
fn a_power_cut_behind_a_ups_costs_one_checkpoint_write_and_without_one_up_to_an_interval() {
    let config = SimConfig {
        power_cuts_per_node_day: 0.5,
        ups_fraction: 0.5,
        ..small()
    };
    let workload = Workload::balanced();
    let world = World::draw(&workload, &config);
    let r = simulate(&ScarcityAware::default(), &workload, &world, &config);
    assert!(r.power_interruptions_with_ups > 0 && r.power_interruptions_without_ups > 0);
    // A capable node writes a checkpoint in at most a fifth of the interval (the shared rule).
    let interval = world.kinds[0].interval_secs as i64;
    assert!(
        world
            .kinds
            .iter()
            .all(|k| k.interval_secs as i64 == interval)
    );
    assert!(
        (1..=interval / 5).contains(&r.power_loss_max_secs_with_ups),
        "{}",
        r.power_loss_max_secs_with_ups
    );
    assert!(
        r.power_loss_max_secs_without_ups > interval / 5
            && r.power_loss_max_secs_without_ups < interval,
        "{}",
        r.power_loss_max_secs_without_ups
    );
}

#[test]
fn uniform_failures_give_every_node_its_kinds_rate_and_no_power_cuts() {
    let config = small().uniform_failures();
    let world = World::draw(&Workload::balanced(), &config);
    assert!(world.node_failure_scale.iter().all(|&s| s == 1.0));
    assert!(
        world
            .incidents
            .iter()
            .all(|i| !matches!(i.kind, IncidentKind::PowerCut { .. }))
    );
    assert!(world.node_history.iter().all(|&(f, h)| f == 0 && h == 0.0));
}

#[test]
fn failure_scales_average_one_and_a_tenth_of_the_nodes_make_two_fifths_of_the_failures() {
    use rand::SeedableRng;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
    let mut scales = failure_scales(&mut rng, 100_000, 1.0);
    let mean = scales.iter().sum::<f64>() / scales.len() as f64;
    assert!((mean - 1.0).abs() < 0.03, "{mean}");
    scales.sort_by(f64::total_cmp);
    let median = scales[scales.len() / 2];
    assert!((median - (-0.5f64).exp()).abs() < 0.02, "{median}");
    let top_tenth: f64 = scales[scales.len() * 9 / 10..].iter().sum();
    let share = top_tenth / scales.iter().sum::<f64>();
    // Log-normal, sigma 1: 1 - Phi(1.2816 - 1) = 0.39.
    assert!((0.35..0.43).contains(&share), "{share}");
}

#[test]
fn the_record_before_the_run_follows_each_nodes_failure_rate() {
    let config = SimConfig {
        nodes: 1000,
        ..small()
    };
    let world = World::draw(&Workload::balanced(), &config);
    let mut by_scale: Vec<(f64, (u32, f64))> = world
        .node_failure_scale
        .iter()
        .copied()
        .zip(world.node_history.iter().copied())
        .collect();
    by_scale.sort_by(|a, b| a.0.total_cmp(&b.0));
    let rate = |nodes: &[(f64, (u32, f64))]| {
        let f: f64 = nodes.iter().map(|n| n.1.0 as f64).sum();
        let h: f64 = nodes.iter().map(|n| n.1.1).sum();
        f / h
    };
    let tenth = by_scale.len() / 10;
    let (steadiest, flakiest) = (
        rate(&by_scale[..tenth]),
        rate(&by_scale[by_scale.len() - tenth..]),
    );
    assert!(flakiest > 5.0 * steadiest, "{flakiest} vs {steadiest}");
}

#[test]
fn reliability_aware_placement_interrupts_fewer_jobs_on_the_same_world() {
    let config = small();
    let workload = Workload::balanced();
    let world = World::draw(&workload, &config);
    let without = simulate(&ScarcityAware::default(), &workload, &world, &config);
    let with = simulate(
        &ScarcityAware {
            config: PlacementConfig {
                reliability: ReliabilityWeighing {
                    enabled: true,
                    ..ReliabilityWeighing::default()
                },
                ..PlacementConfig::default()
            },
        },
        &workload,
        &world,
        &config,
    );
    assert!(
        with.job_interruptions < without.job_interruptions,
        "{} vs {}",
        with.job_interruptions,
        without.job_interruptions
    );
    assert!(with.wasted_gpu_hours < without.wasted_gpu_hours);
}
