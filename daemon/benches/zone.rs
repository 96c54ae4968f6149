//! What a time-zone lookup costs: the offset of an instant and the instants of a wall-clock
//! time in Europe/London, through wattson's `Zone` (the system's tzdata) and through
//! chrono-tz (compiled-in tables, what wattson used before), over a year of half-hours.
//! Pricing a year of hourly buckets on a time-of-use tariff makes about 20,000 of each.

// A benchmark over fixed, valid input: a failure should stop it loudly.
#![allow(clippy::unwrap_used)]

use std::hint::black_box;

use chrono::{NaiveDateTime, Offset, TimeZone};
use criterion::{Criterion, criterion_group, criterion_main};
use wattson::zone::Zone;

/// Every half hour of 2025, as UTC and as wall-clock times.
fn instants() -> Vec<NaiveDateTime> {
    (0..2 * 24 * 365)
        .map(|i| {
            chrono::DateTime::from_timestamp(1_735_689_600 + i * 1800, 0)
                .unwrap()
                .naive_utc()
        })
        .collect()
}

fn offsets<Z: TimeZone>(zone: &Z, times: &[NaiveDateTime]) -> i64 {
    times
        .iter()
        .map(|t| i64::from(zone.offset_from_utc_datetime(t).fix().local_minus_utc()))
        .sum()
}

fn wall_clock<Z: TimeZone>(zone: &Z, times: &[NaiveDateTime]) -> i64 {
    times
        .iter()
        .filter_map(|t| zone.offset_from_local_datetime(t).earliest())
        .map(|o| i64::from(o.fix().local_minus_utc()))
        .sum()
}

fn bench(c: &mut Criterion) {
    let times = instants();
    let ours = Zone::named("Europe/London").unwrap();
    let theirs: chrono_tz::Tz = "Europe/London".parse().unwrap();
    let mut g = c.benchmark_group("zone: 17,520 lookups in Europe/London");
    g.bench_function("offset of an instant, Zone", |b| {
        b.iter(|| offsets(&ours, black_box(&times)));
    });
    g.bench_function("offset of an instant, chrono-tz", |b| {
        b.iter(|| offsets(&theirs, black_box(&times)));
    });
    g.bench_function("instants of a wall-clock time, Zone", |b| {
        b.iter(|| wall_clock(&ours, black_box(&times)));
    });
    g.bench_function("instants of a wall-clock time, chrono-tz", |b| {
        b.iter(|| wall_clock(&theirs, black_box(&times)));
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
