//! A sweep's stored fit (the `calibration` table: the wall against one software-visible
//! source over the sweep's levels, [`crate::sweep::persist::Calibration`]) read as a
//! one-signal [`WallModel`], so that every estimate, whatever fitted it, is one model
//! applied one way: the signal is the source's power (`rapl/package-0` reads
//! `rapl/power/package-0`), the line the sweep's, the band twice its rms error.
//!
//! What it saw is the range the sweep recorded (every reading of its levels): a reading
//! outside it is withheld, as for a model fitted on ordinary running. Rows stored before
//! sweeps recorded it hold no range: they still estimate, nowhere withheld, and the
//! model's provenance says "the range it saw not recorded" wherever it is shown.
//!
//! Units: W; times UTC ms.

use wattson_collectors::{Metric, SourceId};

use super::CalibrationError;
use super::model::{Feature, Hardware, Model, Origin, Shape, Span, WallModel};
use crate::store::Store;
use crate::sweep::persist::Calibration;

/// The model a sweep's fit `c`, stored for `host` at `created_ms` (the sweep's end), stands
/// for; `Err` says why it cannot be one (a source not of the form `source/channel`, a figure
/// not finite, a name or watts no writer of wattson's stores: [`super::export::vet`]).
pub fn model(host: &str, created_ms: i64, c: &Calibration) -> Result<WallModel, SweptError> {
    let (source, channel) = c
        .source
        .split_once('/')
        .filter(|(s, _)| !s.is_empty())
        .ok_or_else(|| SweptError::Source(c.source.clone()))?;
    let span = |r: [f64; 2]| Span {
        min: r[0],
        max: r[1],
    };
    let (feature_spans, wall_span) = match (c.source_range_w, c.wall_range_w) {
        (Some(s), Some(w)) => (vec![span(s)], Some(span(w))),
        _ => (Vec::new(), None),
    };
    let rms = c.rms_error_w.abs();
    let m = WallModel {
        host: host.to_owned(),
        created_ms,
        // The sweep's meter: its row does not name it (the wall beside the model, when the
        // meter is back, is the host's wall meter).
        wall_source: String::new(),
        model: Model {
            features: vec![Feature::new(
                SourceId::from_text(source),
                Metric::Power,
                channel,
            )],
            shape: Shape::Linear {
                intercept_w: c.intercept_w,
                coefficients: vec![c.slope],
            },
        },
        from_ms: created_ms,
        to_ms: created_ms,
        minutes: 0,
        feature_spans,
        wall_span,
        heldout_from_ms: created_ms,
        heldout_minutes: 0,
        heldout_rms_w: rms,
        // A least-squares line's residuals over its levels sum to nothing.
        heldout_energy_error_pct: 0.0,
        interval_pct: interval_pct(c, rms),
        considered: Vec::new(),
        // Not recorded: a sweep's fit is never lent to another host.
        hardware: Hardware {
            cpu_model: None,
            logical_cpus: 0,
            memory_bytes: None,
        },
        borrowed_from: None,
        origin: Origin::Sweep {
            levels: c.levels,
            r2: c.r2,
        },
    };
    super::export::vouch(&m)?;
    Ok(m)
}

/// Why a sweep's stored fit cannot be a model.
#[derive(Debug, thiserror::Error)]
pub enum SweptError {
    /// The fit's source is not `source/channel`.
    #[error("source {0:?} is not source/channel")]
    Source(String),
    #[error(transparent)]
    Refused(#[from] super::export::ExportError),
}

/// The band as a share of an estimated energy, %: the band over the least wall the sweep
/// saw (or, without its range, the line at a source reading nothing: the least a source of
/// watts can read), where the band is the widest share of the estimate. 100 % where that
/// wall is not above 0 W.
fn interval_pct(c: &Calibration, rms: f64) -> f64 {
    let least = c.wall_range_w.map_or(c.intercept_w, |[lo, _]| lo);
    if least > 0.0 {
        100.0 * 2.0 * rms / least
    } else {
        100.0
    }
}

/// The fits `host`'s sweeps stored, as models: the newest of each source, the smallest
/// error first. One that cannot be a model is logged and passed over.
pub fn fits(store: &Store, host: &str) -> Result<Vec<WallModel>, CalibrationError> {
    let rows = crate::sweep::persist::latest_calibrations(store, host).map_err(|e| match e {
        crate::sweep::SweepError::Sql(source) => CalibrationError::Sqlite {
            path: store.path().display().to_string(),
            source,
        },
        other => CalibrationError::BadInput(format!(
            "reading the sweeps' calibrations: {}",
            wattson_collectors::ErrorChain(&other)
        )),
    })?;
    Ok(rows
        .into_iter()
        .filter_map(|(at, c)| match model(host, at, &c) {
            Ok(m) => Some(m),
            Err(why) => {
                tracing::warn!(
                    "a sweep's calibration of {host} against {:?} in the database refused, not \
                     used: {why}; sweep again to store another",
                    c.source
                );
                None
            }
        })
        .collect())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// What a sweep stored before sweeps recorded the range they saw.
    pub(crate) fn old_row(source: &str) -> Calibration {
        Calibration {
            source: source.into(),
            intercept_w: 30.0,
            slope: 1.1,
            r2: 0.999,
            rms_error_w: 0.75,
            levels: 3,
            estimate: true,
            source_range_w: None,
            wall_range_w: None,
        }
    }

    #[test]
    fn a_sweeps_fit_is_a_one_signal_line_with_its_band() {
        let mut c = old_row("rapl/package-0");
        c.source_range_w = Some([8.0, 32.0]);
        c.wall_range_w = Some([37.5, 66.0]);
        let m = model("basket", 1_764_892_800_000, &c).unwrap();
        assert_eq!(m.model.features[0].name(), "rapl/power/package-0");
        assert!((m.model.predict(&[20.0]) - 52.0).abs() < 1e-9);
        assert!((m.band_w() - 1.5).abs() < 1e-12);
        // The band over the least wall seen.
        assert!((m.interval_pct - 4.0).abs() < 1e-9, "{}", m.interval_pct);
        assert_eq!(m.outside(&[20.0]), None);
        assert_eq!(m.outside(&[40.0]), Some(0));
        assert!(
            m.outside_reason(0, 40.0, 40.0)
                .contains("outside the 8 to 32 the model saw")
        );
        assert_eq!(
            m.provenance(),
            "estimated from a sweep on 2025-12-05, +/- 1.5 W (4.0 %)"
        );
    }

    #[test]
    fn an_old_row_without_its_range_estimates_everywhere_and_says_so() {
        let m = model("basket", 1, &old_row("rapl/package-0")).unwrap();
        assert!(!m.range_recorded());
        assert_eq!(m.outside(&[1e4]), None);
        assert!((m.interval_pct - 5.0).abs() < 1e-9, "{}", m.interval_pct);
        assert_eq!(
            m.provenance(),
            "estimated from a sweep on 1970-01-01, +/- 1.5 W (5.0 %), the range it saw not \
             recorded"
        );
        let back: WallModel = serde_json::from_str(&serde_json::to_string(&m).unwrap()).unwrap();
        assert_eq!(back, m);
    }

    #[test]
    fn only_a_sweeps_fit_may_lack_the_range_it_saw() {
        let mut m = model("basket", 1, &old_row("rapl/package-0")).unwrap();
        assert_eq!(m.check(), Ok(()));
        m.origin = Origin::Running;
        assert_eq!(
            m.check(),
            Err(crate::calibration::model::ModelError::RangeMissing)
        );
        m.origin = Origin::Sweep {
            levels: 3,
            r2: 0.99,
        };
        m.feature_spans = vec![Span {
            min: 8.0,
            max: 32.0,
        }];
        assert!(m.check().is_err(), "the signal's range without the wall's");
        m.wall_span = Some(Span {
            min: 38.0,
            max: 66.0,
        });
        assert_eq!(m.check(), Ok(()));
        m.origin = Origin::Sweep {
            levels: 3,
            r2: f64::NAN,
        };
        assert!(m.check().is_err());
    }

    #[test]
    fn a_row_no_sweep_could_have_stored_is_refused() {
        assert!(model("basket", 1, &old_row(&SourceId::Rapl.to_string())).is_err());
        assert!(model("basket", 1, &old_row("/package-0")).is_err());
        let mut c = old_row("rapl/package-0");
        c.slope = f64::NAN;
        assert!(model("basket", 1, &c).is_err());
        let mut c = old_row("rapl/package-0");
        c.intercept_w = 1e9;
        assert!(
            model("basket", 1, &c)
                .unwrap_err()
                .to_string()
                .contains("intercept")
        );
        // A range of the source without the wall's is not a range a sweep records.
        let mut c = old_row("rapl/package-0");
        c.source_range_w = Some([1.0, 2.0]);
        assert!(model("basket", 1, &c).is_ok_and(|m| !m.range_recorded()));
    }
}
