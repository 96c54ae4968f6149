//! Store tests on real SQLite files in temp directories.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use wattson_collectors::SourceId;
use wattson_collectors::source::channel;

use rand::Rng;
use wattson_collectors::{Metric, Sample};

use super::hour_rollup::{decode_minutes, encode_minutes};
use super::*;

/// 2023-11-14T22:00:00Z, an hour boundary.
const T0: i64 = 1_700_000_000_000 - 1_700_000_000_000 % HOUR_MS;

fn options() -> StoreOptions {
    StoreOptions {
        host: "basket".to_owned(),
        ..StoreOptions::default()
    }
}

fn writer(path: &Path) -> Writer {
    Writer::new(Store::open(path, &options()).unwrap(), options())
}

fn power(ts: i64, w: f64) -> Sample {
    Sample::new(ts, SourceId::meter("wall"), Metric::Power, "", w)
}

/// The ledger's energy of basket's wall meter over `[from, to)`, Wh.
fn ledger_wh(store: &Store, from: i64, to: i64) -> f64 {
    crate::ledger::energy::energy(store, "basket", &SourceId::meter("wall"), from, to)
        .unwrap()
        .wh
}

/// The ledger's buckets of basket's wall meter over `[from, to)`: `(start, end, Wh)`.
fn ledger_buckets(store: &Store, from: i64, to: i64) -> Vec<(i64, i64, f64)> {
    crate::ledger::energy::energy(store, "basket", &SourceId::meter("wall"), from, to)
        .unwrap()
        .priced_buckets()
}

fn wall() -> SeriesFilter {
    SeriesFilter::all()
        .host("basket")
        .source(&SourceId::meter("wall"))
        .metric(Metric::Power)
}

#[test]
fn migrations_are_valid() {
    MIGRATIONS.validate().unwrap();
}

#[test]
fn a_database_of_another_application_is_refused_by_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("other.db");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.pragma_update(None, "application_id", 1234).unwrap();
    conn.execute_batch("CREATE TABLE t (x)").unwrap();
    drop(conn);
    for err in [
        Store::open(&path, &options()).unwrap_err(),
        Store::open_read_only(&path).unwrap_err(),
    ] {
        assert!(matches!(
            err,
            StoreError::NotWattson {
                application_id: 1234,
                ..
            }
        ));
        assert!(err.to_string().contains("other.db"), "{err}");
    }
    // A database with tables but no application_id is someone else's too.
    let plain = dir.path().join("plain.db");
    rusqlite::Connection::open(&plain)
        .unwrap()
        .execute_batch("CREATE TABLE t (x)")
        .unwrap();
    assert!(matches!(
        Store::open(&plain, &options()),
        Err(StoreError::NotWattson {
            application_id: 0,
            ..
        })
    ));
}

#[test]
fn a_new_database_is_marked_versioned_and_in_wal_mode() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.db");
    let store = Store::open(&path, &options()).unwrap();
    let conn = store.conn();
    let id: i32 = conn
        .query_row("PRAGMA application_id", [], |r| r.get(0))
        .unwrap();
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    let fk: i64 = conn
        .query_row("PRAGMA foreign_keys", [], |r| r.get(0))
        .unwrap();
    let page: i64 = conn
        .query_row("PRAGMA page_size", [], |r| r.get(0))
        .unwrap();
    assert_eq!(
        (id, version, mode.as_str(), fk),
        (APPLICATION_ID, MIGRATION_LIST.len() as i64, "wal", 1)
    );
    assert_eq!(page, PAGE_SIZE);
    drop(store);
    // Reopening is a no-op.
    Store::open(&path, &options()).unwrap();
}

#[test]
fn raw_samples_round_trip_at_resolution_across_chunks_and_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.db");
    let mut expected = Vec::new();
    // Three sessions, each continuing the open chunk of the last; 40 minutes in all.
    for session in 0..3 {
        let mut w = writer(&path);
        for i in 0..800 {
            let ts = T0 + (session * 800 + i) * 1000 + (i % 3);
            let v = 230.0 + ((i * 37) % 101) as f64 * 0.1;
            w.push(
                None,
                vec![Sample::new(
                    ts,
                    SourceId::meter("wall"),
                    Metric::Voltage,
                    "",
                    v,
                )],
            );
            expected.push((ts, (v * 100.0).round() / 100.0));
            if i % 100 == 99 {
                w.flush().unwrap();
            }
        }
        w.flush().unwrap();
    }
    let store = Store::open_read_only(&path).unwrap();
    let got = store
        .raw(
            &SeriesFilter::all().metric(Metric::Voltage),
            T0,
            T0 + DAY_MS,
        )
        .unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0.unit, wattson_collectors::Unit::Volt);
    assert_eq!(got[0].1, expected);
    let closed: i64 = store
        .conn()
        .query_row("SELECT count(*) FROM raw_chunk", [], |r| r.get(0))
        .unwrap();
    assert_eq!(
        closed, 2,
        "40 minutes = two closed 15-minute chunks + one open"
    );
    let latest = store.latest("basket").unwrap();
    assert_eq!(latest.len(), 1);
    assert_eq!(
        (latest[0].ts_ms, latest[0].value),
        *expected.last().unwrap()
    );
}

/// Regression: after the wall clock stepped back, the repeated samples were stored beside
/// the first ones (two values per timestamp in raw data). Each series is now kept in time
/// order: a sample not after the newest stored one is dropped and counted, across a
/// closed chunk, within the open one, and after the writer restarts.
#[test]
fn samples_not_after_the_newest_stored_are_dropped_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.db");
    let mut w = writer(&path);
    w.push(None, vec![power(T0, 10.0), power(T0 + 2000, 12.0)]);
    w.push(None, vec![power(T0 + HOUR_MS, 20.0)]);
    let first = w.flush().unwrap();
    assert_eq!((first.samples, first.stale), (3, 0));
    // Into the closed chunk, the same instant again, and between two stored ones.
    w.push(
        None,
        vec![
            power(T0 + 1000, 11.0),
            power(T0 + HOUR_MS, 21.0),
            power(T0 + HOUR_MS - 1, 19.0),
        ],
    );
    let stats = w.flush().unwrap();
    // The same instant as the newest is a repeat; the two before it are stale.
    assert_eq!((stats.samples, stats.stale, stats.repeated), (0, 2, 1));
    // Later samples still go in, and a new writer on the same file knows the newest.
    w.push(None, vec![power(T0 + HOUR_MS + 1000, 22.0)]);
    w.flush().unwrap();
    drop(w);
    let mut w = writer(&path);
    w.push(
        None,
        vec![power(T0 + HOUR_MS, 23.0), power(T0 + HOUR_MS + 2000, 24.0)],
    );
    let stats = w.flush().unwrap();
    assert_eq!((stats.samples, stats.stale + stats.repeated), (1, 1));
    let got = w.store().raw(&wall(), T0, T0 + 2 * HOUR_MS).unwrap();
    assert_eq!(
        got[0].1,
        vec![
            (T0, 10.0),
            (T0 + 2000, 12.0),
            (T0 + HOUR_MS, 20.0),
            (T0 + HOUR_MS + 1000, 22.0),
            (T0 + HOUR_MS + 2000, 24.0)
        ]
    );
    let hour = w
        .store()
        .rollups(&wall(), Resolution::Hour, T0, T0 + HOUR_MS)
        .unwrap();
    assert_eq!(hour[0].1[0].n, 2);
    assert!((hour[0].1[0].mean - 11.0).abs() < 1e-9);
}

#[test]
fn rollups_hold_hand_computed_energy_of_a_ramp() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.db");
    let mut w = writer(&path);
    // P(t) = t watts for t = 0..=120 s, one sample a second.
    // Minute 0: integral of t dt from 0 to 60 = 1800 J = 0.5 Wh; minute 1: 5400 J = 1.5 Wh.
    let samples: Vec<Sample> = (0..=120).map(|s| power(T0 + s * 1000, s as f64)).collect();
    for batch in samples.chunks(7) {
        w.push(None, batch.to_vec());
        w.flush().unwrap();
    }
    let store = w.store();
    let minutes = store
        .rollups(&wall(), Resolution::Minute, T0, T0 + HOUR_MS)
        .unwrap();
    let m = &minutes[0].1;
    assert_eq!(m.len(), 3);
    assert_eq!((m[0].n, m[0].min, m[0].max), (60, 0.0, 59.0));
    assert!((m[0].mean - 29.5).abs() < 1e-9);
    assert!((m[0].energy_wh.unwrap() - 0.5).abs() < 1e-3);
    assert!((m[1].energy_wh.unwrap() - 1.5).abs() < 1e-3);
    assert_eq!((m[2].n, m[2].energy_wh), (1, Some(0.0)));
    let hour = store
        .rollups(&wall(), Resolution::Hour, T0, T0 + HOUR_MS)
        .unwrap();
    let h = &hour[0].1[0];
    assert_eq!((h.n, h.min, h.max), (121, 0.0, 120.0));
    assert!((h.mean - 60.0).abs() < 1e-9);
    assert!((h.energy_wh.unwrap() - 2.0).abs() < 1e-9);
    // Whole range, and a range cutting both minutes in half: 30..90 s = 3600 J = 1 Wh.
    let all = ledger_wh(store, T0, T0 + HOUR_MS);
    assert!((all - 2.0).abs() < 1e-9, "{all}");
    let mid = ledger_wh(store, T0 + 30_000, T0 + 90_000);
    assert!((mid - 1.0).abs() < 1e-3, "{mid}");
    // Hourly rollups answer the whole hours of a longer range.
    let wider = ledger_wh(store, T0 - HOUR_MS, T0 + 2 * HOUR_MS);
    assert!((wider - 2.0).abs() < 1e-9, "{wider}");
}

#[test]
fn energy_is_not_integrated_across_gaps() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.db");
    let mut w = writer(&path);
    // 100 W at 1 Hz for 0..=10 s, silence, then 20..=30 s: a 10 s interval is over 3x 1 s.
    let mut samples: Vec<Sample> = (0..=10).map(|s| power(T0 + s * 1000, 100.0)).collect();
    samples.extend((20..=30).map(|s| power(T0 + s * 1000, 100.0)));
    w.push(None, samples);
    w.flush().unwrap();
    // An explicit gap between two samples only 1 s apart also ends integration.
    w.record_gap(
        None,
        &SourceId::meter("wall"),
        T0 + 40_500,
        T0 + 40_600,
        "frame errors",
    );
    w.push(
        None,
        (40..=41).map(|s| power(T0 + s * 1000, 100.0)).collect(),
    );
    w.flush().unwrap();
    let store = w.store();
    let wh = ledger_wh(store, T0, T0 + HOUR_MS);
    assert!((wh - 20.0 * 100.0 / 3600.0).abs() < 1e-9, "{wh}");
    let raw_wh = ledger_wh(store, T0 + 5000, T0 + 45_000);
    assert!((raw_wh - 15.0 * 100.0 / 3600.0).abs() < 1e-9, "{raw_wh}");
    let gaps = store.gaps("basket", T0, T0 + HOUR_MS).unwrap();
    assert_eq!(gaps.len(), 1);
    assert_eq!(
        (&gaps[0].source, gaps[0].start_ms, gaps[0].reason.as_str()),
        (&SourceId::meter("wall"), T0 + 40_500, "frame errors")
    );
}

#[test]
fn only_aggregate_cpu_channels_are_rolled_up() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = writer(&dir.path().join("w.db"));
    w.push(
        None,
        vec![
            Sample::new(T0, SourceId::Cpu, Metric::CpuBusy, channel::ALL, 0.25),
            Sample::new(T0, SourceId::Cpu, Metric::CpuBusy, "cpu0", 0.5),
            Sample::new(
                T0,
                SourceId::Cpu,
                Metric::IdleResidency,
                channel::all("C6"),
                0.7,
            ),
            Sample::new(T0, SourceId::Cpu, Metric::IdleResidency, "cpu0/C6", 0.4),
            Sample::new(
                T0,
                SourceId::Cpu,
                Metric::CoreFrequency,
                channel::MEAN,
                1800.0,
            ),
        ],
    );
    w.flush().unwrap();
    let rolled: Vec<String> = w
        .store()
        .rollups(&SeriesFilter::all(), Resolution::Hour, T0, T0 + HOUR_MS)
        .unwrap()
        .into_iter()
        .filter(|(_, r)| !r.is_empty())
        .map(|(s, _)| s.channel)
        .collect();
    assert_eq!(
        rolled,
        [
            channel::ALL.to_owned(),
            channel::all("C6"),
            channel::MEAN.to_owned()
        ]
    );
}

#[test]
fn pruning_removes_expired_raw_chunks_and_keeps_rollups() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.db");
    let opts = StoreOptions {
        raw_retention_ms: DAY_MS,
        ..options()
    };
    let mut w = Writer::new(Store::open(&path, &opts).unwrap(), opts);
    w.push(None, (0..5).map(|s| power(T0 + s * 1000, 50.0)).collect());
    w.flush().unwrap();
    w.push(None, vec![power(T0 + 2 * DAY_MS, 60.0)]);
    w.push(None, vec![power(T0 + 2 * DAY_MS + 1000, 60.0)]);
    w.flush().unwrap();
    assert!(w.prune(T0 + 2 * DAY_MS).unwrap() >= 1);
    let store = w.store();
    let raw = store.raw(&wall(), T0 - DAY_MS, T0 + 3 * DAY_MS).unwrap();
    assert_eq!(
        raw[0].1,
        vec![(T0 + 2 * DAY_MS, 60.0), (T0 + 2 * DAY_MS + 1000, 60.0)]
    );
    let hours = store
        .rollups(&wall(), Resolution::Hour, T0, T0 + 3 * DAY_MS)
        .unwrap();
    assert_eq!(hours[0].1.len(), 2);
    assert_eq!(hours[0].1[0].n, 5);
    // The hour's energy survives its raw data: 4 s at 50 W.
    let wh = ledger_wh(store, T0, T0 + HOUR_MS);
    assert!((wh - 4.0 * 50.0 / 3600.0).abs() < 1e-3, "{wh}");
}

#[test]
fn per_core_channels_are_the_cpu_collectors_cpu_n_channels() {
    for (metric, channel) in [
        (Metric::CpuBusy, "cpu0"),
        (Metric::CoreFrequency, "cpu17"),
        (Metric::IdleResidency, "cpu3/C6"),
        (Metric::CpuTime, "cpu1/user"),
    ] {
        assert!(is_per_core(metric, channel), "{metric:?} {channel}");
    }
    for (metric, channel) in [
        (Metric::CpuBusy, channel::ALL),
        (Metric::CoreFrequency, channel::MEAN),
        (Metric::IdleResidency, &channel::all("C6")),
        (Metric::CpuTime, &channel::all("user")),
        (Metric::CpuBusy, "cpu"), // not a source: a channel that names no core
        (Metric::CpuBusy, "cpux/C1"),
        (Metric::Power, "cpu0"),
        (Metric::Voltage, ""),
    ] {
        assert!(!is_per_core(metric, channel), "{metric:?} {channel}");
    }
    let opts = StoreOptions {
        raw_retention_ms: 2 * DAY_MS,
        detail_retention_ms: 5 * DAY_MS,
        ..options()
    };
    // Detail is never kept longer than the rest.
    assert_eq!(opts.retention_ms(Metric::CpuBusy, "cpu0"), 2 * DAY_MS);
}

#[test]
fn pruning_drops_per_core_chunks_at_the_detail_retention_and_keeps_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.db");
    let opts = StoreOptions {
        raw_retention_ms: 10 * DAY_MS,
        detail_retention_ms: DAY_MS,
        ..options()
    };
    let mut w = Writer::new(Store::open(&path, &opts).unwrap(), opts);
    let cpu = |ts, metric, channel: &str| Sample::new(ts, SourceId::Cpu, metric, channel, 0.25);
    let at = |ts: i64| {
        vec![
            power(ts, 50.0),
            Sample::new(ts, SourceId::meter("wall"), Metric::Voltage, "", 230.0),
            cpu(ts, Metric::CpuBusy, channel::ALL),
            cpu(ts, Metric::CpuBusy, "cpu0"),
            cpu(ts, Metric::IdleResidency, &channel::all("C6")),
            cpu(ts, Metric::IdleResidency, "cpu1/C6"),
            cpu(ts, Metric::CoreFrequency, channel::MEAN),
            cpu(ts, Metric::CoreFrequency, "cpu1"),
        ]
    };
    // Day 0 closes its chunks (day 2 follows); `cpu2` only ever has one open chunk.
    w.push(None, at(T0));
    w.push(None, vec![cpu(T0, Metric::CpuBusy, "cpu2")]);
    w.flush().unwrap();
    w.push(None, at(T0 + 2 * DAY_MS));
    w.flush().unwrap();
    assert_eq!(w.prune(T0 + 2 * DAY_MS).unwrap(), 4);
    let mut kept: Vec<(String, String, Vec<i64>)> = w
        .store()
        .raw(&SeriesFilter::all(), T0 - DAY_MS, T0 + 3 * DAY_MS)
        .unwrap()
        .into_iter()
        .filter(|(_, samples)| !samples.is_empty())
        .map(|(s, samples)| {
            let ts = samples.iter().map(|p| p.0).collect();
            (s.metric.as_str().to_owned(), s.channel, ts)
        })
        .collect();
    kept.sort();
    let (both, recent) = (vec![T0, T0 + 2 * DAY_MS], vec![T0 + 2 * DAY_MS]);
    let mut expect: Vec<(String, String, Vec<i64>)> = [
        (Metric::Power, "", &both),
        (Metric::Voltage, "", &both),
        (Metric::CpuBusy, channel::ALL, &both),
        (Metric::CpuBusy, "cpu0", &recent),
        (Metric::IdleResidency, &channel::all("C6"), &both),
        (Metric::IdleResidency, "cpu1/C6", &recent),
        (Metric::CoreFrequency, channel::MEAN, &both),
        (Metric::CoreFrequency, "cpu1", &recent),
    ]
    .into_iter()
    .map(|(m, c, t)| (m.as_str().to_owned(), c.to_owned(), t.clone()))
    .collect();
    expect.sort();
    assert_eq!(kept, expect);
    // The pruned open chunk is not written back by the next flush.
    w.push(
        None,
        vec![cpu(T0 + 2 * DAY_MS + 1000, Metric::CpuBusy, "cpu2")],
    );
    w.flush().unwrap();
    let cpu2 = w
        .store()
        .raw(
            &SeriesFilter::all().channel("cpu2"),
            T0 - DAY_MS,
            T0 + 3 * DAY_MS,
        )
        .unwrap();
    assert_eq!(cpu2[0].1, vec![(T0 + 2 * DAY_MS + 1000, 0.25)]);
}

#[test]
fn per_core_chunks_close_into_their_own_table_and_older_ones_still_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.db");
    let mut w = writer(&path);
    let busy = |ts, channel: &str| Sample::new(ts, SourceId::Cpu, Metric::CpuBusy, channel, 0.5);
    w.push(None, vec![busy(T0, "cpu0"), busy(T0, channel::ALL)]);
    w.flush().unwrap();
    w.push(
        None,
        vec![busy(T0 + HOUR_MS, "cpu0"), busy(T0 + HOUR_MS, channel::ALL)],
    );
    w.flush().unwrap();
    let count = |w: &Writer, table: &str| -> i64 {
        let sql = format!("SELECT count(*) FROM {table}");
        w.store().conn().query_row(&sql, [], |r| r.get(0)).unwrap()
    };
    let tables = |w: &Writer| (count(w, "raw_chunk"), count(w, "raw_detail_chunk"));
    assert_eq!(tables(&w), (1, 1));
    // A per-core chunk closed before raw_detail_chunk existed is still read, and a sample
    // older than the newest stored is dropped rather than written into either table.
    w.store()
        .conn()
        .execute_batch(
            "INSERT INTO raw_chunk (series_id, start_ms, n, last_ts_ms, last_value, data)
             SELECT series_id, start_ms, n, last_ts_ms, last_value, data FROM raw_detail_chunk;
             DELETE FROM raw_detail_chunk;",
        )
        .unwrap();
    w.push(None, vec![busy(T0 + 1000, "cpu0")]);
    w.flush().unwrap();
    assert_eq!(tables(&w), (2, 0));
    let raw = w
        .store()
        .raw(&SeriesFilter::all().channel("cpu0"), T0, T0 + 2 * HOUR_MS)
        .unwrap();
    assert_eq!(raw[0].1, vec![(T0, 0.5), (T0 + HOUR_MS, 0.5)]);
}

#[test]
fn a_reader_sees_each_flush_while_the_writer_writes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.db");
    assert!(matches!(
        Store::open_read_only(&path),
        Err(StoreError::Open { .. })
    ));
    let (handle, join) = StoreHandle::spawn(&path, options()).unwrap();
    handle.insert(vec![power(T0, 40.0)]).unwrap();
    handle.flush().unwrap();
    let reader = Store::open_read_only(&path).unwrap();
    assert_eq!(reader.latest("basket").unwrap()[0].value, 40.0);
    for i in 1..20 {
        handle
            .insert(vec![power(T0 + i * 1000, 40.0 + i as f64)])
            .unwrap();
        handle.flush().unwrap();
        let latest = reader.latest("basket").unwrap();
        assert_eq!(
            (latest[0].ts_ms, latest[0].value),
            (T0 + i * 1000, 40.0 + i as f64)
        );
    }
    let n = handle
        .query(|s| {
            s.raw(&SeriesFilter::all(), T0, T0 + HOUR_MS)
                .map(|r| r[0].1.len())
        })
        .unwrap()
        .unwrap();
    assert_eq!(n, 20);
    assert_eq!(reader.integrity_check().unwrap(), "ok");
    handle.close().unwrap();
    join.join().unwrap().unwrap();
}

#[test]
fn a_full_queue_drops_and_counts_batches() {
    let dir = tempfile::tempdir().unwrap();
    let opts = StoreOptions {
        queue_batches: 1,
        ..options()
    };
    let (handle, join) = StoreHandle::spawn(&dir.path().join("w.db"), opts).unwrap();
    let (started_tx, started_rx) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let blocker = handle.clone();
    let stalled = std::thread::spawn(move || {
        blocker.query(move |_| {
            started_tx.send(()).unwrap();
            release_rx.recv().unwrap();
        })
    });
    started_rx.recv().unwrap();
    handle.insert(vec![power(T0, 1.0)]).unwrap();
    let err = handle.insert(vec![power(T0 + 1000, 2.0)]).unwrap_err();
    assert!(matches!(
        err,
        StoreError::QueueFull {
            dropped_batches: 1,
            ..
        }
    ));
    assert_eq!(handle.dropped_batches(), 1);
    release_tx.send(()).unwrap();
    stalled.join().unwrap().unwrap();
    assert_eq!(handle.flush().unwrap().samples, 1);
    handle.close().unwrap();
    join.join().unwrap().unwrap();
}

#[tokio::test]
async fn async_flush_and_query_work_from_a_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let (handle, join) = StoreHandle::spawn(&dir.path().join("w.db"), options()).unwrap();
    handle
        .insert(vec![power(T0, 5.0), power(T0 + 1000, 7.0)])
        .unwrap();
    assert_eq!(handle.flush_async().await.unwrap().samples, 2);
    let latest = handle
        .query_async(|s| s.latest("basket"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(latest[0].value, 7.0);
    handle.close_async().await.unwrap();
    join.join().unwrap().unwrap();
}

const KILL_CHILD_ENV: &str = "WATTSON_STORE_KILL_CHILD_DB";
const KILL_BATCH: i64 = 120;

/// Child of `a_killed_writer_loses_at_most_one_batch`: writes batches until killed and
/// prints `committed <k>` after each flush returns.
#[test]
#[ignore = "run by a_killed_writer_loses_at_most_one_batch as a child process"]
fn kill_child_writer() {
    let Some(path) = std::env::var_os(KILL_CHILD_ENV) else {
        return;
    };
    let (handle, _join) = StoreHandle::spawn(Path::new(&path), options()).unwrap();
    let latest = handle.query(|s| s.latest("basket")).unwrap().unwrap();
    let mut ts = latest.iter().map(|l| l.ts_ms + 1000).max().unwrap_or(T0);
    let mut stdout = std::io::stdout();
    for k in 1.. {
        let mut batch = Vec::new();
        for _ in 0..KILL_BATCH / 4 {
            batch.push(power(ts, 100.0));
            batch.push(Sample::new(
                ts,
                SourceId::meter("wall"),
                Metric::Voltage,
                "",
                230.0,
            ));
            batch.push(Sample::new(
                ts,
                SourceId::Cpu,
                Metric::CpuBusy,
                channel::ALL,
                0.5,
            ));
            batch.push(Sample::new(
                ts,
                SourceId::Cpu,
                Metric::CpuBusy,
                "cpu0",
                0.25,
            ));
            ts += 1000;
        }
        handle.insert(batch).unwrap();
        handle.flush().unwrap();
        writeln!(stdout, "committed {k}").unwrap();
        stdout.flush().unwrap();
    }
}

pub(super) fn stored_samples(path: &Path) -> usize {
    let store = Store::open_read_only(path).unwrap();
    assert_eq!(store.integrity_check().unwrap(), "ok");
    store
        .raw(&SeriesFilter::all(), i64::MIN / 2, i64::MAX / 2)
        .unwrap()
        .iter()
        .map(|(_, p)| p.len())
        .sum()
}

#[test]
fn a_killed_writer_loses_at_most_one_batch() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kill.db");
    let exe = std::env::current_exe().unwrap();
    let mut rng = rand::rng();
    let mut before = 0;
    for _ in 0..4 {
        let mut child = Command::new(&exe)
            .args([
                "--exact",
                "store::tests::kill_child_writer",
                "--ignored",
                "--nocapture",
            ])
            .env(KILL_CHILD_ENV, &path)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let wait_for = rng.random_range(3..15);
        let mut seen = 0;
        while seen < wait_for {
            let line = lines.next().expect("child ended early").unwrap();
            if line.starts_with("committed ") {
                seen += 1;
            }
        }
        child.kill().unwrap();
        child.wait().unwrap();
        // Lines the child printed before it died are still in the pipe.
        let committed = seen
            + lines
                .map_while(Result::ok)
                .filter(|l| l.starts_with("committed "))
                .count();
        let after = stored_samples(&path);
        let batch = KILL_BATCH as usize;
        let written = after - before;
        assert!(
            written == committed * batch || written == (committed + 1) * batch,
            "{committed} batches reported committed, {written} samples stored"
        );
        before = after;
    }
}

#[test]
fn hourly_energy_matches_hour_by_hour_queries() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.db");
    let mut w = writer(&path);
    // 3 h 20 min at 1 Hz with a varying draw, starting 10 min into an hour.
    let h = floor_to(T0, HOUR_MS) + HOUR_MS;
    let start = h + 10 * MINUTE_MS;
    let samples: Vec<Sample> = (0..12_000)
        .map(|i| power(start + i * 1000, 50.0 + (i % 37) as f64))
        .collect();
    for batch in samples.chunks(1000) {
        w.push(None, batch.to_vec());
        w.flush().unwrap();
    }
    let store = w.store();
    let (from, to) = (h + 25 * MINUTE_MS + 3_000, h + 3 * HOUR_MS + 17 * MINUTE_MS);
    let buckets = ledger_buckets(store, from, to);
    let bounds: Vec<(i64, i64)> = buckets.iter().map(|b| (b.0, b.1)).collect();
    assert_eq!(
        bounds,
        vec![
            (from, h + HOUR_MS),
            (h + HOUR_MS, h + 2 * HOUR_MS),
            (h + 2 * HOUR_MS, h + 3 * HOUR_MS),
            (h + 3 * HOUR_MS, to),
        ]
    );
    for (a, b, wh) in buckets {
        let one = ledger_wh(store, a, b);
        assert!((wh - one).abs() < 1e-9, "{a}..{b}: {wh} vs {one}");
    }
    // Inside one hour, and an empty range.
    let inside = ledger_buckets(store, h + HOUR_MS + 1000, h + HOUR_MS + 5000);
    assert_eq!(inside.len(), 1);
    assert!(ledger_buckets(store, to, from).is_empty());
}

#[test]
fn a_sample_stored_twice_is_kept_once_in_raw_data_and_rollups() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.db");
    // Two chunks: the first closes when the second opens.
    let first: Vec<Sample> = (0..5).map(|k| power(T0 + k * 1000, 10.0)).collect();
    let second: Vec<Sample> = (0..5)
        .map(|k| power(T0 + CHUNK_MS + k * 1000, 20.0))
        .collect();
    let mut w = writer(&path);
    w.push(None, first.clone());
    w.push(None, second.clone());
    let stats = w.flush().unwrap();
    assert_eq!((stats.samples, stats.stale), (10, 0));

    // The same batches again (in the open chunk and in a closed one), and a new sample
    // twice in one flush.
    w.push(None, second.clone());
    w.push(None, first.clone());
    let next = T0 + CHUNK_MS + 5000;
    w.push(None, vec![power(next, 99.0), power(next, 98.0)]);
    let stats = w.flush().unwrap();
    // The batch in the open chunk and the new sample's second copy are repeats; the batch
    // in the closed chunk is stale (closed chunks are not searched).
    assert_eq!((stats.samples, stats.stale, stats.repeated), (1, 5, 6));
    drop(w);

    // After a restart (the fleet collector killed before it acknowledged, then redelivered).
    let mut w = writer(&path);
    w.push(None, first.clone());
    w.push(None, second.clone());
    let stats = w.flush().unwrap();
    assert_eq!((stats.samples, stats.stale + stats.repeated), (0, 10));

    let got = w.store().raw(&wall(), T0, T0 + HOUR_MS).unwrap();
    let ts: Vec<i64> = got[0].1.iter().map(|p| p.0).collect();
    let mut want: Vec<i64> = first.iter().chain(&second).map(|s| s.ts_ms).collect();
    want.push(next);
    assert_eq!(ts, want);
    assert_eq!(got[0].1[10], (next, 99.0), "the first value is kept");
    let hour = w
        .store()
        .rollups(&wall(), Resolution::Hour, T0, T0 + HOUR_MS)
        .unwrap();
    assert_eq!(hour[0].1[0].n, 11);
}

#[test]
fn a_sample_for_a_closed_period_without_an_open_chunk_is_not_duplicated() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.db");
    let mut w = writer(&path);
    w.push(None, vec![power(T0, 10.0), power(T0 + 1000, 11.0)]);
    w.push(None, vec![power(T0 + CHUNK_MS, 20.0)]);
    w.flush().unwrap();
    // Drop the open chunk, as pruning does: the first chunk is closed and nothing is open,
    // so the newest stored time comes from the closed chunks.
    w.store()
        .conn()
        .execute("DELETE FROM raw_open", [])
        .unwrap();
    drop(w);
    let mut w = writer(&path);
    w.push(None, vec![power(T0 + 1000, 11.0), power(T0 + 2000, 12.0)]);
    let stats = w.flush().unwrap();
    // The repeat is dropped; the later one is new.
    assert_eq!((stats.samples, stats.stale + stats.repeated), (1, 1));
    let n_chunks: i64 = w
        .store()
        .conn()
        .query_row("SELECT count(*) FROM raw_chunk", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n_chunks, 1, "no second copy of the closed chunk");
    let got = w.store().raw(&wall(), T0, T0 + HOUR_MS).unwrap();
    assert_eq!(
        got[0].1,
        vec![(T0, 10.0), (T0 + 1000, 11.0), (T0 + 2000, 12.0)]
    );
}

#[test]
fn package_residency_is_kept_raw_for_the_detail_retention_and_hourly_for_ever() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.db");
    let opts = StoreOptions {
        raw_retention_ms: 10 * DAY_MS,
        detail_retention_ms: DAY_MS,
        ..options()
    };
    let mut w = Writer::new(Store::open(&path, &opts).unwrap(), opts);
    let pkg = |ts| {
        Sample::new(
            ts,
            SourceId::Cpu,
            Metric::PackageResidency,
            channel::all("PC6"),
            0.4,
        )
    };
    w.push(None, vec![pkg(T0), power(T0, 50.0)]);
    w.flush().unwrap();
    w.push(
        None,
        vec![pkg(T0 + 2 * DAY_MS), power(T0 + 2 * DAY_MS, 50.0)],
    );
    w.flush().unwrap();
    w.prune(T0 + 2 * DAY_MS).unwrap();
    let filter = SeriesFilter::all().metric(Metric::PackageResidency);
    let raw = w
        .store()
        .raw(&filter, T0 - DAY_MS, T0 + 3 * DAY_MS)
        .unwrap();
    assert_eq!(
        raw[0].1,
        vec![(T0 + 2 * DAY_MS, 0.4)],
        "day 0's raw sample is pruned"
    );
    let hours = w
        .store()
        .rollups(&filter, Resolution::Hour, T0 - DAY_MS, T0 + 3 * DAY_MS)
        .unwrap();
    assert_eq!(hours[0].1.len(), 2, "both hours keep their rollup");
    let pc6 = channel::all("PC6");
    assert!(crate::store::is_detail(Metric::PackageResidency, &pc6));
    assert!(!crate::store::is_per_core(Metric::PackageResidency, &pc6));
}

fn spaced(source: &SourceId, ms: i64) -> StoreOptions {
    let mut o = options();
    o.spacing_ms.insert(source.clone(), ms);
    o
}

/// Regression: the store integrated only pairs at most 3x the smallest configured interval
/// apart, so a 5 s meter (or a plug at 300 s) got no energy at all.
#[test]
fn each_series_is_integrated_by_its_own_spacing_and_stores_covered_time() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.db");
    let opts = spaced(&SourceId::meter("wall"), 5000);
    let mut w = Writer::new(Store::open(&path, &opts).unwrap(), opts);
    // A 5 s meter for 10 minutes, and a plug every 300 s (spacing learned) for an hour.
    w.push(
        None,
        (0..=120).map(|i| power(T0 + i * 5000, 50.0)).collect(),
    );
    w.push(
        None,
        (0..=12)
            .map(|i| {
                Sample::new(
                    T0 + i * 300_000,
                    SourceId::meter("plug"),
                    Metric::Power,
                    "",
                    80.0,
                )
            })
            .collect(),
    );
    w.flush().unwrap();
    let store = w.store();
    let e =
        crate::ledger::energy::energy(store, "basket", &SourceId::meter("wall"), T0, T0 + HOUR_MS)
            .unwrap();
    assert_eq!(e.covered_ms, 600_000);
    assert!((e.wh - 50.0 * 600.0 / 3600.0).abs() < 1e-9, "{}", e.wh);
    assert_eq!(e.mean_watts().map(|w| (w * 1e6).round() / 1e6), Some(50.0));
    let h = &store
        .rollups(&wall(), Resolution::Hour, T0, T0 + HOUR_MS)
        .unwrap()[0]
        .1[0];
    assert_eq!(h.covered_ms, Some(600_000));
    let m = store
        .rollups(&wall(), Resolution::Minute, T0, T0 + HOUR_MS)
        .unwrap();
    assert!(
        m[0].1[..10].iter().all(|m| m.covered_ms == Some(MINUTE_MS)),
        "{m:?}"
    );
    let plug =
        crate::ledger::energy::energy(store, "basket", &SourceId::meter("plug"), T0, T0 + HOUR_MS)
            .unwrap();
    assert_eq!(plug.covered_ms, HOUR_MS);
    assert!((plug.wh - 80.0).abs() < 1e-9, "{}", plug.wh);
    let series = store
        .find_series(&SeriesFilter::all().source(&SourceId::meter("plug")))
        .unwrap();
    assert_eq!(series[0].spacing_ms, Some(300_000));
}

/// A fleet host's spacing is learned from its states; a collector restart costs the host no
/// energy, a recorded gap does.
#[test]
fn learned_spacing_and_a_writer_restart_keep_pairs_a_gap_breaks_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.db");
    let host = Some("h1".to_owned());
    let state = |ts: i64| {
        vec![Sample::new(
            ts,
            SourceId::meter("wall"),
            Metric::Power,
            "",
            35.0,
        )]
    };
    let mut w = writer(&path);
    for k in 0..6 {
        w.push(host.clone(), state(T0 + k * 10_000));
    }
    w.flush().unwrap();
    drop(w);
    // The collector restarts; the host's next state is one interval later.
    let mut w = writer(&path);
    w.push(host.clone(), state(T0 + 60_000));
    w.record_gap(
        host.clone(),
        &SourceId::meter("wall"),
        T0 + 65_000,
        T0 + 95_000,
        "host stopped",
    );
    w.push(host.clone(), state(T0 + 100_000));
    w.flush().unwrap();
    let e =
        crate::ledger::energy::energy(w.store(), "h1", &SourceId::meter("wall"), T0, T0 + HOUR_MS)
            .unwrap();
    assert_eq!(e.covered_ms, 60_000, "{e:?}");
    assert_eq!(e.gaps.len(), 1);
}

/// Rollups written before covered time was stored: recomputed where raw samples are kept,
/// estimated and marked approximate where they are not.
#[test]
fn old_rollups_get_covered_time_from_raw_or_are_marked_approximate() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.db");
    let opts = spaced(&SourceId::meter("wall"), 2000);
    let mut w = Writer::new(Store::open(&path, &opts).unwrap(), opts.clone());
    // A 2 s meter at 60 W through two hours.
    w.push(
        None,
        (0..3600).map(|i| power(T0 + i * 2000, 60.0)).collect(),
    );
    w.flush().unwrap();
    drop(w);
    {
        // As an older wattson left it, and with the first hour's raw samples expired: no
        // covered time, and for the second hour no energy either (as a 5 s meter's was).
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(&format!(
            "UPDATE rollup_hour SET covered_ms = NULL;
             UPDATE series SET spacing_ms = NULL;
             UPDATE rollup_hour SET energy_wh = 0 WHERE hour_ms = {};
             DELETE FROM raw_chunk; DELETE FROM raw_open WHERE start_ms < {};",
            T0 + HOUR_MS,
            T0 + HOUR_MS
        ))
        .unwrap();
    }
    let store = Store::open(&path, &opts).unwrap();
    let hours = store
        .rollups(&wall(), Resolution::Hour, T0, T0 + 2 * HOUR_MS)
        .unwrap();
    let h0 = &hours[0].1[0];
    assert!(h0.approximate);
    // energy / mean: 60 Wh at 60 W is one hour.
    assert_eq!(h0.covered_ms, Some(HOUR_MS));
    let h1 = &hours[0].1[1];
    assert!(h1.approximate);
    // No energy stored: samples x the spacing learned from the raw samples kept (2 s).
    assert_eq!(h1.covered_ms, Some(1800 * 2000));
    assert!((h1.energy_wh.unwrap() - 60.0).abs() < 1e-9);
    let e = crate::ledger::energy::energy(
        &store,
        "basket",
        &SourceId::meter("wall"),
        T0,
        T0 + 2 * HOUR_MS,
    )
    .unwrap();
    assert_eq!(e.approximate_hours, 2);
}

#[test]
fn covered_time_is_recomputed_from_raw_samples_where_kept() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.db");
    let opts = spaced(&SourceId::meter("wall"), 5000);
    let mut w = Writer::new(Store::open(&path, &opts).unwrap(), opts.clone());
    w.push(
        None,
        (0..=720).map(|i| power(T0 + i * 5000, 40.0)).collect(),
    );
    w.flush().unwrap();
    drop(w);
    let conn = rusqlite::Connection::open(&path).unwrap();
    // An old 5 s meter's hour: no energy (pairs over 3 s were skipped), no covered time.
    conn.execute_batch("UPDATE rollup_hour SET covered_ms = NULL, energy_wh = 0.0")
        .unwrap();
    drop(conn);
    let store = Store::open(&path, &opts).unwrap();
    let h = &store
        .rollups(&wall(), Resolution::Hour, T0, T0 + HOUR_MS)
        .unwrap()[0]
        .1[0];
    assert!(!h.approximate);
    assert_eq!(h.covered_ms, Some(HOUR_MS));
    assert!((h.energy_wh.unwrap() - 40.0).abs() < 1e-9, "{h:?}");
    let m = store
        .rollups(&wall(), Resolution::Minute, T0, T0 + HOUR_MS)
        .unwrap();
    assert!(m[0].1.iter().all(|m| m.covered_ms == Some(MINUTE_MS)));
}

#[test]
fn minute_blobs_from_before_covered_time_still_decode() {
    let minutes = vec![MinuteRollup {
        minute: 3,
        n: 60,
        mean: 50.0,
        min: 49.0,
        max: 51.0,
        energy_wh: 0.833,
        covered_ms: None,
    }];
    let old = codec::encode(&[
        (&[3][..], codec::Order::Delta),
        (&[60][..], codec::Order::Delta),
        (&[5000][..], codec::Order::Delta),
        (&[4900][..], codec::Order::Delta),
        (&[5100][..], codec::Order::Delta),
        (&[833][..], codec::Order::Delta),
    ]);
    assert_eq!(decode_minutes(&old, 100.0).unwrap(), minutes);
    let new = encode_minutes(&minutes, 100.0);
    assert_eq!(decode_minutes(&new, 100.0).unwrap(), minutes);
}
