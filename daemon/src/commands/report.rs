//! `wattson report`: annual cost per configuration and mode, comparisons, savings and
//! payback, in `--format table|markdown|csv|json|html`, to stdout or `--out FILE`.
//!
//! Flow: load the config -> [`ReportInput`] from its `[[config]]` entries and `[tariff]`
//! (plus, from the database, sweeps and this machine's history: [`gather_from_store`]) ->
//! [`report::build`] -> [`report::render`] -> stdout or the file.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use wattson_collectors::SourceId;
use wattson_collectors::source::channel;

use anyhow::Context as _;
use chrono::{DateTime, Duration, NaiveDate, TimeZone as _, Utc};
use chrono_tz::Tz;
use clap::Args;

use crate::config::Config;
use crate::report::{
    self, ConfigInput, Format, GpuInput, GpuPoint, MeasuredInput, ReportInput, ReportOptions,
    model::resolve_config_list,
};

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

/// What the database adds to a report: sweep configurations and this machine's measured
/// history over `from_ms..to_ms`.
#[derive(Debug, Default)]
pub struct StoreData {
    pub configs: Vec<ConfigInput>,
    pub measured: Option<MeasuredInput>,
    /// The newest idle-power regression check of each configuration, newest first.
    pub regression: Vec<crate::sweep::regression::Check>,
    /// Each GPU's raw samples over the window.
    pub gpus: Vec<GpuInput>,
    /// Every stored price series (applied or kept to compare), and whether it is applied,
    /// in precedence order, and the carbon-intensity series that apply.
    pub price_series: Vec<(crate::analysis::price_series::SlotSeries, bool)>,
    pub carbon: Option<crate::analysis::price_series::SeriesSet>,
    /// Package C-state history and measured idle settings.
    pub idle: crate::report::idle::IdleInput,
}

/// Reads sweeps, the wall source's energy (through the ledger), gaps and utilisation from
/// the database at `db`. A missing database is not an error: the report then shows the
/// config file's manual configurations only. `wall` names the wall source (default: the
/// host's first meter power series); `accuracy` is its meter's, where known.
pub fn gather_from_store(
    db: &Path,
    host: &str,
    wall: Option<&SourceId>,
    accuracy: Option<wattson_collectors::meter::Accuracy>,
    from_ms: Option<i64>,
    to_ms: Option<i64>,
) -> anyhow::Result<StoreData> {
    use crate::ledger::{counter, energy, interval};
    use crate::store::{Resolution, SeriesFilter};
    use wattson_collectors::Metric;

    if !super::database_exists(db)? {
        return Ok(StoreData::default());
    }
    let store = super::open_database(db)?;
    let mut data = StoreData::default();
    load_series(&store, &mut data)?;
    for s in crate::sweep::persist::list(&store)? {
        data.configs.push(sweep_config_input(&s));
    }
    data.regression = crate::sweep::regression::latest(&store, None)?;
    data.idle = crate::report::idle::load(
        &store,
        host,
        from_ms.unwrap_or(0),
        to_ms.unwrap_or_else(|| Utc::now().timestamp_millis()),
    )?;
    data.gpus = gather_gpus(
        &store,
        host,
        from_ms.unwrap_or(0),
        to_ms.unwrap_or_else(|| Utc::now().timestamp_millis()),
    )?;

    let source = match wall.cloned() {
        Some(w) if energy::power_series(&store, host, &w)?.is_some() => w,
        _ => {
            let series = store.find_series(
                &SeriesFilter::all()
                    .host(host)
                    .metric(Metric::Power)
                    .channel(""),
            )?;
            let Some(first) = series
                .into_iter()
                .filter(|s| s.source.is_meter())
                .map(|s| s.source)
                .min()
            else {
                return Ok(data);
            };
            first
        }
    };
    let to = to_ms.unwrap_or_else(|| Utc::now().timestamp_millis());
    // The window starts at the first stored hour of the source (or `--since`).
    let since = energy::total(&store, host, &source)?.since_ms;
    let Some(first) = (match from_ms {
        Some(f) => Some(f),
        None => since,
    }) else {
        return Ok(data);
    };
    let e = energy::energy(&store, host, &source, first, to)?;
    if e.buckets.is_empty() {
        return Ok(data);
    }
    let (blocks, block) = energy::blocks(&store, &e)?;
    let power = e
        .mean_watts()
        .map(|w| interval::power_interval(w, e.covered_ms, &blocks, block, accuracy));
    let counter = counter::cross_check(&store, &e)?;
    let cpus = store
        .find_series(&SeriesFilter::all().host(host).metric(Metric::CpuBusy))?
        .iter()
        .filter(|s| channel::is_per_core(&s.channel))
        .count() as u32;
    let utilisation = store
        .rollups(
            &SeriesFilter::all()
                .host(host)
                .metric(Metric::CpuBusy)
                .channel(channel::ALL),
            Resolution::Hour,
            floor_to(first, HOUR_MS),
            to,
        )?
        .into_iter()
        .flat_map(|(_, r)| r)
        .map(|r| {
            (
                r.bucket_ms,
                r.bucket_ms + HOUR_MS,
                r.mean * f64::from(cpus.max(1)),
            )
        })
        .collect();
    data.measured = Some(MeasuredInput {
        from_ms: first,
        to_ms: to,
        // Minute by minute where price series (slots shorter than an hour) may price it.
        energy: if data.price_series.is_empty() {
            e.priced_buckets()
        } else {
            e.minute_buckets(&store)?
        },
        covered_ms: e.covered_ms,
        gaps: e
            .gaps
            .iter()
            .map(|g| (g.start_ms, g.end_ms, g.reason.clone()))
            .collect(),
        utilisation,
        cpus: cpus.max(1),
        config: None,
        source: Some(source),
        power,
        counter,
        approximate_hours: e.approximate_hours,
    });
    Ok(data)
}

use crate::store::{HOUR_MS, floor_to};

/// Every price series (to compare, and the applied ones to price by) and the applied
/// carbon series.
fn load_series(store: &crate::store::Store, data: &mut StoreData) -> anyhow::Result<()> {
    use crate::tariff::store::{self as prices, Kind};
    let now_ms = Utc::now().timestamp_millis();
    let mut infos = prices::list(store)?;
    // The live price first, then imports, the newest first: the ledger's precedence.
    infos.sort_by_key(|i| (i.format != "mqtt", std::cmp::Reverse(i.updated_ms)));
    for i in infos.iter().filter(|i| i.kind == Kind::Price) {
        match prices::load(store, &i.source, now_ms) {
            Ok(s) => data.price_series.push((s, i.applied)),
            Err(e) => tracing::warn!("price series {:?}: {e}", i.source),
        }
    }
    let carbon = crate::tariff::carbon_series(store, now_ms)?;
    data.carbon = (!carbon.is_empty()).then_some(carbon);
    Ok(())
}

/// The tariffs `--tariffs` names, built from the config and the stored series.
fn named_tariffs(
    config: &Config,
    list: &str,
    current: &crate::analysis::tariff::Tariff,
    series: &[(crate::analysis::price_series::SlotSeries, bool)],
) -> anyhow::Result<Vec<crate::report::tariffs::NamedTariff>> {
    use crate::analysis::price_series::SeriesSet;
    use crate::report::tariffs::NamedTariff;
    let base = report::input::tariff_from_config(&config.tariff)
        .context("building the tariff from [tariff]")?;
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
            let cfg = crate::config::TariffConfig {
                price_per_kwh: a.price_per_kwh,
                standing_charge_per_day: a.standing_charge_per_day,
                periods: a.periods.clone(),
                changes: Vec::new(),
                ..config.tariff.clone()
            };
            NamedTariff {
                name: name.to_owned(),
                origin: format!("[[tariff.alternative]] {name}"),
                tariff: report::input::tariff_from_config(&cfg)
                    .with_context(|| format!("[[tariff.alternative]] {name}"))?,
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
            anyhow::bail!(
                "--tariffs: no tariff {name:?}; known: {} (add [[tariff.alternative]] to the \
                 config, or import a series with wattson tariff import)",
                known.join(", ")
            );
        };
        out.push(t);
    }
    Ok(out)
}

/// Every GPU power series of `host` (source `gpu`, channel `gpuN`) with its utilisation,
/// process count and SM clock from the same polls, raw samples in `[from_ms, to_ms)`
/// (so at most the raw retention back). Samples of one poll share a timestamp.
pub fn gather_gpus(
    store: &crate::store::Store,
    host: &str,
    from_ms: i64,
    to_ms: i64,
) -> anyhow::Result<Vec<GpuInput>> {
    use std::collections::BTreeMap;

    use crate::store::SeriesFilter;
    use wattson_collectors::Metric;

    let power = store.find_series(&SeriesFilter::all().host(host).metric(Metric::Power))?;
    let mut out = Vec::new();
    for p in power
        .iter()
        .filter(|s| s.source == SourceId::Gpu)
        .filter(|s| channel::is_gpu(&s.channel))
    {
        let raw = |metric: Metric| -> anyhow::Result<BTreeMap<i64, f64>> {
            let filter = SeriesFilter::all()
                .host(host)
                .source(&p.source)
                .metric(metric)
                .channel(&p.channel);
            Ok(store
                .raw(&filter, from_ms, to_ms)?
                .into_iter()
                .flat_map(|(_, pts)| pts)
                .collect())
        };
        let util = raw(Metric::GpuUtilisation)?;
        let procs = raw(Metric::GpuProcesses)?;
        let clock = raw(Metric::GpuClock)?;
        let points: Vec<GpuPoint> = raw(Metric::Power)?
            .into_iter()
            .map(|(ts_ms, watts)| GpuPoint {
                ts_ms,
                watts,
                utilisation: util.get(&ts_ms).copied(),
                processes: procs.get(&ts_ms).map(|n| n.max(0.0).round() as u32),
                sm_clock_mhz: clock.get(&ts_ms).copied(),
            })
            .collect();
        if !points.is_empty() {
            out.push(GpuInput {
                source: p.source.clone(),
                channel: p.channel.clone(),
                points,
            });
        }
    }
    Ok(out)
}

/// A stored sweep as a report configuration: its levels, and the fit of its first kind.
fn sweep_config_input(s: &crate::sweep::persist::StoredSweep) -> ConfigInput {
    use crate::report::input::{ConfigKind, ConfigStatus, FitInput, LevelInput};
    let fit = s
        .fit
        .as_ref()
        .and_then(|f| f.as_array())
        .and_then(|a| a.first())
        .map(|f| {
            let l = &f["loops"];
            FitInput {
                idle_watts: l["intercept"].as_f64().unwrap_or(f64::NAN),
                idle_ci95: l["intercept_ci95"].as_f64(),
                watts_per_loop: l["slope"].as_f64().unwrap_or(f64::NAN),
                watts_per_loop_ci95: l["slope_ci95"].as_f64(),
                r2: l["r2"].as_f64().unwrap_or(f64::NAN),
                notes: f["notes"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|n| n.as_str().map(str::to_owned))
                    .collect(),
                kind: f["kind"].as_str().unwrap_or("spin").to_owned(),
            }
        });
    let levels = s
        .levels
        .iter()
        .map(|l| LevelInput {
            kind: l.kind.clone(),
            loops: u32::try_from(l.loops).unwrap_or(0),
            mean_w: l.mean_w,
            ci95_w: l.ci95_w.unwrap_or(0.0),
            residency: l
                .residency
                .as_ref()
                .and_then(|r| serde_json::from_value(r.clone()).ok())
                .unwrap_or_default(),
            mean_mhz: l.mean_mhz,
            ops_per_s: l.ops_per_s,
            joules_per_op: l.joules_per_op,
            warnings: l
                .warnings
                .as_deref()
                .map(|w| {
                    w.split("; ")
                        .filter(|x| !x.is_empty())
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default(),
        })
        .collect();
    ConfigInput {
        name: s.name.clone(),
        kind: ConfigKind::Sweep,
        host: s.host.clone(),
        fingerprint: s.fingerprint.clone(),
        description: Some(format!("swept with {} ({})", s.meter, s.kinds)),
        modes: Vec::new(),
        fit,
        levels,
        upgrade_cost: None,
        status: if s.status == "complete" {
            ConfigStatus::Complete
        } else {
            ConfigStatus::Partial
        },
    }
}

/// Builds the report input from the configuration (and whatever the store returned).
pub fn input_from_config(
    config: &Config,
    store: StoreData,
    args: &ReportArgs,
    now: DateTime<Utc>,
) -> anyhow::Result<ReportInput> {
    let tariff = report::input::tariff_from_config(&config.tariff)
        .context("building the tariff from [tariff]")?
        .with_series(crate::analysis::price_series::SeriesSet::new(
            store
                .price_series
                .iter()
                .filter(|(_, applied)| *applied)
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
        options,
    })
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
    let built = report::build(&input)?;
    Ok(report::render(&built, args.format)?)
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
