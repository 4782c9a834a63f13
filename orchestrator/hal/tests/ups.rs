//! The HAL reads a real `upsd` (Network UPS Tools), driven by its
//! `dummy-ups` driver from on line to on battery to low battery.
//! `scripts/setup.sh` installs nut-server when it is missing.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use mcjs_hal::probe::dummy_ups::DummyUps;
use mcjs_hal::probe::ups::{self, PowerReading, PowerState, UpsTarget};

/// Reads the UPS until `holds`, for at most 10 s.
async fn until(
    target: &UpsTarget,
    what: &str,
    holds: impl Fn(&PowerReading) -> bool,
) -> PowerReading {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let reading = ups::read(target).await;
        if holds(&reading) {
            return reading;
        }
        assert!(Instant::now() < deadline, "never {what}: last {reading:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn the_hal_follows_a_real_upsd_from_on_line_to_low_battery() {
    let mut nut = DummyUps::start();
    let target = nut.target("test");

    let on_line = until(&target, "on line", |r| r.state == PowerState::OnLine).await;
    assert!(on_line.reachable && on_line.error.is_none());
    assert_eq!(on_line.status.as_deref(), Some("OL"));
    assert_eq!(
        (on_line.charge_percent, on_line.runtime_secs),
        (Some(100.0), Some(1800))
    );
    assert_eq!(on_line.ups, target.to_string());

    nut.set("OB DISCHRG", "80", "600");
    let on_battery = until(&target, "on battery", |r| r.state == PowerState::OnBattery).await;
    assert_eq!(
        (on_battery.charge_percent, on_battery.runtime_secs),
        (Some(80.0), Some(600))
    );

    nut.set("OB LB", "9", "60");
    let low = until(&target, "at low battery", |r| {
        r.state == PowerState::LowBattery
    })
    .await;
    assert_eq!(
        (low.charge_percent, low.runtime_secs),
        (Some(9.0), Some(60))
    );

    // What the UPS says that makes no sense is left out, not believed.
    nut.set("OL CHRG", "250", "-1");
    let odd = until(&target, "back on line", |r| r.state == PowerState::OnLine).await;
    assert_eq!((odd.charge_percent, odd.runtime_secs), (None, None));

    // A UPS upsd does not serve, and a upsd that is gone: a reading that
    // says why, never a hang or a guess.
    let unknown = ups::read(&nut.target("nosuch")).await;
    assert!(!unknown.reachable && unknown.state == PowerState::Unknown);
    assert!(
        unknown
            .error
            .as_deref()
            .unwrap()
            .contains("no UPS 'nosuch'"),
        "{unknown:?}"
    );
    nut.stop_upsd();
    let started = Instant::now();
    let gone = ups::read(&target).await;
    assert!(started.elapsed() <= ups::READ_TIMEOUT + Duration::from_millis(500));
    assert!(!gone.reachable && gone.state == PowerState::Unknown);
    assert!(
        gone.error.as_deref().unwrap().contains("cannot reach upsd"),
        "{gone:?}"
    );
}

#[tokio::test]
async fn readiness_counts_the_ups_only_when_one_is_named() {
    let mut nut = DummyUps::start();
    let config = |ups: Option<UpsTarget>| mcjs_hal::ProbeConfig {
        ups,
        docker_endpoint: mcjs_hal::probe::docker::DockerEndpoint::parse("unix:///nonexistent"),
        nvml_lib: Some(PathBuf::from("/nonexistent/libnvidia-ml.so")),
        ..mcjs_hal::ProbeConfig::default()
    };
    let power = |profile: &mcjs_hal::NodeProfile| {
        mcjs_hal::readiness(profile)
            .components
            .into_iter()
            .find(|c| c.name == "power")
    };
    let without = mcjs_hal::probe_node(&config(None), 0).await.unwrap();
    assert!(without.measurements.power.is_none());
    assert!(power(&without).is_none(), "no UPS named: not counted");

    until(&nut.target("test"), "on line", |r| {
        r.state == PowerState::OnLine
    })
    .await;
    let with = mcjs_hal::probe_node(&config(Some(nut.target("test"))), 0)
        .await
        .unwrap();
    assert_eq!(
        with.measurements.power.as_ref().unwrap().state,
        PowerState::OnLine
    );
    assert_eq!(power(&with).unwrap().value, 1.0);
    assert!(
        with.to_string().contains("power        UPS test@127.0.0.1"),
        "{with}"
    );

    nut.set("OB", "50", "300");
    until(&nut.target("test"), "on battery", |r| {
        r.state == PowerState::OnBattery
    })
    .await;
    let on_battery = mcjs_hal::probe_node(&config(Some(nut.target("test"))), 0)
        .await
        .unwrap();
    assert_eq!(power(&on_battery).unwrap().value, 0.5);
    assert!(
        mcjs_hal::readiness(&on_battery).score < mcjs_hal::readiness(&with).score,
        "on battery scores lower"
    );
    nut.stop_upsd();
    let unread = mcjs_hal::probe_node(&config(Some(nut.target("test"))), 0)
        .await
        .unwrap();
    assert_eq!(power(&unread).unwrap().value, 0.0);
}
