//! Energy from power samples: the trapezoidal integral of W over ms, in Wh, and the time it
//! covers.
//!
//! Power is taken to change linearly between two consecutive samples, and only when the
//! pair is continuous: the interval is positive, no longer than the series' spacing allows
//! ([`max_pair_ms`]), and no recorded gap overlaps it. Energy is never interpolated across a
//! gap. The covered time of a window is the support of the integral: the ms of the window
//! that lie inside a continuous pair. This is the store's arithmetic (its rollups need it);
//! the ledger (`crate::ledger`) composes windows from it.

/// ms x W per Wh.
const MS_W_PER_WH: f64 = 3_600_000.0;

/// Energy in Wh of the segment from `(t0, v0)` to `(t1, v1)` (ms, W) that lies in
/// `[from, to)` (ms).
pub fn clipped_wh(t0: i64, v0: f64, t1: i64, v1: f64, from: i64, to: i64) -> f64 {
    let lo = t0.max(from);
    let hi = t1.min(to);
    if hi <= lo || t1 <= t0 {
        return 0.0;
    }
    let at = |t: i64| v0 + (v1 - v0) * ((t - t0) as f64 / (t1 - t0) as f64);
    f64::midpoint(at(lo), at(hi)) * (hi - lo) as f64 / MS_W_PER_WH
}

/// The longest pair of samples integrated for a series whose own spacing is `spacing_ms`:
/// twice the spacing, and at least the spacing plus 2 s, so a poll delayed by a loaded
/// machine does not open a gap, while a missed report (or several missed polls) does.
pub fn max_pair_ms(spacing_ms: i64) -> i64 {
    let s = spacing_ms.max(1);
    s.saturating_mul(2).max(s.saturating_add(2000))
}

/// The part of `[t0, t1)` inside `[from, to)`, ms.
pub fn clipped_ms(t0: i64, t1: i64, from: i64, to: i64) -> i64 {
    (t1.min(to) - t0.max(from)).max(0)
}

/// Whether the pair `t0 < t1` (ms) may be integrated: no longer than `max_interval_ms`
/// and not overlapping any of `gaps` (`(start_ms, end_ms)`).
pub fn continuous(t0: i64, t1: i64, max_interval_ms: i64, gaps: &[(i64, i64)]) -> bool {
    t1 > t0
        && t1 - t0 <= max_interval_ms
        && !gaps.iter().any(|&(start, end)| start < t1 && end > t0)
}

/// Energy in Wh within `[from, to)` of a sorted series of `(ts_ms, watts)` points, and the
/// ms of `[from, to)` it covers.
pub fn series_wh(
    points: &[(i64, f64)],
    from: i64,
    to: i64,
    max_interval_ms: i64,
    gaps: &[(i64, i64)],
) -> (f64, i64) {
    points
        .windows(2)
        .filter(|w| continuous(w[0].0, w[1].0, max_interval_ms, gaps))
        .fold((0.0, 0), |(wh, ms), w| {
            (
                wh + clipped_wh(w[0].0, w[0].1, w[1].0, w[1].1, from, to),
                ms + clipped_ms(w[0].0, w[1].0, from, to),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_power_for_an_hour_is_its_watts_in_wh() {
        let wh = clipped_wh(0, 240.0, 3_600_000, 240.0, 0, 3_600_000);
        assert!((wh - 240.0).abs() < 1e-9);
    }

    #[test]
    fn a_ramp_split_at_its_middle_gives_each_half_its_trapezoid() {
        // 0 W -> 100 W over 2 s; the first second holds 25 W*s, the second 75 W*s.
        let first = clipped_wh(0, 0.0, 2000, 100.0, 0, 1000);
        let second = clipped_wh(0, 0.0, 2000, 100.0, 1000, 5000);
        assert!((first * 3600.0 - 25.0).abs() < 1e-9);
        assert!((second * 3600.0 - 75.0).abs() < 1e-9);
    }

    #[test]
    fn the_tolerance_is_twice_the_spacing_and_at_least_two_seconds_more() {
        assert_eq!(max_pair_ms(250), 2250);
        assert_eq!(max_pair_ms(1000), 3000);
        assert_eq!(max_pair_ms(10_000), 20_000);
        assert_eq!(max_pair_ms(300_000), 600_000);
    }

    #[test]
    fn covered_time_is_the_support_of_the_integral() {
        let pts = [
            (0, 50.0),
            (1000, 50.0),
            (2000, 50.0),
            (9000, 50.0),
            (10_000, 50.0),
        ];
        // The 7 s pair is too long for a 1 s series: not integrated, not covered.
        let (wh, ms) = series_wh(&pts, 500, 9500, max_pair_ms(1000), &[]);
        assert_eq!(ms, 2000);
        assert!((wh - 50.0 * 2.0 / 3600.0).abs() < 1e-12);
    }

    #[test]
    fn gaps_and_long_intervals_break_continuity() {
        assert!(continuous(0, 1000, 3000, &[]));
        assert!(!continuous(0, 3001, 3000, &[]));
        assert!(!continuous(0, 1000, 3000, &[(500, 600)]));
        assert!(continuous(1000, 2000, 3000, &[(0, 1000)]));
        assert!(!continuous(1000, 1000, 3000, &[]));
    }
}
