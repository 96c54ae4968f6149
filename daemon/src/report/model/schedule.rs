//! Each configuration's modes on a week's schedule (`wattson report --schedule`): a year on
//! the tariff of a machine that sleeps, idles and works when the schedule says, priced hour
//! by hour at the prices in force ([`crate::ledger::annual::on_schedule`]).

use serde::Serialize;

use super::{ConfigReport, ReportError};
use crate::analysis::schedule::Schedule;
use crate::tariff::Tariff;

/// The section.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScheduleReport {
    /// The schedule as read.
    pub schedule: String,
    /// Hours a week in each mode, in the order the schedule names them.
    pub hours_a_week: Vec<ModeHours>,
    /// Each configuration on it, in the report's order.
    pub configs: Vec<ScheduledConfig>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModeHours {
    pub mode: String,
    pub hours: f64,
}

/// One configuration on the schedule.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScheduledConfig {
    pub config: String,
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

/// The section for `schedule` over `configs`, from the local day `day_ms` falls in.
pub fn schedule_report(
    schedule: &Schedule,
    configs: &[ConfigReport],
    tariff: &Tariff,
    day_ms: i64,
) -> Result<ScheduleReport, ReportError> {
    let standing = tariff.standing_charge_per_day() * 365.0;
    let mut out = Vec::with_capacity(configs.len());
    for c in configs {
        let watts = |mode: &str| c.modes.iter().find(|m| m.name == mode).map(|m| m.watts);
        let year = crate::ledger::annual::on_schedule(schedule, &watts, tariff, day_ms, &c.name)
            .map_err(|source| ReportError::Cost {
                what: format!("{} on the schedule", c.name),
                source,
            })?;
        out.push(match year {
            Ok(a) => ScheduledConfig {
                config: c.name.clone(),
                annual_kwh: Some(a.kwh),
                annual_cost: Some(a.cost),
                annual_cost_all_in: Some(a.cost + standing),
                basis: a.basis,
            },
            Err(mode) => ScheduledConfig {
                config: c.name.clone(),
                annual_kwh: None,
                annual_cost: None,
                annual_cost_all_in: None,
                basis: format!(
                    "no {mode} measured or entered for {}: give it in its modes (`[[config]] \
                     modes = {{ {mode} = W, ... }}`) to price it on this schedule",
                    c.name
                ),
            },
        });
    }
    Ok(ScheduleReport {
        schedule: schedule.to_string(),
        hours_a_week: schedule
            .hours_a_week()
            .into_iter()
            .map(|(m, h)| ModeHours {
                mode: m.to_owned(),
                hours: h,
            })
            .collect(),
        configs: out,
    })
}

/// The section's lines, as the text, Markdown and HTML reports print them.
pub fn lines(s: &ScheduleReport, currency: &str) -> Vec<String> {
    let money = |x: f64| crate::ledger::price::format_money(x, currency);
    let hours: Vec<String> = s
        .hours_a_week
        .iter()
        .map(|m| format!("{} {:.0} h", m.mode, m.hours))
        .collect();
    let mut out = vec![format!(
        "schedule \"{}\": {} a week",
        s.schedule,
        hours.join(", ")
    )];
    for c in &s.configs {
        out.push(match (c.annual_kwh, c.annual_cost, c.annual_cost_all_in) {
            (Some(kwh), Some(cost), Some(all_in)) => format!(
                "{}: {} kWh, {} a year{}{}",
                c.config,
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
            _ => format!("{}: {}", c.config, c.basis),
        });
    }
    out
}
