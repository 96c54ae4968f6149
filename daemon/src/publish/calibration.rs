//! A calibration (`wattson calibration`) in the forms other tools read: a powercalc
//! `linear` sensor (a calibrate table over one entity wattson publishes to Home Assistant)
//! and a Prometheus recording rule over wattson's own metrics, named as the publishers name
//! them.

use std::fmt::Write as _;

use serde::Serialize;
use wattson_collectors::Metric;
use wattson_collectors::plausibility::MAX_POWER_W;

use crate::calibration::CalibrationError;
use crate::calibration::model::{Feature, Origin, Shape, WallModel, interpolate};

/// The recording rule's name.
pub const RULE_NAME: &str = "wattson:estimated_wall_power_watts";

/// The Home Assistant entity wattson publishes for `feature` and the factor from the
/// stored value to the entity's state; `None` for a signal with no entity of its own.
fn entity(feature: &Feature) -> Option<(&'static str, f64)> {
    match (feature.metric, feature.channel.as_str()) {
        (Metric::CpuBusy, wattson_collectors::source::channel::ALL) => {
            Some(("cpu_utilisation", 100.0))
        }
        (Metric::CoreFrequency, wattson_collectors::source::channel::MEAN) => {
            Some(("cpu_frequency", 1.0))
        }
        _ => None,
    }
}

/// The model's curve over its one feature as `(value, W)` points: a table's own, a line's
/// two ends of the range it saw.
fn curve(model: &WallModel) -> Result<Vec<(f64, f64)>, CalibrationError> {
    match &model.model.shape {
        Shape::Table { points, plus } if plus.is_empty() => Ok(points.clone()),
        Shape::Linear { .. } if model.model.features.len() == 1 => {
            let s = model.feature_spans.first().ok_or_else(|| {
                CalibrationError::BadInput(
                    "the range the sweep saw is not recorded, and a calibrate table needs its \
                     ends: sweep again to record it"
                        .to_owned(),
                )
            })?;
            Ok(vec![
                (s.min, model.model.predict(&[s.min])),
                (s.max, model.model.predict(&[s.max])),
            ])
        }
        Shape::Linear { .. } | Shape::Table { .. } => Err(CalibrationError::BadInput(format!(
            "powercalc reads one entity and this model reads {} signals ({}): fit one over the \
             CPU's utilisation for Home Assistant (`wattson calibration fit --feature \
             cpu/cpu_busy/all`)",
            model.model.features.len(),
            model.model.describe()
        ))),
    }
}

/// The powercalc profile's YAML body: `powercalc: sensors:` and the one sensor.
#[derive(Debug, Serialize)]
struct PowercalcFile {
    powercalc: PowercalcSensors,
}

#[derive(Debug, Serialize)]
struct PowercalcSensors {
    sensors: [PowercalcSensor; 1],
}

#[derive(Debug, Serialize)]
struct PowercalcSensor {
    entity_id: String,
    name: String,
    unique_id: String,
    linear: Linear,
}

/// powercalc's `linear` strategy: a calibrate table of `STATE -> WATTS` entries.
#[derive(Debug, Serialize)]
struct Linear {
    calibrate: Vec<String>,
}

/// Refuses a model that is not whole, or whose names or watts would be refused at import
/// ([`crate::calibration::export::vet`]): what is exported is what could be imported.
fn vetted(model: &WallModel) -> Result<(), CalibrationError> {
    crate::calibration::export::vouch(model)
        .map_err(|e| CalibrationError::BadInput(format!("the model is refused: {e}")))
}

/// A powercalc virtual power sensor (`powercalc: sensors:`) over the entity wattson
/// publishes for the model's one signal. powercalc reads a calibrate table's values as
/// whole numbers, so the curve is written at every whole number of the entity's state it
/// saw (or at its points, rounded, where there are over 200 of them): powercalc's straight
/// lines between them are the model's to within the rounding. The YAML is written by a
/// YAML serializer; only the comments above it are composed here ([`comments`]).
pub fn powercalc(model: &WallModel, host: &str) -> Result<String, CalibrationError> {
    vetted(model)?;
    let feature = &model.model.features[0];
    let (object_id, factor) = entity(feature)
        .filter(|_| model.model.features.len() == 1)
        .ok_or_else(|| {
            CalibrationError::BadInput(format!(
                "powercalc reads a Home Assistant entity, and wattson publishes none for {} \
             (it does for cpu/cpu_busy/all and cpu/core_frequency/mean): fit one over the CPU's \
             utilisation (`wattson calibration fit --feature cpu/cpu_busy/all`)",
                model
                    .model
                    .features
                    .iter()
                    .map(Feature::name)
                    .collect::<Vec<_>>()
                    .join(" and ")
            ))
        })?;
    let points = curve(model)?;
    let (lo, hi) = (
        (points[0].0 * factor).floor() as i64,
        (points[points.len() - 1].0 * factor).ceil() as i64,
    );
    let keys: Vec<i64> = if hi.saturating_sub(lo) <= 200 {
        (lo..=hi).collect()
    } else {
        let mut k: Vec<i64> = points
            .iter()
            .map(|p| (p.0 * factor).round() as i64)
            .collect();
        k.dedup();
        k
    };
    let mut calibrate = Vec::with_capacity(keys.len());
    for k in keys {
        let w = interpolate(&points, k as f64 / factor).max(0.0);
        if !w.is_finite() || w >= MAX_POWER_W {
            return Err(CalibrationError::BadInput(format!(
                "the model's curve reaches {w:e} W at {k} (the entity's state) between its \
                 points: watts are finite, under {MAX_POWER_W} W; fit it again"
            )));
        }
        calibrate.push(format!("{k} -> {w:.2}"));
    }
    let entity_id = super::mqtt::discovery::entity_id(host, object_id);
    let mut out = comments(&[
        format!(
            "wattson: {host}'s wall power from {entity_id}, {}.",
            model.provenance()
        ),
        format!(
            "Fitted on {}; withheld by wattson outside {lo} to {hi} of",
            fitted_on(model)
        ),
        "the entity, which powercalc instead holds at the table's ends.".to_owned(),
    ]);
    let body = PowercalcFile {
        powercalc: PowercalcSensors {
            sensors: [PowercalcSensor {
                entity_id,
                name: format!("{host} estimated wall power"),
                unique_id: format!(
                    "{}_estimated_wall_power",
                    super::mqtt::discovery::node_id(host)
                ),
                linear: Linear { calibrate },
            }],
        },
    };
    out.push_str(&yaml(&body)?);
    Ok(out)
}

/// What the model was fitted on, in words: "N minutes with the meter in", "a sweep's N
/// levels".
fn fitted_on(model: &WallModel) -> String {
    match model.origin {
        Origin::Running => format!("{} minutes with the meter in", model.minutes),
        Origin::Sweep { levels, .. } => format!("a sweep's {levels} levels"),
    }
}

/// `value` as a YAML document (no `---`), by the serializer.
fn yaml<T: Serialize>(value: &T) -> Result<String, CalibrationError> {
    serde_norway::to_string(value)
        .map_err(|e| CalibrationError::BadInput(format!("writing the YAML: {e}")))
}

/// The `/metrics` selector of `feature` on `host`, summed to one series per host, and the
/// factor from the exposed unit back to the stored one; `None` for a signal `/metrics` does
/// not carry.
fn selector(feature: &Feature, host: &str) -> Option<(String, f64)> {
    let series = crate::store::Series {
        id: 0,
        host: host.to_owned(),
        source: feature.source.clone(),
        metric: feature.metric,
        channel: feature.channel.clone(),
        unit: feature.metric.unit(),
        spacing_ms: None,
        readings: crate::store::integrate::Readings::Sampled,
        max_hold_ms: None,
    };
    let (name, labels, scale) = super::remote_write::families::family(&series)?;
    let selector = super::remote_write::engine::query::selector(
        name,
        labels.iter().map(|(k, v)| (*k, v.as_str())),
    );
    Some((format!("sum by (host) ({selector})"), scale))
}

/// A Prometheus rules file: one group of one recording rule.
#[derive(Debug, Serialize)]
struct RulesFile {
    groups: [RuleGroup; 1],
}

#[derive(Debug, Serialize)]
struct RuleGroup {
    name: String,
    rules: [RecordingRule; 1],
}

#[derive(Debug, Serialize)]
struct RecordingRule {
    record: &'static str,
    expr: String,
    labels: RuleLabels,
}

#[derive(Debug, Serialize)]
struct RuleLabels {
    host: String,
    /// [`wattson_collectors::SourceId::Estimate`], as the daemon's own estimate is labelled.
    source: String,
}

/// The name of the rule group for `host`.
pub fn rule_group(host: &str) -> String {
    format!(
        "wattson-calibration-{}",
        super::mqtt::discovery::node_id(host)
    )
}

/// A Prometheus rules file recording [`RULE_NAME`] for `host` from the model over wattson's
/// own metrics (scraped or remote-written): [`rule_expression`], labelled with the host
/// and the source of wattson's own estimate. The YAML is written by a YAML serializer; only the comments above
/// it are composed here ([`comments`]).
pub fn prometheus_rule(model: &WallModel, host: &str) -> Result<String, CalibrationError> {
    let expr = rule_expression(model, host)?;
    let date = model.provenance();
    let saw = match model.wall_span {
        Some(w) => [
            format!(
                "The model: {}, fitted on {}; it saw the wall at {:.1} to {:.1} W. As wattson does,",
                model.model.describe(),
                fitted_on(model),
                w.min,
                w.max,
            ),
            "the rule records nothing while a signal lies outside what the model saw.".to_owned(),
        ],
        None => [
            format!(
                "The model: {}, fitted on {}; the range it saw is not recorded, so, as wattson",
                model.model.describe(),
                fitted_on(model),
            ),
            "does, the rule records at whatever its signal reads.".to_owned(),
        ],
    };
    let mut out = comments(&[
        format!("wattson: {host}'s wall power {date}."),
        saw[0].clone(),
        saw[1].clone(),
    ]);
    let body = RulesFile {
        groups: [RuleGroup {
            name: rule_group(host),
            rules: [RecordingRule {
                record: RULE_NAME,
                expr,
                labels: RuleLabels {
                    host: host.to_owned(),
                    source: wattson_collectors::SourceId::Estimate.to_string(),
                },
            }],
        }],
    };
    out.push_str(&yaml(&body)?);
    Ok(out)
}

/// The PromQL the rule records for `host`: a line's sum, or a table as a line and a
/// `clamp_min` hinge at each inner point (the same straight lines between the points), kept
/// only while every signal lies inside the range the model saw (`and` each signal's
/// bounds: [`crate::calibration::model::Span::bounds`]), so it withholds where wattson does.
/// Refused for a model that is not whole or would not be imported ([`vetted`]), or one
/// whose slopes are not finite numbers (table points too close together).
pub fn rule_expression(model: &WallModel, host: &str) -> Result<String, CalibrationError> {
    vetted(model)?;
    let mut inputs = Vec::new();
    for f in &model.model.features {
        let (sel, scale) = selector(f, host).ok_or_else(|| {
            CalibrationError::BadInput(format!(
                "{} is not on wattson's /metrics, so no rule can read it: fit without it \
                 (`wattson calibration fit --feature ...` naming the others)",
                f.name()
            ))
        })?;
        inputs.push(if scale == 1.0 {
            sel
        } else {
            format!("({sel} / {scale:e})")
        });
    }
    let mut numbers = Vec::new();
    let mut num = |v: f64| {
        numbers.push(v);
        format!("{v:e}")
    };
    let expr = match &model.model.shape {
        Shape::Linear {
            intercept_w,
            coefficients,
        } => {
            let mut e = num(*intercept_w);
            for (c, x) in coefficients.iter().zip(&inputs) {
                let _ = write!(e, " + {} * {x}", num(*c));
            }
            e
        }
        Shape::Table { points, plus } => {
            let x = &inputs[0];
            let slopes: Vec<f64> = points
                .windows(2)
                .map(|p| (p[1].1 - p[0].1) / (p[1].0 - p[0].0))
                .collect();
            let mut e = format!(
                "{} + {} * ({x} - {})",
                num(points[0].1),
                num(slopes[0]),
                num(points[0].0)
            );
            for i in 1..slopes.len() {
                let _ = write!(
                    e,
                    " + {} * clamp_min({x} - {}, 0)",
                    num(slopes[i] - slopes[i - 1]),
                    num(points[i].0)
                );
            }
            for (c, x) in plus.iter().zip(&inputs[1..]) {
                let _ = write!(e, " + {} * {x}", num(*c));
            }
            e
        }
    };
    // Withheld, as wattson withholds it, where a signal lies outside what the model saw.
    let mut expr = format!("({expr})");
    for (span, x) in model.feature_spans.iter().zip(&inputs) {
        let (lo, hi) = span.bounds();
        let _ = write!(
            expr,
            "\n  and on (host) (({x} >= {}) <= {})",
            num(lo),
            num(hi)
        );
    }
    if let Some(v) = numbers.iter().find(|v| !v.is_finite()) {
        return Err(CalibrationError::BadInput(format!(
            "the rule would hold {v}: the model's table points are too close together for \
             a slope between them; fit it again"
        )));
    }
    Ok(expr)
}

/// `lines` as YAML comment lines (`# ` and the line). A line holds text from a stored or
/// imported model (a host it was borrowed from, a signal's channel) and the configured host
/// name, so every character but those a YAML reader takes in a comment as text is written
/// as an escape (`\u{a}`): YAML ends a comment at a line break (PyYAML, which Home
/// Assistant reads with, also at U+0085, U+2028 and U+2029), and the rest of the line would
/// be read as keys; and a reader refuses the whole file for a character outside YAML's
/// printable set (U+FFFE, U+FFFF, and for libyaml's readers a byte order mark inside it).
fn comments(lines: &[String]) -> String {
    let kept = |c: char| {
        matches!(c, ' '..='~' | '\u{a0}'..='\u{d7ff}' | '\u{e000}'..='\u{fefe}' | '\u{ff00}'..='\u{fffd}' | '\u{10000}'..)
            && !matches!(c, '\u{2028}' | '\u{2029}')
    };
    let mut out = String::new();
    for line in lines {
        out.push_str("# ");
        for c in line.chars() {
            if kept(c) {
                out.push(c);
            } else {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
        }
        out.push('\n');
    }
    out
}

#[cfg(any(test, feature = "fuzz"))]
pub mod properties;

#[cfg(test)]
mod tests {
    use super::comments;
    use super::properties::{model_from_bytes, powercalc_holds, prometheus_rule_holds};

    proptest::proptest! {
        // 2,000 cases; more: PROPTEST_CASES=20000 cargo test -p wattson --lib publish::calibration::tests::fuzz
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(
            std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(2000)
        ))]

        /// A model from arbitrary bytes (hostile names, NaN, infinities, 1e308 among the
        /// numbers): refused with a reason, or a powercalc profile of exactly the keys and
        /// values meant.
        #[test]
        fn fuzz_the_powercalc_yaml_has_exactly_the_structure_meant(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300)
        ) {
            let (model, host) = model_from_bytes(&bytes);
            if let Err(e) = powercalc_holds(&model, &host) {
                proptest::prop_assert!(false, "{e}");
            }
        }

        /// The same for the Prometheus rules file.
        #[test]
        fn fuzz_the_prometheus_rule_has_exactly_the_structure_meant(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300)
        ) {
            let (model, host) = model_from_bytes(&bytes);
            if let Err(e) = prometheus_rule_holds(&model, &host) {
                proptest::prop_assert!(false, "{e}");
            }
        }
    }

    /// Regression: the first findings of the fuzz targets `powercalc_yaml` and
    /// `prometheus_rule` (2026-12-07), a host name holding U+FFFF, which a YAML reader
    /// refuses anywhere in a file, comments too: the export could not be read.
    const FOUND: [&[u8]; 2] = [
        &[
            0xf2, 0x3, 0x21, 0x3, 0x1, 0x0, 0x72, 0x27, 0xb, 0x0, 0xef, 0xbf, 0xbf, 0xbd, 0xef,
            0xbf, 0xbd, 0xef, 0xbf, 0xbd, 0x5c, 0x78, 0x30, 0x31, 0x7b, 0x7b, 0x5c, 0x30, 0x5c,
            0x30, 0x5c, 0x30, 0x5c, 0x30, 0x5c, 0x30, 0x5c, 0x30, 0x5c, 0x30, 0x5c, 0x30, 0x7b,
            0x5c, 0x30, 0x7b, 0x2c, 0x5c, 0x30, 0x20, 0x65, 0x73, 0x74, 0x69, 0x6d, 0x61, 0x74,
            0x65, 0x64, 0x20, 0x77, 0x61, 0x6c, 0x6c, 0x20, 0x70, 0x6f, 0x77, 0x65, 0x72, 0xd,
            0x20, 0x65, 0x25, 0xf2, 0x3, 0xf2, 0x1, 0x3,
        ],
        &[
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x1, 0xff, 0x29, 0x74, 0xff, 0xff, 0xff, 0xff,
            0xbf, 0xbd, 0xef, 0xbf, 0xbd, 0xef, 0xbf, 0xbd, 0x90, 0x5c, 0x30, 0x5c, 0x30, 0xef,
            0xbd, 0xef, 0xbf, 0xbf, 0xbd, 0x8, 0x8, 0x8, 0x8, 0x8, 0x8, 0x8, 0x8, 0x8, 0x8, 0x8,
            0x8, 0x8, 0xef, 0xbf, 0xbd, 0x8, 0x8, 0xfe, 0x8, 0x8, 0x8, 0x8, 0x8, 0x60, 0x8, 0x9,
            0xe, 0xff,
        ],
    ];

    #[test]
    fn the_fuzz_targets_findings_export_as_yaml_a_reader_takes() {
        for bytes in FOUND {
            let (model, host) = model_from_bytes(bytes);
            assert!(host.contains('\u{ffff}'), "{host:?}");
            powercalc_holds(&model, &host).unwrap();
            prometheus_rule_holds(&model, &host).unwrap();
        }
        let text = comments(&["nas\u{fffe}\u{ffff}\u{feff}\u{fffd}\u{e9}".to_owned()]);
        assert_eq!(text, "# nas\\u{fffe}\\u{ffff}\\u{feff}\u{fffd}\u{e9}\n");
        serde_norway::from_str::<serde_norway::Value>(&text).unwrap();
    }

    #[test]
    fn a_comment_stays_one_line_whatever_it_holds() {
        let text = comments(&[
            "borrowed from nas\ngroups:\n  - name: pwned".to_owned(),
            "a\r\u{85}\u{2028}\u{2029}\tb".to_owned(),
        ]);
        assert_eq!(
            text,
            "# borrowed from nas\\u{a}groups:\\u{a}  - name: pwned\n\
             # a\\u{d}\\u{85}\\u{2028}\\u{2029}\\u{9}b\n"
        );
    }
}
