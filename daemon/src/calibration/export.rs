//! A model as a file another host of the same hardware imports (`wattson calibration
//! export --format file`, `import`). The forms Home Assistant and Prometheus read are
//! [`crate::publish::calibration`]'s.

use serde::{Deserialize, Serialize};

use wattson_collectors::Metric;
use wattson_collectors::plausibility::{Limits, MAX_POWER_W};

use super::CalibrationError;
use super::model::{Hardware, ModelError, Origin, Shape, WallModel};
use crate::config::names::{NameError, check_label, check_name, check_text};

/// The file `export --format file` writes and `import` reads.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct File {
    /// Always [`FILE_FORMAT`].
    pub format: String,
    pub version: u32,
    pub model: WallModel,
}

pub const FILE_FORMAT: &str = "wattson-calibration";
/// The most of a file `import` reads.
pub const MAX_FILE_BYTES: u64 = 1 << 20;

/// Why a model is lent to no other host, or is refused as one no writer of wattson's could
/// have made (at import, and when read back from a database).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ExportError {
    #[error(transparent)]
    NotWhole(#[from] ModelError),
    /// A sweep's fit, which records no hardware to match.
    #[error(
        "{host}'s calibration is a sweep's fit, which records no hardware, so it is lent to no \
         other host: fit one on ordinary running with the meter in (`wattson calibration \
         fit`)"
    )]
    NotLendable { host: String },
    /// A name that breaks the one rule for names; `what` says which name it is.
    #[error("{what} {value:?} {why}")]
    Name {
        what: &'static str,
        value: String,
        why: NameError,
    },
    /// Watts no meter reads.
    #[error(
        "{what} is {} W, which no meter reads: watts are finite, from 0 to under \
         {MAX_POWER_W} W",
        shown(*w)
    )]
    Watts { what: String, w: f64 },
    /// A value of the signal `name` no signal reads ([`MAX_SIGNAL`]).
    #[error(
        "{name} is seen at {v:e} in it, which no signal reads: a signal's values are \
         finite, within {MAX_SIGNAL:e} of 0"
    )]
    Signal { name: String, v: f64 },
    /// A term of the line that reaches `most` W over the range the model saw.
    #[error(
        "the term of {name} reaches {most:e} W over the range the model saw: watts are \
         finite, under {MAX_POWER_W} W"
    )]
    Term { name: String, most: f64 },
    #[error("the intercept is {0:e} W: watts are finite, under {MAX_POWER_W} W")]
    Intercept(f64),
}

/// Watts as a meter's reading would say them: a huge figure in powers of ten (not 309
/// digits).
fn shown(w: f64) -> String {
    if w.abs() < 1e6 {
        format!("{w}")
    } else {
        format!("{w:e}")
    }
}

/// The model as the file another host imports.
pub fn file(model: &WallModel) -> String {
    let f = File {
        format: FILE_FORMAT.into(),
        version: 1,
        model: model.clone(),
    };
    serde_json::to_string_pretty(&f).unwrap_or_default() + "\n"
}

/// The model a file holds, for `host` whose hardware is `here`: checked whole, refused for
/// other hardware, marked as borrowed from the host it was fitted on.
pub fn import(text: &str, host: &str, here: &Hardware) -> Result<WallModel, CalibrationError> {
    let bad = |m: String| CalibrationError::BadInput(m);
    let f: File = serde_json::from_str(text)
        .map_err(|e| bad(format!("not a wattson calibration file: {e}")))?;
    if f.format != FILE_FORMAT || f.version != 1 {
        return Err(bad(format!(
            "format {:?} version {}: this wattson reads {FILE_FORMAT:?} version 1",
            f.format, f.version
        )));
    }
    let mut m = f.model;
    m.check()
        .map_err(|e| bad(format!("the model in it is not whole: {e}")))?;
    vet(&m).map_err(|e| bad(format!("refused: {e}")))?;
    lendable(&m).map_err(|e| bad(e.to_string()))?;
    if let Some(why) = m.hardware.differs_from(here) {
        return Err(bad(format!(
            "fitted on {} with {why}: a model is only lent to the same hardware (fit one here \
             with a meter: `wattson calibration fit`)",
            m.host
        )));
    }
    if m.borrowed_from.is_none() && m.host != host {
        m.borrowed_from = Some(m.host.clone());
    }
    host.clone_into(&mut m.host);
    Ok(m)
}

/// Whether `m` may be lent to another host: a sweep's fit records no hardware to match.
pub fn lendable(m: &WallModel) -> Result<(), ExportError> {
    match m.origin {
        Origin::Running => Ok(()),
        Origin::Sweep { .. } => Err(ExportError::NotLendable {
            host: m.host.clone(),
        }),
    }
}

/// The largest a signal a model reads may be, either side of 0: a share is at most 1, a
/// utilisation 100 %, a frequency some thousands of MHz, a power under 16 kW.
pub const MAX_SIGNAL: f64 = 1e6;

/// What a model must hold beyond being whole ([`WallModel::check`]), said as the reason it
/// is refused, at import and when read back from a database
/// ([`super::persist`]: the service user writes it): its names pass the one rule for names
/// (they reach the comments of the exported YAML, labels and pages), its curve and the wall
/// it saw are watts a meter could read (finite, 0 to 16 kW: [`Limits::check`]), the values
/// of a signal it saw are within [`MAX_SIGNAL`], and a line's every term stays within 16 kW
/// over the range its signal was seen in.
pub fn vet(m: &WallModel) -> Result<(), ExportError> {
    let name = |what: &'static str, value: &str, rule: fn(&str) -> Result<(), NameError>| {
        rule(value).map_err(|why| ExportError::Name {
            what,
            value: value.to_owned(),
            why,
        })
    };
    name("host", &m.host, check_name)?;
    if let Some(h) = &m.borrowed_from {
        name("borrowed_from", h, check_name)?;
    }
    // A sweep's fit does not name its meter.
    if !(m.wall_source.is_empty() && matches!(m.origin, Origin::Sweep { .. })) {
        name("wall_source", &m.wall_source, check_label)?;
    }
    for f in &m.model.features {
        name("a signal's source", &f.source.to_string(), check_label)?;
        if !f.channel.is_empty() {
            name("a signal's channel", &f.channel, check_label)?;
        }
    }
    for (described, _) in &m.considered {
        name("a model considered", described, check_text)?;
    }
    let limits = Limits::default();
    let watts = |what: &str, w: f64| {
        limits
            .check(Metric::Power, w)
            .map_err(|_| ExportError::Watts {
                what: what.to_owned(),
                w,
            })
    };
    for (span, f) in m.feature_spans.iter().zip(&m.model.features) {
        signal(&f.name(), span.min)?;
        signal(&f.name(), span.max)?;
    }
    if let Some(w) = m.wall_span {
        watts("the wall's least", w.min)?;
        watts("the wall's most", w.max)?;
    }
    // Without the range it saw (an old sweep's fit) a term is bounded by nothing but its
    // coefficient's being finite ([`WallModel::check`]).
    let terms = |coefficients: &[f64], features: usize| -> Result<(), ExportError> {
        for ((c, span), f) in coefficients
            .iter()
            .zip(m.feature_spans.get(features..).unwrap_or_default())
            .zip(&m.model.features[features..])
        {
            let most = (c * span.min).abs().max((c * span.max).abs());
            if !most.is_finite() || most >= MAX_POWER_W {
                return Err(ExportError::Term {
                    name: f.name(),
                    most,
                });
            }
        }
        Ok(())
    };
    match &m.model.shape {
        Shape::Table { points, plus } => {
            for (x, w) in points {
                signal(&m.model.features[0].name(), *x)?;
                watts(&format!("the table's point at {x}"), *w)?;
            }
            terms(plus, 1)
        }
        Shape::Linear {
            intercept_w,
            coefficients,
        } => {
            if intercept_w.abs() >= MAX_POWER_W {
                return Err(ExportError::Intercept(*intercept_w));
            }
            terms(coefficients, 0)
        }
    }
}

/// Refuses a value of the signal `name` no signal reads ([`MAX_SIGNAL`]).
fn signal(name: &str, v: f64) -> Result<(), ExportError> {
    if v.abs() < MAX_SIGNAL {
        Ok(())
    } else {
        Err(ExportError::Signal {
            name: name.to_owned(),
            v,
        })
    }
}

/// A model read from a database or a file that may be used: whole ([`WallModel::check`])
/// and vetted ([`vet`]).
pub fn vouch(m: &WallModel) -> Result<(), ExportError> {
    m.check()?;
    vet(m)
}
