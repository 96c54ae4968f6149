//! The properties of the exported YAML that the fuzz targets (`tests/fuzz`: `powercalc_yaml`,
//! `prometheus_rule`) and the property tests check, and the models they are checked on,
//! built from bytes. Built for tests and with the `fuzz` feature only.

use serde_norway::Value;
use wattson_collectors::plausibility::MAX_POWER_W;
use wattson_collectors::source::channel;
use wattson_collectors::{Metric, SourceId};

use super::{RULE_NAME, entity, powercalc, prometheus_rule, rule_expression, rule_group};
use crate::calibration::model::{Feature, Hardware, Model, Origin, Shape, Span, WallModel};
use crate::publish::mqtt::discovery::{entity_id, node_id};

/// Names as they may reach a model: a newline and keys after it, YAML's own signs, the
/// line separators PyYAML breaks at, the words YAML reads as something other than text,
/// the characters a YAML reader refuses anywhere in a file.
const NAMES: [&str; 15] = [
    "nas\ngroups:\n  - name: pwned",
    "all\"}\n  - name: pwned",
    channel::ALL,
    channel::MEAN,
    "",
    "e2e",
    "a\u{85}b\u{2028}c\u{2029}d\re",
    "true",
    "~",
    "- x",
    "'\"",
    "# x",
    "x: y",
    "&a *a !!str |>",
    "x\u{fffe}\u{ffff}\u{feff}y",
];

/// Numbers as they may reach a model: not finite, the largest and smallest, and the edges
/// of what is vetted.
const NUMBERS: [f64; 12] = [
    f64::NAN,
    f64::INFINITY,
    f64::NEG_INFINITY,
    1e308,
    -1e308,
    0.0,
    -0.0,
    5e-324,
    1e-300,
    crate::calibration::export::MAX_SIGNAL,
    MAX_POWER_W,
    -500.0,
];

/// Reads what a model is made of from fuzz bytes; past their end, zeros.
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn byte(&mut self) -> u8 {
        let Some((&b, rest)) = self.0.split_first() else {
            return 0;
        };
        self.0 = rest;
        b
    }

    fn u64(&mut self) -> u64 {
        (0..8).fold(0, |v, _| v << 8 | u64::from(self.byte()))
    }

    /// Mostly a plausible value (0 to 100 in hundredths), else one of [`NUMBERS`] or any.
    fn number(&mut self) -> f64 {
        match self.byte() {
            s @ 0..=11 => NUMBERS[usize::from(s)],
            12..=13 => f64::from_bits(self.u64()),
            _ => f64::from(u16::from_be_bytes([self.byte(), self.byte()]) % 10_001) / 100.0,
        }
    }

    /// Mostly a plain name, else one of [`NAMES`] or up to 31 bytes as text.
    fn name(&mut self) -> String {
        let s = self.byte();
        if s < 160 {
            return format!("host-{}", s % 10);
        }
        if s < 224 {
            return NAMES[usize::from(s) % NAMES.len()].to_owned();
        }
        let len = usize::from(s % 32);
        let bytes: Vec<u8> = (0..len).map(|_| self.byte()).collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// Mostly a signal an export reads (the CPU's busy share or frequency), else another.
    fn feature(&mut self) -> Feature {
        let (source, metric, channel) = match self.byte() % 8 {
            0..=3 => (SourceId::Cpu, Metric::CpuBusy, channel::ALL.to_owned()),
            4 => (
                SourceId::Cpu,
                Metric::CoreFrequency,
                channel::MEAN.to_owned(),
            ),
            5 => (SourceId::Rapl, Metric::Power, "package-0".to_owned()),
            6 => (SourceId::Disk, Metric::DiskSpunUp, self.name()),
            _ => (
                SourceId::from_text(&self.name()),
                Metric::CpuBusy,
                self.name(),
            ),
        };
        Feature {
            source,
            metric,
            channel,
        }
    }

    fn span(&mut self) -> Span {
        let (a, b) = (self.number(), self.number());
        Span {
            min: a.min(b),
            max: a.max(b),
        }
    }
}

/// A model and the configured host name from fuzz bytes: mostly a model an export takes,
/// often with a hostile name or number in it.
pub fn model_from_bytes(data: &[u8]) -> (WallModel, String) {
    let mut b = Bytes(data);
    let host = b.name();
    let features: Vec<Feature> = (0..=usize::from(b.byte() % 4 == 0))
        .map(|_| b.feature())
        .collect();
    let shape = if b.byte() % 2 == 0 {
        Shape::Linear {
            intercept_w: b.number(),
            coefficients: features.iter().map(|_| b.number() / 100.0).collect(),
        }
    } else {
        let mut x = b.number() / 100.0;
        let count = match b.byte() {
            n @ 0..=7 => n,
            n => 2 + n % 8,
        };
        let points = (0..usize::from(count))
            .map(|_| {
                let p = (x, b.number());
                x += b.number() / 100.0;
                p
            })
            .collect();
        Shape::Table {
            points,
            plus: features[1..].iter().map(|_| b.number()).collect(),
        }
    };
    let feature_spans = features.iter().map(|_| b.span()).collect();
    let mut model = WallModel {
        host: b.name(),
        created_ms: b.u64() as i64,
        wall_source: if b.byte() % 16 == 0 {
            b.name()
        } else {
            SourceId::meter("wall").to_string()
        },
        model: Model { features, shape },
        from_ms: 0,
        to_ms: 0,
        minutes: usize::from(b.byte()),
        feature_spans,
        wall_span: Some(b.span()),
        heldout_from_ms: 0,
        heldout_minutes: 0,
        heldout_rms_w: b.number(),
        heldout_energy_error_pct: b.number(),
        interval_pct: b.number(),
        considered: (0..b.byte() % 3).map(|_| (b.name(), b.number())).collect(),
        hardware: Hardware {
            cpu_model: None,
            logical_cpus: 1,
            memory_bytes: None,
        },
        borrowed_from: (b.byte() % 4 == 0).then(|| b.name()),
        origin: Origin::Running,
    };
    // Read last, so what the bytes made before sweeps' fits were exported stays the same:
    // now and then a sweep's fit, with or without the range it saw.
    if b.byte() % 4 == 3 {
        model.origin = Origin::Sweep {
            levels: usize::from(b.byte()),
            r2: b.number(),
        };
        if b.byte() % 2 == 1 {
            model.feature_spans.clear();
            model.wall_span = None;
        }
    }
    (model, host)
}

/// The YAML's comment lines are its first `count` lines, each `# ` and text, and no other
/// line is one; then the rest parsed.
fn parsed(text: &str, count: usize) -> Result<Value, String> {
    let lines: Vec<&str> = text.lines().collect();
    let comments = lines.iter().filter(|l| l.starts_with('#')).count();
    if comments != count || !lines.iter().take(count).all(|l| l.starts_with("# ")) {
        return Err(format!("not {count} comment lines first: {text}"));
    }
    serde_norway::from_str(text).map_err(|e| format!("not YAML ({e}): {text}"))
}

/// `v`'s value at `key`, when `v` is a mapping of exactly `keys`, in that order.
fn at<'v>(v: &'v Value, keys: &[&str], key: &str) -> Result<&'v Value, String> {
    let Value::Mapping(m) = v else {
        return Err(format!("not a mapping: {v:?}"));
    };
    let found: Vec<Option<&str>> = m.keys().map(Value::as_str).collect();
    if found != keys.iter().map(|k| Some(*k)).collect::<Vec<_>>() {
        return Err(format!("keys {found:?}, meant {keys:?}"));
    }
    m.get(key).ok_or_else(|| format!("no {key}"))
}

/// The only item of the sequence `v`.
fn only(v: &Value) -> Result<&Value, String> {
    match v.as_sequence().map(Vec::as_slice) {
        Some([one]) => Ok(one),
        _ => Err(format!("not a sequence of one: {v:?}")),
    }
}

fn string_is(v: &Value, meant: &str) -> Result<(), String> {
    if v.as_str() == Some(meant) {
        Ok(())
    } else {
        Err(format!("{v:?}, meant the string {meant:?}"))
    }
}

/// What an export accepted was vetted as an import is.
fn accepted_is_vetted(model: &WallModel) -> Result<(), String> {
    crate::calibration::export::vouch(model)
        .map_err(|e| format!("accepted a model refused at import: {e}"))
}

/// [`powercalc`]'s property: refused with a reason, or three comment lines and a YAML
/// document of exactly `powercalc: sensors: [one sensor]`, the sensor exactly `entity_id`,
/// `name`, `unique_id` (wattson's, for `host`) and `linear: calibrate:`, a table of
/// `STATE -> WATTS` strings in increasing whole states, watts from 0 to under 16 kW.
pub fn powercalc_holds(model: &WallModel, host: &str) -> Result<(), String> {
    let text = match powercalc(model, host) {
        Err(e) if e.to_string().is_empty() => return Err("refused without a reason".into()),
        Err(_) => return Ok(()),
        Ok(text) => text,
    };
    accepted_is_vetted(model)?;
    let doc = parsed(&text, 3)?;
    let sensors = at(&doc, &["powercalc"], "powercalc")?;
    let sensor = only(at(sensors, &["sensors"], "sensors")?)?;
    let keys = ["entity_id", "name", "unique_id", "linear"];
    let (object_id, _) = entity(&model.model.features[0]).ok_or("no entity, yet accepted")?;
    let entity_id = entity_id(host, object_id);
    string_is(at(sensor, &keys, "entity_id")?, &entity_id)?;
    string_is(
        at(sensor, &keys, "name")?,
        &format!("{host} estimated wall power"),
    )?;
    string_is(
        at(sensor, &keys, "unique_id")?,
        &format!("{}_estimated_wall_power", node_id(host)),
    )?;
    let table = at(at(sensor, &keys, "linear")?, &["calibrate"], "calibrate")?
        .as_sequence()
        .filter(|t| !t.is_empty())
        .ok_or("the calibrate table is not a sequence of entries")?;
    let mut last = None;
    for entry in table {
        let (k, w) = entry
            .as_str()
            .and_then(|e| e.split_once(" -> "))
            .and_then(|(k, w)| Some((k.parse::<i64>().ok()?, w.parse::<f64>().ok()?)))
            .ok_or_else(|| format!("{entry:?} is not STATE -> WATTS"))?;
        if last.is_some_and(|l| l >= k) || !(0.0..MAX_POWER_W).contains(&w) {
            return Err(format!("{entry:?} out of order or of range"));
        }
        string_is(entry, &format!("{k} -> {w:.2}"))?;
        last = Some(k);
    }
    Ok(())
}

/// [`prometheus_rule`]'s property: refused with a reason, or three comment lines and a YAML
/// document of exactly `groups: [one group]`, the group exactly `name` (wattson's, for
/// `host`) and `rules: [one rule]`, the rule exactly `record` ([`RULE_NAME`]), `expr` (the
/// expression [`rule_expression`] composes, whole) and `labels` of exactly `host` (`host`)
/// and `source` (wattson's estimate).
pub fn prometheus_rule_holds(model: &WallModel, host: &str) -> Result<(), String> {
    let text = match prometheus_rule(model, host) {
        Err(e) if e.to_string().is_empty() => return Err("refused without a reason".into()),
        Err(_) => return Ok(()),
        Ok(text) => text,
    };
    accepted_is_vetted(model)?;
    let doc = parsed(&text, 3)?;
    let group = only(at(&doc, &["groups"], "groups")?)?;
    string_is(at(group, &["name", "rules"], "name")?, &rule_group(host))?;
    let rule = only(at(group, &["name", "rules"], "rules")?)?;
    let keys = ["record", "expr", "labels"];
    string_is(at(rule, &keys, "record")?, RULE_NAME)?;
    let expr = rule_expression(model, host).map_err(|e| e.to_string())?;
    string_is(at(rule, &keys, "expr")?, &expr)?;
    let labels = at(rule, &keys, "labels")?;
    string_is(at(labels, &["host", "source"], "host")?, host)?;
    string_is(
        at(labels, &["host", "source"], "source")?,
        &SourceId::Estimate.to_string(),
    )
}
