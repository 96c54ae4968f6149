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

use crate::zone::Zone;
use chrono::{DateTime, NaiveDateTime, Utc};

use crate::tariff::series::Slot;

mod csv;
mod json;

use csv::{day_ahead, plain_csv};
use json::{carbon_json, octopus};

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
    pub timezone: Option<Zone>,
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
        if !super::SLOT_RANGE_MS.contains(&s.start_ms) || s.end_ms > super::SLOT_RANGE_MS.end {
            return Err(err(
                line,
                "start",
                format!(
                    "the slot {}..{} is outside the years 1970 to 2100 that price and carbon \
                     series are taken for: check the file's dates",
                    rfc3339(s.start_ms),
                    rfc3339(s.end_ms),
                ),
            ));
        }
        if s.end_ms - s.start_ms > super::MAX_SLOT_MS {
            return Err(err(
                line,
                "end",
                format!(
                    "the slot {}..{} is {:.0} days long; a price or carbon slot is at most {} \
                     days (a tariff's periods and dated changes belong in the configuration)",
                    rfc3339(s.start_ms),
                    rfc3339(s.end_ms),
                    (s.end_ms - s.start_ms) as f64 / 86_400_000.0,
                    super::MAX_SLOT_MS / 86_400_000
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

#[cfg(test)]
mod tests;
