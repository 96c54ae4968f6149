//! `wattson report`: annual cost per configuration and mode, comparisons, savings and
//! payback, in `--format table|markdown|csv|json|html`, to stdout or `--out FILE`.
//!
//! Flow: load the config -> [`ReportInput`](crate::report::ReportInput) from its
//! `[[config]]` entries and `[tariff]` (plus, from the database, sweeps and this machine's
//! history: [`gather_from_store`]) -> [`report::build`] -> [`report::render`] -> stdout or
//! the file.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use chrono::{DateTime, Duration, NaiveDate, TimeZone as _, Utc};
use chrono_tz::Tz;
use clap::Args;

use crate::config::Config;

mod gather;
mod input;

use crate::report::{self, Format};
pub use gather::{StoreData, gather_from_store, gather_gpus};
pub use input::input_from_config;

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Write the report to this file instead of stdout.
    #[arg(long, value_name = "PATH")]
    pub out: Option<PathBuf>,
    /// Configurations to show, in order, separated by commas (names may be shortened to a
    /// unique prefix); the first is the baseline the others are compared with [default:
    /// every configuration, the costliest first].
    #[arg(long, value_name = "NAME,...")]
    pub configs: Option<String>,
    /// Start of the measured window: a date (YYYY-MM-DD) or a duration such as 30d
    /// (the last 30 days).
    #[arg(long, value_name = "WHEN", value_parser = parse_when, allow_hyphen_values = true)]
    pub since: Option<When>,
    /// End of the measured window: a date (YYYY-MM-DD, to the end of that day) or a
    /// duration such as 1d (up to a day ago) [default: now].
    #[arg(long, value_name = "WHEN", value_parser = parse_when, allow_hyphen_values = true)]
    pub until: Option<When>,
    /// Compare at this mode (e.g. "idle", "2 loops") instead of idle or the measured duty
    /// cycle.
    #[arg(long, value_name = "MODE")]
    pub mode: Option<String>,
    /// What the upgrade costs, in the tariff's currency: gives the payback time (overrides
    /// each target's `upgrade_cost`).
    #[arg(
        long,
        value_name = "AMOUNT",
        value_parser = crate::cli::parse_non_negative,
        allow_hyphen_values = true
    )]
    pub upgrade_cost: Option<f64>,
    /// Grid carbon intensity, g CO2 per kWh: adds CO2 per year and CO2 saved.
    #[arg(
        long,
        value_name = "G_PER_KWH",
        value_parser = crate::cli::parse_non_negative,
        allow_hyphen_values = true
    )]
    pub co2: Option<f64>,
    /// Price the measured energy under each of these tariffs, side by side, and say what
    /// the cheapest saves per year: `current` (what prices the ledger), `tariff` (the
    /// configured [tariff] alone), an [[tariff.alternative]] name, or an imported series'
    /// name (`wattson tariff list`), separated by commas.
    #[arg(long, value_name = "NAME,...")]
    pub tariffs: Option<String>,
    /// Read this database instead of `[storage] path`.
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
    /// The host whose measured history to report (a fleet collector's database holds
    /// several) [default: `[host] name`].
    #[arg(long, value_name = "NAME")]
    pub host: Option<String>,
}

impl ReportArgs {
    /// The defaults in `format`: every configuration, the whole history, to stdout.
    pub fn new(format: Format) -> ReportArgs {
        ReportArgs {
            format,
            out: None,
            configs: None,
            since: None,
            until: None,
            mode: None,
            upgrade_cost: None,
            co2: None,
            tariffs: None,
            db: None,
            host: None,
        }
    }
}

/// A window bound as typed: a local date, or a duration back from now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    Date(NaiveDate),
    Ago(std::time::Duration),
}

/// clap value parser for `--since`/`--until`.
pub fn parse_when(s: &str) -> Result<When, String> {
    if let Ok(d) = NaiveDate::parse_from_str(s, "%Y-%m-%d") {
        return Ok(When::Date(d));
    }
    crate::config::parse_duration(s)
        .map(When::Ago)
        .map_err(|e| format!("{s:?} is neither a date (YYYY-MM-DD) nor a duration ({e})"))
}

/// Local midnight of `date` in `tz` as UTC ms (the earliest one when the clock goes back).
fn midnight_ms(date: NaiveDate, tz: Tz) -> i64 {
    let naive = date.and_time(chrono::NaiveTime::MIN);
    tz.from_local_datetime(&naive).earliest().map_or_else(
        || naive.and_utc().timestamp_millis(),
        |t| t.timestamp_millis(),
    )
}

/// Resolves a bound to UTC ms. A date starts the window at its local midnight (`since`)
/// or ends it at the next one (`until`).
pub fn resolve_when(w: When, now: DateTime<Utc>, tz: Tz, end: bool) -> i64 {
    match w {
        When::Date(d) => midnight_ms(if end { d + Duration::days(1) } else { d }, tz),
        When::Ago(ago) => {
            now.timestamp_millis() - i64::try_from(ago.as_millis()).unwrap_or(i64::MAX / 2)
        }
    }
}

/// Renders the report the arguments ask for.
pub fn produce(config: &Config, args: &ReportArgs, now: DateTime<Utc>) -> anyhow::Result<String> {
    if let Some(c) = args.upgrade_cost.filter(|c| !c.is_finite() || *c < 0.0) {
        anyhow::bail!("--upgrade-cost {c} is not a price: give a non-negative amount");
    }
    if let Some(g) = args.co2.filter(|g| !g.is_finite() || *g < 0.0) {
        anyhow::bail!("--co2 {g} is not a carbon intensity: give g CO2 per kWh, 0 or more");
    }
    let db = args
        .db
        .clone()
        .unwrap_or_else(|| config.storage.path.clone());
    let (from_ms, to_ms) = {
        let tz =
            report::input::tariff_from_config(&config.tariff).map_or(chrono_tz::UTC, |t| t.tz());
        (
            args.since.map(|w| resolve_when(w, now, tz, false)),
            args.until.map(|w| resolve_when(w, now, tz, true)),
        )
    };
    // Without a database only the configurations measured by hand can be reported; with
    // none of those either there is nothing to report, which is an error, not an empty table.
    if !super::database_exists(&db)? && config.manual.is_empty() {
        anyhow::bail!(
            "no database at {} and no [[config]] in the configuration: nothing to report; run \
             `wattson run` (this machine's history) or `wattson sweep --name NAME` (its modes) \
             first, add a [[config]] measured by hand, or pass --db PATH",
            db.display()
        );
    }
    let host = args
        .host
        .clone()
        .unwrap_or_else(|| config.host.name.clone());
    let own = host == config.host.name;
    let wall = own
        .then(|| crate::ledger::costs::wall_source(config))
        .flatten();
    let accuracy = wall
        .as_ref()
        .and_then(|w| crate::ledger::costs::accuracy_of(config, w));
    let store = gather_from_store(&db, &host, wall.as_ref(), accuracy, from_ms, to_ms)
        .with_context(|| format!("reading {}", db.display()))?;
    let input = input_from_config(config, store, args, now)?;
    let mut built = report::build(&input)?;
    built.services = services_section(config, &db, &host, from_ms, to_ms, now)
        .with_context(|| format!("reading what each service costs from {}", db.display()))?;
    Ok(report::render(&built, args.format)?)
}

/// What each service costs over the report's window (the last 7 days by default), where
/// the database holds CPU time per service for the host.
fn services_section(
    config: &Config,
    db: &Path,
    host: &str,
    from_ms: Option<i64>,
    to_ms: Option<i64>,
    now: DateTime<Utc>,
) -> anyhow::Result<Option<crate::services::ServicesEstimate>> {
    use crate::store::{DAY_MS, HOUR_MS, floor_to};
    if !super::database_exists(db)? {
        return Ok(None);
    }
    let store = super::open_database(db)?;
    let tariff = crate::ledger::costs::tariff(&config.tariff)?;
    let to = floor_to(to_ms.unwrap_or_else(|| now.timestamp_millis()), HOUR_MS) + HOUR_MS;
    let from = floor_to(from_ms.unwrap_or(to - 7 * DAY_MS), HOUR_MS);
    let e = crate::services::estimate(&store, host, &tariff, from, to)?;
    Ok((!e.is_empty()).then_some(e))
}

pub fn run(args: &ReportArgs, config: Option<&Path>) -> anyhow::Result<ExitCode> {
    let config = super::load_config(config)?;
    let text = produce(&config, args, Utc::now())?;
    match &args.out {
        Some(path) => std::fs::write(path, text.as_bytes())
            .with_context(|| format!("writing the report to {}", path.display()))?,
        None => crate::output::print(&text),
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn when_parses_dates_and_durations() {
        assert_eq!(
            parse_when("2026-03-01").unwrap(),
            When::Date(NaiveDate::from_ymd_opt(2026, 3, 1).unwrap())
        );
        assert_eq!(
            parse_when("30d").unwrap(),
            When::Ago(std::time::Duration::from_secs(30 * 86_400))
        );
        assert!(
            parse_when("last tuesday")
                .unwrap_err()
                .contains("YYYY-MM-DD")
        );
        let now: DateTime<Utc> = "2026-03-31T12:00:00Z".parse().unwrap();
        let tz = chrono_tz::Europe::London;
        // 31 March is BST: local midnight is 23:00 UTC the day before.
        let d = When::Date(NaiveDate::from_ymd_opt(2026, 3, 31).unwrap());
        assert_eq!(
            resolve_when(d, now, tz, false),
            "2026-03-30T23:00:00Z"
                .parse::<DateTime<Utc>>()
                .unwrap()
                .timestamp_millis()
        );
        assert_eq!(
            resolve_when(d, now, tz, true),
            "2026-03-31T23:00:00Z"
                .parse::<DateTime<Utc>>()
                .unwrap()
                .timestamp_millis()
        );
        let ago = When::Ago(std::time::Duration::from_secs(86_400));
        assert_eq!(
            resolve_when(ago, now, tz, false),
            now.timestamp_millis() - 86_400_000
        );
    }
}
