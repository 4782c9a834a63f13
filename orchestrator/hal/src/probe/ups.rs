//! The node's UPS, read over the Network UPS Tools protocol (NUT: `upsd`,
//! TCP 3493), which is how Linux hosts read any UPS: `ups.status`,
//! `battery.charge` and `battery.runtime` of one UPS.
//!
//! The client is the `rups` crate (its async client): NUT's quoting and
//! error lines are handled there, and it needs nothing but tokio.
//!
//! Everything `upsd` answers is input from another process: a status that
//! is not NUT's is `Unknown` (the agent treats it as no UPS), a charge or
//! runtime that does not parse, or is out of range, is left out.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// NUT's port.
pub const DEFAULT_PORT: u16 = 3493;

/// How long a read of the UPS may take, connection included.
pub const READ_TIMEOUT: Duration = Duration::from_secs(2);

/// One UPS served by a `upsd`: `NAME@HOST[:PORT]`, as NUT's own tools
/// (`upsc`) name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpsTarget {
    pub name: String,
    pub host: String,
    pub port: u16,
}

impl FromStr for UpsTarget {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = |why: &str| {
            format!("bad UPS '{s}': {why}; expected NAME@HOST[:PORT], e.g. ups@localhost:3493")
        };
        let (name, at) = s.split_once('@').ok_or_else(|| bad("no '@'"))?;
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            return Err(bad(
                "the UPS name is empty or has characters NUT does not allow",
            ));
        }
        let (host, port) = match at.rsplit_once(':') {
            Some((host, port)) => (
                host,
                port.parse::<u16>()
                    .ok()
                    .filter(|p| *p != 0)
                    .ok_or_else(|| bad("the port is not a number from 1 to 65535"))?,
            ),
            None => (at, DEFAULT_PORT),
        };
        if host.is_empty() {
            return Err(bad("no host"));
        }
        Ok(Self {
            name: name.to_string(),
            host: host.to_string(),
            port,
        })
    }
}

impl fmt::Display for UpsTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}:{}", self.name, self.host, self.port)
    }
}

/// What the power feed is doing, from `ups.status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum PowerState {
    /// Mains power (`OL`).
    OnLine,
    /// Running on the battery (`OB`): the node will go down unless mains
    /// power returns.
    OnBattery,
    /// The battery is nearly spent (`LB`): the UPS shuts down soon.
    LowBattery,
    /// No UPS answered, or a status NUT does not define.
    Unknown,
}

impl PowerState {
    /// From NUT's `ups.status`: space-separated flags (`OL CHRG`, `OB DISCHRG`,
    /// `OB LB`, ...). A low battery outranks the rest; `OL` and `OB` together
    /// (a transfer in progress) reads as on battery.
    pub fn from_status(status: &str) -> Self {
        let flags: Vec<&str> = status.split_whitespace().collect();
        if flags.contains(&"LB") {
            PowerState::LowBattery
        } else if flags.contains(&"OB") {
            PowerState::OnBattery
        } else if flags.contains(&"OL") {
            PowerState::OnLine
        } else {
            PowerState::Unknown
        }
    }
}

impl fmt::Display for PowerState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PowerState::OnLine => "on line",
            PowerState::OnBattery => "on battery",
            PowerState::LowBattery => "low battery",
            PowerState::Unknown => "unknown",
        })
    }
}

/// One read of the UPS.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PowerReading {
    /// `NAME@HOST:PORT`.
    pub ups: String,
    pub reachable: bool,
    pub state: PowerState,
    /// `ups.status` as `upsd` gave it.
    pub status: Option<String>,
    /// `battery.charge`, 0..=100.
    pub charge_percent: Option<f64>,
    /// `battery.runtime`: seconds the battery lasts at the present load.
    pub runtime_secs: Option<u64>,
    /// Why it could not be read, when it could not.
    pub error: Option<String>,
}

impl PowerReading {
    fn unreachable(target: &UpsTarget, error: String) -> Self {
        Self {
            ups: target.to_string(),
            reachable: false,
            state: PowerState::Unknown,
            status: None,
            charge_percent: None,
            runtime_secs: None,
            error: Some(error),
        }
    }

    /// From what `upsd` answered for the three variables (`None`: it has
    /// no such variable).
    pub fn from_vars(
        target: &UpsTarget,
        status: Option<String>,
        charge: Option<String>,
        runtime: Option<String>,
    ) -> Self {
        Self {
            ups: target.to_string(),
            reachable: true,
            state: status
                .as_deref()
                .map_or(PowerState::Unknown, PowerState::from_status),
            status,
            charge_percent: charge
                .and_then(|c| c.trim().parse::<f64>().ok())
                .filter(|c| (0.0..=100.0).contains(c)),
            runtime_secs: runtime
                .and_then(|r| r.trim().parse::<f64>().ok())
                .filter(|r| r.is_finite() && *r >= 0.0 && *r < 1e9)
                .map(|r| r as u64),
            error: None,
        }
    }
}

/// Reads the UPS once, within [`READ_TIMEOUT`]: an unreachable `upsd` or
/// an unknown UPS gives a reading that says why, never an error.
pub async fn read(target: &UpsTarget) -> PowerReading {
    match tokio::time::timeout(READ_TIMEOUT, read_vars(target)).await {
        Ok(Ok(reading)) => reading,
        Ok(Err(error)) => PowerReading::unreachable(target, error),
        Err(_) => PowerReading::unreachable(
            target,
            format!(
                "upsd at {}:{} did not answer within {READ_TIMEOUT:?}",
                target.host, target.port
            ),
        ),
    }
}

async fn read_vars(target: &UpsTarget) -> Result<PowerReading, String> {
    // Resolved here, not by the client, whose lookup blocks the thread.
    let addr = tokio::net::lookup_host((target.host.as_str(), target.port))
        .await
        .ok()
        .and_then(|mut addrs| addrs.next())
        .ok_or_else(|| format!("cannot resolve the upsd host {}", target.host))?;
    let host = rups::Host::try_from((addr.ip().to_string(), addr.port()))
        .map_err(|e| format!("bad upsd address {addr}: {e}"))?;
    let config = rups::ConfigBuilder::new()
        .with_host(host)
        .with_timeout(READ_TIMEOUT)
        .build();
    let mut connection = rups::tokio::Connection::new(&config)
        .await
        .map_err(|e| format!("cannot reach upsd at {}:{}: {e}", target.host, target.port))?;
    let status = connection
        .get_var(&target.name, "ups.status")
        .await
        .map_err(|e| format!("upsd has no UPS '{}' (or refused it): {e}", target.name))?;
    // A UPS without a charge or runtime reading still has a status.
    let charge = connection
        .get_var(&target.name, "battery.charge")
        .await
        .ok();
    let runtime = connection
        .get_var(&target.name, "battery.runtime")
        .await
        .ok();
    let _ = connection.close().await;
    Ok(PowerReading::from_vars(
        target,
        Some(status.value()),
        charge.map(|v| v.value()),
        runtime.map(|v| v.value()),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ups_is_named_as_nut_names_it_and_a_bad_name_says_how_to_fix_it() {
        let t: UpsTarget = "ups@localhost".parse().unwrap();
        assert_eq!(
            (t.name.as_str(), t.host.as_str(), t.port),
            ("ups", "localhost", 3493)
        );
        let t: UpsTarget = "rack-2.ups@10.0.0.5:3500".parse().unwrap();
        assert_eq!(t.to_string(), "rack-2.ups@10.0.0.5:3500");
        for bad in [
            "ups",
            "@host",
            "ups@",
            "ups@host:0",
            "ups@host:x",
            "u ps@host",
            "ups@host:70000",
        ] {
            let e = bad.parse::<UpsTarget>().unwrap_err();
            assert!(e.contains("NAME@HOST[:PORT]"), "{bad}: {e}");
        }
    }

    #[test]
    fn the_status_flags_give_the_power_state() {
        assert_eq!(PowerState::from_status("OL"), PowerState::OnLine);
        assert_eq!(PowerState::from_status("OL CHRG"), PowerState::OnLine);
        assert_eq!(PowerState::from_status("OB DISCHRG"), PowerState::OnBattery);
        assert_eq!(PowerState::from_status("OL OB"), PowerState::OnBattery);
        assert_eq!(PowerState::from_status("OB LB"), PowerState::LowBattery);
        assert_eq!(PowerState::from_status("LB"), PowerState::LowBattery);
        assert_eq!(PowerState::from_status(""), PowerState::Unknown);
        assert_eq!(PowerState::from_status("OLD"), PowerState::Unknown);
    }

    #[test]
    fn what_upsd_answers_is_kept_only_when_it_makes_sense() {
        let t: UpsTarget = "ups@localhost".parse().unwrap();
        let r = PowerReading::from_vars(
            &t,
            Some("OB".into()),
            Some("87".into()),
            Some("1200".into()),
        );
        assert_eq!(r.state, PowerState::OnBattery);
        assert_eq!((r.charge_percent, r.runtime_secs), (Some(87.0), Some(1200)));
        let r =
            PowerReading::from_vars(&t, Some("OL".into()), Some("140".into()), Some("-5".into()));
        assert_eq!((r.charge_percent, r.runtime_secs), (None, None));
        let r = PowerReading::from_vars(
            &t,
            Some("OL".into()),
            Some("NaN".into()),
            Some("inf".into()),
        );
        assert_eq!((r.charge_percent, r.runtime_secs), (None, None));
        let r = PowerReading::from_vars(&t, None, None, None);
        assert_eq!(r.state, PowerState::Unknown);
    }
}
