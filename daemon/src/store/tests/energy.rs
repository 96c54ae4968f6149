//! Rollups and the energy in them: integrated per series by its own spacing, never across a gap, with the time covered.

use super::*;
use crate::store::hour_rollup::{decode_minutes, encode_minutes};

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
    let old = chunk_codec::encode(&[
        (&[3][..], chunk_codec::Order::Delta),
        (&[60][..], chunk_codec::Order::Delta),
        (&[5000][..], chunk_codec::Order::Delta),
        (&[4900][..], chunk_codec::Order::Delta),
        (&[5100][..], chunk_codec::Order::Delta),
        (&[833][..], chunk_codec::Order::Delta),
    ]);
    assert_eq!(decode_minutes(&old, 100.0).unwrap(), minutes);
    let new = encode_minutes(&minutes, 100.0);
    assert_eq!(decode_minutes(&new, 100.0).unwrap(), minutes);
}

#[test]
fn a_partly_covered_minute_keeps_its_mean_power() {
    // 40 W for 10 s: 0.111 Wh; to 1 mWh that would read 39.96 W.
    let minutes = vec![MinuteRollup {
        minute: 7,
        n: 11,
        mean: 40.0,
        min: 40.0,
        max: 40.0,
        energy_wh: 40.0 * 10.0 / 3600.0,
        covered_ms: Some(10_000),
    }];
    let back = decode_minutes(&encode_minutes(&minutes, 100.0), 100.0).unwrap();
    let w = back[0].energy_wh * 3600.0 / 10.0;
    assert!((w - 40.0).abs() < 1e-3, "{w} W");
}

/// The minute blocks of a window hold only what lies inside it: a constant draw's are all
/// the same power whatever was stored past the window's ends and however it was written.
#[test]
fn a_constant_draws_minute_blocks_are_constant_whatever_lies_past_the_window() {
    let dir = tempfile::tempdir().unwrap();
    let start = T0 + 17 * MINUTE_MS + 23_457;
    let (from, to) = (start, start + 150_000);
    let mut all = Vec::new();
    // Written in one batch up to 12 s past the window; 3 by 3 up to 55 s past it.
    for (name, chunk, past_ms) in [("one", usize::MAX, 12_000), ("threes", 3, 55_000)] {
        let path = dir.path().join(format!("{name}.db"));
        let mut w = writer(&path);
        let samples: Vec<Sample> = (0..=(to + past_ms - start) / 1000)
            .map(|s| power(start + s * 1000, 40.0))
            .collect();
        for batch in samples.chunks(chunk.min(samples.len())) {
            w.push(None, batch.to_vec());
            w.flush().unwrap();
        }
        let store = w.store();
        let e = crate::ledger::energy::energy(store, "basket", &SourceId::meter("wall"), from, to)
            .unwrap();
        let (blocks, name) = crate::ledger::energy::blocks(store, &e).unwrap();
        assert_eq!(name, "minute");
        let covered: i64 = blocks.iter().map(|b| b.1).sum();
        assert_eq!(covered, e.covered_ms, "{blocks:?}");
        for (w, ms) in &blocks {
            assert!((w - 40.0).abs() < 1e-3, "{w} W over {ms} ms: {blocks:?}");
        }
        all.push(blocks);
    }
    assert_eq!(all[0].len(), all[1].len());
    // The head to the first whole minute (36.543 s), that minute, the tail (53.457 s).
    assert_eq!(
        all[0].iter().map(|b| b.1).collect::<Vec<_>>(),
        [36_543, 60_000, 53_457]
    );
}
