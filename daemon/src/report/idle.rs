//! The report's "Idle: where the watts go": the deepest package C-state the machine reached
//! over the report window and its residency (from the daemon's hourly rollups of
//! `package_residency`), the wall draw in the idle hours the package reached its deep states
//! (PC6 or deeper) against the idle hours it did not, and every setting `wattson idle
//! --measure` measured, as a configuration compared with idle as found: the difference in W
//! with its 95 % interval, and in kWh and money a year.
//!
//! The section's data is [`crate::idle::history`]'s. An hour counts as idle when the CPU's
//! mean busy share was under [`IDLE_BUSY`]; it reached
//! the deep states when PC6 and deeper together held at least [`REACHED`] of it. The two
//! groups of hours differ in more than the package state (what ran, the room), so the
//! difference is an association, and the report says so.

use serde::Serialize;

use crate::idle::explain::REACHED;
pub use crate::idle::history::{HoursGroup, IDLE_BUSY, IdleHour, IdleInput, hour_groups, load};
use crate::ledger::price::annual_cost;
use crate::tariff::Tariff;

/// A package state's share of the window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StateShare {
    pub state: String,
    /// 0..1.
    pub share: f64,
}

/// One measured setting, as a configuration against idle as found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IdleSetting {
    /// `ASPM powersave`.
    pub name: String,
    /// The candidate id (`pcie_aspm`).
    pub setting: String,
    pub original: String,
    pub changed: String,
    /// When it was measured (RFC 3339, UTC).
    pub measured_at: String,
    /// Idle as found and with the setting changed, W (measured at the wall).
    pub watts_as_found: f64,
    pub watts_changed: f64,
    /// Changed minus as found, W; negative saves.
    pub delta_watts: f64,
    pub delta_ci95_watts: f64,
    /// The interval excludes zero.
    pub effect: bool,
    /// The change in a year, kWh and currency (negative saves), with 95 % half-widths.
    pub annual_kwh_change: f64,
    pub annual_kwh_change_ci95: f64,
    pub annual_cost_change: f64,
    pub annual_cost_change_ci95: f64,
}

/// The section.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IdleReport {
    /// The deepest package state holding at least 0.1 % of the window.
    pub deepest_reached: Option<String>,
    pub residency: Vec<StateShare>,
    /// Idle hours in which the package reached PC6 or deeper.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hours_deep: Option<HoursGroup>,
    /// Idle hours in which it did not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hours_shallow: Option<HoursGroup>,
    pub settings: Vec<IdleSetting>,
    /// Who woke the CPUs over the window (`[wakeups]`, stored hourly by `wattson run`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wakeups: Option<crate::idle::wakeup_hours::StoredWakeups>,
    /// Each disk's spin state over the window (`[[disk]]`), its spun-up time priced.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub disks: Vec<crate::idle::disk_hours::StoredDisk>,
    pub notes: Vec<String>,
}

/// Build the section; `None` when there is nothing to say (no package history and nothing
/// measured).
pub fn build(
    input: &IdleInput,
    tariff: &Tariff,
    reference: chrono::NaiveDate,
) -> Option<IdleReport> {
    if input.is_empty() {
        return None;
    }
    let mut notes = Vec::new();
    let (hours_deep, hours_shallow) = hour_groups(&input.hours);
    if hours_deep.is_some() && hours_shallow.is_some() {
        notes.push(format!(
            "idle hours are those with the CPU under {:.0} % busy; the two groups differ in more \
             than the package state, so their difference is an association, not a measured \
             saving (`wattson idle --measure` measures one)",
            IDLE_BUSY * 100.0
        ));
    }
    // A disk's standby measurement prices the disk's spun-up hours, not a setting.
    let settings = input
        .effects
        .iter()
        .filter(|e| crate::idle::trials::standby_disk(&e.trial).is_none())
        .map(|e| {
            let year = annual_cost(e.delta_w, Some(e.delta_ci95_w), tariff, reference).ok();
            IdleSetting {
                name: e.name.clone(),
                setting: e.trial.clone(),
                original: e.original.clone(),
                changed: e.changed.clone(),
                measured_at: chrono::DateTime::from_timestamp_millis(e.ended_ms)
                    .map(|d| d.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
                    .unwrap_or_default(),
                watts_as_found: e.baseline_w,
                watts_changed: e.changed_w,
                delta_watts: e.delta_w,
                delta_ci95_watts: e.delta_ci95_w,
                effect: e.effect,
                annual_kwh_change: year.as_ref().map_or(0.0, |y| y.kwh),
                annual_kwh_change_ci95: year.as_ref().and_then(|y| y.kwh_ci95).unwrap_or(0.0),
                annual_cost_change: year.as_ref().map_or(0.0, |y| y.cost),
                annual_cost_change_ci95: year.as_ref().and_then(|y| y.cost_ci95).unwrap_or(0.0),
            }
        })
        .collect();
    let residency: Vec<StateShare> = input
        .states
        .iter()
        .map(|(state, share)| StateShare {
            state: state.clone(),
            share: *share,
        })
        .collect();
    Some(IdleReport {
        deepest_reached: residency
            .iter()
            .rev()
            .find(|s| s.share >= REACHED)
            .map(|s| s.state.clone()),
        residency,
        hours_deep,
        hours_shallow,
        settings,
        wakeups: input.wakeups.clone(),
        disks: {
            let mut d = input.disks.clone();
            crate::idle::disk_hours::price(&mut d, tariff, reference);
            d
        },
        notes,
    })
}

/// The section's lines for the text formats.
pub fn lines(r: &IdleReport, currency: &str) -> Vec<String> {
    use crate::ledger::price::format_money;
    let mut out = Vec::new();
    if r.residency.is_empty() {
        out.push(
            "package C-states: no history (the daemon records them where it can read the \
             residency MSRs or the cstate_pkg perf PMU: `wattson idle` says why not)"
                .to_owned(),
        );
    } else {
        let shares: Vec<String> = r
            .residency
            .iter()
            .map(|s| format!("{} {:.1} %", s.state, s.share * 100.0))
            .collect();
        out.push(format!(
            "deepest package C-state reached: {}; residency {}",
            r.deepest_reached.as_deref().unwrap_or("none"),
            shares.join(", ")
        ));
    }
    match (&r.hours_deep, &r.hours_shallow) {
        (Some(d), Some(s)) => out.push(format!(
            "at the wall, idle hours: {:.1} W in the {} h the package reached PC6 or deeper, \
             {:.1} W in the {} h it did not ({:+.1} W)",
            d.mean_wall_watts,
            d.hours,
            s.mean_wall_watts,
            s.hours,
            d.mean_wall_watts - s.mean_wall_watts
        )),
        (Some(d), None) => out.push(format!(
            "at the wall: {:.1} W over {} idle h, in every one of which the package reached PC6 \
             or deeper",
            d.mean_wall_watts, d.hours
        )),
        (None, Some(s)) => out.push(format!(
            "at the wall: {:.1} W over {} idle h, in none of which the package reached PC6",
            s.mean_wall_watts, s.hours
        )),
        (None, None) => {}
    }
    for s in &r.settings {
        if s.effect {
            let verb = if s.delta_watts < 0.0 {
                "saves"
            } else {
                "costs"
            };
            out.push(format!(
                "{}: {:+.1} +/- {:.1} W ({} -> {}, {:.1} -> {:.1} W), {verb} {:.1} kWh, {}/yr{}",
                s.name,
                s.delta_watts,
                s.delta_ci95_watts,
                s.original,
                s.changed,
                s.watts_as_found,
                s.watts_changed,
                s.annual_kwh_change.abs(),
                format_money(s.annual_cost_change.abs(), currency),
                if s.delta_watts < 0.0 { "" } else { " more" }
            ));
        } else {
            out.push(format!(
                "{}: no effect that this meter can distinguish ({:+.1} +/- {:.1} W; {} -> {})",
                s.name, s.delta_watts, s.delta_ci95_watts, s.original, s.changed
            ));
        }
    }
    if let Some(w) = &r.wakeups {
        out.extend(wakeup_lines(w));
    }
    for d in &r.disks {
        out.extend(crate::idle::disk_hours::lines(d, currency));
    }
    out.extend(r.notes.iter().cloned());
    out
}

/// "Who woke the CPUs": the services and the interrupt lines, each with its share.
fn wakeup_lines(w: &crate::idle::wakeup_hours::StoredWakeups) -> Vec<String> {
    let list = |rates: &[crate::idle::wakeup_hours::Rate]| {
        rates
            .iter()
            .map(|r| format!("{} {:.1} %", r.name, r.share * 100.0))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut out = vec![format!(
        "who woke the CPUs (sampled over {} of the window): {:.0} task wake-ups/s by \
         service: {}",
        crate::ledger::interval::hours_text(w.seconds / 3600.0),
        w.task_wakeups_per_s,
        list(&w.by_service)
    )];
    if !w.interrupts.is_empty() {
        out.push(format!(
            "interrupts: {:.0}/s by line: {} (a timer interrupt that wakes a task is counted \
             in both)",
            w.interrupts_per_s,
            list(&w.interrupts)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::idle::store::Effect;

    fn effect(name: &str, delta: f64, ci: f64) -> Effect {
        Effect {
            run_id: 1,
            host: "h".into(),
            trial: name.into(),
            name: name.into(),
            original: "performance".into(),
            changed: "powersave".into(),
            started_ms: 0,
            ended_ms: 1_800_000_000_000,
            baseline_w: 40.0,
            changed_w: 40.0 + delta,
            delta_w: delta,
            delta_ci95_w: ci,
            n: 100,
            effect: delta.abs() > ci,
            phases: serde_json::Value::Null,
        }
    }

    #[test]
    fn deep_and_shallow_idle_hours_and_settings_priced() {
        let hour = |i: i64, wall: f64, deep: f64, busy: f64| IdleHour {
            hour_ms: i * 3_600_000,
            wall_w: Some(wall),
            deep_share: deep,
            busy: Some(busy),
        };
        let input = IdleInput {
            states: vec![
                ("PC2".into(), 0.3),
                ("PC6".into(), 0.2),
                ("PC8".into(), 0.0),
            ],
            hours: vec![
                hour(0, 30.0, 0.5, 0.02),
                hour(1, 32.0, 0.4, 0.03),
                hour(2, 38.0, 0.0, 0.02),
                // Busy hours are not idle hours.
                hour(3, 90.0, 0.0, 0.8),
            ],
            effects: vec![effect("ASPM powersave", -3.0, 0.4), effect("NMI", 0.1, 0.4)],
            wakeups: None,
            disks: Vec::new(),
            idle_wall: Vec::new(),
        };
        let tariff = Tariff::simple("GBP", 0.30, 0.0, Vec::new(), crate::zone::Zone::UTC).unwrap();
        let today = chrono::NaiveDate::from_ymd_opt(2026, 1, 1).unwrap();
        let r = build(&input, &tariff, today).unwrap();
        assert_eq!(r.deepest_reached.as_deref(), Some("PC6"));
        assert_eq!(r.hours_deep.as_ref().unwrap().hours, 2);
        assert_eq!(r.hours_deep.as_ref().unwrap().mean_wall_watts, 31.0);
        assert_eq!(r.hours_shallow.as_ref().unwrap().hours, 1);
        let aspm = &r.settings[0];
        assert!((aspm.annual_kwh_change + 26.28).abs() < 1e-9, "{aspm:?}");
        assert!((aspm.annual_cost_change + 7.884).abs() < 1e-9, "{aspm:?}");
        let text = lines(&r, "GBP").join("\n");
        assert!(text.contains("ASPM powersave: -3.0 +/- 0.4 W"), "{text}");
        assert!(text.contains("saves 26.3 kWh, GBP 7.88/yr"), "{text}");
        assert!(
            text.contains("NMI: no effect that this meter can distinguish"),
            "{text}"
        );
        assert!(
            text.contains("31.0 W in the 2 h the package reached PC6"),
            "{text}"
        );
        assert!(build(&IdleInput::default(), &tariff, today).is_none());
    }
}
