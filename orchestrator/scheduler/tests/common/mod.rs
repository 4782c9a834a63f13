#![allow(dead_code)]
//! Small builders for jobs and nodes.

use mcjs_scheduler::*;

pub const USDC: u64 = 1_000_000;
pub const NOW: i64 = 1_700_000_000;

pub fn node(id: u64) -> FleetNode {
    FleetNode {
        id: NodeId(id),
        gpu_model: "geforce-rtx-4090".into(),
        gpu_count: 1,
        vram_per_gpu_mib: 24 * 1024,
        compute_capability: 89,
        driver: (550, 54),
        cpu_cores: 16,
        ram_mib: 64 * 1024,
        disk_free_gib: 1000,
        checkpoint_write_mibps: 1000,
        bandwidth_stable: true,
        attested: false,
        readiness: 80,
        price_per_gpu_hour: USDC / 2,
        status: NodeAvailability::Available,
        last_failure_unix: None,
        consecutive_failures: 0,
    }
}

pub trait NodeExt: Sized {
    fn a100_80(self) -> Self;
    fn readiness(self, r: u8) -> Self;
    fn price(self, p: u64) -> Self;
    fn busy(self) -> Self;
    fn offline(self) -> Self;
    fn failed(self, at: i64, times: u32) -> Self;
}

impl NodeExt for FleetNode {
    fn a100_80(mut self) -> Self {
        self.gpu_model = "a100-sxm4-80gb".into();
        self.vram_per_gpu_mib = 80 * 1024;
        self.compute_capability = 80;
        self.price_per_gpu_hour = 2 * USDC;
        self
    }
    fn readiness(mut self, r: u8) -> Self {
        self.readiness = r;
        self
    }
    fn price(mut self, p: u64) -> Self {
        self.price_per_gpu_hour = p;
        self
    }
    fn busy(mut self) -> Self {
        self.status = NodeAvailability::Busy;
        self
    }
    fn offline(mut self) -> Self {
        self.status = NodeAvailability::Offline;
        self
    }
    fn failed(mut self, at: i64, times: u32) -> Self {
        self.last_failure_unix = Some(at);
        self.consecutive_failures = times;
        self
    }
}

pub fn job(id: u64) -> QueuedJob {
    QueuedJob {
        id: JobId(id),
        hardware: HardwareRequirements {
            gpu_count: 1,
            min_vram_mib: 16 * 1024,
            ..HardwareRequirements::default()
        },
        checkpoint: CheckpointPolicy {
            size_bytes: 10 << 30,
            interval_secs: 900,
            keep_checkpoints: 2,
        },
        terms: Terms {
            max_price_per_gpu_hour: 5 * USDC,
            deadline_unix: None,
            submitted_unix: NOW - 600,
            recovering_from: None,
        },
    }
}

pub trait JobExt: Sized {
    fn needs_vram_gib(self, gib: u32) -> Self;
    fn models(self, models: &[&str]) -> Self;
    fn submitted(self, at: i64) -> Self;
    fn deadline(self, at: i64) -> Self;
    fn max_price(self, p: u64) -> Self;
    fn recovering_from(self, node: u64) -> Self;
}

impl JobExt for QueuedJob {
    fn needs_vram_gib(mut self, gib: u32) -> Self {
        self.hardware.min_vram_mib = gib * 1024;
        self
    }
    fn models(mut self, models: &[&str]) -> Self {
        self.hardware.gpu_models = models.iter().map(|m| m.to_string()).collect();
        self
    }
    fn submitted(mut self, at: i64) -> Self {
        self.terms.submitted_unix = at;
        self
    }
    fn deadline(mut self, at: i64) -> Self {
        self.terms.deadline_unix = Some(at);
        self
    }
    fn max_price(mut self, p: u64) -> Self {
        self.terms.max_price_per_gpu_hour = p;
        self
    }
    fn recovering_from(mut self, node: u64) -> Self {
        self.terms.recovering_from = Some(NodeId(node));
        self
    }
}

pub fn plan_with(policy: &dyn PlacementPolicy, nodes: Vec<FleetNode>, jobs: &[QueuedJob]) -> Plan {
    let fleet = FleetIndex::new(nodes).expect("valid fleet");
    policy.plan(&fleet, &PlanRequest::new(jobs, NOW))
}

pub fn plan(nodes: Vec<FleetNode>, jobs: &[QueuedJob]) -> Plan {
    plan_with(&ScarcityAware::default(), nodes, jobs)
}

pub fn node_of(plan: &Plan, job: u64) -> Option<u64> {
    plan.placements
        .iter()
        .find(|p| p.job == JobId(job))
        .map(|p| p.node.0)
}

pub fn reason_of(plan: &Plan, job: u64) -> Option<&Unplaced> {
    plan.unplaced
        .iter()
        .find(|u| u.job == JobId(job))
        .map(|u| &u.reason)
}
