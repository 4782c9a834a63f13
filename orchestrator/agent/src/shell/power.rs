//! The node's UPS, read for the core (`Core::on_power`) and the heartbeat.

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::POWER_POLL;

/// Reads the node's UPS every [`POWER_POLL`] and sends each change of its
/// state (the first read included). A UPS that cannot be read is
/// `Unknown`, which the core treats as mains power: a lost connection to
/// `upsd` stops no work.
pub(super) async fn watch_power(
    ups: mcjs_hal::probe::ups::UpsTarget,
    changes: mpsc::UnboundedSender<mcjs_hal::probe::ups::PowerState>,
    cancel: CancellationToken,
) {
    let mut last = None;
    let mut every = tokio::time::interval(POWER_POLL);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = every.tick() => {}
        }
        let reading = mcjs_hal::probe::ups::read(&ups).await;
        if last != Some(reading.state) {
            match &reading.error {
                Some(error) => tracing::warn!(%ups, %error, "cannot read the node's UPS"),
                None => {
                    tracing::info!(%ups, power = %reading.state, charge = ?reading.charge_percent, runtime_secs = ?reading.runtime_secs, "the node's UPS")
                }
            }
            last = Some(reading.state);
            if changes.send(reading.state).is_err() {
                return;
            }
        }
    }
}

/// What the heartbeat says of the node's power: nothing when the UPS
/// cannot be read (the scheduler then judges the node as one without).
pub(super) fn for_heartbeat(
    state: mcjs_hal::probe::ups::PowerState,
) -> Option<mcjs_protocol::NodePower> {
    use mcjs_hal::probe::ups::PowerState;
    use mcjs_protocol::NodePower;
    match state {
        PowerState::OnLine => Some(NodePower::OnLine),
        PowerState::OnBattery => Some(NodePower::OnBattery),
        PowerState::LowBattery => Some(NodePower::LowBattery),
        PowerState::Unknown => None,
    }
}
