//! Energy of one source over a window: the one computation behind every energy figure.
//!
//! Energy of a series is the integral of its power over the time where consecutive samples
//! are no further apart than the series' own spacing allows (the store's tolerance,
//! [`integrate::max_pair_ms`]); covered time is the support of that integral; the rest of
//! the window is a gap and is never interpolated. A window is composed of whole UTC hours
//! from the hourly rollups (which store the energy and covered time they integrated) and
//! its ragged ends from raw samples (minute rollups where raw samples have expired), judged
//! by the same rule, so any window gives the same figure whichever way it is cut.
//!
//! Units: Wh, ms (UTC), W. Every figure is of the source's power series with channel `""`
//! (the source as a whole).

mod pieces;

use serde::Serialize;
use wattson_collectors::Metric;
use wattson_collectors::SourceId;

use super::PrimaryPower;
use crate::store::{
    HOUR_MS, MINUTE_MS, Series, SeriesFilter, Store, StoreError, ceil_to, floor_to, integrate,
};

/// ms per hour, as a float.
pub const MS_PER_HOUR: f64 = 3_600_000.0;

/// Energy in one stretch of a window (a UTC hour, or a ragged end).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Bucket {
    /// UTC ms.
    pub start_ms: i64,
    /// UTC ms, exclusive.
    pub end_ms: i64,
    pub wh: f64,
    /// ms of the bucket the energy covers.
    pub covered_ms: i64,
    /// The figures are estimates (rollups from before covered time was stored).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub approximate: bool,
    /// Energy over a recorded gap that the meter's own counter counted, not sampled: its
    /// share of the gap in this window, spread evenly over it (`covered_ms` is 0).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub counted: bool,
}

/// A recorded gap of the source: a period it produced nothing (meter unplugged, daemon
/// stopped).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GapSpan {
    /// UTC ms.
    pub start_ms: i64,
    pub end_ms: i64,
    pub reason: String,
    /// What the meter's own counter says of the gap (its Wh in this window, where it
    /// counted it), once settled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub counted: Option<CountedSpan>,
    /// Where the host was away over it (asleep, off), as the kernel told it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub away: Option<crate::store::Away>,
}

/// A gap's energy by the meter's counter, within a window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CountedSpan {
    /// Wh in the window (the gap's counted Wh times its share in the window); `None`
    /// where the counter cannot say.
    pub wh: Option<f64>,
    /// The whole gap's Wh and the counter's resolution, Wh: its interval.
    pub gap_wh: Option<f64>,
    pub step_wh: Option<f64>,
    /// "counted by the meter, not sampled", or why not.
    pub note: String,
}

/// The energy of one source over `[from_ms, to_ms)`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Energy {
    pub host: String,
    /// `meter:wall`, a plug, a fleet host's meter.
    pub source: SourceId,
    pub from_ms: i64,
    pub to_ms: i64,
    /// Wh sampled (the integral of power).
    pub wh: f64,
    /// Wh over recorded gaps that the meter's own counter counted (not sampled; in
    /// [`Energy::kwh`], priced, never in the mean power).
    pub counted_wh: f64,
    /// ms of the window the energy covers.
    pub covered_ms: i64,
    /// The spacing the series' samples were judged by, ms.
    pub spacing_ms: Option<i64>,
    /// Per UTC hour (and the ragged ends), in time order; empty stretches left out.
    pub buckets: Vec<Bucket>,
    /// Recorded gaps of the source that overlap the window.
    pub gaps: Vec<GapSpan>,
    /// How many of the hours are estimates.
    pub approximate_hours: u64,
}

impl Energy {
    /// An empty figure for a source with no power series.
    fn empty(host: &str, source: &SourceId, from_ms: i64, to_ms: i64) -> Energy {
        Energy {
            host: host.to_owned(),
            source: source.to_owned(),
            from_ms,
            to_ms,
            wh: 0.0,
            counted_wh: 0.0,
            covered_ms: 0,
            spacing_ms: None,
            buckets: Vec::new(),
            gaps: Vec::new(),
            approximate_hours: 0,
        }
    }

    /// kWh: sampled and counted over gaps.
    pub fn kwh(&self) -> f64 {
        (self.wh + self.counted_wh) / 1000.0
    }

    /// Hours covered.
    pub fn covered_hours(&self) -> f64 {
        self.covered_ms as f64 / MS_PER_HOUR
    }

    /// Mean power over the covered time, W; `None` with nothing covered.
    pub fn mean_watts(&self) -> Option<f64> {
        (self.covered_ms > 0).then(|| self.wh * MS_PER_HOUR / self.covered_ms as f64)
    }

    /// The buckets as `(start, end, Wh)` for pricing.
    pub fn priced_buckets(&self) -> Vec<(i64, i64, f64)> {
        self.buckets
            .iter()
            .map(|b| (b.start_ms, b.end_ms, b.wh))
            .collect()
    }
}

/// The power series of `source` on `host` (channel `""`), if stored.
pub fn power_series(
    store: &Store,
    host: &str,
    source: &SourceId,
) -> Result<Option<Series>, StoreError> {
    Ok(store
        .find_series(
            &SeriesFilter::all()
                .host(host)
                .source(source)
                .metric(Metric::Power)
                .channel(""),
        )?
        .into_iter()
        .next())
}

/// The meter whose power stands for `host` at the wall in this database: `primary`'s wall
/// source where it has a power series, else the meter [`PrimaryPower`] ranks first (the
/// first by name). `None` when no meter of `host` has power stored.
pub fn wall_power_source(
    store: &Store,
    host: &str,
    primary: &PrimaryPower,
) -> Result<Option<SourceId>, StoreError> {
    let meters: Vec<SourceId> = store
        .find_series(
            &SeriesFilter::all()
                .host(host)
                .metric(Metric::Power)
                .channel(""),
        )?
        .into_iter()
        .map(|s| s.source)
        .filter(SourceId::is_meter)
        .collect();
    Ok(primary.pick(&meters).cloned())
}

/// The energy of `source` on `host` over `[from_ms, to_ms)`.
pub fn energy(
    store: &Store,
    host: &str,
    source: &SourceId,
    from_ms: i64,
    to_ms: i64,
) -> Result<Energy, StoreError> {
    let mut out = Energy::empty(host, source, from_ms, to_ms);
    let Some(series) = power_series(store, host, source)? else {
        return Ok(out);
    };
    if to_ms <= from_ms {
        return Ok(out);
    }
    out.spacing_ms = series.spacing_ms;
    let (h0, h1) = (ceil_to(from_ms, HOUR_MS), floor_to(to_ms, HOUR_MS));
    if h0 >= h1 {
        out.buckets.extend(ragged(store, &series, from_ms, to_ms)?);
    } else {
        out.buckets.extend(ragged(store, &series, from_ms, h0)?);
        for r in store.hour_rollups(&series, h0, h1)? {
            let wh = r.energy_wh.unwrap_or(0.0);
            let covered = r.covered_ms.unwrap_or(0);
            if wh != 0.0 || covered > 0 {
                out.buckets.push(Bucket {
                    start_ms: r.bucket_ms,
                    end_ms: r.bucket_ms + HOUR_MS,
                    wh,
                    covered_ms: covered,
                    approximate: r.approximate,
                    counted: false,
                });
            }
        }
        out.buckets.extend(ragged(store, &series, h1, to_ms)?);
    }
    out.wh = out.buckets.iter().map(|b| b.wh).sum();
    out.covered_ms = out.buckets.iter().map(|b| b.covered_ms).sum();
    out.approximate_hours = out.buckets.iter().filter(|b| b.approximate).count() as u64;
    out.gaps = store
        .gaps(host, from_ms, to_ms)?
        .into_iter()
        .filter(|g| g.source == *source)
        .map(|g| {
            let (start_ms, end_ms) = (g.start_ms.max(from_ms), g.end_ms.min(to_ms));
            let share = if g.end_ms > g.start_ms {
                (end_ms - start_ms).max(0) as f64 / (g.end_ms - g.start_ms) as f64
            } else {
                0.0
            };
            GapSpan {
                start_ms,
                end_ms,
                reason: g.reason,
                away: g.away,
                counted: g.counted.map(|c| CountedSpan {
                    wh: c.wh.map(|w| w * share),
                    gap_wh: c.wh,
                    step_wh: c.step_wh,
                    note: c.note,
                }),
            }
        })
        .collect();
    // The counter's energy over each gap, in buckets of its own, one per UTC hour it
    // touches (as every other bucket lies in one hour): priced where it fell (spread
    // evenly over the gap), never in the covered time or the mean power.
    for g in &out.gaps {
        let Some(wh) = g.counted.as_ref().and_then(|c| c.wh).filter(|w| *w > 0.0) else {
            continue;
        };
        let span = (g.end_ms - g.start_ms).max(1) as f64;
        let mut t = g.start_ms;
        while t < g.end_ms {
            let end = (floor_to(t, HOUR_MS) + HOUR_MS).min(g.end_ms);
            out.buckets.push(Bucket {
                start_ms: t,
                end_ms: end,
                wh: wh * (end - t) as f64 / span,
                covered_ms: 0,
                approximate: false,
                counted: true,
            });
            t = end;
        }
        out.counted_wh += wh;
    }
    out.buckets.sort_by_key(|b| b.start_ms);
    Ok(out)
}

/// Wh the meter's own counter counted over recorded gaps of `source` within
/// `[from_ms, to_ms)` (each gap's share in the window).
pub fn counted_wh(
    store: &Store,
    host: &str,
    source: &SourceId,
    from_ms: i64,
    to_ms: i64,
) -> Result<f64, StoreError> {
    Ok(store
        .gaps(host, from_ms, to_ms)?
        .into_iter()
        .filter(|g| g.source == *source && g.end_ms > g.start_ms)
        .filter_map(|g| {
            let wh = g.counted?.wh?;
            let overlap = (g.end_ms.min(to_ms) - g.start_ms.max(from_ms)).max(0);
            Some(wh * overlap as f64 / (g.end_ms - g.start_ms) as f64)
        })
        .sum())
}

/// Everything a source has stored: Wh and ms covered, from the hour rollups in one query.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct Total {
    pub wh: f64,
    pub covered_ms: i64,
    /// Start of the first hour with data, UTC ms.
    pub since_ms: Option<i64>,
    pub approximate_hours: u64,
}

/// The source's stored energy since its first sample: what Home Assistant's `energy`
/// entity shows (it only grows as samples are stored, across restarts).
pub fn total(store: &Store, host: &str, source: &SourceId) -> Result<Total, StoreError> {
    let Some(series) = power_series(store, host, source)? else {
        return Ok(Total::default());
    };
    let s = store.hour_sums(&series, i64::MIN, i64::MAX)?;
    Ok(Total {
        wh: s.energy_wh,
        covered_ms: s.covered_ms,
        since_ms: s.first_hour_ms,
        approximate_hours: s.approximate_hours,
    })
}

/// From when a series' raw samples are all there, UTC ms: from its oldest raw chunk when
/// older ones were pruned (hour rollups exist before it), else from the beginning.
pub(super) fn raw_complete_from(store: &Store, series: &Series) -> Result<Option<i64>, StoreError> {
    let Some(raw_from) = store.raw_from_ms(series)? else {
        return Ok(None);
    };
    let before = store.hour_sums(series, i64::MIN, floor_to(raw_from, HOUR_MS))?;
    Ok(Some(if before.hours == 0 {
        i64::MIN
    } else {
        raw_from
    }))
}

/// A stretch shorter than an hour: the hour's rollup when the stretch starts the hour and
/// ends after the newest sample (the rollup then holds it all), else raw samples where they
/// are kept, else whole-minute rollups.
fn ragged(
    store: &Store,
    series: &Series,
    start: i64,
    end: i64,
) -> Result<Option<Bucket>, StoreError> {
    if end <= start {
        return Ok(None);
    }
    // The series' own rule: a pair that reaches into the stretch starts at most this
    // long before it.
    let rule = series.rule();
    let max_pair = rule.max_ms;
    let hour = floor_to(start, HOUR_MS);
    let raw_from = raw_complete_from(store, series)?;
    let open_hour = start == hour && store.newest_ms(series)?.is_some_and(|t| t < end);
    let (wh, covered, approximate) = if open_hour {
        // The hour's data ends before `end`: its rollup holds all of it.
        match store.hour_rollup(series, hour)? {
            Some(r) => (
                r.energy_wh.unwrap_or(0.0),
                r.covered_ms.unwrap_or(0),
                r.approximate,
            ),
            None => (0.0, 0, false),
        }
    } else if raw_from.is_some_and(|f| f <= start.saturating_sub(max_pair)) {
        let span = (start.saturating_sub(max_pair), end.saturating_add(max_pair));
        let points = points_for(store, series, rule, span, end)?;
        let gaps = store.gap_spans(series, span)?;
        let (wh, ms) = integrate::series_wh(&points, start, end, rule, &gaps);
        (wh, ms, false)
    } else {
        // Raw samples expired: whole minutes only.
        let (m0, m1) = (ceil_to(start, MINUTE_MS), floor_to(end, MINUTE_MS));
        let (mut wh, mut ms, mut approx) = (0.0, 0, m0 != start || m1 != end);
        for r in store.minute_rollups(series, m0, m1.max(m0))? {
            wh += r.energy_wh.unwrap_or(0.0);
            if let Some(c) = r.covered_ms {
                ms += c;
            } else {
                approx = true;
                if r.mean > 0.0 {
                    ms += ((r.energy_wh.unwrap_or(0.0) * MS_PER_HOUR / r.mean) as i64)
                        .clamp(0, MINUTE_MS);
                }
            }
        }
        (wh, ms, approx)
    };
    Ok((wh != 0.0 || covered > 0).then_some(Bucket {
        start_ms: start,
        end_ms: end,
        wh,
        covered_ms: covered,
        approximate,
        counted: false,
    }))
}

/// The raw samples in `[lo, hi)` that a stretch ending at `end` integrates under `rule`: for
/// held readings also the first sample after them, however much later (a held reading
/// stands until the next).
pub(super) fn points_for(
    store: &Store,
    series: &Series,
    rule: integrate::Rule,
    (lo, hi): (i64, i64),
    end: i64,
) -> Result<Vec<(i64, f64)>, StoreError> {
    let mut points = store.raw_points(series, lo, hi)?;
    if rule.readings == integrate::Readings::Hold
        && let Some(&(last, _)) = points.last()
        && last < end
    {
        points.extend(store.first_point_after(series, last)?);
    }
    Ok(points)
}

/// Blocks' `(mean W, covered ms)` and the blocks' name (`hour`, `minute`).
pub type Blocks = (Vec<(f64, i64)>, &'static str);

/// The mean power of each block the window's covered time falls into, `(W, covered ms)`, and
/// the block's name: its hours when at least three are covered, else its minutes. For the
/// sampling uncertainty ([`super::interval`]).
pub fn blocks(store: &Store, e: &Energy) -> Result<Blocks, StoreError> {
    let hours: Vec<(f64, i64)> = e
        .buckets
        .iter()
        .filter(|b| b.covered_ms >= 5 * MINUTE_MS)
        .map(|b| (b.wh * MS_PER_HOUR / b.covered_ms as f64, b.covered_ms))
        .collect();
    if hours.len() >= 3 {
        return Ok((hours, "hour"));
    }
    let Some(series) = power_series(store, &e.host, &e.source)? else {
        return Ok((Vec::new(), "minute"));
    };
    // The whole minutes inside the window from their rollups; the window's ragged ends
    // clipped to it, by the same integral as its energy. A minute that reaches past either
    // end would bring in samples outside the window, so that a report of a closed window
    // would change as later samples are stored.
    let (from, to) = (e.from_ms, e.to_ms);
    let (m0, m1) = (ceil_to(from, MINUTE_MS), floor_to(to, MINUTE_MS));
    let ragged_end = |a: i64, b: i64| -> Result<Option<(f64, i64)>, StoreError> {
        if b <= a {
            return Ok(None);
        }
        let piece = energy(store, &e.host, &e.source, a, b)?;
        Ok(piece.mean_watts().map(|w| (w, piece.covered_ms)))
    };
    if m0 >= m1 {
        // No whole minute: the window's part before and after the one boundary in it.
        let cut = m0.min(to);
        let parts = [ragged_end(from, cut)?, ragged_end(cut, to)?];
        return Ok((parts.into_iter().flatten().collect(), "minute"));
    }
    let mut minutes: Vec<(f64, i64)> = ragged_end(from, m0)?.into_iter().collect();
    minutes.extend(
        store
            .minute_rollups(&series, m0, m1)?
            .into_iter()
            .filter_map(|r| {
                let ms = r.covered_ms.filter(|c| *c > 0)?;
                Some((r.energy_wh? * MS_PER_HOUR / ms as f64, ms))
            }),
    );
    minutes.extend(ragged_end(m1, to)?);
    Ok((minutes, "minute"))
}
