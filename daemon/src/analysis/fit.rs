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
//! [`diagnose()`] says in words when the extra loops do not each cost the same.

use serde::Serialize;
use thiserror::Error;

use super::stats::{Z_975, t_975};

mod diagnose;
mod utilisation;

pub use diagnose::diagnose;
pub use utilisation::{
    FAN_R, UtilModel, UtilisationFit, fit_fan, fit_fan_best_r, fit_utilisation_linear,
};

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
    let s = super::least_squares::solve(&[x], y, Some(w)).ok_or(FitError::NoSpread { x: x[0] })?;
    let (intercept, slope) = (s.beta[0], s.beta[1]);
    let residuals: Vec<f64> = x
        .iter()
        .zip(y)
        .map(|(x, y)| y - (intercept + slope * x))
        .collect();
    let sw: f64 = w.iter().sum();
    let ym = y.iter().zip(w).map(|(y, w)| w * y).sum::<f64>() / sw;
    let syy: f64 = y.iter().zip(w).map(|(y, w)| w * (y - ym).powi(2)).sum();
    let r2 = if syy > 0.0 { 1.0 - s.sse / syy } else { 1.0 };
    let df = n - 2;
    // Variance multiplier for (X'WX)^-1, and the quantile for the intervals.
    let scale = if known_variance {
        let reduced = if df > 0 { s.sse / df as f64 } else { 0.0 };
        if reduced > 1.0 {
            Some((reduced, t_975(df)))
        } else {
            Some((1.0, Z_975))
        }
    } else if df > 0 {
        Some((s.sse / df as f64, t_975(df)))
    } else {
        None
    };
    let (slope_se, intercept_se, q) = match scale {
        Some((s2, q)) => (
            Some((s2 * s.inverse[1][1]).max(0.0).sqrt()),
            Some((s2 * s.inverse[0][0]).max(0.0).sqrt()),
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

#[cfg(test)]
mod tests;
