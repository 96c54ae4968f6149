//! Plain-words checks of a sweep's levels against its straight line: curvature (later loops
//! cheaper or dearer) and saturation, each only when it exceeds its own 95 % uncertainty.

use super::LinearFit;
use crate::analysis::stats::{Z_975, t_975};

/// One step between consecutive measured levels.
struct Step {
    to: f64,
    /// Watts per loop over the step.
    cost: f64,
    ci95: f64,
}

/// Plain-words findings about how the cost of each extra loop varies, for a report.
///
/// `levels` are `(loops, mean watts, ci95 half-width of that mean in watts)`, one per
/// measured level, in any order; `fit` is the straight line through them. Returns nothing
/// when the levels are consistent with every loop costing the same.
///
/// Tests, each needing the pattern to exceed its own 95 % uncertainty:
///
/// - Curvature: a quadratic weighted by the levels' uncertainties (the residual pattern of
///   the straight line: a bow up or down). A negative curvature reads "later loops are
///   cheaper" (cores sharing a turbo budget, or SMT siblings sharing a core); a positive
///   one "later loops cost more" (rising temperature raises leakage and fan speed). The
///   change in cost per loop across the range must also be at least 5 % of the slope and
///   0.1 W, so a noiseless line is not flagged for rounding error.
/// - Saturation: from some level on, every further step costs under a quarter of what the
///   loops up to it cost per loop, and significantly less: "saturation beyond N loops"
///   (a shared resource such as memory bandwidth is the limit). Reported instead of
///   "cheaper", which it implies.
///
/// Two levels cannot show any of this, and say so.
pub fn diagnose(levels: &[(f64, f64, f64)], fit: &LinearFit) -> Vec<String> {
    let mut lv: Vec<(f64, f64, f64)> = levels
        .iter()
        .copied()
        .filter(|(x, y, _)| x.is_finite() && y.is_finite())
        .map(|(x, y, c)| (x, y, if c.is_finite() { c.abs() } else { 0.0 }))
        .collect();
    lv.sort_by(|a, b| a.0.total_cmp(&b.0));
    lv.dedup_by(|b, a| a.0 == b.0);
    let mut out = Vec::new();
    if lv.len() < 2 {
        return out;
    }
    if lv.len() == 2 {
        out.push(
            "only two load levels: whether every loop costs the same cannot be checked".to_string(),
        );
        return out;
    }
    let steps: Vec<Step> = lv
        .windows(2)
        .map(|p| {
            let dx = p[1].0 - p[0].0;
            Step {
                to: p[1].0,
                cost: (p[1].1 - p[0].1) / dx,
                ci95: p[0].2.hypot(p[1].2) / dx,
            }
        })
        .collect();
    if let Some(msg) = saturation(&lv, &steps) {
        out.push(msg);
        return out;
    }
    let (first, last) = (&steps[0], &steps[steps.len() - 1]);
    let describe = |what: &str, why: &str| {
        format!(
            "{what}: the step to {} costs {:.1} ± {:.1} W per loop, the step to {} \
             {:.1} ± {:.1} W (straight-line fit {:.1} W per loop); {why}",
            loops_text(first.to),
            first.cost,
            first.ci95,
            loops_text(last.to),
            last.cost,
            last.ci95,
            fit.slope
        )
    };
    if let Some((c, c_ci)) = curvature(&lv) {
        let range = lv[lv.len() - 1].0 - lv[0].0;
        let change = 2.0 * c.abs() * range;
        let material = change >= (0.05 * fit.slope.abs()).max(0.1);
        if c.abs() > c_ci && material {
            if c < 0.0 {
                out.push(describe(
                    "later loops are cheaper",
                    "likely cores sharing a turbo budget, or SMT siblings sharing a core",
                ));
            } else {
                out.push(describe(
                    "later loops cost more",
                    "likely rising temperature (leakage current, fan speed) or a voltage step",
                ));
            }
        }
    }
    out
}

/// `1 loop`, `2 loops`, `1.50 loops`.
fn loops_text(x: f64) -> String {
    if x == 1.0 {
        "1 loop".to_owned()
    } else {
        format!("{} loops", fmt_loops(x))
    }
}

fn fmt_loops(x: f64) -> String {
    if x.fract() == 0.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.2}")
    }
}

fn saturation(lv: &[(f64, f64, f64)], steps: &[Step]) -> Option<String> {
    for j in 1..steps.len() {
        let (x0, y0, c0) = lv[0];
        let (xj, yj, cj) = lv[j];
        let early = (yj - y0) / (xj - x0);
        let early_ci = c0.hypot(cj) / (xj - x0);
        if early <= early_ci || early < 0.1 {
            continue;
        }
        let flat = steps[j..]
            .iter()
            .all(|s| s.cost <= 0.25 * early && early - s.cost > s.ci95.hypot(early_ci));
        if flat {
            let (xl, yl, _) = lv[lv.len() - 1];
            let late = (yl - yj) / (xl - xj);
            return Some(format!(
                "saturation beyond {}: each loop up to there costs {early:.1} ± \
                 {early_ci:.1} W, each one after it {late:.1} W; a shared resource such as \
                 memory bandwidth is the limit",
                loops_text(xj)
            ));
        }
    }
    None
}

/// The quadratic coefficient of `y = a + b x + c x^2` fitted to the levels and the
/// half-width of its 95 % interval, or `None` when it cannot be estimated.
#[allow(clippy::many_single_char_names)] // names follow the normal equations
fn curvature(lv: &[(f64, f64, f64)]) -> Option<(f64, f64)> {
    let n = lv.len();
    if n < 3 {
        return None;
    }
    let known = lv.iter().all(|l| l.2 > 0.0);
    let w: Vec<f64> = lv
        .iter()
        .map(|l| if known { (Z_975 / l.2).powi(2) } else { 1.0 })
        .collect();
    // The quadratic coefficient does not depend on where x is centred; the solve centres
    // and scales its columns itself.
    let x: Vec<f64> = lv.iter().map(|l| l.0).collect();
    let x2: Vec<f64> = x.iter().map(|x| x * x).collect();
    let y: Vec<f64> = lv.iter().map(|l| l.1).collect();
    let s = crate::analysis::least_squares::solve(&[&x, &x2], &y, Some(&w))?;
    let sse = s.sse;
    let df = n - 3;
    let (s2, q) = if known {
        let reduced = if df > 0 { sse / df as f64 } else { 0.0 };
        if reduced > 1.0 {
            (reduced, t_975(df))
        } else {
            (1.0, Z_975)
        }
    } else if df > 0 {
        (sse / df as f64, t_975(df))
    } else {
        return None;
    };
    Some((s.beta[2], q * (s2 * s.inverse[2][2]).max(0.0).sqrt()))
}
