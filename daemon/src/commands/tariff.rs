//! `wattson tariff`: price and carbon-intensity series in the database.
//!
//! - `import FILE...`: Octopus unit rates, ENTSO-E / Nord Pool day-ahead CSV, plain CSV,
//!   GB carbon intensity JSON, plain carbon CSV ([`crate::tariff::import`]); every file is
//!   read and checked before anything is written, then all of them go in one transaction.
//! - `list`: the stored series, their extent and mean.
//! - `remove NAME`: delete a series.
//!
//! A short write beside a running daemon goes through SQLite's own locking (see
//! [`crate::store::lock`]); the daemon picks the new slots up at its next refresh.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use serde::Serialize;

use crate::cli::{ImportArgs, ListArgs, TariffCommand};
use crate::store::Store;
use crate::tariff::import::{self, MAX_FILE_BYTES, Parsed};
use crate::tariff::series::Slot;
use crate::tariff::store::{self as prices, Kind, NewSeries, ReplaceCount};

/// What an import did, as printed.
#[derive(Debug, Serialize)]
struct Imported {
    series: String,
    kind: Kind,
    unit: String,
    format: String,
    applied: bool,
    files: Vec<String>,
    slots: usize,
    first: String,
    last: String,
    negative: usize,
    #[serde(flatten)]
    count: ReplaceCount,
    notes: Vec<String>,
}

pub fn run(cmd: &TariffCommand, config_path: Option<&Path>) -> anyhow::Result<ExitCode> {
    let config = super::load_config(config_path)?;
    match cmd {
        TariffCommand::Import(a) => import_files(&config, a),
        TariffCommand::List(a) => list(&config, a),
        TariffCommand::Remove(a) => {
            let db = a.db.clone().unwrap_or_else(|| config.storage.path.clone());
            let store = open_for_writing(&db)?;
            if !prices::remove(store.conn(), &a.name)? {
                anyhow::bail!(
                    "no series {:?} in {} (`wattson tariff list` shows them)",
                    a.name,
                    db.display()
                );
            }
            crate::output::println(&format!("removed series {:?}", a.name));
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn open_for_writing(db: &Path) -> anyhow::Result<Store> {
    Store::open(db, &crate::store::StoreOptions::default())
        .with_context(|| format!("opening {}", db.display()))
}

/// Reads a file (or stdin) up to [`MAX_FILE_BYTES`].
#[allow(
    clippy::disallowed_methods,
    reason = "a price series to import: never a database"
)]
fn read_limited(path: &Path) -> anyhow::Result<String> {
    let mut bytes = Vec::new();
    let limit = MAX_FILE_BYTES + 1;
    if path == Path::new("-") {
        std::io::stdin()
            .take(limit)
            .read_to_end(&mut bytes)
            .context("reading stdin")?;
    } else {
        std::fs::File::open(path)
            .with_context(|| format!("opening {}", path.display()))?
            .take(limit)
            .read_to_end(&mut bytes)
            .with_context(|| format!("reading {}", path.display()))?;
    }
    if bytes.len() as u64 > MAX_FILE_BYTES {
        anyhow::bail!(
            "{}: larger than {} MiB, which no price file is: nothing imported (split it if it \
             really holds that many slots)",
            path.display(),
            MAX_FILE_BYTES / 1024 / 1024
        );
    }
    String::from_utf8(bytes).map_err(|e| {
        anyhow::anyhow!(
            "{}: not UTF-8 text (byte {}): nothing imported",
            path.display(),
            e.utf8_error().valid_up_to()
        )
    })
}

fn import_files(config: &crate::config::Config, a: &ImportArgs) -> anyhow::Result<ExitCode> {
    let parsed = parse_files(config, a)?;
    let format = parsed[0].1.format;
    let carbon = format.is_carbon();
    let unit = parsed[0].1.unit.clone();
    let slots = merged_slots(&parsed)?;
    let name = series_name(a, format)?;
    let db = a.db.clone().unwrap_or_else(|| config.storage.path.clone());
    let store = open_for_writing(&db)?;
    let origin = a
        .files
        .iter()
        .map(|f| f.display().to_string())
        .collect::<Vec<_>>()
        .join(", ");
    let count = prices::replace(
        store.conn(),
        &NewSeries {
            source: &name,
            kind: if carbon { Kind::Carbon } else { Kind::Price },
            unit: &unit,
            applied: !a.compare_only,
            format: format.name(),
            origin: Some(&origin),
        },
        &slots,
        chrono::Utc::now().timestamp_millis(),
    )
    .with_context(|| format!("writing {}: nothing imported", db.display()))?;
    let mut notes: Vec<String> = parsed.iter().flat_map(|(_, p)| p.notes.clone()).collect();
    notes.dedup();
    let out = Imported {
        series: name,
        kind: if carbon { Kind::Carbon } else { Kind::Price },
        unit,
        format: format.name().to_owned(),
        applied: !a.compare_only,
        files: a.files.iter().map(|f| f.display().to_string()).collect(),
        slots: slots.len(),
        first: slots
            .first()
            .map_or_else(String::new, |s| import::rfc3339(s.start_ms)),
        last: slots
            .last()
            .map_or_else(String::new, |s| import::rfc3339(s.end_ms)),
        negative: slots.iter().filter(|s| s.value < 0.0).count(),
        count,
        notes,
    };
    if a.json {
        crate::output::println(&serde_json::to_string_pretty(&out)?);
    } else {
        crate::output::print(&render_import(&out));
    }
    Ok(ExitCode::SUCCESS)
}

/// Every file of `a` read and checked first, so one bad file imports nothing: each parsed,
/// all of one format and unit, and prices in [tariff]'s currency.
fn parse_files<'a>(
    config: &crate::config::Config,
    a: &'a ImportArgs,
) -> anyhow::Result<Vec<(&'a PathBuf, Parsed)>> {
    let currency = a
        .currency
        .as_deref()
        .map_or_else(|| config.tariff.currency.clone(), str::to_ascii_uppercase);
    let opts = import::Options {
        format: a.format,
        exc_vat: a.exc_vat,
        currency: currency.clone(),
        timezone: a.timezone,
        column: a.column.clone(),
        max_price: a.max_price.unwrap_or(config.tariff.max_price_per_kwh),
    };
    let mut parsed = Vec::new();
    for f in &a.files {
        let text = read_limited(f)?;
        let p = import::parse(&text, &opts)
            .map_err(|e| anyhow::anyhow!("{}: {e}: nothing imported", f.display()))?;
        parsed.push((f, p));
    }
    let format = parsed[0].1.format;
    if let Some((f, p)) = parsed
        .iter()
        .find(|(_, p)| p.format != format || p.unit != parsed[0].1.unit)
    {
        anyhow::bail!(
            "{} is {} in {}, the first file {} in {}: import them separately (--name): \
             nothing imported",
            f.display(),
            p.format.name(),
            p.unit,
            format.name(),
            parsed[0].1.unit
        );
    }
    let unit = &parsed[0].1.unit;
    if !format.is_carbon() && *unit != config.tariff.currency {
        anyhow::bail!(
            "{}: prices in {unit}, but [tariff] currency is {}: a series is priced in the \
             tariff's currency (set [tariff] currency = \"{unit}\", or give the file's own \
             currency with --currency for a plain CSV): nothing imported",
            parsed[0].0.display(),
            config.tariff.currency
        );
    }
    Ok(parsed)
}

/// The slots of every file, in time order: pages of one series together, none of which may
/// overlap another.
fn merged_slots(parsed: &[(&PathBuf, Parsed)]) -> anyhow::Result<Vec<Slot>> {
    let mut slots: Vec<(Slot, usize, &Path)> = parsed
        .iter()
        .flat_map(|(f, p)| {
            p.slots
                .iter()
                .zip(&p.lines)
                .map(move |(s, l)| (*s, *l, f.as_path()))
        })
        .collect();
    slots.sort_by_key(|s| s.0.start_ms);
    if let Some(w) = slots.windows(2).find(|w| w[1].0.start_ms < w[0].0.end_ms) {
        anyhow::bail!(
            "{} line {} and {} line {}: slots {} and {} overlap: nothing imported",
            w[0].2.display(),
            w[0].1,
            w[1].2.display(),
            w[1].1,
            import::rfc3339(w[0].0.start_ms),
            import::rfc3339(w[1].0.start_ms)
        );
    }
    Ok(slots.into_iter().map(|s| s.0).collect())
}

/// The series' name: `--name`, else the format's; letters, digits, `-` and `_`, and neither
/// the live price's nor the configured tariff's.
fn series_name(a: &ImportArgs, format: import::Format) -> anyhow::Result<String> {
    let name = a
        .name
        .clone()
        .unwrap_or_else(|| format.default_name().to_owned());
    if name.is_empty()
        || name == prices::LIVE_SOURCE
        || name == "current"
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        anyhow::bail!(
            "--name {name:?}: give letters, digits, '-' or '_' (\"mqtt\" is the live price's, \
             \"current\" the configured tariff's)"
        );
    }
    Ok(name)
}

fn render_import(i: &Imported) -> String {
    use std::fmt::Write as _;
    let mut s = format!(
        "imported {} {} slots ({}, {}) into series {:?}: {} to {}\n  {} new, {} changed, {} \
         unchanged; {} stored slot(s) replaced\n",
        i.slots,
        i.kind.as_str(),
        i.format,
        if i.kind == Kind::Carbon {
            "g CO2/kWh".to_owned()
        } else {
            format!("{}/kWh", i.unit)
        },
        i.series,
        i.first,
        i.last,
        i.count.added,
        i.count.changed,
        i.count.unchanged,
        i.count.replaced
    );
    if i.negative > 0 {
        let _ = writeln!(s, "  {} slot(s) with a negative price", i.negative);
    }
    let _ = writeln!(
        s,
        "  {}",
        if i.kind == Kind::Carbon {
            "CO2 per slot in reports from now on (the constant --co2 fills slots it lacks)"
        } else if i.applied {
            "prices the ledger's energy in its slots (the [tariff] prices fill the rest)"
        } else {
            "kept to compare against (wattson report --tariffs): not pricing the ledger"
        }
    );
    for n in &i.notes {
        let _ = writeln!(s, "  note: {n}");
    }
    s
}

fn list(config: &crate::config::Config, a: &ListArgs) -> anyhow::Result<ExitCode> {
    use std::fmt::Write as _;
    let (_, store) = super::open_existing_database(a.db.as_deref(), config)?;
    let series = prices::list(&store)?;
    if a.json {
        crate::output::println(&serde_json::to_string_pretty(&series)?);
        return Ok(ExitCode::SUCCESS);
    }
    let mut s = String::new();
    if series.is_empty() {
        s.push_str("no price or carbon series (wattson tariff import FILE)\n");
    }
    for x in &series {
        let _ = writeln!(
            s,
            "{:<12} {:<6} {:<9} {:>6} slots  {} to {}  mean {}  {}  ({}{})",
            x.source,
            x.kind.as_str(),
            x.unit,
            x.slots,
            x.from_ms.map_or_else(|| "-".to_owned(), import::rfc3339),
            x.to_ms.map_or_else(|| "now".to_owned(), import::rfc3339),
            x.mean.map_or_else(|| "-".to_owned(), |m| format!("{m:.4}")),
            if x.kind == Kind::Carbon {
                "weighs CO2"
            } else if x.applied {
                "prices the ledger"
            } else {
                "compare only"
            },
            x.format,
            x.origin
                .as_deref()
                .map_or_else(String::new, |o| format!(" from {o}"))
        );
    }
    crate::output::print(&s);
    Ok(ExitCode::SUCCESS)
}
