//! Each configuration's modes on a week's schedule (`wattson report --schedule`): a year on
//! the tariff of a machine that sleeps, idles and works when the schedule says, priced hour
//! by hour at the prices in force ([`crate::ledger::annual::on_schedule`]).

use serde::Serialize;

use super::{ConfigReport, ReportError};
use crate::analysis::schedule::Schedule;
use crate::ledger::price::CostError;
use crate::tariff::Tariff;

/// The section.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScheduleReport {
    /// `--schedule` as read: the schedule of every configuration without one of its own;
    /// absent where only configurations' own schedules (`[[config]] schedule`) are priced.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    /// Hours a week in each mode of `schedule`, in the order it names them.
    pub hours_a_week: Vec<ModeHours>,
    /// Each configuration on its schedule, in the report's order.
    pub configs: Vec<ScheduledConfig>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModeHours {
    pub mode: String,
    pub hours: f64,
}

/// One configuration on its schedule.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScheduledConfig {
    pub config: String,
    /// The schedule it is priced on: its own, else `--schedule`.
    pub schedule: String,
    /// Whether that is its own (`[[config]] schedule`).
    pub own_schedule: bool,
    /// kWh a year; absent where a mode of the schedule has no watts for it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annual_kwh: Option<f64>,
    /// Currency a year, energy only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annual_cost: Option<f64>,
    /// With the standing charge.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annual_cost_all_in: Option<f64>,
    /// What the figure is, in words; or why there is none.
    pub basis: String,
}

fn mode_hours(schedule: &Schedule) -> Vec<ModeHours> {
    schedule
        .hours_a_week()
        .into_iter()
        .map(|(m, h)| ModeHours {
            mode: m.to_owned(),
            hours: h,
        })
        .collect()
}

/// The section for each of `configs` on its own schedule (`own(name)`), else on `default`
/// (`--schedule`), from the local day `day_ms` falls in; `None` where none has a schedule.
pub(super) fn schedule_report(
    default: Option<&Schedule>,
    own: &dyn Fn(&str) -> Option<Schedule>,
    configs: &[ConfigReport],
    tariff: &Tariff,
    day_ms: i64,
) -> Result<Option<ScheduleReport>, ReportError> {
    let standing = tariff.standing_charge_per_day() * 365.0;
    let mut out = Vec::with_capacity(configs.len());
    for c in configs {
        let mine = own(&c.name);
        let Some(schedule) = mine.as_ref().or(default) else {
            continue;
        };
        let watts = |mode: &str| c.modes.iter().find(|m| m.name == mode).map(|m| m.watts);
        let (annual_kwh, annual_cost, annual_cost_all_in, basis) =
            match crate::ledger::annual::on_schedule(schedule, &watts, tariff, day_ms, &c.name) {
                Ok(a) => (Some(a.kwh), Some(a.cost), Some(a.cost + standing), a.basis),
                // Said in its row: the others are priced still.
                Err(unpriced @ CostError::NoWatts { .. }) => {
                    (None, None, None, unpriced.to_string())
                }
                Err(source) => {
                    return Err(ReportError::Cost {
                        what: format!("{} on the schedule", c.name),
                        source,
                    });
                }
            };
        out.push(ScheduledConfig {
            config: c.name.clone(),
            schedule: schedule.to_string(),
            own_schedule: mine.is_some(),
            annual_kwh,
            annual_cost,
            annual_cost_all_in,
            basis,
        });
    }
    if out.is_empty() {
        return Ok(None);
    }
    Ok(Some(ScheduleReport {
        schedule: default.map(ToString::to_string),
        hours_a_week: default.map(mode_hours).unwrap_or_default(),
        configs: out,
    }))
}

/// The section's lines, as the text, Markdown and HTML reports print them.
pub fn lines(s: &ScheduleReport, currency: &str) -> Vec<String> {
    let money = |x: f64| crate::ledger::price::format_money(x, currency);
    let hours: Vec<String> = s
        .hours_a_week
        .iter()
        .map(|m| format!("{} {:.0} h", m.mode, m.hours))
        .collect();
    let mut out = Vec::new();
    if let Some(schedule) = &s.schedule {
        out.push(format!(
            "schedule \"{schedule}\": {} a week",
            hours.join(", ")
        ));
    }
    for c in &s.configs {
        // A configuration on its own schedule says which.
        let name = if c.own_schedule {
            format!("{} on its schedule \"{}\"", c.config, c.schedule)
        } else {
            c.config.clone()
        };
        out.push(match (c.annual_kwh, c.annual_cost, c.annual_cost_all_in) {
            (Some(kwh), Some(cost), Some(all_in)) => format!(
                "{}: {} kWh, {} a year{}{}",
                name,
                crate::report::render::num(kwh, 2),
                money(cost),
                if all_in > cost {
                    format!(" ({} with the standing charge)", money(all_in))
                } else {
                    String::new()
                },
                // The schedule and whose modes are said above: the pricing alone here.
                c.basis
                    .find(", priced over")
                    .map_or(String::new(), |i| format!(";{}", &c.basis[i + 1..]))
            ),
            _ => format!("{name}: {}", c.basis),
        });
    }
    out
}
