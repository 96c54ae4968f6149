//! Retention: raw and per-core chunks pruned at their retention, rollups kept.

use super::*;

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
