//! Accounts as the chain holds them, for the daemon's tests.
#![allow(dead_code)]

use mcjs::state::*;
use mcjs_client::Pubkey;
use mcjs_protocol::{Heartbeat, JobReport};

pub const T0: i64 = 1_800_000_000; // seconds
pub const MS: i64 = 1_000;

pub fn key(n: u8) -> Pubkey {
    Pubkey::new_from_array([n; 32])
}

pub struct JobBuilder(pub Job);

impl JobBuilder {
    pub fn pending() -> Self {
        Self(Job {
            owner: key(1),
            state: JobState::Pending { since: T0 },
            node: None,
            provider: None,
            job_id: 1,
            spec_hash: [0; 32],
            terms: JobTerms {
                checkpoint_interval_secs: 60,
                max_duration_secs: 3_600,
                deadline: None,
                max_price_per_gpu_hour: 2_000_000,
                restart_budget: 2,
            },
            bond: 100_000_000,
            paid: 0,
            generation: 0,
            rate_per_hour: 0,
            last_checkpoint: None,
            checkpoint_chain: [0; 32],
            checkpoint_count: 0,
            progress_mark: T0,
            accrued: 0,
            billed_secs: 0,
            restarts_used: 0,
            output_hash: None,
            submitted_at: T0,
            first_running_at: None,
            finished_at: None,
            refund_account: key(2),
            bump: 255,
            vault_bump: 255,
            requirements: JobRequirements {
                gpu_count: 1,
                min_vram_mib: 20_000,
                min_compute_capability: 70,
                gpu_models: vec![],
                min_checkpoint_write_mibps: 10,
                attested: false,
            },
            last_failure: None,
            compensated: 0,
            verification_ppm: 0,
            prev_checkpoint: None,
            last_attest_slot: 0,
            last_interval_amount: 0,
            open_verifications: 0,
            holds_payment: false,
            held: 0,
            live_segments: 0,
            barred_provider: None,
            last_opened_interval: 0,
            checks_settled_at: 0,
            assignment_earned: 0,
            restore_floor: None,
            fatal_claim: None,
        })
    }

    pub fn running_on(
        mut self,
        node: Pubkey,
        provider: Pubkey,
        generation: u32,
        since: i64,
    ) -> Self {
        self.0.state = JobState::Running { since };
        self.0.node = Some(node);
        self.0.provider = Some(provider);
        self.0.generation = generation;
        self.0.progress_mark = since;
        self
    }

    pub fn assigned_to(mut self, node: Pubkey, provider: Pubkey, since: i64) -> Self {
        self.0.state = JobState::Assigned { since };
        self.0.node = Some(node);
        self.0.provider = Some(provider);
        self.0.generation = 1;
        self
    }

    pub fn needing_vram(mut self, mib: u32) -> Self {
        self.0.requirements.min_vram_mib = mib;
        self
    }
}

pub fn node(provider: Pubkey, vram_mib: u32) -> Node {
    Node {
        provider,
        index: 0,
        operator: key(200),
        hardware: HardwareProfile {
            gpu_model: "a100-sxm4-80gb".into(),
            gpu_count: 1,
            vram_per_gpu_mib: vram_mib,
            compute_capability: 80,
            cpu_cores: 16,
            ram_mib: 64_000,
            disk_gib: 500,
            checkpoint_write_mibps: 500,
        },
        readiness: 90,
        price_per_gpu_hour: 1_000_000,
        status: NodeStatus::Available,
        status_since: T0,
        current_job: None,
        bump: 255,
        failures: 0,
        service_secs: 0,
        challenge: Default::default(),
    }
}

pub fn busy(mut n: Node, job: Pubkey) -> Node {
    n.status = NodeStatus::Busy;
    n.current_job = Some(job);
    n
}

pub fn heartbeat(node: Pubkey, jobs: Vec<JobReport>) -> Heartbeat {
    Heartbeat {
        node: node.to_string(),
        provider: key(99).to_string(),
        agent_url: "http://127.0.0.1:1".into(),
        sent_at_unix_ms: 0,
        seq: 0,
        session: String::new(),
        jobs,
        goodbye: false,
        power: None,
    }
}

pub fn params() -> ConfigParams {
    ConfigParams {
        commission_bps: 500,
        slash_amount: 5_000_000,
        min_provider_stake: 100_000_000,
        liveness_factor: 3,
        withdrawal_cooldown_secs: 300,
        challenge_window_secs: 30,
        verification_fee_bps: 2_000,
        draw_secs: 2,
        require_proven_hardware: false,
    }
}

pub fn provider(stake: u64) -> Provider {
    Provider {
        owner: key(77),
        payout: key(78),
        stake,
        pending_withdrawal: None,
        active_assignments: 0,
        node_count: 1,
        jobs_completed: 0,
        failures: 0,
        slashed_total: 0,
        registered_at: T0,
        bump: 255,
        vault_bump: 255,
        held_segments: 0,
    }
}
