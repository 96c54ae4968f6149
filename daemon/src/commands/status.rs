//! `wattson status`: the latest readings (live from the running daemon over its control
//! socket when one runs for the database, else the newest stored ones) and today's energy
//! and cost, from the database; and which power sources this machine has. Every energy and
//! money figure comes from the ledger ([`crate::ledger`]), so it is the same as the report's
//! on the same window.

use std::path::Path;
use std::process::ExitCode;
use wattson_collectors::SourceId;
use wattson_collectors::source::channel;

use serde::Serialize;
use wattson_collectors::{Metric, SysRoot};

use crate::calibration::priced::{drift, figures, unavailable};
use crate::cli::StatusArgs;

mod remote_write;
mod render;
mod sources;

use crate::ledger::costs::{self, CostSummary};
use crate::ledger::counter_check::{self as ledger_counter, CounterCheck, SourceRejections};
use render::render;
pub use sources::{SourceState, source_states};

/// One latest reading.
#[derive(Debug, Serialize)]
struct Reading {
    source: SourceId,
    metric: &'static str,
    channel: String,
    unit: &'static str,
    value: f64,
    ts_ms: i64,
    age_s: f64,
}

/// A meter whose newest reading is older than three of its intervals, whatever its
/// session believes: it has stopped answering (or the daemon stopped reading it).
#[derive(Debug, Serialize)]
struct StaleMeter {
    source: SourceId,
    /// Age of its newest reading, s.
    age_s: f64,
    /// How often it is read, s.
    interval_s: f64,
}

/// The configured meters of this host that are stale in `readings` (taken at `now_ms`):
/// newest reading older than three intervals (at least 3 s). A meter with no reading at all
/// is reported by the readings' absence, not here.
fn stale_meters(config: &crate::config::Config, readings: &[Reading]) -> Vec<StaleMeter> {
    let mut out = Vec::new();
    for m in &config.meters {
        let source = SourceId::meter(&m.id);
        let newest = readings
            .iter()
            .filter(|r| r.source == source)
            .map(|r| r.age_s)
            .fold(f64::INFINITY, f64::min);
        let limit = crate::live::health::Health::meter_stale_after(m.interval).as_secs_f64();
        if newest.is_finite() && newest > limit {
            out.push(StaleMeter {
                source,
                age_s: newest,
                interval_s: m.interval.as_secs_f64(),
            });
        }
    }
    out
}

/// How the database is being written: by whom, whether it can, what was lost or set aside.
#[derive(Debug, Serialize)]
struct StoreStatus {
    /// `writing`, `failing` (a writer runs but cannot write), or `no writer`.
    state: &'static str,
    /// The writer holding the database (pid, command line, since), or the last one.
    writer: Option<String>,
    /// Why the writer cannot write, while it cannot.
    problem: Option<String>,
    /// What the running writer lost or set aside since it started.
    losses: Vec<String>,
    /// What it recovered from without losing anything.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    recovered: Vec<String>,
    /// Rows set aside into the `quarantine` table, newest first.
    quarantined: Vec<crate::store::Quarantined>,
}

/// The running daemon, as it answered on its control socket.
#[derive(Debug, Serialize)]
struct Daemon {
    pid: u32,
    version: String,
    since_ms: i64,
    socket: String,
    sources: Vec<SourceId>,
    /// Connections open on its control socket, this one included.
    clients: usize,
    /// Where it serves `[http]` (`/metrics`, the live page), when it does.
    #[serde(skip_serializing_if = "Option::is_none")]
    http: Option<String>,
    /// Where its estimate of the wall comes from (shown as `estimate_basis`).
    #[serde(skip)]
    estimate_basis: Option<String>,
}

/// The price in force now: the live price, an imported slot, or the configured tariff.
#[derive(Debug, Serialize)]
struct PriceNow {
    /// Currency per kWh.
    price_per_kwh: f64,
    currency: String,
    /// A price series' name (`mqtt`: `[tariff] price_topic`), or `tariff`.
    source: String,
    /// Until when this price holds as far as is known, UTC ms (`None`: the configured price
    /// has no end, or a live price holds until the next arrives).
    #[serde(skip_serializing_if = "Option::is_none")]
    until_ms: Option<i64>,
    /// The wall's latest power at this price, currency per hour.
    #[serde(skip_serializing_if = "Option::is_none")]
    cost_per_hour: Option<f64>,
    /// The power that rate is of, W.
    #[serde(skip_serializing_if = "Option::is_none")]
    watts: Option<f64>,
}

#[derive(Debug, Serialize)]
struct Status {
    host: String,
    database: String,
    /// Where `readings` come from, in words: live from the daemon, or the database and why.
    readings_from: String,
    daemon: Option<Daemon>,
    store: StoreStatus,
    readings: Vec<Reading>,
    /// Meters of this host whose newest reading is older than three of their intervals.
    stale_meters: Vec<StaleMeter>,
    per_core_series: usize,
    cost: Option<CostSummary>,
    /// With no wall meter's energy: today's and the last 7 days' energy and money estimated
    /// from the host's calibration, always labelled so.
    #[serde(skip_serializing_if = "Option::is_none")]
    estimated: Option<crate::calibration::priced::EstimatedFigures>,
    /// With the meter in and a calibration: the estimate beside the wall over the last 24
    /// hours.
    #[serde(skip_serializing_if = "Option::is_none")]
    calibration_drift: Option<crate::calibration::priced::DriftCheck>,
    /// Why the stored calibration gives no figure here (a signal it reads is not stored).
    #[serde(skip_serializing_if = "Option::is_none")]
    calibration_unavailable: Option<String>,
    /// Where the `estimate:wall` readings come from and how sure they are: the provenance
    /// of the calibration the estimate takes first ("estimated from a sweep on DATE, +/- B W
    /// (X %)", "estimated from the calibration of DATE on ordinary running, +/- X %").
    #[serde(skip_serializing_if = "Option::is_none")]
    estimate_basis: Option<String>,
    /// The price now and what the wall's current draw costs at it.
    #[serde(skip_serializing_if = "Option::is_none")]
    price: Option<PriceNow>,
    /// The wall meter's own counter against the integral, today.
    #[serde(skip_serializing_if = "Option::is_none")]
    counter_today: Option<CounterCheck>,
    /// Readings dropped as implausible, per source and reason (raw retention).
    rejected: Vec<SourceRejections>,
    /// wattson's own CPU time over the last 7 days, priced like the services (an estimate).
    #[serde(skip_serializing_if = "Option::is_none")]
    wattson_itself: Option<crate::services::attribution::GroupFigure>,
    /// The same in one line of words.
    #[serde(skip_serializing_if = "Option::is_none")]
    wattson_itself_text: Option<String>,
    /// The power sources this machine offers; none for another host (a fleet collector's
    /// database), whose sources are not this machine's.
    #[serde(skip_serializing_if = "Option::is_none")]
    sources: Option<Vec<SourceState>>,
    /// `[prometheus] remote_write`, when configured.
    #[serde(skip_serializing_if = "Option::is_none")]
    remote_write: Option<remote_write::RemoteWriteStatus>,
    /// What sleeping when idle would save, from the last 28 days (as the report's section).
    #[serde(skip_serializing_if = "Option::is_none")]
    sleep: Option<crate::report::sleep::SleepReport>,
    #[serde(skip)]
    now_ms: i64,
}

fn store_status(db: &Path, store: &crate::store::Store) -> anyhow::Result<StoreStatus> {
    use crate::store::lock::{WriterState, writer_state};
    let quarantined = store.quarantined()?;
    Ok(match writer_state(db) {
        WriterState::Live(holder) => {
            let health = holder.as_ref().map(|h| h.store.clone()).unwrap_or_default();
            StoreStatus {
                state: if health.writable() {
                    "writing"
                } else {
                    "failing"
                },
                writer: holder.map(|h| h.describe()),
                problem: health.problem(),
                losses: health.losses(),
                recovered: health.recoveries(),
                quarantined,
            }
        }
        WriterState::Stopped(holder) => StoreStatus {
            state: "no writer",
            writer: holder.map(|h| format!("last: pid {} ({})", h.pid, h.command)),
            problem: None,
            losses: Vec::new(),
            recovered: Vec::new(),
            quarantined,
        },
        WriterState::Never => StoreStatus {
            state: "no writer",
            writer: None,
            problem: None,
            losses: Vec::new(),
            recovered: Vec::new(),
            quarantined,
        },
    })
}

pub fn run(args: &StatusArgs, config_path: Option<&Path>) -> anyhow::Result<ExitCode> {
    let config = super::load_config(config_path)?;
    let (db, store) = super::open_existing_database(args.db.as_deref(), &config)?;
    let now = chrono::Utc::now();
    let now_ms = now.timestamp_millis();
    let host = args
        .host
        .clone()
        .unwrap_or_else(|| config.host.name.clone());
    crate::store::check_host(&store, &host, &config.host.name)?;
    let own_host = host == config.host.name;
    let (mut readings, per_core) = stored_readings(&store, &host, now_ms)?;
    // The daemon's live readings are this host's own; another host's come from the database.
    let (readings_from, daemon) = if own_host {
        match live_readings(&db, now_ms) {
            Ok((live, from, daemon)) => {
                readings = live;
                (from, Some(daemon))
            }
            Err(why) => (format!("the database ({why})"), None),
        }
    } else {
        (format!("the database (host {host})"), None)
    };
    let wall = own_host
        .then(|| costs::wall_source(&config))
        .flatten()
        .or_else(|| {
            readings
                .iter()
                .filter(|r| r.source.is_meter() && r.metric == Metric::Power.as_str())
                .map(|r| r.source.clone())
                .min()
        });
    let tariff = crate::ledger::costs::tariff_with_series(&config.tariff, &store, now_ms)?;
    let price = Some(price_now(&tariff, wall.as_ref(), &readings, now_ms)?);
    let (cost, counter_today) = match wall {
        Some(source) => {
            // This machine's meter as the database recorded its protocol over the days the
            // year is projected from; the configuration's word only for history from before
            // it was recorded. Another host's meter is not known (as in `report`).
            let projected_from = now_ms - crate::ledger::annual::PROJECTION_WINDOW_MS;
            let accuracy = if own_host {
                match crate::ledger::meter_protocols::stored_accuracy(
                    &store,
                    &host,
                    &source,
                    projected_from,
                    now_ms,
                )? {
                    Some(stored) => stored,
                    None => costs::accuracy_of(&config, &source),
                }
            } else {
                None
            };
            let summary = costs::summary(&store, &host, &source, accuracy, &tariff, now)?;
            let today = crate::ledger::energy::energy(
                &store,
                &host,
                &source,
                summary.today.from_ms,
                summary.today.to_ms,
            )?;
            (Some(summary), ledger_counter::cross_check(&store, &today)?)
        }
        None => (None, None),
    };
    // No wall meter's energy: the host's calibration, priced, as its own figure; with the
    // meter in, the calibration beside the wall.
    let (estimated, calibration_drift, calibration_unavailable) = if cost.is_some() {
        let (d, why) = unavailable(drift(&store, &host, now))?;
        (None, d, why)
    } else {
        let (f, why) = unavailable(figures(&store, &host, &tariff, now))?;
        (f, None, why)
    };
    let estimate_basis = estimate_basis(&store, &host, &readings, daemon.as_ref())?;
    let wattson_cost = {
        use crate::store::{DAY_MS, HOUR_MS, floor_to};
        let to = floor_to(now_ms, HOUR_MS) + HOUR_MS;
        let tariff = crate::ledger::costs::tariff_with_series(&config.tariff, &store, now_ms)?;
        crate::services::estimate(&store, &host, &tariff, to - 7 * DAY_MS, to)?
    };
    let sleep = sleep_section(&store, &config, &tariff, (&host, own_host), now_ms)?;
    let status = Status {
        sleep,
        wattson_itself_text: crate::services::render::wattson_line(&wattson_cost),
        wattson_itself: wattson_cost.wattson,
        database: db.display().to_string(),
        readings_from,
        daemon,
        store: store_status(&db, &store)?,
        stale_meters: if own_host {
            stale_meters(&config, &readings)
        } else {
            Vec::new()
        },
        readings,
        per_core_series: per_core,
        cost,
        estimated,
        calibration_drift,
        calibration_unavailable,
        estimate_basis,
        price,
        counter_today,
        rejected: ledger_counter::rejections(&store, &host)?,
        remote_write: own_host
            .then(|| remote_write::status(&config, &store))
            .flatten(),
        now_ms,
        host,
        sources: own_host.then(|| {
            source_states(
                &SysRoot::new(&config.host.sysfs, &config.host.procfs),
                &config,
            )
        }),
    };
    if args.json {
        crate::output::println(&serde_json::to_string_pretty(&status)?);
    } else {
        crate::output::print(&render(&status));
    }
    Ok(ExitCode::SUCCESS)
}

/// What sleeping when idle would save, as the report's section says it over the last 28
/// days of `host` (`own`: this machine, whose configured wall and standby figure apply).
fn sleep_section(
    store: &crate::store::Store,
    config: &crate::config::Config,
    tariff: &crate::tariff::Tariff,
    (host, own): (&str, bool),
    now_ms: i64,
) -> Result<Option<crate::report::sleep::SleepReport>, crate::report::ProduceError> {
    let wall = own.then(|| costs::wall_source(config)).flatten();
    crate::report::sleep::gather::section(
        store,
        tariff,
        &crate::report::sleep::gather::Asked {
            host,
            wall: wall.as_ref(),
            since: None,
            until: None,
            now_ms,
            settings: &crate::report::sleep::gather::Settings::of(config, own, None),
        },
    )
}

/// The newest stored reading of each of `host`'s series (per-core series and rejection
/// counts left out), and how many per-core series there are.
fn stored_readings(
    store: &crate::store::Store,
    host: &str,
    now_ms: i64,
) -> anyhow::Result<(Vec<Reading>, usize)> {
    let mut readings = Vec::new();
    let mut per_core = 0;
    for l in store.latest(host)? {
        if channel::is_per_core(&l.series.channel) {
            per_core += 1;
            continue;
        }
        // Shown summed in their own section.
        if l.series.metric == Metric::Rejected {
            continue;
        }
        readings.push(Reading {
            source: l.series.source.clone(),
            metric: l.series.metric.as_str(),
            channel: l.series.channel.clone(),
            unit: l.series.unit.symbol(),
            value: l.value,
            ts_ms: l.ts_ms,
            age_s: (now_ms - l.ts_ms) as f64 / 1000.0,
        });
    }
    Ok((readings, per_core))
}

/// The price in force now, where it comes from and until when, and what the `wall` source's
/// power costs at it.
fn price_now(
    tariff: &crate::tariff::Tariff,
    wall: Option<&SourceId>,
    readings: &[Reading],
    now_ms: i64,
) -> anyhow::Result<PriceNow> {
    let (p, until, from) = tariff.priced_segment(now_ms)?;
    let watts = wall.and_then(|w| {
        readings
            .iter()
            .find(|r| r.source == *w && r.metric == Metric::Power.as_str() && r.channel.is_empty())
            .map(|r| r.value)
    });
    let live = from != crate::tariff::PriceSource::Configured
        && tariff.source_name(from) == crate::tariff::store::LIVE_SOURCE;
    Ok(PriceNow {
        price_per_kwh: p,
        currency: tariff.currency().to_owned(),
        source: tariff.source_name(from),
        until_ms: (!live && until < i64::MAX / 2 && from != crate::tariff::PriceSource::Configured)
            .then_some(until),
        cost_per_hour: watts.map(|w| w / 1000.0 * p),
        watts,
    })
}

/// Where `readings`' estimated wall comes from, when they hold one: as the running `daemon`
/// says (the calibration it took: it passes over one whose signals it cannot read), else
/// the provenance of the calibration the database offers first.
fn estimate_basis(
    store: &crate::store::Store,
    host: &str,
    readings: &[Reading],
    daemon: Option<&Daemon>,
) -> Result<Option<String>, crate::calibration::CalibrationError> {
    if !readings.iter().any(|r| r.source == SourceId::Estimate) {
        return Ok(None);
    }
    if let Some(basis) = daemon.and_then(|d| d.estimate_basis.clone()) {
        return Ok(Some(basis));
    }
    Ok(crate::calibration::persist::latest(store, host)?.map(|m| m.provenance()))
}

/// Why the status shows the database's readings, not the daemon's.
#[derive(Debug, thiserror::Error)]
enum NotLive {
    /// No daemon serves the database ([`crate::control::Located::NoDaemon`]'s reason).
    #[error("{0}")]
    NoDaemon(String),
    /// A daemon is there but its control socket cannot be used.
    #[error("{0}")]
    Control(crate::control::ControlError),
}

/// The daemon's latest readings, where it says where they came from; else why not, in
/// words (no daemon running; or a socket this user may not use, or a daemon of another
/// protocol, logged as a warning).
fn live_readings(db: &Path, now_ms: i64) -> Result<(Vec<Reading>, String, Daemon), NotLive> {
    use crate::control::{Located, locate};
    let client = match locate(db) {
        Ok(Located::Daemon(c)) => c,
        Ok(Located::NoDaemon { why }) => return Err(NotLive::NoDaemon(why)),
        Err(e) => {
            tracing::warn!("{e}");
            return Err(NotLive::Control(e));
        }
    };
    let status = client.status().map_err(|e| {
        tracing::warn!("{e}");
        NotLive::Control(e)
    })?;
    let readings = status
        .readings
        .into_iter()
        // Shown summed in their own section, as from the database.
        .filter(|r| r.metric != Metric::Rejected)
        .map(|r| Reading {
            source: r.source,
            metric: r.metric.as_str(),
            channel: r.channel,
            unit: r.metric.unit().symbol(),
            value: r.value,
            ts_ms: r.ts_ms,
            age_s: (now_ms - r.ts_ms) as f64 / 1000.0,
        })
        .collect();
    let daemon = Daemon {
        pid: status.pid,
        version: status.version,
        since_ms: status.since_ms,
        socket: client.socket().display().to_string(),
        sources: status.sources,
        clients: status.clients,
        http: status.http,
        estimate_basis: status.estimate_basis,
    };
    Ok((readings, format!("live from {}", client.describe()), daemon))
}
