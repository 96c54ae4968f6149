//! What the calibration's estimate costs the daemon on a host with no meter: a week of one
//! signal at 1 Hz (604,800 RAPL samples) estimated afresh, as `wattson status` and the
//! report do; the daemon's first read after a start, which estimates every closed hour of
//! the week once (`calibration::running`); and its reads after that, every 5 minutes, which
//! estimate only the stretches at either end of the window.

// A benchmark over fixed, valid input: a failure should stop it loudly.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use wattson::calibration::history::Table;
use wattson::calibration::model::{Feature, Hardware};
use wattson::calibration::running::RunningEstimate;
use wattson::store::{MINUTE_MS, Store, StoreOptions, Writer};
use wattson::tariff::{Tariff, TariffChange};
use wattson_collectors::{Metric, Sample, SourceId};

/// An hour-aligned start in 2023.
const T0: i64 = 1_699_999_200_000;
const WEEK_S: i64 = 7 * 86_400;

fn package_w(s: i64) -> f64 {
    8.0 + 50.0 * ((s as f64) / 1800.0).sin().abs()
}

fn tariff() -> Tariff {
    Tariff::new(
        "GBP",
        0.0,
        vec![TariffChange {
            effective_from: chrono::NaiveDate::MIN,
            price_per_kwh: 0.30,
            periods: vec![],
        }],
        wattson::zone::Zone::UTC,
    )
    .unwrap()
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = StoreOptions {
        host: "h".to_owned(),
        ..StoreOptions::default()
    };
    opts.spacing_ms.insert(SourceId::Rapl, 1000);
    let mut w = Writer::new(Store::open(&dir.path().join("b.db"), &opts).unwrap(), opts);
    for day in 0..7 {
        let batch: Vec<Sample> = (day * 86_400..(day + 1) * 86_400)
            .map(|s| {
                Sample::new(
                    T0 + s * 1000,
                    SourceId::Rapl,
                    Metric::Power,
                    "package-0",
                    package_w(s),
                )
            })
            .collect();
        w.push(None, batch);
        w.flush().unwrap();
    }
    let minutes: Vec<i64> = (0..600).map(|m| T0 + m * MINUTE_MS).collect();
    let pkg: Vec<f64> = (0..600).map(|m| package_w(m * 60)).collect();
    let table = Table {
        minutes,
        wall: pkg.iter().map(|p| 23.0 + 1.12 * p).collect(),
        columns: vec![pkg],
    };
    let hardware = Hardware {
        cpu_model: None,
        logical_cpus: 2,
        memory_bytes: None,
    };
    let features = [Feature::parse("rapl/power/package-0").unwrap()];
    let model = wattson::calibration::choose::calibrate(
        "h",
        &SourceId::meter("wall").to_string(),
        &table,
        &features,
        0.3,
        hardware,
        T0,
    )
    .unwrap();
    let store = w.store();
    wattson::calibration::persist::save(store, "h", &model).unwrap();
    let t = tariff();
    // Half past the hour, a week in.
    let now = chrono::DateTime::from_timestamp_millis(T0 + (WEEK_S - 1800) * 1000).unwrap();
    let week = wattson::calibration::priced::figures(store, "h", &t, now)
        .unwrap()
        .unwrap()
        .last_7_days;
    assert!(
        week.estimate.minutes >= 10_000,
        "{} minutes",
        week.estimate.minutes
    );
    let mut g = c.benchmark_group("calibration: a week of one signal at 1 Hz");
    g.sample_size(10).measurement_time(Duration::from_secs(20));
    g.bench_function("estimated afresh (status, report)", |b| {
        b.iter(|| wattson::calibration::priced::figures(store, "h", &t, now).unwrap());
    });
    g.bench_function("the daemon's first read after a start", |b| {
        b.iter(|| {
            RunningEstimate::default()
                .figures(store, "h", &t, now, T0)
                .unwrap()
        });
    });
    let mut kept = RunningEstimate::default();
    kept.figures(store, "h", &t, now, T0).unwrap();
    g.bench_function("the daemon's reads after that (every 5 min)", |b| {
        b.iter(|| kept.figures(store, "h", &t, now, T0).unwrap());
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
