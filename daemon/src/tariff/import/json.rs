//! The JSON APIs: Octopus Energy's unit rates and the GB National Grid carbon intensity.

use crate::tariff::series::Slot;

use super::{Format, ImportError, Parsed, err, utc_time};

/// The line of the `n`th (0-based) occurrence of `needle` in `text`, for errors about the
/// nth JSON record (each record names its keys once).
fn line_of_nth(text: &str, needle: &str, n: usize) -> usize {
    text.match_indices(needle)
        .nth(n)
        .map_or(0, |(at, _)| text[..at].matches('\n').count() + 1)
}

pub(super) fn json(text: &str) -> Result<serde_json::Value, ImportError> {
    serde_json::from_str(text.trim_start_matches('\u{feff}'))
        .map_err(|e| err(e.line(), "json", format!("not valid JSON: {e}")))
}

pub(super) fn octopus(text: &str, exc_vat: bool) -> Result<Parsed, ImportError> {
    let v = json(text)?;
    let results = v.get("results").and_then(|r| r.as_array()).ok_or_else(|| {
        err(
            1,
            "results",
            "no \"results\" array: not an Octopus unit-rate file",
        )
    })?;
    let field = if exc_vat {
        "value_exc_vat"
    } else {
        "value_inc_vat"
    };
    let mut out = Parsed {
        format: Format::Octopus,
        unit: "GBP".to_owned(),
        slots: Vec::with_capacity(results.len()),
        notes: vec![format!(
            "{field} in pence per kWh, divided by 100 for GBP per kWh{}",
            if exc_vat {
                " (without VAT)"
            } else {
                " (with VAT)"
            }
        )],
        lines: Vec::with_capacity(results.len()),
    };
    for (i, r) in results.iter().enumerate() {
        let line = line_of_nth(text, "\"valid_from\"", i).max(1);
        // An error names the line of the field itself, where the file has it.
        let at = |key: &str| {
            let l = line_of_nth(text, &format!("\"{key}\""), i);
            if l == 0 { line } else { l }
        };
        let time = |key: &str| -> Result<i64, ImportError> {
            let line = at(key);
            match r.get(key) {
                Some(serde_json::Value::String(s)) => utc_time(s)
                    .ok_or_else(|| err(line, key, format!("{s:?} is not a UTC time (RFC 3339)"))),
                Some(serde_json::Value::Null) | None => Err(err(
                    line,
                    key,
                    "missing: every slot needs valid_from and valid_to (an open-ended rate \
                     is a fixed tariff: put it in [tariff] price_per_kwh)",
                )),
                Some(other) => Err(err(line, key, format!("{other} is not a time"))),
            }
        };
        let start_ms = time("valid_from")?;
        let end_ms = time("valid_to")?;
        let pence = match r.get(field) {
            Some(serde_json::Value::Number(n)) => n.as_f64().unwrap_or(f64::NAN),
            Some(other) => {
                return Err(err(
                    at(field),
                    field,
                    format!("{other} is not a number of pence"),
                ));
            }
            None => return Err(err(line, field, "missing")),
        };
        out.slots.push(Slot {
            start_ms,
            end_ms,
            value: pence / 100.0,
        });
        out.lines.push(line);
    }
    if let Some(next) = v.get("next").and_then(|n| n.as_str()) {
        out.notes.push(format!(
            "this file is one page of {} results; the next page is {next}: import it too \
             (several files may be given at once)",
            v.get("count")
                .and_then(serde_json::Value::as_u64)
                .unwrap_or(0)
        ));
    }
    Ok(out)
}

pub(super) fn carbon_json(text: &str) -> Result<Parsed, ImportError> {
    let v = json(text)?;
    let data = v.get("data").and_then(|r| r.as_array()).ok_or_else(|| {
        err(
            1,
            "data",
            "no \"data\" array: not a carbon intensity API file",
        )
    })?;
    let mut out = Parsed {
        format: Format::CarbonJson,
        unit: "gCO2/kWh".to_owned(),
        slots: Vec::new(),
        notes: vec!["the actual intensity where known, else the forecast".to_owned()],
        lines: Vec::new(),
    };
    for (i, r) in data.iter().enumerate() {
        let line = line_of_nth(text, "\"from\"", i).max(1);
        let time = |key: &str| -> Result<i64, ImportError> {
            r.get(key)
                .and_then(|s| s.as_str())
                .and_then(utc_time)
                .ok_or_else(|| err(line, key, "missing or not a UTC time"))
        };
        let start_ms = time("from")?;
        let end_ms = time("to")?;
        let intensity = r.get("intensity");
        let value = ["actual", "forecast"]
            .iter()
            .find_map(|k| {
                intensity
                    .and_then(|x| x.get(*k))
                    .and_then(serde_json::Value::as_f64)
            })
            .ok_or_else(|| err(line, "intensity", "neither actual nor forecast is a number"))?;
        out.slots.push(Slot {
            start_ms,
            end_ms,
            value,
        });
        out.lines.push(line);
    }
    Ok(out)
}
