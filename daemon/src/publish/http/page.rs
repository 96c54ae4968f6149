//! The live page (`/`) and its figures (`/live.json`), and the report endpoints' query
//! parameters.
//!
//! The page is one static document: inline CSS and script, no external request (its
//! Content-Security-Policy allows only this origin). Its script reads `/live.json` every
//! [`REFRESH_MS`] and writes the figures into the page without reloading it; below them,
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

/// The live page.
pub const PAGE: &str = r#"<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>wattson</title>
<style>
body { font-family: system-ui, sans-serif; margin: 0 auto; max-width: 70rem; padding: 0.5rem 1rem; color: #222; }
h1 { font-size: 1.3rem; margin: 0.5rem 0; }
.cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(9rem, 1fr)); gap: 0.75rem; }
.card { border: 1px solid #ddd; border-radius: 0.5rem; padding: 0.6rem 0.8rem; }
.card .label { color: #555; font-size: 0.85rem; }
.card .value { font-size: 1.5rem; font-variant-numeric: tabular-nums; overflow-wrap: anywhere; }
.card .note { color: #666; font-size: 0.8rem; }
#health.bad { color: #a00; }
ul.states { list-style: none; padding: 0; margin: 0.2rem 0 0; }
ul.states li { font-variant-numeric: tabular-nums; }
iframe { width: 100%; border: 0; min-height: 30rem; }
.meta { color: #666; font-size: 0.85rem; }
</style>
</head>
<body>
<h1>wattson on <span id="host">...</span></h1>
<p class="meta"><span id="health">connecting...</span> &middot; updated <span id="updated">never</span></p>
<div class="cards">
<div class="card"><div class="label">Power now</div><div class="value" id="watts">-</div><div class="note" id="power-source"></div></div>
<div class="card"><div class="label">Energy today</div><div class="value" id="energy-today">-</div></div>
<div class="card"><div class="label">Cost today</div><div class="value" id="cost-today">-</div></div>
<div class="card"><div class="label">A year on your tariff</div><div class="value" id="projection">-</div><div class="note" id="projection-basis"></div><div class="note" id="standing-charge"></div><div class="note" id="mode"></div></div>
<div class="card"><div class="label">Deepest idle states (cores)</div><ul class="states" id="idle-states"><li>-</li></ul></div>
<div class="card"><div class="label">Package C-states</div><ul class="states" id="package-states"><li>-</li></ul><div class="note" id="package-deepest"></div></div>
</div>
<h2>Report</h2>
<p class="meta">The report of the database as it stands (<a href="/report.html">open</a>, <a href="/report.json">JSON</a>, <a href="/metrics">metrics</a>).</p>
<iframe id="report" src="/report.html" title="wattson report"></iframe>
<script>
(function () {
  const $ = (id) => document.getElementById(id);
  const REFRESH_MS = __REFRESH_MS__;
  const REPORT_EVERY_MS = 300000;
  function show(d) {
    $('host').textContent = d.host;
    $('watts').textContent = d.power ? d.power.text : '-';
    $('power-source').textContent = d.power ? d.power.source + (d.power.scope ? ' (' + d.power.scope + ')' : '') : 'no power reading';
    $('energy-today').textContent = d.energy_today;
    $('cost-today').textContent = d.cost_today_text;
    $('projection').textContent = d.annual_projection_text;
    $('projection-basis').textContent = d.annual_basis;
    $('standing-charge').textContent = d.standing_charge_text;
    $('mode').textContent = d.mode ? 'mode: ' + d.mode : '';
    function states(id, all, shown, none) {
      const list = $(id);
      list.replaceChildren();
      const line = (text) => { const li = document.createElement('li'); li.textContent = text; list.appendChild(li); };
      for (const s of shown) { line(s.state + ': ' + (100 * s.residency).toFixed(1) + ' %'); }
      if (!all.length) { line('not read here'); } else if (!shown.length) { line(none); }
    }
    states('idle-states', d.idle_states, d.idle_states.slice(0, 3), '-');
    // The package: the states it reached (0.1 % or more of the interval), deepest first.
    const reached = d.package_states.filter((s) => s.residency >= __REACHED__).slice(0, 3);
    states('package-states', d.package_states, reached, 'none reached');
    $('package-deepest').textContent = d.package_deepest_reached ? 'deepest reached: ' + d.package_deepest_reached : '';
    $('health').textContent = d.healthy ? 'healthy' : 'unhealthy: ' + d.health;
    $('health').className = d.healthy ? '' : 'bad';
    $('updated').textContent = new Date(d.ts_ms).toLocaleTimeString();
    document.title = (d.power ? d.power.text + ' - ' : '') + 'wattson ' + d.host;
  }
  function tick() {
    fetch('/live.json', { cache: 'no-store' })
      .then((r) => r.json())
      .then(show)
      .catch(() => { $('health').textContent = 'no answer from wattson'; $('health').className = 'bad'; })
      .finally(() => setTimeout(tick, REFRESH_MS));
  }
  const frame = $('report');
  frame.addEventListener('load', () => {
    try { frame.style.height = frame.contentDocument.documentElement.scrollHeight + 'px'; } catch (e) {}
  });
  setInterval(() => { frame.contentWindow.location.reload(); }, REPORT_EVERY_MS);
  tick();
})();
</script>
</body>
</html>
"#;

/// The page with its refresh interval filled in.
pub fn page() -> String {
    PAGE.replace("__REFRESH_MS__", &REFRESH_MS.to_string())
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
        assert!(!page.contains("__REFRESH_MS__") && !page.contains("__REACHED__"));
        for needle in ["http://", "https://", "//cdn", "@import"] {
            assert!(!page.contains(needle), "{needle}");
        }
    }
}
