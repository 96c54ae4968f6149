//! What sleeping when idle would save (the report's "Sleeping when idle" section, `sleep` in
//! JSON and `status --json`, rows of kind `sleep` in CSV): this machine's stored week
//! ([`gather`]) through the analysis ([`crate::analysis::sleep`]), the window it proposes
//! priced against the standby watts ([`standby`]) by the ledger's year pricing
//! ([`crate::ledger::annual::on_week`]), and the cost of waking.
//!
//! Units: W, hours, kWh and the tariff's currency a year, Wh a resume.

pub mod gather;
pub mod standby;

use serde::Serialize;

use crate::analysis::sleep::{HourOfWeek, SleepPlan, Thresholds, WEEK_HOURS, plan};
use crate::ledger::annual::on_week;
use crate::ledger::price::CostError;
use crate::tariff::Tariff;

/// The week's hours and what the section is asked to price them with.
#[derive(Debug, Clone)]
pub struct SleepInput {
    /// Each local hour of the week, Monday 00:00 first.
    pub hours: Vec<HourOfWeek>,
    /// What the hours were read from, in words ("the 28 days to 2026-12-07").
    pub history: String,
    /// Hours of wall power the history holds.
    pub covered_hours: f64,
    pub thresholds: Thresholds,
    /// (W, 95 % half-width, where from): [`standby::standby_watts`].
    pub standby: Option<(f64, Option<f64>, String)>,
    /// The energy of one resume, Wh, and where it came from, where known.
    pub wake: Option<(f64, String)>,
}

/// The section.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SleepReport {
    /// What the analysis read.
    pub history: String,
    pub thresholds: Thresholds,
    /// The thresholds in words.
    pub thresholds_text: String,
    /// The proposed nightly windows ("01:00-07:00 every night"); empty with none.
    pub windows: Vec<String>,
    /// The same as a schedule `report --schedule` reads ("standby 01:00-07:00; idle").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    pub hours_a_week: f64,
    pub hours_a_year: f64,
    /// The nights of the week the windows hold, and those with something they would have
    /// slept through.
    pub nights_a_week: usize,
    pub nights_interrupted_a_week: usize,
    /// Mean power of the slept hours, W (idle: the work that kept an hour awake is done
    /// anyway, at another time).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_watts: Option<f64>,
    /// The quietest hour of the week's mean power, W.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub floor_watts: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub standby_watts: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub standby_ci95_watts: Option<f64>,
    /// Where the standby figure came from, or how to get one.
    pub standby_from: String,
    /// (idle W - standby W) over the slept hours of a year, and its price at the tariff in
    /// force in those hours.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annual_kwh_saved: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annual_saving: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub saving_price_per_kwh: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub saving_basis: Option<String>,
    /// Resumes a year (one at the end of each window each night).
    pub wakes_a_year: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wake_wh: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annual_wake_cost: Option<f64>,
    /// Where the energy of a resume came from, or that it is not measured.
    pub wake_from: String,
    /// The saving less the cost of waking, where both are known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annual_net_saving: Option<f64>,
    /// What the windows would have slept through.
    pub interrupted: Vec<Interrupted>,
    /// Why no window is proposed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
    /// What weakens the figures.
    pub warnings: Vec<String>,
}

/// Something a window would have slept through.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Interrupted {
    /// A service (`backup.service`), a disk and its waker, or what was seen unnamed.
    pub what: String,
    /// Local hour of the day, `HH:00`.
    pub at: String,
    /// Days of the week, `mon` ... `sun`.
    pub days: Vec<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wakeups_per_s: Option<f64>,
    /// In words: "backup.service at 03:00 on Sundays (200 wake-ups/s)".
    pub text: String,
}

const DAYS: [&str; 7] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];

/// The section for `input`, its year on `tariff` from the local day of `day_ms`.
pub fn build(input: &SleepInput, tariff: &Tariff, day_ms: i64) -> Result<SleepReport, CostError> {
    let t = input.thresholds;
    let (standby_watts, standby_ci95_watts, standby_from) = match &input.standby {
        Some((w, ci, from)) => (Some(*w), *ci, from.clone()),
        None => (None, None, standby::HOW_TO_GET_ONE.to_owned()),
    };
    let mut out = SleepReport {
        history: input.history.clone(),
        thresholds: t,
        thresholds_text: t.text(),
        windows: Vec::new(),
        schedule: None,
        hours_a_week: 0.0,
        hours_a_year: 0.0,
        nights_a_week: 0,
        nights_interrupted_a_week: 0,
        idle_watts: None,
        floor_watts: None,
        standby_watts,
        standby_ci95_watts,
        standby_from,
        annual_kwh_saved: None,
        annual_saving: None,
        saving_price_per_kwh: None,
        saving_basis: None,
        wakes_a_year: 0.0,
        wake_wh: input.wake.as_ref().map(|w| w.0),
        annual_wake_cost: None,
        wake_from: String::new(),
        annual_net_saving: None,
        interrupted: Vec::new(),
        unavailable: None,
        warnings: Vec::new(),
    };
    let p = match plan(&input.hours, &t) {
        Ok(p) => p,
        Err(why) => {
            out.unavailable = Some(why.to_string());
            return Ok(out);
        }
    };
    describe(&mut out, &p, input.covered_hours);
    out.wake_from = match &input.wake {
        Some((_, from)) => from.clone(),
        None => "not measured: the history holds no resume to measure (a sleep with the meter \
                 in, its minutes before and after sampled), and no [sleep] wake_wh is given (the \
                 energy of one resume above idle, Wh)"
            .to_owned(),
    };
    let Some(standby) = standby_watts else {
        return Ok(out);
    };
    let idle = out.idle_watts.unwrap_or(0.0);
    if standby >= idle {
        out.warnings.push(format!(
            "the standby figure ({standby:.1} W) is not below the slept hours' idle power \
             ({idle:.1} W): sleeping would save nothing; check where the standby figure came \
             from"
        ));
    }
    let runs: Vec<(usize, usize, f64)> = (0..WEEK_HOURS)
        .filter_map(|h| p.idle_watts[h].map(|w| (h * 60, 60, (w - standby).max(0.0))))
        .collect();
    let saving = on_week(
        &runs,
        tariff,
        day_ms,
        &format!(
            "a year of sleeping {} at {standby:.1} W standby ({}) instead of idling at the slept \
             hours' own power ({idle:.1} W on average)",
            p.windows_text(),
            out.standby_from
        ),
    )?;
    out.annual_kwh_saved = Some(saving.kwh);
    out.annual_saving = Some(saving.cost);
    out.saving_price_per_kwh = Some(saving.price_per_kwh);
    out.saving_basis = Some(saving.basis);
    if let Some((wh, _)) = input.wake {
        let wakes: Vec<(usize, usize, f64)> = p
            .windows
            .iter()
            .flat_map(|w| (0..7).map(move |d| ((d * 24 + w.start + w.hours) % WEEK_HOURS) * 60))
            .map(|minute| (minute, 1, wh * 60.0))
            .collect();
        let cost = on_week(&wakes, tariff, day_ms, "resumes")?.cost;
        out.annual_wake_cost = Some(cost);
        out.annual_net_saving = Some(saving.cost - cost);
    }
    Ok(out)
}

/// The plan's window, hours, nights and interruptions into `out`.
fn describe(out: &mut SleepReport, p: &SleepPlan, covered_hours: f64) {
    out.windows = p.windows.iter().map(ToString::to_string).collect();
    out.schedule = Some(if p.windows.iter().any(|w| w.hours >= 24) {
        "standby".to_owned()
    } else {
        let mut entries: Vec<String> = p
            .windows
            .iter()
            .map(|w| format!("standby {:02}:00-{:02}:00", w.start, w.end()))
            .collect();
        entries.push("idle".to_owned());
        entries.join("; ")
    });
    out.hours_a_week = p.hours_a_week() as f64;
    out.hours_a_year = out.hours_a_week * 365.0 / 7.0;
    out.nights_a_week = p.nights;
    out.nights_interrupted_a_week = p.nights_interrupted;
    out.idle_watts = p.idle_watts_mean();
    out.floor_watts = Some(p.floor_watts);
    out.wakes_a_year = p.windows.iter().filter(|w| w.hours < 24).count() as f64 * 365.0;
    out.interrupted = p
        .interrupted
        .iter()
        .map(|i| Interrupted {
            what: i.what.clone(),
            at: format!("{:02}:00", i.hour),
            days: i.days.iter().map(|&d| DAYS[d % 7]).collect(),
            wakeups_per_s: i.wakeups_per_s,
            text: i.text(),
        })
        .collect();
    if p.unmeasured_hours > 0 {
        out.warnings.push(format!(
            "{} of the slept hours of the week hold no history: each taken at its hour of the \
             day's idle power on the other days",
            p.unmeasured_hours
        ));
    }
    if covered_hours < 2.0 * WEEK_HOURS as f64 {
        out.warnings.push(format!(
            "{} of history: each hour of the week seen about once; a job that runs less \
             often than weekly may not be in it",
            crate::ledger::interval::hours_text(covered_hours)
        ));
    }
}

/// The section's lines, as the text, Markdown and HTML reports print them.
pub fn lines(s: &SleepReport, currency: &str) -> Vec<String> {
    let money = |x: f64| crate::ledger::price::format_money(x, currency);
    let mut out = vec![format!("from {}", s.history)];
    if let Some(why) = &s.unavailable {
        out.push(format!("no window proposed: {why}"));
        out.push(format!("thresholds: {}", s.thresholds_text));
        return out;
    }
    out.push(format!(
        "proposed: sleep {} ({} h a week, {:.0} h a year; as a schedule: \"{}\"); it would have \
         slept {} of the week's {} nights through",
        s.windows.join(", "),
        crate::report::render::num(s.hours_a_week, 1),
        s.hours_a_year,
        s.schedule.as_deref().unwrap_or(""),
        s.nights_a_week - s.nights_interrupted_a_week,
        s.nights_a_week
    ));
    for i in &s.interrupted {
        out.push(format!("would interrupt: {}", i.text));
    }
    match (s.standby_watts, s.annual_saving, s.annual_kwh_saved) {
        (Some(w), Some(cost), Some(kwh)) => out.push(format!(
            "saving: {} a year ({} kWh): idle {:.1} W less standby {w:.1} W{} ({}) over {:.0} h \
             a year{}",
            money(cost),
            crate::report::render::num(kwh, 2),
            s.idle_watts.unwrap_or(0.0),
            s.standby_ci95_watts
                .map(|c| format!(" +/- {c:.1}"))
                .unwrap_or_default(),
            s.standby_from,
            s.hours_a_year,
            // The window and the standby are said above: the pricing alone here.
            s.saving_basis
                .as_deref()
                .and_then(|b| b.find(", priced over").map(|i| &b[i..]))
                .unwrap_or("")
        )),
        _ => out.push(format!("no saving priced: {}", s.standby_from)),
    }
    out.push(match (s.annual_wake_cost, s.annual_net_saving) {
        (Some(c), Some(net)) => format!(
            "waking: {:.0} resumes a year at {} Wh each ({}): {} a year; net saving {}",
            s.wakes_a_year,
            s.wake_wh.unwrap_or(0.0),
            s.wake_from,
            money(c),
            money(net)
        ),
        _ => format!(
            "waking: {:.0} resumes a year; their energy is {}",
            s.wakes_a_year, s.wake_from
        ),
    });
    out.push(format!("thresholds: {}", s.thresholds_text));
    out.extend(s.warnings.iter().map(|w| format!("warning: {w}")));
    out
}

#[cfg(test)]
mod tests;
