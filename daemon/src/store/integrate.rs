//! Energy from power samples: the integral of W over ms, in Wh, and the time it covers.
//!
//! How a series' readings stand between them is the series' own rule ([`Readings`], stored
//! with the series and applied by everyone who integrates it: the writer's rollups, the
//! ledger's ragged ends, the live trail, the fleet, remote write):
//! - `sampled` (meters, and plugs reporting on a fixed period): power is taken to change
//!   linearly between two consecutive samples (the trapezoid), and only when the pair is
//!   continuous: the interval is positive, no longer than the series' spacing allows
//!   ([`max_pair_ms`]), and no recorded gap overlaps it;
//! - `hold` (plugs reporting on change): each reading stands until the next, at most
//!   `max_hold`, and never past the start of a recorded gap; the rest of a longer silence is
//!   a gap;
//! - `interval_mean` (a fleet host's states of a held source): each value is the mean since the one
//!   before, and stands for that time when it is no longer than the limit.
//!
//! Energy is never interpolated across a gap. The covered time of a window is the support
//! of the integral: the ms of the window that lie inside an integrated piece. This is the
//! store's arithmetic (its rollups need it); the ledger (`crate::ledger`) composes windows
//! from it.

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

/// How a series' readings stand between them (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Readings {
    /// Linear between two readings no further apart than the spacing allows.
    #[default]
    Sampled,
    /// Each reading stands until the next, at most the series' `max_hold`.
    Hold,
    /// Each value is the mean since the one before (a fleet host's state of a held source).
    #[serde(rename = "interval_mean")]
    Mean,
}

impl Readings {
    /// Its name in the configuration and the database.
    pub fn as_str(self) -> &'static str {
        match self {
            Readings::Sampled => "sampled",
            Readings::Hold => "hold",
            Readings::Mean => "interval_mean",
        }
    }

    /// [`Readings::as_str`]'s inverse.
    pub fn parse(s: &str) -> Option<Readings> {
        match s {
            "sampled" => Some(Readings::Sampled),
            "hold" => Some(Readings::Hold),
            "interval_mean" => Some(Readings::Mean),
            _ => None,
        }
    }
}

/// The readings of a series with the longest time a pair of them is integrated over, ms:
/// for `sampled`, [`max_pair_ms`] of its spacing; for `hold`, its `max_hold`; for `interval_mean`,
/// the limit its host stated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    pub readings: Readings,
    pub max_ms: i64,
}

/// The stretch of a pair of readings that is integrated: straight from `(t0, v0)` to
/// `(t1, v1)` (ms, W).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Piece {
    pub t0: i64,
    pub v0: f64,
    pub t1: i64,
    pub v1: f64,
}

impl Piece {
    /// Its energy within `[from, to)`, Wh.
    pub fn wh_in(&self, from: i64, to: i64) -> f64 {
        clipped_wh(self.t0, self.v0, self.t1, self.v1, from, to)
    }

    /// The ms of `[from, to)` it covers.
    pub fn ms_in(&self, from: i64, to: i64) -> i64 {
        clipped_ms(self.t0, self.t1, from, to)
    }
}

impl Rule {
    /// `sampled` readings `spacing_ms` apart.
    pub fn sampled(spacing_ms: i64) -> Rule {
        Rule {
            readings: Readings::Sampled,
            max_ms: max_pair_ms(spacing_ms),
        }
    }

    /// The rule of a series: its readings, its `max_hold` (for `hold` and `interval_mean`) and its
    /// spacing (for `sampled`; 1 s where unknown).
    pub fn of(readings: Readings, max_hold_ms: Option<i64>, spacing_ms: Option<i64>) -> Rule {
        match (readings, max_hold_ms) {
            (Readings::Hold | Readings::Mean, Some(max)) => Rule {
                readings,
                max_ms: max.max(1),
            },
            _ => Rule::sampled(spacing_ms.unwrap_or(1000)),
        }
    }

    /// What of the pair `(t0, v0)`, `(t1, v1)` (ms, W, `t0 < t1`) is integrated, given the
    /// source's recorded `gaps` (`(start_ms, end_ms)`); `None` when nothing is.
    pub fn piece(
        &self,
        (t0, v0): (i64, f64),
        (t1, v1): (i64, f64),
        gaps: &[(i64, i64)],
    ) -> Option<Piece> {
        match self.readings {
            Readings::Sampled => {
                continuous(t0, t1, self.max_ms, gaps).then_some(Piece { t0, v0, t1, v1 })
            }
            Readings::Mean => {
                continuous(t0, t1, self.max_ms, gaps).then_some(Piece { t0, v0: v1, t1, v1 })
            }
            Readings::Hold => {
                let end = held_until(t0, t1, self.max_ms, gaps);
                (end > t0).then_some(Piece {
                    t0,
                    v0,
                    t1: end,
                    v1: v0,
                })
            }
        }
    }

    /// The part of `[t0, t1)` the pair leaves uncovered beyond what `gaps` already say:
    /// a held reading's silence past `max_hold`, a pair further apart than the limit.
    pub fn overrun(&self, t0: i64, t1: i64, gaps: &[(i64, i64)]) -> Option<(i64, i64)> {
        if t1 <= t0 || gaps.iter().any(|&(s, e)| s < t1 && e > t0) {
            return None;
        }
        match self.readings {
            Readings::Hold => (t1 - t0 > self.max_ms).then(|| (t0 + self.max_ms, t1)),
            Readings::Sampled | Readings::Mean => (t1 - t0 > self.max_ms).then_some((t0, t1)),
        }
    }
}

/// Until when a reading at `t0` stands when the next comes at `t1`: the next reading, at
/// most `max_hold_ms`, and never past the start of a recorded gap.
fn held_until(t0: i64, t1: i64, max_hold_ms: i64, gaps: &[(i64, i64)]) -> i64 {
    let end = t1.min(t0.saturating_add(max_hold_ms));
    gaps.iter()
        .filter(|&&(s, e)| s < end && e > t0)
        .fold(end, |end, &(s, _)| end.min(s.max(t0)))
}

/// Energy in Wh within `[from, to)` of a sorted series of `(ts_ms, watts)` points under
/// `rule`, and the ms of `[from, to)` it covers.
pub fn series_wh(
    points: &[(i64, f64)],
    from: i64,
    to: i64,
    rule: Rule,
    gaps: &[(i64, i64)],
) -> (f64, i64) {
    points
        .windows(2)
        .filter(|w| w[1].0 > w[0].0)
        .filter_map(|w| rule.piece(w[0], w[1], gaps))
        .fold((0.0, 0), |(wh, ms), p| {
            (wh + p.wh_in(from, to), ms + p.ms_in(from, to))
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
        let (wh, ms) = series_wh(&pts, 500, 9500, Rule::sampled(1000), &[]);
        assert_eq!(ms, 2000);
        assert!((wh - 50.0 * 2.0 / 3600.0).abs() < 1e-12);
    }

    #[test]
    fn a_held_reading_stands_until_the_next_at_most_max_hold_and_never_into_a_gap() {
        let hold = Rule::of(Readings::Hold, Some(30_000), None);
        // Until the next reading.
        let p = hold.piece((0, 1000.0), (10_000, 50.0), &[]).unwrap();
        assert_eq!((p.t1, p.v1), (10_000, 1000.0));
        assert!((p.wh_in(0, 10_000) - 1000.0 * 10.0 / 3600.0).abs() < 1e-12);
        // At most max_hold; the rest of the silence is left over.
        let p = hold.piece((0, 1000.0), (50_000, 50.0), &[]).unwrap();
        assert_eq!(p.t1, 30_000);
        assert_eq!(hold.overrun(0, 50_000, &[]), Some((30_000, 50_000)));
        assert_eq!(hold.overrun(0, 20_000, &[]), None);
        // Never past the start of a recorded gap; none at all from inside one.
        assert_eq!(
            hold.piece((0, 1.0), (20_000, 1.0), &[(5000, 8000)])
                .unwrap()
                .t1,
            5000
        );
        assert_eq!(hold.piece((0, 1.0), (20_000, 1.0), &[(-5, 8000)]), None);
        assert_eq!(hold.overrun(0, 50_000, &[(5000, 8000)]), None);
    }

    #[test]
    fn a_mean_stands_for_the_time_since_the_one_before() {
        let mean = Rule::of(Readings::Mean, Some(60_000), None);
        let p = mean.piece((0, 1000.0), (10_000, 50.0), &[]).unwrap();
        assert!((p.wh_in(0, 10_000) - 50.0 * 10.0 / 3600.0).abs() < 1e-12);
        assert_eq!(mean.piece((0, 1.0), (60_001, 1.0), &[]), None);
        // A series without a stated limit is sampled by its spacing.
        assert_eq!(
            Rule::of(Readings::Hold, None, Some(1000)),
            Rule::sampled(1000)
        );
        for r in [Readings::Sampled, Readings::Hold, Readings::Mean] {
            assert_eq!(Readings::parse(r.as_str()), Some(r));
        }
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
