//! Covered time for power rollups written before it was stored (schema 0005).
//!
//! Those rollups integrated only pairs at most 3x the smallest configured interval apart and
//! left readers to derive covered time from sample counts, which was wrong for every meter
//! not sampled at 1 s. At the first open by a writer, each such hour is recomputed from its
//! raw samples where they are still kept (energy and covered time per minute and per hour,
//! pairs judged by the series' spacing), and otherwise estimated from what the row holds and
//! marked `approximate`, which reports say:
//! - covered time = energy / mean power when both are positive (exact for a constant load),
//!   else samples x the series' spacing, at most the hour;
//! - energy = the stored energy, or mean power x covered time where none was integrated.
//!
//! Units: ms, W, Wh. Runs in one transaction; a second run finds nothing to do.

use std::collections::BTreeMap;

use super::{
    HOUR_MS, HourRollup, MINUTE_MS, MinuteRollup, Series, Store, StoreError, StoreOptions,
    floor_to, integrate,
};

/// Recomputes or estimates every power hour rollup without covered time.
pub(super) fn covered_time(store: &Store, options: &StoreOptions) -> Result<(), StoreError> {
    let todo: Vec<(i64, i64)> = store
        .conn
        .prepare(
            "SELECT r.series_id, r.hour_ms FROM rollup_hour r JOIN series s ON s.id = r.series_id
             WHERE s.minute_rollup = 1 AND r.covered_ms IS NULL ORDER BY r.series_id, r.hour_ms",
        )
        .and_then(|mut s| {
            s.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
                .and_then(Iterator::collect::<Result<Vec<_>, _>>)
        })
        .map_err(|e| store.sql(e))?;
    if todo.is_empty() {
        return Ok(());
    }
    let mut by_series: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
    for (id, hour) in todo {
        by_series.entry(id).or_default().push(hour);
    }
    let tx = store
        .conn
        .unchecked_transaction()
        .map_err(|e| store.sql(e))?;
    let (mut exact, mut estimated) = (0usize, 0usize);
    for series in store.series()? {
        let Some(hours) = by_series.get(&series.id) else {
            continue;
        };
        let raw_from = store.raw_from_ms(&series)?;
        let spacing = spacing_of(store, options, &series)?;
        if series.spacing_ms.is_none() {
            store.set_spacing(series.id, spacing)?;
        }
        for &hour_ms in hours {
            let Some(stored) = store.hour_rollup(&series, hour_ms)? else {
                continue;
            };
            let row = if raw_from.is_some_and(|f| f <= hour_ms) {
                exact += 1;
                from_raw(store, &series, stored, spacing)?
            } else {
                estimated += 1;
                estimate(stored, spacing)
            };
            store.put_hour_rollup(&series, &row)?;
        }
    }
    tx.commit().map_err(|e| store.sql(e))?;
    tracing::info!(
        "{}: covered time of {exact} hour rollups recomputed from raw samples, {estimated} \
         older ones estimated (marked approximate)",
        store.path.display()
    );
    Ok(())
}

/// The series' spacing: configured for its source, else the median interval of its raw
/// samples, else what is stored, else 1 s (the only interval the old rollups were right for).
fn spacing_of(store: &Store, options: &StoreOptions, s: &Series) -> Result<i64, StoreError> {
    if let Some(ms) = options.spacing_ms.get(&s.source) {
        return Ok(*ms);
    }
    if let Some(ms) = s.spacing_ms {
        return Ok(ms);
    }
    let Some(from) = store.raw_from_ms(s)? else {
        return Ok(1000);
    };
    let points = store.raw_points(s, from, from.saturating_add(6 * HOUR_MS))?;
    let mut d: Vec<i64> = points.windows(2).map(|w| w[1].0 - w[0].0).collect();
    d.sort_unstable();
    Ok(d.get(d.len() / 2)
        .copied()
        .filter(|x| *x > 0)
        .unwrap_or(1000))
}

/// The hour's energy and covered time, per minute and in all, from raw samples.
fn from_raw(
    store: &Store,
    series: &Series,
    mut h: HourRollup,
    spacing: i64,
) -> Result<HourRollup, StoreError> {
    let rule = integrate::Rule::of(series.readings, series.max_hold_ms, Some(spacing));
    let max_pair = rule.max_ms;
    let (from, to) = (h.hour_ms, h.hour_ms + HOUR_MS);
    let points = store.raw_points(series, from - max_pair, to + max_pair)?;
    let gaps: Vec<(i64, i64)> = store.gap_spans(series, (from - max_pair, to + max_pair))?;
    let mut minutes: BTreeMap<u8, MinuteRollup> = h
        .minutes
        .drain(..)
        .map(|m| {
            (
                m.minute,
                MinuteRollup {
                    energy_wh: 0.0,
                    covered_ms: Some(0),
                    ..m
                },
            )
        })
        .collect();
    let (mut wh, mut ms) = (0.0, 0);
    for w in points.windows(2) {
        if w[1].0 <= w[0].0 {
            continue;
        }
        let Some(piece) = rule.piece(w[0], w[1], &gaps) else {
            continue;
        };
        let mut m = floor_to(piece.t0.max(from), MINUTE_MS);
        while m < piece.t1.min(to) {
            let e = piece.wh_in(m, m + MINUTE_MS);
            let c = piece.ms_in(m, m + MINUTE_MS);
            let minute = ((m - from) / MINUTE_MS) as u8;
            let entry = minutes.entry(minute).or_insert_with(|| MinuteRollup {
                minute,
                covered_ms: Some(0),
                ..MinuteRollup::default()
            });
            entry.energy_wh += e;
            entry.covered_ms = Some(entry.covered_ms.unwrap_or(0) + c);
            wh += e;
            ms += c;
            m += MINUTE_MS;
        }
    }
    h.minutes = minutes.into_values().collect();
    h.energy_wh = Some(wh);
    h.covered_ms = Some(ms.min(HOUR_MS));
    h.approximate = false;
    Ok(h)
}

/// The hour's covered time and energy estimated from the row itself (see the module
/// documentation).
fn estimate(mut h: HourRollup, spacing: i64) -> HourRollup {
    let energy = h.energy_wh.unwrap_or(0.0);
    let covered = if energy > 0.0 && h.mean > 0.0 {
        (energy * 3_600_000.0 / h.mean).round() as i64
    } else {
        (h.n as i64).saturating_mul(spacing)
    }
    .clamp(0, HOUR_MS);
    h.covered_ms = Some(covered);
    if energy <= 0.0 && h.n > 0 {
        h.energy_wh = Some(h.mean * covered as f64 / 3_600_000.0);
    }
    h.approximate = true;
    h
}
