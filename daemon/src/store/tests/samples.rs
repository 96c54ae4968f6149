//! Raw samples: stored at resolution across chunks and restarts, each series in time order, each sample once.

use super::*;

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
