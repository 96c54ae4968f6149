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
