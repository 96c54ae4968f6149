//! Comparisons: the headline mode and the baseline, then from the baseline to each
//! candidate, the saving at the headline and in every mode both share, and the payback of an
//! upgrade.

use serde::Serialize;

use super::{Baseline, ConfigReport, DUTY_CYCLE, ModeReport, Pricer, ReportError};
use crate::ledger::price::compare;
use crate::report::input::{ConfigKind, Paired, ReportOptions};

/// Moving from one configuration to another.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ComparisonReport {
    pub from: String,
    pub to: String,
    /// The mode the headline is at, or [`DUTY_CYCLE`].
    pub mode: String,
    /// W.
    pub from_watts: f64,
    /// W.
    pub to_watts: f64,
    /// kWh per year (negative when `to` uses more).
    pub annual_kwh_saved: f64,
    /// Currency per year (negative when `to` costs more).
    pub annual_saving: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annual_saving_ci95: Option<f64>,
    /// Currency: `--upgrade-cost`, else the target's `upgrade_cost`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upgrade_cost: Option<f64>,
    /// Years; present when an upgrade cost is known and something is saved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payback_years: Option<f64>,
    /// The payback's 95 % range from the saving's interval: the shortest (at the largest
    /// saving) and the longest (absent when the smallest saving in the interval is none, so
    /// the upgrade may never pay for itself).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payback_years_low: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payback_years_high: Option<f64>,
    /// kg CO2 per year.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub co2_kg_saved: Option<f64>,
    /// The saving in every mode both configurations have.
    pub per_mode: Vec<ModeSaving>,
    /// The 95 % half-width of `to_watts - from_watts` where that difference was measured
    /// directly, in alternating phases (`wattson idle --measure`); the saving's interval then
    /// rests on it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delta_ci95_watts: Option<f64>,
}

/// The saving in one mode.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModeSaving {
    pub mode: String,
    /// kWh per year.
    pub annual_kwh_saved: f64,
    /// Currency per year.
    pub annual_saving: f64,
}

/// A configuration's watts at the headline: a mode, or [`DUTY_CYCLE`].
pub(super) fn headline_watts(r: &ConfigReport, headline: &str) -> Option<f64> {
    if headline == DUTY_CYCLE {
        r.duty_cycle.as_ref().map(|m| m.watts)
    } else {
        r.modes.iter().find(|m| m.name == headline).map(|m| m.watts)
    }
}

/// The mode the comparisons' headline is at: `mode` (`--mode`, which some configuration
/// must have), else this machine's measured duty cycle where every modelled configuration
/// has one and there are two or more, else idle.
pub(super) fn headline_mode(
    reports: &[ConfigReport],
    mode: Option<&String>,
) -> Result<String, ReportError> {
    let headline = match mode {
        Some(m) => {
            if !reports.iter().any(|r| r.modes.iter().any(|x| &x.name == m)) {
                let mut known: Vec<&str> = reports
                    .iter()
                    .flat_map(|r| r.modes.iter().map(|x| x.name.as_str()))
                    .collect();
                known.sort_by_key(|k| crate::analysis::modes::mode_rank(k));
                known.dedup();
                return Err(ReportError::UnknownMode {
                    mode: m.clone(),
                    known: if known.is_empty() {
                        "none".to_string()
                    } else {
                        known.join(", ")
                    },
                });
            }
            m.clone()
        }
        // Configurations measured at idle only do not decide it: they are compared at idle
        // with the one they were measured against.
        None if {
            let modelled: Vec<&ConfigReport> = reports
                .iter()
                .filter(|r| r.kind != ConfigKind::IdleMeasure)
                .collect();
            modelled.len() > 1 && modelled.iter().all(|r| r.duty_cycle.is_some())
        } =>
        {
            DUTY_CYCLE.to_string()
        }
        None => "idle".to_string(),
    };
    Ok(headline)
}

/// Unless --configs gave an order, the costliest configuration at the headline comes first
/// and is the baseline, so comparisons read as what moving to each cheaper one saves
/// (configurations without the headline mode keep their order, last).
pub(super) fn order_by_cost(
    reports: &mut [ConfigReport],
    headline: &str,
    opts: &ReportOptions,
) -> Baseline {
    if opts.configs.is_empty() {
        let at = |r: &ConfigReport| headline_watts(r, headline);
        reports.sort_by(|a, b| match (at(a), at(b)) {
            (Some(x), Some(y)) => y.total_cmp(&x),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => std::cmp::Ordering::Equal,
        });
        Baseline::Costliest
    } else {
        Baseline::First
    }
}

/// Comparisons from the baseline to each other configuration, except that a configuration
/// measured against another in alternating phases ([`Paired`]) is compared with that one, at
/// idle, by the difference measured (when both are in the report).
pub(super) fn comparisons(
    reports: &[ConfigReport],
    headline: &str,
    pricer: &Pricer,
    opts: &ReportOptions,
    notes: &mut Vec<String>,
) -> Vec<ComparisonReport> {
    let Some(base) = reports.first() else {
        return Vec::new();
    };
    let at = |r: &ConfigReport| -> Option<ModeReport> {
        if headline == DUTY_CYCLE {
            r.duty_cycle.clone()
        } else {
            r.modes.iter().find(|m| m.name == headline).cloned()
        }
    };
    let figure = |m: &ModeReport| pricer.figure(m.watts, m.ci95_watts);
    let mut out = Vec::new();
    for (i, to) in reports.iter().enumerate() {
        if let Some(p) = &to.paired
            && let Some(from) = reports.iter().find(|r| r.name == p.against)
        {
            out.push(paired_comparison(from, to, p, pricer, opts));
            continue;
        }
        if i == 0 {
            continue;
        }
        let (Some(a), Some(b)) = (at(base), at(to)) else {
            notes.push(format!(
                "{:?} -> {:?}: not compared at {headline}, which one of them lacks",
                base.name, to.name
            ));
            continue;
        };
        let upgrade = opts.upgrade_cost.or(to.upgrade_cost);
        let c = compare(
            &base.name,
            &figure(&a),
            &to.name,
            &figure(&b),
            upgrade,
            opts.co2_g_per_kwh,
        );
        let per_mode = base
            .modes
            .iter()
            .filter_map(|m| {
                let n = to.modes.iter().find(|x| x.name == m.name)?;
                Some(ModeSaving {
                    mode: m.name.clone(),
                    annual_kwh_saved: m.annual_kwh - n.annual_kwh,
                    annual_saving: m.annual_cost - n.annual_cost,
                })
            })
            .collect();
        out.push(comparison_report(
            c, headline, a.watts, b.watts, upgrade, per_mode, None,
        ));
    }
    out
}

/// `to` against `from`, at idle, by the difference `p` measured in alternating phases.
fn paired_comparison(
    from: &ConfigReport,
    to: &ConfigReport,
    p: &Paired,
    pricer: &Pricer,
    opts: &ReportOptions,
) -> ComparisonReport {
    let (from_w, to_w) = (p.against_watts, p.against_watts + p.delta_watts);
    let upgrade = opts.upgrade_cost.or(to.upgrade_cost);
    let mut c = compare(
        &from.name,
        &pricer.figure(from_w, None),
        &to.name,
        &pricer.figure(to_w, None),
        upgrade,
        opts.co2_g_per_kwh,
    );
    c.annual_saving_ci95 = Some(pricer.figure(p.delta_ci95_watts.abs(), None).cost);
    let per_mode = vec![ModeSaving {
        mode: "idle".to_owned(),
        annual_kwh_saved: c.annual_kwh_saved,
        annual_saving: c.annual_saving,
    }];
    comparison_report(
        c,
        "idle",
        from_w,
        to_w,
        upgrade,
        per_mode,
        Some(p.delta_ci95_watts.abs()),
    )
}

fn comparison_report(
    c: crate::ledger::price::Comparison,
    mode: &str,
    from_watts: f64,
    to_watts: f64,
    upgrade: Option<f64>,
    per_mode: Vec<ModeSaving>,
    delta_ci95_watts: Option<f64>,
) -> ComparisonReport {
    ComparisonReport {
        mode: mode.to_string(),
        from_watts,
        to_watts,
        annual_kwh_saved: c.annual_kwh_saved,
        annual_saving: c.annual_saving,
        annual_saving_ci95: c.annual_saving_ci95,
        upgrade_cost: upgrade,
        payback_years: c.payback_years,
        payback_years_low: c
            .payback_years
            .zip(upgrade)
            .zip(c.annual_saving_ci95)
            .map(|((_, u), ci)| u / (c.annual_saving + ci)),
        payback_years_high: c
            .payback_years
            .zip(upgrade)
            .zip(c.annual_saving_ci95)
            .filter(|_| {
                c.annual_saving_ci95
                    .is_some_and(|ci| c.annual_saving - ci > 0.0)
            })
            .map(|((_, u), ci)| u / (c.annual_saving - ci)),
        co2_kg_saved: c.co2_kg_saved,
        per_mode,
        delta_ci95_watts,
        from: c.from,
        to: c.to,
    }
}
