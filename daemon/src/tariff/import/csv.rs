//! The CSV exports: ENTSO-E and Nord Pool day-ahead prices (local times in the zone their
//! header names, per MWh) and the plain `start,end,value` files.

use crate::zone::Zone;
use chrono::{LocalResult, NaiveDateTime, TimeZone};

use crate::tariff::series::Slot;

use super::{Format, ImportError, Options, Parsed, err, utc_time};
use crate::csv_records::{Record, records};

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
fn zone_of(header: &str) -> Option<Zone> {
    let h = header.to_ascii_uppercase();
    let inner = h.split_once('(')?.1.split_once(')')?.0.trim().to_owned();
    Some(match inner.split('/').next()?.trim() {
        "UTC" | "GMT" => Zone::UTC,
        "CET" | "CEST" => Zone::named("Europe/Brussels").ok()?,
        "EET" | "EEST" => Zone::named("Europe/Helsinki").ok()?,
        "WET" | "WEST" => Zone::named("Europe/Lisbon").ok()?,
        "GMT/BST" | "UK" | "BST" => Zone::named("Europe/London").ok()?,
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
fn local_ms(t: NaiveDateTime, tz: Zone, previous_end: Option<i64>) -> Option<i64> {
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

/// A day-ahead export's header: its delimiter, the columns read and the zone of its times.
struct Columns {
    /// The header's line number.
    line: usize,
    delim: char,
    names: Vec<String>,
    /// ENTSO-E's MTU column ("start - end"), or Nord Pool's start column.
    start: usize,
    /// Nord Pool's end column.
    end: Option<usize>,
    price: usize,
    currency: Option<usize>,
    tz: Zone,
}

impl Columns {
    /// The header at `line`, its fields `names` split on `delim`.
    fn read(
        line: usize,
        (names, delim): (Vec<String>, char),
        format: Format,
        opts: &Options,
    ) -> Result<Self, ImportError> {
        let lower: Vec<String> = names.iter().map(|h| h.to_ascii_lowercase()).collect();
        let find = |pred: &dyn Fn(&str) -> bool| lower.iter().position(|h| pred(h));
        let (start, end) = if format == Format::Entsoe {
            let c = find(&|h| h.contains("mtu")).ok_or_else(|| {
                err(
                    line,
                    "MTU",
                    "no MTU column: not an ENTSO-E day-ahead export",
                )
            })?;
            (c, None)
        } else {
            let s = find(&|h| h.contains("delivery start") || h == "start")
                .ok_or_else(|| err(line, "Delivery Start", "no Delivery Start column"))?;
            let e = find(&|h| h.contains("delivery end") || h == "end")
                .ok_or_else(|| err(line, "Delivery End", "no Delivery End column"))?;
            (s, Some(e))
        };
        let price = price_column(line, &names, &lower, (start, end), opts)?;
        let currency = find(&|h| h == "currency");
        let tz = zone_of(&names[start]).or(opts.timezone).ok_or_else(|| {
            err(
                line,
                &names[start],
                "the header names no time zone such as (CET/CEST) or (UTC): give --timezone",
            )
        })?;
        Ok(Columns {
            line,
            delim,
            names,
            start,
            end,
            price,
            currency,
            tz,
        })
    }

    /// Field `c` of the fields `f` of line `n`.
    fn get<'a>(&self, f: &'a [String], n: usize, c: usize) -> Result<&'a str, ImportError> {
        f.get(c)
            .map(String::as_str)
            .ok_or_else(|| err(n, &self.names[c], "missing: the line has too few fields"))
    }

    /// The slot of line `n` (fields `f`) in UTC ms: when the clock goes back, the start
    /// that follows `previous_end`.
    fn times(
        &self,
        n: usize,
        f: &[String],
        previous_end: Option<i64>,
    ) -> Result<(i64, i64), ImportError> {
        let (start_col, tz) = (self.start, self.tz);
        let header = &self.names;
        let (start_text, end_text) = match self.end {
            None => {
                let mtu = self.get(f, n, start_col)?;
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
            Some(e) => (self.get(f, n, start_col)?, self.get(f, n, e)?),
        };
        let start_name = header[start_col].clone();
        let end_name = self
            .end
            .map_or_else(|| start_name.clone(), |e| header[e].clone());
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
        Ok((start_ms, end_ms))
    }
}

/// The price column: `--column` where given, else the one column whose header names a
/// currency or a price (neither a time column nor intraday).
fn price_column(
    line: usize,
    header: &[String],
    lower: &[String],
    (start_col, end_col): (usize, Option<usize>),
    opts: &Options,
) -> Result<usize, ImportError> {
    let price_cols: Vec<usize> = (0..header.len())
        .filter(|&i| i != start_col && Some(i) != end_col)
        .filter(|&i| currency_of(&header[i]).is_some() || lower[i].contains("price"))
        .filter(|&i| !lower[i].contains("intraday"))
        .collect();
    match &opts.column {
        Some(name) => header
            .iter()
            .position(|h| h.eq_ignore_ascii_case(name))
            .ok_or_else(|| {
                err(
                    line,
                    name,
                    format!("no such column; the header has {}", header.join(", ")),
                )
            }),
        None => match price_cols.as_slice() {
            [one] => Ok(*one),
            [] => Err(err(
                line,
                "price",
                format!("no price column in {}", header.join(", ")),
            )),
            many => Err(err(
                line,
                "price",
                format!(
                    "several price columns ({}): choose one with --column",
                    many.iter()
                        .map(|&i| header[i].as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )),
        },
    }
}

pub(super) fn day_ahead(text: &str, format: Format, opts: &Options) -> Result<Parsed, ImportError> {
    // The delimiter is the header's commoner of `;` and `,`.
    let header_line = text
        .trim_start_matches('\u{feff}')
        .lines()
        .find(|l| !l.trim().is_empty())
        .ok_or_else(|| err(0, "header", "the file is empty"))?;
    let delim = if header_line.matches(';').count() > header_line.matches(',').count() {
        ';'
    } else {
        ','
    };
    let mut lines = records(text, delim as u8, false)
        .map_err(|(line, why)| err(line, "line", why))?
        .into_iter();
    let Some(Record {
        line: h_line,
        fields: names,
    }) = lines.next()
    else {
        return Err(err(0, "header", "the file is empty"));
    };
    let cols = Columns::read(h_line, (names, delim), format, opts)?;
    let header = &cols.names;
    let price_col = cols.price;
    let per_mwh = !header[price_col].to_ascii_lowercase().contains("kwh");
    let mut out = Parsed {
        format,
        unit: currency_of(&header[price_col]).unwrap_or_default(),
        slots: Vec::new(),
        notes: Vec::new(),
        lines: Vec::new(),
    };
    let mut skipped = 0;
    let mut previous_end: Option<i64> = None;
    for Record { line: n, fields: f } in lines {
        let (start_ms, end_ms) = cols.times(n, &f, previous_end)?;
        let price_text = cols.get(&f, n, price_col)?;
        let marker = price_text.trim().to_ascii_lowercase();
        if marker.is_empty() || marker == "n/e" || marker == "-" || marker == "n/a" {
            // No price published for this slot: it falls back to the configured price.
            skipped += 1;
            previous_end = Some(end_ms);
            continue;
        }
        let value = number(price_text, cols.delim == ';').ok_or_else(|| {
            err(
                n,
                &header[price_col],
                format!("{price_text:?} is not a number"),
            )
        })?;
        if let Some(c) = cols
            .currency
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
            cols.line,
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
    out.notes
        .push(format!("times read in {}, stored in UTC", cols.tz));
    if skipped > 0 {
        out.notes.push(format!(
            "{skipped} slot(s) had no price (n/e or empty) and were left out: energy then \
             is priced at the configured price"
        ));
    }
    Ok(out)
}

/// A plain file's header names its columns: `start,end,price_per_kwh` (or
/// `g_co2_per_kwh`). Another value column (`price_per_mwh`, a carbon column in a price
/// import) is refused: read as currency per kWh it would be off by its unit.
fn header(n: usize, f: &[String], value_name: &str) -> Result<(), ImportError> {
    let names: Vec<String> = f.iter().map(|s| s.to_ascii_lowercase()).collect();
    if names.len() == 3 && names[1] == "end" && names[2] == value_name {
        return Ok(());
    }
    let got = f.join(",");
    let hint = match names.get(2).map(String::as_str) {
        Some("g_co2_per_kwh") => {
            " (a carbon-intensity file: import it with --format carbon-csv)".to_owned()
        }
        Some("price_per_kwh") => {
            " (a price file: import it without --format carbon-csv)".to_owned()
        }
        Some(other) if other.contains("mwh") => {
            format!(" (per MWh: divide each value by 1000 and name the column {value_name})")
        }
        _ => String::new(),
    };
    Err(err(
        n,
        "header",
        format!("the header is {got:?}; this format's is \"start,end,{value_name}\"{hint}"),
    ))
}

pub(super) fn plain_csv(text: &str, format: Format, opts: &Options) -> Result<Parsed, ImportError> {
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
    let rows = records(text, b',', true).map_err(|(line, why)| err(line, "line", why))?;
    for Record { line: n, fields: f } in rows {
        if out.slots.is_empty() && f.first().is_some_and(|s| s.eq_ignore_ascii_case("start")) {
            header(n, &f, value_name)?;
            continue;
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
