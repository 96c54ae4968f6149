//! The ledger against a reference integral, on random streams written through the real
//! writer into real SQLite files.

use proptest::prelude::*;
use wattson_collectors::SourceId;
use wattson_collectors::{Metric, Sample};

use super::energy;
use crate::store::{HOUR_MS, Store, StoreOptions, Writer, integrate};

/// 2023-11-14T22:00:00Z, an hour boundary.
const T0: i64 = 1_699_999_200_000;

/// The trapezoid over the pairs no longer than the tolerance of `spacing` and crossing no
/// gap, clipped to `[from, to)`: (Wh, covered ms). Written apart from the store's code.
fn reference(
    points: &[(i64, f64)],
    gaps: &[(i64, i64)],
    spacing: i64,
    from: i64,
    to: i64,
) -> (f64, i64) {
    let tolerance = (2 * spacing).max(spacing + 2000);
    let (mut wh, mut ms) = (0.0, 0);
    for w in points.windows(2) {
        let ((t0, p0), (t1, p1)) = (w[0], w[1]);
        if t1 - t0 > tolerance || gaps.iter().any(|&(a, b)| a < t1 && b > t0) {
            continue;
        }
        let (lo, hi) = (t0.max(from), t1.min(to));
        if hi <= lo {
            continue;
        }
        let at = |t: i64| p0 + (p1 - p0) * (t - t0) as f64 / (t1 - t0) as f64;
        wh += f64::midpoint(at(lo), at(hi)) * (hi - lo) as f64 / 3_600_000.0;
        ms += hi - lo;
    }
    (wh, ms)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(24)
    ))]

    /// Random streams (random spacing, random intervals around it, random gaps, a writer
    /// restart midway): the ledger's energy over random windows equals the reference to
    /// 1e-9 relative, and covered time equals the reference's and never exceeds the window.
    #[test]
    fn the_ledger_equals_a_reference_integral(
        spacing in prop::sample::select(vec![250_i64, 1000, 2000, 5000, 10_000, 60_000, 300_000]),
        steps in prop::collection::vec((0.2_f64..2.6, 0_u32..30, 0_u32..100_000), 40..400),
        windows in prop::collection::vec((0.0_f64..1.0, 0.0_f64..1.0), 1..6),
        restart_at in 0.0_f64..1.0,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.db");
        let mut opts = StoreOptions { host: "h".into(), ..StoreOptions::default() };
        opts.spacing_ms.insert(SourceId::meter("wall"), spacing);
        let mut w = Writer::new(Store::open(&path, &opts).unwrap(), opts.clone());
        let mut t = T0 + 17_321;
        let mut points = Vec::new();
        let mut gaps = Vec::new();
        let restart = (restart_at * steps.len() as f64) as usize;
        for (i, (factor, gap_draw, centiwatts)) in steps.iter().enumerate() {
            let dt = ((spacing as f64 * factor) as i64).max(1);
            if *gap_draw == 0 {
                // A recorded outage before the next sample.
                let g = (t + dt / 4, t + dt / 2);
                w.record_gap(None, &SourceId::meter("wall"), g.0, g.1, "unplugged");
                gaps.push(g);
            }
            t += dt;
            // Stored values are quantised to 0.01 W: generate them on that grid.
            let p = f64::from(*centiwatts) / 100.0;
            points.push((t, p));
            w.push(None, vec![Sample::new(t, SourceId::meter("wall"), Metric::Power, "", p)]);
            if i % 37 == 0 {
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
            let e = energy::energy(store, "h", &SourceId::meter("wall"), from, to).unwrap();
            let (wh, ms) = reference(&points, &gaps, spacing, from, to);
            prop_assert!(
                (e.wh - wh).abs() <= 1e-9 * wh.abs().max(1e-6),
                "{from}..{to}: ledger {} Wh, reference {wh} Wh", e.wh
            );
            prop_assert_eq!(e.covered_ms, ms, "{}..{}", from, to);
            prop_assert!(e.covered_ms <= to - from);
        }
        // The tolerance the reference restates is the store's.
        prop_assert_eq!(integrate::max_pair_ms(spacing), (2 * spacing).max(spacing + 2000));
    }
}
