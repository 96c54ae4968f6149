//! A host's stored history as aligned minute means: the wall meter's power and every
//! software-visible signal a model may read.

use std::collections::BTreeMap;

use wattson_collectors::{Metric, SourceId};

use super::model::Feature;
use crate::store::{MINUTE_MS, Series, Store, StoreError, floor_to};

/// Whether a stored series is a signal a model may read: component power the host sees
/// itself (RAPL, hwmon, GPUs, IPMI, a UPS), the CPU's busy share and mean frequency,
/// package C-state residency, GPU utilisation, each followed disk's spun-up share.
fn is_signal(s: &Series) -> bool {
    let error = wattson_collectors::source::channel::ESTIMATE_ERROR;
    match s.metric {
        Metric::Power => {
            matches!(
                s.source,
                SourceId::Rapl
                    | SourceId::Hwmon
                    | SourceId::Gpu
                    | SourceId::Ipmi
                    | SourceId::Ups(_)
            ) && s.channel != error
        }
        Metric::CpuBusy => s.channel == wattson_collectors::source::channel::ALL,
        Metric::CoreFrequency => s.channel == wattson_collectors::source::channel::MEAN,
        Metric::PackageResidency | Metric::GpuUtilisation | Metric::DiskSpunUp => true,
        _ => false,
    }
}

/// The signals `host` has stored, with their series.
pub fn signals(store: &Store, host: &str) -> Result<Vec<(Feature, Series)>, StoreError> {
    Ok(store
        .series()?
        .into_iter()
        .filter(|s| s.host == host && is_signal(s))
        .map(|s| (Feature::new(s.source.clone(), s.metric, &s.channel), s))
        .collect())
}

/// `host`'s series of `feature`, if stored.
pub fn series_of(
    store: &Store,
    host: &str,
    feature: &Feature,
) -> Result<Option<Series>, StoreError> {
    Ok(store.series()?.into_iter().find(|s| {
        s.host == host
            && s.source == feature.source
            && s.metric == feature.metric
            && s.channel == feature.channel
    }))
}

/// `host`'s wall meters' power series (`meter:*`, the whole reading), the one with the
/// most samples in `[from_ms, to_ms)` first; `wall` names one (`meter:wall`).
pub fn wall_series(
    store: &Store,
    host: &str,
    wall: Option<&str>,
) -> Result<Vec<Series>, StoreError> {
    Ok(store
        .series()?
        .into_iter()
        .filter(|s| {
            s.host == host
                && s.metric == Metric::Power
                && s.channel.is_empty()
                && s.source.is_meter()
                && wall.is_none_or(|w| s.source.is_text(w))
        })
        .collect())
}

/// The mean of each minute of `series` in `[from_ms, to_ms)` that holds a sample, by the
/// minute's start.
pub fn minute_means(
    store: &Store,
    series: &Series,
    from_ms: i64,
    to_ms: i64,
) -> Result<BTreeMap<i64, f64>, StoreError> {
    let mut sums: BTreeMap<i64, (f64, u32)> = BTreeMap::new();
    // A day at a time: the raw samples of a long window are not all held at once.
    let mut t = from_ms;
    while t < to_ms {
        let end = t.saturating_add(24 * 60 * MINUTE_MS).min(to_ms);
        for (ts, v) in store.raw_points(series, t, end)? {
            if v.is_finite() {
                let e = sums.entry(floor_to(ts, MINUTE_MS)).or_insert((0.0, 0));
                e.0 += v;
                e.1 += 1;
            }
        }
        t = end;
    }
    Ok(sums
        .into_iter()
        .map(|(m, (sum, n))| (m, sum / f64::from(n)))
        .collect())
}

/// Minutes in which every column has a value: their starts, the wall (when read) and each
/// feature's value.
#[derive(Debug, Clone, Default)]
pub struct Table {
    pub minutes: Vec<i64>,
    pub wall: Vec<f64>,
    /// `columns[j][i]`: feature `j` in minute `i`.
    pub columns: Vec<Vec<f64>>,
}

impl Table {
    /// The minutes of `wall` (if any) in which every one of `features` has a mean.
    pub fn aligned(wall: Option<&BTreeMap<i64, f64>>, features: &[BTreeMap<i64, f64>]) -> Table {
        let mut t = Table {
            columns: vec![Vec::new(); features.len()],
            ..Table::default()
        };
        let Some(first) = features.first() else {
            return t;
        };
        for &m in first.keys() {
            let w = match wall {
                Some(w) => match w.get(&m) {
                    Some(&v) => Some(v),
                    None => continue,
                },
                None => None,
            };
            let row: Option<Vec<f64>> = features.iter().map(|f| f.get(&m).copied()).collect();
            let Some(row) = row else { continue };
            t.minutes.push(m);
            if let Some(w) = w {
                t.wall.push(w);
            }
            for (c, v) in t.columns.iter_mut().zip(row) {
                c.push(v);
            }
        }
        t
    }

    pub fn len(&self) -> usize {
        self.minutes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.minutes.is_empty()
    }

    /// Minute `i`'s feature values.
    pub fn row(&self, i: usize) -> Vec<f64> {
        self.columns.iter().map(|c| c[i]).collect()
    }

    /// The columns of `keep` (indices into `columns`), same minutes.
    #[must_use]
    pub fn select(&self, keep: &[usize]) -> Table {
        Table {
            minutes: self.minutes.clone(),
            wall: self.wall.clone(),
            columns: keep.iter().map(|&j| self.columns[j].clone()).collect(),
        }
    }

    /// The minutes `range` of this table.
    #[must_use]
    pub fn slice(&self, range: std::ops::Range<usize>) -> Table {
        Table {
            minutes: self.minutes[range.clone()].to_vec(),
            wall: if self.wall.is_empty() {
                Vec::new()
            } else {
                self.wall[range.clone()].to_vec()
            },
            columns: self
                .columns
                .iter()
                .map(|c| c[range.clone()].to_vec())
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_minutes_every_column_holds_are_kept() {
        let wall: BTreeMap<i64, f64> = [(0, 10.0), (60_000, 11.0), (120_000, 12.0)].into();
        let a: BTreeMap<i64, f64> = [(0, 1.0), (60_000, 2.0), (180_000, 3.0)].into();
        let b: BTreeMap<i64, f64> = [(0, 5.0), (120_000, 6.0), (60_000, 7.0)].into();
        let t = Table::aligned(Some(&wall), &[a, b]);
        assert_eq!(t.minutes, vec![0, 60_000]);
        assert_eq!(t.wall, vec![10.0, 11.0]);
        assert_eq!(t.columns, vec![vec![1.0, 2.0], vec![5.0, 7.0]]);
        assert_eq!(t.slice(1..2).row(0), vec![2.0, 7.0]);
    }
}
