//! What one report is asked for ([`ReportRequest`]: `wattson report`'s options, or the HTTP
//! report's query parameters) and its making: the config file's `[[config]]` entries and
//! `[tariff]` (with any `--tariffs` named), plus what the database adds ([`super::gather`]),
//! -> [`ReportInput`] -> [`super::build`] -> [`super::render`].
//!
//! The window asked for (`--since`/`--until`: parsed, resolved, refused when it holds no time)
//! is `window`'s; the tariffs the report prices with (`[tariff]`, its alternatives, what
//! `--tariffs` names) are `tariffs`'.

use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};

use super::ProduceError;
use super::gather::{StoreData, gather_from_store};
use super::{ConfigInput, Format, ReportInput, ReportOptions, model::resolve_config_list};
use crate::config::Config;

mod tariffs;
mod window;

use tariffs::{configured_tariffs, from_tariff_section, named_tariffs};
pub use window::{EmptyWindow, When, parse_when, resolve_when, window};

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
