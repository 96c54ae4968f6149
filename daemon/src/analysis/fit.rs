//! Fitting watts against work: least-squares lines, utilisation models, and plain-words
//! checks for non-linearity.
//!
//! Units: `x` is loops (busy worker threads) or utilisation (`0..=1`), `y` is watts, so an
//! intercept is watts at zero load and a slope is watts per loop (or per unit utilisation).
//! A `ci95` is a half-width of a 95 % interval, in the unit of the value it qualifies.
//!
//! The field notes ("How power tracks load") are why this module does more than a line:
//! Fan, Weber and Barroso (2007) found `P(u) = P_idle + (P_max - P_idle)(2u - u^r)` with
//! `r = 1.4` fits measured servers better than a straight line, and power-calibrate's own
//! examples range from r2 = 0.999 to 0.849. So every fit reports r2 and residuals, and
//! [`diagnose`] says in words when the extra loops do not each cost the same.

use serde::Serialize;
use thiserror::Error;

use super::stats::{Z_975, t_975};

/// Why a fit could not be made.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum FitError {
    /// `x` and `y` (or the uncertainties) have different lengths.
    #[error("{what} has {got} values but x has {expected}")]
    LengthMismatch {
        what: &'static str,
        expected: usize,
        got: usize,
    },
    /// Not enough points for the fit.
    #[error("a fit needs at least {need} points, got {got}")]
    TooFewPoints { need: usize, got: usize },
    /// Every `x` is the same, so no slope can be fitted.
    #[error("every x is {x}: a slope needs at least two different x values")]
    NoSpread { x: f64 },
    /// A value is NaN or infinite.
    #[error("{what}[{index}] is not a finite number ({value})")]
    NonFinite {
        what: &'static str,
        index: usize,
        value: f64,
    },
    /// A weighted fit was given an uncertainty that is not positive.
    #[error("ci95[{index}] = {value} W: a weighted fit needs positive uncertainties")]
    BadUncertainty { index: usize, value: f64 },
    /// A utilisation outside `0..=1`.
    #[error("utilisation[{index}] = {value} is outside 0..=1")]
    UtilisationOutOfRange { index: usize, value: f64 },
}

fn check(what: &'static str, v: &[f64], expected: usize) -> Result<(), FitError> {
    if v.len() != expected {
        return Err(FitError::LengthMismatch {
            what,
            expected,
            got: v.len(),
        });
    }
    match v.iter().position(|x| !x.is_finite()) {
        Some(index) => Err(FitError::NonFinite {
            what,
            index,
            value: v[index],
        }),
        None => Ok(()),
    }
}

/// A straight line `y = intercept + slope * x` fitted by (weighted) least squares.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LinearFit {
    /// Number of points.
    pub n: usize,
    /// `y` at `x = 0` (watts at idle when `x` is loops).
    pub intercept: f64,
    /// `y` per unit `x` (watts per loop).
    pub slope: f64,
    /// Standard error of the intercept; `None` when it cannot be estimated (two points,
    /// unweighted).
    pub intercept_se: Option<f64>,
    /// Standard error of the slope; `None` as for `intercept_se`.
    pub slope_se: Option<f64>,
    /// Half-width of the intercept's 95 % interval.
    pub intercept_ci95: Option<f64>,
    /// Half-width of the slope's 95 % interval.
    pub slope_ci95: Option<f64>,
    /// Coefficient of determination (weighted when the fit is); 1 is a perfect line.
    pub r2: f64,
    /// `y - fitted`, in input order, in the unit of `y`.
    pub residuals: Vec<f64>,
    /// Whether the points were weighted by their uncertainties.
    pub weighted: bool,
}

impl LinearFit {
    /// The fitted `y` at `x`.
    pub fn predict(&self, x: f64) -> f64 {
        self.intercept + self.slope * x
    }
}

/// Ordinary least squares of `y` on `x` (watts on loops). Needs two points with different
/// `x`. Standard errors use the residual variance on `n - 2` degrees of freedom and
/// intervals the matching t quantile, so two points give a line but no intervals.
pub fn ols(x: &[f64], y: &[f64]) -> Result<LinearFit, FitError> {
    check("x", x, x.len())?;
    check("y", y, x.len())?;
    let w = vec![1.0; x.len()];
    line(x, y, &w, false)
}

/// Weighted least squares of `y` on `x`, each point weighted by `1 / sigma^2` with
/// `sigma = ci95 / 1.96` (per-level means from many samples are close to normal).
///
/// The per-level uncertainties are taken as known, so the intervals use the normal
/// quantile and exist even for two points. If the points scatter about the line more than
/// their uncertainties allow (reduced chi-square above 1, which needs three points), the
/// standard errors are scaled up by its square root and the intervals use the t quantile
/// on `n - 2` degrees of freedom: the uncertainties were optimistic, so trust the scatter.
pub fn wls(x: &[f64], y: &[f64], ci95: &[f64]) -> Result<LinearFit, FitError> {
    check("x", x, x.len())?;
    check("y", y, x.len())?;
    check("ci95", ci95, x.len())?;
    if let Some(index) = ci95.iter().position(|c| *c <= 0.0) {
        return Err(FitError::BadUncertainty {
            index,
            value: ci95[index],
        });
    }
    let w: Vec<f64> = ci95.iter().map(|c| (Z_975 / c).powi(2)).collect();
    line(x, y, &w, true)
}

// The names follow the textbook formulas (x, y, w, n, q).
#[allow(clippy::many_single_char_names)]
fn line(x: &[f64], y: &[f64], w: &[f64], known_variance: bool) -> Result<LinearFit, FitError> {
    let n = x.len();
    if n < 2 {
        return Err(FitError::TooFewPoints { need: 2, got: n });
    }
    let sw: f64 = w.iter().sum();
    let xm = x.iter().zip(w).map(|(x, w)| w * x).sum::<f64>() / sw;
    let ym = y.iter().zip(w).map(|(y, w)| w * y).sum::<f64>() / sw;
    let mut sxx = 0.0;
    let mut sxy = 0.0;
    let mut syy = 0.0;
    for i in 0..n {
        let dx = x[i] - xm;
        let dy = y[i] - ym;
        sxx += w[i] * dx * dx;
        sxy += w[i] * dx * dy;
        syy += w[i] * dy * dy;
    }
    let x_scale = x.iter().fold(0.0f64, |m, v| m.max(v.abs())).max(1.0);
    if sxx <= 1e-24 * sw * x_scale * x_scale {
        return Err(FitError::NoSpread { x: x[0] });
    }
    let slope = sxy / sxx;
    let intercept = ym - slope * xm;
    let residuals: Vec<f64> = x
        .iter()
        .zip(y)
        .map(|(x, y)| y - (intercept + slope * x))
        .collect();
    let sse: f64 = residuals.iter().zip(w).map(|(r, w)| w * r * r).sum();
    let r2 = if syy > 0.0 { 1.0 - sse / syy } else { 1.0 };
    let df = n - 2;
    // Variance multiplier for (X'WX)^-1, and the quantile for the intervals.
    let scale = if known_variance {
        let reduced = if df > 0 { sse / df as f64 } else { 0.0 };
        if reduced > 1.0 {
            Some((reduced, t_975(df)))
        } else {
            Some((1.0, Z_975))
        }
    } else if df > 0 {
        Some((sse / df as f64, t_975(df)))
    } else {
        None
    };
    let (slope_se, intercept_se, q) = match scale {
        Some((s2, q)) => (
            Some((s2 / sxx).sqrt()),
            Some((s2 * (1.0 / sw + xm * xm / sxx)).sqrt()),
            q,
        ),
        None => (None, None, f64::NAN),
    };
    Ok(LinearFit {
        n,
        intercept,
        slope,
        intercept_se,
        slope_se,
        intercept_ci95: intercept_se.map(|se| q * se),
        slope_ci95: slope_se.map(|se| q * se),
        r2,
        residuals,
        weighted: known_variance,
    })
}

/// The exponent Fan, Weber and Barroso (2007) found for `P(u) = P_idle + (P_max -
/// P_idle)(2u - u^r)`.
pub const FAN_R: f64 = 1.4;

/// Which utilisation model a [`UtilisationFit`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UtilModel {
    /// `P(u) = P_idle + (P_max - P_idle) u`.
    Linear,
    /// `P(u) = P_idle + (P_max - P_idle)(2u - u^r)`.
    Fan,
}

/// Power as a function of utilisation `u` in `0..=1`, in watts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UtilisationFit {
    /// The model's form.
    pub model: UtilModel,
    /// Watts at `u = 0`.
    pub p_idle: f64,
    /// Watts at `u = 1`.
    pub p_max: f64,
    /// The Fan exponent `r` (`None` for the linear model).
    pub r: Option<f64>,
    /// Coefficient of determination of the model against the points.
    pub r2: f64,
    /// Watts measured minus watts predicted, in input order.
    pub residuals: Vec<f64>,
}

impl UtilisationFit {
    /// Predicted watts at utilisation `u` (`0..=1`).
    pub fn predict(&self, u: f64) -> f64 {
        let g = match self.r {
            Some(r) => fan_shape(u, r),
            None => u,
        };
        self.p_idle + (self.p_max - self.p_idle) * g
    }
}

fn fan_shape(u: f64, r: f64) -> f64 {
    2.0 * u - u.powf(r)
}

fn check_utilisation(u: &[f64], p: &[f64]) -> Result<(), FitError> {
    check("utilisation", u, u.len())?;
    check("watts", p, u.len())?;
    match u.iter().position(|v| !(0.0..=1.0).contains(v)) {
        Some(index) => Err(FitError::UtilisationOutOfRange {
            index,
            value: u[index],
        }),
        None => Ok(()),
    }
}

/// Fits the linear utilisation model `P(u) = a + b u` (`u` in `0..=1`, `P` in watts).
pub fn fit_utilisation_linear(u: &[f64], p: &[f64]) -> Result<UtilisationFit, FitError> {
    check_utilisation(u, p)?;
    let f = ols(u, p)?;
    Ok(UtilisationFit {
        model: UtilModel::Linear,
        p_idle: f.intercept,
        p_max: f.intercept + f.slope,
        r: None,
        r2: f.r2,
        residuals: f.residuals,
    })
}

/// Fits Fan, Weber and Barroso's model with a given exponent `r` (use [`FAN_R`]). The
/// model is linear in `P_idle` and `P_max - P_idle` once `2u - u^r` is the regressor, and
/// that regressor is 1 at `u = 1`, so `P_max` is intercept plus slope.
pub fn fit_fan(u: &[f64], p: &[f64], r: f64) -> Result<UtilisationFit, FitError> {
    check_utilisation(u, p)?;
    let shape: Vec<f64> = u.iter().map(|u| fan_shape(*u, r)).collect();
    let line = ols(&shape, p)?;
    Ok(UtilisationFit {
        model: UtilModel::Fan,
        p_idle: line.intercept,
        p_max: line.intercept + line.slope,
        r: Some(r),
        r2: line.r2,
        residuals: line.residuals,
    })
}

/// Fits Fan, Weber and Barroso's model choosing `r` in `1.0..=5.0` (steps of 0.01) to
/// minimise the squared residuals. `r = 1` is the straight line; larger `r` bends the
/// curve so that later utilisation costs less. A grid rather than a local search, so a
/// flat or bumpy error surface cannot strand it.
pub fn fit_fan_best_r(u: &[f64], p: &[f64]) -> Result<UtilisationFit, FitError> {
    let mut best = fit_fan(u, p, 1.0)?;
    let mut best_sse: f64 = best.residuals.iter().map(|r| r * r).sum();
    for step in 1..=400 {
        let r = 1.0 + f64::from(step) * 0.01;
        let f = fit_fan(u, p, r)?;
        let sse: f64 = f.residuals.iter().map(|r| r * r).sum();
        if sse < best_sse {
            best = f;
            best_sse = sse;
        }
    }
    Ok(best)
}

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
            "{what}: the step to {} loops costs {:.1} ± {:.1} W per loop, the step to {} loops \
             {:.1} ± {:.1} W (straight-line fit {:.1} W per loop); {why}",
            fmt_loops(first.to),
            first.cost,
            first.ci95,
            fmt_loops(last.to),
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
                "saturation beyond {} loops: each loop up to there costs {early:.1} ± \
                 {early_ci:.1} W, each one after it {late:.1} W; a shared resource such as \
                 memory bandwidth is the limit",
                fmt_loops(xj)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::stats::Summary;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    fn normal(rng: &mut StdRng) -> f64 {
        let u1: f64 = 1.0 - rng.random::<f64>();
        let u2: f64 = rng.random::<f64>();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    #[test]
    fn exact_line_recovers_exact_parameters() {
        let x = [0.0, 1.0, 2.0, 3.0, 4.0];
        let y: Vec<f64> = x.iter().map(|x| 40.0 + 15.0 * x).collect();
        let f = ols(&x, &y).unwrap();
        assert!((f.intercept - 40.0).abs() < 1e-12);
        assert!((f.slope - 15.0).abs() < 1e-12);
        assert!((f.r2 - 1.0).abs() < 1e-12);
        assert!(f.residuals.iter().all(|r| r.abs() < 1e-12));
        assert!(f.slope_se.unwrap() < 1e-9 && f.intercept_ci95.unwrap() < 1e-9);
        assert!((f.predict(10.0) - 190.0).abs() < 1e-9);
    }

    #[test]
    fn standard_errors_match_a_hand_computation() {
        // x = 0,1,2; y = 0,2,1: slope 0.5, intercept 0.5, residuals -0.5, 1, -0.5,
        // SSE 1.5, s^2 = 1.5, Sxx = 2, se(slope) = sqrt(0.75), se(a) = sqrt(1.5 * 5/6).
        let f = ols(&[0.0, 1.0, 2.0], &[0.0, 2.0, 1.0]).unwrap();
        assert!((f.slope - 0.5).abs() < 1e-12 && (f.intercept - 0.5).abs() < 1e-12);
        assert!((f.slope_se.unwrap() - 0.75f64.sqrt()).abs() < 1e-12);
        assert!((f.intercept_se.unwrap() - 1.25f64.sqrt()).abs() < 1e-12);
        assert!((f.slope_ci95.unwrap() - 12.706_204_736 * 0.75f64.sqrt()).abs() < 1e-9);
        assert!((f.r2 - 0.25).abs() < 1e-12);
    }

    #[test]
    fn noisy_sweep_recovers_idle_and_watts_per_loop() {
        // The DESIGN's sweep accuracy case: idle 40 W, 15 W per loop, meter noise sd 2 W.
        let mut rng = StdRng::seed_from_u64(42);
        let mut levels = Vec::new();
        for loops in 0..=4 {
            let samples: Vec<f64> = (0..90)
                .map(|_| 40.0 + 15.0 * f64::from(loops) + 2.0 * normal(&mut rng))
                .collect();
            let s = Summary::of(&samples).unwrap();
            levels.push((f64::from(loops), s.mean, s.ci95));
        }
        let x: Vec<f64> = levels.iter().map(|l| l.0).collect();
        let y: Vec<f64> = levels.iter().map(|l| l.1).collect();
        let c: Vec<f64> = levels.iter().map(|l| l.2).collect();
        for f in [ols(&x, &y).unwrap(), wls(&x, &y, &c).unwrap()] {
            assert!((f.intercept - 40.0).abs() < 0.5, "{f:?}");
            assert!((f.slope - 15.0).abs() < 0.3, "{f:?}");
            assert!(f.r2 > 0.999);
            assert!((f.intercept - 40.0).abs() <= f.intercept_ci95.unwrap() * 1.5);
        }
        assert!(wls(&x, &y, &c).unwrap().weighted);
        assert!(diagnose(&levels, &ols(&x, &y).unwrap()).is_empty());
    }

    #[test]
    fn weighted_fit_trusts_the_precise_points() {
        // The imprecise middle point is far off the line through the precise ones.
        let f = wls(&[0.0, 1.0, 2.0], &[10.0, 30.0, 30.0], &[0.01, 100.0, 0.01]).unwrap();
        assert!((f.slope - 10.0).abs() < 0.01 && (f.intercept - 10.0).abs() < 0.01);
        // Two points: a weighted fit still has intervals, an unweighted one does not.
        assert!(
            wls(&[0.0, 1.0], &[1.0, 2.0], &[0.5, 0.5])
                .unwrap()
                .slope_ci95
                .is_some()
        );
        assert!(ols(&[0.0, 1.0], &[1.0, 2.0]).unwrap().slope_ci95.is_none());
    }

    #[test]
    fn bad_input_is_named() {
        assert!(matches!(
            ols(&[1.0, 1.0, 1.0], &[1.0, 2.0, 3.0]),
            Err(FitError::NoSpread { .. })
        ));
        assert!(matches!(
            ols(&[1.0], &[1.0]),
            Err(FitError::TooFewPoints { need: 2, got: 1 })
        ));
        assert!(matches!(
            ols(&[1.0, 2.0], &[1.0]),
            Err(FitError::LengthMismatch { what: "y", .. })
        ));
        assert!(matches!(
            ols(&[1.0, f64::NAN], &[1.0, 2.0]),
            Err(FitError::NonFinite {
                what: "x",
                index: 1,
                ..
            })
        ));
        assert!(matches!(
            wls(&[1.0, 2.0], &[1.0, 2.0], &[1.0, 0.0]),
            Err(FitError::BadUncertainty { index: 1, .. })
        ));
        assert!(matches!(
            fit_fan(&[0.0, 1.5], &[1.0, 2.0], FAN_R),
            Err(FitError::UtilisationOutOfRange { index: 1, .. })
        ));
    }

    #[test]
    fn fan_model_fits_fan_data_better_than_a_line_and_finds_r() {
        let u: Vec<f64> = (0..=10).map(|i| f64::from(i) / 10.0).collect();
        let p: Vec<f64> = u
            .iter()
            .map(|u| 100.0 + 150.0 * (2.0 * u - u.powf(1.4)))
            .collect();
        let lin = fit_utilisation_linear(&u, &p).unwrap();
        let fan = fit_fan(&u, &p, FAN_R).unwrap();
        assert!((fan.p_idle - 100.0).abs() < 1e-9 && (fan.p_max - 250.0).abs() < 1e-9);
        assert!((fan.r2 - 1.0).abs() < 1e-12);
        assert!(lin.r2 < fan.r2 && lin.r2 > 0.9);
        assert!((fan.predict(0.5) - (100.0 + 150.0 * (1.0 - 0.5f64.powf(1.4)))).abs() < 1e-9);
        let best = fit_fan_best_r(&u, &p).unwrap();
        assert!((best.r.unwrap() - 1.4).abs() < 0.005, "{best:?}");
        // A straight line is the r = 1 end of the family.
        let straight: Vec<f64> = u.iter().map(|u| 50.0 + 30.0 * u).collect();
        let best = fit_fan_best_r(&u, &straight).unwrap();
        assert!((best.r.unwrap() - 1.0).abs() < 1e-9);
        assert!((fit_utilisation_linear(&u, &straight).unwrap().p_max - 80.0).abs() < 1e-9);
    }

    fn levels_of(watts: &[f64], ci: f64) -> (Vec<(f64, f64, f64)>, LinearFit) {
        let x: Vec<f64> = (0..watts.len()).map(|i| i as f64).collect();
        let lv = x.iter().zip(watts).map(|(x, w)| (*x, *w, ci)).collect();
        (lv, ols(&x, watts).unwrap())
    }

    #[test]
    fn a_linear_sweep_is_not_flagged() {
        // 40 W + 15 W per loop, each mean off by up to 0.3 W with a 1 W interval.
        let jitter = [0.3, -0.2, 0.1, -0.3, 0.2, 0.0, -0.1];
        let w: Vec<f64> = jitter
            .iter()
            .enumerate()
            .map(|(i, j)| 40.0 + 15.0 * i as f64 + j)
            .collect();
        let (lv, fit) = levels_of(&w, 1.0);
        assert_eq!(diagnose(&lv, &fit), Vec::<String>::new());
        // Exact data with no stated uncertainty is not flagged for rounding error either.
        let exact: Vec<f64> = (0..6).map(|i| 40.0 + 15.0 * f64::from(i)).collect();
        let (lv, fit) = levels_of(&exact, 0.0);
        assert!(diagnose(&lv, &fit).is_empty());
    }

    #[test]
    fn later_loops_cheaper_is_flagged() {
        // Steps of 20, 16, 12, 8 W: a turbo budget shared between busy cores.
        let (lv, fit) = levels_of(&[40.0, 60.0, 76.0, 88.0, 96.0], 0.5);
        let d = diagnose(&lv, &fit);
        assert_eq!(d.len(), 1, "{d:?}");
        assert!(d[0].starts_with("later loops are cheaper"), "{d:?}");
        assert!(d[0].contains("20.0") && d[0].contains("8.0"), "{d:?}");
    }

    #[test]
    fn later_loops_dearer_is_flagged() {
        let (lv, fit) = levels_of(&[40.0, 50.0, 62.0, 76.0, 92.0], 0.5);
        let d = diagnose(&lv, &fit);
        assert_eq!(d.len(), 1, "{d:?}");
        assert!(d[0].starts_with("later loops cost more"), "{d:?}");
    }

    #[test]
    fn saturation_is_flagged_with_its_level() {
        // Memory-bound loops: two loops fill the memory bus, more add almost nothing.
        let (lv, fit) = levels_of(&[40.0, 55.0, 70.0, 72.0, 72.5, 72.5], 0.5);
        let d = diagnose(&lv, &fit);
        assert_eq!(d.len(), 1, "{d:?}");
        assert!(d[0].starts_with("saturation beyond 2 loops"), "{d:?}");
    }

    #[test]
    fn curvature_within_the_noise_is_not_flagged() {
        // The same bend as the cheaper case but each mean uncertain by 10 W.
        let (lv, fit) = levels_of(&[40.0, 60.0, 76.0, 88.0, 96.0], 10.0);
        assert!(diagnose(&lv, &fit).is_empty());
    }

    #[test]
    fn two_levels_say_they_cannot_check() {
        let (lv, fit) = levels_of(&[40.0, 55.0], 0.5);
        let d = diagnose(&lv, &fit);
        assert_eq!(d.len(), 1);
        assert!(d[0].contains("cannot be checked"));
        // Unsorted input with a duplicate level is sorted and deduplicated.
        let lv = [
            (2.0, 76.0, 0.5),
            (0.0, 40.0, 0.5),
            (1.0, 60.0, 0.5),
            (1.0, 60.0, 0.5),
        ];
        let lv: Vec<_> = lv
            .iter()
            .chain(&[(3.0, 88.0, 0.5), (4.0, 96.0, 0.5)])
            .copied()
            .collect();
        assert!(diagnose(&lv, &fit)[0].starts_with("later loops are cheaper"));
    }
}
