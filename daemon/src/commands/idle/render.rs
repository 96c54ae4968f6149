//! `wattson idle` as text: the report ([`render`]), who wakes the CPUs, and one line per
//! measured effect with what it saves a year.

use std::fmt::Write as _;
use std::time::Duration;

use crate::config::Config;
use crate::idle::explain::IdleReport;
use crate::idle::measure::Plan;
use crate::idle::store::{Effect, describe_delta};
use crate::idle::trials::Trial;
use crate::idle::wakeups::WakeupsView;
use crate::ledger::price::{annual_cost, format_money};
use wattson_collectors::idle::settings::SettingKind;

fn pct(share: f64) -> String {
    format!("{:.1} %", share * 100.0)
}

/// `wattson idle` as text.
pub fn render(r: &IdleReport, config: &Config) -> String {
    let mut out = format!(
        "wattson idle: why idle draws what it does (host {})\n\n",
        r.host
    );
    let window = r.window.describe();
    let p = &r.package;
    let source = if p.readable {
        format!(
            "{}, from {}",
            p.platform.as_deref().unwrap_or("intel"),
            p.source.as_deref().unwrap_or("the residency MSRs")
        )
    } else {
        "not readable here".to_owned()
    };
    let _ = writeln!(out, "Package C-states ({source}; {window})");
    if p.states.is_empty() {
        let why = p
            .unavailable
            .as_ref()
            .map_or_else(|| "no samples".to_owned(), ToString::to_string);
        let _ = writeln!(out, "  unavailable: {why}");
    } else {
        let states: Vec<String> = p
            .states
            .iter()
            .map(|s| format!("{} {}", s.state, pct(s.share)))
            .collect();
        let _ = writeln!(out, "  {}", states.join("  "));
        let _ = writeln!(
            out,
            "  deepest reached: {}",
            p.deepest_reached.as_deref().unwrap_or("none")
        );
    }
    if let Some(limit) = &p.limit {
        let _ = writeln!(
            out,
            "  firmware limit: {}{}",
            limit.label,
            if limit.locked { " (locked)" } else { "" }
        );
    }
    let _ = writeln!(
        out,
        "\nCore C-states (cpuidle {}, mean over CPUs; {window})",
        r.cores.driver.as_deref().unwrap_or("none")
    );
    if r.cores.states.is_empty() {
        let _ = writeln!(out, "  no samples");
    } else {
        let states: Vec<String> = r
            .cores
            .states
            .iter()
            .map(|s| format!("{} {}", s.state, pct(s.share)))
            .collect();
        let _ = writeln!(out, "  {}", states.join("  "));
    }
    if let Some(w) = &r.wakeups {
        render_wakeups(&mut out, w);
    }
    let _ = writeln!(out, "\nWhat it means");
    for f in &r.findings {
        let _ = writeln!(out, "  - {f}");
    }
    let _ = writeln!(
        out,
        "\nSettings (current value, and the lower-power one where it exists)"
    );
    let width = r.settings.iter().map(|s| s.label.len()).max().unwrap_or(0);
    for s in &r.settings {
        let verdict = match &s.lower {
            Some(lower) => format!("-> {lower}"),
            None => "(lowest)".to_owned(),
        };
        let note = s
            .note
            .as_deref()
            .map(|n| format!("  [{n}]"))
            .unwrap_or_default();
        let _ = writeln!(out, "  {:<width$}  {}  {verdict}{note}", s.label, s.current);
    }
    for a in &r.absent {
        let _ = writeln!(out, "  {}: not here ({})", a.kind.as_str(), a.why);
    }
    if !r.measured.is_empty() {
        let _ = writeln!(out, "\nMeasured at the wall (`wattson idle --measure`)");
        for e in &r.measured {
            let _ = writeln!(out, "  {}", effect_line(e, config));
        }
    }
    if let Some(g) = &r.gap {
        let _ = writeln!(
            out,
            "\nThe gap: idle now against the best idle seen (30 days)"
        );
        for line in crate::idle::gap::lines(g, &config.tariff.currency) {
            let _ = writeln!(out, "  {line}");
        }
    }
    render_disks(&mut out, r, config);
    render_next(&mut out, r);
    out
}

/// Each disk's spin state as stored, and the configured disks with nothing stored yet.
fn render_disks(out: &mut String, r: &IdleReport, config: &Config) {
    if r.disks.is_empty() && config.disks.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\nDisks (spin state as `wattson run` stored it, the last 30 days)"
    );
    for d in &r.disks {
        for line in crate::idle::disk_hours::lines(d, &config.tariff.currency) {
            let _ = writeln!(out, "  {line}");
        }
    }
    for c in config
        .disks
        .iter()
        .filter(|c| r.disks.iter().all(|d| d.disk != c.name))
    {
        let _ = writeln!(
            out,
            "  {}: nothing stored yet (`wattson run` reads it every {})",
            c.name,
            crate::config::format_duration(c.interval)
        );
    }
}

/// What to do next: measure what the settings save, or nothing left to change.
fn render_next(out: &mut String, r: &IdleReport) {
    let (disks, savers): (Vec<&Trial>, Vec<&Trial>) = r
        .trials
        .iter()
        .partition(|c| c.kind == SettingKind::DiskStandby);
    if savers.is_empty() {
        let _ = writeln!(
            out,
            "\nEvery setting wattson can change is at its lowest-power value."
        );
    } else {
        let ids: Vec<&str> = savers.iter().map(|c| c.id.as_str()).collect();
        let _ = writeln!(
            out,
            "\nNext: `sudo wattson idle --measure` measures what each of these saves at the wall \
             ({}), about {} minutes each, and puts every one back; `--only {}` picks one.",
            ids.join(", "),
            Plan::new(Duration::from_secs(1))
                .max_per_setting()
                .as_secs()
                .div_ceil(60),
            ids[0]
        );
    }
    for c in disks {
        let _ = writeln!(
            out,
            "`sudo wattson idle --measure --only {}` finds what the disk costs spun up at the \
             wall: the kernel stops it and it is spun up again, in turn (three times), then it is \
             left as found.",
            c.id
        );
    }
}

/// "Who wakes the CPUs": the ranked services, processes and interrupt lines, and where the
/// counts come from.
fn render_wakeups(out: &mut String, w: &WakeupsView) {
    if let Some(why) = &w.unavailable {
        let _ = writeln!(out, "\nWho wakes the CPUs\n  unavailable: {why}");
        return;
    }
    let _ = writeln!(out, "\nWho wakes the CPUs (sampled {:.0} s)", w.seconds);
    let _ = writeln!(out, "  tasks: {}", w.tasks_from);
    let _ = writeln!(out, "  interrupts: {}", w.interrupts_from);
    let row = |per_s: f64, share: f64, what: &str| {
        format!("    {per_s:>9.1}/s  {:>7}  {what}", pct(share))
    };
    let _ = writeln!(
        out,
        "  by service ({:.1} wake-ups/s from {} threads in all{})",
        w.task_wakeups_per_s,
        w.threads,
        if w.truncated {
            ", the scan stopped at its bound"
        } else {
            ""
        }
    );
    if w.by_service.is_empty() {
        let _ = writeln!(out, "    no task woke");
    }
    for g in &w.by_service {
        let _ = writeln!(
            out,
            "{}  ({})",
            row(g.per_s, g.share, &g.group),
            names_shown(&g.processes)
        );
    }
    let _ = writeln!(out, "  by process");
    for p in &w.by_process {
        let pids = if p.pids > 1 {
            format!(" x{}", p.pids)
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "{}",
            row(
                p.per_s,
                p.share,
                &format!("{}{pids}  [{}]", p.comm, p.group)
            )
        );
    }
    if let Some(why) = &w.interrupts_unavailable {
        let _ = writeln!(out, "  interrupts unavailable: {why}");
        return;
    }
    let _ = writeln!(
        out,
        "  interrupts by device and kind ({:.1}/s in all)",
        w.interrupts_per_s
    );
    for i in &w.interrupts {
        let _ = writeln!(out, "{}", row(i.per_s, i.share, &i.label()));
    }
}

/// A group's processes, the first [`PROCESSES_SHOWN`] by name and how many more.
fn names_shown(names: &[String]) -> String {
    let mut text = names
        .iter()
        .take(PROCESSES_SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > PROCESSES_SHOWN {
        let _ = write!(text, " and {} more", names.len() - PROCESSES_SHOWN);
    }
    text
}

/// Processes named on a group's line of "Who wakes the CPUs" (the JSON lists them all).
const PROCESSES_SHOWN: usize = 5;

/// `ASPM powersave (performance -> powersave): -3.05 +/- 0.37 W, 26.7 kWh, GBP 2.40/yr`.
pub(super) fn effect_line(e: &Effect, config: &Config) -> String {
    let mut line = format!(
        "{} ({} -> {}): {}",
        e.name,
        e.original,
        e.changed,
        describe_delta(e)
    );
    if let Some(disk) = crate::idle::trials::standby_disk(&e.trial) {
        let _ = write!(
            line,
            ": {disk} in standby against spinning, priced by its spun-up hours under Disks"
        );
    } else if e.effect {
        let _ = write!(line, ", {}", yearly(e.delta_w, e.delta_ci95_w, config));
    }
    line
}

/// `saves 26.7 kWh, GBP 2.40 a year` for a change of `delta_w` all year (`costs ... more`
/// for a rise), priced at the configured tariff over the coming year.
fn yearly(delta_w: f64, ci95_w: f64, config: &Config) -> String {
    let today = chrono::Local::now().date_naive();
    let verb = if delta_w < 0.0 { "saves" } else { "costs" };
    let more = if delta_w < 0.0 { "" } else { " more" };
    match crate::ledger::costs::tariff(&config.tariff)
        .ok()
        .and_then(|t| annual_cost(delta_w.abs(), Some(ci95_w), &t, today).ok())
    {
        Some(f) => format!(
            "{verb} {:.1} kWh, {} a year{more} (+/- {})",
            f.kwh,
            format_money(f.cost, &f.currency),
            format_money(f.cost_ci95.unwrap_or(0.0), &f.currency)
        ),
        None => format!(
            "{verb} {:.1} kWh a year{more}",
            crate::ledger::price::annual_kwh(delta_w.abs())
        ),
    }
}
