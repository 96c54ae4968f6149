//! Reading a state payload back (the fleet collector's side): the payload checked, its
//! samples, and the sources whose readings it says are held.

use serde_json::Value;
use wattson_collectors::plausibility::{Limits, Rejection};
use wattson_collectors::{Metric, Sample, SourceId};

use super::{MAX_STATE_BYTES, SeriesEntry, StatePayload, StateSnapshot};
use crate::store::integrate::max_pair_ms;

/// Why a state payload was dropped by the collector.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum StateParseError {
    #[error("payload of {0} bytes exceeds {MAX_STATE_BYTES}")]
    TooLarge(usize),
    #[error("not a state payload: {0}")]
    Json(String),
    #[error("missing or invalid `ts` (UTC ms)")]
    Ts,
    #[error("`series` entry {0} is not [source, metric, channel, number]")]
    Series(usize),
}

/// Read a state payload. Fields a newer publisher adds are ignored; anything malformed is
/// an error.
pub fn parse(payload: &[u8]) -> Result<(i64, Vec<Sample>), StateParseError> {
    let p = parse_payload(payload)?;
    Ok((p.ts, p.samples()))
}

/// [`parse`], keeping the typed payload.
pub fn parse_payload(payload: &[u8]) -> Result<StatePayload, StateParseError> {
    if payload.len() > MAX_STATE_BYTES {
        return Err(StateParseError::TooLarge(payload.len()));
    }
    let v: Value =
        serde_json::from_slice(payload).map_err(|e| StateParseError::Json(e.to_string()))?;
    v.get("ts")
        .and_then(Value::as_i64)
        .filter(|t| *t > 0)
        .ok_or(StateParseError::Ts)?;
    if let Some(series) = v.get("series") {
        let series = series.as_array().ok_or(StateParseError::Series(0))?;
        for (i, e) in series.iter().enumerate() {
            let ok = e.as_array().filter(|a| a.len() == 4).is_some_and(|a| {
                a[0].as_str().is_some_and(|s| !s.is_empty())
                    && a[1].is_string()
                    && a[2].is_string()
                    && a[3].as_f64().is_some_and(f64::is_finite)
            });
            if !ok {
                return Err(StateParseError::Series(i));
            }
        }
    }
    serde_json::from_value(v).map_err(|e| StateParseError::Json(e.to_string()))
}

/// The samples kept, and `(source, why)` of those rejected.
pub type CheckedSamples = (Vec<Sample>, Vec<(SourceId, Rejection)>);

impl StatePayload {
    /// The series as samples stamped with `ts`. Metrics this version does not know are
    /// skipped (a newer publisher).
    pub fn samples(&self) -> Vec<Sample> {
        self.series
            .iter()
            .filter_map(|SeriesEntry(source, metric, channel, value)| {
                Metric::parse(metric)
                    .map(|m| Sample::new(self.ts, source.clone(), m, channel.as_str(), *value))
            })
            .collect()
    }

    /// The samples that pass the plausibility rules, and the rejections of those that do
    /// not; `Err` when the message's own timestamp is implausible (every sample is then
    /// dropped: a host whose clock says 9999 must not shut out its later states).
    pub fn checked_samples(
        &self,
        received_ms: i64,
        limits: &Limits,
    ) -> Result<CheckedSamples, Rejection> {
        limits.check_timestamp(self.ts, received_ms)?;
        let mut kept = Vec::new();
        let mut rejected = Vec::new();
        for s in self.samples() {
            match limits.check(s.metric, s.value) {
                Ok(()) => kept.push(s),
                Err(r) => rejected.push((s.source, r)),
            }
        }
        Ok((kept, rejected))
    }
}

impl StatePayload {
    /// The sources whose readings the host holds, each with the longest time one of its
    /// means stands for, ms: its `max_hold`, and at least what the publish interval allows
    /// a pair of states ([`max_pair_ms`]).
    pub fn held_means(&self) -> Vec<(SourceId, i64)> {
        let interval_ms = self
            .interval_s
            .map_or(1000, |s| (s * 1000.0).round() as i64);
        self.held
            .iter()
            .filter(|(_, s)| s.is_finite() && **s > 0.0)
            .map(|(source, s)| {
                let max_hold = (s * 1000.0).round() as i64;
                (
                    source.clone(),
                    max_hold.max(max_pair_ms(interval_ms.max(1))),
                )
            })
            .collect()
    }
}

/// `snapshot` saying which of its sources' readings are held, with their `max_hold` in ms
/// ([`crate::live::LiveState::held`]).
pub fn with_held(mut snapshot: StateSnapshot, held: &[(SourceId, i64)]) -> StateSnapshot {
    if held.is_empty() {
        return snapshot;
    }
    snapshot.payload.held = held
        .iter()
        .map(|(source, ms)| (source.clone(), *ms as f64 / 1000.0))
        .collect();
    if let (Some(obj), Ok(v)) = (
        snapshot.json.as_object_mut(),
        serde_json::to_value(&snapshot.payload.held),
    ) {
        obj.insert("held".to_owned(), v);
    }
    snapshot
}
