//! CSV (RFC 4180): a header, then one row per configuration and mode. Money is rounded to
//! 2 decimals and kWh to 3; empty fields mean "not measured" or "not applicable". The
//! saving columns compare each row with the same mode of the first configuration (the
//! baseline), except that a configuration `wattson idle --measure` measured against another
//! in alternating phases (`idle with ASPM powersave` against `idle as found`) is compared
//! with that one, by the difference measured; `payback_years` is filled on the row of the comparisons' headline mode. The
//! `idle_regression*` columns carry the configuration's newest idle-power regression check
//! on each of its rows: `none` or `detected`, the rise and its 95 % half-width (W); empty
//! when the configuration was never checked. `price_per_kwh` is, on every row, the price
//! that row's annual cost works out at (`annual_cost / annual_kwh`): the year's mean price
//! for modelled rows, the prices of the measured hours for the measured row.
//!
//! The `warnings` column holds what weakens the row's figure (a sweep level's warnings,
//! the measured figure's), joined with `; `.
//!
//! This machine's measured history adds one row of kind `measured` (config = the source,
//! mode `measured`): the mean watts over the covered time with its 95 % interval, and the
//! annual kWh and cost projected as measured (the window's energy at the prices of its own
//! hours, scaled to a year by covered time).
//!
//! A host with no wall meter's energy in the window and a calibration (`wattson
//! calibration`) adds one row of kind `estimated` (config `estimate:wall`, mode
//! `estimated`): the mean watts estimated over the minutes the model could vouch for, with
//! the model's interval, and the year projected from them at the prices of their hours;
//! `warnings` says what it rests on ("estimated from the calibration of DATE, +/- X %").
//!
//! Each stretch of the window the wall meter was away and a calibration stood in adds a
//! row of kind `stood_in` (config `estimate:wall`, mode `away FROM to TO`, RFC 3339): the
//! mean watts estimated over the stretch and the year at that rate, as for `estimated`;
//! `warnings` says what it rests on, the minutes it withheld and why, and how the
//! calibration read against the wall once the meter was back (`+1.2 % against the wall on
//! the meter's return (inside its interval)`). A stretch with nothing estimated keeps its
//! row, the figures empty and `warnings` saying why.
//!
//! Each GPU adds rows of kind `gpu` (config = its channel): `busy`, `idle resident` and
//! `idle bare` at their mean watts (annual figures as if held all year), then `resident
//! process` (the extra idle watts x the share of time resident and idle) and `resident
//! process all year`, where a bare baseline was observed.
//!
//! What each service costs adds one row per group of kind `service` (config = the group,
//! mode = its kind: `service`, `container`, `session`, `machine`, `other`, `rest`; `idle
//! floor` for the box being on, `wattson` for wattson itself): estimated mean watts with
//! their interval and the year projected from them; `warnings` says they are estimates.
//! Real tariffs add rows of kind `tariff` (config = the tariff's name, mode `measured`):
//! the measured energy priced under it, projected to a year; `price_per_kwh` is the mean
//! it paid and the saving columns compare with the first tariff of `--tariffs`. A row of
//! mode `by time of day` prices the measured hour-of-day profile against the series' price
//! by hour of day; a row of kind `co2` carries CO2 per carbon-intensity slot in `warnings`.
//! Each idle setting `wattson idle --measure` measured adds a row of kind `idle_setting`
//! (config = its name, mode `idle`) whose watts, kWh and cost are the change against idle as
//! found (negative saves), with their 95 % half-widths; the saving columns are the same
//! change with the sign turned.
//! A schedule (`--schedule`) adds a row of kind `schedule` per configuration (mode
//! `schedule`): its year on the schedule, hour by hour at the tariff; `warnings` holds the
//! basis and the schedule, or why it has no figure (a mode the configuration lacks).
//! Standby and off measured at the wall (the meter's counter over the times the kernel says
//! the host was asleep or off) add a row of kind `away` each (config = the wall source,
//! mode `standby` or `off`): the watts and their 95 % band, the mean price its energy was
//! priced at, and in `warnings` the basis, the energy and its cost.
//!
//! What sleeping when idle would save adds rows of kind `sleep` (config = the proposed
//! nightly windows, `01:00-07:00 every night`): mode `saving` with the watts sleeping would
//! not draw (idle less standby, the standby's 95 % half-width where measured), the kWh and
//! money a year at the prices of the slept hours, `warnings` holding the history read, the
//! schedule, the standby figure's source, the basis and the thresholds; mode `wake` with the
//! resumes' kWh and cost a year where the energy of one is known (`warnings` says where
//! from, or that it is not measured); one row of mode `interrupted` per thing the windows
//! would have slept through (`warnings`: "backup.service at 03:00 on Sundays").
//!
//! Candidate machines (`wattson candidate`) add rows of kind `candidate`: first keeping this
//! machine (config = "this machine (measured)" or the baseline configuration, mode `keep`),
//! then each candidate (mode `on this load`, or `active idle` without a utilisation
//! history) with its mean watts, annual kWh and cost on this machine's load, the saving
//! against keeping this machine and the payback of its price; `warnings` holds its curve
//! basis (`interpolated linearly ...` for a two-point curve), its perf ratio and where that
//! came from (`given`, `from ssj_ops`, `from sweep loop rates`, `assumed`), whether it
//! cannot carry the load, its rank, and where a carbon intensity is known its CO2 a year
//! and the CO2 it saves against keeping this machine (whose row's `warnings` carries its
//! own CO2).

mod candidates;
mod estimates;
mod schedule;
mod sleep;
mod tariffs;

use super::num;
use crate::ledger::price::round_money;
use crate::report::idle::IdleSetting;
use crate::report::model::{GpuIdleReport, MeasuredReport, Report};
use crate::services::ServicesEstimate;

/// The columns, in order.
pub const HEADER: [&str; 18] = [
    "config",
    "kind",
    "mode",
    "watts",
    "ci95_watts",
    "annual_kwh",
    "annual_kwh_ci95",
    "annual_cost",
    "annual_cost_ci95",
    "currency",
    "price_per_kwh",
    "annual_kwh_saved_vs_baseline",
    "annual_saving_vs_baseline",
    "payback_years",
    "idle_regression",
    "idle_regression_delta_watts",
    "idle_regression_delta_ci95_watts",
    "warnings",
];

/// The document's rows, written by one `csv` writer: a field is quoted where it holds a
/// comma, a quote or a line break (RFC 4180), lines end in `\n`.
pub(super) struct Rows(csv::Writer<Vec<u8>>);

impl Rows {
    fn new() -> Rows {
        Rows(
            csv::WriterBuilder::new()
                .terminator(csv::Terminator::Any(b'\n'))
                .from_writer(Vec::new()),
        )
    }

    /// One row of the [`HEADER`]'s columns.
    pub(super) fn row(&mut self, fields: impl IntoIterator<Item = String>) {
        // Into memory: writing cannot fail.
        let _ = self.0.write_record(fields);
    }

    fn finish(self) -> String {
        self.0
            .into_inner()
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok())
            .unwrap_or_default()
    }
}

/// The price a row's annual cost works out at, currency per kWh: what priced that row (the
/// measured window's own hours, the year's mean, a service's estimate), never one price
/// printed beside every row.
fn price_of(annual_kwh: f64, annual_cost: f64, r: &Report) -> f64 {
    if annual_kwh.abs() > 1e-12 {
        annual_cost / annual_kwh
    } else {
        r.mean_price_per_kwh
    }
}

fn opt(x: Option<f64>, dp: usize) -> String {
    x.map_or_else(String::new, |v| num(v, dp))
}

fn money(x: f64) -> String {
    num(round_money(x), 2)
}

/// The report as CSV with CRLF-free `\n` line ends.
pub fn render(r: &Report) -> String {
    let mut out = Rows::new();
    out.row(HEADER.map(str::to_owned));
    config_rows(&mut out, r);
    schedule::schedule_rows(&mut out, r);
    schedule::away_rows(&mut out, r);
    sleep::sleep_rows(&mut out, r);
    if let Some(m) = &r.measured {
        measured_row(&mut out, m, r);
    }
    if let Some(p) = &r.estimated {
        estimates::estimated_row(&mut out, p, r);
    }
    for s in &r.stood_in {
        estimates::stood_in_row(&mut out, s, r);
    }
    if let Some(t) = &r.tariffs {
        tariffs::tariff_rows(&mut out, t, r);
    }
    if let Some(c) = &r.candidates {
        candidates::candidate_rows(&mut out, c, r);
    }
    for g in &r.gpus {
        gpu_rows(&mut out, g, r);
    }
    if let Some(e) = &r.services {
        service_rows(&mut out, e, r);
    }
    for s in r.idle.iter().flat_map(|i| &i.settings) {
        idle_setting_row(&mut out, s, r);
    }
    out.finish()
}

/// One row per configuration and mode (and duty cycle), with the saving against the
/// baseline (or the configuration measured against) and the newest regression check.
fn config_rows(out: &mut Rows, r: &Report) {
    let base = r.configs.first();
    for (i, c) in r.configs.iter().enumerate() {
        let comparison = r.comparisons.iter().find(|x| x.to == c.name);
        let kind = serde_json::to_value(c.kind)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        let check = r.regression.checks.iter().find(|x| x.config == c.name);
        for m in c.modes.iter().chain(c.duty_cycle.as_ref()) {
            // Measured against another configuration in alternating phases: against that one.
            let paired = comparison
                .filter(|x| x.delta_ci95_watts.is_some() && x.mode == m.name)
                .map(|x| (x.annual_kwh_saved, x.annual_saving));
            let vs = paired.or_else(|| {
                base.filter(|_| i > 0).and_then(|b| {
                    let bm = if m.name == crate::report::model::DUTY_CYCLE {
                        b.duty_cycle.as_ref()
                    } else {
                        b.modes.iter().find(|x| x.name == m.name)
                    }?;
                    Some((bm.annual_kwh - m.annual_kwh, bm.annual_cost - m.annual_cost))
                })
            });
            let payback = comparison
                .filter(|x| x.mode == m.name)
                .and_then(|x| x.payback_years);
            let row = [
                String::from(&c.name),
                kind.clone(),
                String::from(&m.name),
                num(m.watts, 3),
                opt(m.ci95_watts, 3),
                num(m.annual_kwh, 3),
                opt(m.annual_kwh_ci95, 3),
                money(m.annual_cost),
                m.annual_cost_ci95.map_or_else(String::new, money),
                String::from(&r.currency),
                num(price_of(m.annual_kwh, m.annual_cost, r), 6),
                opt(vs.map(|v| v.0), 3),
                vs.map_or_else(String::new, |v| money(v.1)),
                opt(payback, 2),
                check.map_or_else(String::new, |x| {
                    (if x.detected { "detected" } else { "none" }).to_string()
                }),
                opt(check.map(|x| x.delta_watts), 3),
                opt(check.map(|x| x.delta_ci95_watts), 3),
                String::from(&m.warnings.join("; ")),
            ];
            out.row(row);
        }
    }
}

/// This machine's measured row (see the module documentation).
fn measured_row(out: &mut Rows, m: &MeasuredReport, r: &Report) {
    let row = [
        String::from(
            &m.source
                .as_ref()
                .map_or_else(|| "measured".to_owned(), ToString::to_string),
        ),
        "measured".to_string(),
        "measured".to_string(),
        num(m.mean_watts, 3),
        opt(m.mean_watts_ci95, 3),
        num(m.annual_kwh, 3),
        opt(m.annual_kwh_ci95, 3),
        money(m.annual_cost),
        m.annual_cost_ci95.map_or_else(String::new, money),
        String::from(&r.currency),
        num(price_of(m.annual_kwh, m.annual_cost, r), 6),
        String::new(),
        String::new(),
        String::new(),
        String::new(),
        String::new(),
        String::new(),
        String::from(&m.warnings.join("; ")),
    ];
    out.row(row);
}

/// One GPU's rows: its states, then what a resident process costs (see the module
/// documentation).
fn gpu_rows(out: &mut Rows, g: &GpuIdleReport, r: &Report) {
    let y = r.year_hours / 1000.0;
    let share = g.idle_resident_share;
    let rows = [
        ("busy", g.busy_watts),
        ("idle resident", g.idle_resident_watts),
        ("idle bare", g.idle_bare_watts),
        (
            "resident process",
            g.resident_extra_watts.map(|w| w * share),
        ),
        ("resident process all year", g.resident_extra_watts),
    ];
    for (mode, w) in rows {
        let Some(w) = w else { continue };
        let kwh = w * y;
        let row = [
            String::from(&g.channel),
            wattson_collectors::SourceId::Gpu.to_string(),
            String::from(mode),
            num(w, 3),
            String::new(),
            num(kwh, 3),
            String::new(),
            money(kwh * r.mean_price_per_kwh),
            String::new(),
            String::from(&r.currency),
            num(r.mean_price_per_kwh, 6),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
        ];
        out.row(row);
    }
}

/// One row per service group, its estimated watts and year (see the module documentation).
fn service_rows(out: &mut Rows, e: &ServicesEstimate, r: &Report) {
    for (config, mode, cost) in crate::services::render::priced_rows(e) {
        let row = [
            String::from(&config),
            "service".to_string(),
            String::from(&mode),
            opt(cost.map(|c| c.watts), 3),
            opt(cost.and_then(|c| c.watts_ci95), 3),
            opt(cost.map(|c| c.kwh_per_year), 3),
            String::new(),
            cost.map_or_else(String::new, |c| money(c.cost_per_year)),
            cost.and_then(|c| c.cost_per_year_ci95)
                .map_or_else(String::new, money),
            String::from(&r.currency),
            num(
                cost.map_or(r.mean_price_per_kwh, |c| {
                    price_of(c.kwh_per_year, c.cost_per_year, r)
                }),
                6,
            ),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
            String::from(&format!("estimate: {}", e.basis)), // not a source
        ];
        out.row(row);
    }
}

/// One idle setting's row: the change against idle as found (see the module documentation).
fn idle_setting_row(out: &mut Rows, s: &IdleSetting, r: &Report) {
    let row: [String; HEADER.len()] = [
        String::from(&s.name),
        "idle_setting".to_string(),
        "idle".to_string(),
        num(s.delta_watts, 3),
        num(s.delta_ci95_watts, 3),
        num(s.annual_kwh_change, 3),
        num(s.annual_kwh_change_ci95, 3),
        money(s.annual_cost_change),
        money(s.annual_cost_change_ci95),
        String::from(&r.currency),
        num(price_of(s.annual_kwh_change, s.annual_cost_change, r), 6),
        num(-s.annual_kwh_change, 3),
        money(-s.annual_cost_change),
        String::new(),
        String::new(),
        String::new(),
        String::new(),
        // No warnings: the interval is the measurement's own.
        String::new(),
    ];
    out.row(row);
}
