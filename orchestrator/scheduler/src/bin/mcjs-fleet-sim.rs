//! Benchmarks and fleet simulation for MCJS placement policies.
//!
//! `mcjs-fleet-sim --all` prints every table: planning throughput (medians), placement quality
//! on simulated workloads side by side, and how both grow with the fleet. `--reliability`
//! compares scarcity-aware placement with and without reliability weighing on one world.

use anyhow::{Context, Result, bail};
use mcjs_scheduler::sim::{SimConfig, SimReport, Workload, World, simulate, standard_job_kinds};
use mcjs_scheduler::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::hint::black_box;
use std::time::{Duration, Instant};

const USAGE: &str = "usage: mcjs-fleet-sim [--all] [--throughput] [--quality] [--scale] \
[--reliability] [--seed N] [--nodes N] [--days D] [--max-hold-hours H] [--forecast-mins M] \
[--nominal] [--uniform-failures] [--failure-sigma S] [--restart-budget N] [--load-slack PCT] \
[--prior-hours H] [--survival-target PCT] [--json]

Nodes report per-node measured values (bandwidth, free disk, RAM) as on a real fleet;
--nominal gives every node of a kind its kind's exact values instead.

Each node fails at its kind's rate times a log-normal scale (mean 1, sigma --failure-sigma,
default 1.0), sites lose power (40% behind a UPS), and a job fails for good after
--restart-budget restarts (default 3); --uniform-failures gives every node its kind's rate, no
power cuts and jobs that never fail, expire or are cancelled (the earlier tables).

--reliability prints scarcity-aware placement with and without reliability weighing on the
same world (--load-slack, --prior-hours, --survival-target tune the weighing).";

struct Args {
    throughput: bool,
    quality: bool,
    scale: bool,
    seed: u64,
    nodes: usize,
    days: f64,
    max_hold_hours: f64,
    forecast_mins: i64,
    nominal: bool,
    uniform_failures: bool,
    reliability: bool,
    failure_sigma: f64,
    restart_budget: u8,
    load_slack_percent: u32,
    prior_hours: u32,
    survival_target_percent: u32,
    json: bool,
}

fn parse_args() -> Result<Args> {
    let mut args = Args {
        throughput: false,
        quality: false,
        scale: false,
        seed: 7,
        nodes: 1000,
        days: 7.0,
        max_hold_hours: PlacementConfig::default().max_hold_secs as f64 / 3600.0,
        forecast_mins: SimConfig::default().forecast_horizon_secs / 60,
        nominal: false,
        uniform_failures: false,
        reliability: false,
        failure_sigma: SimConfig::default().failure_spread_sigma,
        restart_budget: SimConfig::default().restart_budget.unwrap_or(3),
        load_slack_percent: PlacementConfig::default().reliability.load_slack_percent,
        prior_hours: PlacementConfig::default().reliability.prior_weight_hours,
        survival_target_percent: PlacementConfig::default()
            .reliability
            .survival_target_percent,
        json: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .with_context(|| format!("{name} needs a value\n{USAGE}"))
        };
        match arg.as_str() {
            "--all" => (args.throughput, args.quality, args.scale) = (true, true, true),
            "--throughput" => args.throughput = true,
            "--quality" => args.quality = true,
            "--scale" => args.scale = true,
            "--json" => args.json = true,
            "--nominal" => args.nominal = true,
            "--uniform-failures" => args.uniform_failures = true,
            "--reliability" => args.reliability = true,
            "--failure-sigma" => {
                args.failure_sigma = value("--failure-sigma")?
                    .parse()
                    .context("--failure-sigma must be a number")?
            }
            "--restart-budget" => {
                args.restart_budget = value("--restart-budget")?
                    .parse()
                    .context("--restart-budget must be an integer 0-255")?
            }
            "--load-slack" => {
                args.load_slack_percent = value("--load-slack")?
                    .parse()
                    .context("--load-slack must be a whole percentage")?
            }
            "--survival-target" => {
                args.survival_target_percent = value("--survival-target")?
                    .parse()
                    .context("--survival-target must be a whole percentage")?
            }
            "--prior-hours" => {
                args.prior_hours = value("--prior-hours")?
                    .parse()
                    .context("--prior-hours must be a whole number of hours")?
            }
            "--seed" => {
                args.seed = value("--seed")?
                    .parse()
                    .context("--seed must be an integer")?
            }
            "--nodes" => {
                args.nodes = value("--nodes")?
                    .parse()
                    .context("--nodes must be an integer")?
            }
            "--days" => {
                args.days = value("--days")?
                    .parse()
                    .context("--days must be a number")?
            }
            "--max-hold-hours" => {
                args.max_hold_hours = value("--max-hold-hours")?
                    .parse()
                    .context("--max-hold-hours must be a number")?
            }
            "--forecast-mins" => {
                args.forecast_mins = value("--forecast-mins")?
                    .parse()
                    .context("--forecast-mins must be an integer")?
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            other => bail!("unknown argument {other:?}\n{USAGE}"),
        }
    }
    if !(args.throughput || args.quality || args.scale || args.reliability) {
        bail!("choose what to run\n{USAGE}");
    }
    if args.nodes < 12 {
        bail!("--nodes must be at least 12 (one per hardware kind)");
    }
    Ok(args)
}

fn main() {
    match parse_args().and_then(run) {
        Ok(()) => {}
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::exit(2);
        }
    }
}

fn run(args: Args) -> Result<()> {
    let placement = PlacementConfig {
        max_hold_secs: (args.max_hold_hours * 3600.0) as i64,
        ..PlacementConfig::default()
    };
    let sim_config = |nodes: usize, days: f64| {
        let config = SimConfig {
            seed: args.seed,
            nodes,
            days,
            forecast_horizon_secs: args.forecast_mins * 60,
            measured_variation: !args.nominal,
            failure_spread_sigma: args.failure_sigma,
            restart_budget: Some(args.restart_budget),
            ..SimConfig::default()
        };
        if args.uniform_failures {
            config.uniform_failures()
        } else {
            config
        }
    };
    if args.throughput {
        println!("## Planning throughput (one core, medians)\n");
        throughput_table(&[10_000], args.seed, !args.nominal);
    }
    if args.quality {
        println!(
            "\n## Placement quality: {} nodes, {} days, seed {}\n",
            args.nodes, args.days, args.seed
        );
        let config = sim_config(args.nodes, args.days);
        quality_table(
            &[
                Workload::balanced(),
                Workload::scarce_heavy(),
                Workload::bursty(),
            ],
            &config,
            placement,
            args.json,
        );
    }
    if args.scale {
        println!("\n## Scale: planning cost as the fleet grows (one core, medians)\n");
        throughput_table(&[1_000, 10_000, 100_000], args.seed, !args.nominal);
        let nodes = args.nodes * 10;
        println!(
            "\n## Scale: placement quality at {nodes} nodes, 2 days, seed {}\n",
            args.seed
        );
        let config = sim_config(nodes, 2.0);
        quality_table(&[Workload::scarce_heavy()], &config, placement, args.json);
    }
    if args.reliability {
        println!(
            "\n## Reliability-aware placement: {} nodes, {} days, seed {}\n",
            args.nodes, args.days, args.seed
        );
        let config = sim_config(args.nodes, args.days);
        let weighing = ReliabilityWeighing {
            enabled: true,
            load_slack_percent: args.load_slack_percent,
            prior_weight_hours: args.prior_hours,
            survival_target_percent: args.survival_target_percent,
        };
        reliability_table(
            &[
                Workload::balanced(),
                Workload::scarce_heavy(),
                Workload::bursty(),
            ],
            &config,
            placement,
            weighing,
            args.json,
        );
    }
    Ok(())
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort_unstable();
    samples[samples.len() / 2]
}

fn fmt_duration(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us < 1000.0 {
        format!("{us:.1} µs")
    } else if us < 1e6 {
        format!("{:.2} ms", us / 1000.0)
    } else {
        format!("{:.2} s", us / 1e6)
    }
}

/// A fleet drawn like the simulator's, with `busy` of it running jobs.
fn loaded_fleet(nodes: usize, busy: f64, seed: u64, measured_variation: bool) -> FleetIndex {
    let config = SimConfig {
        seed,
        nodes,
        days: 0.01,
        measured_variation,
        ..SimConfig::default()
    };
    let world = World::draw(&Workload::balanced(), &config);
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xb0b);
    let nodes = world.nodes.into_iter().map(|mut n| {
        if rng.random::<f64>() < busy {
            n.status = NodeAvailability::Busy;
        }
        n
    });
    FleetIndex::new(nodes).expect("generated fleet is valid")
}

fn queued_jobs(count: usize, seed: u64) -> (Vec<QueuedJob>, Vec<ExpectedDemand>) {
    let kinds = standard_job_kinds();
    let weights = Workload::balanced().mix;
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x10b);
    let now = 1_700_000_000;
    let total: f64 = weights.iter().map(|(_, w)| w).sum();
    let pick = |rng: &mut ChaCha8Rng| {
        let mut x = rng.random::<f64>() * total;
        for (name, w) in &weights {
            if x < *w {
                return kinds.iter().find(|k| k.name == *name).expect("known kind");
            }
            x -= w;
        }
        &kinds[0]
    };
    let jobs = (0..count)
        .map(|i| {
            let kind = pick(&mut rng);
            QueuedJob {
                id: JobId(i as u64),
                hardware: kind.hardware.clone(),
                checkpoint: CheckpointPolicy {
                    size_bytes: kind.checkpoint_gib << 30,
                    interval_secs: kind.interval_secs,
                    keep_checkpoints: 2,
                },
                terms: Terms {
                    max_price_per_gpu_hour: rng.random_range(20..=400) * 10_000,
                    deadline_unix: (rng.random::<f64>() < 0.3)
                        .then(|| now + rng.random_range(3600..7 * 86400)),
                    submitted_unix: now - rng.random_range(0..86400),
                    recovering_from: None,
                },
            }
        })
        .collect();
    let expected = kinds
        .iter()
        .map(|k| ExpectedDemand {
            hardware: k.hardware.clone(),
            checkpoint: CheckpointPolicy {
                size_bytes: k.checkpoint_gib << 30,
                interval_secs: k.interval_secs,
                keep_checkpoints: 2,
            },
            jobs: 2.0,
        })
        .collect();
    (jobs, expected)
}

fn time_plan(
    policy: &dyn PlacementPolicy,
    fleet: &FleetIndex,
    jobs: &[QueuedJob],
    expected: &[ExpectedDemand],
    runs: usize,
) -> (Duration, usize) {
    let now = 1_700_000_000;
    let mut placed = 0;
    let samples = (0..runs)
        .map(|_| {
            let start = Instant::now();
            let plan = policy.plan(fleet, &PlanRequest::new(jobs, now).with_expected(expected));
            let took = start.elapsed();
            placed = black_box(plan).placements.len();
            took
        })
        .collect();
    (median(samples), placed)
}

fn throughput_table(sizes: &[usize], seed: u64, measured_variation: bool) {
    let policies: [&dyn PlacementPolicy; 3] = [
        &ScarcityAware::default(),
        &FirstFit::default(),
        &BestFit::default(),
    ];
    println!("| nodes | classes | policy | full plan, 100,000 jobs | placed | one arriving job |");
    println!("| ---: | ---: | --- | ---: | ---: | ---: |");
    for &n in sizes {
        let start = Instant::now();
        let fleet = loaded_fleet(n, 0.7, seed, measured_variation);
        let index_time = start.elapsed();
        let (jobs, expected) = queued_jobs(100_000, seed);
        for policy in policies {
            let runs = if n >= 100_000 { 3 } else { 5 };
            let (full, placed) = time_plan(policy, &fleet, &jobs, &expected, runs);
            let single_runs = if n >= 100_000 { 200 } else { 2000 };
            let mut singles = Vec::with_capacity(single_runs);
            for i in 0..single_runs {
                let job = &jobs[i % 1000..i % 1000 + 1];
                let (t, _) = time_plan(policy, &fleet, job, &expected, 1);
                singles.push(t);
            }
            println!(
                "| {n} | {} | {} | {} | {placed} | {} |",
                fleet.class_count(),
                policy.name(),
                fmt_duration(full),
                fmt_duration(median(singles)),
            );
        }
        eprintln!("(index of {n} nodes built in {})", fmt_duration(index_time));
    }
}

fn quality_table(
    workloads: &[Workload],
    config: &SimConfig,
    placement: PlacementConfig,
    json: bool,
) {
    let ours = ScarcityAware { config: placement };
    let policies: [&dyn PlacementPolicy; 3] = [&ours, &FirstFit::default(), &BestFit::default()];
    println!(
        "| workload | policy | completed | failed | expired | cancelled | unfinished | \
         completion rate | goodput gpu-h | wasted gpu-h | wait mean | wait p99 | \
         deadline misses | scarce jobs waited | scarce wait mean | sim time |"
    );
    println!(
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | \
         ---: | ---: | ---: | ---: |"
    );
    let mut reports: Vec<SimReport> = Vec::new();
    for workload in workloads {
        let world = World::draw(workload, config);
        for policy in policies {
            let start = Instant::now();
            let r = simulate(policy, workload, &world, config);
            let took = start.elapsed();
            println!(
                "| {} | {} | {}/{} | {} | {} | {} | {} | {:.2}% | {:.0} | {:.0} | {} | {} | \
                 {}/{} | {}/{} | {} | {:.1} s |",
                r.workload,
                r.policy,
                r.completed,
                r.submitted,
                r.failed,
                r.expired,
                r.cancelled,
                r.unfinished_queued + r.unfinished_running,
                100.0 * r.completion_rate(),
                r.goodput_gpu_hours,
                r.wasted_gpu_hours,
                hours(r.mean_wait_secs),
                hours(r.p99_wait_secs),
                r.deadline_misses,
                r.deadline_jobs,
                r.scarce_waited,
                r.scarce_jobs,
                hours(r.scarce_mean_wait_secs),
                took.as_secs_f64()
            );
            reports.push(r);
        }
    }
    if let Some(r) = reports.first() {
        print_world(r);
    }
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&reports).expect("reports serialise")
        );
    }
}

fn print_world(r: &SimReport) {
    println!(
        "\n(world, {}: {} node crashes, {} partitions longer than the heartbeat timeout, \
         {} power cuts behind a UPS and {} without; {} job interruptions under {}, of them \
         {} by a power cut behind a UPS, each losing at most {} s of compute, and {} by one \
         without, each losing at most {} s)",
        r.workload,
        r.node_crashes,
        r.partitions,
        r.power_cuts_with_ups,
        r.power_cuts_without_ups,
        r.job_interruptions,
        r.policy,
        r.power_interruptions_with_ups,
        r.power_loss_max_secs_with_ups,
        r.power_interruptions_without_ups,
        r.power_loss_max_secs_without_ups,
    );
}

/// Scarcity-aware placement with and without reliability weighing, on one world per workload.
fn reliability_table(
    workloads: &[Workload],
    config: &SimConfig,
    placement: PlacementConfig,
    weighing: ReliabilityWeighing,
    json: bool,
) {
    let without = ScarcityAware {
        config: PlacementConfig {
            reliability: ReliabilityWeighing {
                enabled: false,
                ..weighing
            },
            ..placement
        },
    };
    let with = ScarcityAware {
        config: PlacementConfig {
            reliability: weighing,
            ..placement
        },
    };
    println!(
        "(restart budget {}, failure sigma {}, load slack {}%, prior weight {} h, \
         survival target {}%)\n",
        config
            .restart_budget
            .map_or("unlimited".to_string(), |b| b.to_string()),
        config.failure_spread_sigma,
        weighing.load_slack_percent,
        weighing.prior_weight_hours,
        weighing.survival_target_percent
    );
    println!(
        "| workload | placement | completed | failed | expired | cancelled | unfinished | \
         completion rate | goodput gpu-h | wasted gpu-h | interruptions | deadline misses | \
         scarce jobs waited | scarce wait mean |"
    );
    println!(
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | \
         ---: | ---: |"
    );
    let mut reports: Vec<SimReport> = Vec::new();
    for workload in workloads {
        let world = World::draw(workload, config);
        for (label, policy) in [("scarcity", &without), ("scarcity + reliability", &with)] {
            let mut r = simulate(policy, workload, &world, config);
            r.policy = label.to_string();
            println!(
                "| {} | {} | {}/{} | {} | {} | {} | {} | {:.2}% | {:.0} | {:.0} | {} | {}/{} | \
                 {}/{} | {} |",
                r.workload,
                r.policy,
                r.completed,
                r.submitted,
                r.failed,
                r.expired,
                r.cancelled,
                r.unfinished_queued + r.unfinished_running,
                100.0 * r.completion_rate(),
                r.goodput_gpu_hours,
                r.wasted_gpu_hours,
                r.job_interruptions,
                r.deadline_misses,
                r.deadline_jobs,
                r.scarce_waited,
                r.scarce_jobs,
                hours(r.scarce_mean_wait_secs),
            );
            reports.push(r);
        }
    }
    for r in reports.iter().step_by(2) {
        print_world(r);
    }
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&reports).expect("reports serialise")
        );
    }
}

fn hours(secs: f64) -> String {
    if secs < 3600.0 {
        format!("{:.0} min", secs / 60.0)
    } else {
        format!("{:.1} h", secs / 3600.0)
    }
}
