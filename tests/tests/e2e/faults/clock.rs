//! Clock jumps and suspend gaps, straight into the store.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Instant;

use super::raw_values;
use wattson::store::{Resolution, SeriesFilter, Store, StoreHandle, StoreOptions};
use wattson_collectors::{Metric, Sample};

const T0: i64 = 1_767_225_600_000; // 2026-01-01T00:00:00Z
const H: i64 = 3_600_000;
const MIN: i64 = 60_000;

fn power(ts: i64, w: f64) -> Sample {
    Sample::new(ts, "meter:wall", Metric::Power, "", w)
}

fn store_with(batches: Vec<Vec<Sample>>) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("clock.db");
    let (handle, thread) = StoreHandle::spawn(&db, StoreOptions::default()).unwrap();
    for (i, b) in batches.into_iter().enumerate() {
        handle.insert(b).unwrap();
        // The queue is bounded (a full one drops batches): let the writer catch up.
        if i % 100 == 99 {
            handle.flush().unwrap();
        }
    }
    handle.flush().unwrap();
    handle.close().unwrap();
    thread.join().unwrap().unwrap();
    (dir, db)
}

fn segment(from: i64, to: i64, w: f64) -> Vec<Vec<Sample>> {
    (from..to)
        .step_by(1000)
        .map(|t| power(t, w))
        .collect::<Vec<_>>()
        .chunks(60)
        .map(<[Sample]>::to_vec)
        .collect()
}

/// Stores the clock-jump scenario, checks what must hold, and returns (raw samples stored,
/// distinct raw timestamps).
fn clock_jumps() -> (usize, usize) {
    // An hour at 100 W; the clock steps back 1 h and the same hour is sampled again at 200 W;
    // then it steps forward 2 h and half an hour follows at 100 W.
    let mut batches = segment(T0, T0 + H, 100.0);
    batches.extend(segment(T0, T0 + H, 200.0));
    batches.extend(segment(T0 + 3 * H, T0 + 3 * H + 30 * MIN, 100.0));
    let sent: usize = batches.iter().map(Vec::len).sum();
    let (_dir, db) = store_with(batches);
    let store = Store::open_read_only(&db).unwrap();
    let host = "localhost";
    let total =
        wattson::ledger::energy::energy(&store, host, &"meter:wall".into(), T0 - H, T0 + 5 * H)
            .unwrap()
            .wh;
    let first_hour =
        wattson::ledger::energy::energy(&store, host, &"meter:wall".into(), T0, T0 + H)
            .unwrap()
            .wh;
    let jumped =
        wattson::ledger::energy::energy(&store, host, &"meter:wall".into(), T0 + H, T0 + 3 * H)
            .unwrap()
            .wh;
    let stored = raw_values(&db, "meter:wall", Metric::Power, "");
    let filter = SeriesFilter::all().metric(Metric::Power);
    let mut buckets = 0;
    let mut negative = 0;
    for res in [Resolution::Minute, Resolution::Hour] {
        for (_, rollups) in store.rollups(&filter, res, T0 - H, T0 + 5 * H).unwrap() {
            let starts: BTreeSet<i64> = rollups.iter().map(|r| r.bucket_ms).collect();
            assert_eq!(starts.len(), rollups.len(), "duplicate {res:?} buckets");
            buckets += rollups.len();
            negative += rollups
                .iter()
                .filter(|r| r.energy_wh.is_some_and(|e| e < 0.0))
                .count();
        }
    }
    let distinct: BTreeSet<i64> = stored.iter().map(|p| p.0).collect();
    println!(
        "clock jumps: sent {sent} samples, stored {} ({} distinct timestamps), {buckets} rollup \
         buckets, {negative} negative; energy total {total:.2} Wh (the hour twice: 100 or 200 Wh, \
         plus 50 Wh), first hour {first_hour:.2} Wh, across the 2 h forward jump {jumped:.4} Wh",
        stored.len(),
        distinct.len()
    );
    assert_eq!(negative, 0);
    assert!(total >= 0.0 && first_hour >= 0.0);
    assert!(
        (99.0..=201.0).contains(&first_hour),
        "the repeated hour counted {first_hour} Wh: neither one copy nor the other"
    );
    assert!(
        jumped < 0.1,
        "energy interpolated across the forward jump: {jumped} Wh"
    );
    (stored.len(), distinct.len())
}

#[test]
fn clock_steps_back_then_forward_never_give_negative_energy_or_duplicate_buckets() {
    clock_jumps();
}

/// Regression: a repeated hour (the clock stepped back) was stored twice in raw data, so
/// readers of raw samples saw two values per timestamp. Each series is now stored in time
/// order and the repeated hour is dropped (and logged).
#[test]
fn clock_step_back_stores_no_duplicate_raw_timestamps() {
    let (stored, distinct) = clock_jumps();
    assert_eq!(stored, distinct, "duplicate raw timestamps stored");
    assert_eq!(stored, 5_400, "one hour and half an hour of 1 s samples");
}

/// A week of 1 s samples from a machine whose clock misbehaves: every 6 h it steps back
/// 1 h, every day it jumps forward 2 h, and every 12 h it sleeps 10 min (suspend).
#[test]
#[ignore = "soak: a week of samples (about 600,000) through the store"]
fn soak_a_week_of_clock_steps_and_suspends() {
    let started = Instant::now();
    let mut batches = Vec::new();
    let mut clock = T0;
    let (mut sent_back, mut jumps, mut suspends) = (0, 0, 0);
    for hour in 0..7 * 24 {
        let from = clock;
        let mut to = clock + H;
        if hour % 12 == 11 {
            to -= 10 * MIN;
            suspends += 1;
        }
        batches.extend(segment(from, to, 100.0 + f64::from(hour % 5)));
        clock += H;
        if hour % 6 == 5 {
            clock -= H;
            sent_back += 1;
        }
        if hour % 24 == 23 {
            clock += 2 * H;
            jumps += 1;
        }
    }
    let sent: usize = batches.iter().map(Vec::len).sum();
    let (_dir, db) = store_with(batches);
    let store = Store::open_read_only(&db).unwrap();
    let stored = raw_values(&db, "meter:wall", Metric::Power, "");
    let distinct: BTreeSet<i64> = stored.iter().map(|p| p.0).collect();
    let ordered = stored.windows(2).all(|w| w[0].0 < w[1].0);
    let filter = SeriesFilter::all().metric(Metric::Power);
    let (mut buckets, mut duplicate, mut negative) = (0, 0, 0);
    for res in [Resolution::Minute, Resolution::Hour] {
        for (_, rollups) in store.rollups(&filter, res, T0 - H, clock + H).unwrap() {
            let starts: BTreeSet<i64> = rollups.iter().map(|r| r.bucket_ms).collect();
            duplicate += rollups.len() - starts.len();
            buckets += rollups.len();
            negative += rollups
                .iter()
                .filter(|r| r.energy_wh.is_some_and(|e| e < 0.0))
                .count();
        }
    }
    let total = wattson::ledger::energy::energy(
        &store,
        "localhost",
        &"meter:wall".into(),
        T0 - H,
        clock + H,
    )
    .unwrap()
    .wh;
    let hours_stored = stored.len() as f64 / 3600.0;
    println!(
        "soak clock: {sent} samples sent over a week ({sent_back} steps back, {jumps} forward \
         jumps, {suspends} suspends); stored {} ({} distinct, in order: {ordered}); {buckets} \
         rollup buckets, {duplicate} duplicate, {negative} negative; energy {total:.1} Wh for \
         {hours_stored:.1} h stored; {:.1} s",
        stored.len(),
        distinct.len(),
        started.elapsed().as_secs_f64()
    );
    assert_eq!(stored.len(), distinct.len(), "duplicate raw timestamps");
    assert!(ordered);
    assert_eq!((duplicate, negative), (0, 0));
    // 100-104 W over the hours stored, less the edges of gaps and jumps.
    assert!(
        total > 99.0 * (hours_stored - 1.0) && total < 105.0 * hours_stored,
        "{total}"
    );
}

#[test]
fn a_suspend_like_gap_is_recorded_as_no_energy() {
    let mut batches = segment(T0, T0 + 10 * MIN, 100.0);
    batches.extend(segment(T0 + 20 * MIN, T0 + 30 * MIN, 100.0));
    let (_dir, db) = store_with(batches);
    let store = Store::open_read_only(&db).unwrap();
    let gap = wattson::ledger::energy::energy(
        &store,
        "localhost",
        &"meter:wall".into(),
        T0 + 10 * MIN,
        T0 + 20 * MIN,
    )
    .unwrap()
    .wh;
    let total = wattson::ledger::energy::energy(
        &store,
        "localhost",
        &"meter:wall".into(),
        T0,
        T0 + 30 * MIN,
    )
    .unwrap()
    .wh;
    println!(
        "suspend gap: 1200 samples around 10 min of silence; energy in the silence {gap:.4} Wh, \
         total {total:.3} Wh (expected <= 33.33)"
    );
    // At most one 1 s step at the edge: 100 W x 1 s = 0.028 Wh.
    assert!(gap <= 0.03, "energy invented across the gap: {gap} Wh");
    assert!((33.0..=33.34).contains(&total), "total {total} Wh");
}
