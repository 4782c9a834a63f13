//! Placement: which free node takes which queued job, through the
//! scarcity-aware planner of `mcjs-scheduler`, with the program's own
//! refusals (a barred provider, an unproven class) applied, and a job that
//! lost its node sent to its warm standby first.

use std::collections::HashSet;

use mcjs::state::{Job, Node, NodeStatus};
use mcjs_client::Pubkey;
use mcjs_scheduler::{
    CheckpointPolicy, FleetIndex, HardwareRequirements, InvalidJob, JobId, Needs, NodeId,
    PlacementPolicy, PlanRequest, ScarcityAware, ServiceRecord, Terms,
};

use super::{AccountKind, Action, Decision, DetectorConfig, Observation, Skipped, Waiting};

/// The free nodes a job may be placed on this round.
pub(crate) fn free_nodes<'n>(
    obs: &Observation<'n>,
    config: &DetectorConfig,
    failing_nodes: &HashSet<Pubkey>,
) -> Vec<(Pubkey, &'n Node)> {
    obs.nodes
        .iter()
        .filter(|(key, node)| {
            node.status == NodeStatus::Available
                && node.current_job.is_none()
                && !failing_nodes.contains(key)
                // Answering a hardware challenge: its GPUs are taken, and the program
                // refuses it a job until the verdict is recorded.
                && node.challenge.in_flight.is_none()
                && !obs.understaked.contains(&node.provider)
                && obs.liveness.is_alive(
                    key,
                    obs.now_ms,
                    config.heartbeat_timeout_ms,
                    config.disconnect_grace_ms,
                )
                // On battery: its jobs are being checkpointed to move.
                && obs.liveness.takes_work(key)
        })
        .map(|(key, node)| (*key, node))
        .collect()
}

/// The node of `nodes` the planner would give `job` alone, with the
/// program's own refusals (a barred provider, an unproven class) left out
/// first.
pub(crate) fn planned_alone(
    obs: &Observation<'_>,
    config: &DetectorConfig,
    job: &Job,
    nodes: &[(Pubkey, &Node)],
) -> Option<Pubkey> {
    let nodes: Vec<&(Pubkey, &Node)> = nodes
        .iter()
        .filter(|(_, n)| job.barred_provider != Some(n.provider))
        .filter(|(_, n)| !obs.require_proven_hardware || proven_class_admits(n, job))
        .collect();
    let queued = to_queued_job(0, job).ok()?;
    let (fleet, _) = FleetIndex::build(
        nodes
            .iter()
            .enumerate()
            .map(|(i, (_, n))| to_fleet_node(i as u64, n, obs.require_proven_hardware)),
    );
    let plan = ScarcityAware {
        config: config.placement,
    }
    .plan(
        &fleet,
        &PlanRequest::new(std::slice::from_ref(&queued), obs.now_ms / 1_000),
    );
    plan.placements
        .first()
        .and_then(|p| nodes.get(p.node.0 as usize))
        .map(|(key, _)| *key)
}

pub(super) fn place(
    obs: &Observation<'_>,
    config: &DetectorConfig,
    failing_nodes: &HashSet<Pubkey>,
    requeued: &[(Pubkey, Job)],
    decision: &mut Decision,
) {
    let now_secs = obs.now_ms / 1_000;
    let queued: Vec<(Pubkey, &Job)> = obs
        .jobs
        .iter()
        .chain(requeued)
        .filter(|(_, job)| job.state.can_assign())
        .filter(|(_, job)| job.terms.deadline.is_none_or(|d| now_secs <= d))
        // A verified job holding as many unreleased Segments as it may
        // waits for one to be released (the program refuses it meanwhile).
        .filter(|(_, job)| job.live_segments < mcjs::state::MAX_LIVE_SEGMENTS)
        .map(|(key, job)| (*key, job))
        .collect();
    if queued.is_empty() {
        return;
    }
    let mut candidates = free_nodes(obs, config, failing_nodes);
    // A job with a warm standby goes there first: its checkpoint is on
    // that node's disk already. Only where the planner would place it
    // there; otherwise it is planned with the rest.
    let mut at_standby: HashSet<Pubkey> = HashSet::new();
    for (key, job) in &queued {
        let Some(standby) = obs.standbys.node_of(key) else {
            continue;
        };
        let Some(found) = candidates.iter().find(|(k, _)| *k == standby).copied() else {
            continue;
        };
        if let Some(node) = planned_alone(obs, config, job, std::slice::from_ref(&found)) {
            decision.actions.push(Action::Assign {
                job: *key,
                node,
                provider: found.1.provider,
            });
            at_standby.insert(*key);
            candidates.retain(|(k, _)| *k != node);
        }
    }
    let queued: Vec<(Pubkey, &Job)> = queued
        .into_iter()
        .filter(|(key, _)| !at_standby.contains(key))
        .collect();
    if queued.is_empty() {
        return;
    }
    // Node by node: the index keeps every node it can use and names the others, so one
    // malformed account never holds back the queue.
    let fleet_nodes = candidates
        .iter()
        .enumerate()
        .map(|(i, (_, node))| to_fleet_node(i as u64, node, obs.require_proven_hardware));
    let (fleet, rejected) = FleetIndex::build(fleet_nodes);
    for err in rejected {
        decision.skipped.push(Skipped {
            kind: AccountKind::Node,
            account: candidates[err.node().0 as usize].0,
            reason: err.to_string(),
        });
    }
    // Each free node's record as the program keeps it on the Node account, for
    // reliability-aware placement (`PlacementConfig::reliability`, off by default).
    let history: Vec<ServiceRecord> = candidates
        .iter()
        .enumerate()
        .map(|(i, (_, node))| ServiceRecord {
            node: NodeId(i as u64),
            failures: node.failures,
            hours_in_service: node.service_secs as f64 / 3_600.0,
        })
        .collect();
    // Job by job, with the planner's own check.
    let mut jobs: Vec<mcjs_scheduler::QueuedJob> = Vec::with_capacity(queued.len());
    // What each job may still run: its limit less the progress billed.
    let mut expected_secs: Vec<i64> = Vec::with_capacity(queued.len());
    for (i, (key, job)) in queued.iter().enumerate() {
        match to_queued_job(i as u64, job) {
            Ok(mut queued_job) => {
                // A provider proven wrong on the job, or the one whose node
                // last called it fatal (another provider's word is what
                // ends it, or answers it): steer away from it.
                if let Some(avoid) = job.barred_provider.or(job.fatal_claim) {
                    queued_job.terms.recovering_from = candidates
                        .iter()
                        .position(|(_, n)| n.provider == avoid)
                        .map(|i| NodeId(i as u64));
                }
                jobs.push(queued_job);
                expected_secs.push(
                    u64::from(job.terms.max_duration_secs).saturating_sub(job.billed_secs) as i64,
                );
            }
            Err(why) => decision.skipped.push(Skipped {
                kind: AccountKind::Job,
                account: *key,
                reason: format!("invalid job: {why}"),
            }),
        }
    }
    let plan = ScarcityAware {
        config: config.placement,
    }
    .plan(
        &fleet,
        &PlanRequest::new(&jobs, now_secs)
            .with_history(&history)
            .with_expected_secs(&expected_secs),
    );
    for placement in plan.placements {
        let (job, state) = queued[placement.job.0 as usize];
        let (node, chain_node) = candidates[placement.node.0 as usize];
        if state.barred_provider == Some(chain_node.provider) {
            // The program refuses it: the planner had no other node.
            decision.waiting.push(Waiting {
                job,
                reason: "the only free node is of the provider proven wrong on this job".into(),
            });
            continue;
        }
        if obs.require_proven_hardware && !proven_class_admits(chain_node, state) {
            // Only a job that names the lowest class's placeholder model gets here.
            decision.waiting.push(Waiting {
                job,
                reason: "the job names a GPU model or memory, and no free node's is proven by a hardware challenge".into(),
            });
            continue;
        }
        decision.actions.push(Action::Assign {
            job,
            node,
            provider: chain_node.provider,
        });
    }
    for unplaced in plan.unplaced {
        decision.waiting.push(Waiting {
            job: queued[unplaced.job.0 as usize].0,
            reason: unplaced.reason.to_string(),
        });
    }
}

/// What placement calls a node whose profile is not proven, where proof is required: no
/// model a job can name (a job's model entries match a name or its `-` prefixes) and the
/// least memory, so that the planner offers it only jobs that name neither.
pub const UNPROVEN_MODEL: &str = "unproven";

/// The program's rule (`Node::require_proven_class`): a job that names a GPU model or a
/// memory floor needs a proven node of its GPU count and memory.
fn proven_class_admits(node: &Node, job: &Job) -> bool {
    let req = &job.requirements;
    if req.gpu_models.is_empty() && req.min_vram_mib == 0 {
        return true;
    }
    node.challenge
        .proven
        .is_some_and(|p| p.vram_per_gpu_mib >= req.min_vram_mib && p.gpu_count >= req.gpu_count)
}

fn to_fleet_node(id: u64, node: &Node, require_proven: bool) -> mcjs_scheduler::FleetNode {
    let hw = &node.hardware;
    let unproven = require_proven && node.challenge.proven.is_none();
    let (gpu_model, vram_per_gpu_mib) = if unproven {
        (UNPROVEN_MODEL.to_string(), 1)
    } else {
        (hw.gpu_model.clone(), hw.vram_per_gpu_mib)
    };
    mcjs_scheduler::FleetNode {
        id: NodeId(id),
        gpu_model,
        gpu_count: hw.gpu_count,
        vram_per_gpu_mib,
        compute_capability: hw.compute_capability,
        // The chain does not carry the driver; jobs are matched on what it does carry.
        driver: (u32::MAX, u32::MAX),
        cpu_cores: hw.cpu_cores,
        ram_mib: hw.ram_mib,
        disk_free_gib: hw.disk_gib,
        checkpoint_write_mibps: hw.checkpoint_write_mibps,
        bandwidth_stable: true,
        // The program's rule for a job that asks for it (`Node::require_attested`).
        attested: node.all_gpus_attested(),
        readiness: node.readiness,
        price_per_gpu_hour: node.price_per_gpu_hour,
        status: mcjs_scheduler::NodeAvailability::Available,
        last_failure_unix: None,
        consecutive_failures: 0,
    }
}

/// The job as the placement core sees it, or why the core could never place it (checked
/// with the core's own [`Needs::of`], so the daemon and the planner cannot disagree).
fn to_queued_job(id: u64, job: &Job) -> Result<mcjs_scheduler::QueuedJob, InvalidJob> {
    let req = &job.requirements;
    let interval = job.terms.checkpoint_interval_secs;
    // The chain keeps the bandwidth the job needs (already through the checkpoint rule), not
    // the checkpoint size: the need travels as the minimum bandwidth, and no size is invented
    // (an invented one would add a disk requirement the owner never made).
    let queued = mcjs_scheduler::QueuedJob {
        id: JobId(id),
        hardware: HardwareRequirements {
            gpu_count: req.gpu_count,
            min_vram_mib: req.min_vram_mib,
            min_compute_capability: req.min_compute_capability,
            gpu_models: req.gpu_models.clone(),
            min_checkpoint_write_mibps: req.min_checkpoint_write_mibps,
            attested: req.attested,
            ..Default::default()
        },
        checkpoint: CheckpointPolicy {
            size_bytes: 0,
            interval_secs: interval,
            keep_checkpoints: 0,
        },
        terms: Terms {
            max_price_per_gpu_hour: job.terms.max_price_per_gpu_hour,
            deadline_unix: job.terms.deadline,
            submitted_unix: job.submitted_at,
            recovering_from: None,
        },
    };
    Needs::of(&queued.hardware, &queued.checkpoint)?;
    Ok(queued)
}
