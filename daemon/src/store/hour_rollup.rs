//! Hour rollups as stored: one `rollup_hour` row per series and hour, with the power
//! series' minutes packed into it by [`super::chunk_codec`].

use rusqlite::{OptionalExtension, params};

use super::{
    HOUR_MS, MINUTE_MS, Series, Store, StoreError, chunk_codec, dequantise, quantise, resolution,
};

/// One hour of one series, as stored.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct HourRollup {
    /// Start of the hour, ms.
    pub hour_ms: i64,
    pub n: u64,
    pub mean: f64,
    pub min: f64,
    pub max: f64,
    /// Energy in the hour, Wh (power series only).
    pub energy_wh: Option<f64>,
    /// The ms of the hour `energy_wh` covers (power series only; `None` before it was
    /// stored).
    pub covered_ms: Option<i64>,
    /// True when energy and covered time were estimated (rollups from before covered time
    /// was stored, whose raw samples are gone).
    pub approximate: bool,
    /// Per-minute rollups (power series only), in minute order.
    pub minutes: Vec<MinuteRollup>,
}

/// One minute of a power series. Mean, min and max are quantised to the metric's
/// resolution, energy to 1 µWh (0.001 Wh in minutes stored before it was).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MinuteRollup {
    /// Minute of the hour, 0..60.
    pub minute: u8,
    pub n: u64,
    pub mean: f64,
    pub min: f64,
    pub max: f64,
    /// Wh.
    pub energy_wh: f64,
    /// The ms of the minute `energy_wh` covers (`None` in minutes stored before it was).
    pub covered_ms: Option<i64>,
}

impl Store {
    /// Writes (inserts or replaces) one hour rollup of series `series`.
    pub fn put_hour_rollup(&self, series: &Series, hour: &HourRollup) -> Result<(), StoreError> {
        let scale = resolution(series.unit);
        let minutes = (!hour.minutes.is_empty()).then(|| encode_minutes(&hour.minutes, scale));
        let (mean, min, max) = if hour.n == 0 {
            (0.0, 0.0, 0.0)
        } else {
            (hour.mean, hour.min, hour.max)
        };
        self.conn
            .prepare_cached(
                "INSERT INTO rollup_hour
                   (series_id, hour_ms, n, mean, min, max, energy_wh, minutes, covered_ms, approximate)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
                 ON CONFLICT (series_id, hour_ms) DO UPDATE SET n = excluded.n,
                   mean = excluded.mean, min = excluded.min, max = excluded.max,
                   energy_wh = excluded.energy_wh, minutes = excluded.minutes,
                   covered_ms = excluded.covered_ms, approximate = excluded.approximate",
            )
            .and_then(|mut s| {
                s.execute(params![
                    series.id,
                    hour.hour_ms,
                    hour.n as i64,
                    mean,
                    min,
                    max,
                    hour.energy_wh,
                    minutes,
                    hour.covered_ms.map(|c| c.clamp(0, HOUR_MS)),
                    hour.approximate
                ])
            })
            .map_err(|e| self.sql(e))?;
        Ok(())
    }

    /// The stored hour rollup of `series` at `hour_ms`, if any.
    pub fn hour_rollup(
        &self,
        series: &Series,
        hour_ms: i64,
    ) -> Result<Option<HourRollup>, StoreError> {
        let row = self
            .conn
            .prepare_cached(
                "SELECT n, mean, min, max, energy_wh, minutes, covered_ms, approximate
                 FROM rollup_hour WHERE series_id = ?1 AND hour_ms = ?2",
            )
            .and_then(|mut s| {
                s.query_row(params![series.id, hour_ms], |r| {
                    Ok((
                        (
                            r.get::<_, i64>(0)?,
                            r.get::<_, f64>(1)?,
                            r.get::<_, f64>(2)?,
                            r.get::<_, f64>(3)?,
                        ),
                        r.get::<_, Option<f64>>(4)?,
                        r.get::<_, Option<Vec<u8>>>(5)?,
                        r.get::<_, Option<i64>>(6)?,
                        r.get::<_, bool>(7)?,
                    ))
                })
                .optional()
            })
            .map_err(|e| self.sql(e))?;
        let Some(((n, mean, min, max), energy_wh, minutes, covered_ms, approximate)) = row else {
            return Ok(None);
        };
        let minutes = match minutes {
            Some(blob) => decode_minutes(&blob, resolution(series.unit)).map_err(|source| {
                StoreError::Corrupt {
                    path: self.path.clone(),
                    series_id: series.id,
                    start_ms: hour_ms,
                    source,
                }
            })?,
            None => Vec::new(),
        };
        Ok(Some(HourRollup {
            hour_ms,
            n: n.max(0) as u64,
            mean,
            min,
            max,
            energy_wh,
            covered_ms,
            approximate,
            minutes,
        }))
    }
}

const MINUTE_ORDERS: [chunk_codec::Order; 8] = [chunk_codec::Order::Delta; 8];

/// Packs minute rollups: minute index, n, mean, min, max (at `scale`), energy (mWh), covered
/// time (ms), and the energy's µWh beyond its mWh (so that a minute only partly covered
/// keeps its mean power: 1 mWh over 10 s is 0.36 W, 1 µWh is 0.36 mW).
pub(super) fn encode_minutes(minutes: &[MinuteRollup], scale: f64) -> Vec<u8> {
    let col = |f: &dyn Fn(&MinuteRollup) -> i64| minutes.iter().map(f).collect::<Vec<i64>>();
    let index = col(&|m| i64::from(m.minute));
    let n = col(&|m| m.n as i64);
    let mean = col(&|m| quantise(m.mean, scale));
    let min = col(&|m| quantise(m.min, scale));
    let max = col(&|m| quantise(m.max, scale));
    let energy = col(&|m| quantise(m.energy_wh, 1000.0));
    let micro = col(&|m| quantise(m.energy_wh, 1_000_000.0));
    let below_mwh: Vec<i64> = micro
        .iter()
        .zip(&energy)
        .map(|(u, m)| u.wrapping_sub(m.wrapping_mul(1000)))
        .collect();
    // -1: not known (a minute stored before covered time was).
    let covered = col(&|m| m.covered_ms.unwrap_or(-1));
    chunk_codec::encode(&[
        (&index, chunk_codec::Order::Delta),
        (&n, chunk_codec::Order::Delta),
        (&mean, chunk_codec::Order::Delta),
        (&min, chunk_codec::Order::Delta),
        (&max, chunk_codec::Order::Delta),
        (&energy, chunk_codec::Order::Delta),
        (&covered, chunk_codec::Order::Delta),
        (&below_mwh, chunk_codec::Order::Delta),
    ])
}

/// Unpacks minute rollups; blobs written before energy was stored to the µWh have seven
/// columns, before covered time was stored six.
pub(super) fn decode_minutes(
    blob: &[u8],
    scale: f64,
) -> Result<Vec<MinuteRollup>, chunk_codec::DecodeError> {
    let mut decoded = chunk_codec::decode(blob, &MINUTE_ORDERS);
    for older in [7, 6] {
        if decoded.is_err()
            && let Ok(c) = chunk_codec::decode(blob, &MINUTE_ORDERS[..older])
        {
            decoded = Ok(c);
        }
    }
    let cols = decoded?;
    let with_covered = cols.len() >= 7;
    let energy_wh = |i: usize| match cols.get(7) {
        Some(below_mwh) => dequantise(
            cols[5][i].wrapping_mul(1000).wrapping_add(below_mwh[i]),
            1_000_000.0,
        ),
        None => dequantise(cols[5][i], 1000.0),
    };
    let (index, n, mean, min, max) = (&cols[0], &cols[1], &cols[2], &cols[3], &cols[4]);
    Ok((0..index.len())
        .map(|i| MinuteRollup {
            minute: index[i].clamp(0, 59) as u8,
            n: n[i].max(0) as u64,
            mean: dequantise(mean[i], scale),
            min: dequantise(min[i], scale),
            max: dequantise(max[i], scale),
            energy_wh: energy_wh(i),
            covered_ms: with_covered
                .then(|| cols[6][i])
                .filter(|c| *c >= 0)
                .map(|c| c.min(MINUTE_MS)),
        })
        .collect())
}
