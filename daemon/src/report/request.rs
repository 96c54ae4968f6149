//! What one report is asked for ([`ReportRequest`]: `wattson report`'s options, or the HTTP
//! report's query parameters) and its making: the config file's `[[config]]` entries and
//! `[tariff]` (with any `--tariffs` named), plus what the database adds ([`super::gather`]),
//! -> [`ReportInput`] -> [`super::build`] -> [`super::render`].

use std::path::{Path, PathBuf};

use crate::zone::Zone;
use chrono::{DateTime, Duration, NaiveDate, Utc};

use super::ProduceError;
use super::gather::{StoreData, gather_from_store};
use super::{ConfigInput, Format, ReportInput, ReportOptions, model::resolve_config_list};
use crate::config::Config;

/// What one report is asked for; [`ReportRequest::new`] gives the defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportRequest {
    pub format: Format,
    /// Configurations to show, in order, separated by commas (unique prefixes will do); the
    /// first is the baseline [default: every configuration, the costliest first].
    pub configs: Option<String>,
    /// Start of the measured window.
    pub since: Option<When>,
    /// End of the measured window [default: now].
    pub until: Option<When>,
    /// Compare at this mode instead of idle or the measured duty cycle.
    pub mode: Option<String>,
    /// What the upgrade costs, in the tariff's currency (overrides each target's).
    pub upgrade_cost: Option<f64>,
    /// Grid carbon intensity, g CO2 per kWh.
    pub co2: Option<f64>,
    /// Tariffs to price the measured energy under, side by side, separated by commas.
    pub tariffs: Option<String>,
    /// The database [default: `[storage] path`].
    pub db: Option<PathBuf>,
    /// The host whose measured history to report [default: `[host] name`].
    pub host: Option<String>,
    /// Candidate machines to show, separated by commas [default: the 3 cheapest].
    pub candidates: Option<String>,
    /// How many of the cheapest candidates to show when none are named.
    pub candidates_top: Option<usize>,
    /// This machine's own ssj_ops at 100 %, to derive candidates' perf ratios from.
    pub this_ssj_ops: Option<f64>,
    /// A week's schedule of modes to price each configuration on.
    pub schedule: Option<crate::analysis::schedule::Schedule>,
    /// This machine's standby power, W, for what sleeping when idle would save.
    pub standby_watts: Option<f64>,
}

impl ReportRequest {
    /// The defaults in `format`: every configuration, the whole history.
    pub fn new(format: Format) -> ReportRequest {
        ReportRequest {
            format,
            configs: None,
            since: None,
            until: None,
            mode: None,
            upgrade_cost: None,
            co2: None,
            tariffs: None,
            db: None,
            host: None,
            candidates: None,
            candidates_top: None,
            this_ssj_ops: None,
            schedule: None,
            standby_watts: None,
        }
    }
}

/// A window bound as typed: a local date, a moment (RFC 3339), or a duration back from now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    Date(NaiveDate),
    At(DateTime<Utc>),
    Ago(std::time::Duration),
}

/// The parser of `--since`/`--until` (as clap's value parser) and of the HTTP report's
/// `since`/`until`.
pub fn parse_when(s: &str) -> Result<When, String> {
    if let Ok(d) = NaiveDate::parse_from_str(s, "%Y-%m-%d") {
        return Ok(When::Date(d));
    }
    if s.len() > 10 && s.as_bytes()[10] == b'T' {
        return DateTime::parse_from_rfc3339(s)
            .map(|t| When::At(t.with_timezone(&Utc)))
            .map_err(|e| {
                format!("{s:?} is not a moment (RFC 3339, e.g. 2026-12-04T18:30:00Z): {e}")
            });
    }
    let b = s.as_bytes();
    if b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && b.iter()
            .enumerate()
            .all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit())
    {
        return Err(format!("{s:?} is not a day of the calendar (YYYY-MM-DD)"));
    }
    crate::config::parse_duration(s)
        .map(When::Ago)
        .map_err(|e| {
            format!(
                "{s:?} is neither a date (YYYY-MM-DD), a moment (2026-12-04T18:30:00Z) nor a \
                 duration ({e})"
            )
        })
}

/// Resolves a bound to UTC ms. A date starts the window at its local midnight (`since`)
/// or ends it at the next one (`until`).
pub fn resolve_when(w: When, now: DateTime<Utc>, tz: Zone, end: bool) -> i64 {
    match w {
        When::Date(d) => tz
            .start_of_day(if end { d + Duration::days(1) } else { d })
            .timestamp_millis(),
        When::At(t) => t.timestamp_millis(),
        When::Ago(ago) => {
            now.timestamp_millis() - i64::try_from(ago.as_millis()).unwrap_or(i64::MAX / 2)
        }
    }
}

/// A report window that holds no time: asked for by the user (`--since`/`--until`, or the
/// HTTP report's `since`/`until`), so a bad request, not a failure.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct EmptyWindow(String);

/// Refuses a window that ends before it starts or starts in the future: either would be a
/// report with no measured section and no word why.
fn check_window(
    from_ms: Option<i64>,
    to_ms: Option<i64>,
    now: DateTime<Utc>,
) -> Result<(), EmptyWindow> {
    let at = |ms: i64| {
        DateTime::<Utc>::from_timestamp_millis(ms).map_or_else(
            || format!("{ms} ms"),
            |t| t.format("%Y-%m-%d %H:%M UTC").to_string(),
        )
    };
    if let (Some(f), Some(t)) = (from_ms, to_ms)
        && f >= t
    {
        return Err(EmptyWindow(format!(
            "the window from {} (--since) to {} (--until) holds no time: --until must come \
             after --since (a date in --until counts to the end of that day)",
            at(f),
            at(t)
        )));
    }
    if let Some(f) = from_ms.filter(|f| *f > now.timestamp_millis()) {
        return Err(EmptyWindow(format!(
            "--since {} is in the future: nothing is measured after now",
            at(f)
        )));
    }
    Ok(())
}

/// The window `args` asks for, UTC ms (dates in the tariff's time zone), or why it holds no
/// time.
pub fn window(
    config: &Config,
    args: &ReportRequest,
    now: DateTime<Utc>,
) -> Result<(Option<i64>, Option<i64>), EmptyWindow> {
    let tz = super::input::tariff_from_config(&config.tariff).map_or(Zone::UTC, |t| t.tz());
    let from_ms = args.since.map(|w| resolve_when(w, now, tz, false));
    let to_ms = args.until.map(|w| resolve_when(w, now, tz, true));
    check_window(from_ms, to_ms, now)?;
    Ok((from_ms, to_ms))
}

/// Renders the report `args` asks for.
pub fn produce(
    config: &Config,
    args: &ReportRequest,
    now: DateTime<Utc>,
) -> Result<String, ProduceError> {
    produce_noting(config, args, now, Vec::new())
}

/// As [`produce`], with `noted` among the report's notes (what was set aside on the way in).
pub fn produce_noting(
    config: &Config,
    args: &ReportRequest,
    now: DateTime<Utc>,
    noted: Vec<String>,
) -> Result<String, ProduceError> {
    if let Some(c) = args.upgrade_cost.filter(|c| !c.is_finite() || *c < 0.0) {
        return Err(ProduceError::UpgradeCost(c));
    }
    if let Some(g) = args.co2.filter(|g| !g.is_finite() || *g < 0.0) {
        return Err(ProduceError::Co2(g));
    }
    let db = args
        .db
        .clone()
        .unwrap_or_else(|| config.storage.path.clone());
    let (from_ms, to_ms) = window(config, args, now)?;
    // Without a database only the configurations measured by hand can be reported; with
    // none of those either there is nothing to report, which is an error, not an empty table.
    // The database, opened once for every part of the report.
    let store = if crate::store::database_exists(&db)? {
        Some(crate::store::open_database(&db)?)
    } else if config.manual.is_empty() {
        return Err(ProduceError::NothingToReport { db });
    } else {
        None
    };
    let host = args
        .host
        .clone()
        .unwrap_or_else(|| config.host.name.clone());
    if host != config.host.name
        && let Some(store) = &store
    {
        crate::store::check_host(store, &host, &config.host.name)?;
    }
    let own = host == config.host.name;
    let wall = own
        .then(|| crate::ledger::costs::wall_source(config))
        .flatten();
    let accuracy = wall
        .as_ref()
        .and_then(|w| crate::ledger::costs::accuracy_of(config, w));
    let configured = configured_tariffs(config)?;
    let split = |start: i64, end: i64| configured.iter().any(|t| t.may_change_within(start, end));
    let mut data = gather_from_store(
        store.as_ref(),
        &host,
        wall.as_ref(),
        accuracy,
        own,
        (from_ms, to_ms),
        &split,
    )?;
    let set_aside = std::mem::take(&mut data.set_aside);
    let input = input_from_config(config, data, args, now)?;
    let mut built = super::build(&input)?;
    built.notes.extend(set_aside);
    built.notes.extend(noted);
    let Some(store) = store else {
        return Ok(super::render(&built, args.format)?);
    };
    // With the price series, as the machine's own energy is priced.
    let tariff =
        crate::ledger::costs::tariff_with_series(&config.tariff, &store, now.timestamp_millis())?;
    let context = SectionInputs {
        store: &store,
        db: &db,
        host: &host,
        tariff: &tariff,
        now,
    };
    built.sleep = super::sleep::gather::section(
        &store,
        &tariff,
        &super::sleep::gather::Asked {
            host: &host,
            wall: wall.as_ref(),
            since: from_ms,
            until: to_ms,
            now_ms: now.timestamp_millis(),
            settings: &super::sleep::gather::Settings::of(config, own, args.standby_watts),
        },
    )?;
    built.services =
        services_section(&context, from_ms, to_ms).map_err(|source| ProduceError::Services {
            db: db.clone(),
            source: Box::new(source),
        })?;
    if let Some(m) = &built.measured {
        let (stood_in, why) = stand_in_section(&context, m)?;
        built.stood_in = stood_in;
        built.notes.extend(
            why.map(|w| format!("no estimate from the calibration while the meter was away: {w}")),
        );
    } else {
        let (estimated, why) = estimated_section(&context, (from_ms, to_ms))?;
        built.estimated = estimated;
        built
            .notes
            .extend(why.map(|w| format!("no estimate from the calibration: {w}")));
    }
    Ok(super::render(&built, args.format)?)
}

/// What the sections after the built report read: the database, the host, the tariff with
/// the database's price series, and now.
struct SectionInputs<'a> {
    store: &'a crate::store::Store,
    db: &'a Path,
    host: &'a str,
    tariff: &'a crate::tariff::Tariff,
    now: DateTime<Utc>,
}

/// The stretches of the measured window the wall meter was away and a calibration of
/// the host stood in ([`crate::calibration::stand_in`]), or why none could.
fn stand_in_section(
    s: &SectionInputs<'_>,
    measured: &super::measured::MeasuredReport,
) -> Result<(Vec<crate::calibration::stand_in::StoodIn>, Option<String>), ProduceError> {
    let Some(wall) = &measured.source else {
        return Ok((Vec::new(), None));
    };
    let found = crate::calibration::stand_in::stretches(
        s.store,
        s.host,
        wall,
        s.tariff,
        (measured.from_ms, measured.to_ms),
        s.now.timestamp_millis(),
    )
    .map(Some);
    let (stood_in, why) = crate::calibration::priced::unavailable(found).map_err(|source| {
        ProduceError::Calibration {
            db: s.db.to_owned(),
            source: Box::new(source),
        }
    })?;
    Ok((stood_in.unwrap_or_default(), why))
}

/// What each service costs over the report's window (the last 7 days by default), where
/// the database holds CPU time per service for the host.
fn services_section(
    s: &SectionInputs<'_>,
    from_ms: Option<i64>,
    to_ms: Option<i64>,
) -> Result<Option<crate::services::ServicesEstimate>, crate::services::ServicesError> {
    use crate::store::{DAY_MS, HOUR_MS, floor_to};
    let to = floor_to(to_ms.unwrap_or_else(|| s.now.timestamp_millis()), HOUR_MS) + HOUR_MS;
    let from = floor_to(from_ms.unwrap_or(to - 7 * DAY_MS), HOUR_MS);
    let e = crate::services::estimate(s.store, s.host, s.tariff, from, to)?;
    Ok((!e.is_empty()).then_some(e))
}

/// The report window's energy and money estimated from `host`'s newest calibration (the
/// last 7 days by default, as for the services), where the window has no measured wall
/// energy and the host has a calibration.
fn estimated_section(
    s: &SectionInputs<'_>,
    (from_ms, to_ms): (Option<i64>, Option<i64>),
) -> Result<(Option<crate::calibration::priced::Priced>, Option<String>), ProduceError> {
    use crate::store::DAY_MS;
    let failed = |source| ProduceError::Calibration {
        db: s.db.to_owned(),
        source: Box::new(source),
    };
    let Some(model) = crate::calibration::persist::latest(s.store, s.host).map_err(failed)? else {
        return Ok((None, None));
    };
    let to = to_ms.unwrap_or_else(|| s.now.timestamp_millis());
    let from = from_ms.unwrap_or(to - 7 * DAY_MS);
    // A stored calibration whose signal this database lacks: said in the notes.
    crate::calibration::priced::unavailable(
        crate::calibration::priced::priced(s.store, s.host, &model, s.tariff, from, to).map(Some),
    )
    .map_err(failed)
}

/// `[tariff]` makes no tariff ([`ProduceError::Tariff`]).
fn from_tariff_section(source: crate::tariff::TariffError) -> ProduceError {
    ProduceError::Tariff {
        what: "building the tariff from [tariff]".to_owned(),
        source,
    }
}

/// The configured tariff and every `[[tariff.alternative]]`, without series.
fn configured_tariffs(config: &Config) -> Result<Vec<crate::tariff::Tariff>, ProduceError> {
    let mut out =
        vec![super::input::tariff_from_config(&config.tariff).map_err(from_tariff_section)?];
    for a in &config.tariff.alternatives {
        out.push(alternative(config, a)?);
    }
    Ok(out)
}

/// One `[[tariff.alternative]]`: its prices in the configured tariff's currency and zone.
fn alternative(
    config: &Config,
    a: &crate::config::AlternativeTariff,
) -> Result<crate::tariff::Tariff, ProduceError> {
    let cfg = crate::config::TariffConfig {
        price_per_kwh: a.price_per_kwh,
        standing_charge_per_day: a.standing_charge_per_day,
        periods: a.periods.clone(),
        changes: Vec::new(),
        ..config.tariff.clone()
    };
    super::input::tariff_from_config(&cfg).map_err(|source| ProduceError::Tariff {
        what: format!("[[tariff.alternative]] {}", a.name),
        source,
    })
}

/// The tariffs `--tariffs` names, built from the config and the stored series.
fn named_tariffs(
    config: &Config,
    list: &str,
    current: &crate::tariff::Tariff,
    series: &[(crate::tariff::series::SlotSeries, bool)],
) -> Result<Vec<crate::report::real_tariffs::NamedTariff>, ProduceError> {
    use crate::report::real_tariffs::NamedTariff;
    use crate::tariff::series::SeriesSet;
    let base = super::input::tariff_from_config(&config.tariff).map_err(from_tariff_section)?;
    let mut out = Vec::new();
    for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        if out.iter().any(|t: &NamedTariff| t.name == name) {
            continue;
        }
        let t = if name == "current" {
            NamedTariff {
                name: name.to_owned(),
                origin: match current.series() {
                    Some(s) => format!("[tariff] with series {}", s.sources().join(", ")),
                    None => "the configured [tariff]".to_owned(),
                },
                tariff: current.clone(),
            }
        } else if name == "tariff" {
            NamedTariff {
                name: name.to_owned(),
                origin: "the configured [tariff] prices, no series".to_owned(),
                tariff: base.clone(),
            }
        } else if let Some(a) = config.tariff.alternatives.iter().find(|a| a.name == name) {
            NamedTariff {
                name: name.to_owned(),
                origin: format!("[[tariff.alternative]] {name}"),
                tariff: alternative(config, a)?,
            }
        } else if let Some((s, _)) = series.iter().find(|(s, _)| s.source == name) {
            NamedTariff {
                name: name.to_owned(),
                origin: format!("imported series {name}, the [tariff] price where it has no slot"),
                tariff: base.clone().with_series(SeriesSet::new(vec![s.clone()])),
            }
        } else {
            let mut known = vec!["current".to_owned(), "tariff".to_owned()];
            known.extend(config.tariff.alternatives.iter().map(|a| a.name.clone()));
            known.extend(series.iter().map(|(s, _)| s.source.clone()));
            return Err(ProduceError::UnknownTariff {
                name: name.to_owned(),
                known: known.join(", "),
            });
        };
        out.push(t);
    }
    Ok(out)
}

/// Builds the report input from the configuration (and whatever the store returned).
pub fn input_from_config(
    config: &Config,
    store: StoreData,
    args: &ReportRequest,
    now: DateTime<Utc>,
) -> Result<ReportInput, ProduceError> {
    let tariff = super::input::tariff_from_config(&config.tariff)
        .map_err(from_tariff_section)?
        .with_series(crate::tariff::series::SeriesSet::new(
            store
                .price_series
                .iter()
                .filter(|(s, applied)| {
                    // As the ledger does (tariff::store::applied): a series in another
                    // currency prices nothing.
                    let same = s.unit == config.tariff.currency;
                    if *applied && !same {
                        crate::tariff::store::warn_once(format!(
                            "price series {:?} is in {}, the tariff in {}: it is left out",
                            s.source, s.unit, config.tariff.currency
                        ));
                    }
                    *applied && same
                })
                .map(|(s, _)| s.clone())
                .collect(),
        ));
    let compare = match &args.tariffs {
        Some(list) => named_tariffs(config, list, &tariff, &store.price_series)?,
        None => Vec::new(),
    };
    let tz = tariff.tz();
    let mut configs: Vec<ConfigInput> =
        config.manual.iter().map(ConfigInput::from_manual).collect();
    for c in store.configs {
        if configs.iter().any(|x| x.name == c.name) {
            tracing::warn!(
                "configuration {:?} is both in the config file and in the database; showing the config file's",
                c.name
            );
        } else {
            configs.push(c);
        }
    }
    let names: Vec<String> = configs.iter().map(|c| c.name.clone()).collect();
    let selected = match &args.configs {
        Some(list) => resolve_config_list(list, &names)?,
        None => Vec::new(),
    };
    let mut options = ReportOptions::new(now.with_timezone(&tz).date_naive());
    options.configs = selected;
    options.mode.clone_from(&args.mode);
    options.upgrade_cost = args.upgrade_cost;
    options.co2_g_per_kwh = args.co2;
    options.from_ms = args.since.map(|w| resolve_when(w, now, tz, false));
    options.to_ms = args.until.map(|w| resolve_when(w, now, tz, true));
    options.tariffs = compare;
    options.carbon = store.carbon;
    if let Some(list) = &args.candidates {
        options.candidates = list
            .split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(str::to_owned)
            .collect();
    }
    options.candidates_top = args.candidates_top;
    options.this_ssj_ops = args.this_ssj_ops;
    options.schedule.clone_from(&args.schedule);
    Ok(ReportInput {
        generated_at: now,
        host: Some(
            args.host
                .clone()
                .unwrap_or_else(|| config.host.name.clone()),
        ),
        tariff,
        configs,
        measured: store.measured,
        regression: store.regression,
        gpus: store.gpus,
        idle: store.idle,
        candidates: store.candidates,
        options,
    })
}

#[cfg(test)]
mod tests;
