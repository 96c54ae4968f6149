//! The Grafana dashboard over Prometheus (`dashboards/grafana-prometheus.json`) names only
//! metrics `/metrics` exports: every metric in every query and variable is one of the
//! families wattson's exposition declares, or a series the shipped rules
//! (`dashboards/prometheus-rules.yml`) record, or `ALERTS` of the alerts they define; its
//! fleet row shows each host's recorded power, energy and cost, and the firing alerts.
// Test helpers fail loudly on a broken setup.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::Value;
use wattson::live::LiveReading;
use wattson::live::health::{HealthReport, PartHealth};
use wattson::publish::http::metrics::{Snapshot, encode};
use wattson::publish::http::process::ProcessStats;
use wattson::publish::mqtt::StateExtras;
use wattson::publish::mqtt::state::MeterCounters;
use wattson_collectors::Metric;
use wattson_tests::regression_check;

/// Every family name the exposition declares (`# TYPE <name> ...`) for a host with every
/// kind of reading, ledger figure, meter counter and a regression check.
fn exported() -> BTreeSet<String> {
    let ok = PartHealth {
        healthy: true,
        detail: "ok".into(),
    };
    let reading = |source: &str, metric: Metric, channel: &str| LiveReading {
        source: source.into(),
        metric,
        channel: channel.into(),
        ts_ms: 1,
        value: 1.0,
    };
    let snapshot = Snapshot {
        host: "basket".into(),
        wall: Some("meter:wall".into()),
        readings: vec![
            reading("meter:wall", Metric::Power, ""),
            reading("meter:wall", Metric::Voltage, ""),
            reading("meter:wall", Metric::Current, ""),
            reading("meter:wall", Metric::PowerFactor, ""),
            reading("meter:wall", Metric::Frequency, ""),
            reading("meter:wall", Metric::Rejected, "power_out_of_range"),
            reading("cpu", Metric::CpuBusy, "all"),
            reading("cpu", Metric::CoreFrequency, "mean"),
            reading("cpu", Metric::IdleResidency, "all/C6"),
            reading("gpu", Metric::GpuUtilisation, "gpu0"),
            reading("gpu", Metric::GpuClock, "gpu0"),
        ],
        extras: StateExtras {
            currency: "GBP".into(),
            cost_today: Some(0.1),
            cost_total: Some(2.0),
            annual_projection: Some(100.0),
            annual_basis: Some("a year on your tariff: this machine's load in each hour of the week, from 168.0 h measured in the last 7 days".into()),
            energy_today_kwh: Some(1.0),
            energy_total_kwh: Some(10.0),
            meter_counters: vec![MeterCounters {
                id: "wall".into(),
                ..MeterCounters::default()
            }],
            idle_regression: Some(regression_check()),
            ..StateExtras::default()
        },
        health: HealthReport {
            healthy: true,
            sampler: ok.clone(),
            store: ok,
            wall: None,
            losses: Vec::new(),
            recovered: Vec::new(),
        },
        process: ProcessStats::read(),
        started_ms: 0,
        remote_write: None,
    };
    let (text, _) = encode(&snapshot, false).unwrap();
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

/// Every PromQL expression in the dashboard: targets' `expr` and variables' `query`.
fn expressions(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            for (k, val) in map {
                match (k.as_str(), val.as_str()) {
                    ("expr", Some(e)) => out.push(e.to_owned()),
                    ("query", Some(q)) if q.contains('(') => out.push(q.to_owned()),
                    _ => expressions(val, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|i| expressions(i, out)),
        _ => {}
    }
}

/// The metric names an expression uses: identifiers of wattson's or the process' families,
/// series recorded from them (`level:wattson_...:operations`) and `ALERTS`.
fn metric_names(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    for c in expr.chars().chain(std::iter::once(' ')) {
        if c.is_ascii_alphanumeric() || c == '_' || c == ':' {
            word.push(c);
        } else {
            if word.starts_with("wattson_")
                || word.starts_with("process_")
                || word.contains(":wattson_")
                || word == "ALERTS"
            {
                out.push(std::mem::take(&mut word));
            }
            word.clear();
        }
    }
    out
}

#[test]
fn every_query_of_the_prometheus_dashboard_names_an_exported_metric() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../dashboards/grafana-prometheus.json");
    let dash: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let exported = exported();
    assert!(
        exported.contains("wattson_energy_joules_total"),
        "{exported:?}"
    );
    let (recorded, alerts) = rules();
    assert!(!recorded.is_empty() && !alerts.is_empty());
    let mut exprs = Vec::new();
    expressions(&dash, &mut exprs);
    assert!(exprs.len() >= 15, "found only {} expressions", exprs.len());
    let mut used = BTreeSet::new();
    for e in &exprs {
        let names = metric_names(e);
        assert!(!names.is_empty(), "no wattson metric in {e:?}");
        for n in names {
            if n.contains(':') {
                assert!(
                    recorded.contains(&n),
                    "{n} in {e:?} is not recorded by prometheus-rules.yml: {recorded:?}"
                );
            } else if n == "ALERTS" {
                // The firing alerts of the rules file, every one of them by its prefix.
                assert!(e.contains("alertname=~\"Wattson.*\""), "{e:?}");
                assert!(
                    alerts.iter().all(|a| a.starts_with("Wattson")),
                    "{alerts:?}"
                );
            } else {
                assert!(
                    exported.contains(&n),
                    "{n} in {e:?} is not exported: {exported:?}"
                );
            }
            used.insert(n);
        }
    }
    // The panels the issue asks for: power, energy per day, cost, CPU, C-states.
    for family in [
        "wattson_power_watts",
        "wattson_energy_joules_total",
        "wattson_cost_total",
        "wattson_cpu_utilisation_ratio",
        "wattson_idle_state_residency_ratio",
    ] {
        assert!(used.contains(family), "no panel shows {family}");
    }
    // The fleet row: power, energy per day and cost per day per host, and the firing
    // alerts, each from what the rules file records.
    for series in [
        "host:wattson_power_watts:avg5m",
        "host:wattson_energy_kwh:increase1d",
        "host_currency:wattson_cost:increase1d",
        "ALERTS",
    ] {
        assert!(used.contains(series), "no panel shows {series}");
    }
    // The data source is Prometheus, which a fresh Grafana has built in.
    assert!(
        std::fs::read_to_string(&path)
            .unwrap()
            .contains("\"type\": \"prometheus\"")
    );
}

/// The series `dashboards/prometheus-rules.yml` records and the alerts it defines.
fn rules() -> (BTreeSet<String>, BTreeSet<String>) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../dashboards/prometheus-rules.yml");
    let (mut recorded, mut alerts) = (BTreeSet::new(), BTreeSet::new());
    for line in std::fs::read_to_string(path).unwrap().lines() {
        let line = line.trim_start();
        if let Some(name) = line.strip_prefix("- record:") {
            recorded.insert(name.trim().to_owned());
        } else if let Some(name) = line.strip_prefix("- alert:") {
            alerts.insert(name.trim().to_owned());
        }
    }
    (recorded, alerts)
}

#[test]
fn a_misspelt_metric_is_caught() {
    assert_eq!(
        metric_names("rate(wattson_energy_joule_total{host=~\"$host\"}[5m])"),
        vec!["wattson_energy_joule_total".to_owned()]
    );
    assert!(!exported().contains("wattson_energy_joule_total"));
}

#[test]
fn a_misspelt_recorded_series_is_caught() {
    assert_eq!(
        metric_names("sum(host:wattson_energy_kwh:increase1day)"),
        vec!["host:wattson_energy_kwh:increase1day".to_owned()]
    );
    assert!(!rules().0.contains("host:wattson_energy_kwh:increase1day"));
}
