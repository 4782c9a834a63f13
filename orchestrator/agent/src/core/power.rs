//! The node's power, as its UPS reports it: a loss of mains power asks
//! every running job for a checkpoint at once; a low battery stops each job
//! once a checkpoint taken after the warning is attested
//! (docs/job-contract.md, "Power").

use super::*;

/// The least time between two rounds of checkpoint signals for a loss of
/// mains power: a UPS that flaps between line and battery (or an `upsd`
/// that says it does) gets one round per this long, not one per flip.
pub const POWER_SIGNAL_FLOOR: Duration = Duration::from_secs(30);

/// How long a job on a node with a low battery is given to have a
/// checkpoint collected and attested before it is stopped all the same.
pub const POWER_STOP_WAIT: Duration = Duration::from_secs(60);

/// A job to stop for a low battery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PowerStop {
    /// When the low battery was heard of (and the job told to checkpoint).
    pub asked_at: SystemTime,
    /// The newest checkpoint collected since: the job stops once it is
    /// attested.
    pub checkpoint: Option<(u32, u64)>,
}

fn on_mains(state: PowerState) -> bool {
    !matches!(state, PowerState::OnBattery | PowerState::LowBattery)
}

impl Core {
    /// The node's UPS read `state`.
    ///
    /// - A loss of mains power (on battery, or straight to a low battery):
    ///   every running job is told to checkpoint now, whatever its
    ///   interval, so that what it has done is collected and attested while
    ///   the battery lasts; the job runs on. Once per
    ///   [`POWER_SIGNAL_FLOOR`] at most, however often the UPS flaps.
    /// - A low battery: each running job stops (`power_lost`, requeued
    ///   elsewhere with no restart used) once a checkpoint collected after
    ///   the warning is attested, or after [`POWER_STOP_WAIT`] without one;
    ///   it is told to checkpoint now unless a checkpoint it was asked for
    ///   has not been collected yet.
    /// - Back on line (or a UPS that cannot be read, taken as mains): the
    ///   stops not yet made are called off.
    ///
    /// A job whose spec fixes its steps is never told to checkpoint (an
    /// off-grid checkpoint is not stored): at a low battery it stops at once,
    /// losing what it did since its last checkpoint on the grid.
    pub fn on_power(&mut self, state: PowerState, now: SystemTime) -> Vec<Action> {
        let was = std::mem::replace(&mut self.power, state);
        let mut actions = Vec::new();
        if on_mains(state) {
            for a in self.jobs.values_mut() {
                a.power_stop = None;
            }
            return actions;
        }
        if on_mains(was) {
            let quiet = self
                .power_signalled_at
                .is_some_and(|t| now.duration_since(t).unwrap_or_default() < POWER_SIGNAL_FLOOR);
            if quiet {
                tracing::info!(floor = ?POWER_SIGNAL_FLOOR, "mains power lost again soon after the last loss: no new checkpoint signal");
            } else {
                self.power_signalled_at = Some(now);
                for a in self.jobs.values_mut() {
                    signal(a, now, &mut actions);
                }
            }
        }
        if state == PowerState::LowBattery && was != PowerState::LowBattery {
            for a in self.jobs.values_mut() {
                if !matches!(a.phase, RunPhase::Running { .. }) || a.power_stop.is_some() {
                    continue;
                }
                if a.fixed_steps {
                    stop_for_power(a, "its steps are fixed by its spec", &mut actions);
                    continue;
                }
                // Asked already, and nothing collected since: that one serves.
                let outstanding = a
                    .last_signal_at
                    .is_some_and(|sent| a.last_checkpoint_at.is_none_or(|got| sent > got));
                if !outstanding {
                    signal(a, now, &mut actions);
                }
                a.power_stop = Some(PowerStop {
                    asked_at: now,
                    checkpoint: None,
                });
            }
        }
        actions
    }
}

/// Tells a running job whose steps are not fixed to checkpoint now.
fn signal(a: &mut Assignment, now: SystemTime, actions: &mut Vec<Action>) {
    if let RunPhase::Running { container } = &a.phase
        && !a.fixed_steps
    {
        a.last_signal_at = Some(now);
        // Collected at the next tick, not after a failed one's backoff.
        a.collect_after = None;
        actions.push(Action::SignalCheckpoint {
            job: a.job,
            generation: a.generation,
            container: container.clone(),
        });
    }
}

/// Stops a running job for a low battery: `power_lost`, which the
/// scheduler reports as a yield.
pub(super) fn stop_for_power(a: &mut Assignment, why: &str, actions: &mut Vec<Action>) {
    a.power_stop = None;
    let RunPhase::Running { container } = &a.phase else {
        return;
    };
    let container = container.clone();
    tracing::warn!(job = %a.job, generation = a.generation, last_attested = ?a.last_attested, "the node's battery is low: stopping the job ({why})");
    let exit = Exit {
        stop: StopReason::PowerLost,
        last_logs: vec![format!("the node's battery is low: stopped ({why})")],
    };
    a.exit = Some(exit.clone());
    a.phase = RunPhase::Exited {
        exit,
        container: Some(container.clone()),
    };
    actions.push(Action::Remove {
        job: a.job,
        generation: a.generation,
        container,
    });
}
