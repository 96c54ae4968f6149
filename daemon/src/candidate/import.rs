//! SPECpower_ssj2008 results as CSV, one row per result, into candidates.
//!
//! The header names the columns; they are found by name (case and spacing do not matter),
//! in any order, and columns not listed here are ignored:
//!
//! - `System` (or `System Name`): required, and the candidate's name (commas dropped; a
//!   name that repeats in the file gets ` #LINE`).
//! - `Hardware Vendor` (or `Vendor`), `Processor` (or `CPU Name`), `# Cores` (or `Cores`),
//!   `# Threads` (or `Threads`), `Memory (GB)` (or `Memory`), `Published` (or
//!   `Publication Date`): kept as they are.
//! - Per target load, as SPEC's export heads them: `ssj_ops @ 100% of target load` ...
//!   `ssj_ops @ 10% of target load`, `Average watts @ 100% of target load` ...
//!   `Average watts @ 10% of target load` and `Average watts @ active idle` (also
//!   `avg. watts @ 100%`, `avg. power @ 50%`: the part before `@` says watts or ssj_ops,
//!   the part after it the load).
//! - `Result (overall ssj_ops/watt)` (any header holding `ssj_ops/watt`): the score.
//!
//! A file has watts at every target load from 10 % to 100 % and at active idle (the
//! published curve), or at 100 % and active idle only (the widely shared two-point form,
//! which the report then interpolates linearly and says so). Anything else is refused whole,
//! naming the line and column: a row with the wrong number of fields, a figure that is not
//! a number, watts that are negative, NaN or beyond [`MAX_WATTS`], a file that is not UTF-8
//! text, larger than [`MAX_FILE_BYTES`] or of more than [`MAX_ROWS`] rows.
//!
//! Units out: W, ssj_ops, GB, load as a share of maximum throughput.

use std::collections::HashMap;

use super::{BadInput, Candidate, MAX_TEXT_CHARS};
use crate::analysis::candidate::{Curve, CurveKind, CurvePoint, MAX_WATTS};

/// The largest file read, bytes (SPEC's whole result list is a few MB).
pub const MAX_FILE_BYTES: u64 = 8 * 1024 * 1024;
/// The most rows one import holds.
pub const MAX_ROWS: usize = 20_000;

/// Why a file is refused, with its line (1-based) and column where there is one.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportError {
    pub line: usize,
    pub column: Option<String>,
    pub message: String,
}

impl std::fmt::Display for ImportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.column {
            Some(c) => write!(f, "line {}, column {c:?}: {}", self.line, self.message),
            None => write!(f, "line {}: {}", self.line, self.message),
        }
    }
}

fn err(line: usize, column: Option<&str>, message: impl Into<String>) -> ImportError {
    ImportError {
        line,
        column: column.map(str::to_owned),
        message: message.into(),
    }
}

/// What one column holds.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Col {
    System,
    Vendor,
    Cpu,
    Cores,
    Threads,
    Memory,
    Published,
    Score,
    /// W at a load (0 = active idle), in whole percent.
    Watts(u32),
    /// ssj_ops at a load, in whole percent.
    Ops(u32),
}

/// A header as compared: lower case, single spaces.
fn norm(h: &str) -> String {
    h.trim_start_matches('\u{feff}')
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// The load a header's part after `@` names, in whole percent: `active idle` is 0,
/// `100% of target load` is 100.
fn load_of(after: &str) -> Option<u32> {
    let a = after.trim();
    if a.starts_with("active idle") || a == "idle" {
        return Some(0);
    }
    let digits: String = a.chars().take_while(char::is_ascii_digit).collect();
    let rest = a[digits.len()..].trim_start();
    if digits.is_empty() || !rest.starts_with('%') {
        return None;
    }
    digits.parse().ok()
}

fn column_of(header: &str) -> Option<Col> {
    let h = norm(header);
    if let Some((before, after)) = h.split_once('@') {
        let load = load_of(after)?;
        return if before.contains("ssj_ops") {
            Some(Col::Ops(load))
        } else if before.contains("watt") || before.contains("power") {
            Some(Col::Watts(load))
        } else {
            None
        };
    }
    Some(match h.as_str() {
        "system" | "system name" => Col::System,
        "hardware vendor" | "vendor" => Col::Vendor,
        "processor" | "cpu name" => Col::Cpu,
        "# cores" | "cores" | "total cores" => Col::Cores,
        "# threads" | "threads" | "total threads" => Col::Threads,
        "memory (gb)" | "memory" | "total memory (gb)" | "memory gb" => Col::Memory,
        "published" | "publication date" | "published date" => Col::Published,
        _ if h.contains("ssj_ops/watt") || h == "result" || h == "score" => Col::Score,
        _ => return None,
    })
}

/// A number as SPEC's tables write it: `1,234,567` (thousands separators) or `123.4`.
fn number(s: &str) -> Option<f64> {
    let t: String = s.chars().filter(|c| *c != ',' && *c != '_').collect();
    t.trim().parse::<f64>().ok().filter(|v| v.is_finite())
}

/// Text kept from a row: printable, not too long; empty is none.
fn text(line: usize, column: &str, s: &str) -> Result<Option<String>, ImportError> {
    if s.is_empty() {
        return Ok(None);
    }
    if s.chars().any(char::is_control) {
        return Err(err(line, Some(column), "holds a control character"));
    }
    if s.chars().count() > MAX_TEXT_CHARS {
        return Err(err(
            line,
            Some(column),
            format!("longer than {MAX_TEXT_CHARS} characters"),
        ));
    }
    Ok(Some(s.to_owned()))
}

/// The candidates of a SPECpower CSV file, named `origin` (the file's name) in their
/// `origin` field; all or none.
pub fn parse(text_in: &str, origin: &str) -> Result<Vec<Candidate>, ImportError> {
    let records =
        crate::csv_records::records(text_in, b',', false).map_err(|(l, m)| err(l, None, m))?;
    let mut lines = records.into_iter();
    let Some(crate::csv_records::Record {
        line: hline,
        fields: header,
    }) = lines.next()
    else {
        return Err(err(1, None, "the file is empty: no header, no rows"));
    };
    let columns = header_columns(hline, &header)?;

    let mut out: Vec<Candidate> = Vec::new();
    let mut names: HashMap<String, usize> = HashMap::new();
    for crate::csv_records::Record { line, fields: row } in lines {
        if out.len() >= MAX_ROWS {
            return Err(err(
                line,
                None,
                format!("more than {MAX_ROWS} rows: no result list is that long"),
            ));
        }
        let mut c = candidate_row(line, &row, header.len(), &columns, origin)?;
        let seen = names.entry(c.name.clone()).or_insert(0);
        *seen += 1;
        if *seen > 1 {
            c.name = format!("{} #{line}", c.name);
        }
        super::check_name(&c.name).map_err(|e| err(line, None, e.0))?;
        out.push(c);
    }
    if out.is_empty() {
        return Err(err(hline, None, "a header and no rows: nothing to import"));
    }
    Ok(out)
}

/// What a header says: the columns read (field index, figure, header text), the loads
/// with a watts column (ascending) and the curve they make.
struct Columns<'a> {
    cols: Vec<(usize, Col, &'a str)>,
    watt_loads: Vec<u32>,
    kind: CurveKind,
}

/// The columns of the header on line `hline`: each figure once, a `System` column, watts
/// at every load or at idle and 100 % only, ssj_ops only where there are watts.
fn header_columns(hline: usize, header: &[String]) -> Result<Columns<'_>, ImportError> {
    let mut cols: Vec<(usize, Col, &str)> = Vec::new();
    for (i, h) in header.iter().enumerate() {
        if let Some(c) = column_of(h) {
            if let Some((_, _, first)) = cols.iter().find(|(_, x, _)| *x == c) {
                return Err(err(
                    hline,
                    Some(h),
                    format!("the same figure as column {first:?}: which one holds it?"),
                ));
            }
            cols.push((i, c, h));
        }
    }
    if !cols.iter().any(|c| c.1 == Col::System) {
        return Err(err(
            hline,
            None,
            "no \"System\" column: this is not a SPECpower result list (see `wattson candidate \
             import --help` for the columns read)",
        ));
    }
    let mut watt_loads: Vec<u32> = cols
        .iter()
        .filter_map(|c| match c.1 {
            Col::Watts(l) => Some(l),
            _ => None,
        })
        .collect();
    watt_loads.sort_unstable();
    let full: Vec<u32> = (0..=10).map(|i| i * 10).collect();
    let kind = if watt_loads == full {
        CurveKind::Spec
    } else if watt_loads == [0, 100] {
        CurveKind::SpecTwoPoint
    } else {
        return Err(err(
            hline,
            None,
            format!(
                "watts columns at {}: a SPECpower file has average watts at active idle and at \
                 every target load from 10 % to 100 %, or at active idle and 100 % only",
                if watt_loads.is_empty() {
                    "no load".to_owned()
                } else {
                    watt_loads
                        .iter()
                        .map(|l| format!("{l} %"))
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            ),
        ));
    };
    if let Some((_, _, h)) = cols
        .iter()
        .find(|c| matches!(c.1, Col::Ops(l) if !watt_loads.contains(&l)))
    {
        return Err(err(
            hline,
            Some(h),
            "ssj_ops at a load with no watts column",
        ));
    }
    Ok(Columns {
        cols,
        watt_loads,
        kind,
    })
}

/// The candidate on row `line` (`raw`, which must have `width` fields), its curve at the
/// header's loads.
fn candidate_row(
    line: usize,
    row: &[String],
    width: usize,
    columns: &Columns<'_>,
    origin: &str,
) -> Result<Candidate, ImportError> {
    let Columns {
        cols,
        watt_loads,
        kind,
    } = columns;
    let kind = *kind;
    if row.len() != width {
        return Err(err(
            line,
            None,
            format!(
                "{} fields, the header has {}: a comma in an unquoted name?",
                row.len(),
                width
            ),
        ));
    }
    let mut points: Vec<CurvePoint> = watt_loads
        .iter()
        .map(|&l| CurvePoint {
            load: f64::from(l) / 100.0,
            watts: f64::NAN,
            ssj_ops: None,
        })
        .collect();
    let mut c = Candidate::new(
        String::new(),
        Curve::new(
            vec![
                CurvePoint {
                    load: 0.0,
                    watts: 1.0,
                    ssj_ops: None,
                },
                CurvePoint {
                    load: 1.0,
                    watts: 1.0,
                    ssj_ops: None,
                },
            ],
            kind,
        )
        .map_err(|e| err(line, None, e.to_string()))?,
        format!("{origin} line {line}"),
    );
    for &(i, col, h) in cols {
        set_field(&mut c, &mut points, line, col, h, row[i].as_str())?;
    }
    c.curve = Curve::new(points, kind).map_err(|e| err(line, None, e.to_string()))?;
    Ok(c)
}

/// Field `v` of column `h` (figure `col`) on row `line` into `cand`, or into `points` for a
/// load's watts and ssj_ops.
fn set_field(
    cand: &mut Candidate,
    points: &mut [CurvePoint],
    line: usize,
    col: Col,
    h: &str,
    v: &str,
) -> Result<(), ImportError> {
    let num = |what: &str| -> Result<Option<f64>, ImportError> {
        if v.is_empty() {
            return Ok(None);
        }
        number(v)
            .map(Some)
            .ok_or_else(|| err(line, Some(h), format!("{v:?} is not {what}")))
    };
    let count = |what: &str| -> Result<Option<u32>, ImportError> {
        match num(what)? {
            None => Ok(None),
            Some(n) if (1.0..=1e6).contains(&n) && n.fract() == 0.0 => Ok(Some(n as u32)),
            Some(_) => Err(err(line, Some(h), format!("{v:?} is not {what}"))),
        }
    };
    match col {
        Col::System => {
            let name: String = v
                .replace(',', " ")
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            if name.is_empty() {
                return Err(err(line, Some(h), "no system name"));
            }
            cand.system = text(line, h, v)?;
            cand.name = name;
        }
        Col::Vendor => cand.vendor = text(line, h, v)?,
        Col::Cpu => cand.cpu = text(line, h, v)?,
        Col::Published => cand.published = text(line, h, v)?,
        Col::Cores => cand.cores = count("a number of cores")?,
        Col::Threads => cand.threads = count("a number of threads")?,
        Col::Memory => {
            cand.memory_gb = num("memory in GB")?;
            if cand.memory_gb.is_some_and(|m| m <= 0.0 || m > 1e7) {
                return Err(err(line, Some(h), format!("{v:?} GB is not a memory size")));
            }
        }
        Col::Score => {
            cand.overall_ssj_ops_per_watt = num("a score in ssj_ops per watt")?;
            if cand.overall_ssj_ops_per_watt.is_some_and(|s| s < 0.0) {
                return Err(err(line, Some(h), "a negative score"));
            }
        }
        Col::Watts(l) => {
            let w = num("watts")?
                .ok_or_else(|| err(line, Some(h), "no watts: every load needs its figure"))?;
            if w <= 0.0 || w > MAX_WATTS {
                return Err(err(
                    line,
                    Some(h),
                    format!(
                        "{w} W is not a power a machine draws: above 0 W (a running machine draws \
                         some even at idle) and at most {MAX_WATTS} W"
                    ),
                ));
            }
            if let Some(p) = points.iter_mut().find(|p| p.load == f64::from(l) / 100.0) {
                p.watts = w;
            }
        }
        Col::Ops(l) => {
            let o = num("a throughput in ssj_ops")?;
            if o.is_some_and(|o| o < 0.0) {
                return Err(err(line, Some(h), "a negative throughput"));
            }
            if let Some(p) = points.iter_mut().find(|p| p.load == f64::from(l) / 100.0) {
                p.ssj_ops = o;
            }
        }
    }
    Ok(())
}

/// Reads `path` (at most [`MAX_FILE_BYTES`], UTF-8) for [`parse`].
#[allow(
    clippy::disallowed_methods,
    reason = "a candidate file to import: never a database"
)]
pub fn read(path: &std::path::Path) -> Result<String, BadInput> {
    use std::io::Read as _;
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes))
        .map_err(|e| BadInput(format!("{}: {e}: nothing imported", path.display())))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(BadInput(format!(
            "{}: larger than {} MiB, which no result list is: nothing imported",
            path.display(),
            MAX_FILE_BYTES / 1024 / 1024
        )));
    }
    String::from_utf8(bytes).map_err(|e| {
        BadInput(format!(
            "{}: not UTF-8 text (byte {}): nothing imported",
            path.display(),
            e.utf8_error().valid_up_to()
        ))
    })
}

#[cfg(test)]
mod tests;
