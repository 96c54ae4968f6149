//! One configuration's figures: its modes (a sweep's from its levels), fit, levels and
//! watts at this machine's measured duty cycle.

use super::{ConfigReport, DUTY_CYCLE, LevelReport, MS_PER_HOUR, ModeReport, Pricer, fit_report};
use crate::analysis::modes::{level_loops, level_name};
use crate::report::input::{ConfigInput, ConfigKind, ConfigStatus, LevelInput, ModeInput};

/// `c`'s figures priced by `pricer`, its duty cycle over `utilisation`; what weakens them
/// (an interrupted sweep, a level's warnings, a fit on two levels) added to `notes`.
pub(super) fn config_report(
    c: &ConfigInput,
    pricer: &Pricer,
    utilisation: &[(i64, i64, f64)],
    notes: &mut Vec<String>,
) -> ConfigReport {
    let modes = modes_of(c);
    // Idle alone says nothing of the watts at a duty cycle.
    let duty_cycle = watts_at(c, &modes)
        .filter(|_| c.kind != ConfigKind::IdleMeasure)
        .and_then(|f| over_history(utilisation, f))
        .map(|(w, _)| pricer.mode(DUTY_CYCLE, w, None));
    if c.status == ConfigStatus::Partial {
        notes.push(format!(
            "{:?}: the sweep was interrupted; only the levels shown were measured",
            c.name
        ));
    }
    ConfigReport {
        name: c.name.clone(),
        kind: c.kind,
        status: c.status,
        host: c.host.clone(),
        description: c.description.clone(),
        fingerprint: c.fingerprint.clone(),
        upgrade_cost: c.upgrade_cost,
        modes: modes
            .iter()
            .map(|m| {
                for w in &m.warnings {
                    notes.push(format!("{:?} {}: {w}", c.name, m.name));
                }
                ModeReport {
                    warnings: m.warnings.clone(),
                    ..pricer.mode(&m.name, m.watts, m.ci95_watts)
                }
            })
            .collect(),
        fit: c.fit.as_ref().map(|f| {
            let mut fit = fit_report(f, pricer);
            let levels = c.levels.iter().filter(|l| l.kind == f.kind).count();
            if levels == 2 {
                let w = "the fit rests on two levels: a line through two points always \
                         fits, so its r2 says nothing and watts per loop is unchecked"
                    .to_owned();
                notes.push(format!("{:?} fit: {w}", c.name));
                fit.notes.push(w);
            }
            fit
        }),
        levels: c
            .levels
            .iter()
            .map(|l| LevelReport {
                kind: l.kind.clone(),
                loops: l.loops,
                mean_w: l.mean_w,
                ci95_w: l.ci95_w,
                residency: l.residency.clone(),
                mean_mhz: l.mean_mhz,
                ops_per_s: l.ops_per_s,
                joules_per_op: l.joules_per_op,
                annual_cost: pricer.figure(l.mean_w, None).cost,
            })
            .collect(),
        duty_cycle,
        paired: c.paired.clone(),
    }
}

/// A sweep's modes from its levels of the fit's kind (else the first kind).
fn modes_of(c: &ConfigInput) -> Vec<ModeInput> {
    if !c.modes.is_empty() || c.levels.is_empty() {
        return c.modes.clone();
    }
    let kind = c
        .fit
        .as_ref()
        .map_or_else(|| c.levels[0].kind.clone(), |f| f.kind.clone());
    let mut levels: Vec<&LevelInput> = c.levels.iter().filter(|l| l.kind == kind).collect();
    levels.sort_by_key(|l| l.loops);
    levels
        .iter()
        .map(|l| ModeInput {
            name: level_name(l.loops),
            watts: l.mean_w,
            ci95_watts: Some(l.ci95_w),
            warnings: l.warnings.clone(),
        })
        .collect()
}

/// Time-weighted mean of `f(busy)` over the utilisation history, and the hours it covers.
pub(in crate::report) fn over_history(
    util: &[(i64, i64, f64)],
    f: impl Fn(f64) -> f64,
) -> Option<(f64, f64)> {
    let mut sum = 0.0;
    let mut ms = 0.0;
    for &(s, e, busy) in util {
        if e > s && busy.is_finite() {
            let d = (e - s) as f64;
            sum += f(busy.max(0.0)) * d;
            ms += d;
        }
    }
    (ms > 0.0).then(|| (sum / ms, ms / MS_PER_HOUR))
}

/// Watts as a function of busy CPUs: the fit where there is one, else straight lines
/// between the level modes (idle, 1 loop, ...), held at the top level beyond it.
fn watts_at(c: &ConfigInput, modes: &[ModeInput]) -> Option<Box<dyn Fn(f64) -> f64>> {
    if let Some(f) = &c.fit {
        let (a, b) = (f.idle_watts, f.watts_per_loop);
        return Some(Box::new(move |u| a + b * u));
    }
    let mut pts: Vec<(f64, f64)> = modes
        .iter()
        .filter_map(|m| level_loops(&m.name).map(|n| (f64::from(n), m.watts)))
        .collect();
    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    if pts.first().is_none_or(|p| p.0 != 0.0) {
        return None;
    }
    Some(Box::new(move |u| {
        let i = pts.partition_point(|p| p.0 <= u);
        if i >= pts.len() {
            return pts[pts.len() - 1].1;
        }
        let (x0, y0) = pts[i - 1];
        let (x1, y1) = pts[i];
        y0 + (y1 - y0) * (u - x0) / (x1 - x0)
    }))
}
