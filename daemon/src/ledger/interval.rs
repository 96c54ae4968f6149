//! How sure a measured mean power (and so an annual figure projected from it) is.
//!
//! The 95 % half-width is the sum of two parts, added linearly because the first is
//! systematic:
//! - the meter's stated accuracy at that power ([`Accuracy`], from its datasheet:
//!   docs/reports.md lists them with their sources); unknown for smart plugs, `line` meters,
//!   CSE/HLW boards and fleet hosts, which is then said in words;
//! - the sampling uncertainty: the spread of the mean power of the blocks the covered time
//!   falls into (hours, or minutes when fewer than three hours are covered), as a t-interval
//!   of the block means. It carries the load's own variation, so projecting it to a year
//!   assumes the covered time is typical of the year; when less than a day is covered that
//!   is said in plain words, since a day's pattern is then not in the figure at all.
//!
//! Units: W, ms.

use serde::Serialize;
use wattson_collectors::meter::Accuracy;

use crate::analysis::stats;

use super::energy::MS_PER_HOUR;

/// A block shorter than this is too short to stand for its hour or minute, ms.
const MIN_BLOCK_MS: i64 = 10_000;

/// A mean power with its 95 % interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PowerInterval {
    /// W.
    pub mean_watts: f64,
    /// Half-width of the 95 % interval, W: `accuracy_watts` + `sampling_watts`; `None`
    /// when neither is known (no interval can be given, which is not an interval of 0).
    pub ci95_watts: Option<f64>,
    /// The meter's stated accuracy at this power, W (`None`: not known).
    pub accuracy_watts: Option<f64>,
    /// Where the accuracy figure comes from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accuracy_source: Option<&'static str>,
    /// The sampling part, W (`None` with fewer than two blocks).
    pub sampling_watts: Option<f64>,
    /// Blocks the sampling part was estimated from, and their length (`hour`, `minute`).
    pub blocks: usize,
    pub block: &'static str,
    /// Hours the mean covers.
    pub covered_hours: f64,
    /// What weakens the figure, in words.
    pub warnings: Vec<String>,
}

/// The interval of `mean_watts` over `covered_ms`, from the mean power of each block
/// (`(W, covered ms)`; `block` names their length) and the meter's accuracy.
pub fn power_interval(
    mean_watts: f64,
    covered_ms: i64,
    blocks: &[(f64, i64)],
    block: &'static str,
    accuracy: Option<Accuracy>,
) -> PowerInterval {
    let means: Vec<f64> = blocks
        .iter()
        .filter(|(w, ms)| *ms >= MIN_BLOCK_MS && w.is_finite())
        .map(|(w, _)| *w)
        .collect();
    let sampling = (means.len() >= 2)
        .then(|| stats::sample_sd(&means).ok())
        .flatten()
        .map(|sd| stats::t_975(means.len() - 1) * sd / (means.len() as f64).sqrt());
    let accuracy_watts = accuracy.map(|a| a.half_width_w(mean_watts));
    let covered_hours = covered_ms as f64 / MS_PER_HOUR;
    let mut warnings = Vec::new();
    if accuracy.is_none() {
        warnings.push(
            "the meter's accuracy is not known: the interval holds the sampling uncertainty only"
                .to_owned(),
        );
    }
    if sampling.is_none() {
        warnings.push(format!(
            "too little covered time to estimate the sampling uncertainty ({} {block} blocks)",
            means.len()
        ));
    }
    if covered_hours < 24.0 {
        warnings.push(format!(
            "a year is projected from {}: less than a day, so a day's pattern (nights, \
             backups, updates) is not in it; the interval assumes the time measured is typical",
            hours_text(covered_hours)
        ));
    }
    PowerInterval {
        mean_watts,
        // Neither part known: no interval, rather than one of 0 W that claims exactness.
        ci95_watts: (accuracy_watts.is_some() || sampling.is_some())
            .then(|| accuracy_watts.unwrap_or(0.0) + sampling.unwrap_or(0.0)),
        accuracy_watts,
        accuracy_source: accuracy.map(|a| a.source),
        sampling_watts: sampling,
        blocks: means.len(),
        block,
        covered_hours,
        warnings,
    }
}

/// A span of time in words, as every surface writes a measured span (covered time, a gap,
/// a stretch asleep): "9 s" under a minute, "14 min" under an hour, "1 h 05 min" (or "7 h")
/// under a day, "26.5 h" from a day up. Never "0 h" for a span of minutes.
pub fn hours_text(hours: f64) -> String {
    if !hours.is_finite() {
        return "n/a".to_owned();
    }
    let hours = hours.max(0.0);
    let seconds = (hours * 3600.0).round();
    let minutes = (hours * 60.0).round();
    if seconds < 60.0 {
        format!("{seconds:.0} s")
    } else if minutes < 60.0 {
        format!("{:.0} min", minutes.max(1.0))
    } else if minutes < 24.0 * 60.0 {
        let whole = (minutes / 60.0).floor();
        match minutes - whole * 60.0 {
            m if m < 0.5 => format!("{whole:.0} h"),
            m => format!("{whole:.0} h {m:02.0} min"),
        }
    } else {
        format!("{hours:.1} h")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: a span under an hour read "0 h" (and "0.0 h"); an hour and five minutes
    /// read "1.1 h".
    #[test]
    fn spans_read_in_seconds_minutes_and_hours() {
        assert_eq!(hours_text(9.0 / 3600.0), "9 s");
        assert_eq!(hours_text(59.6 / 3600.0), "1 min");
        assert_eq!(hours_text(14.0 / 60.0), "14 min");
        assert_eq!(hours_text(59.7 / 60.0), "1 h");
        assert_eq!(hours_text(65.0 / 60.0), "1 h 05 min");
        assert_eq!(hours_text(7.0), "7 h");
        assert_eq!(hours_text(23.99), "23 h 59 min");
        assert_eq!(hours_text(168.0), "168.0 h");
        assert_eq!(hours_text(0.0), "0 s");
        assert_eq!(hours_text(-1e-9), "0 s");
        assert_eq!(hours_text(f64::NAN), "n/a");
    }

    #[test]
    fn accuracy_and_sampling_add_and_short_coverage_is_said() {
        let acc = Accuracy {
            percent: 1.0,
            plus_w: 0.0,
            source: "datasheet",
        };
        // Ten hours alternating 49 and 51 W: sd 1.054, t(9) = 2.262: 0.754 W.
        let blocks: Vec<(f64, i64)> = (0..10)
            .map(|i| (if i % 2 == 0 { 49.0 } else { 51.0 }, 3_600_000))
            .collect();
        let i = power_interval(50.0, 36_000_000, &blocks, "hour", Some(acc));
        assert!((i.accuracy_watts.unwrap() - 0.5).abs() < 1e-12);
        let s = i.sampling_watts.unwrap();
        assert!((s - 0.754).abs() < 0.01, "{s}");
        assert!((i.ci95_watts.unwrap() - (0.5 + s)).abs() < 1e-12);
        assert!(i.warnings.iter().any(|w| w.contains("less than a day")));
        let none = power_interval(50.0, 60_000, &[(50.0, 60_000)], "minute", None);
        assert_eq!(none.sampling_watts, None);
        assert_eq!(none.ci95_watts, None);
        assert!(none.warnings.iter().any(|w| w.contains("not known")));
        assert!(none.warnings.iter().any(|w| w.contains("1 min")));
    }
}
