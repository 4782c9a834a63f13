//! How long each claimed GPU model may take: one table, each figure with its source.
//!
//! A figure is a rate measured on the model itself with a backend of this crate: the commit
//! phase's multiply-accumulates per second (generating the inputs, multiplying and hashing
//! the rows, end to end) and the held passes' bytes per second. A bound is the time the
//! challenge's work takes at that rate, times the slack, plus the chain's allowance.
//!
//! A model without a measured figure has no bound: its challenge can still show that the
//! node computes correctly, but not how fast or with how much memory, so such a node is
//! never promoted above the lowest class ([`crate::verify::Verdict::proven_class`]). A
//! vendor's peak figure is not a measurement and never goes in here.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// One model's figures and where they come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// Normalised model name (`mcjs_spec::gpu::normalize_model`), matched exactly.
    pub model: &'static str,
    pub figures: Figures,
    pub source: &'static str,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Figures {
    Measured {
        /// Multiply-accumulates per second of the whole commit phase.
        commit_macs_per_s: u64,
        /// Held bytes read and hashed per second over the held passes.
        held_bytes_per_s: u64,
    },
    Unmeasured,
}

/// The figures, the slack over them, and the chain's allowance.
#[derive(Debug, Clone, Copy)]
pub struct BoundsTable<'a> {
    pub entries: &'a [Entry],
    /// The bound is the measured time times this, in percent: a node within this factor of
    /// the model's measured speed passes as that model.
    pub slack_percent: u64,
    /// Added to each phase's bound for the chain: the node learning the seed's slot hash
    /// and its answer landing.
    pub chain_allowance: Duration,
}

/// The time each phase may take, from its seed's slot to the answer's landing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TimeBound {
    Measured {
        commit: Duration,
        held: Duration,
    },
    /// The claimed model has no measured figure: time is not judged and nothing above the
    /// lowest class is proven.
    Unmeasured,
}

const UNMEASURED_GPU: &str = "unmeasured: needs the GPU backend run on the card (docs/hardware-challenge.md, \"What is left\")";

/// The table every deployment uses.
///
/// `cpu-reference` is the CPU backend on the 2-core build VM (`cargo bench -p mcjs-challenge
/// --features adversaries --bench cost`, bench/results/challenge-cpu.txt), kept as the
/// reference the figures' units are read against; no node claims it. `h100-80gb-hbm3` is the
/// GPU backend on one H100 SXM (`bash bench/gpu-challenge.sh`, bench/results/challenge-gpu.txt):
/// the only GPU measured so far.
pub const MEASURED: BoundsTable<'static> = BoundsTable {
    entries: &[
        Entry {
            model: "cpu-reference",
            figures: Figures::Measured {
                commit_macs_per_s: 3_170_000_000,
                held_bytes_per_s: 960_000_000,
            },
            source: "bench/results/challenge-cpu.txt: CPU backend, 2 threads, 2-core build VM, median of 3 runs at width 2048",
        },
        Entry {
            model: "a100-sxm4-80gb",
            figures: Figures::Unmeasured,
            source: UNMEASURED_GPU,
        },
        Entry {
            model: "a100-pcie-40gb",
            figures: Figures::Unmeasured,
            source: UNMEASURED_GPU,
        },
        Entry {
            model: "h100-80gb-hbm3",
            figures: Figures::Measured {
                commit_macs_per_s: 405_900_000_000_000,
                held_bytes_per_s: 746_100_000_000,
            },
            source: "bench/results/challenge-gpu.txt: GPU backend on one NVIDIA H100 80GB HBM3 (driver 580.159.04, CUDA 13.0 libraries), its whole 85,017,493,504 B claimed, one run (run 0)",
        },
        Entry {
            model: "h200",
            figures: Figures::Unmeasured,
            source: UNMEASURED_GPU,
        },
        Entry {
            model: "v100-sxm2-32gb",
            figures: Figures::Unmeasured,
            source: UNMEASURED_GPU,
        },
        Entry {
            model: "rtx-a6000",
            figures: Figures::Unmeasured,
            source: UNMEASURED_GPU,
        },
        Entry {
            model: "geforce-rtx-4090",
            figures: Figures::Unmeasured,
            source: UNMEASURED_GPU,
        },
        Entry {
            model: "geforce-rtx-3090",
            figures: Figures::Unmeasured,
            source: UNMEASURED_GPU,
        },
        Entry {
            model: "t4",
            figures: Figures::Unmeasured,
            source: UNMEASURED_GPU,
        },
        Entry {
            model: "k80",
            figures: Figures::Unmeasured,
            source: UNMEASURED_GPU,
        },
    ],
    slack_percent: 150,
    // About 20 slots: a guess for a loaded cluster, not a measurement (the local chain
    // lands a transaction in under a second).
    chain_allowance: Duration::from_secs(8),
};

impl BoundsTable<'_> {
    pub fn entry(&self, model: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.model == model)
    }

    /// The bound for `macs` multiply-accumulates in the commit phase and `held_bytes_read`
    /// over all held passes, on `model`. Unmeasured when the model has no row or no figures.
    pub fn bound(&self, model: &str, macs: u128, held_bytes_read: u128) -> TimeBound {
        match self.entry(model).map(|e| e.figures) {
            Some(Figures::Measured {
                commit_macs_per_s,
                held_bytes_per_s,
            }) if commit_macs_per_s > 0 && held_bytes_per_s > 0 => TimeBound::Measured {
                commit: self.scaled(macs, commit_macs_per_s),
                held: self.scaled(held_bytes_read, held_bytes_per_s),
            },
            _ => TimeBound::Unmeasured,
        }
    }

    fn scaled(&self, work: u128, per_s: u64) -> Duration {
        let nanos =
            work * 1_000_000_000 * u128::from(self.slack_percent) / (100 * u128::from(per_s));
        Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
            .saturating_add(self.chain_allowance)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The GPU models a results file holds figures for.
    const MEASURED_GPUS: &[&str] = &["h100-80gb-hbm3"];

    #[test]
    fn every_gpu_row_without_a_results_file_is_unmeasured() {
        for entry in MEASURED.entries {
            assert!(!entry.source.is_empty(), "{} has no source", entry.model);
            assert!(
                mcjs_spec::gpu::is_normalized(entry.model),
                "{} is not a normalised name",
                entry.model
            );
            let measured = entry.model == "cpu-reference" || MEASURED_GPUS.contains(&entry.model);
            assert_eq!(
                matches!(entry.figures, Figures::Measured { .. }),
                measured,
                "{}: measured only with a results file",
                entry.model
            );
            assert_eq!(
                MEASURED.bound(entry.model, 1, 1) == TimeBound::Unmeasured,
                !measured,
                "{}",
                entry.model
            );
        }
    }

    /// The H100 row is the one the GPU results file names: the card's name, and the rates of
    /// the run that passed at its whole memory.
    #[test]
    fn the_h100_row_is_the_measured_one() {
        let results = include_str!("../../../bench/results/challenge-gpu.txt");
        assert!(results.contains("NVIDIA H100 80GB HBM3, 81559 MiB"));
        assert!(results.contains(
            "check: the GPU's commitment, held digest and opening equal the CPU's; verdict Passed"
        ));
        let line = results
            .lines()
            .find(|l| l.starts_with("run 0: commit ") && l.ends_with("; Passed"))
            .expect("the results hold a run that passed");
        let rate = |unit: &str| -> u64 {
            let before = &line[..line.find(unit).expect("a rate")];
            let number = before.rsplit('(').next().expect("a number").trim();
            number.parse::<f64>().expect("a rate") as u64
        };
        assert_eq!(
            MEASURED.entry("h100-80gb-hbm3").map(|e| e.figures),
            Some(Figures::Measured {
                commit_macs_per_s: rate(" MAC/s"),
                held_bytes_per_s: rate(" B/s"),
            })
        );
        assert_eq!(
            mcjs_spec::gpu::normalize_model("NVIDIA H100 80GB HBM3"),
            "h100-80gb-hbm3",
            "the name the card reports reads as the row's"
        );
    }

    /// The CPU reference row is the one the results file names.
    #[test]
    fn the_cpu_reference_row_is_the_measured_one() {
        let results = include_str!("../../../bench/results/challenge-cpu.txt");
        let line = results
            .lines()
            .find(|l| l.starts_with("# at width 2048: commit "))
            .expect("the results name their figures");
        let figure = |after: &str| -> u64 {
            let rest = &line[line.find(after).expect("a figure") + after.len()..];
            let number = rest.split_whitespace().next().expect("a number");
            number.parse::<f64>().expect("a figure") as u64
        };
        assert_eq!(
            MEASURED.entry("cpu-reference").map(|e| e.figures),
            Some(Figures::Measured {
                commit_macs_per_s: figure("commit "),
                held_bytes_per_s: figure("held passes "),
            })
        );
    }

    #[test]
    fn a_model_not_in_the_table_is_unmeasured() {
        assert_eq!(MEASURED.bound("b200", 1, 1), TimeBound::Unmeasured);
        assert_eq!(
            MEASURED.bound("a100", 1, 1),
            TimeBound::Unmeasured,
            "no prefix matching: the table names exact models"
        );
    }

    #[test]
    fn a_bound_is_the_work_at_the_measured_rate_with_slack_and_allowance() {
        let table = BoundsTable {
            entries: &[Entry {
                model: "m",
                figures: Figures::Measured {
                    commit_macs_per_s: 1_000,
                    held_bytes_per_s: 2_000,
                },
                source: "test",
            }],
            slack_percent: 150,
            chain_allowance: Duration::from_secs(1),
        };
        assert_eq!(
            table.bound("m", 10_000, 10_000),
            TimeBound::Measured {
                commit: Duration::from_secs(16),
                held: Duration::from_millis(8_500),
            }
        );
    }
}
