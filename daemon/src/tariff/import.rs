//! Parsers for the price and carbon-intensity files `wattson tariff import` reads, each
//! written from the published format:
//!
//! - Octopus Energy's unit-rate API (`/v1/products/<product>/electricity-tariffs/<tariff>/
//!   standard-unit-rates/`): JSON `{"count", "next", "previous", "results": [{"value_exc_vat",
//!   "value_inc_vat", "valid_from", "valid_to", ...}]}`, pence per kWh, UTC times, newest
//!   first, one page per file (`next` names the following page).
//! - ENTSO-E transparency platform day-ahead prices, "Export Data" as CSV: a `MTU (CET/CEST)`
//!   column `"01.11.2026 00:00 - 01.11.2026 01:00"` (or `01/11/2026 00:00:00 - ...`) in the
//!   zone its header names, and a `Day-ahead Price [EUR/MWh]` column.
//! - Nord Pool day-ahead prices exported as CSV: `Delivery Start (CET)`, `Delivery End
//!   (CET)` and a price column such as `SE3 (EUR)`, per MWh; `;` and decimal commas allowed.
//! - Plain CSV `start,end,price_per_kwh` (RFC 3339 times; a header line is optional).
//! - The GB National Grid carbon intensity API (`/intensity/<from>/<to>`): JSON `{"data":
//!   [{"from", "to", "intensity": {"forecast", "actual", "index"}}]}`, g CO2 per kWh.
//! - Plain CSV `start,end,g_co2_per_kwh`.
//!
//! Every error names the line (and the field) it is about; a file with any error gives no
//! slots at all. Units out: UTC ms, currency per kWh or g CO2 per kWh.

use chrono::{DateTime, LocalResult, NaiveDateTime, TimeZone, Utc};
use chrono_tz::Tz;

use crate::analysis::price_series::Slot;

/// The largest file read, bytes: years of quarter-hour slots fit many times over.
pub const MAX_FILE_BYTES: u64 = 32 * 1024 * 1024;
/// The most slots one import holds (ten years of quarter hours).
pub const MAX_SLOTS: usize = 400_000;
/// Carbon intensities above this are refused, g CO2 per kWh (coal is about 1000).
pub const MAX_CARBON: f64 = 2000.0;

/// The formats `wattson tariff import` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Decide from the file's contents.
    Auto,
    /// Octopus Energy unit rates (JSON, pence per kWh).
    Octopus,
    /// ENTSO-E transparency platform day-ahead prices (CSV, per MWh).
    Entsoe,
    /// Nord Pool day-ahead prices (CSV, per MWh).
    Nordpool,
    /// start,end,price_per_kwh.
    Csv,
    /// GB National Grid carbon intensity API (JSON, g CO2 per kWh).
    CarbonJson,
    /// start,end,g_co2_per_kwh.
    CarbonCsv,
}

impl Format {
    pub fn name(self) -> &'static str {
        match self {
            Format::Auto => "auto",
            Format::Octopus => "octopus-json",
            Format::Entsoe => "entsoe-csv",
            Format::Nordpool => "nordpool-csv",
            Format::Csv => "plain-csv",
            Format::CarbonJson => "carbon-json",
            Format::CarbonCsv => "carbon-csv",
        }
    }

    pub fn is_carbon(self) -> bool {
        matches!(self, Format::CarbonJson | Format::CarbonCsv)
    }

    /// The series name an import gets unless `--name` says otherwise.
    pub fn default_name(self) -> &'static str {
        match self {
            Format::Octopus => "octopus",
            Format::Entsoe => "entsoe",
            Format::Nordpool => "nordpool",
            Format::Csv | Format::Auto => "imported",
            Format::CarbonJson | Format::CarbonCsv => "carbon",
        }
    }
}

/// What the caller chose.
#[derive(Debug, Clone)]
pub struct Options {
    pub format: Format,
    /// Octopus: the price without VAT (`value_exc_vat`) instead of with it.
    pub exc_vat: bool,
    /// The currency of a plain CSV (others say their own).
    pub currency: String,
    /// The zone of day-ahead times when the header names none.
    pub timezone: Option<Tz>,
    /// The price column of a day-ahead CSV with several areas.
    pub column: Option<String>,
    /// Prices beyond this (either sign) are refused, currency per kWh.
    pub max_price: f64,
}

/// A file read into slots.
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed {
    pub format: Format,
    /// ISO 4217 code, or `gCO2/kWh`.
    pub unit: String,
    /// Sorted by start, none overlapping.
    pub slots: Vec<Slot>,
    /// What was done to the numbers, in words ("EUR/MWh converted to EUR/kWh").
    pub notes: Vec<String>,
    /// The source line of each slot, for errors found later.
    pub lines: Vec<usize>,
}

/// Why a file cannot be imported: the line (1-based, 0 when it is about the whole file)
/// and the field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}{field}: {message}", if *.line > 0 { format!("line {}: ", .line) } else { String::new() })]
pub struct ImportError {
    pub line: usize,
    pub field: String,
    pub message: String,
}

fn err(line: usize, field: &str, message: impl Into<String>) -> ImportError {
    ImportError {
        line,
        field: field.to_owned(),
        message: message.into(),
    }
}

/// Reads `text` as `opts.format` (or the format it looks like).
pub fn parse(text: &str, opts: &Options) -> Result<Parsed, ImportError> {
    let format = match opts.format {
        Format::Auto => detect(text)?,
        f => f,
    };
    let mut parsed = match format {
        Format::Octopus => octopus(text, opts.exc_vat)?,
        Format::CarbonJson => carbon_json(text)?,
        Format::Entsoe | Format::Nordpool => day_ahead(text, format, opts)?,
        Format::Csv | Format::CarbonCsv | Format::Auto => plain_csv(text, format, opts)?,
    };
    parsed.format = format;
    check(&mut parsed, opts)?;
    Ok(parsed)
}

/// The format a file looks like: JSON with `results` (Octopus) or `data` (carbon), CSV
/// with an `MTU` column (ENTSO-E) or `Delivery Start` (Nord Pool), else plain CSV.
pub fn detect(text: &str) -> Result<Format, ImportError> {
    let head = text.trim_start_matches('\u{feff}').trim_start();
    if head.starts_with('{') {
        if head.contains("\"results\"") {
            return Ok(Format::Octopus);
        }
        if head.contains("\"intensity\"") {
            return Ok(Format::CarbonJson);
        }
        return Err(err(
            1,
            "format",
            "a JSON file with neither \"results\" (Octopus unit rates) nor \"data\" with \
             \"intensity\" (GB carbon intensity): give --format",
        ));
    }
    let first = head.lines().next().unwrap_or_default().to_ascii_lowercase();
    if first.contains("mtu") {
        Ok(Format::Entsoe)
    } else if first.contains("delivery start") {
        Ok(Format::Nordpool)
    } else {
        Ok(Format::Csv)
    }
}

/// Sorted, every slot non-empty and in range, none overlapping.
fn check(p: &mut Parsed, opts: &Options) -> Result<(), ImportError> {
    if p.slots.is_empty() {
        return Err(err(0, "slots", "the file holds no slots"));
    }
    if p.slots.len() > MAX_SLOTS {
        return Err(err(
            0,
            "slots",
            format!(
                "{} slots is more than the {MAX_SLOTS} one import takes: split the file",
                p.slots.len()
            ),
        ));
    }
    let carbon = p.format.is_carbon();
    for (s, &line) in p.slots.iter().zip(&p.lines) {
        if s.end_ms <= s.start_ms {
            return Err(err(
                line,
                "end",
                format!(
                    "{} is not after the start {}",
                    rfc3339(s.end_ms),
                    rfc3339(s.start_ms)
                ),
            ));
        }
        let field = if carbon { "intensity" } else { "price" };
        if !s.value.is_finite() {
            return Err(err(
                line,
                field,
                format!("{} is not a finite number", s.value),
            ));
        }
        if carbon && !(0.0..=MAX_CARBON).contains(&s.value) {
            return Err(err(
                line,
                field,
                format!(
                    "{} g CO2/kWh is outside 0..{MAX_CARBON}: not a grid's carbon intensity",
                    s.value
                ),
            ));
        }
        if !carbon && s.value.abs() > opts.max_price {
            return Err(err(
                line,
                field,
                format!(
                    "{} {}/kWh is beyond +-{} per kWh: not a believable price (a per-MWh \
                     figure in a per-kWh file?); give --max-price to accept it",
                    s.value, p.unit, opts.max_price
                ),
            ));
        }
    }
    let mut order: Vec<usize> = (0..p.slots.len()).collect();
    order.sort_by_key(|&i| p.slots[i].start_ms);
    for w in order.windows(2) {
        let (a, b) = (&p.slots[w[0]], &p.slots[w[1]]);
        if b.start_ms < a.end_ms {
            let (la, lb) = (p.lines[w[0]], p.lines[w[1]]);
            return Err(err(
                la.max(lb),
                "start",
                format!(
                    "the slot {}..{} overlaps the one on line {} ({}..{}): one file gives one \
                     price per instant",
                    rfc3339(p.slots[if la >= lb { w[0] } else { w[1] }].start_ms),
                    rfc3339(p.slots[if la >= lb { w[0] } else { w[1] }].end_ms),
                    la.min(lb),
                    rfc3339(p.slots[if la >= lb { w[1] } else { w[0] }].start_ms),
                    rfc3339(p.slots[if la >= lb { w[1] } else { w[0] }].end_ms),
                ),
            ));
        }
    }
    p.slots = order.iter().map(|&i| p.slots[i]).collect();
    p.lines = order.iter().map(|&i| p.lines[i]).collect();
    Ok(())
}

pub fn rfc3339(ms: i64) -> String {
    DateTime::<Utc>::from_timestamp_millis(ms).map_or_else(
        || format!("{ms} ms"),
        |t| t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true),
    )
}

/// A UTC time as the APIs write it: RFC 3339, or `2026-11-30T23:30Z` (no seconds, as the
/// carbon intensity API writes it).
fn utc_time(s: &str) -> Option<i64> {
    let s = s.trim();
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Some(t.timestamp_millis());
    }
    let t = s.strip_suffix('Z')?;
    NaiveDateTime::parse_from_str(t, "%Y-%m-%dT%H:%M")
        .ok()
        .map(|n| n.and_utc().timestamp_millis())
}

/// The line of the `n`th (0-based) occurrence of `needle` in `text`, for errors about the
/// nth JSON record (each record names its keys once).
fn line_of_nth(text: &str, needle: &str, n: usize) -> usize {
    text.match_indices(needle)
        .nth(n)
        .map_or(0, |(at, _)| text[..at].matches('\n').count() + 1)
}

fn json(text: &str) -> Result<serde_json::Value, ImportError> {
    serde_json::from_str(text.trim_start_matches('\u{feff}'))
        .map_err(|e| err(e.line(), "json", format!("not valid JSON: {e}")))
}

fn octopus(text: &str, exc_vat: bool) -> Result<Parsed, ImportError> {
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

fn carbon_json(text: &str) -> Result<Parsed, ImportError> {
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

/// Splits one CSV line on `delim`, honouring double quotes.
fn fields(line: &str, delim: char) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            '"' => quoted = !quoted,
            c if c == delim && !quoted => out.push(std::mem::take(&mut cur).trim().to_owned()),
            c => cur.push(c),
        }
    }
    out.push(cur.trim().to_owned());
    out
}

/// A number as day-ahead exports write it (`86.52`, or `86,52` in `;`-separated files).
fn number(s: &str, decimal_comma: bool) -> Option<f64> {
    let t = s.trim();
    let t = if decimal_comma {
        t.replace(',', ".")
    } else {
        t.to_owned()
    };
    t.parse::<f64>().ok()
}

/// The zone a header names: `(CET/CEST)`, `(CET)`, `(EET)`, `(UTC)`, ...
fn zone_of(header: &str) -> Option<Tz> {
    let h = header.to_ascii_uppercase();
    let inner = h.split_once('(')?.1.split_once(')')?.0.trim().to_owned();
    Some(match inner.split('/').next()?.trim() {
        "UTC" | "GMT" => chrono_tz::UTC,
        "CET" | "CEST" => chrono_tz::Europe::Brussels,
        "EET" | "EEST" => chrono_tz::Europe::Helsinki,
        "WET" | "WEST" => chrono_tz::Europe::Lisbon,
        "GMT/BST" | "UK" | "BST" => chrono_tz::Europe::London,
        _ => return None,
    })
}

/// The currency a price header names: `[EUR/MWh]`, `(EUR/MWh)`, `SE3 (EUR)`.
fn currency_of(header: &str) -> Option<String> {
    let h = header.to_ascii_uppercase();
    let open = h.find(['[', '('])?;
    let inner: String = h[open + 1..]
        .chars()
        .take_while(char::is_ascii_alphabetic)
        .collect();
    (inner.len() == 3).then_some(inner)
}

/// A local wall-clock time in `tz` to UTC ms. When the clock goes back the hour happens
/// twice: the one that follows `previous_end` (the last slot's end) is taken, else the
/// earlier one.
fn local_ms(t: NaiveDateTime, tz: Tz, previous_end: Option<i64>) -> Option<i64> {
    match tz.from_local_datetime(&t) {
        LocalResult::Single(x) => Some(x.timestamp_millis()),
        LocalResult::Ambiguous(a, b) => {
            let (a, b) = (a.timestamp_millis(), b.timestamp_millis());
            Some(
                if previous_end == Some(b) || previous_end.is_some_and(|p| p > a) {
                    b
                } else {
                    a
                },
            )
        }
        LocalResult::None => None,
    }
}

fn local_time(s: &str) -> Option<NaiveDateTime> {
    let s = s.trim();
    [
        "%d.%m.%Y %H:%M",
        "%d.%m.%Y %H:%M:%S",
        "%d/%m/%Y %H:%M:%S",
        "%d/%m/%Y %H:%M",
        "%Y-%m-%d %H:%M:%S",
        "%Y-%m-%d %H:%M",
        "%Y-%m-%dT%H:%M:%S",
        "%Y-%m-%dT%H:%M",
    ]
    .iter()
    .find_map(|f| NaiveDateTime::parse_from_str(s, f).ok())
}

fn day_ahead(text: &str, format: Format, opts: &Options) -> Result<Parsed, ImportError> {
    let mut lines = text
        .trim_start_matches('\u{feff}')
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let Some((h_index, header_line)) = lines.next() else {
        return Err(err(0, "header", "the file is empty"));
    };
    let delim = if header_line.matches(';').count() > header_line.matches(',').count() {
        ';'
    } else {
        ','
    };
    let header = fields(header_line, delim);
    let lower: Vec<String> = header.iter().map(|h| h.to_ascii_lowercase()).collect();
    let find = |pred: &dyn Fn(&str) -> bool| lower.iter().position(|h| pred(h));
    let (start_col, end_col) = if format == Format::Entsoe {
        let c = find(&|h| h.contains("mtu")).ok_or_else(|| {
            err(
                h_index + 1,
                "MTU",
                "no MTU column: not an ENTSO-E day-ahead export",
            )
        })?;
        (c, None)
    } else {
        let s = find(&|h| h.contains("delivery start") || h == "start")
            .ok_or_else(|| err(h_index + 1, "Delivery Start", "no Delivery Start column"))?;
        let e = find(&|h| h.contains("delivery end") || h == "end")
            .ok_or_else(|| err(h_index + 1, "Delivery End", "no Delivery End column"))?;
        (s, Some(e))
    };
    let price_cols: Vec<usize> = (0..header.len())
        .filter(|&i| i != start_col && Some(i) != end_col)
        .filter(|&i| currency_of(&header[i]).is_some() || lower[i].contains("price"))
        .filter(|&i| !lower[i].contains("intraday"))
        .collect();
    let price_col = match &opts.column {
        Some(name) => header
            .iter()
            .position(|h| h.eq_ignore_ascii_case(name))
            .ok_or_else(|| {
                err(
                    h_index + 1,
                    name,
                    format!("no such column; the header has {}", header.join(", ")),
                )
            })?,
        None => match price_cols.as_slice() {
            [one] => *one,
            [] => {
                return Err(err(
                    h_index + 1,
                    "price",
                    format!("no price column in {}", header.join(", ")),
                ));
            }
            many => {
                return Err(err(
                    h_index + 1,
                    "price",
                    format!(
                        "several price columns ({}): choose one with --column",
                        many.iter()
                            .map(|&i| header[i].as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ));
            }
        },
    };
    let currency_col = find(&|h| h == "currency");
    let tz = zone_of(&header[start_col])
        .or(opts.timezone)
        .ok_or_else(|| {
            err(
                h_index + 1,
                &header[start_col],
                "the header names no time zone such as (CET/CEST) or (UTC): give --timezone",
            )
        })?;
    let header_currency = currency_of(&header[price_col]);
    let per_mwh = !lower[price_col].contains("kwh");
    let mut out = Parsed {
        format,
        unit: header_currency.clone().unwrap_or_default(),
        slots: Vec::new(),
        notes: Vec::new(),
        lines: Vec::new(),
    };
    let mut skipped = 0;
    let mut previous_end: Option<i64> = None;
    for (i, line) in lines {
        let n = i + 1;
        let f = fields(line, delim);
        let get = |c: usize, name: &str| -> Result<&str, ImportError> {
            f.get(c)
                .map(String::as_str)
                .ok_or_else(|| err(n, name, "missing: the line has too few fields"))
        };
        let (start_text, end_text) = match end_col {
            None => {
                let mtu = get(start_col, &header[start_col])?;
                // "01.11.2026 00:00 - 01.11.2026 01:00", maybe with " (CET)" after.
                let mtu = mtu.split(" (").next().unwrap_or(mtu);
                mtu.split_once(" - ").ok_or_else(|| {
                    err(
                        n,
                        &header[start_col],
                        format!("{mtu:?} is not \"start - end\""),
                    )
                })?
            }
            Some(e) => (get(start_col, &header[start_col])?, get(e, &header[e])?),
        };
        let start_name = header[start_col].clone();
        let end_name = end_col.map_or_else(|| start_name.clone(), |e| header[e].clone());
        let naive = |s: &str, name: &str| {
            local_time(s).ok_or_else(|| err(n, name, format!("{s:?} is not a date and time")))
        };
        let (local_start, local_end) =
            (naive(start_text, &start_name)?, naive(end_text, &end_name)?);
        let start_ms = local_ms(local_start, tz, previous_end).ok_or_else(|| {
            err(
                n,
                &start_name,
                format!("{start_text} does not exist in {tz} (a skipped hour)"),
            )
        })?;
        // The end as the slot's length on the wall clock: "02:00 - 03:00" lasts an hour
        // whichever of the two 02:00s of a clock change it starts at.
        let end_ms = start_ms.saturating_add((local_end - local_start).num_milliseconds());
        let price_text = get(price_col, &header[price_col])?;
        let marker = price_text.trim().to_ascii_lowercase();
        if marker.is_empty() || marker == "n/e" || marker == "-" || marker == "n/a" {
            // No price published for this slot: it falls back to the configured price.
            skipped += 1;
            previous_end = Some(end_ms);
            continue;
        }
        let value = number(price_text, delim == ';').ok_or_else(|| {
            err(
                n,
                &header[price_col],
                format!("{price_text:?} is not a number"),
            )
        })?;
        if let Some(c) = currency_col
            .and_then(|c| f.get(c))
            .filter(|c| !c.is_empty())
        {
            let c = c.to_ascii_uppercase();
            if out.unit.is_empty() {
                out.unit.clone_from(&c);
            } else if c != out.unit {
                return Err(err(
                    n,
                    "Currency",
                    format!("{c} where the file's prices are in {}", out.unit),
                ));
            }
        }
        out.slots.push(Slot {
            start_ms,
            end_ms,
            value: if per_mwh { value / 1000.0 } else { value },
        });
        out.lines.push(n);
        previous_end = Some(end_ms);
    }
    if out.unit.is_empty() {
        return Err(err(
            h_index + 1,
            &header[price_col],
            "the file names no currency (such as [EUR/MWh])",
        ));
    }
    if per_mwh {
        out.notes.push(format!(
            "prices in {0}/MWh, divided by 1000 for {0}/kWh",
            out.unit
        ));
    }
    out.notes.push(format!("times read in {tz}, stored in UTC"));
    if skipped > 0 {
        out.notes.push(format!(
            "{skipped} slot(s) had no price (n/e or empty) and were left out: energy then \
             is priced at the configured price"
        ));
    }
    Ok(out)
}

fn plain_csv(text: &str, format: Format, opts: &Options) -> Result<Parsed, ImportError> {
    let carbon = format == Format::CarbonCsv;
    let value_name = if carbon {
        "g_co2_per_kwh"
    } else {
        "price_per_kwh"
    };
    let mut out = Parsed {
        format,
        unit: if carbon {
            "gCO2/kWh".to_owned()
        } else {
            opts.currency.clone()
        },
        slots: Vec::new(),
        notes: Vec::new(),
        lines: Vec::new(),
    };
    for (i, line) in text.trim_start_matches('\u{feff}').lines().enumerate() {
        let n = i + 1;
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let f = fields(line, ',');
        if out.slots.is_empty() && f.first().is_some_and(|s| s.eq_ignore_ascii_case("start")) {
            continue; // the header
        }
        if f.len() != 3 {
            return Err(err(
                n,
                "line",
                format!("{} fields where start,end,{value_name} needs 3", f.len()),
            ));
        }
        let time = |s: &str, name: &str| {
            utc_time(s).ok_or_else(|| {
                err(
                    n,
                    name,
                    format!(
                        "{s:?} is not a time with its offset (RFC 3339, e.g. 2026-11-30T23:00:00Z)"
                    ),
                )
            })
        };
        let start_ms = time(&f[0], "start")?;
        let end_ms = time(&f[1], "end")?;
        let value = f[2]
            .parse::<f64>()
            .map_err(|_| err(n, value_name, format!("{:?} is not a number", f[2])))?;
        out.slots.push(Slot {
            start_ms,
            end_ms,
            value,
        });
        out.lines.push(n);
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
