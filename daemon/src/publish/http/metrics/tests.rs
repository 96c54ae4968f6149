use super::*;
use crate::live::health::PartHealth;
use crate::publish::mqtt::state::MeterCounters;

fn reading(source: SourceId, metric: Metric, channel: &str, value: f64) -> LiveReading {
    LiveReading {
        source,
        metric,
        channel: channel.into(),
        ts_ms: 1,
        value,
    }
}

fn snapshot() -> Snapshot {
    let ok = PartHealth {
        healthy: true,
        detail: "ok".into(),
    };
    Snapshot {
        host: "basket".into(),
        wall: Some(SourceId::meter("wall")),
        readings: vec![
            reading(SourceId::meter("wall"), Metric::Power, "", 41.5),
            reading(SourceId::Rapl, Metric::Power, "package-0", 12.25),
            reading(SourceId::Cpu, Metric::CoreFrequency, channel::MEAN, 2400.0),
            reading(
                SourceId::Cpu,
                Metric::CoreFrequency,
                &channel::cpu(1),
                3000.0,
            ),
            reading(
                SourceId::Cpu,
                Metric::IdleResidency,
                &channel::all("C6"),
                0.75,
            ),
            reading(
                SourceId::Cpu,
                Metric::PackageResidency,
                &channel::all("PC6"),
                0.25,
            ),
            reading(
                SourceId::meter("wall"),
                Metric::Rejected,
                "power_out_of_range",
                2.0,
            ),
        ],
        extras: StateExtras {
            currency: "GBP".into(),
            energy_total_kwh: Some(2.5),
            cost_total: Some(0.225),
            price_now: Some((0.2451, "agile".into())),
            services: vec![ServiceState {
                kind: "service".into(),
                name: "jellyfin.service".into(),
                cpu_share: 50.0,
                watts: Some(7.5),
                watts_ci95: Some(0.2),
                cost_per_year: Some(19.71),
            }],
            wattson_itself: Some(ServiceState {
                kind: "self".into(),
                name: "wattson".into(),
                cpu_share: 0.1,
                watts: Some(0.015),
                watts_ci95: None,
                cost_per_year: Some(0.04),
            }),
            meter_counters: vec![MeterCounters {
                id: "wall".into(),
                good: 10,
                crc_errors: 1,
                timeouts: 0,
                implausible: 0,
                exceptions: 0,
            }],
            ..StateExtras::default()
        },
        health: HealthReport {
            healthy: true,
            sampler: ok.clone(),
            store: PartHealth {
                healthy: false,
                detail: "readonly".into(),
            },
            wall: None,
            losses: Vec::new(),
            recovered: Vec::new(),
        },
        process: super::super::process::ProcessStats {
            cpu_seconds: Some(1.5),
            ..Default::default()
        },
        started_ms: 1_700_000_000_000,
        remote_write: None,
    }
}

#[test]
fn the_exposition_names_base_units_and_counters_end_in_total() {
    let (text, content_type) = encode(&snapshot(), false).unwrap();
    assert!(content_type.starts_with("text/plain; version=0.0.4"));
    for line in [
        r#"wattson_power_watts{host="basket",source="meter:wall",channel=""} 41.5"#,
        r#"wattson_power_watts{host="basket",source="rapl",channel="package-0"} 12.25"#,
        r#"wattson_energy_joules_total{host="basket",source="meter:wall"} 9000000"#,
        r#"wattson_cost_total{host="basket",source="meter:wall",currency="GBP"} 0.225"#,
        r#"wattson_tariff_price_per_kwh{host="basket",currency="GBP",series="agile"} 0.2451"#,
        r#"wattson_service_cpu_share_ratio{host="basket",kind="service",group="jellyfin.service"} 0.5"#,
        r#"wattson_service_estimated_power_watts{host="basket",kind="service",group="jellyfin.service"} 7.5"#,
        r#"wattson_service_estimated_power_ci95_watts{host="basket",kind="service",group="jellyfin.service"} 0.2"#,
        r#"wattson_service_estimated_annual_cost{host="basket",kind="self",group="wattson",currency="GBP"} 0.04"#,
        r#"wattson_cpu_frequency_hertz{host="basket",channel="cpu1"} 3000000000"#,
        r#"wattson_idle_state_residency_ratio{host="basket",level="core",state="C6"} 0.75"#,
        r#"wattson_idle_state_residency_ratio{host="basket",level="package",state="PC6"} 0.25"#,
        r#"wattson_meter_frames_total{host="basket",meter="wall",outcome="crc_error"} 1"#,
        r#"wattson_readings_rejected_total{host="basket",source="meter:wall",reason="power_out_of_range"} 2"#,
        r#"wattson_healthy{host="basket",part="store"} 0"#,
        "# TYPE wattson_energy_joules_total counter",
        "process_cpu_seconds_total 1.5",
        "process_start_time_seconds 1700000000",
    ] {
        assert!(
            text.lines().any(|l| l.starts_with(line)),
            "no {line:?} in\n{text}"
        );
    }
    assert!(text.contains(&format!(
        r#"wattson_build_info{{host="basket",version="{}"}} 1"#,
        env!("CARGO_PKG_VERSION")
    )));
}

#[test]
fn open_metrics_is_served_on_request_and_ends_with_eof() {
    let (text, content_type) = encode(&snapshot(), true).unwrap();
    assert!(content_type.starts_with("application/openmetrics-text"));
    assert!(text.ends_with("# EOF\n"), "{text}");
    assert!(
        text.contains("# UNIT wattson_energy_joules joules"),
        "{text}"
    );
}

#[test]
fn without_ledger_figures_the_energy_family_has_no_series() {
    let mut s = snapshot();
    s.extras = StateExtras::default();
    let (text, _) = encode(&s, false).unwrap();
    assert!(!text.contains("wattson_energy_joules_total{"), "{text}");
    assert!(text.contains("wattson_power_watts{"), "{text}");
}
