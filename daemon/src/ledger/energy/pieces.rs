//! How energy meets a price: a window's buckets cut into the pieces each price holds over
//! (whole hours by their stored minutes, shorter stretches by their raw samples' minutes,
//! where a price may change within them), priced by [`cost_of_energy`], the one function
//! every surface prices with.

use super::{Bucket, Energy, points_for, power_series, raw_complete_from};
use crate::ledger::LedgerError;
use crate::ledger::price::{CostBreakdown, cost_of_energy};
use crate::store::{HOUR_MS, MINUTE_MS, Series, Store, StoreError, floor_to, integrate};
use crate::tariff::Tariff;

impl Energy {
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
            .any(|b| !whole(b) && !b.counted && b.wh > 0.0 && split(b.start_ms, b.end_ms));
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
                None if !whole(b) && !b.counted && b.wh > 0.0 && split(b.start_ms, b.end_ms) => {
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
    let gaps: Vec<(i64, i64)> = store.gap_spans(series, (lo, hi))?;
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
