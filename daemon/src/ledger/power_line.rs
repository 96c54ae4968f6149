//! A source's power over a window, bucket by bucket, as a chart draws it: each bucket's
//! energy over the time it covers (the same integral, judged by the series' own rule, as
//! every energy figure), and nothing where it covers none, so that a chart draws no line
//! across missing time.
//!
//! Two resolutions: [`by_minute`] from the stored minute rollups (a day is 1440 of them),
//! and [`by_step`] from raw samples (the last hour in a few seconds' steps). Both read only
//! the window asked for.
//!
//! Units: W, UTC ms.

use super::energy::{MS_PER_HOUR, points_for};
use crate::store::{MINUTE_MS, Series, Store, StoreError, floor_to};

/// One bucket of a power line: its start and its mean power over the time it covers, W, to
/// [`WATTS_STEP`]; `None` where it covers none (the line breaks there).
pub type Point = (i64, Option<f64>);

/// What a point's watts are rounded to, W: a hundredth, finer than any meter reads, with
/// the stored energy's own rounding (a constant 80 W reads back as 79.99998 W) left out.
pub const WATTS_STEP: f64 = 1.0 / WATTS_PER_STEP;
const WATTS_PER_STEP: f64 = 100.0;

/// `wh` over `covered_ms` as W to [`WATTS_STEP`]; `None` over no time.
fn mean_watts(wh: f64, covered_ms: i64) -> Option<f64> {
    (covered_ms > 0)
        .then(|| wh * MS_PER_HOUR / covered_ms as f64)
        .filter(|w| w.is_finite())
        .map(round_watts)
}

fn round_watts(w: f64) -> f64 {
    (w * WATTS_PER_STEP).round() / WATTS_PER_STEP + 0.0
}

/// The most buckets one call makes: a day of minutes.
pub const MAX_POINTS: i64 = 1440;

/// The power of `series` minute by minute over `[from_ms, to_ms)` (whole minutes from
/// `from_ms` rounded down; the last one as far as it is stored), from its minute rollups: a minute's energy over its covered
/// time, or, where a minute was stored before covered time was, the mean of its samples.
/// At most [`MAX_POINTS`] minutes (the newest); missing minutes are [`compact`]ed.
pub fn by_minute(
    store: &Store,
    series: &Series,
    from_ms: i64,
    to_ms: i64,
) -> Result<Vec<Point>, StoreError> {
    let from = first_bucket(from_ms, to_ms, MINUTE_MS);
    let mut rollups = store
        .minute_rollups(series, from, to_ms)?
        .into_iter()
        .peekable();
    let mut out = Vec::new();
    let mut t = from;
    while t < to_ms {
        while rollups.peek().is_some_and(|r| r.bucket_ms < t) {
            rollups.next();
        }
        let watts = rollups
            .next_if(|r| r.bucket_ms == t)
            .and_then(|r| match r.covered_ms {
                Some(ms) => r.energy_wh.and_then(|wh| mean_watts(wh, ms)),
                None => (r.n > 0 && r.mean.is_finite()).then(|| round_watts(r.mean)),
            });
        out.push((t, watts));
        t += MINUTE_MS;
    }
    Ok(compact(out))
}

/// The power of `series` in steps of `step_ms` over `[from_ms, to_ms)` (from `from_ms`
/// rounded down to a step), from its raw samples integrated by the series' rule and its
/// recorded gaps, as [`super::energy::energy`] integrates them. At most [`MAX_POINTS`]
/// steps (the newest); missing steps are [`compact`]ed.
pub fn by_step(
    store: &Store,
    series: &Series,
    from_ms: i64,
    to_ms: i64,
    step_ms: i64,
) -> Result<Vec<Point>, StoreError> {
    let step = step_ms.max(1);
    let from = first_bucket(from_ms, to_ms, step);
    if to_ms <= from {
        return Ok(Vec::new());
    }
    let n = usize::try_from((to_ms - from + step - 1) / step).unwrap_or(0);
    let rule = series.rule();
    let (lo, hi) = (
        from.saturating_sub(rule.max_ms),
        to_ms.saturating_add(rule.max_ms),
    );
    let points = points_for(store, series, rule, (lo, hi), to_ms)?;
    let gaps: Vec<(i64, i64)> = store.gap_spans(series, (lo, hi))?;
    let (mut wh, mut ms) = (vec![0.0; n], vec![0_i64; n]);
    let index = |t: i64| usize::try_from((t - from) / step).unwrap_or(0).min(n - 1);
    for w in points.windows(2).filter(|w| w[1].0 > w[0].0) {
        let Some(p) = rule.piece(w[0], w[1], &gaps) else {
            continue;
        };
        let (a, b) = (p.t0.max(from), p.t1.min(to_ms));
        if b <= a {
            continue;
        }
        for i in index(a)..=index(b - 1) {
            let start = from + i as i64 * step;
            let end = (start + step).min(to_ms);
            wh[i] += p.wh_in(start, end);
            ms[i] += p.ms_in(start, end);
        }
    }
    let out = (0..n)
        .map(|i| (from + i as i64 * step, mean_watts(wh[i], ms[i])))
        .collect();
    Ok(compact(out))
}

/// The start of the first of the at most [`MAX_POINTS`] buckets of `step` ms, aligned to
/// `step`, that `[from_ms, to_ms)` touches: the newest where it touches more.
fn first_bucket(from_ms: i64, to_ms: i64, step: i64) -> i64 {
    let last = floor_to(to_ms.saturating_sub(1), step);
    floor_to(from_ms, step).max(last - (MAX_POINTS - 1) * step)
}

/// The buckets with power, and one `None` where each run of buckets without any begins
/// between two with power (a break in the line; the run's other buckets, and those before
/// the first and after the last with power, say nothing more: the line just starts or ends).
pub fn compact(points: Vec<Point>) -> Vec<Point> {
    let mut out: Vec<Point> = Vec::with_capacity(points.len());
    for p in points {
        match (p.1, out.last()) {
            (Some(_), _) | (None, Some((_, Some(_)))) => out.push(p),
            (None, _) => {}
        }
    }
    if out.last().is_some_and(|p| p.1.is_none()) {
        out.pop();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{HOUR_MS, StoreOptions, Writer};
    use wattson_collectors::{Metric, Sample, SourceId};

    /// A sample a minute at `watts(minute)` from `t0` for `minutes`, skipping `hole`.
    fn stored(minutes: i64, hole: std::ops::Range<i64>) -> (tempfile::TempDir, Series, i64) {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("w.db");
        let mut opts = StoreOptions {
            host: "h".into(),
            ..StoreOptions::default()
        };
        let wall = SourceId::meter("wall");
        opts.spacing_ms.insert(wall.clone(), MINUTE_MS);
        let t0 = 1_800_000_000_000 / HOUR_MS * HOUR_MS;
        let mut w = Writer::new(Store::open(&db, &opts).unwrap(), opts.clone());
        let batch: Vec<Sample> = (0..=minutes)
            .filter(|m| !hole.contains(m))
            .map(|m| {
                let watts = if m < 60 { 30.0 } else { 80.0 };
                Sample::new(t0 + m * MINUTE_MS, wall.clone(), Metric::Power, "", watts)
            })
            .collect();
        w.push(None, batch);
        w.flush().unwrap();
        drop(w);
        let store = Store::open_read_only(&db).unwrap();
        let series = super::super::energy::power_series(&store, "h", &wall)
            .unwrap()
            .unwrap();
        (dir, series, t0)
    }

    #[test]
    fn minutes_carry_their_power_and_a_hole_is_one_break() {
        let (dir, series, t0) = stored(120, 20..25);
        let store = Store::open_read_only(&dir.path().join("w.db")).unwrap();
        let line = by_minute(&store, &series, t0, t0 + 2 * HOUR_MS).unwrap();
        assert_eq!(line[0], (t0, Some(30.0)));
        // Samples 19 and 25 are further apart than the spacing allows: minutes 19 to 24
        // cover nothing, and the line breaks once, at minute 19.
        let breaks: Vec<i64> = line
            .iter()
            .filter(|p| p.1.is_none())
            .map(|p| (p.0 - t0) / MINUTE_MS)
            .collect();
        assert_eq!(breaks, vec![19]);
        let at = |m: i64| line.iter().find(|p| p.0 == t0 + m * MINUTE_MS).unwrap().1;
        assert_eq!(at(30), Some(30.0));
        assert_eq!(at(90), Some(80.0));
        // Minute 59 ramps from 30 W to 80 W.
        assert!((at(59).unwrap() - 55.0).abs() < 1e-6);
        assert!(line.len() as i64 <= MAX_POINTS);
    }

    #[test]
    fn steps_from_raw_samples_agree_with_the_minutes_and_are_bounded() {
        let (dir, series, t0) = stored(120, 20..25);
        let store = Store::open_read_only(&dir.path().join("w.db")).unwrap();
        let line = by_step(
            &store,
            &series,
            t0 + 60 * MINUTE_MS,
            t0 + 2 * HOUR_MS,
            5_000,
        )
        .unwrap();
        assert_eq!(line.len(), 720);
        assert!(line.iter().all(|p| p.1 == Some(80.0)), "{line:?}");
        let holed = by_step(&store, &series, t0, t0 + HOUR_MS, 5_000).unwrap();
        assert_eq!(holed.iter().filter(|p| p.1.is_none()).count(), 1);
        // Asked for a day in 1 s steps: the newest MAX_POINTS of them.
        let capped = by_step(&store, &series, t0 - 22 * HOUR_MS, t0 + 2 * HOUR_MS, 1_000).unwrap();
        assert!(capped.len() as i64 <= MAX_POINTS);
        assert_eq!(capped.last().unwrap().0, t0 + 2 * HOUR_MS - 1_000);
    }

    #[test]
    fn compact_keeps_one_break_per_run_and_none_at_either_end() {
        let p = compact(vec![
            (0, None),
            (1, Some(1.0)),
            (2, None),
            (3, None),
            (4, Some(2.0)),
            (5, None),
        ]);
        assert_eq!(p, vec![(1, Some(1.0)), (2, None), (4, Some(2.0))]);
    }
}
