//! The queue on a real SQLite store: a batch per cursor, in time order, capped; the cursors
//! and the energy counter continuing after a commit; a refused batch skipped past.

use wattson_collectors::{Metric, Sample, SourceId};

use super::queue::{self, Answered};
use crate::store::{Store, StoreOptions, Writer};

const T0: i64 = 1_700_000_000_000;
const EP: &str = "http://prom:9090/api/v1/write";

fn writer(path: &std::path::Path) -> Writer {
    let mut options = StoreOptions {
        host: "basket".to_owned(),
        ..StoreOptions::default()
    };
    options.spacing_ms.insert(SourceId::meter("wall"), 1000);
    Writer::new(Store::open(path, &options).unwrap(), options)
}

fn second(w: &mut Writer, s: i64, watts: f64) {
    let wall = SourceId::meter("wall");
    w.push(
        None,
        vec![
            Sample::new(T0 + s * 1000, wall.clone(), Metric::Power, "", watts),
            Sample::new(T0 + s * 1000, wall, Metric::Voltage, "", 230.0),
            // Not on /metrics per sample: never sent.
            Sample::new(
                T0 + s * 1000,
                SourceId::Cpu,
                Metric::CpuTime,
                wattson_collectors::source::channel::all("user"),
                0.1,
            ),
        ],
    );
}

fn names(b: &queue::Batch) -> Vec<String> {
    b.timeseries
        .iter()
        .map(|t| t.labels[0].value.clone())
        .collect()
}

#[test]
fn batches_follow_the_cursor_and_the_energy_counter_continues() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = writer(&dir.path().join("w.db"));
    let wall = SourceId::meter("wall");
    for s in 0..10 {
        second(&mut w, s, 100.0);
    }
    w.flush().unwrap();
    // Room for 8: 4 power + 4 energy samples, the rest waits.
    let b = queue::next_batch(w.store(), EP, Some(&wall), 8).unwrap();
    assert!(b.more);
    assert_eq!(
        names(&b),
        ["wattson_energy_joules_total", "wattson_power_watts"]
    );
    let power = &b.timeseries[1];
    assert_eq!(power.samples.len(), 4);
    assert!(
        power
            .samples
            .windows(2)
            .all(|p| p[0].timestamp < p[1].timestamp)
    );
    let labels: Vec<(&str, &str)> = power
        .labels
        .iter()
        .map(|l| (l.name.as_str(), l.value.as_str()))
        .collect();
    // Sorted, the empty channel left out.
    assert_eq!(
        labels,
        [
            ("__name__", "wattson_power_watts"),
            ("host", "basket"),
            ("source", wall.to_string().as_str())
        ]
    );
    let energy: Vec<f64> = b.timeseries[0].samples.iter().map(|s| s.value).collect();
    assert_eq!(energy, [0.0, 100.0, 200.0, 300.0]);
    queue::commit(
        w.store(),
        EP,
        &b.cursors,
        b.samples,
        Answered::Accepted,
        T0,
        None,
    )
    .unwrap();

    let b = queue::next_batch(w.store(), EP, Some(&wall), 1000).unwrap();
    assert!(!b.more);
    let energy = &b.timeseries[0].samples;
    assert_eq!(energy[0].timestamp, T0 + 4000);
    assert!(
        (energy[0].value - 400.0).abs() < 1e-9,
        "{}",
        energy[0].value
    );
    assert_eq!(energy.last().unwrap().value, 900.0);
    // The voltage, from its own first sample, 10 of them.
    assert_eq!(b.timeseries[2].samples.len(), 10);
    assert_eq!(b.pending, 6 + 10);
    queue::commit(
        w.store(),
        EP,
        &b.cursors,
        b.samples,
        Answered::Refused,
        T0,
        Some("HTTP 400"),
    )
    .unwrap();
    // Refused: skipped past, nothing left.
    let b = queue::next_batch(w.store(), EP, Some(&wall), 1000).unwrap();
    assert_eq!(b.samples, 0);
    let t = queue::totals(w.store(), EP).unwrap();
    assert_eq!(
        (t.samples_sent, t.samples_rejected, t.failed_requests),
        (8, 22, 1)
    );
    assert_eq!(queue::backlog(w.store(), EP).unwrap(), (0, None));
    // Another endpoint has its own cursors.
    assert_eq!(queue::backlog(w.store(), "http://other/w").unwrap().0, 20);
}

#[test]
fn a_pair_further_apart_than_the_spacing_allows_adds_no_energy() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = writer(&dir.path().join("w.db"));
    second(&mut w, 0, 100.0);
    second(&mut w, 1, 100.0);
    // A 9 s hole in a 1 s series: a gap, not 900 J.
    second(&mut w, 10, 100.0);
    second(&mut w, 11, 100.0);
    w.flush().unwrap();
    let b = queue::next_batch(w.store(), EP, Some(&SourceId::meter("wall")), 1000).unwrap();
    let energy: Vec<f64> = b.timeseries[0].samples.iter().map(|s| s.value).collect();
    assert_eq!(energy, [0.0, 100.0, 100.0, 200.0]);
}

#[test]
fn each_recorded_gap_is_sent_once_with_its_end_as_its_value() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = writer(&dir.path().join("w.db"));
    let wall = SourceId::meter("wall");
    second(&mut w, 0, 100.0);
    w.record_gap(None, &wall, T0 + 500, T0 + 9_250, "wattson was not running");
    second(&mut w, 10, 100.0);
    w.flush().unwrap();
    let b = queue::next_batch(w.store(), EP, Some(&wall), 1000).unwrap();
    let gaps: Vec<_> = b
        .timeseries
        .iter()
        .filter(|t| t.labels[0].value == queue::GAP_FAMILY)
        .collect();
    assert_eq!(gaps.len(), 1);
    let labels: Vec<(String, String)> = gaps[0]
        .labels
        .iter()
        .map(|l| (l.name.clone(), l.value.clone()))
        .collect();
    let want: Vec<(String, String)> = [
        ("__name__", queue::GAP_FAMILY.to_owned()),
        ("host", "basket".to_owned()),
        ("reason", "wattson was not running".to_owned()),
        ("source", wall.to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    assert_eq!(labels, want);
    assert_eq!(gaps[0].samples[0].timestamp, T0 + 500);
    assert_eq!(gaps[0].samples[0].value, (T0 + 9_250) as f64 / 1000.0);
    queue::commit(
        w.store(),
        EP,
        &b.cursors,
        b.samples,
        Answered::Accepted,
        T0,
        None,
    )
    .unwrap();
    let b = queue::next_batch(w.store(), EP, Some(&wall), 1000).unwrap();
    assert_eq!(b.samples, 0, "sent once");
}

#[test]
fn hours_past_the_raw_retention_go_as_their_means_and_the_energy_counter_continues() {
    use crate::store::{HOUR_MS, floor_to};
    let dir = tempfile::tempdir().unwrap();
    let mut options = StoreOptions {
        host: "basket".to_owned(),
        ..StoreOptions::default()
    };
    let wall = SourceId::meter("wall");
    options.spacing_ms.insert(wall.clone(), 10_000);
    let mut w = Writer::new(
        Store::open(&dir.path().join("w.db"), &options).unwrap(),
        options,
    );
    let h0 = floor_to(T0, HOUR_MS);
    // Six hours at 10 s, hour k at 100 + 10 k W.
    for s in (0..6 * 3600).step_by(10) {
        let watts = 100.0 + 10.0 * f64::from(s / 3600);
        let ts = h0 + i64::from(s) * 1000;
        w.push(
            None,
            vec![Sample::new(ts, wall.clone(), Metric::Power, "", watts)],
        );
    }
    w.flush().unwrap();
    // The receiver took the first sample; then it was away while hours 0-3 aged out.
    let b = queue::next_batch(w.store(), EP, Some(&wall), 2).unwrap();
    queue::commit(
        w.store(),
        EP,
        &b.cursors,
        b.samples,
        Answered::Accepted,
        T0,
        None,
    )
    .unwrap();
    w.store()
        .conn()
        .execute(
            "DELETE FROM raw_chunk WHERE start_ms < ?1",
            [h0 + 4 * HOUR_MS],
        )
        .unwrap();

    let b = queue::next_batch(w.store(), EP, Some(&wall), 1000).unwrap();
    assert_eq!(b.rollups, 3, "hours 1, 2 and 3");
    let power = &b.timeseries[1].samples;
    let times: Vec<i64> = power.iter().map(|s| s.timestamp).collect();
    assert_eq!(
        times,
        [1, 2, 3].map(|k| h0 + k * HOUR_MS + HOUR_MS / 2),
        "each hour at its middle"
    );
    let means: Vec<f64> = power.iter().map(|s| s.value).collect();
    assert_eq!(means, [110.0, 120.0, 130.0]);
    // The counter: each hour's stored energy on top of the first sample's zero: 359 pairs
    // at its own watts and the one into the next hour at their mean, J.
    let energy: Vec<f64> = b.timeseries[0].samples.iter().map(|s| s.value).collect();
    let hour = |w: f64| w * 3590.0 + (w + 5.0) * 10.0;
    let want = [
        hour(110.0),
        hour(110.0) + hour(120.0),
        hour(110.0) + hour(120.0) + hour(130.0),
    ];
    for (got, want) in energy.iter().zip(want) {
        assert!(
            (got - want).abs() < 1e-6 * want,
            "{energy:?} against {want}"
        );
    }
    queue::commit(
        w.store(),
        EP,
        &b.cursors,
        b.samples,
        Answered::Accepted,
        T0,
        None,
    )
    .unwrap();
    // Then the raw samples from hour 4 on.
    let b = queue::next_batch(w.store(), EP, Some(&wall), 10_000).unwrap();
    assert_eq!(b.rollups, 0);
    let first = b.timeseries[1].samples[0].timestamp;
    assert_eq!(first, h0 + 4 * HOUR_MS);
    // The read window (an hour from the cursor) holds hour 4's first half.
    assert_eq!(b.timeseries[1].samples.len(), 181);
    assert!(b.more);
}
