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

use serde::Serialize;
use wattson_collectors::Metric;
use wattson_collectors::SourceId;

use super::LedgerError;
use super::PrimaryPower;
use crate::analysis::cost::{CostBreakdown, cost_of_energy};
use crate::store::{
    HOUR_MS, MINUTE_MS, Series, SeriesFilter, Store, StoreError, ceil_to, floor_to, integrate,
};
use crate::tariff::Tariff;

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
}

/// A recorded gap of the source: a period it produced nothing (meter unplugged, daemon
/// stopped).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GapSpan {
    /// UTC ms.
    pub start_ms: i64,
    pub end_ms: i64,
    pub reason: String,
}

/// The energy of one source over `[from_ms, to_ms)`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Energy {
    pub host: String,
    /// `meter:wall`, a plug, a fleet host's meter.
    pub source: SourceId,
    pub from_ms: i64,
    pub to_ms: i64,
    /// Wh.
    pub wh: f64,
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
            covered_ms: 0,
            spacing_ms: None,
            buckets: Vec::new(),
            gaps: Vec::new(),
            approximate_hours: 0,
        }
    }

    /// kWh.
    pub fn kwh(&self) -> f64 {
        self.wh / 1000.0
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

    /// The buckets as `(start, end, Wh)` with each whole stored hour split into its
    /// minutes (their stored energy, scaled to sum to the hour's), so that prices in slots
    /// shorter than an hour (Agile half-hours, a live price that changed mid-hour) price
    /// the energy that was used in them, not an even share of the hour. A stretch shorter
    /// than an hour (a window's ragged end: today so far, the open hour) is cut at its
    /// minutes from its raw samples. Hours without minute rollups, and stretches whose raw
    /// samples have expired, stay whole.
    pub fn minute_buckets(&self, store: &Store) -> Result<Vec<(i64, i64, f64)>, StoreError> {
        self.minute_buckets_where(store, |_, _| true)
    }

    /// [`Energy::minute_buckets`], splitting only the stretches `(start, end)` for which
    /// `split` says so (those in which a price or the local date may change, see
    /// [`Tariff::may_change_within`]); the others stay whole, and their minutes are not read.
    /// This is the one way energy meets a price: every surface prices these pieces with
    /// [`cost_of_energy`].
    pub fn minute_buckets_where(
        &self,
        store: &Store,
        split: impl Fn(i64, i64) -> bool,
    ) -> Result<Vec<(i64, i64, f64)>, StoreError> {
        let whole = |b: &Bucket| b.end_ms - b.start_ms == HOUR_MS && b.start_ms % HOUR_MS == 0;
        let hours: Vec<i64> = self
            .buckets
            .iter()
            .filter(|b| whole(b) && b.wh > 0.0 && split(b.start_ms, b.end_ms))
            .map(|b| b.start_ms)
            .collect();
        let ragged_split = self
            .buckets
            .iter()
            .any(|b| !whole(b) && b.wh > 0.0 && split(b.start_ms, b.end_ms));
        if hours.is_empty() && !ragged_split {
            return Ok(self.priced_buckets());
        }
        let Some(series) = power_series(store, &self.host, &self.source)? else {
            return Ok(self.priced_buckets());
        };
        let mut minutes: std::collections::HashMap<i64, Vec<(i64, f64)>> =
            std::collections::HashMap::new();
        // One read per run of consecutive hours.
        let mut i = 0;
        while i < hours.len() {
            let mut j = i + 1;
            while j < hours.len() && hours[j] == hours[j - 1] + HOUR_MS {
                j += 1;
            }
            for r in store.minute_rollups(&series, hours[i], hours[j - 1] + HOUR_MS)? {
                if let Some(wh) = r.energy_wh.filter(|w| w.is_finite()) {
                    minutes
                        .entry(floor_to(r.bucket_ms, HOUR_MS))
                        .or_default()
                        .push((r.bucket_ms, wh));
                }
            }
            i = j;
        }
        let mut out = Vec::with_capacity(self.buckets.len());
        for b in &self.buckets {
            let parts = match minutes.get(&b.start_ms).filter(|_| whole(b)) {
                Some(p) => Some(p.clone()),
                // A stretch shorter than an hour (today so far, the hour now open) is cut
                // at its minutes from its raw samples, so that energy used in the last few
                // minutes is not priced as if spread since the stretch began.
                None if !whole(b) && b.wh > 0.0 && split(b.start_ms, b.end_ms) => {
                    raw_minutes(store, &series, b.start_ms, b.end_ms)?
                }
                None => None,
            };
            let sum: f64 = parts.as_ref().map_or(0.0, |p| p.iter().map(|m| m.1).sum());
            match parts {
                // Scaled to sum to the bucket's energy, so every cut gives the same kWh.
                Some(p) if sum > 0.0 && b.wh > 0.0 => out.extend(p.iter().map(|&(t, wh)| {
                    (
                        t.max(b.start_ms),
                        (t + MINUTE_MS).min(b.end_ms),
                        wh * b.wh / sum,
                    )
                })),
                _ => out.push((b.start_ms, b.end_ms, b.wh)),
            }
        }
        Ok(out)
    }

    /// The energy priced by the tariff, each bucket at the prices of its own time, and the
    /// hours in which a price may change minute by minute (their stored minutes).
    pub fn cost_in(&self, store: &Store, tariff: &Tariff) -> Result<CostBreakdown, LedgerError> {
        let buckets =
            self.minute_buckets_where(store, |start, end| tariff.may_change_within(start, end))?;
        Ok(cost_of_energy(tariff, &buckets)?)
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
        .map(|g| GapSpan {
            start_ms: g.start_ms.max(from_ms),
            end_ms: g.end_ms.min(to_ms),
            reason: g.reason,
        })
        .collect();
    Ok(out)
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
fn raw_complete_from(store: &Store, series: &Series) -> Result<Option<i64>, StoreError> {
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
        let gaps: Vec<(i64, i64)> = store
            .gaps(
                &series.host,
                start.saturating_sub(max_pair),
                end.saturating_add(max_pair),
            )?
            .into_iter()
            .filter(|g| g.source == series.source)
            .map(|g| (g.start_ms, g.end_ms))
            .collect();
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
    }))
}

/// The energy of `[start, end)` in each minute it touches, `(minute start, Wh)`, from raw
/// samples read once and integrated by the same rule as [`ragged`]'s; `None` where raw
/// samples of the stretch have expired (it is then priced whole).
fn raw_minutes(
    store: &Store,
    series: &Series,
    start: i64,
    end: i64,
) -> Result<Option<Vec<(i64, f64)>>, StoreError> {
    let rule = series.rule();
    let max_pair = rule.max_ms;
    let (lo, hi) = (start.saturating_sub(max_pair), end.saturating_add(max_pair));
    if raw_complete_from(store, series)?.is_none_or(|f| f > lo) {
        return Ok(None);
    }
    let points = points_for(store, series, rule, (lo, hi), end)?;
    let gaps: Vec<(i64, i64)> = store
        .gaps(&series.host, lo, hi)?
        .into_iter()
        .filter(|g| g.source == series.source)
        .map(|g| (g.start_ms, g.end_ms))
        .collect();
    let mut out = Vec::new();
    let mut m = floor_to(start, MINUTE_MS);
    while m < end {
        let (wh, _) =
            integrate::series_wh(&points, m.max(start), (m + MINUTE_MS).min(end), rule, &gaps);
        if wh != 0.0 {
            out.push((m, wh));
        }
        m += MINUTE_MS;
    }
    Ok(Some(out))
}

/// The raw samples in `[lo, hi)` that a stretch ending at `end` integrates under `rule`: for
/// held readings also the first sample after them, however much later (a held reading
/// stands until the next).
fn points_for(
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
