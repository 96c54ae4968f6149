//! Watts against utilisation: a straight line, or Fan, Weber and Barroso's curve
//! `P(u) = P_idle + (P_max - P_idle)(2u - u^r)` with a given or best-fitting `r`.

use serde::Serialize;

use super::{FitError, check, ols};

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
