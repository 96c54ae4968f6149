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
    let sw: f64 = w.iter().sum();
    let xm = lv.iter().zip(&w).map(|(l, w)| w * l.0).sum::<f64>() / sw;
    // Normal equations for the basis [1, d, d^2] with d = x - xm (centred for conditioning;
    // the quadratic coefficient does not depend on the centre).
    let mut m = [[0.0f64; 3]; 3];
    let mut v = [0.0f64; 3];
    for (l, wi) in lv.iter().zip(&w) {
        let d = l.0 - xm;
        let basis = [1.0, d, d * d];
        for r in 0..3 {
            v[r] += wi * basis[r] * l.1;
            for c in 0..3 {
                m[r][c] += wi * basis[r] * basis[c];
            }
        }
    }
    let inv = invert3(&m)?;
    let beta: Vec<f64> = (0..3)
        .map(|r| (0..3).map(|c| inv[r][c] * v[c]).sum())
        .collect();
    let sse: f64 = lv
        .iter()
        .zip(&w)
        .map(|(l, wi)| {
            let d = l.0 - xm;
            let r = l.1 - (beta[0] + beta[1] * d + beta[2] * d * d);
            wi * r * r
        })
        .sum();
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
    Some((beta[2], q * (s2 * inv[2][2]).max(0.0).sqrt()))
}

fn invert3(m: &[[f64; 3]; 3]) -> Option<[[f64; 3]; 3]> {
    let cof =
        |r0: usize, r1: usize, c0: usize, c1: usize| m[r0][c0] * m[r1][c1] - m[r0][c1] * m[r1][c0];
    let adj = [
        [cof(1, 2, 1, 2), -cof(0, 2, 1, 2), cof(0, 1, 1, 2)],
        [-cof(1, 2, 0, 2), cof(0, 2, 0, 2), -cof(0, 1, 0, 2)],
        [cof(1, 2, 0, 1), -cof(0, 2, 0, 1), cof(0, 1, 0, 1)],
    ];
    let det = m[0][0] * adj[0][0] + m[0][1] * adj[1][0] + m[0][2] * adj[2][0];
    let scale = m.iter().flatten().fold(0.0f64, |a, v| a.max(v.abs()));
    if !det.is_finite() || det.abs() <= 1e-12 * scale.powi(3) {
        return None;
    }
    Some(adj.map(|row| row.map(|v| v / det)))
}
