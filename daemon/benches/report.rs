//! The report over one year of history: 8760 hourly energy buckets (what the store's
//! hourly rollups hold for a year of 1 Hz samples) and 8760 hourly utilisation means,
//! priced on a time-of-use tariff in Europe/London (clock changes included), then
//! rendered in every format. Budget (DESIGN.md): a report over a year of 1 Hz history in
//! <= 250 ms.

// A benchmark over fixed, valid input: a failure should stop it loudly.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::hint::black_box;

use chrono::{DateTime, NaiveDate, NaiveTime, Utc};
use criterion::{Criterion, criterion_group, criterion_main};
use wattson::config::ManualConfig;
use wattson::report::{
    self, ConfigInput, ConfigKind, ConfigStatus, FitInput, Format, LevelInput, MeasuredInput,
    ReportInput, ReportOptions,
};
use wattson::tariff::{Period, Tariff};

const HOUR_MS: i64 = 3_600_000;

/// A configuration measured by hand, with an upgrade cost.
fn manual(name: &str, modes: &[(&str, f64)]) -> ConfigInput {
    ConfigInput::from_manual(&ManualConfig {
        name: name.into(),
        description: None,
        modes: modes.iter().map(|(m, w)| ((*m).to_string(), *w)).collect(),
        upgrade_cost: Some(300.0),
        schedule: None,
    })
}

fn input() -> ReportInput {
    let night = Period {
        start: NaiveTime::from_hms_opt(0, 30, 0).unwrap(),
        end: NaiveTime::from_hms_opt(7, 30, 0).unwrap(),
        price_per_kwh: 0.07,
    };
    let tariff = Tariff::simple(
        "GBP",
        0.30,
        0.45,
        vec![night],
        wattson::zone::Zone::named("Europe/London").unwrap(),
    )
    .unwrap();
    let t0: i64 = "2025-01-01T00:00:00Z"
        .parse::<DateTime<Utc>>()
        .unwrap()
        .timestamp_millis();
    // A daily load cycle: busier in the evening, with a deterministic wobble.
    let busy = |i: i64| {
        let hour = (i % 24) as f64;
        let evening = if (18.0..23.0).contains(&hour) {
            1.5
        } else {
            0.2
        };
        evening + 0.1 * ((i * 7919 % 13) as f64 / 13.0)
    };
    let energy = (0..8760)
        .map(|i| {
            (
                t0 + i * HOUR_MS,
                t0 + (i + 1) * HOUR_MS,
                40.0 + 15.0 * busy(i),
            )
        })
        .collect();
    let utilisation = (0..8760)
        .map(|i| (t0 + i * HOUR_MS, t0 + (i + 1) * HOUR_MS, busy(i)))
        .collect();
    let levels = (0..=4)
        .map(|n| LevelInput {
            kind: "spin".into(),
            loops: n,
            mean_w: 40.0 + 15.0 * f64::from(n),
            ci95_w: 0.6,
            residency: BTreeMap::from([
                ("C0".to_string(), 0.05 + 0.2 * f64::from(n)),
                ("C6".to_string(), 0.95 - 0.2 * f64::from(n)),
            ]),
            mean_mhz: Some(1800.0),
            ops_per_s: None,
            joules_per_op: None,
            warnings: vec![],
        })
        .collect();
    let sweep = ConfigInput {
        kind: ConfigKind::Sweep,
        host: Some("basket".into()),
        fit: Some(FitInput {
            idle_watts: 40.0,
            idle_ci95: Some(0.4),
            watts_per_loop: 15.0,
            watts_per_loop_ci95: Some(0.2),
            r2: 0.999,
            notes: vec![],
            kind: "spin".into(),
        }),
        levels,
        status: ConfigStatus::Complete,
        ..manual("basket", &[])
    };
    ReportInput {
        generated_at: DateTime::from_timestamp_millis(t0 + 8760 * HOUR_MS).unwrap(),
        host: Some("basket".into()),
        tariff,
        regression: Vec::new(),
        configs: vec![
            manual(
                "2x Opteron 2.2 GHz, 6 disks",
                &[
                    ("standby", 40.0),
                    ("idle", 240.0),
                    ("1 loop", 260.0),
                    ("2 loops", 280.0),
                ],
            ),
            manual(
                "Athlon 64 1.8 GHz, 3 disks",
                &[
                    ("standby", 4.0),
                    ("idle", 78.0),
                    ("1 loop", 111.0),
                    ("2 loops", 111.0),
                ],
            ),
            sweep,
        ],
        measured: Some(MeasuredInput {
            from_ms: t0,
            to_ms: t0 + 8760 * HOUR_MS,
            energy,
            covered_ms: 8760 * HOUR_MS,
            gaps: vec![],
            utilisation,
            cpus: 4,
            config: None,
            ..MeasuredInput::default()
        }),
        gpus: vec![],
        idle: wattson::report::idle::IdleInput::default(),
        candidates: Vec::new(),
        options: ReportOptions::new(NaiveDate::from_ymd_opt(2026, 1, 1).unwrap()),
    }
}

fn bench(c: &mut Criterion) {
    let input = input();
    let built = report::build(&input).unwrap();
    let mut g = c.benchmark_group("report_year_hourly");
    g.sample_size(20);
    g.bench_function("build", |b| {
        b.iter(|| report::build(black_box(&input)).unwrap());
    });
    for (name, format) in [
        ("table", Format::Table),
        ("markdown", Format::Markdown),
        ("csv", Format::Csv),
        ("json", Format::Json),
        ("html", Format::Html),
    ] {
        g.bench_function(format!("render_{name}"), |b| {
            b.iter(|| report::render(black_box(&built), format).unwrap());
        });
    }
    g.bench_function("build_and_render_all", |b| {
        b.iter(|| {
            let r = report::build(black_box(&input)).unwrap();
            for f in [
                Format::Table,
                Format::Markdown,
                Format::Csv,
                Format::Json,
                Format::Html,
            ] {
                black_box(report::render(&r, f).unwrap());
            }
        });
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
