//! "Keep this box or buy another": each candidate machine priced on this machine's own
//! measured load by the ledger ([`crate::ledger::candidate`]), against what keeping this
//! machine costs, with the payback of its purchase price, its CO2 and its cost per unit of
//! work.
//!
//! The load: this machine's utilisation history (busy CPUs / CPUs, hour by hour) as the
//! share of its maximum throughput; without one, active idle all year. Keeping this
//! machine: its measured annual figure where there is a utilisation history to compare on,
//! else the baseline configuration at idle. CO2: each candidate's hours per carbon-intensity
//! slot where there is a series (else at `--co2`), and what it saves against keeping this
//! machine's (its measured energy per slot, else at `--co2`).
//!
//! Units: W, kWh per year, the tariff's currency per year, kg CO2 per year, years.

use serde::Serialize;

use super::{ConfigReport, ReportError};
use crate::candidate::Candidate;
use crate::ledger::candidate::{CandidateYear, at_constant_load, on_history};
use crate::ledger::price::HOURS_PER_YEAR;
use crate::report::input::{MeasuredInput, ReportOptions};
use crate::report::measured::MeasuredReport;
use crate::tariff::Tariff;

/// How many candidates a report shows when none are named.
pub const DEFAULT_TOP: usize = 3;

/// The candidates' section.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CandidatesReport {
    /// What the candidates are priced on, in words.
    pub load_basis: String,
    /// Hours of utilisation history the load rests on (0: active idle all year).
    pub load_hours: f64,
    /// This machine's mean load over them, share of its maximum throughput.
    pub mean_load: f64,
    /// What keeping this machine costs a year, where known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keep: Option<KeepFigure>,
    /// `named` (`--candidates`) or `cheapest` (the cheapest that carry the load first).
    pub selection: String,
    /// Candidates stored in all.
    pub stored: usize,
    pub candidates: Vec<CandidateReport>,
    pub notes: Vec<String>,
}

/// Keeping this machine.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KeepFigure {
    /// "this machine (measured)", or the baseline configuration's name.
    pub name: String,
    pub annual_kwh: f64,
    pub annual_cost: f64,
    /// What the figure is and its price basis.
    pub basis: String,
    /// kg CO2 a year: the measured energy per carbon-intensity slot where there is a
    /// series, else at `--co2`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annual_co2_kg: Option<f64>,
}

/// One candidate on this load.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CandidateReport {
    pub name: String,
    pub origin: String,
    pub curve_kind: crate::analysis::candidate::CurveKind,
    /// Only its two ends are known: every watt between them is a straight line's.
    pub interpolated: bool,
    /// The curve in words ("interpolated linearly between active idle and 100 % ...").
    pub curve_basis: String,
    pub idle_watts: f64,
    pub full_watts: f64,
    /// Its throughput over this machine's.
    pub perf_ratio: f64,
    /// `given` (by the user, `--perf-ratio`), `from ssj_ops` (its published ssj_ops at
    /// 100 % over this machine's, `--this-ssj-ops`), `from sweep loop rates` (a measured
    /// candidate's loops against this machine's, `wattson candidate from-sweep`) or
    /// `assumed` (1, none known).
    pub perf_ratio_from: String,
    /// Its time-weighted mean load, share of its maximum (after the cap).
    pub mean_load: f64,
    /// The most the load asked of it in an hour, share of its maximum (before the cap).
    pub peak_load: f64,
    /// Hours it could not carry (over 100 % of its maximum).
    pub over_hours: f64,
    /// Carries the load in every hour; one that does not is never ranked as cheaper.
    pub carries: bool,
    /// 1 = the cheapest of those that carry the load.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rank: Option<usize>,
    /// Mean W over the load.
    pub mean_watts: f64,
    pub annual_kwh: f64,
    pub annual_cost: f64,
    /// What the annual figure is and its price basis.
    pub annual_basis: String,
    /// Against keeping this machine (positive: the candidate saves).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annual_kwh_saved: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annual_saving: Option<f64>,
    /// What buying it costs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub price: Option<f64>,
    /// `price / annual_saving`, where it saves.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payback_years: Option<f64>,
    /// kg CO2 a year: per carbon-intensity slot where there is a series, else at `--co2`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annual_co2_kg: Option<f64>,
    /// kg CO2 a year it saves against keeping this machine (negative: it emits more),
    /// where both are known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annual_co2_saved_kg: Option<f64>,
    /// Currency per hour of this machine's full throughput of work done.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_per_full_load_hour: Option<f64>,
    /// Currency per 10^9 ssj_ops of work, where its ssj_ops are published.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_per_billion_ssj_ops: Option<f64>,
    pub warnings: Vec<String>,
}

/// This machine's utilisation history as shares of its maximum throughput.
fn shares(m: &MeasuredInput) -> Vec<(i64, i64, f64)> {
    let cpus = f64::from(m.cpus.max(1));
    m.utilisation
        .iter()
        .map(|&(s, e, busy)| (s, e, (busy / cpus).clamp(0.0, 1.0)))
        .collect()
}

/// Candidate `c`'s throughput over this machine's and where it comes from: `given` (its
/// `--perf-ratio`), else `from ssj_ops` (its published ssj_ops at 100 % over
/// `this_ssj_ops`, this machine's own figure as the user gave it), else `assumed` (1). What
/// makes the figure less sure is pushed onto `warnings`.
fn perf_ratio(
    c: &Candidate,
    this_ssj_ops: Option<f64>,
    warnings: &mut Vec<String>,
) -> (f64, &'static str) {
    let ops = c.curve.max_ssj_ops().filter(|o| *o > 0.0);
    let this = this_ssj_ops.filter(|n| n.is_finite() && *n > 0.0);
    if let (Some(r), Some(basis)) = (c.perf_ratio, &c.perf_ratio_basis) {
        warnings.push(format!(
            "perf ratio {} measured: {basis}; a sweep's loops exercise the CPU, so the \
             ratio holds for this machine's work as far as that is CPU-bound",
            num(r, 2)
        ));
        return (r, "from sweep loop rates");
    }
    match (c.perf_ratio, ops, this) {
        (Some(r), Some(o), Some(n)) => {
            warnings.push(format!(
                "the perf ratio given ({}) is used; its ssj_ops against --this-ssj-ops would \
                 give {}",
                num(r, 2),
                num(o / n, 2)
            ));
            (r, "given")
        }
        (Some(r), _, _) => (r, "given"),
        (None, Some(o), Some(n)) => {
            warnings.push(format!(
                "perf ratio {} from ssj_ops: its published {o:.0} ssj_ops at 100 % over this \
                 machine's {n:.0} (--this-ssj-ops, as given, not measured here); ssj_ops \
                 measure SPECpower's Java workload, so the ratio holds for this machine's \
                 work only as far as that work resembles it",
                num(o / n, 2)
            ));
            (o / n, "from ssj_ops")
        }
        (None, None, Some(_)) => {
            warnings.push(
                "no perf ratio given and no ssj_ops published for it, so --this-ssj-ops \
                 cannot give one: it is assumed to do this machine's work at the same share \
                 of its maximum (`wattson candidate set NAME --perf-ratio R`)"
                    .to_owned(),
            );
            (1.0, "assumed")
        }
        (None, _, None) => {
            warnings.push(format!(
                "no perf ratio given: it is assumed to do this machine's work at the same share \
                 of its maximum (`wattson candidate set NAME --perf-ratio R`{})",
                if ops.is_some() {
                    ", or --this-ssj-ops N with this machine's own ssj_ops at 100 %"
                } else {
                    ""
                }
            ));
            (1.0, "assumed")
        }
    }
}

fn num(v: f64, decimals: usize) -> String {
    format!("{v:.decimals$}")
}

/// The candidates' section; `None` when none are stored.
#[allow(clippy::too_many_arguments, clippy::single_match_else)]
pub(super) fn candidates_report(
    all: &[Candidate],
    opts: &ReportOptions,
    tariff: &Tariff,
    measured_in: Option<&MeasuredInput>,
    measured: Option<&MeasuredReport>,
    baseline: Option<&ConfigReport>,
    year_price: f64,
    price_from: &str,
) -> Result<Option<CandidatesReport>, ReportError> {
    if all.is_empty() {
        return Ok(None);
    }
    let chosen = chosen(all, opts)?;
    let history = measured_in
        .map(shares)
        .filter(|s| s.iter().any(|(a, b, _)| b > a));
    let mut notes = Vec::new();
    let cur = tariff.currency();
    let (load_basis, load_hours, mean_load, keep) = match &history {
        Some(h) => {
            let (mean, hours) = super::over_history(h, |u| u).unwrap_or((0.0, 0.0));
            let keep = measured.map(|m| measured_keep(m, opts, measured_in));
            (
                format!(
                    "this machine's utilisation over {} (mean {:.1} % of its maximum \
                     throughput, {} CPUs), hour by hour",
                    crate::ledger::interval::hours_text(hours),
                    mean * 100.0,
                    measured_in.map_or(1, |m| m.cpus)
                ),
                hours,
                mean,
                keep,
            )
        }
        None => {
            notes.push(
                "no utilisation history: each candidate is priced at active idle all year (a \
                 home server's usual state) against the baseline configuration at idle; \
                 `wattson run` records the history that prices them on the real load"
                    .to_owned(),
            );
            let keep = baseline.and_then(|b| baseline_keep(b, year_price, price_from, cur));
            (
                "active idle all year (no utilisation history)".to_owned(),
                0.0,
                0.0,
                keep,
            )
        }
    };
    if keep.is_none() {
        notes.push(
            "nothing to compare the candidates with: no measured history of this machine and \
             no configuration with an idle mode"
                .to_owned(),
        );
    }

    let mut out: Vec<CandidateReport> = Vec::new();
    for c in chosen {
        out.push(candidate_figures(
            c,
            opts,
            tariff,
            history.as_deref(),
            keep.as_ref(),
            mean_load,
            (year_price, price_from),
        )?);
    }
    // The cheapest that carry the load first; those that cannot carry it after them.
    out.sort_by(|a, b| {
        b.carries
            .cmp(&a.carries)
            .then(a.annual_cost.total_cmp(&b.annual_cost))
    });
    let mut rank = 0;
    for c in out.iter_mut().filter(|c| c.carries) {
        rank += 1;
        c.rank = Some(rank);
    }
    let selection = if opts.candidates.is_empty() {
        let top = opts.candidates_top.unwrap_or(DEFAULT_TOP);
        if out.len() > top {
            notes.push(format!(
                "the {top} cheapest of {} stored candidates (`--candidates NAME,...` names \
                 others)",
                out.len()
            ));
            out.truncate(top);
        }
        "cheapest"
    } else {
        "named"
    };
    Ok(Some(CandidatesReport {
        load_basis,
        load_hours,
        mean_load,
        keep,
        selection: selection.to_owned(),
        stored: all.len(),
        candidates: out,
        notes,
    }))
}

/// The candidates to price: those `--candidates` names, in its order, or all stored.
fn chosen<'a>(
    all: &'a [Candidate],
    opts: &ReportOptions,
) -> Result<Vec<&'a Candidate>, ReportError> {
    if opts.candidates.is_empty() {
        return Ok(all.iter().collect());
    }
    let mut out = Vec::new();
    for n in &opts.candidates {
        let c = all
            .iter()
            .find(|c| &c.name == n)
            .ok_or_else(|| ReportError::UnknownCandidate {
                name: n.clone(),
                known: all
                    .iter()
                    .map(|c| c.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            })?;
        out.push(c);
    }
    Ok(out)
}

/// Keeping this machine as measured: its annual figures, and its CO2 where an intensity
/// is known (per carbon slot where the set covers its measured energy).
fn measured_keep(
    m: &MeasuredReport,
    opts: &ReportOptions,
    measured_in: Option<&MeasuredInput>,
) -> KeepFigure {
    KeepFigure {
        name: "this machine (measured)".to_owned(),
        annual_kwh: m.annual_kwh,
        annual_cost: m.annual_cost,
        basis: m.annual_basis.clone(),
        annual_co2_kg: match (&opts.carbon, measured_in) {
            (Some(set), Some(mi)) if m.covered_hours > 0.0 => {
                let f =
                    crate::tariff::series::carbon_of_energy(set, opts.co2_g_per_kwh, &mi.energy);
                Some(f.co2_kg * HOURS_PER_YEAR / m.covered_hours)
            }
            _ => opts.co2_g_per_kwh.map(|g| m.annual_kwh * g / 1000.0),
        },
    }
}

/// Keeping this machine as the baseline configuration at idle all year; `None` without an
/// idle mode.
fn baseline_keep(
    b: &ConfigReport,
    year_price: f64,
    price_from: &str,
    cur: &str,
) -> Option<KeepFigure> {
    b.modes
        .iter()
        .find(|m| m.name == "idle")
        .map(|m| KeepFigure {
            name: b.name.clone(),
            annual_kwh: m.annual_kwh,
            annual_cost: m.annual_cost,
            basis: crate::ledger::annual::modelled(
                m.annual_kwh,
                None,
                &format!("{} at idle all year ({:.1} W)", b.name, m.watts),
                year_price,
                price_from,
                cur,
            )
            .basis,
            annual_co2_kg: m.annual_co2_kg,
        })
}

/// One candidate priced on this machine's load (`history`, or active idle all year
/// without one), against keeping this machine where that is known.
fn candidate_figures(
    c: &Candidate,
    opts: &ReportOptions,
    tariff: &Tariff,
    history: Option<&[(i64, i64, f64)]>,
    keep: Option<&KeepFigure>,
    mean_load: f64,
    (year_price, price_from): (f64, &str),
) -> Result<CandidateReport, ReportError> {
    let cur = tariff.currency();
    let mut warnings = Vec::new();
    let (ratio, ratio_from) = perf_ratio(c, opts.this_ssj_ops, &mut warnings);
    let year: CandidateYear = match history {
        Some(h) => on_history(&c.name, &c.curve, ratio, h, tariff)
            .map_err(|source| ReportError::Cost {
                what: format!("candidate {:?}", c.name),
                source,
            })?
            .unwrap_or_else(|| {
                at_constant_load(&c.name, &c.curve, 0.0, year_price, price_from, cur)
            }),
        None => at_constant_load(&c.name, &c.curve, 0.0, year_price, price_from, cur),
    };
    if c.curve.interpolated() {
        warnings.push(format!(
            "its curve is {}: the watts between its ends are a straight line's, not \
             measured",
            c.curve.describe()
        ));
    }
    if !year.carries() {
        warnings.push(format!(
            "cannot carry this load: it would need up to {:.0} % of its maximum throughput, \
             in {}; those hours are priced at 100 %, so its cost is understated, and it is \
             not ranked",
            year.peak_load * 100.0,
            crate::ledger::interval::hours_text(year.over_hours)
        ));
    }
    let annual = &year.annual;
    let saving = keep.map(|k| k.annual_cost - annual.cost);
    let co2 = match (&opts.carbon, year.hours > 0.0) {
        (Some(set), true) => {
            let f = crate::tariff::series::carbon_of_energy(set, opts.co2_g_per_kwh, &year.energy);
            Some(f.co2_kg * HOURS_PER_YEAR / year.hours)
        }
        _ => opts.co2_g_per_kwh.map(|g| annual.kwh * g / 1000.0),
    };
    let work_hours = mean_load * HOURS_PER_YEAR;
    Ok(CandidateReport {
        name: c.name.clone(),
        origin: c.origin.clone(),
        curve_kind: c.curve.kind(),
        interpolated: c.curve.interpolated(),
        curve_basis: c.curve.describe(),
        idle_watts: c.curve.idle_watts(),
        full_watts: c.curve.full_watts(),
        perf_ratio: ratio,
        perf_ratio_from: ratio_from.to_owned(),
        mean_load: year.mean_load,
        peak_load: year.peak_load,
        over_hours: year.over_hours,
        carries: year.carries(),
        rank: None,
        mean_watts: annual.kwh * 1000.0 / HOURS_PER_YEAR,
        annual_kwh: annual.kwh,
        annual_cost: annual.cost,
        annual_basis: annual.basis.clone(),
        annual_kwh_saved: keep.map(|k| k.annual_kwh - annual.kwh),
        annual_saving: saving,
        price: c.price,
        payback_years: match (c.price, saving) {
            (Some(p), Some(s)) if s > 0.0 => Some(p / s),
            _ => None,
        },
        annual_co2_kg: co2,
        annual_co2_saved_kg: keep
            .and_then(|k| k.annual_co2_kg)
            .zip(co2)
            .map(|(k, c)| k - c),
        cost_per_full_load_hour: (work_hours > 0.0).then(|| annual.cost / work_hours),
        cost_per_billion_ssj_ops: c
            .curve
            .max_ssj_ops()
            .map(|ops| year.mean_load * ops * 3600.0 * HOURS_PER_YEAR / 1e9)
            .filter(|b| *b > 0.0)
            .map(|b| annual.cost / b),
        warnings,
    })
}
