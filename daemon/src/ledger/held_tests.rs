//! A plug reporting on change (`readings = "hold"`): random report scripts (bursts, periodic
//! reports, pauses shorter and longer than `max_hold`, recorded outages, a writer restart)
//! written through the real writer into real SQLite files; the store's integral over
//! random windows equals the held-value truth computed here, and what the coverage leaves
//! out of a silence longer than `max_hold` is listed as a gap.

use proptest::prelude::*;
use wattson_collectors::SourceId;
use wattson_collectors::{Metric, Sample};

use super::energy;
use crate::store::integrate::Readings;
use crate::store::{HOUR_MS, Store, StoreOptions, Writer};

/// 2023-11-14T22:00:00Z, an hour boundary.
const T0: i64 = 1_699_999_200_000;

/// The held-value truth, written apart from the store's code: each reading stands from its
/// time until the next reading, for at most `max_hold`, and not past the start of a
/// recorded outage; clipped to `[from, to)`: (Wh, covered ms).
fn held_truth(
    points: &[(i64, f64)],
    outages: &[(i64, i64)],
    max_hold: i64,
    from: i64,
    to: i64,
) -> (f64, i64) {
    let (mut wh, mut ms) = (0.0, 0);
    for w in points.windows(2) {
        let ((t0, watts), (t1, _)) = (w[0], w[1]);
        let mut stands_until = t1.min(t0 + max_hold);
        for &(a, b) in outages {
            if a < stands_until && b > t0 {
                stands_until = stands_until.min(a.max(t0));
            }
        }
        let (lo, hi) = (t0.max(from), stands_until.min(to));
        if hi > lo {
            wh += watts * (hi - lo) as f64 / 3_600_000.0;
            ms += hi - lo;
        }
    }
    (wh, ms)
}

/// One step of a script: how long after the previous report the next comes, ms.
fn step() -> impl Strategy<Value = i64> {
    prop_oneof![
        // A burst of changes.
        4 => 100_i64..3000,
        // Periodic reports.
        3 => 9000_i64..11_000,
        // A quiet load: no change for a while.
        2 => 20_000_i64..400_000,
        // A plug gone quiet past any max_hold.
        1 => 400_000_i64..4 * HOUR_MS,
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(24)
    ))]

    #[test]
    fn the_store_integral_of_held_readings_is_the_held_value_truth(
        max_hold in prop::sample::select(vec![30_000_i64, 120_000, 600_000]),
        steps in prop::collection::vec((step(), 0_u32..40, 0_u32..300_000), 20..300),
        windows in prop::collection::vec((0.0_f64..1.0, 0.0_f64..1.0), 1..6),
        restart_at in 0.0_f64..1.0,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("held.db");
        let plug = SourceId::meter("plug");
        let mut opts = StoreOptions { host: "h".into(), ..StoreOptions::default() };
        opts.readings.insert(plug.clone(), (Readings::Hold, Some(max_hold)));
        let mut w = Writer::new(Store::open(&path, &opts).unwrap(), opts.clone());
        let mut t = T0 + 17_321;
        let (mut points, mut outages) = (Vec::new(), Vec::new());
        let restart = (restart_at * steps.len() as f64) as usize;
        for (i, (dt, outage_draw, centiwatts)) in steps.iter().enumerate() {
            if *outage_draw == 0 {
                // A recorded outage (the daemon stopped) before the next report.
                let g = (t + dt / 4, t + dt / 2);
                w.record_gap(None, &plug, g.0, g.1, "daemon stopped");
                outages.push(g);
            }
            t += dt;
            // Stored values are quantised to 0.01 W: generate them on that grid.
            let p = f64::from(*centiwatts) / 100.0;
            points.push((t, p));
            w.push(None, vec![Sample::new(t, plug.clone(), Metric::Power, "", p)]);
            if i % 23 == 0 {
                w.flush().unwrap();
            }
            if i == restart {
                w.flush().unwrap();
                w = Writer::new(Store::open(&path, &opts).unwrap(), opts.clone());
            }
        }
        w.flush().unwrap();
        let store = w.store();
        let (first, last) = (points[0].0, points[points.len() - 1].0);
        let span = (last - first + 2 * HOUR_MS) as f64;
        let mut cases: Vec<(i64, i64)> = vec![(first - HOUR_MS, last + HOUR_MS)];
        for (a, b) in windows {
            let x = first - HOUR_MS + (a * span) as i64;
            let y = first - HOUR_MS + (b * span) as i64;
            cases.push((x.min(y), x.max(y) + 1));
        }
        for (from, to) in cases {
            let e = energy::energy(store, "h", &plug, from, to).unwrap();
            let (wh, ms) = held_truth(&points, &outages, max_hold, from, to);
            prop_assert!(
                (e.wh - wh).abs() <= 1e-9 * wh.abs().max(1e-6),
                "{from}..{to}: store {} Wh, held truth {wh} Wh", e.wh
            );
            prop_assert_eq!(e.covered_ms, ms, "{}..{}", from, to);
            // Every silence past max_hold (not already an outage) is a listed gap.
            for pair in points.windows(2) {
                let (t0, t1) = (pair[0].0, pair[1].0);
                let silent = (t0 + max_hold, t1);
                let in_window = silent.0 < to && silent.1 > from;
                let outage = outages.iter().any(|&(a, b)| a < t1 && b > t0);
                if t1 - t0 > max_hold && in_window && !outage {
                    prop_assert!(
                        e.gaps.iter().any(|g| g.start_ms == silent.0.max(from)
                            && g.end_ms == silent.1.min(to)),
                        "{:?} not among the gaps {:?}", silent, e.gaps
                    );
                }
            }
        }
        let series = store.series().unwrap();
        let power = series.iter().find(|s| s.metric == Metric::Power).unwrap();
        prop_assert_eq!(power.readings, Readings::Hold);
        prop_assert_eq!(power.max_hold_ms, Some(max_hold));
    }
}
