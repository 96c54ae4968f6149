//! The daemon's live view: latest readings and running means since the last publish, shared
//! between the sampler (writer) and the publishers (readers).

use std::collections::BTreeMap;
use std::sync::Mutex;

use wattson_collectors::{Metric, Sample};

/// Latest value per (source, metric, channel) and accumulators for interval means.
#[derive(Debug, Default)]
pub struct LiveState {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// Device health counters by device id.
    counters: BTreeMap<String, wattson_collectors::DeviceCounters>,
    latest: BTreeMap<(String, Metric, String), (i64, f64)>,
    /// Sum and count of each series since the last `take_means`.
    sums: BTreeMap<(String, Metric, String), (f64, u32)>,
}

/// A reading as seen by publishers.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveReading {
    pub source: String,
    pub metric: Metric,
    pub channel: String,
    pub ts_ms: i64,
    pub value: f64,
}

impl LiveState {
    /// Record samples (called by the sampler only).
    pub fn observe(&self, samples: &[Sample]) {
        let Ok(mut inner) = self.inner.lock() else {
            return;
        };
        for s in samples {
            // Per-core detail is not published live; keep the state small.
            if s.channel.starts_with("cpu") {
                continue;
            }
            let key = (s.source.clone(), s.metric, s.channel.clone());
            let acc = inner.sums.entry(key.clone()).or_insert((0.0, 0));
            acc.0 += s.value;
            acc.1 += 1;
            inner.latest.insert(key, (s.ts_ms, s.value));
        }
    }

    /// Record a source's device counters (called by the sampler only).
    pub fn set_counters(&self, counters: Vec<wattson_collectors::DeviceCounters>) {
        let Ok(mut inner) = self.inner.lock() else {
            return;
        };
        for c in counters {
            inner.counters.insert(c.id.clone(), c);
        }
    }

    /// Device health counters, by id.
    pub fn counters(&self) -> Vec<wattson_collectors::DeviceCounters> {
        self.inner
            .lock()
            .map(|i| i.counters.values().cloned().collect())
            .unwrap_or_default()
    }

    /// The latest reading of every series.
    pub fn latest(&self) -> Vec<LiveReading> {
        let Ok(inner) = self.inner.lock() else {
            return Vec::new();
        };
        inner
            .latest
            .iter()
            .map(|((source, metric, channel), (ts, v))| LiveReading {
                source: source.clone(),
                metric: *metric,
                channel: channel.clone(),
                ts_ms: *ts,
                value: *v,
            })
            .collect()
    }

    /// Mean of each series since the previous call, then reset the accumulators.
    pub fn take_means(&self) -> Vec<LiveReading> {
        let Ok(mut inner) = self.inner.lock() else {
            return Vec::new();
        };
        let sums = std::mem::take(&mut inner.sums);
        sums.into_iter()
            .filter(|(_, (_, n))| *n > 0)
            .map(|(key, (sum, n))| {
                let ts = inner.latest.get(&key).map_or(0, |(ts, _)| *ts);
                LiveReading {
                    source: key.0,
                    metric: key.1,
                    channel: key.2,
                    ts_ms: ts,
                    value: sum / f64::from(n),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn means_cover_the_interval_not_the_last_sample() {
        let live = LiveState::default();
        live.observe(&[Sample::new(1, "meter:wall", Metric::Power, "", 10.0)]);
        live.observe(&[Sample::new(2, "meter:wall", Metric::Power, "", 30.0)]);
        live.observe(&[Sample::new(2, "cpu", Metric::CoreFrequency, "cpu0", 3000.0)]);
        let means = live.take_means();
        assert_eq!(means.len(), 1);
        assert_eq!(means[0].value, 20.0);
        assert_eq!(live.latest()[0].value, 30.0);
        assert!(live.take_means().is_empty());
    }
}
