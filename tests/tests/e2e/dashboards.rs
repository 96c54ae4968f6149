//! The dashboards name only entities the daemon announces.
// Test helpers fail loudly on a broken setup.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::collections::BTreeSet;
use std::sync::Arc;

use wattson::live::LiveState;
use wattson::publish::mqtt::discovery;
use wattson::publish::mqtt::state::{self, MeterCounters, StateExtras};
use wattson::sweep::regression::Check;
use wattson_collectors::{Metric, Sample};
use wattson_tests::regression_check;

/// The entity ids `wattson run` announces for host `basket` with a wall meter, the CPU
/// collector and a tariff; `check` is the stored idle-regression verdict, if any (none on
/// the first start of a new install).
fn announced(check: Option<Check>) -> BTreeSet<String> {
    let live = Arc::new(LiveState::default());
    let _ = live.observe(&[
        Sample::new(1, "meter:wall", Metric::Power, "", 240.0),
        Sample::new(1, "meter:wall", Metric::Voltage, "", 230.0),
        Sample::new(1, "meter:wall", Metric::Current, "", 1.1),
        Sample::new(1, "meter:wall", Metric::PowerFactor, "", 0.9),
        Sample::new(1, "meter:wall", Metric::Frequency, "", 50.0),
        Sample::new(1, "meter:wall", Metric::EnergyTotal, "", 10.0),
        Sample::new(1, "cpu", Metric::CpuBusy, "all", 0.1),
        Sample::new(1, "cpu", Metric::CoreFrequency, "mean", 2000.0),
        Sample::new(1, "cpu", Metric::IdleResidency, "all/C6", 0.8),
    ]);
    let extras = StateExtras {
        currency: "GBP".into(),
        cost_today: Some(0.1),
        cost_month: Some(1.0),
        cost_total: Some(2.0),
        annual_projection: Some(100.0),
        annual_basis: Some("a year on your tariff: this machine's load in each hour of the week, from 168.0 h measured in the last 7 days".into()),
        energy_today_kwh: Some(1.0),
        energy_total_kwh: Some(10.0),
        mode: Some("idle".into()),
        meter_counters: vec![MeterCounters {
            id: "wall".into(),
            ..MeterCounters::default()
        }],
        idle_regression: check,
        ..StateExtras::default()
    };
    let snap = state::build(&live.take_means(), &live.latest(), &extras, 10.0).unwrap();
    discovery::entities(&snap.json, &extras)
        .iter()
        .map(|e| e.entity_id("basket"))
        .collect()
}

/// Every `sensor.wattson_*` and `binary_sensor.wattson_*` token in `text`.
fn entity_ids(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(i) = rest.find("sensor.wattson_") {
        let i = if rest[..i].ends_with("binary_") {
            i - "binary_".len()
        } else {
            i
        };
        let tail = &rest[i..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
            .unwrap_or(tail.len());
        out.insert(tail[..end].to_owned());
        rest = &tail[end..];
    }
    out
}

#[test]
fn home_assistant_dashboard_uses_only_announced_entities() {
    let yaml = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../dashboards/home-assistant.yaml"),
    )
    .unwrap();
    let used = entity_ids(&yaml);
    assert!(used.len() >= 15, "{used:?}");
    // Every entity exists from the first start (no regression check stored yet: the binary
    // sensor is announced with an unknown state), and still once a verdict exists.
    for (when, check) in [
        ("on the first start", None),
        ("after a regression check", Some(regression_check())),
    ] {
        let announced = announced(check);
        let unknown: Vec<&String> = used.difference(&announced).collect();
        assert!(
            unknown.is_empty(),
            "not announced by the daemon {when}: {unknown:?}"
        );
    }
    // And the dashboard shows every headline figure.
    for must in [
        "sensor.wattson_basket_power",
        "sensor.wattson_basket_energy",
        "sensor.wattson_basket_cost_today",
        "sensor.wattson_basket_cost_annual_projection",
        "sensor.wattson_basket_cpu_utilisation",
        "binary_sensor.wattson_basket_idle_regression",
    ] {
        assert!(used.contains(must), "{must}");
    }
    // A binary sensor is not mistaken for a sensor of the same name.
    assert!(!used.contains("sensor.wattson_basket_idle_regression"));
}
