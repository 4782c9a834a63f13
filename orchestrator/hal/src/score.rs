//! Readiness score: how likely this node is to run a multi-day checkpointed job without trouble.
//!
//! `score = round(sum(weight_i * value_i) / sum(weight_i) * 100)` over the components that
//! apply, each `value_i` in `[0, 1]`:
//!
//! | component | weight | value | why |
//! | --- | --- | --- | --- |
//! | gpu health | 40 | mean over GPUs of `ecc * thermal`; 0 with no GPU | GPUs are what jobs rent; a GPU with uncorrected memory errors corrupts training silently and a hot one throttles or shuts down |
//! | checkpoint write | 20 | `min(1, B / 250 MiB/s)`; 0 unmeasured | recovery loses at most one interval of work only if checkpoints are written; 250 MiB/s writes 10 GiB in ~41 s |
//! | write stability | 10 | 1 at CoV <= 0.05, falling linearly to 0 at CoV >= 0.25 | an erratic disk makes checkpoint timing unpredictable (same limit as the capability rule) |
//! | container runtime | 20 | 1 when Docker answered, else 0 | the agent cannot start any job without it |
//! | network | 10 | fraction of the given targets that answered; not counted when none was given | a node that cannot reach the checkpoint store or the RPC cannot upload or attest |
//! | power | 10 | 1 on line, 0.5 on battery, 0 at low battery or when the UPS cannot be read; not counted when no UPS was given (`--ups`) | a node on battery goes down unless mains power returns; one whose UPS says nothing gives no warning |
//!
//! Per GPU: `ecc` is 0 with any uncorrected error since the driver loaded (the board is
//! producing bad data now), 0.5 with only lifetime uncorrected errors (retired pages, a board
//! with a history), else 1; unknown counters count as 1 (consumer boards have no ECC).
//! `thermal` is 1 up to 80 °C, falling linearly to 0 at 95 °C (typical slowdown and shutdown
//! thresholds of data-center GPUs); unknown counts as 1.

use std::fmt;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::profile::{GpuHealth, NodeProfile};

pub const REFERENCE_WRITE_MIBPS: f64 = 250.0;
pub const THERMAL_FULL_CELSIUS: f64 = 80.0;
pub const THERMAL_ZERO_CELSIUS: f64 = 95.0;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Readiness {
    /// 0..=100.
    pub score: u8,
    pub components: Vec<ScoreComponent>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ScoreComponent {
    pub name: String,
    pub weight: u32,
    /// In `[0, 1]`.
    pub value: f64,
    pub detail: String,
}

/// Computes the readiness score from a profile's identity and measurements. Pure.
pub fn readiness(profile: &NodeProfile) -> Readiness {
    let mut components = Vec::new();

    let gpu_values: Vec<f64> = profile
        .identity
        .gpus
        .iter()
        .map(|g| {
            profile
                .measurements
                .gpus
                .iter()
                .find(|h| h.pci_bus_id == g.pci_bus_id)
                .map_or(1.0, gpu_health_value)
        })
        .collect();
    let (gpu_value, gpu_detail) = if gpu_values.is_empty() {
        (0.0, "no gpu found".to_string())
    } else {
        let mean = gpu_values.iter().sum::<f64>() / gpu_values.len() as f64;
        let values: Vec<String> = gpu_values.iter().map(|v| format!("{v:.2}")).collect();
        (mean, format!("per gpu: {}", values.join(", ")))
    };
    components.push(component("gpu health", 40, gpu_value, gpu_detail));

    match &profile.measurements.storage {
        Some(s) => {
            let b = s.write.mean_mibps;
            components.push(component(
                "checkpoint write",
                20,
                (b / REFERENCE_WRITE_MIBPS).clamp(0.0, 1.0),
                format!("{b:.1} MiB/s against a reference of {REFERENCE_WRITE_MIBPS} MiB/s"),
            ));
            let cov = s.write.cov;
            let stability = if s.write.samples_mibps.len() < 2 || !cov.is_finite() {
                0.0
            } else {
                (1.0 - (cov - 0.05) / 0.20).clamp(0.0, 1.0)
            };
            components.push(component(
                "write stability",
                10,
                stability,
                format!(
                    "coefficient of variation {cov:.3} over {} samples",
                    s.write.samples_mibps.len()
                ),
            ));
        }
        None => {
            components.push(component(
                "checkpoint write",
                20,
                0.0,
                "not measured".into(),
            ));
            components.push(component("write stability", 10, 0.0, "not measured".into()));
        }
    }

    let runtime = &profile.platform.container_runtime;
    components.push(component(
        "container runtime",
        20,
        if runtime.reachable { 1.0 } else { 0.0 },
        if runtime.reachable {
            format!(
                "docker {} reachable",
                runtime.version.as_deref().unwrap_or("?")
            )
        } else {
            format!(
                "docker unreachable: {}",
                runtime.error.as_deref().unwrap_or("unknown")
            )
        },
    ));

    let network = &profile.measurements.network;
    if !network.is_empty() {
        let ok = network.iter().filter(|n| n.error.is_none()).count();
        components.push(component(
            "network",
            10,
            ok as f64 / network.len() as f64,
            format!("{ok} of {} targets answered", network.len()),
        ));
    }

    if let Some(power) = &profile.measurements.power {
        use crate::probe::ups::PowerState;
        let value = match power.state {
            PowerState::OnLine => 1.0,
            PowerState::OnBattery => 0.5,
            PowerState::LowBattery | PowerState::Unknown => 0.0,
        };
        let detail = match (&power.error, power.charge_percent) {
            (Some(error), _) => format!("UPS {}: {error}", power.ups),
            (None, Some(charge)) => {
                format!("UPS {} {}, battery {charge:.0}%", power.ups, power.state)
            }
            (None, None) => format!("UPS {} {}", power.ups, power.state),
        };
        components.push(component("power", 10, value, detail));
    }

    let total_weight: u32 = components.iter().map(|c| c.weight).sum();
    let weighted: f64 = components
        .iter()
        .map(|c| f64::from(c.weight) * c.value)
        .sum();
    let score = (weighted / f64::from(total_weight) * 100.0)
        .round()
        .clamp(0.0, 100.0) as u8;
    Readiness { score, components }
}

fn component(name: &str, weight: u32, value: f64, detail: String) -> ScoreComponent {
    ScoreComponent {
        name: name.to_string(),
        weight,
        value: if value.is_finite() {
            value.clamp(0.0, 1.0)
        } else {
            0.0
        },
        detail,
    }
}

/// `ecc * thermal` for one GPU, as documented at the top of this module.
pub fn gpu_health_value(h: &GpuHealth) -> f64 {
    let ecc = if h.ecc_uncorrected_volatile.unwrap_or(0) > 0 {
        0.0
    } else if h.ecc_uncorrected_aggregate.unwrap_or(0) > 0 {
        0.5
    } else {
        1.0
    };
    let thermal = match h.temperature_celsius {
        None => 1.0,
        Some(t) => {
            let t = f64::from(t);
            ((THERMAL_ZERO_CELSIUS - t) / (THERMAL_ZERO_CELSIUS - THERMAL_FULL_CELSIUS))
                .clamp(0.0, 1.0)
        }
    };
    ecc * thermal
}

impl fmt::Display for Readiness {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "readiness {}/100", self.score)?;
        for c in &self.components {
            writeln!(
                f,
                "  {:<18} w{:<3} {:.2}  {}",
                c.name, c.weight, c.value, c.detail
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn health(temp: Option<u32>, volatile: Option<u64>, aggregate: Option<u64>) -> GpuHealth {
        GpuHealth {
            pci_bus_id: "0000:01:00.0".into(),
            temperature_celsius: temp,
            ecc_uncorrected_volatile: volatile,
            ecc_uncorrected_aggregate: aggregate,
            ecc_corrected_volatile: None,
        }
    }

    #[test]
    fn uncorrected_errors_since_boot_zero_a_gpu_and_lifetime_ones_halve_it() {
        assert_eq!(gpu_health_value(&health(Some(40), Some(0), Some(0))), 1.0);
        assert_eq!(gpu_health_value(&health(Some(40), Some(1), Some(1))), 0.0);
        assert_eq!(gpu_health_value(&health(Some(40), Some(0), Some(3))), 0.5);
        assert_eq!(gpu_health_value(&health(None, None, None)), 1.0);
    }

    #[test]
    fn heat_costs_linearly_from_80_to_95_celsius() {
        assert_eq!(gpu_health_value(&health(Some(80), None, None)), 1.0);
        assert!((gpu_health_value(&health(Some(87), None, None)) - 8.0 / 15.0).abs() < 1e-12);
        assert_eq!(gpu_health_value(&health(Some(95), None, None)), 0.0);
        assert_eq!(gpu_health_value(&health(Some(110), Some(0), Some(2))), 0.0);
    }
}
