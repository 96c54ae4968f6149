//! Standby and off, measured at the wall: over the gaps in which the kernel says the host
//! was asleep (or off), the energy the meter's own counter moved by is the host's standby
//! (or off) energy. Its mean watts are that energy over the time away, sure to within the
//! counter's step at each end of each gap; each gap's energy is priced at the prices in
//! force over it (a night's sleep at the night's price).

use serde::Serialize;
use wattson_collectors::SourceId;

use super::LedgerError;
use crate::ledger::energy::GapSpan;
use crate::ledger::interval::hours_text;
use crate::store::{Away, Gap, Store};
use crate::tariff::{Tariff, TariffError};

/// What the host drew while away, one figure per kind of time away (asleep, off).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AwayFigure {
    /// "standby" (asleep) or "off".
    pub mode: &'static str,
    pub away: Away,
    /// Mean watts over the time away, W.
    pub watts: f64,
    /// The counter's step at each end of each gap, over the time away, W.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ci95_watts: Option<f64>,
    /// Time away the figure is measured over, h.
    pub hours: f64,
    /// How many times the host was away (gaps counted).
    pub times: usize,
    /// Energy counted, Wh.
    pub wh: f64,
    /// That energy priced at the prices in force over each gap, currency.
    pub cost: f64,
    /// Where the figure comes from, in words.
    pub basis: String,
}

/// One gap the host was away in, settled by the wall meter's counter.
#[derive(Debug, Clone, PartialEq)]
pub struct AwaySpan {
    pub away: Away,
    /// UTC ms.
    pub start_ms: i64,
    pub end_ms: i64,
    /// Energy the counter moved by over it, Wh.
    pub wh: f64,
    /// The counter's step, Wh, where its readings show it.
    pub step_wh: Option<f64>,
}

/// One gap as a time away: where the host was away over it and the counter settled its
/// energy (`counted`: Wh, the counter's step).
fn span(
    away: Option<Away>,
    (start_ms, end_ms): (i64, i64),
    counted: Option<(Option<f64>, Option<f64>)>,
) -> Option<AwaySpan> {
    let (wh, step_wh) = counted?;
    (end_ms > start_ms).then_some(AwaySpan {
        away: away?,
        start_ms,
        end_ms,
        wh: wh?,
        step_wh,
    })
}

/// The gaps of `wall` among `gaps` in which the host was away and its counter settled the
/// energy. Gaps the counter could not settle (a reset, no counter) are left out.
pub fn spans(gaps: &[Gap], wall: &SourceId) -> Vec<AwaySpan> {
    gaps.iter()
        .filter(|g| &g.source == wall)
        .filter_map(|g| {
            let counted = g.counted.as_ref().map(|c| (c.wh, c.step_wh));
            span(g.away, (g.start_ms, g.end_ms), counted)
        })
        .collect()
}

/// [`spans`] of a window's gaps (each cut to the window, its counted energy its share in
/// it).
pub fn spans_in_window(gaps: &[GapSpan]) -> Vec<AwaySpan> {
    gaps.iter()
        .filter_map(|g| {
            let counted = g.counted.as_ref().map(|c| (c.wh, c.step_wh));
            span(g.away, (g.start_ms, g.end_ms), counted)
        })
        .collect()
}

/// The host's standby and off as measured at the wall over `[from_ms, to_ms)`: each a
/// figure where `wall`'s counter settled at least one gap in which the host was away.
pub fn measured(
    store: &Store,
    host: &str,
    wall: &SourceId,
    (from_ms, to_ms): (i64, i64),
    tariff: &Tariff,
) -> Result<Vec<AwayFigure>, LedgerError> {
    let gaps = store.away_gaps(host, from_ms, to_ms)?;
    figures(&spans(&gaps, wall), tariff).map_err(LedgerError::Tariff)
}

/// One figure per kind of time away among `spans`, each span's energy priced at the
/// prices in force over it.
pub fn figures(spans: &[AwaySpan], tariff: &Tariff) -> Result<Vec<AwayFigure>, TariffError> {
    let mut out = Vec::new();
    for away in [Away::Asleep, Away::Off] {
        let (mut ms, mut wh, mut band_wh, mut cost, mut times) = (0i64, 0.0, 0.0, 0.0, 0);
        let mut every_step = true;
        for s in spans.iter().filter(|s| s.away == away) {
            ms += s.end_ms - s.start_ms;
            wh += s.wh;
            times += 1;
            match s.step_wh {
                Some(step) => band_wh += 2.0 * step,
                None => every_step = false,
            }
            cost += s.wh / 1000.0 * tariff.mean_price(s.start_ms, s.end_ms)?;
        }
        if times == 0 || ms <= 0 {
            continue;
        }
        let hours = ms as f64 / 3_600_000.0;
        let what = match away {
            Away::Asleep => "asleep",
            Away::Off => "off",
        };
        out.push(AwayFigure {
            mode: away.mode(),
            away,
            watts: wh / hours,
            ci95_watts: every_step.then_some(band_wh / hours),
            hours,
            times,
            wh,
            cost,
            basis: format!(
                "measured at the wall: the meter's counter over {} {what} ({} time{}){}, \
                 priced at the prices in force then",
                hours_text(hours),
                times,
                if times == 1 { "" } else { "s" },
                match away {
                    Away::Asleep => "",
                    // The gap runs to wattson's start: the boot is in it.
                    Away::Off => ", the shutdown and the boot in it",
                }
            ),
        });
    }
    Ok(out)
}

/// How long after a resume its energy is measured, and before the sleep the draw it is
/// measured against, ms.
pub const RESUME_MS: i64 = 2 * 60_000;

/// The energy of each resume of the host that ended a time asleep in `[from_ms, to_ms)`:
/// the wall's energy in the [`RESUME_MS`] after it above the draw of the [`RESUME_MS`]
/// before the sleep (the machine waking, its disks spinning up, its services catching up),
/// Wh. A resume without samples covering nine tenths of both stretches is left out.
pub fn resumes(
    store: &Store,
    host: &str,
    wall: &SourceId,
    (from_ms, to_ms): (i64, i64),
) -> Result<Vec<f64>, LedgerError> {
    let mut out = Vec::new();
    let asleep = store
        .away_gaps(host, from_ms, to_ms)?
        .into_iter()
        .filter(|g| g.away == Some(Away::Asleep) && &g.source == wall && g.end_ms < to_ms);
    for g in asleep {
        let mean = |a: i64, b: i64| -> Result<Option<f64>, LedgerError> {
            let e = super::energy::energy(store, host, wall, a, b)?;
            Ok(e.mean_watts()
                .filter(|_| e.covered_ms * 10 >= RESUME_MS * 9))
        };
        let before = mean(g.start_ms - RESUME_MS, g.start_ms)?;
        let after = mean(g.end_ms, g.end_ms + RESUME_MS)?;
        if let (Some(before), Some(after)) = (before, after) {
            out.push(((after - before) * RESUME_MS as f64 / 3_600_000.0).max(0.0));
        }
    }
    Ok(out)
}

/// "4.0 W ± 0.3 (standby, measured at the wall: ...)": a figure in one phrase.
pub fn phrase(f: &AwayFigure) -> String {
    let band = f
        .ci95_watts
        .map(|c| format!(" ± {c:.2}"))
        .unwrap_or_default();
    format!("{:.2} W{band} ({})", f.watts, f.basis)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{StoreOptions, Writer};
    use wattson_collectors::{Metric, Sample};

    /// 2023-11-14T22:00:00Z.
    const T0: i64 = 1_699_999_200_000;

    /// A host idling at 40 W, asleep for an hour with its counter moving 4 Wh, then waking
    /// at 70 W for 30 s before idling again: a standby of 4 W, and a resume of 30 s x 30 W
    /// = 0.25 Wh above the draw before the sleep, priced at the tariff.
    #[test]
    fn a_sleep_gives_its_standby_and_its_resume() {
        let dir = tempfile::tempdir().unwrap();
        let opts = StoreOptions {
            host: "h".into(),
            ..StoreOptions::default()
        };
        let wall = SourceId::meter("wall");
        let mut w = Writer::new(Store::open(&dir.path().join("s.db"), &opts).unwrap(), opts);
        let asleep = (T0 + 300_000, T0 + 300_000 + 3_600_000);
        let sample = |w: &mut Writer, t: i64, watts: f64, wh: f64| {
            w.push(
                None,
                vec![
                    Sample::new(t, wall.clone(), Metric::Power, "", watts),
                    Sample::new(t, wall.clone(), Metric::EnergyCounter, "", wh),
                ],
            );
        };
        for s in 0..=300 {
            sample(&mut w, T0 + s * 1000, 40.0, 1000.0);
        }
        for s in 0..=300 {
            let watts = if s < 30 { 70.0 } else { 40.0 };
            sample(&mut w, asleep.1 + s * 1000, watts, 1004.0);
        }
        w.record_away(&wall, asleep, Away::Asleep, "the host was asleep for 1.0 h");
        w.flush().unwrap();
        // The counter reading 5 s after the gap settles it.
        sample(&mut w, asleep.1 + 301_000, 40.0, 1004.0);
        w.flush().unwrap();

        let tariff = Tariff::simple("GBP", 0.30, 0.0, vec![], crate::zone::Zone::UTC).unwrap();
        let figures = measured(w.store(), "h", &wall, (0, i64::MAX), &tariff).unwrap();
        assert_eq!(figures.len(), 1, "{figures:?}");
        let f = &figures[0];
        assert_eq!(f.mode, "standby");
        // The counter's 4 Wh less what was sampled in the 5 s (at 70 W) it settled after.
        let sampled = 5.0 * 70.0 / 3600.0;
        assert!((f.wh - (4.0 - sampled)).abs() < 1e-6, "{f:?}");
        assert!((f.hours - 1.0).abs() < 1e-9);
        assert!((f.cost - f.wh / 1000.0 * 0.30).abs() < 1e-12);

        let r = resumes(w.store(), "h", &wall, (0, i64::MAX)).unwrap();
        assert_eq!(r.len(), 1, "{r:?}");
        // 30 s at 30 W above 40 W, the ramp's half second either side in the trapezoids.
        assert!((r[0] - 0.25).abs() < 0.01, "{r:?}");
    }
}
