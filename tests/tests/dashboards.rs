//! The dashboards name only entities the daemon announces.
// Test helpers fail loudly on a broken setup.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::collections::BTreeSet;
use std::sync::Arc;

use wattson::mqtt::discovery;
use wattson::mqtt::state::{self, MeterCounters, StateExtras};
use wattson::runtime::live::LiveState;
use wattson_collectors::{Metric, Sample};

/// The entity ids `wattson run` announces for host `basket` with a wall meter, the CPU
/// collector and a tariff.
fn announced() -> BTreeSet<String> {
    let live = Arc::new(LiveState::default());
    live.observe(&[
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
        annual_projection: Some(100.0),
        energy_today_kwh: Some(1.0),
        mode: Some("idle".into()),
        meter_counters: vec![MeterCounters {
            id: "wall".into(),
            ..MeterCounters::default()
        }],
        ..StateExtras::default()
    };
    let snap = state::build(&live.take_means(), &live.latest(), &extras, 10.0).unwrap();
    discovery::entities(&snap.json, &extras)
        .iter()
        .map(|e| discovery::entity_id("basket", &e.object_id))
        .collect()
}

/// Every `sensor.wattson_*` token in `text`.
fn entity_ids(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(i) = rest.find("sensor.wattson_") {
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
    let announced = announced();
    let unknown: Vec<&String> = used.difference(&announced).collect();
    assert!(
        unknown.is_empty(),
        "not announced by the daemon: {unknown:?}"
    );
    // And the dashboard shows every headline figure.
    for must in [
        "power",
        "energy",
        "cost_today",
        "cost_annual_projection",
        "cpu_utilisation",
    ] {
        assert!(
            used.contains(&format!("sensor.wattson_basket_{must}")),
            "{must}"
        );
    }
}
