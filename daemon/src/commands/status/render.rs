//! `wattson status` in words: the readings with where each comes from, the price now,
//! today's energy and cost with how sure each figure is, and the store's state.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use wattson_collectors::source::channel;
use wattson_collectors::{Metric, SourceId};

use super::{PriceNow, Reading, Status, StoreStatus};
use crate::ledger::costs::{self, CostSummary};
use crate::ledger::counter_check::CounterCheck;

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

pub(super) fn render(s: &Status) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "wattson status: host {} ({})", s.host, s.database);
    let _ = writeln!(out, "readings: {}", s.readings_from);
    if let Some(url) = s.daemon.as_ref().and_then(|d| d.http.as_deref()) {
        let _ = writeln!(out, "http: {url} (/metrics, the live page at /)");
    }
    if let Some(rw) = &s.remote_write {
        super::remote_write::render(rw, s.now_ms, &mut out);
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
        let stale = s
            .stale_meters
            .iter()
            .find(|m| m.source == *source)
            .map_or_else(String::new, |m| {
                format!(
                    "; STALE: read every {} s: the meter is not answering (the daemon's log \
                     says why)",
                    m.interval_s
                )
            });
        let _ = writeln!(
            out,
            "\n{source} ({}updated {}{stale})",
            crate::ledger::scope_label(source).map_or_else(String::new, |l| format!("{l}; ")),
            age_text(newest)
        );
        if *source == SourceId::Estimate {
            out.push_str(&estimate_lines(&rs, s.estimate_basis.as_deref()));
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
    if let Some(e) = &s.estimated {
        out.push_str(&estimated_lines(e));
    }
    if let Some(d) = &s.calibration_drift {
        out.push_str(&drift_line(d));
    }
    if let Some(why) = &s.calibration_unavailable {
        let _ = writeln!(out, "\ncalibration: gives no figure here: {why}");
    }
    if let Some(p) = &s.price {
        out.push_str(&price_line(p));
    }
    if let Some(sl) = &s.sleep {
        let currency = s.price.as_ref().map_or("", |p| p.currency.as_str());
        let _ = writeln!(
            out,
            "\nsleeping when idle (the report's section, last 28 days)"
        );
        for line in crate::report::sleep::lines(sl, currency) {
            let _ = writeln!(out, "  {line}");
        }
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
    if let Some(line) = &s.wattson_itself_text {
        let _ = writeln!(out, "\n{line}");
    }
    render_store(&mut out, &s.store);
    let _ = writeln!(out, "\nsources");
    if s.sources.is_none() {
        let _ = writeln!(
            out,
            "  {}'s own: run `wattson status` there (this machine's are not its)",
            s.host
        );
    }
    for src in s.sources.iter().flatten() {
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
    let money = |x: f64| crate::ledger::price::format_money(x, &c.currency);
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
        if p.counted_kwh > 0.0 {
            let _ = write!(
                t,
                "; {} over gaps counted by the meter, not sampled",
                crate::report::render::energy(p.counted_kwh)
            );
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
            let ci_w = c.mean_watts_interval.as_ref().and_then(|i| i.ci95_watts);
            let _ = writeln!(
                out,
                "  per year     {kwh:>10.1}{} kWh  {}{}  ({}; mean {w:.1}{} W)",
                pm(c.annual_kwh_ci95, 1),
                money(cost),
                pm(c.annual_cost_ci95, 2),
                c.annual_basis.as_deref().unwrap_or("projected as measured"),
                pm(ci_w, 1),
            );
        }
        _ => {
            let _ = writeln!(out, "  per year     not enough data yet for a projection");
        }
    }
    for a in &c.away {
        let _ = writeln!(
            out,
            "  {:<12} {}; {} {}",
            a.mode,
            crate::ledger::standby::phrase(a),
            crate::report::render::energy(a.wh / 1000.0),
            money(a.cost),
        );
    }
    if let Some(k) = counter {
        let _ = writeln!(
            out,
            "  meter counter today {} against the integral's {}: {} (the integral is the energy of record)",
            crate::report::render::energy(k.counter_wh / 1000.0),
            crate::report::render::energy(k.integral_wh / 1000.0),
            k.describe()
        );
    }
    for w in &c.warnings {
        let _ = writeln!(out, "  note: {w}");
    }
    if c.standing_charge_per_year > 0.0 {
        let _ = writeln!(
            out,
            "  standing charge {} per year (paid whether or not the machine runs){}",
            money(c.standing_charge_per_year),
            c.annual_cost_all_in
                .map(|a| format!("; a year with it {}", money(a)))
                .unwrap_or_default()
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
    for recovery in &s.recovered {
        let _ = writeln!(out, "  {:<12} {recovery}", "recovered");
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

/// The estimated wall draw as "estimated +/- X W" and where it came from (`basis`: the
/// calibration's provenance), never as a plain measurement.
fn estimate_lines(rs: &[&Reading], basis: Option<&str>) -> String {
    let power = |channel: &str| {
        rs.iter()
            .find(|r| r.metric == Metric::Power.as_str() && r.channel == channel)
            .map(|r| r.value)
    };
    let basis = basis.unwrap_or("from the host's calibration");
    match (
        power(""),
        power(crate::sources::calibrated_wall::ERROR_CHANNEL),
    ) {
        (Some(w), Some(e)) => format!(
            "  {:<28} {w:.2} W estimated \u{b1} {e:.2} W (no wall meter: {basis})\n",
            "power"
        ),
        (Some(w), None) => format!(
            "  {:<28} {w:.2} W estimated (no wall meter: {basis})\n",
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

/// The estimated energy and cost section of a host with no wall meter.
fn estimated_lines(e: &crate::calibration::priced::EstimatedFigures) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "\nenergy and cost (no wall meter: {})", e.provenance);
    let today = &e.today;
    let money = |x: f64| crate::ledger::price::format_money(x, &today.currency);
    let _ = writeln!(
        out,
        "  today        {:.3} kWh  {}  ({} minutes estimated{})",
        today.estimate.energy_wh / 1000.0,
        money(today.window_cost.unwrap_or(0.0)),
        today.estimate.minutes,
        withheld_text(&today.estimate)
    );
    match crate::calibration::priced::cost_line(&e.last_7_days) {
        Some(line) => {
            let _ = writeln!(
                out,
                "  last 7 days  {} minutes estimated{}:\n               {line}",
                e.last_7_days.estimate.minutes,
                withheld_text(&e.last_7_days.estimate)
            );
        }
        None => {
            let _ = writeln!(
                out,
                "  last 7 days  nothing estimated{}",
                withheld_text(&e.last_7_days.estimate)
            );
        }
    }
    out
}

/// The calibration beside the wall meter, and whether it is time to fit again.
fn drift_line(d: &crate::calibration::priced::DriftCheck) -> String {
    let s = &d.side;
    let verdict = if s.outside_interval {
        format!(
            "outside its +/- {:.1} %: fit it again (`wattson calibration fit`)",
            d.interval_pct
        )
    } else {
        format!("inside its +/- {:.1} %", d.interval_pct)
    };
    format!(
        "\ncalibration beside the wall ({}): the last 24 h's {} minutes estimated {:.3} kWh \
         against {:.3} kWh measured ({}), {:+.1} %, {verdict}\n",
        d.provenance,
        s.minutes,
        s.estimated_wh / 1000.0,
        s.wall_wh / 1000.0,
        s.wall_source,
        s.drift_pct
    )
}

/// ", N withheld (outside what the model saw)" when any minute was.
fn withheld_text(e: &crate::calibration::estimate::Estimated) -> String {
    let n: usize = e.withheld.iter().map(|w| w.minutes).sum();
    if n == 0 {
        String::new()
    } else {
        format!(", {n} withheld: outside what the model saw")
    }
}
