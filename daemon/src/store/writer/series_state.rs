//! Each series as the writer holds it between flushes: its open chunk, its newest sample,
//! its spacing, how its readings stand and its open hour; found by (host, source, channel,
//! metric) without allocating, and loaded from the store on the series' first sample (with
//! the gaps recorded before this writer started that its next pair may straddle).

use std::collections::HashMap;
use wattson_collectors::SourceId;

use wattson_collectors::{Metric, Sample};

use super::super::integrate::{Readings, Rule};
use super::super::rollup::{HourAcc, Spacing};
use super::super::{Series, StoreError, dequantise, is_detail, resolution, rollup_kind};
use super::Writer;
use super::chunks::OpenChunk;

/// One series' state in the writer.
pub(super) struct SeriesState {
    pub(super) series: Series,
    pub(super) scale: f64,
    pub(super) hourly: bool,
    pub(super) minutes: bool,
    /// Detail ([`is_detail`]): closed chunks go to `raw_detail_chunk`.
    pub(super) detail: bool,
    pub(super) open: Option<OpenChunk>,
    /// The newest timestamp stored for the series (UTC ms); later samples must pass it.
    pub(super) newest_ms: Option<i64>,
    /// The newest sample, the start of the next pair.
    pub(super) prev: Option<(i64, f64)>,
    pub(super) spacing: Spacing,
    /// How its readings stand, and for how long at most (ms), as stored with the series.
    pub(super) readings: Readings,
    pub(super) max_hold_ms: Option<i64>,
    pub(super) hour: Option<HourAcc>,
}

impl SeriesState {
    /// The rule its next pair is integrated by: `sampled` by its spacing as judged now,
    /// `hold` and `interval_mean` by their stored limit.
    pub(super) fn rule(&self) -> Rule {
        match (self.readings, self.max_hold_ms) {
            (Readings::Hold | Readings::Mean, Some(_)) => {
                Rule::of(self.readings, self.max_hold_ms, None)
            }
            _ => Rule {
                readings: Readings::Sampled,
                max_ms: self.spacing.max_pair_ms(),
            },
        }
    }

    /// Whether a sample at `ts` is known to be stored: the newest, or one in the open
    /// chunk (older closed chunks are not searched).
    pub(super) fn holds(&self, ts: i64) -> bool {
        self.newest_ms == Some(ts)
            || self
                .open
                .as_ref()
                .is_some_and(|o| o.ts.binary_search(&ts).is_ok())
    }
}

/// Series index by host, source, channel and metric, looked up without allocating.
pub(super) type SeriesIndex =
    HashMap<String, HashMap<SourceId, HashMap<String, HashMap<Metric, usize>>>>;

impl Writer {
    /// The index in `states` of `sample`'s series on `host`, its state loaded from the store
    /// on its first sample.
    pub(super) fn state_index(&mut self, host: &str, sample: &Sample) -> Result<usize, StoreError> {
        if let Some(&i) = self
            .index
            .get(host)
            .and_then(|m| m.get(&sample.source))
            .and_then(|m| m.get(&sample.channel))
            .and_then(|m| m.get(&sample.metric))
        {
            return Ok(i);
        }
        let mut series =
            self.store
                .ensure_series(host, &sample.source, sample.metric, &sample.channel)?;
        let open = self.load_open(&series)?;
        let scale = resolution(series.unit);
        let newest = match open.as_ref().and_then(|o| o.ts.last().zip(o.q.last())) {
            Some((&ts, &q)) => Some((ts, dequantise(q, scale))),
            None => self.newest_closed(series.id)?,
        };
        let (hourly, minutes) = rollup_kind(series.metric, &series.channel);
        let declared = self
            .declared
            .get(&(host.to_owned(), sample.source.clone()))
            .copied()
            .filter(|_| minutes);
        if let Some((readings, max_hold_ms)) = declared
            && (readings, max_hold_ms) != (series.readings, series.max_hold_ms)
        {
            self.store.set_readings(series.id, readings, max_hold_ms)?;
            series.readings = readings;
            series.max_hold_ms = max_hold_ms;
        }
        if minutes && let Some((ts, _)) = newest {
            // Gaps recorded before this writer started that the next pair may straddle.
            let key = (host.to_owned(), sample.source.clone());
            if !self.gaps.contains_key(&key) {
                let known: Vec<(i64, i64)> = self
                    .store
                    .gaps(host, ts, i64::MAX)?
                    .into_iter()
                    .filter(|g| g.source == sample.source)
                    .map(|g| (g.start_ms, g.end_ms))
                    .collect();
                self.gaps.insert(key, known);
            }
        }
        // Configured intervals are this host's; a fleet collector's other hosts state theirs
        // or have it learned.
        let configured = (host == self.options.host)
            .then(|| self.options.spacing_ms.get(&series.source).copied())
            .flatten();
        let spacing = Spacing {
            fixed: configured,
            recent: series.spacing_ms.into_iter().collect(),
            stored: series.spacing_ms,
        };
        let (readings, max_hold_ms) = (series.readings, series.max_hold_ms);
        let i = self.states.len();
        self.states.push(SeriesState {
            scale,
            detail: is_detail(series.metric, &series.channel),
            series,
            hourly,
            minutes,
            open,
            newest_ms: newest.map(|n| n.0),
            prev: newest,
            spacing,
            readings,
            max_hold_ms,
            hour: None,
        });
        self.index
            .entry(host.to_owned())
            .or_default()
            .entry(sample.source.clone())
            .or_default()
            .entry(sample.channel.clone())
            .or_default()
            .insert(sample.metric, i);
        Ok(i)
    }
}
