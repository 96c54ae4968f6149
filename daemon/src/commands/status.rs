//! `wattson status`: the latest readings (live from the running daemon over its control
//! socket when one runs for the database, else the newest stored ones) and today's energy
//! and cost, from the database; and which power sources this machine has. Every energy and
//! money figure comes from the ledger ([`crate::ledger`]), so it is the same as the report's
//! on the same window.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;
use wattson_collectors::SourceId;
use wattson_collectors::source::channel;

use serde::Serialize;
use wattson_collectors::{Metric, SysRoot};

use crate::cli::StatusArgs;
use crate::ledger::costs::{self, CostSummary};
use crate::ledger::counter::{self as ledger_counter, CounterCheck, SourceRejections};

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

/// Whether a power source works on this machine, and why not.
#[derive(Debug, Serialize)]
pub struct SourceState {
    pub source: String,
    pub available: bool,
    pub detail: String,
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
    per_core_series: usize,
    cost: Option<CostSummary>,
    /// The price now and what the wall's current draw costs at it.
    #[serde(skip_serializing_if = "Option::is_none")]
    price: Option<PriceNow>,
    /// The wall meter's own counter against the integral, today.
    #[serde(skip_serializing_if = "Option::is_none")]
    counter_today: Option<CounterCheck>,
    /// Readings dropped as implausible, per source and reason (raw retention).
    rejected: Vec<SourceRejections>,
    sources: Vec<SourceState>,
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
                quarantined,
            }
        }
        WriterState::Stopped(holder) => StoreStatus {
            state: "no writer",
            writer: holder.map(|h| format!("last: pid {} ({})", h.pid, h.command)),
            problem: None,
            losses: Vec::new(),
            quarantined,
        },
        WriterState::Never => StoreStatus {
            state: "no writer",
            writer: None,
            problem: None,
            losses: Vec::new(),
            quarantined,
        },
    })
}

pub fn run(args: &StatusArgs, config_path: Option<&Path>) -> anyhow::Result<ExitCode> {
    let config = super::load_config(config_path)?;
    let db = args
        .db
        .clone()
        .unwrap_or_else(|| config.storage.path.clone());
    if !super::database_exists(&db)? {
        anyhow::bail!(
            "no database at {}: start the daemon (wattson run) or pass --db PATH",
            db.display()
        );
    }
    let store = super::open_database(&db)?;
    let now = chrono::Utc::now();
    let now_ms = now.timestamp_millis();
    let host = args
        .host
        .clone()
        .unwrap_or_else(|| config.host.name.clone());
    let own_host = host == config.host.name;
    let mut readings = Vec::new();
    let mut per_core = 0;
    for l in store.latest(&host)? {
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
    let tariff = crate::tariff::tariff_with_series(&config.tariff, &store, now_ms)?;
    let price = {
        let (p, until, from) = tariff.priced_segment(now_ms)?;
        let watts = wall.as_ref().and_then(|w| {
            readings
                .iter()
                .find(|r| {
                    r.source == *w && r.metric == Metric::Power.as_str() && r.channel.is_empty()
                })
                .map(|r| r.value)
        });
        let live = from != crate::analysis::tariff::PriceSource::Configured
            && tariff.source_name(from) == crate::tariff::store::LIVE_SOURCE;
        Some(PriceNow {
            price_per_kwh: p,
            currency: tariff.currency().to_owned(),
            source: tariff.source_name(from),
            until_ms: (!live
                && until < i64::MAX / 2
                && from != crate::analysis::tariff::PriceSource::Configured)
                .then_some(until),
            cost_per_hour: watts.map(|w| w / 1000.0 * p),
            watts,
        })
    };
    let (cost, counter_today) = match wall {
        Some(source) => {
            let accuracy = own_host
                .then(|| costs::accuracy_of(&config, &source))
                .flatten();
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
    let status = Status {
        database: db.display().to_string(),
        readings_from,
        daemon,
        store: store_status(&db, &store)?,
        readings,
        per_core_series: per_core,
        cost,
        price,
        counter_today,
        rejected: ledger_counter::rejections(&store, &host)?,
        host,
        sources: source_states(
            &SysRoot::new(&config.host.sysfs, &config.host.procfs),
            &config,
        ),
    };
    if args.json {
        crate::output::println(&serde_json::to_string_pretty(&status)?);
    } else {
        crate::output::print(&render(&status));
    }
    Ok(ExitCode::SUCCESS)
}

/// The daemon's latest readings, where it says where they came from; else why not, in
/// words (no daemon running; or a socket this user may not use, or a daemon of another
/// protocol, logged as a warning).
fn live_readings(db: &Path, now_ms: i64) -> Result<(Vec<Reading>, String, Daemon), String> {
    use crate::control::{Located, locate};
    let client = match locate(db) {
        Ok(Located::Daemon(c)) => c,
        Ok(Located::NoDaemon { why }) => return Err(why),
        Err(e) => {
            tracing::warn!("{e}");
            return Err(e.to_string());
        }
    };
    let status = client.status().map_err(|e| {
        tracing::warn!("{e}");
        e.to_string()
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
    };
    Ok((readings, format!("live from {}", client.describe()), daemon))
}

/// Which sources this machine offers and why the others are unavailable.
pub fn source_states(root: &SysRoot, config: &crate::config::Config) -> Vec<SourceState> {
    let mut out = Vec::new();
    for m in &config.meters {
        out.push(SourceState {
            source: SourceId::meter(&m.id).to_string(),
            available: m.port.exists(),
            detail: if m.port.exists() {
                format!("{} on {}", m.protocol, m.port.display())
            } else {
                format!("{} is not present (unplugged?)", m.port.display())
            },
        });
    }
    if config.meters.is_empty() {
        out.push(SourceState {
            source: "meter".into(),
            available: false,
            detail: "no [[meter]] configured: wall power is not measured".into(),
        });
    }
    let cpu =
        wattson_collectors::cpu::CpuCollector::new(root.clone()).with_devfs(&config.host.devfs);
    for (part, state) in cpu.availability() {
        out.push(SourceState {
            source: format!("{} {part}", SourceId::Cpu),
            available: state.is_ok(),
            detail: state.err().unwrap_or_else(|| "ok".into()),
        });
    }
    match wattson_collectors::power::rapl::RaplCollector::new(root) {
        Ok(_) => out.push(SourceState {
            source: SourceId::Rapl.to_string(),
            available: true,
            detail: "powercap zones readable".into(),
        }),
        Err(e) => out.push(SourceState {
            source: SourceId::Rapl.to_string(),
            available: false,
            detail: e.to_string(),
        }),
    }
    if config.power.gpu {
        let state = wattson_collectors::power::nvml::NvmlCollector::new();
        out.push(SourceState {
            source: SourceId::Gpu.to_string(),
            available: state.is_ok(),
            detail: state.map_or_else(|e| e.to_string(), |_| "NVML loaded".into()),
        });
    }
    if !config.power.ipmi {
        out.push(SourceState {
            source: SourceId::Ipmi.to_string(),
            available: false,
            detail: "off ([power] ipmi = true reads the BMC's DCMI power reading)".into(),
        });
    }
    for u in &config.ups {
        out.push(SourceState {
            source: SourceId::ups(&u.name).to_string(),
            available: true,
            detail: format!(
                "upsd {}:{} (shared: feeds several machines; never added to the wall figure)",
                u.host, u.port
            ),
        });
    }
    match wattson_collectors::power::hwmon::HwmonCollector::new(root) {
        Ok(_) => out.push(SourceState {
            source: SourceId::Hwmon.to_string(),
            available: true,
            detail: "power sensors found".into(),
        }),
        Err(e) => out.push(SourceState {
            source: SourceId::Hwmon.to_string(),
            available: false,
            detail: e.to_string(),
        }),
    }
    out
}

fn label(metric: &str, channel: &str) -> String {
    match (metric, channel) {
        ("cpu_busy", c) if c == channel::ALL => "CPU busy".into(),
        ("core_frequency", c) if c == channel::MEAN => "mean core frequency".into(),
        ("idle_residency", c) => format!("idle state {}", channel::all_part(c).unwrap_or(c)),
        ("package_residency", c) => format!("package state {}", channel::all_part(c).unwrap_or(c)),
        ("cpu_time", c) => format!("CPU time {}", channel::all_part(c).unwrap_or(c)),
        (m, "") => m.replace('_', " "),
        (m, c) => format!("{} {c}", m.replace('_', " ")),
    }
}

fn value_text(r: &Reading) -> String {
    match r.unit {
        "share" => format!("{:.1} %", r.value * 100.0),
        "MHz" => format!("{:.0} MHz", r.value),
        "Wh" => format!("{:.3} kWh", r.value / 1000.0),
        "" => format!("{:.2}", r.value),
        u => format!("{:.2} {u}", r.value),
    }
}

fn render(s: &Status) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "wattson status: host {} ({})", s.host, s.database);
    let _ = writeln!(out, "readings: {}", s.readings_from);
    if let Some(url) = s.daemon.as_ref().and_then(|d| d.http.as_deref()) {
        let _ = writeln!(out, "http: {url} (/metrics, the live page at /)");
    }
    let mut by_source: BTreeMap<&SourceId, Vec<&Reading>> = BTreeMap::new();
    for r in &s.readings {
        by_source.entry(&r.source).or_default().push(r);
    }
    if by_source.is_empty() {
        let _ = writeln!(out, "\nno readings stored yet");
    }
    for (source, rs) in by_source {
        let newest = rs.iter().map(|r| r.age_s).fold(f64::INFINITY, f64::min);
        let _ = writeln!(
            out,
            "\n{source} ({}updated {})",
            scope_label(source).map_or_else(String::new, |l| format!("{l}; ")),
            age_text(newest)
        );
        if *source == SourceId::Estimate {
            out.push_str(&estimate_lines(&rs));
            continue;
        }
        for r in rs {
            let _ = writeln!(
                out,
                "  {:<28} {}",
                label(r.metric, &r.channel),
                value_text(r)
            );
        }
    }
    if s.per_core_series > 0 {
        let _ = writeln!(
            out,
            "  ({} per-core series stored; see --json or the database)",
            s.per_core_series
        );
    }
    if let Some(c) = &s.cost {
        out.push_str(&cost_lines(c, s.counter_today.as_ref()));
    }
    if let Some(p) = &s.price {
        out.push_str(&price_line(p));
    }
    if !s.rejected.is_empty() {
        let _ = writeln!(out, "\nrejected readings (implausible, never stored)");
        for r in &s.rejected {
            let counts: Vec<String> = r
                .counts
                .iter()
                .map(|(reason, n)| format!("{} {n}", reason.replace('_', " ")))
                .collect();
            let _ = writeln!(out, "  {:<28} {}", r.source, counts.join(", "));
        }
    }
    render_store(&mut out, &s.store);
    let _ = writeln!(out, "\nsources");
    for src in &s.sources {
        let _ = writeln!(
            out,
            "  {:<16} {:<12} {}",
            src.source,
            if src.available {
                "available"
            } else {
                "unavailable"
            },
            src.detail
        );
    }
    out
}

/// The price now, its source, and the cost rate of the current draw.
fn price_line(p: &PriceNow) -> String {
    let source = match p.source.as_str() {
        "tariff" => "the configured [tariff]".to_owned(),
        crate::tariff::store::LIVE_SOURCE => "the live price ([tariff] price_topic)".to_owned(),
        other => format!("imported series {other:?}"),
    };
    let mut out = format!(
        "  price now    {:.4} {}/kWh from {source}",
        p.price_per_kwh, p.currency
    );
    if let Some(u) = p.until_ms {
        let _ = write!(out, " until {}", crate::tariff::import::rfc3339(u));
    }
    out.push('\n');
    if let (Some(rate), Some(w)) = (p.cost_per_hour, p.watts) {
        let _ = writeln!(
            out,
            "  cost rate    {:.4} {}/h (the latest {w:.1} W at that price)",
            rate, p.currency
        );
    }
    out
}

/// The energy and cost section.
fn cost_lines(c: &CostSummary, counter: Option<&CounterCheck>) -> String {
    let mut out = String::new();
    let money = |x: f64| crate::analysis::cost::format_money(x, &c.currency);
    let covered = |p: &costs::PeriodCost| {
        let mut t = format!(
            "{} covered",
            crate::ledger::interval::hours_text(p.covered_hours)
        );
        if let Some(w) = p.mean_watts {
            let _ = write!(t, ", mean {w:.1} W");
        }
        if p.gaps > 0 {
            let _ = write!(t, ", {} gap(s)", p.gaps);
        }
        t
    };
    let _ = writeln!(out, "\nenergy and cost ({})", c.source);
    for (name, p) in [
        ("today", &c.today),
        ("this month", &c.month),
        ("since start", &c.total),
    ] {
        let _ = writeln!(
            out,
            "  {name:<12} {:>14}  {}  ({})",
            crate::report::render::energy(p.kwh),
            money(p.cost),
            covered(p)
        );
    }
    match (c.mean_watts, c.annual_kwh, c.annual_cost) {
        (Some(w), Some(kwh), Some(cost)) => {
            let pm = |x: Option<f64>, dp: usize| {
                x.map_or_else(String::new, |v| format!(" \u{b1} {v:.dp$}"))
            };
            let ci_w = c.mean_watts_interval.as_ref().map(|i| i.ci95_watts);
            let _ = writeln!(
                out,
                "  per year     {kwh:>10.1}{} kWh  {}{}  (at {w:.1}{} W, the mean of {} measured in the last 7 days)",
                pm(c.annual_kwh_ci95, 1),
                money(cost),
                pm(c.annual_cost_ci95, 2),
                pm(ci_w, 1),
                crate::ledger::interval::hours_text(c.projection_window_hours)
            );
        }
        _ => {
            let _ = writeln!(out, "  per year     not enough data yet for a projection");
        }
    }
    if let Some(k) = counter {
        let _ = writeln!(
            out,
            "  meter counter today {} against the integral's {}{} (the integral is the energy of record)",
            crate::report::render::energy(k.counter_wh / 1000.0),
            crate::report::render::energy(k.integral_wh / 1000.0),
            k.difference_percent
                .map_or_else(String::new, |p| format!(", {p:+.1} %"))
        );
    }
    for w in &c.warnings {
        let _ = writeln!(out, "  note: {w}");
    }
    if c.standing_charge_per_year > 0.0 {
        let _ = writeln!(
            out,
            "  standing charge {} per year, not included (it is not a running cost of the machine)",
            money(c.standing_charge_per_year)
        );
    }
    out
}

fn render_store(out: &mut String, s: &StoreStatus) {
    let _ = writeln!(out, "\nstore");
    let state = match (s.state, &s.problem) {
        ("failing", Some(p)) => format!("NOT WRITING: {p}"),
        (state, _) => state.to_owned(),
    };
    let _ = writeln!(out, "  {:<12} {state}", "state");
    if let Some(w) = &s.writer {
        let _ = writeln!(out, "  {:<12} {w}", "writer");
    }
    for loss in &s.losses {
        let _ = writeln!(out, "  {:<12} {loss}", "lost");
    }
    if let Some(newest) = s.quarantined.first() {
        let _ = writeln!(
            out,
            "  {:<12} {} undecodable rows set aside (table quarantine); newest: {newest}",
            "quarantine",
            s.quarantined.len()
        );
    }
}

/// What a source's watts stand for, so that figures from different places are never read
/// as parts of one sum: the wall meter holds everything inside the box.
pub(crate) fn scope_label(source: &SourceId) -> Option<&'static str> {
    match source {
        SourceId::Meter(_) => Some("measured at the wall"),
        SourceId::Estimate => Some("estimated, not measured"),
        SourceId::Ups(_) => Some("a UPS: shared by every machine it feeds"),
        SourceId::Rapl | SourceId::Hwmon | SourceId::Gpu => {
            Some("measured inside the box: part of the wall figure")
        }
        SourceId::Ipmi => Some("the whole server, from its BMC"),
        SourceId::Cpu | SourceId::FleetState | SourceId::Other(_) => None,
    }
}

/// The estimated wall draw as "estimated +/- X W", never as a plain measurement.
fn estimate_lines(rs: &[&Reading]) -> String {
    let power = |channel: &str| {
        rs.iter()
            .find(|r| r.metric == Metric::Power.as_str() && r.channel == channel)
            .map(|r| r.value)
    };
    match (power(""), power(crate::sources::estimate::ERROR_CHANNEL)) {
        (Some(w), Some(e)) => format!(
            "  {:<28} {w:.2} W estimated \u{b1} {e:.2} W (no wall meter: from a sweep's calibration)\n",
            "power"
        ),
        (Some(w), None) => format!(
            "  {:<28} {w:.2} W estimated (no wall meter: from a sweep's calibration)\n",
            "power"
        ),
        _ => String::new(),
    }
}

fn age_text(age_s: f64) -> String {
    if !age_s.is_finite() {
        "never".into()
    } else if age_s < 120.0 {
        format!("{age_s:.0} s ago")
    } else if age_s < 7200.0 {
        format!("{:.0} min ago", age_s / 60.0)
    } else {
        format!("{:.1} h ago", age_s / 3600.0)
    }
}
