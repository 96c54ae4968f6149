//! The live page (`/`) and its figures (`/live.json`), and the report endpoints' query
//! parameters.
//!
//! The page is one static document (`page.html`): inline CSS and script, no external request
//! (its Content-Security-Policy allows only this origin). It opens on the year's cost on the
//! tariff, the figures of now, and charts its own script draws as SVG: power over the last
//! 24 hours and the last hour, and energy and cost a day over the last 30 days. The script
//! reads `/live.json` every [`REFRESH_MS`] and writes the figures into the page without
//! reloading it, drawing each reading onto the power lines; it reads `/history.json`
//! ([`super::history`]) every [`HISTORY_REFRESH_MS`]. Each chart is as wide as its box in CSS
//! pixels, drawn again on a resize, so its labels keep their 12 px on a phone. Below them,
//! `/report.html` (the renderer of `wattson report --format html`) in a frame, reloaded every
//! few minutes. Units in `/live.json`: W, kWh, the tariff's currency, shares 0..1, UTC ms.

use serde::Serialize;
use wattson_collectors::source::channel;
use wattson_collectors::{Metric, SourceId};

use super::Shared;
use crate::ledger::price::format_money;
use crate::publish::mqtt::StateExtras;
use crate::report::{Format, ReportRequest, parse_when};

/// How often the page reads `/live.json`, ms.
pub const REFRESH_MS: u32 = 2000;
/// How often the page reads `/history.json` ([`super::history`]), ms; the readings of
/// `/live.json` go onto its power lines in between.
pub const HISTORY_REFRESH_MS: u32 = 300_000;

/// What `/live.json` says.
#[derive(Debug, Clone, Serialize)]
pub struct Live {
    pub host: String,
    /// When this was made, UTC ms.
    pub ts_ms: i64,
    /// The host's power now, where a source reads it.
    pub power: Option<PowerNow>,
    /// Energy and cost since local midnight, from the ledger.
    pub energy_today_kwh: Option<f64>,
    pub energy_today: String,
    pub cost_today: Option<f64>,
    pub cost_today_text: String,
    pub currency: String,
    /// A year's cost at the recent duty cycle.
    pub annual_projection: Option<f64>,
    pub annual_projection_text: String,
    /// The tariff's standing charge for a year and the projection with it, in words; empty
    /// without a standing charge.
    pub standing_charge_text: String,
    /// What the figure is and its price basis ([`crate::ledger::annual::Annual::basis`]).
    pub annual_basis: String,
    /// With no wall meter: the calibration's estimate, which the texts above then show,
    /// each marked `(estimated)`, `annual_basis` saying what it rests on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub estimated: Option<crate::publish::mqtt::state::EstimatedPayload>,
    pub mode: Option<String>,
    /// Machine-wide idle-state residency of the cores over the last interval, deepest first.
    pub idle_states: Vec<IdleState>,
    /// The package C-states' residency over the last interval (the mean over packages),
    /// deepest first; empty where the package counters are not read.
    pub package_states: Vec<IdleState>,
    /// The deepest package state holding at least 0.1 % of the interval, `none` when none
    /// did; absent without package counters.
    pub package_deepest_reached: Option<String>,
    pub healthy: bool,
    /// `ok`, or why the daemon is unhealthy.
    pub health: String,
}

/// The standing charge for a year, and the year with it, as the page words them; empty
/// without one.
fn standing_charge_text(extras: &StateExtras) -> String {
    match extras.standing_charge_annual.filter(|s| *s > 0.0) {
        Some(s) => {
            let money = |v: f64| format_money(v, &extras.currency);
            let all_in = extras
                .annual_projection
                .map(|a| format!("; a year with it {}", money(a + s)))
                .unwrap_or_default();
            format!("standing charge {} a year{all_in}", money(s))
        }
        None => String::new(),
    }
}

/// The host's power now.
#[derive(Debug, Clone, Serialize)]
pub struct PowerNow {
    pub watts: f64,
    /// `41.5 W`.
    pub text: String,
    /// `meter:wall`, `estimate:wall`, `rapl`, ...
    pub source: SourceId,
    /// Where the figure comes from, in words (at the wall, estimated, inside the box).
    pub scope: String,
    /// When it was read, UTC ms.
    pub ts_ms: i64,
}

/// One idle state's share.
#[derive(Debug, Clone, Serialize)]
pub struct IdleState {
    pub state: String,
    /// `core` (cpuidle) or `package` (the package C-state counters).
    pub level: &'static str,
    pub residency: f64,
}

/// The mode as the page may say it: `sweep` is the one mode a source could state (none sets
/// it in the live state today: its `mode` is a guess from the CPU's busy share); anything
/// else is the CPU's busy share, said to be no mode (a steady 100 W meter at 32 % busy is
/// not "1 loop").
fn mode_text(mode: Option<&str>, latest: &[crate::live::LiveReading]) -> Option<String> {
    if let Some(m) = mode.filter(|m| *m == "sweep") {
        return Some(m.to_owned());
    }
    let busy = latest.iter().find(|r| {
        r.metric == Metric::CpuBusy && r.channel == wattson_collectors::source::channel::ALL
    })?;
    Some(format!("unknown (CPU {:.0} % busy)", busy.value * 100.0))
}

impl Live {
    pub(super) fn gather(shared: &Shared, extras: &StateExtras) -> Live {
        let ctx = &shared.ctx;
        let now = wattson_collectors::now_ms();
        let stale_ms = ctx.stale_after.as_millis() as i64;
        let latest: Vec<_> = ctx
            .live
            .latest()
            .into_iter()
            .filter(|r| now - r.ts_ms <= stale_ms)
            .collect();
        let with_power = latest
            .iter()
            .filter(|r| r.metric == Metric::Power && r.channel.is_empty())
            .map(|r| &r.source);
        let power = extras.primary.pick(with_power).cloned().and_then(|s| {
            let r = latest
                .iter()
                .find(|r| r.source == s && r.metric == Metric::Power && r.channel.is_empty())?;
            Some(PowerNow {
                watts: r.value,
                text: format!("{:.1} W", r.value),
                scope: crate::ledger::scope_label(&s).unwrap_or("").to_owned(),
                source: s,
                ts_ms: r.ts_ms,
            })
        });
        let states = |metric: Metric, level: &'static str| {
            let mut v: Vec<IdleState> = latest
                .iter()
                .filter(|r| r.metric == metric && r.source == SourceId::Cpu)
                .filter_map(|r| {
                    Some(IdleState {
                        state: channel::all_part(&r.channel)?.to_owned(),
                        level,
                        residency: r.value,
                    })
                })
                .collect();
            v.sort_by_key(|s| {
                std::cmp::Reverse(crate::publish::mqtt::state::cstate_depth(&s.state))
            });
            v
        };
        let idle_states = states(Metric::IdleResidency, "core");
        let package_states = states(Metric::PackageResidency, "package");
        let package_deepest_reached =
            crate::publish::mqtt::state::deepest_package_state(&latest).map(|(s, _)| s);
        let health = ctx.health.report();
        let money = |v: Option<f64>| {
            v.map_or_else(|| "-".to_owned(), |c| format_money(c, &extras.currency))
        };
        let mut live = Live {
            host: ctx.config.host.name.clone(),
            ts_ms: now,
            power,
            energy_today_kwh: extras.energy_today_kwh,
            energy_today: extras
                .energy_today_kwh
                .map_or_else(|| "-".to_owned(), crate::report::render::energy),
            cost_today: extras.cost_today,
            cost_today_text: money(extras.cost_today),
            currency: extras.currency.clone(),
            annual_projection: extras.annual_projection,
            annual_projection_text: extras.annual_projection.map_or_else(
                || "-".to_owned(),
                |c| format!("{}/yr", format_money(c, &extras.currency)),
            ),
            annual_basis: extras.annual_basis.clone().unwrap_or_default(),
            standing_charge_text: standing_charge_text(extras),
            mode: mode_text(extras.mode.as_deref(), &latest),
            idle_states,
            package_states,
            package_deepest_reached,
            healthy: health.healthy,
            health: health.reason(),
            estimated: None,
        };
        if extras.energy_today_kwh.is_none()
            && let Some(e) = &extras.estimated
        {
            live.estimated_texts(e, &extras.currency);
        }
        live
    }

    /// The calibration's estimate in the energy, cost and year cards, each marked so.
    fn estimated_texts(
        &mut self,
        e: &crate::publish::mqtt::state::EstimatedPayload,
        currency: &str,
    ) {
        let money = |v: f64| format_money(v, currency);
        self.energy_today = format!(
            "{} (estimated)",
            crate::report::render::energy(e.energy_today)
        );
        self.cost_today_text = e
            .cost_today
            .map_or_else(|| "-".to_owned(), |c| format!("{} (estimated)", money(c)));
        self.annual_projection_text = e.cost_annual.map_or_else(
            || "-".to_owned(),
            |c| {
                let ci = e
                    .cost_annual_ci95
                    .map(|ci| format!(" +/- {}", money(ci)))
                    .unwrap_or_default();
                format!("{}/yr{ci} (estimated)", money(c))
            },
        );
        self.annual_basis = if e.minutes_withheld > 0 {
            format!(
                "{}; the last 7 days' {} minutes, {} withheld: outside what the model saw",
                e.basis, e.minutes, e.minutes_withheld
            )
        } else {
            format!("{}; the last 7 days' {} minutes", e.basis, e.minutes)
        };
        self.estimated = Some(e.clone());
    }
}

/// Why a report's query cannot be answered.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum QueryError {
    #[error(
        "unknown parameter {0:?}: a report takes since, until, mode, configs, upgrade_cost, co2 \
         and host (as `wattson report --since 30d`)"
    )]
    Unknown(String),
    #[error("{name}: {reason}")]
    Bad { name: &'static str, reason: String },
}

/// The most characters a parameter's value may have.
const MAX_VALUE_CHARS: usize = 200;

/// `?since=30d&mode=idle` as the report `wattson report` makes with those options.
pub fn report_args(query: &str, format: Format) -> Result<ReportRequest, QueryError> {
    let mut args = ReportRequest::new(format);
    for (name, value) in form_urlencoded::parse(query.as_bytes()) {
        let known: &'static str = match name.as_ref() {
            "since" => "since",
            "until" => "until",
            "mode" => "mode",
            "configs" => "configs",
            "upgrade_cost" => "upgrade_cost",
            "co2" => "co2",
            "host" => "host",
            other => return Err(QueryError::Unknown(other.chars().take(60).collect())),
        };
        let bad = |reason: String| QueryError::Bad {
            name: known,
            reason,
        };
        if value.chars().count() > MAX_VALUE_CHARS {
            return Err(bad(format!("longer than {MAX_VALUE_CHARS} characters")));
        }
        let value = value.into_owned();
        match known {
            "since" => args.since = Some(parse_when(&value).map_err(bad)?),
            "until" => args.until = Some(parse_when(&value).map_err(bad)?),
            "mode" => args.mode = Some(value),
            "configs" => args.configs = Some(value),
            "upgrade_cost" => {
                args.upgrade_cost = Some(crate::parse::parse_non_negative(&value).map_err(bad)?);
            }
            "co2" => args.co2 = Some(crate::parse::parse_non_negative(&value).map_err(bad)?),
            _ => args.host = Some(value),
        }
    }
    Ok(args)
}

/// The live page: one HTML document with its style and script inline (`page.html`).
pub const PAGE: &str = include_str!("page.html");

/// The page with its refresh intervals filled in.
pub fn page() -> String {
    PAGE.replace("__REFRESH_MS__", &REFRESH_MS.to_string())
        .replace("__HISTORY_MS__", &HISTORY_REFRESH_MS.to_string())
        .replace("__REACHED__", &crate::idle::explain::REACHED.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::When;

    /// A box at 32 % busy is not "1 loop": the page says the mode is not known, and why.
    #[test]
    fn a_mode_guessed_from_the_cpu_is_said_to_be_unknown() {
        let busy = crate::live::LiveReading {
            source: wattson_collectors::SourceId::Cpu,
            metric: Metric::CpuBusy,
            channel: wattson_collectors::source::channel::ALL.to_owned(),
            ts_ms: 0,
            value: 0.32,
        };
        assert_eq!(
            mode_text(Some("1 loop"), std::slice::from_ref(&busy)).as_deref(),
            Some("unknown (CPU 32 % busy)")
        );
        assert_eq!(mode_text(Some("sweep"), &[busy]).as_deref(), Some("sweep"));
        assert_eq!(mode_text(Some("idle"), &[]), None);
    }

    #[test]
    fn a_report_query_takes_the_cli_options_and_refuses_the_rest() {
        let a = report_args("since=30d&mode=2%20loops&co2=200", Format::Json).unwrap();
        assert_eq!(
            a.since,
            Some(When::Ago(std::time::Duration::from_secs(30 * 86_400)))
        );
        assert_eq!(a.mode.as_deref(), Some("2 loops"));
        assert_eq!(a.co2, Some(200.0));
        assert!(a.db.is_none());
        assert_eq!(
            report_args("db=/etc/shadow", Format::Json).unwrap_err(),
            QueryError::Unknown("db".into())
        );
        let e = report_args("since=last%20tuesday", Format::Json).unwrap_err();
        assert!(e.to_string().starts_with("since: "), "{e}");
        assert!(report_args("upgrade_cost=-1", Format::Html).is_err());
        assert!(report_args(&format!("mode={}", "x".repeat(300)), Format::Html).is_err());
        assert!(report_args("", Format::Html).unwrap().since.is_none());
    }

    #[test]
    fn the_page_makes_no_external_request() {
        let page = page();
        assert!(!page.contains("__"), "a placeholder left in the page");
        // The SVG namespace the script creates its charts in is a name, never fetched.
        assert_eq!(page.matches("http://").count(), 1);
        let page = page.replace("'http://www.w3.org/2000/svg'", "");
        for needle in ["http://", "https://", "//cdn", "@import"] {
            assert!(!page.contains(needle), "{needle}");
        }
    }
}
