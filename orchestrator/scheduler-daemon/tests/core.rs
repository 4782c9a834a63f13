//! The decision core, driven with a fake clock.

use std::collections::HashSet;

mod common;
use common::*;

use mcjs::state::*;
use mcjs_client::Pubkey;
use mcjs_protocol::{Fault, JobOutcome, JobPhase, JobReport, StopReason, StopReport};
use mcjs_scheduler_daemon::{
    AccountKind, Action, DetectorConfig, Liveness, Observation, reconcile,
};

fn decide(
    now_ms: i64,
    jobs: &[(Pubkey, Job)],
    nodes: &[(Pubkey, Node)],
    live: &Liveness,
) -> Vec<Action> {
    decide_after(now_ms, jobs, nodes, live, &[])
}

/// As [`decide`], with the periods the detector could not read the chain.
fn decide_after(
    now_ms: i64,
    jobs: &[(Pubkey, Job)],
    nodes: &[(Pubkey, Node)],
    live: &Liveness,
    outages: &[(i64, i64)],
) -> Vec<Action> {
    reconcile(
        &Observation {
            now_ms,
            jobs,
            nodes,
            liveness: live,
            understaked: &HashSet::new(),
            outages,
            require_proven_hardware: false,
            standby_wanted: &Default::default(),
            standbys: &Default::default(),
        },
        &DetectorConfig::default(),
    )
    .actions
}

#[test]
fn a_queued_job_goes_to_a_live_node_that_fits() {
    let (job, n, p) = (key(10), key(20), key(30));
    let mut live = Liveness::new(T0 * MS);
    live.record(heartbeat(n, vec![]), T0 * MS).unwrap();
    let actions = decide(
        T0 * MS + 500,
        &[(job, JobBuilder::pending().0)],
        &[(n, node(p, 81_920))],
        &live,
    );
    assert_eq!(
        actions,
        vec![Action::Assign {
            job,
            node: n,
            provider: p
        }]
    );
}

#[test]
fn with_reliability_weighed_a_job_goes_to_the_node_whose_record_is_better() {
    let (job, p) = (key(10), key(30));
    let jobs = [(job, JobBuilder::pending().0)];
    for (shaky, steady) in [(key(20), key(21)), (key(21), key(20))] {
        let mut nodes = [(shaky, node(p, 81_920)), (steady, node(p, 81_920))];
        // Four failures in 100 hours against none in 100: as the program
        // counts them on each Node.
        nodes[0].1.failures = 4;
        nodes[0].1.service_secs = 100 * 3_600;
        nodes[1].1.service_secs = 100 * 3_600;
        nodes.sort_by_key(|(k, _)| *k);
        let mut live = Liveness::new(T0 * MS);
        for (n, _) in &nodes {
            live.record(heartbeat(*n, vec![]), T0 * MS).unwrap();
        }
        let placed_on = |reliability: bool| {
            let mut config = DetectorConfig::default();
            config.placement.reliability.enabled = reliability;
            let obs = Observation {
                now_ms: T0 * MS + 500,
                jobs: &jobs,
                nodes: &nodes,
                liveness: &live,
                understaked: &HashSet::new(),
                outages: &[],
                require_proven_hardware: false,
                standby_wanted: &Default::default(),
                standbys: &Default::default(),
            };
            match reconcile(&obs, &config).actions.as_slice() {
                [Action::Assign { node, .. }] => *node,
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(placed_on(true), steady, "shaky {shaky}");
        if shaky < steady {
            assert_eq!(placed_on(false), shaky, "off: the record is not read");
        }
    }
}

/// A passed hardware challenge's proof of `node`'s profile.
fn proven(mut node: Node) -> Node {
    node.challenge.proven = Some(ProvenHardware {
        gpu_count: node.hardware.gpu_count,
        vram_per_gpu_mib: node.hardware.vram_per_gpu_mib,
        held_kib_per_gpu: node.hardware.vram_per_gpu_mib * 700,
        memory_shift: 0,
        commit_secs: 9,
        held_secs: 6,
        at: T0,
        attestation: None,
    });
    node.challenge.last = Some(ChallengeResult::Passed);
    node
}

/// Every node of `nodes` heartbeating at `T0`.
fn all_alive(nodes: &[(Pubkey, Node)]) -> Liveness {
    let mut live = Liveness::new(T0 * MS);
    for (n, _) in nodes {
        live.record(heartbeat(*n, vec![]), T0 * MS).unwrap();
    }
    live
}

/// The node one round assigns a job to, if it assigns one (at most one job is queued),
/// with the Config requiring proven hardware or not.
fn placed_by_one_round(
    live: &Liveness,
    jobs: &[(Pubkey, Job)],
    nodes: &[(Pubkey, Node)],
    required: bool,
) -> Option<Pubkey> {
    let obs = Observation {
        now_ms: T0 * MS + 500,
        jobs,
        nodes,
        liveness: live,
        understaked: &HashSet::new(),
        outages: &[],
        require_proven_hardware: required,
        standby_wanted: &Default::default(),
        standbys: &Default::default(),
    };
    let decision = reconcile(&obs, &DetectorConfig::default());
    match decision.actions.as_slice() {
        [Action::Assign { node, .. }] => Some(*node),
        [] => None,
        other => panic!("{other:?}"),
    }
}

#[test]
fn with_proof_required_a_job_that_names_memory_goes_only_to_a_proven_node() {
    let (job, p) = (key(10), key(30));
    let (unproven, failed, proof) = (key(20), key(21), key(22));
    let mut failed_node = node(p, 81_920);
    failed_node.challenge.last = Some(ChallengeResult::Failed(ChallengeFailure::HeldMismatch));
    let all = [
        (unproven, node(p, 81_920)),
        (failed, failed_node),
        (proof, proven(node(p, 81_920))),
    ];
    let live = all_alive(&all);
    let placed = |jobs: &[(Pubkey, Job)], nodes: &[(Pubkey, Node)], required: bool| {
        placed_by_one_round(&live, jobs, nodes, required)
    };
    // The job asks for 20 GB: with proof required only the proven node takes it; without,
    // the reported profiles are read (and the first node fits).
    let named = [(job, JobBuilder::pending().0)];
    assert_eq!(placed(&named, &all, true), Some(proof));
    assert_eq!(placed(&named, &all, false), Some(unproven));
    // No proven node free: the job waits rather than go to one that failed or never passed.
    assert_eq!(placed(&named, &all[..2], true), None);
    // A job that names no model and no memory goes to a node of the lowest class.
    let mut any = JobBuilder::pending().0;
    any.requirements.min_vram_mib = 0;
    assert_eq!(placed(&[(job, any)], &all[..2], true), Some(unproven));
    // A job naming the lowest class's placeholder model is not sent to be refused.
    let mut odd = JobBuilder::pending().0;
    odd.requirements.min_vram_mib = 0;
    odd.requirements.gpu_models = vec![mcjs_scheduler_daemon::core::UNPROVEN_MODEL.into()];
    assert_eq!(placed(&[(job, odd)], &all[..2], true), None);
    // A node answering a challenge takes nothing, proof required or not.
    let mut busy = proven(node(p, 81_920));
    busy.challenge.in_flight = Some(HardwareChallenge::new(
        ChallengeSizing {
            fill_percent: 85,
            max_width: 32_768,
            passes: 64,
            rows_opened: 32,
            memory_shift: 0,
        },
        1,
        T0,
    ));
    for required in [true, false] {
        assert_eq!(placed(&named, &[(proof, busy.clone())], required), None);
    }
}

/// A job that asks for attested hardware is placed only where the program would take it
/// (`Node::require_attested`): a node whose standing proof attests every GPU, proof
/// required by the Config or not; never proposed to a node that would be refused.
#[test]
fn a_job_that_asks_for_attested_hardware_is_placed_only_on_a_fully_attested_node() {
    let (job, p) = (key(10), key(30));
    let (plain, partly, fully) = (key(20), key(21), key(22));
    let attested = |mut node: Node, ids: &[u64]| {
        let proof = node.challenge.proven.as_mut().expect("proven first");
        let mut record = GpuAttestation {
            chip: [0; MAX_CHIP_NAME],
            device_ids: [0; MAX_ATTESTED_GPUS],
            evidence: [1; 32],
        };
        record.chip[..5].copy_from_slice(b"GH100");
        record.device_ids[..ids.len()].copy_from_slice(ids);
        proof.attestation = Some(record);
        node
    };
    let gpus = node(p, 81_920).hardware.gpu_count as usize;
    let every: Vec<u64> = (1..=gpus as u64).collect();
    let mut all_but_one = every.clone();
    all_but_one[gpus - 1] = 0;
    // Cheapest first: the planner would pick the plain node, then the partly attested one.
    let priced = |mut node: Node, price: u64| {
        node.price_per_gpu_hour = price;
        node
    };
    let all = [
        (plain, priced(proven(node(p, 81_920)), 1)),
        (
            partly,
            priced(attested(proven(node(p, 81_920)), &all_but_one), 2),
        ),
        (fully, priced(attested(proven(node(p, 81_920)), &every), 3)),
    ];
    let live = all_alive(&all);
    let placed = |jobs: &[(Pubkey, Job)], nodes: &[(Pubkey, Node)], required: bool| {
        placed_by_one_round(&live, jobs, nodes, required)
    };
    let mut asks = JobBuilder::pending().0;
    asks.requirements.attested = true;
    let asks = [(job, asks)];
    for required in [false, true] {
        assert_eq!(
            placed(&asks, &all, required),
            Some(fully),
            "required {required}"
        );
        assert_eq!(
            placed(&asks, &all[..2], required),
            None,
            "required {required}"
        );
    }
    // A job that does not ask takes the first node it fits, attested or not.
    let plain_job = [(job, JobBuilder::pending().0)];
    let first = placed(&plain_job, &all, false);
    assert!(first.is_some_and(|n| n != fully), "{first:?}");
}

#[test]
fn a_node_on_battery_gets_no_job_until_it_is_back_on_line() {
    use mcjs_protocol::NodePower;
    let (job, n, p) = (key(10), key(20), key(30));
    let jobs = [(job, JobBuilder::pending().0)];
    let nodes = [(n, node(p, 81_920))];
    for (power, placed) in [
        (None, true),
        (Some(NodePower::OnLine), true),
        (Some(NodePower::OnBattery), false),
        (Some(NodePower::LowBattery), false),
    ] {
        let mut live = Liveness::new(T0 * MS);
        let mut beat = heartbeat(n, vec![]);
        beat.power = power;
        live.record(beat, T0 * MS).unwrap();
        let actions = decide(T0 * MS + 500, &jobs, &nodes, &live);
        assert_eq!(
            actions
                == vec![Action::Assign {
                    job,
                    node: n,
                    provider: p
                }],
            placed,
            "{power:?}: {actions:?}"
        );
        // Alive all the same: on battery is no failure.
        assert!(
            actions
                .iter()
                .all(|a| !matches!(a, Action::ReportFailure { .. }))
        );
    }
}

#[test]
fn a_node_that_never_sent_a_heartbeat_gets_no_job_and_the_job_says_why() {
    let (job, n, p) = (key(10), key(20), key(30));
    let live = Liveness::new(T0 * MS);
    let jobs = [(job, JobBuilder::pending().0)];
    let nodes = [(n, node(p, 81_920))];
    let obs = Observation {
        now_ms: T0 * MS,
        jobs: &jobs,
        nodes: &nodes,
        liveness: &live,
        understaked: &HashSet::new(),
        outages: &[],
        require_proven_hardware: false,
        standby_wanted: &Default::default(),
        standbys: &Default::default(),
    };
    let decision = reconcile(&obs, &DetectorConfig::default());
    assert!(decision.actions.is_empty());
    assert_eq!(decision.waiting.len(), 1);
    assert_eq!(decision.waiting[0].job, job);
}

#[test]
fn a_job_that_fits_no_node_waits_with_a_reason() {
    let (job, n, p) = (key(10), key(20), key(30));
    let mut live = Liveness::new(T0 * MS);
    live.record(heartbeat(n, vec![]), T0 * MS).unwrap();
    let jobs = [(job, JobBuilder::pending().needing_vram(100_000).0)];
    let nodes = [(n, node(p, 81_920))];
    let obs = Observation {
        now_ms: T0 * MS,
        jobs: &jobs,
        nodes: &nodes,
        liveness: &live,
        understaked: &HashSet::new(),
        outages: &[],
        require_proven_hardware: false,
        standby_wanted: &Default::default(),
        standbys: &Default::default(),
    };
    let decision = reconcile(&obs, &DetectorConfig::default());
    assert!(decision.actions.is_empty());
    assert!(
        decision.waiting[0].reason.to_lowercase().contains("vram")
            || decision.waiting[0].reason.contains("GB"),
        "reason: {}",
        decision.waiting[0].reason
    );
}

#[test]
fn a_silent_node_is_reported_lost_after_the_timeout_and_not_before() {
    let (job, n, p) = (key(10), key(20), key(30));
    let mut live = Liveness::new(T0 * MS);
    live.record(heartbeat(n, vec![]), T0 * MS).unwrap();
    let jobs = [(job, JobBuilder::pending().running_on(n, p, 4, T0).0)];
    let nodes = [(n, busy(node(p, 81_920), job))];
    assert!(decide(T0 * MS + 3_000, &jobs, &nodes, &live).is_empty());
    let actions = decide(T0 * MS + 3_001, &jobs, &nodes, &live);
    assert!(
        matches!(
            &actions[..],
            [Action::ReportFailure { job: j, node: nn, provider: pp, generation: 4, cause: FailureCause::NodeLost, .. }]
                if *j == job && *nn == n && *pp == p
        ),
        "{actions:?}"
    );
}

/// A job whose output its node attested has finished running: its node
/// going silent reports nothing (the program would refuse it); the
/// verification duties complete it instead.
#[test]
fn a_silent_node_whose_job_attested_its_output_is_not_reported() {
    let (job, n, p) = (key(10), key(20), key(30));
    let mut live = Liveness::new(T0 * MS);
    live.record(heartbeat(n, vec![]), T0 * MS).unwrap();
    let mut running = JobBuilder::pending().running_on(n, p, 4, T0).0;
    running.output_hash = Some([3; 32]);
    let jobs = [(job, running)];
    let nodes = [(n, busy(node(p, 81_920), job))];
    assert!(decide(T0 * MS + 60_000, &jobs, &nodes, &live).is_empty());
}

#[test]
fn an_agent_whose_stream_dropped_is_lost_after_the_grace_unless_it_said_goodbye_or_came_back() {
    let (job, n, p) = (key(10), key(20), key(30));
    let grace = DetectorConfig::default().disconnect_grace_ms;
    let jobs = [(job, JobBuilder::pending().running_on(n, p, 4, T0).0)];
    let nodes = [(n, busy(node(p, 81_920), job))];
    let dropped = T0 * MS + 1_000;
    let mut live = Liveness::new(T0 * MS);
    live.record(heartbeat(n, vec![]), T0 * MS + 900).unwrap();
    live.stream_opened(n, 1);
    live.stream_closed(&n, 1, false, dropped);
    assert!(
        decide(dropped + grace - 1, &jobs, &nodes, &live).is_empty(),
        "within the grace"
    );
    let actions = decide(dropped + grace, &jobs, &nodes, &live);
    assert!(
        matches!(
            &actions[..],
            [Action::ReportFailure {
                cause: FailureCause::NodeLost,
                generation: 4,
                ..
            }]
        ),
        "{actions:?}"
    );
    // Reconnected within the grace: judged by the heartbeat timeout again.
    let mut back = live.clone();
    back.record(heartbeat(n, vec![]), dropped + 100).unwrap();
    back.stream_opened(n, 2);
    assert!(decide(dropped + grace, &jobs, &nodes, &back).is_empty());
    // A goodbye: the agent restarts on purpose; the job waits for it the
    // restart grace, not the heartbeat timeout.
    let restart = DetectorConfig::default().restart_grace_ms;
    let mut bye = Liveness::new(T0 * MS);
    bye.record(heartbeat(n, vec![]), T0 * MS + 900).unwrap();
    bye.stream_opened(n, 1);
    bye.stream_closed(&n, 1, true, dropped);
    assert!(decide(T0 * MS + 900 + 3_001, &jobs, &nodes, &bye).is_empty());
    assert!(decide(T0 * MS + 900 + restart, &jobs, &nodes, &bye).is_empty());
    assert!(!decide(T0 * MS + 900 + restart + 1, &jobs, &nodes, &bye).is_empty());
    // Back: the usual timeout again.
    bye.record(heartbeat(n, vec![]), dropped + 5_000).unwrap();
    bye.stream_opened(n, 2);
    assert!(!decide(dropped + 5_000 + 3_001, &jobs, &nodes, &bye).is_empty());
}

#[test]
fn a_restarted_scheduler_gives_every_node_one_timeout_before_judging() {
    let (job, n, p) = (key(10), key(20), key(30));
    // The scheduler restarted long after the job started and has heard nothing yet.
    let restart = (T0 + 600) * MS;
    let live = Liveness::new(restart);
    let jobs = [(job, JobBuilder::pending().running_on(n, p, 1, T0 + 590).0)];
    let nodes = [(n, busy(node(p, 81_920), job))];
    assert!(decide(restart + 2_000, &jobs, &nodes, &live).is_empty());
    assert!(!decide(restart + 3_500, &jobs, &nodes, &live).is_empty());
}

/// Every row of the failure table the agent can report, through the
/// daemon: the cause sent to the chain, and never a slash for the job's own
/// doing.
#[test]
fn the_agents_stop_report_is_judged_by_the_failure_table() {
    let (job, n, p) = (key(10), key(20), key(30));
    let jobs = [(job, JobBuilder::pending().running_on(n, p, 2, T0).0)];
    let nodes = [(n, busy(node(p, 81_920), job))];
    let stopped = |generation, phase, stop| JobReport {
        job: job.to_string(),
        generation,
        phase,
        last_checkpoint: None,
        checkpoint_overdue: false,
        exit: Some(StopReport {
            stop,
            last_logs: vec!["boom".into()],
        }),
    };
    let cause_for = |report: JobReport| {
        let mut live = Liveness::new(T0 * MS);
        live.record(heartbeat(n, vec![report]), T0 * MS + 10)
            .unwrap();
        match decide(T0 * MS + 20, &jobs, &nodes, &live).as_slice() {
            [Action::ReportFailure { cause, stop, .. }] => Some((*stop, *cause)),
            [] => None,
            other => panic!("{other:?}"),
        }
    };
    use FailureCause as C;
    use StopReason as S;
    let rows = [
        (S::Exited { code: 0 }, None),
        (S::Exited { code: 2 }, Some(C::JobFatal)),
        (S::Exited { code: 75 }, Some(C::JobYielded)),
        (S::Exited { code: 1 }, Some(C::JobError)),
        (S::Exited { code: 86 }, Some(C::JobError)),
        (S::Exited { code: 137 }, Some(C::JobError)),
        (S::Exited { code: 143 }, Some(C::JobError)),
        (S::OutOfMemory, Some(C::JobError)),
        (S::ImageMissing, Some(C::JobError)),
        (S::SpecMissing, Some(C::JobFatal)),
        (S::SpecMismatch, Some(C::JobFatal)),
        (S::SpecUnusable, Some(C::JobFatal)),
        (S::OutputMissing, Some(C::JobError)),
        (S::InputRejected, Some(C::JobError)),
        (S::StoreUnavailable, Some(C::JobError)),
        (S::RestoreFailed, Some(C::JobError)),
        (S::StartRefused, Some(C::JobError)),
        (S::ContractBroken, Some(C::JobError)),
        (S::CheckpointMissed, Some(C::JobError)),
        (S::PowerLost, Some(C::JobYielded)),
        (S::CapReached, Some(C::JobFatal)),
        (S::StoppedByAgent, Some(C::ContainerDied)),
        (S::EngineFailure, Some(C::ContainerDied)),
        (S::NodeDiskFull, Some(C::ContainerDied)),
    ];
    for (stop, cause) in rows {
        let got = cause_for(stopped(2, JobPhase::Exited, stop));
        assert_eq!(got, cause.map(|c| (stop, c)), "{stop:?}");
        // Only the provider's own faults reach a slashing cause.
        let slashing = cause.is_some_and(|c| c.is_infrastructure());
        assert_eq!(slashing, stop.fault() == Some(Fault::Provider), "{stop:?}");
    }
    // Rejected data is the job's, with or without the reason attached.
    let mut rejected = stopped(2, JobPhase::DataRejected, S::InputRejected);
    assert_eq!(
        cause_for(rejected.clone()),
        Some((S::InputRejected, C::JobError))
    );
    rejected.exit = None;
    assert_eq!(cause_for(rejected), Some((S::InputRejected, C::JobError)));
    // A report about an older assignment says nothing about this one.
    assert_eq!(
        cause_for(stopped(1, JobPhase::Exited, S::EngineFailure)),
        None
    );
}

#[test]
fn every_cause_of_the_table_is_the_programs_cause_of_the_same_name() {
    use mcjs_protocol::ChainCause;
    for cause in [
        ChainCause::NodeLost,
        ChainCause::ContainerDied,
        ChainCause::CheckpointOverdue,
        ChainCause::JobError,
        ChainCause::JobYielded,
        ChainCause::JobFatal,
    ] {
        let program = mcjs_scheduler_daemon::core::failure_cause(cause);
        let name = serde_json::to_value(cause).unwrap();
        assert_eq!(mcjs_client::cause_name(&program), name.as_str().unwrap());
    }
}

#[test]
fn a_job_that_writes_no_checkpoint_is_its_own_fault_and_silence_on_chain_the_nodes() {
    let (job, n, p) = (key(10), key(20), key(30));
    let jobs = [(job, JobBuilder::pending().running_on(n, p, 1, T0).0)];
    let nodes = [(n, busy(node(p, 81_920), job))];
    let at = (T0 + 121) * MS;
    let report = |overdue| JobReport {
        job: job.to_string(),
        generation: 1,
        phase: JobPhase::Running,
        last_checkpoint: None,
        checkpoint_overdue: overdue,
        exit: None,
    };
    for (overdue, stop, cause) in [
        (true, StopReason::CheckpointMissed, FailureCause::JobError),
        (
            false,
            StopReason::AttestationOverdue,
            FailureCause::CheckpointOverdue,
        ),
    ] {
        let mut live = Liveness::new(T0 * MS);
        live.record(heartbeat(n, vec![report(overdue)]), at)
            .unwrap();
        let actions = decide(at, &jobs, &nodes, &live);
        assert!(
            matches!(&actions[..], [Action::ReportFailure { stop: s, cause: c, .. }] if *s == stop && *c == cause),
            "{actions:?}"
        );
    }
    assert_eq!(
        StopReason::CheckpointMissed.fault(),
        Some(Fault::Job(JobOutcome::Retry))
    );
}

#[test]
fn a_start_that_times_out_while_staging_is_the_jobs_and_otherwise_the_nodes() {
    let (job, n, p) = (key(10), key(20), key(30));
    let jobs = [(job, JobBuilder::pending().assigned_to(n, p, T0).0)];
    let nodes = [(n, busy(node(p, 81_920), job))];
    let at = T0 * MS + DetectorConfig::default().start_timeout_ms + 1;
    for (phase, stop, cause) in [
        (
            JobPhase::Staging,
            StopReason::StagingTooSlow,
            FailureCause::JobError,
        ),
        (
            JobPhase::Running,
            StopReason::NeverStarted,
            FailureCause::NodeLost,
        ),
    ] {
        let mut live = Liveness::new(T0 * MS);
        let report = JobReport {
            job: job.to_string(),
            generation: 1,
            phase,
            last_checkpoint: None,
            checkpoint_overdue: false,
            exit: None,
        };
        live.record(heartbeat(n, vec![report]), at).unwrap();
        let actions = decide(at, &jobs, &nodes, &live);
        assert!(
            matches!(&actions[..], [Action::ReportFailure { stop: s, cause: c, .. }] if *s == stop && *c == cause),
            "{phase:?}: {actions:?}"
        );
    }
}

#[test]
fn a_job_that_stops_checkpointing_is_overdue_after_two_intervals() {
    let (job, n, p) = (key(10), key(20), key(30));
    let jobs = [(job, JobBuilder::pending().running_on(n, p, 1, T0).0)];
    let nodes = [(n, busy(node(p, 81_920), job))];
    let mut live = Liveness::new(T0 * MS);
    let at = (T0 + 120) * MS;
    live.record(heartbeat(n, vec![]), at).unwrap();
    assert!(decide(at, &jobs, &nodes, &live).is_empty());
    live.record(heartbeat(n, vec![]), at + 1).unwrap();
    let actions = decide(at + 1, &jobs, &nodes, &live);
    assert!(
        matches!(
            &actions[..],
            [Action::ReportFailure {
                cause: FailureCause::CheckpointOverdue,
                ..
            }]
        ),
        "{actions:?}"
    );
}

/// A chain outage (the detector could not read it, and the node may not
/// have been able to attest) is not counted as lateness: only the time the
/// chain was readable is; a short outage excuses only its own length.
#[test]
fn the_time_the_chain_could_not_be_read_is_not_counted_against_a_job() {
    let (job, n, p) = (key(10), key(20), key(30));
    let jobs = [(job, JobBuilder::pending().running_on(n, p, 1, T0).0)];
    let nodes = [(n, busy(node(p, 81_920), job))];
    let mut live = Liveness::new(T0 * MS);
    // Two intervals (120 s) have passed, 60 s of them with the chain unreadable.
    let at = (T0 + 121) * MS;
    live.record(heartbeat(n, vec![]), at).unwrap();
    let outage = [((T0 + 30) * MS, (T0 + 90) * MS)];
    assert!(decide_after(at, &jobs, &nodes, &live, &outage).is_empty());
    // Once 120 s of readable time have passed, it is late.
    let later = (T0 + 181) * MS;
    live.record(heartbeat(n, vec![]), later).unwrap();
    let actions = decide_after(later, &jobs, &nodes, &live, &outage);
    assert!(
        matches!(
            &actions[..],
            [Action::ReportFailure {
                cause: FailureCause::CheckpointOverdue,
                ..
            }]
        ),
        "{actions:?}"
    );
    // An outage before the job's last progress excuses nothing.
    let before = [((T0 - 600) * MS, (T0 - 1) * MS)];
    assert_eq!(decide_after(at, &jobs, &nodes, &live, &before).len(), 1);

    // A start is judged the same way.
    let assigned = [(job, JobBuilder::pending().assigned_to(n, p, T0).0)];
    let timeout = DetectorConfig::default().start_timeout_ms;
    let at = T0 * MS + timeout + 1;
    let mut live = Liveness::new(T0 * MS);
    live.record(heartbeat(n, vec![]), at).unwrap();
    assert_eq!(decide(at, &assigned, &nodes, &live).len(), 1);
    let outage = [(T0 * MS + 1_000, T0 * MS + 3_000)];
    assert!(decide_after(at, &assigned, &nodes, &live, &outage).is_empty());
}

#[test]
fn excused_time_is_the_overlap_with_each_outage() {
    use mcjs_scheduler_daemon::core::excused_ms;
    let outages = [(0, 10), (20, 30), (40, 50)];
    assert_eq!(excused_ms(&outages, 5, 45), 5 + 10 + 5);
    assert_eq!(excused_ms(&outages, 10, 20), 0);
    assert_eq!(excused_ms(&outages, 60, 100), 0);
    assert_eq!(excused_ms(&[], 0, 100), 0);
    assert_eq!(excused_ms(&[(i64::MIN, i64::MAX)], 0, 100), 100);
}

#[test]
fn a_job_never_goes_to_a_node_being_reported() {
    let (running, queued, n, p) = (key(10), key(11), key(20), key(30));
    let mut live = Liveness::new(T0 * MS);
    live.record(heartbeat(n, vec![]), T0 * MS).unwrap();
    // The chain already shows the node available (e.g. it was released), but
    // its old assignment is still being reported in this round.
    let jobs = [
        (
            running,
            JobBuilder::pending().assigned_to(n, p, T0 - 10_000).0,
        ),
        (queued, JobBuilder::pending().0),
    ];
    let nodes = [(n, node(p, 81_920))];
    let actions = decide(T0 * MS, &jobs, &nodes, &live);
    assert_eq!(actions.len(), 1, "{actions:?}");
    assert!(matches!(actions[0], Action::ReportFailure { .. }));
}

#[test]
fn a_lost_nodes_job_is_placed_again_in_the_same_round_unless_it_is_at_its_cap() {
    let (job, lost, spare, p, q) = (key(10), key(20), key(21), key(30), key(31));
    let mut live = Liveness::new(T0 * MS);
    live.record(heartbeat(lost, vec![]), T0 * MS).unwrap();
    live.record(heartbeat(spare, vec![]), T0 * MS + 3_000)
        .unwrap();
    let nodes = [(lost, busy(node(p, 81_920), job)), (spare, node(q, 81_920))];
    let now = T0 * MS + 3_001;
    // Progress accrued since the last checkpoint is settled by the report.
    let mut running = JobBuilder::pending().running_on(lost, p, 4, T0).0;
    running.accrued = 1_000;
    let jobs = [(job, running)];
    let actions = decide(now, &jobs, &nodes, &live);
    assert!(
        matches!(
            &actions[..],
            [
                Action::ReportFailure { job: j, node: n, .. },
                Action::Assign { job: a, node: to, .. },
            ] if *j == job && *n == lost && *a == job && *to == spare
        ),
        "{actions:?}"
    );
    // Out of restarts: a lost node is its provider's failure, which uses
    // none, so the job is placed again all the same.
    let mut spent = JobBuilder::pending().running_on(lost, p, 4, T0).0;
    spent.restarts_used = spent.terms.restart_budget;
    let actions = decide(now, &[(job, spent)], &nodes, &live);
    assert!(
        matches!(
            &actions[..],
            [Action::ReportFailure { .. }, Action::Assign { .. }]
        ),
        "{actions:?}"
    );
    // Billed its whole maximum duration: the program ends it at the
    // report, so nothing is placed.
    let mut capped = JobBuilder::pending().running_on(lost, p, 4, T0).0;
    capped.billed_secs = u64::from(capped.terms.max_duration_secs);
    let actions = decide(now, &[(job, capped)], &nodes, &live);
    assert!(
        matches!(&actions[..], [Action::ReportFailure { .. }]),
        "{actions:?}"
    );
}

#[test]
fn a_provider_below_the_minimum_stake_gets_nothing_and_holds_up_no_one() {
    let (job, a, b, p, q) = (key(10), key(20), key(21), key(30), key(31));
    let mut live = Liveness::new(T0 * MS);
    live.record(heartbeat(a, vec![]), T0 * MS).unwrap();
    live.record(heartbeat(b, vec![]), T0 * MS).unwrap();
    let jobs = [(job, JobBuilder::pending().0)];
    let nodes = [(a, node(p, 81_920)), (b, node(q, 81_920))];
    for slashed in [p, q] {
        let understaked = HashSet::from([slashed]);
        let actions = reconcile(
            &Observation {
                now_ms: T0 * MS,
                jobs: &jobs,
                nodes: &nodes,
                liveness: &live,
                understaked: &understaked,
                outages: &[],
                require_proven_hardware: false,
                standby_wanted: &Default::default(),
                standbys: &Default::default(),
            },
            &DetectorConfig::default(),
        )
        .actions;
        let other = if slashed == p { b } else { a };
        assert!(
            matches!(&actions[..], [Action::Assign { node, .. }] if *node == other),
            "{actions:?}"
        );
    }
}

#[test]
fn the_same_observation_gives_the_same_decision() {
    let mut live = Liveness::new(T0 * MS);
    let mut jobs = Vec::new();
    let mut nodes = Vec::new();
    for i in 0..20u8 {
        jobs.push((
            key(100 + i),
            JobBuilder::pending()
                .needing_vram(10_000 + 4_000 * u32::from(i))
                .0,
        ));
    }
    for i in 0..10u8 {
        let n = key(200 + i);
        live.record(heartbeat(n, vec![]), T0 * MS).unwrap();
        nodes.push((n, node(key(30), 20_000 + 8_000 * u32::from(i))));
    }
    let a = decide(T0 * MS, &jobs, &nodes, &live);
    let b = decide(T0 * MS, &jobs, &nodes, &live);
    assert_eq!(a, b);
    assert_eq!(a.len(), 10, "every node takes one job: {a:?}");
    let mut used: Vec<_> = a
        .iter()
        .map(|x| match x {
            Action::Assign { node, .. } => *node,
            _ => unreachable!(),
        })
        .collect();
    used.sort();
    used.dedup();
    assert_eq!(used.len(), 10, "no node is booked twice");
}

/// A node account whose profile the scheduler cannot use, with the words that name the fault.
fn malformed_nodes(provider: Pubkey) -> Vec<(Node, &'static str)> {
    let with = |f: fn(&mut HardwareProfile)| {
        let mut n = node(provider, 81_920);
        f(&mut n.hardware);
        n
    };
    let mut overready = node(provider, 81_920);
    overready.readiness = 200;
    vec![
        (
            with(|h| h.gpu_model = "NVIDIA  RTX_A6000".into()),
            "is not normalised",
        ),
        (with(|h| h.gpu_count = 0), "gpu count 0"),
        (overready, "readiness 200"),
        (with(|h| h.vram_per_gpu_mib = u32::MAX), "of vram per gpu"),
        (with(|h| h.disk_gib = u32::MAX), "of free disk"),
        (with(|h| h.ram_mib = u32::MAX), "of ram"),
        (
            with(|h| h.checkpoint_write_mibps = u32::MAX),
            "of checkpoint writes",
        ),
    ]
}

#[test]
fn malformed_nodes_are_skipped_by_name_and_every_job_still_goes_to_a_good_node() {
    let p = key(30);
    let mut live = Liveness::new(T0 * MS);
    let mut nodes = Vec::new();
    let mut expected_skips = Vec::new();
    // Bad nodes first, one of each fault: before, the first of them stopped every placement.
    for (i, (bad, why)) in malformed_nodes(p).into_iter().enumerate() {
        let k = key(150 + i as u8);
        expected_skips.push((k, why));
        nodes.push((k, bad));
    }
    let good: Vec<Pubkey> = (0..3).map(|i| key(200 + i)).collect();
    for &k in &good {
        nodes.push((k, node(p, 81_920)));
    }
    for (k, _) in &nodes {
        live.record(heartbeat(*k, vec![]), T0 * MS).unwrap();
    }
    let jobs: Vec<(Pubkey, Job)> = (0..3)
        .map(|i| (key(100 + i), JobBuilder::pending().0))
        .collect();

    let decision = reconcile(
        &Observation {
            now_ms: T0 * MS,
            jobs: &jobs,
            nodes: &nodes,
            liveness: &live,
            understaked: &HashSet::new(),
            outages: &[],
            require_proven_hardware: false,
            standby_wanted: &Default::default(),
            standbys: &Default::default(),
        },
        &DetectorConfig::default(),
    );

    let mut used: Vec<Pubkey> = decision
        .actions
        .iter()
        .map(|a| match a {
            Action::Assign { node, .. } => *node,
            other => panic!("{other:?}"),
        })
        .collect();
    used.sort();
    assert_eq!(used, good, "every job is placed, only on good nodes");
    assert!(decision.waiting.is_empty(), "{:?}", decision.waiting);
    assert_eq!(decision.skipped.len(), expected_skips.len());
    for ((account, why), skipped) in expected_skips.iter().zip(&decision.skipped) {
        assert_eq!(skipped.kind, AccountKind::Node);
        assert_eq!(skipped.account, *account);
        assert!(
            skipped.reason.contains(why),
            "{why:?} in {}",
            skipped.reason
        );
    }
}

#[test]
fn a_malformed_job_is_skipped_by_name_and_the_others_are_placed() {
    let p = key(30);
    let mut live = Liveness::new(T0 * MS);
    let nodes: Vec<(Pubkey, Node)> = (0..2).map(|i| (key(200 + i), node(p, 81_920))).collect();
    for (k, _) in &nodes {
        live.record(heartbeat(*k, vec![]), T0 * MS).unwrap();
    }
    let mut unnormalised = JobBuilder::pending().0;
    unnormalised.requirements.gpu_models = vec!["NVIDIA  RTX_A6000".into()];
    unnormalised.submitted_at = T0 - 3_600;
    let mut no_gpus = JobBuilder::pending().0;
    no_gpus.requirements.gpu_count = 0;
    no_gpus.submitted_at = T0 - 3_600;
    // Sizes that overflowed the old conversion of a bandwidth back into a checkpoint size.
    let mut absurd = JobBuilder::pending().0;
    absurd.requirements.min_checkpoint_write_mibps = u32::MAX;
    absurd.terms.checkpoint_interval_secs = u32::MAX;
    let (good_a, good_b) = (key(110), key(111));
    let jobs = vec![
        (key(100), unnormalised),
        (key(101), no_gpus),
        (key(102), absurd),
        (good_a, JobBuilder::pending().0),
        (good_b, JobBuilder::pending().0),
    ];

    let decision = reconcile(
        &Observation {
            now_ms: T0 * MS,
            jobs: &jobs,
            nodes: &nodes,
            liveness: &live,
            understaked: &HashSet::new(),
            outages: &[],
            require_proven_hardware: false,
            standby_wanted: &Default::default(),
            standbys: &Default::default(),
        },
        &DetectorConfig::default(),
    );

    let mut placed: Vec<Pubkey> = decision
        .actions
        .iter()
        .map(|a| match a {
            Action::Assign { job, .. } => *job,
            other => panic!("{other:?}"),
        })
        .collect();
    placed.sort();
    assert_eq!(placed, vec![good_a, good_b]);
    let skipped: Vec<(Pubkey, AccountKind, &str)> = decision
        .skipped
        .iter()
        .map(|s| (s.account, s.kind, s.reason.as_str()))
        .collect();
    assert_eq!(
        skipped,
        vec![
            (
                key(100),
                AccountKind::Job,
                "invalid job: gpu model \"NVIDIA  RTX_A6000\" is not normalised: write \"rtx-a6000\""
            ),
            (
                key(101),
                AccountKind::Job,
                "invalid job: gpu_count is 0: a job needs at least one gpu"
            ),
        ]
    );
    // The absurd one is valid, only unplaceable: it waits, saying what no node has.
    assert_eq!(decision.waiting.len(), 1, "{:?}", decision.waiting);
    assert_eq!(decision.waiting[0].job, key(102));
    assert!(
        decision.waiting[0]
            .reason
            .contains("checkpoint write bandwidth"),
        "{}",
        decision.waiting[0].reason
    );
}

// ----- verified progress -----

mod verify {
    use super::*;
    use mcjs_client::pda;
    use mcjs_client::program::state::{CheckerPool, POOL_MEMBERSHIP_SECS, PoolMember};
    use mcjs_scheduler_daemon::verify::{
        VerifyAction, VerifyObservation, choose_checkers, needs_chain_read, passed_over,
        verify_duties,
    };
    use std::collections::HashMap;

    const MODEL: &str = "a100-sxm4-80gb";

    /// The test Config's parameters, kept for the observations that borrow them.
    fn params_ref() -> &'static ConfigParams {
        static PARAMS: std::sync::OnceLock<ConfigParams> = std::sync::OnceLock::new();
        PARAMS.get_or_init(params)
    }

    const ATTEST_SLOT: u64 = 1_000;

    /// A verified job on provider 30's node 20, its latest interval attested
    /// at `ATTEST_SLOT` by generation 1.
    fn verified_job(ppm: u32) -> Job {
        let mut job = JobBuilder::running_on(JobBuilder::pending(), key(20), key(30), 1, T0).0;
        job.verification_ppm = ppm;
        job.holds_payment = true;
        job.checkpoint_count = 1;
        job.last_attest_slot = ATTEST_SLOT;
        job.last_checkpoint = Some(CheckpointRecord {
            hash: [9; 32],
            epoch: 0,
            step: 64,
            time: T0 + 10,
            generation: 1,
        });
        job
    }

    fn segment(job: Pubkey, state: SegmentState) -> Segment {
        Segment {
            job,
            provider: key(30),
            provider_payout: key(31),
            node: key(20),
            generation: 1,
            commission_bps: 500,
            gross: 0,
            fees_paid: 0,
            state,
            open_verifications: 0,
            rent_payer: key(99),
            bump: 255,
            start: None,
            verified_to: None,
            gpu_model: "a100-sxm4-80gb".into(),
            earned: 0,
            verified_earned: 0,
            withheld: 0,
            disproven: false,
        }
    }

    /// SlotHashes data: the attestation's slot and the next one.
    fn slot_hashes(next: [u8; 32]) -> Vec<u8> {
        let mut data = 2u64.to_le_bytes().to_vec();
        data.extend((ATTEST_SLOT + 1).to_le_bytes());
        data.extend(next);
        data.extend(ATTEST_SLOT.to_le_bytes());
        data.extend([0u8; 32]);
        data
    }

    struct World {
        jobs: Vec<(Pubkey, Job)>,
        nodes: Vec<(Pubkey, Node)>,
        providers: HashMap<Pubkey, Provider>,
        verifications: Vec<(Pubkey, Verification)>,
        segments: Vec<(Pubkey, Segment)>,
        slot_hashes: Vec<u8>,
        /// The checker pool of the model, as the agents entered it.
        pools: Vec<(Pubkey, CheckerPool)>,
        now: i64,
    }

    impl World {
        /// The job's provider 30 and three others (40, 50, 60), one node
        /// each, every node in the model's checker pool.
        fn new(ppm: u32) -> Self {
            let job = key(10);
            let mut nodes = vec![(key(20), busy(node(key(30), 81_920), job))];
            let mut providers = HashMap::from([(key(30), provider(200_000_000))]);
            for (n, p) in [(21, 40), (22, 50), (23, 60)] {
                nodes.push((key(n), node(key(p), 81_920)));
                providers.insert(key(p), provider(200_000_000));
            }
            let mut w = Self {
                jobs: vec![(job, verified_job(ppm))],
                nodes,
                providers,
                verifications: vec![],
                segments: vec![(pda::segment(&job, 1), segment(job, SegmentState::OnNode))],
                slot_hashes: slot_hashes([7; 32]),
                pools: vec![(
                    pda::checker_pool(MODEL),
                    CheckerPool {
                        gpu_model: MODEL.into(),
                        bump: 255,
                        members: vec![],
                    },
                )],
                now: T0 + 11,
            };
            for n in w.nodes.clone() {
                w.enter(n.0);
            }
            w
        }

        /// `node`'s agent enters it in the pool now, at its provider's stake.
        fn enter(&mut self, node: Pubkey) {
            let (_, n) = self.nodes.iter().find(|(k, _)| *k == node).unwrap();
            let member = PoolMember {
                provider: n.provider,
                node,
                weight: self.providers[&n.provider].committed_stake(),
                renewed_at: self.now,
            };
            self.pools[0].1.enter(member, self.now).unwrap();
        }

        fn observation(&self) -> VerifyObservation<'_> {
            VerifyObservation {
                now: self.now,
                params: params_ref(),
                jobs: &self.jobs,
                nodes: &self.nodes,
                providers: &self.providers,
                verifications: &self.verifications,
                segments: &self.segments,
                slot_hashes: &self.slot_hashes,
                pools: &self.pools,
            }
        }

        fn duties(&self) -> Vec<VerifyAction> {
            verify_duties(&self.observation())
        }
    }

    /// 32 well-mixed bytes from `seed` (splitmix64), standing in for a
    /// slot hash.
    fn slot_hash_like(seed: u64) -> [u8; 32] {
        let mut state = seed;
        let mut out = [0u8; 32];
        for chunk in out.chunks_mut(8) {
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            chunk.copy_from_slice(&(z ^ (z >> 31)).to_le_bytes());
        }
        out
    }

    /// The checkers are the pool's draw, as the program checks it: a node
    /// whose entry has lapsed (its agent gone a day) is not drawn; one now
    /// of another GPU model than the attester ran the interval on is passed
    /// over and shown (its accounts go with the opening). The model is the
    /// one the segment kept from the assignment: the attester renaming its
    /// node since changes nothing.
    #[test]
    fn checkers_are_the_pools_draw_of_the_attesters_gpu_model() {
        let mut w = World::new(PPM);
        w.nodes[0].1.hardware.gpu_model = "rtx-6000-ada".into();
        w.pools[0].1.members[1].renewed_at = w.now - POOL_MEMBERSHIP_SECS - 1;
        w.nodes[2].1.hardware.gpu_model = "rtx-6000-ada".into();
        w.nodes[2].1.hardware.vram_per_gpu_mib = 90_000;
        // Only 23 (provider 60) is left: fewer than two providers.
        assert!(w.duties().is_empty());
        w.enter(key(21));
        let duties = w.duties();
        let [VerifyAction::Open { checkers, draw, .. }] = &duties[..] else {
            panic!("one open: {duties:?}");
        };
        let mut drawn = [checkers.verifier_node, checkers.referee_node];
        drawn.sort();
        assert_eq!(drawn, [key(21), key(23)]);
        assert_eq!(draw.pool, pda::checker_pool(MODEL));
        assert!(
            draw.passed_over.iter().all(|p| *p == (key(22), key(50))),
            "only the renamed node is passed over: {draw:?}"
        );
    }

    /// Ten honest providers' nodes, all busy running jobs, and two
    /// squatters' nodes priced out of every job (so always idle) that claim
    /// the largest profile: over 10,000 draws the squatters check no more
    /// than their share of the stake buys, and never both sides of a check.
    #[test]
    fn idle_squatter_nodes_check_at_most_their_stake_share() {
        let mut w = World::new(PPM);
        w.nodes.truncate(1);
        w.providers.retain(|k, _| *k == key(30));
        w.pools[0].1.members.clear();
        for i in 0..10u8 {
            let (n, p) = (key(100 + i), key(150 + i));
            w.nodes.push((n, busy(node(p, 81_920), key(200 + i))));
            w.providers.insert(p, provider(200_000_000));
            w.enter(n);
        }
        let squatters = [key(240), key(241)];
        for (i, p) in squatters.iter().enumerate() {
            let mut n = node(*p, 163_840);
            n.price_per_gpu_hour = u64::MAX / 4;
            w.nodes.push((key(230 + i as u8), n));
            // The minimum stake each.
            w.providers
                .insert(*p, provider(params().min_provider_stake));
            w.enter(key(230 + i as u8));
        }
        let job = w.jobs[0].1.clone();
        let segment = w.segments[0].1.clone();
        let total: u64 = w
            .providers
            .iter()
            .filter(|(k, _)| **k != key(30))
            .map(|(_, p)| p.committed_stake())
            .sum();
        let squat_stake = 2 * params().min_provider_stake;
        let (mut seats, mut both) = (0u32, 0u32);
        let draws = 10_000u32;
        let o = w.observation();
        for i in 0..draws {
            let seed = slot_hash_like(u64::from(i));
            let (c, _) =
                choose_checkers(&o, &job, &segment, seed, vec![key(30)]).expect("checkers");
            let held = [c.verifier_provider, c.referee_provider]
                .iter()
                .filter(|p| squatters.contains(p))
                .count() as u32;
            seats += held;
            both += u32::from(held == 2);
        }
        // Two seats a draw; the squatters' expected share of the first is
        // their stake share, and of the second a little more (the first
        // seat's provider is left out). Allow for sampling noise.
        let share = squat_stake as f64 / total as f64;
        let seat_share = f64::from(seats) / f64::from(2 * draws);
        eprintln!(
            "squatters: stake share {share:.4}, seats {seat_share:.4}, both seats in {both} of {draws} draws"
        );
        assert!(
            seat_share <= share * 1.25 + 0.005,
            "squatters held {seat_share:.4} of the seats, their stake share is {share:.4}"
        );
        assert!(
            f64::from(both) / f64::from(draws) <= share * share * 3.0 + 0.002,
            "squatters held both seats in {both} of {draws} draws"
        );
    }

    #[test]
    fn a_drawn_interval_is_opened_with_two_checkers_of_other_providers() {
        let w = World::new(PPM);
        let duties = w.duties();
        let [
            VerifyAction::Open {
                checkers,
                interval,
                segment_generation,
                ..
            },
        ] = &duties[..]
        else {
            panic!("one open: {duties:?}");
        };
        assert_eq!((*interval, *segment_generation), (1, 1));
        let (v, r) = (checkers.verifier_provider, checkers.referee_provider);
        assert!(v != key(30) && r != key(30) && v != r, "{checkers:?}");
        // The checkers' nodes are those of their providers.
        for (n, p) in [(checkers.verifier_node, v), (checkers.referee_node, r)] {
            assert!(
                w.nodes
                    .iter()
                    .any(|(k, node)| *k == n && node.provider == p)
            );
        }
    }

    #[test]
    fn nothing_is_opened_before_the_draw_exists_when_not_drawn_or_without_two_checkers() {
        // The slot after the attestation has not been recorded yet.
        let mut w = World::new(PPM);
        let mut data = 1u64.to_le_bytes().to_vec();
        data.extend(ATTEST_SLOT.to_le_bytes());
        data.extend([0u8; 32]);
        w.slot_hashes = data;
        assert!(w.duties().is_empty());
        // One in a million, and this slot hash does not draw it.
        let w = World::new(1);
        assert!(w.duties().is_empty());
        // Only one other provider fits (the others' nodes are too small).
        let mut w = World::new(PPM);
        w.nodes[2].1.hardware.vram_per_gpu_mib = 8_000;
        w.nodes[3].1.hardware.vram_per_gpu_mib = 8_000;
        assert!(w.duties().is_empty());
        // Or too little stake behind them.
        let mut w = World::new(PPM);
        for p in [key(50), key(60)] {
            w.providers.insert(p, provider(1));
        }
        assert!(w.duties().is_empty());
        // An interval already open is not opened again.
        let mut w = World::new(PPM);
        let mut open = verification(&w, VerificationState::Open);
        open.interval = 1;
        w.verifications.push((key(90), open));
        assert!(
            !w.duties()
                .iter()
                .any(|d| matches!(d, VerifyAction::Open { .. }))
        );
    }

    /// A named checker that has not sealed by half the window is replaced
    /// by a provider not yet involved (not the attester's, not either
    /// named): here 60, the only one left. Nothing is replaced before then,
    /// once both sealed, after two replacements, past the window, or when
    /// no provider is left to name.
    #[test]
    fn a_checker_silent_past_half_the_window_is_replaced_by_a_provider_not_yet_involved() {
        let mut w = World::new(PPM);
        let mut open = verification(&w, VerificationState::Open);
        open.verifier_commitment = Some([1; 32]);
        w.verifications.push((key(90), open.clone()));
        let window = i64::from(params().challenge_window_secs);
        let replaces = |w: &World| -> Vec<(Pubkey, Party, Pubkey, Pubkey)> {
            w.duties()
                .into_iter()
                .filter_map(|d| match d {
                    VerifyAction::Replace {
                        verification,
                        role,
                        node,
                        provider,
                        ..
                    } => Some((verification, role, node, provider)),
                    _ => None,
                })
                .collect()
        };
        w.now = open.opened_at + window / 2;
        assert_eq!(replaces(&w), vec![], "not before half the window");
        w.now += 1;
        assert_eq!(
            replaces(&w),
            vec![(key(90), Party::Referee, key(23), key(60))]
        );
        // Both silent: the verifier first.
        w.verifications[0].1.verifier_commitment = None;
        assert_eq!(
            replaces(&w),
            vec![(key(90), Party::Verifier, key(23), key(60))]
        );
        let quiet = |edit: &dyn Fn(&mut Verification), why: &str| {
            let mut w2 = World::new(PPM);
            let mut v = open.clone();
            edit(&mut v);
            w2.verifications.push((key(90), v));
            w2.now = w.now;
            assert_eq!(replaces(&w2), vec![], "{why}");
        };
        quiet(&|v| v.referee_commitment = Some([2; 32]), "both sealed");
        quiet(&|v| v.replacements = 2, "replaced twice already");
        quiet(
            &|v| v.opened_at -= window,
            "past the window: it ends on what it has",
        );
        w.nodes.retain(|(k, _)| *k != key(23));
        assert_eq!(replaces(&w), vec![], "nobody left to name");
    }

    /// A check whose first round's checkers revealed different answers goes
    /// to a second round of two providers the check has not involved (here
    /// 60 and 70, the only two left), within half a window of the dispute;
    /// a first round where one revealed, once its window has passed. Not
    /// when the answers agree, after a second round, past its time or with
    /// fewer than two providers left; and it resolves only once the second
    /// round's time has passed.
    #[test]
    fn a_disputed_check_goes_to_a_second_round_of_providers_not_yet_involved() {
        let mut w = World::new(PPM);
        w.nodes.push((key(24), node(key(70), 81_920)));
        w.providers.insert(key(70), provider(200_000_000));
        w.enter(key(24));
        let answer = |h: u8| CheckAnswer::Reproduced {
            hash: [h; 32],
            possession: [h; 32],
        };
        let mut disputed = verification(&w, VerificationState::Disputed);
        disputed.verifier_answer = Some(answer(1));
        disputed.referee_answer = Some(answer(2));
        w.verifications.push((key(90), disputed.clone()));
        let window = i64::from(params().challenge_window_secs);
        let seconds = |w: &World| -> Vec<(Pubkey, mcjs_client::ix::Checkers)> {
            w.duties()
                .into_iter()
                .filter_map(|d| match d {
                    VerifyAction::SecondRound {
                        verification,
                        checkers,
                        ..
                    } => Some((verification, checkers)),
                    _ => None,
                })
                .collect()
        };
        let resolves = |w: &World| {
            w.duties()
                .iter()
                .filter(|d| matches!(d, VerifyAction::Resolve { .. }))
                .count()
        };
        w.now = disputed.opened_at;
        let found = seconds(&w);
        assert_eq!(found.len(), 1);
        let c = found[0].1;
        let mut chosen = [c.verifier_provider, c.referee_provider];
        chosen.sort();
        assert_eq!(chosen, [key(60), key(70)]);
        assert_eq!(resolves(&w), 0, "it waits for its second round");
        w.now = disputed.opened_at + window / 2 + 1;
        assert_eq!(seconds(&w), vec![], "past half a window: too late");
        assert_eq!(resolves(&w), 1, "and it resolves on the first round");

        // One revealed: a dispute once the first round's window has passed.
        let mut one = verification(&w, VerificationState::Revealing);
        one.referee_answer = Some(answer(2));
        w.verifications = vec![(key(90), one.clone())];
        w.now = one.opened_at + window;
        assert_eq!(seconds(&w), vec![]);
        w.now += 1;
        assert_eq!(seconds(&w).len(), 1);
        assert_eq!(resolves(&w), 0);

        // Answers alike, a second round already held, or 70 gone: none.
        let mut alike = disputed.clone();
        alike.referee_answer = alike.verifier_answer;
        alike.state = VerificationState::Decided {
            outcome: VerificationOutcome::Confirmed,
        };
        let mut second = disputed.clone();
        second.first_round = Some(FirstRound {
            verifier_node: key(21),
            verifier_provider: key(40),
            verifier_answer: Some(answer(1)),
            referee_node: key(22),
            referee_provider: key(50),
            referee_answer: Some(answer(2)),
            possession_key: [3; 32],
        });
        for v in [alike, second] {
            w.verifications = vec![(key(90), v.clone())];
            w.now = v.opened_at;
            assert_eq!(seconds(&w), vec![]);
        }
        w.verifications = vec![(key(90), disputed.clone())];
        w.now = disputed.opened_at;
        w.pools[0].1.members.retain(|m| m.node != key(24));
        assert_eq!(seconds(&w), vec![], "one provider left is not two");
    }

    fn verification(w: &World, state: VerificationState) -> Verification {
        let job = &w.jobs[0].1;
        Verification {
            job: w.jobs[0].0,
            verifier_node: key(21),
            referee_node: key(22),
            state,
            interval: 1,
            segment: pda::segment(&w.jobs[0].0, 1),
            provider: key(30),
            node: key(20),
            verifier_provider: key(40),
            verifier_payout: key(41),
            referee_provider: key(50),
            referee_payout: key(51),
            from: None,
            to: job.last_checkpoint.unwrap(),
            interval_amount: 1_000_000,
            earned_to: 1_000_000,
            possession_key: [3; 32],
            verifier_commitment: None,
            referee_commitment: None,
            verifier_answer: None,
            referee_answer: None,
            draw_slot: ATTEST_SLOT + 1,
            opened_at: T0 + 11,
            resolved_at: None,
            fees: 0,
            slashed: 0,
            rent_payer: key(99),
            bump: 255,
            replacements: 0,
            first_round: None,
            output: false,
        }
    }

    #[test]
    fn a_decided_verification_is_resolved_against_the_right_loser_and_assignment() {
        let mut w = World::new(PPM);
        w.jobs[0].1.checkpoint_count = 2; // the open one is not the latest
        for (outcome, loser) in [
            (VerificationOutcome::Confirmed, None),
            (VerificationOutcome::ProviderWrong, Some(key(30))),
            (VerificationOutcome::Inconclusive, None),
        ] {
            w.verifications = vec![(
                key(90),
                verification(&w, VerificationState::Decided { outcome }),
            )];
            let duties = w.duties();
            let resolve = duties
                .iter()
                .find_map(|d| match d {
                    VerifyAction::Resolve { loser, current, .. } => Some((*loser, *current)),
                    _ => None,
                })
                .expect("a resolve");
            assert_eq!(resolve.0, loser, "{outcome:?}");
            // Only a proven-wrong provider's job is taken off its node: its
            // own provider, passed as the loser, not twice.
            match outcome {
                VerificationOutcome::ProviderWrong => {
                    let current = resolve.1.expect("the job's assignment");
                    assert_eq!(current.node, key(20));
                    assert_eq!(current.provider, None);
                    assert_eq!(
                        current.segment, None,
                        "the verified segment is the current one"
                    );
                }
                _ => assert_eq!(resolve.1, None),
            }
        }
        // An open one resolves (inconclusive) only after its window.
        w.verifications = vec![(key(90), verification(&w, VerificationState::Open))];
        assert!(
            !w.duties()
                .iter()
                .any(|d| matches!(d, VerifyAction::Resolve { .. }))
        );
        w.now = T0 + 11 + 31;
        assert!(
            w.duties()
                .iter()
                .any(|d| matches!(d, VerifyAction::Resolve { loser: None, .. }))
        );
    }

    #[test]
    fn a_held_segment_is_released_once_due_and_unchallenged() {
        let mut w = World::new(0);
        let job = w.jobs[0].0;
        let release_at = T0 + 100;
        w.segments = vec![(
            pda::segment(&job, 1),
            segment(job, SegmentState::Held { release_at }),
        )];
        w.now = release_at - 1;
        assert!(w.duties().is_empty(), "not before its window");
        w.now = release_at;
        assert!(matches!(&w.duties()[..], [VerifyAction::Release { .. }]));
        w.segments[0].1.open_verifications = 1;
        assert!(w.duties().is_empty(), "not while a check is open");
    }

    /// A job whose output is attested is completed by the scheduler once
    /// no check is open and its node has not done it within a liveness
    /// window (interval × liveness factor) of the attestation or of the
    /// last check's end; the chain is read for it meanwhile.
    #[test]
    fn an_attested_output_whose_node_does_not_complete_is_completed_by_the_scheduler() {
        let mut w = World::new(PPM);
        let job = w.jobs[0].0;
        {
            let j = &mut w.jobs[0].1;
            j.output_hash = Some([9; 32]);
            j.last_opened_interval = j.checkpoint_count;
        }
        let attested = w.jobs[0].1.last_checkpoint.unwrap().time;
        let window = 60 * 3;
        assert!(needs_chain_read(&w.jobs[0].1, &params(), true));
        w.now = attested + window - 1;
        assert!(w.duties().is_empty(), "its node has a window to do it");
        w.now = attested + window;
        match &w.duties()[..] {
            [
                VerifyAction::Finish {
                    job: j,
                    node,
                    provider,
                    payout,
                    generation: 1,
                    output_hash,
                    ..
                },
            ] => {
                assert_eq!((*j, *node, *provider), (job, key(20), key(30)));
                assert_eq!(*payout, w.providers[&key(30)].payout);
                assert_eq!(*output_hash, [9; 32]);
            }
            other => panic!("{other:?}"),
        }
        w.jobs[0].1.open_verifications = 1;
        assert!(
            !w.duties()
                .iter()
                .any(|d| matches!(d, VerifyAction::Finish { .. })),
            "not while a check is open"
        );
        w.jobs[0].1.open_verifications = 0;
        w.jobs[0].1.checks_settled_at = w.now;
        assert!(w.duties().is_empty(), "a window after the check's end");
    }

    /// Each verification duty due is one transaction of the instruction it
    /// names, signed by the scheduler, in the order decided; the scheduler
    /// completes a job with the Segment of its generation.
    #[test]
    fn each_verification_duty_is_one_transaction_of_its_instruction() {
        use anchor_lang::Discriminator as _;
        use mcjs::instruction as i;
        use mcjs_scheduler_daemon::transactions::{Duty, plan_checks};
        let drawn = World::new(PPM);
        let mut released = World::new(0);
        let job = released.jobs[0].0;
        released.segments = vec![(
            pda::segment(&job, 1),
            segment(job, SegmentState::Held { release_at: T0 }),
        )];
        let mut finished = World::new(PPM);
        finished.jobs[0].1.output_hash = Some([9; 32]);
        finished.jobs[0].1.last_opened_interval = finished.jobs[0].1.checkpoint_count;
        finished.now = T0 + 10 + 60 * 3;
        let (scheduler, deployment) = (
            key(250),
            mcjs_client::ix::Deployment {
                usdc_mint: key(240),
                treasury: key(241),
            },
        );
        // (the world, the instructions sent)
        let table: Vec<(&World, Vec<&[u8]>)> = vec![
            (&drawn, vec![i::OpenVerification::DISCRIMINATOR]),
            (&released, vec![i::ReleaseSegment::DISCRIMINATOR]),
            (&finished, vec![i::CompleteJob::DISCRIMINATOR]),
        ];
        for (w, sent) in table {
            let planned = plan_checks(&w.observation(), &scheduler, &deployment);
            let names: Vec<&str> = w.duties().iter().map(|d| d.name()).collect();
            let planned_names: Vec<&str> = planned.iter().map(|p| p.actions[0].name()).collect();
            assert_eq!(planned_names, names, "the duties decided, in order");
            let got: Vec<&[u8]> = planned
                .iter()
                .map(|p| {
                    assert!(p.fallback.is_none() && p.actions.len() == 1);
                    let [ix] = &p.instructions[..] else {
                        panic!("one instruction a duty")
                    };
                    assert!(
                        ix.accounts
                            .iter()
                            .any(|a| a.pubkey == scheduler && a.is_signer),
                        "signed by the scheduler"
                    );
                    &ix.data[..8]
                })
                .collect();
            assert_eq!(got, sent);
            assert!(
                planned
                    .iter()
                    .all(|p| matches!(p.actions[0], Duty::Check(_)))
            );
        }
        let planned = plan_checks(&finished.observation(), &scheduler, &deployment);
        let segment = pda::segment(&finished.jobs[0].0, 1);
        assert!(
            planned[0].instructions[0]
                .accounts
                .iter()
                .any(|a| a.pubkey == segment),
            "completed with its generation's Segment"
        );
    }

    /// A round reads the clock and slot hashes for the duties only while
    /// one may be due: an interval still to draw, an open verification, a
    /// segment off its node.
    #[test]
    fn the_duties_read_the_chain_only_while_one_may_be_due() {
        let w = World::new(PPM);
        let p = params();
        let mut job = w.jobs[0].1.clone();
        job.live_segments = 1;
        assert!(needs_chain_read(&job, &p, false), "an interval to draw");
        assert!(!needs_chain_read(&job, &p, true), "its draw passed it over");
        job.last_opened_interval = job.checkpoint_count;
        assert!(!needs_chain_read(&job, &p, false), "drawn, on its node");
        let mut open = job.clone();
        open.open_verifications = 1;
        assert!(needs_chain_read(&open, &p, true), "a check is open");
        let mut two = job.clone();
        two.live_segments = 2;
        assert!(
            needs_chain_read(&two, &p, false),
            "an earlier segment is held"
        );
        let mut ended = job.clone();
        ended.state = JobState::Completed { at: T0 + 20 };
        assert!(
            needs_chain_read(&ended, &p, false),
            "its segment left the node"
        );
        let mut unverified = ended.clone();
        unverified.verification_ppm = 0;
        assert!(!needs_chain_read(&unverified, &p, false));
    }

    /// An interval is passed over (no round reads the chain for it again)
    /// only once its draw cannot open it any more.
    #[test]
    fn an_interval_is_passed_over_only_once_its_draw_is_final() {
        let passed = |w: &World| {
            let (key, job) = &w.jobs[0];
            passed_over(&w.observation(), key, job)
        };
        // Sampled (every interval is, at the full rate): it will be opened.
        let mut w = World::new(PPM);
        assert!(!passed(&w));
        // One in a million: this slot hash does not sample it.
        w.jobs[0].1.verification_ppm = 1;
        assert!(passed(&w));
        // No slot after the attestation yet: the draw waits.
        let mut only_attest = 1u64.to_le_bytes().to_vec();
        only_attest.extend(ATTEST_SLOT.to_le_bytes());
        only_attest.extend([0u8; 32]);
        w.slot_hashes = only_attest;
        assert!(!passed(&w));
        // The sysvar no longer reaches back to it.
        let mut later = 1u64.to_le_bytes().to_vec();
        later.extend((ATTEST_SLOT + 600).to_le_bytes());
        later.extend([7u8; 32]);
        w.slot_hashes = later;
        assert!(passed(&w));
        // Its challenge window passed.
        let mut w = World::new(PPM);
        w.now = T0 + 10 + i64::from(params().challenge_window_secs) + 1;
        assert!(passed(&w));
        // Already drawn: nothing to pass over.
        let mut w = World::new(PPM);
        w.jobs[0].1.verification_ppm = 1;
        w.jobs[0].1.last_opened_interval = w.jobs[0].1.checkpoint_count;
        assert!(!passed(&w));
    }
}

#[test]
fn a_job_is_never_placed_on_the_provider_proven_wrong_on_it() {
    let (job, liar_node, liar, other_node, other) = (key(10), key(20), key(30), key(21), key(31));
    let mut live = Liveness::new(T0 * MS);
    live.record(heartbeat(liar_node, vec![]), T0 * MS).unwrap();
    let mut barred = JobBuilder::pending().0;
    barred.barred_provider = Some(liar);
    let jobs = [(job, barred)];
    // Only the liar's node: the job waits.
    let alone = [(liar_node, node(liar, 81_920))];
    assert_eq!(decide(T0 * MS + 500, &jobs, &alone, &live), vec![]);
    // Another node: the job goes there.
    live.record(heartbeat(other_node, vec![]), T0 * MS).unwrap();
    let both = [
        (liar_node, node(liar, 81_920)),
        (other_node, node(other, 81_920)),
    ];
    assert_eq!(
        decide(T0 * MS + 500, &jobs, &both, &live),
        vec![Action::Assign {
            job,
            node: other_node,
            provider: other
        }]
    );
}

/// A job one provider's node called fatal fails only if another's says so
/// too, so its next node is another provider's where there is one; where
/// there is none, the same provider may run it again (one more restart).
#[test]
fn a_job_called_fatal_goes_to_another_provider_where_there_is_one() {
    let (job, first_node, first, other_node, other) = (key(10), key(20), key(30), key(21), key(31));
    let mut live = Liveness::new(T0 * MS);
    live.record(heartbeat(first_node, vec![]), T0 * MS).unwrap();
    let mut claimed = JobBuilder::pending().0;
    claimed.fatal_claim = Some(first);
    let jobs = [(job, claimed)];
    let alone = [(first_node, node(first, 81_920))];
    assert_eq!(
        decide(T0 * MS + 500, &jobs, &alone, &live),
        vec![Action::Assign {
            job,
            node: first_node,
            provider: first
        }],
        "no other provider: the claimer runs it again"
    );
    live.record(heartbeat(other_node, vec![]), T0 * MS).unwrap();
    let both = [
        (first_node, node(first, 81_920)),
        (other_node, node(other, 81_920)),
    ];
    assert_eq!(
        decide(T0 * MS + 500, &jobs, &both, &live),
        vec![Action::Assign {
            job,
            node: other_node,
            provider: other
        }]
    );
}

/// `holding` nodes, each running a job that attested at T0 + 60 s (on time
/// at T0 + 65 s), the first `silent` of them heard from last at T0 and the
/// rest just now. The last silent node's job is also overdue on chain when
/// `one_overdue`. Returns the jobs reported and whether the brake held.
fn fleet_round(holding: u8, silent: u8, one_overdue: bool) -> (Vec<(Pubkey, StopReason)>, bool) {
    fleet_round_with(holding, silent, 0, one_overdue)
}

/// As [`fleet_round`], with the `going` nodes after the silent ones heard
/// from last 2 s ago: past half the heartbeat timeout, not past it.
fn fleet_round_with(
    holding: u8,
    silent: u8,
    going: u8,
    one_overdue: bool,
) -> (Vec<(Pubkey, StopReason)>, bool) {
    let now = (T0 + 65) * MS;
    let mut live = Liveness::new(T0 * MS);
    let (mut jobs, mut nodes) = (Vec::new(), Vec::new());
    for i in 0..holding {
        let (job, n, p) = (key(100 + i), key(150 + i), key(200 + i));
        let mut running = JobBuilder::pending().running_on(n, p, 1, T0).0;
        running.progress_mark = T0 + 60;
        if one_overdue && i + 1 == silent {
            // Nothing attested for 150 s of an interval of 60.
            running.progress_mark = T0 - 85;
            running.state = JobState::Running { since: T0 - 100 };
        }
        jobs.push((job, running));
        nodes.push((n, busy(node(p, 81_920), job)));
        let heard = if i < silent {
            T0 * MS
        } else if i < silent + going {
            now - 2_000
        } else {
            now - 100
        };
        live.record(heartbeat(n, vec![]), heard).unwrap();
    }
    let decision = reconcile(
        &Observation {
            now_ms: now,
            jobs: &jobs,
            nodes: &nodes,
            liveness: &live,
            understaked: &HashSet::new(),
            outages: &[],
            require_proven_hardware: false,
            standby_wanted: &Default::default(),
            standbys: &Default::default(),
        },
        &DetectorConfig::default(),
    );
    let reported = decision
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::ReportFailure { job, stop, .. } => Some((*job, *stop)),
            Action::Assign { .. } => None,
        })
        .collect();
    if let Some(brake) = &decision.brake {
        assert_eq!(usize::from(silent + going), brake.silent);
        assert_eq!(usize::from(holding), brake.holding);
    }
    (reported, decision.brake.is_some())
}

#[test]
fn many_nodes_silent_at_once_are_not_reported_lost_but_per_node_evidence_still_counts() {
    let lost = |n: u8| -> Vec<(Pubkey, StopReason)> {
        (0..n)
            .map(|i| (key(100 + i), StopReason::NodeLost))
            .collect()
    };
    // (holding a job, silent, the last silent one also overdue on chain, reported, braked)
    let table: Vec<(u8, u8, bool, Vec<(Pubkey, StopReason)>, bool)> = vec![
        // One or two nodes lost: below the brake's smallest count.
        (5, 1, false, lost(1), false),
        (5, 2, false, lost(2), false),
        (3, 2, false, lost(2), false),
        // Three of five (60%): held.
        (5, 3, false, vec![], true),
        (3, 3, false, vec![], true),
        // Three of ten (30%): below the share, reported.
        (10, 3, false, lost(3), false),
        // Four of ten (40%): held.
        (10, 4, false, vec![], true),
        // Held, but one job has not attested on chain for 2.5 intervals:
        // that is evidence of its own node, and it is reported for it.
        (
            5,
            3,
            true,
            vec![(key(102), StopReason::AttestationOverdue)],
            true,
        ),
    ];
    for (holding, silent, overdue, reported, braked) in table {
        assert_eq!(
            fleet_round(holding, silent, overdue),
            (reported, braked),
            "{silent} of {holding} silent, overdue {overdue}"
        );
    }
}

#[test]
fn nodes_cut_off_together_but_timed_out_a_heartbeat_apart_are_held_together() {
    // Two of five past the timeout, a third going silent with them (2 s of
    // a 3 s timeout): the share is reached in the round the first two time
    // out, so none is reported one round at a time.
    assert_eq!(fleet_round_with(5, 2, 1, false), (vec![], true));
    // One past the timeout and one going: below the brake's count, and only
    // the one past the timeout is reported.
    assert_eq!(
        fleet_round_with(5, 1, 1, false),
        (vec![(key(100), StopReason::NodeLost)], false)
    );
}

#[test]
fn outages_that_overlap_are_excused_once() {
    use mcjs_scheduler_daemon::core::excused_ms;
    // The chain down 10..30, the store 20..50: 40 ms, not 50.
    assert_eq!(excused_ms(&[(10, 30), (20, 50)], 0, 100), 40);
    assert_eq!(excused_ms(&[(20, 50), (10, 30)], 0, 100), 40);
    // One inside another.
    assert_eq!(excused_ms(&[(10, 60), (20, 30)], 0, 100), 50);
    // Clipped to the window first.
    assert_eq!(excused_ms(&[(i64::MIN, 25), (20, 40)], 15, 35), 20);
}
