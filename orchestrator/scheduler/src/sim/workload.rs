//! What the simulated fleet is made of and what it is asked to run: node
//! kinds, job kinds and the workloads that mix them.

use super::USDC;
use crate::types::*;

/// A kind of node in the simulated fleet.
#[derive(Clone, Debug)]
pub struct NodeKind {
    pub model: &'static str,
    pub gpu_count: u8,
    pub vram_gib: u32,
    pub compute_capability: u16,
    pub driver: (u32, u32),
    pub share: f64,
    pub price_per_gpu_hour: u64,
    pub mtbf_days: f64,
    pub write_mibps: u32,
}

/// Mostly consumer 24 GB cards, fewer V100 / A100 40 GB, few 80 GB cards, a handful of niche
/// and old ones.
pub fn standard_kinds() -> Vec<NodeKind> {
    let k =
        |model, gpu_count, vram_gib, cc, driver, share, price_cents: u64, mtbf_days, bw| NodeKind {
            model,
            gpu_count,
            vram_gib,
            compute_capability: cc,
            driver,
            share,
            price_per_gpu_hour: price_cents * USDC / 100,
            mtbf_days,
            write_mibps: bw,
        };
    vec![
        k("geforce-rtx-3090", 1, 24, 86, (550, 0), 0.33, 25, 5.0, 600),
        k("geforce-rtx-4090", 1, 24, 89, (550, 0), 0.22, 40, 6.0, 900),
        k("geforce-rtx-4090", 4, 24, 89, (550, 0), 0.05, 40, 6.0, 1500),
        k("v100-sxm2-32gb", 4, 32, 70, (535, 0), 0.10, 60, 15.0, 1200),
        k("a100-pcie-40gb", 1, 40, 80, (535, 0), 0.07, 110, 20.0, 1500),
        k("a100-sxm4-40gb", 8, 40, 80, (535, 0), 0.03, 120, 20.0, 3000),
        k("a100-sxm4-80gb", 1, 80, 80, (550, 0), 0.03, 180, 20.0, 2000),
        k(
            "a100-sxm4-80gb",
            8,
            80,
            80,
            (550, 0),
            0.015,
            190,
            20.0,
            4000,
        ),
        k(
            "h100-sxm5-80gb",
            8,
            80,
            90,
            (550, 0),
            0.015,
            300,
            25.0,
            5000,
        ),
        k("quadro-rtx-8000", 2, 48, 75, (535, 0), 0.03, 70, 8.0, 700),
        k("rtx-a6000", 1, 48, 86, (550, 0), 0.03, 80, 10.0, 900),
        k("k80", 4, 12, 37, (470, 0), 0.03, 5, 3.0, 300),
    ]
}

/// A kind of job: its hardware needs and how long it runs.
#[derive(Clone, Debug)]
pub struct JobKind {
    pub name: &'static str,
    pub hardware: HardwareRequirements,
    pub min_hours: f64,
    pub max_hours: f64,
    pub checkpoint_gib: u64,
    pub interval_secs: u32,
}

fn job_kind(
    name: &'static str,
    gpus: u8,
    vram_gib: u32,
    cc: u16,
    models: &[&str],
    hours: (f64, f64),
    checkpoint_gib: u64,
) -> JobKind {
    JobKind {
        name,
        hardware: HardwareRequirements {
            gpu_count: gpus,
            min_vram_mib: vram_gib * 1024,
            min_compute_capability: cc,
            gpu_models: models.iter().map(|m| m.to_string()).collect(),
            min_cpu_cores: 4,
            min_ram_mib: 16 * 1024,
            min_disk_gib: 100,
            ..HardwareRequirements::default()
        },
        min_hours: hours.0,
        max_hours: hours.1,
        checkpoint_gib,
        interval_secs: 1800,
    }
}

/// The job kinds of the workloads, with the hardware that can run each.
pub fn standard_job_kinds() -> Vec<JobKind> {
    vec![
        // Runs on almost anything with 16 GB: consumer cards, V100, A100, niche cards.
        job_kind("any-16g", 1, 16, 70, &[], (2.0, 36.0), 4),
        job_kind("ampere-24g", 1, 24, 80, &[], (2.0, 36.0), 8),
        job_kind("multi-4x24g", 4, 24, 70, &[], (2.0, 36.0), 20),
        job_kind("single-40g", 1, 40, 80, &[], (2.0, 36.0), 15),
        job_kind("single-48g", 1, 48, 75, &[], (2.0, 36.0), 20),
        // Only the 80 GB cards.
        job_kind("single-80g", 1, 80, 80, &[], (2.0, 36.0), 30),
        job_kind("node-8x80g", 8, 80, 80, &[], (2.0, 36.0), 120),
        // Legacy CUDA stacks pinned to K80.
        job_kind("legacy-k80", 2, 12, 37, &["k80"], (2.0, 36.0), 4),
    ]
}

/// How jobs arrive.
#[derive(Clone, Debug)]
pub enum Arrivals {
    /// A steady Poisson stream at the rate that keeps the fleet `load` busy on average.
    Steady { load: f64 },
    /// Part of the load arrives steadily, the rest in bursts every `every_hours`.
    Bursty {
        load: f64,
        steady_fraction: f64,
        every_hours: f64,
    },
}

#[derive(Clone, Debug)]
pub struct Workload {
    pub name: &'static str,
    /// Weights over `standard_job_kinds()`, by name.
    pub mix: Vec<(&'static str, f64)>,
    pub arrivals: Arrivals,
    /// Fraction of jobs with a deadline.
    pub deadline_fraction: f64,
}

impl Workload {
    /// Each hardware group about 75% busy with the jobs that need it.
    pub fn balanced() -> Self {
        Self {
            name: "balanced",
            mix: vec![
                ("any-16g", 42.0),
                ("ampere-24g", 22.0),
                ("multi-4x24g", 9.0),
                ("single-40g", 8.0),
                ("single-48g", 4.5),
                ("single-80g", 4.0),
                ("node-8x80g", 1.5),
                ("legacy-k80", 2.5),
            ],
            arrivals: Arrivals::Steady { load: 0.8 },
            deadline_fraction: 0.3,
        }
    }

    /// Scarce hardware about 90% busy with jobs that only it can run, while flexible jobs
    /// overflow the common cards and would spill onto scarce ones.
    pub fn scarce_heavy() -> Self {
        Self {
            name: "scarce-heavy",
            mix: vec![
                ("any-16g", 52.0),
                ("ampere-24g", 18.0),
                ("multi-4x24g", 7.0),
                ("single-40g", 6.0),
                ("single-48g", 5.0),
                ("single-80g", 4.5),
                ("node-8x80g", 1.3),
                ("legacy-k80", 2.6),
            ],
            arrivals: Arrivals::Steady { load: 1.05 },
            deadline_fraction: 0.3,
        }
    }

    pub fn bursty() -> Self {
        Self {
            name: "bursty",
            arrivals: Arrivals::Bursty {
                load: 0.85,
                steady_fraction: 0.3,
                every_hours: 8.0,
            },
            ..Self::balanced()
        }
    }
}
