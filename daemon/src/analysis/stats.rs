//! Descriptive statistics and confidence intervals for meter readings.
//!
//! Inputs are slices of readings in one unit (watts from a wall meter, one sample per
//! second in practice); every result is in that same unit. A `ci95` field is always a
//! HALF-width: the 95 % interval is `mean - ci95 ..= mean + ci95`.
//!
//! Two kinds of interval live here:
//!
//! - [`Summary::of`] treats the readings as independent (the textbook `t * sd / sqrt(n)`).
//!   Right for per-level means that are themselves independent, wrong for raw 1 Hz samples.
//! - [`batch_means_ci`] is for raw samples of a slowly wandering quantity. A wall meter at
//!   1 Hz sees fans, temperatures and background work drift over tens of seconds, so
//!   consecutive samples are positively correlated and the naive interval is far too narrow
//!   (about 4x for a lag-1 autocorrelation of 0.9). See that function for the method.
//!
//! Settling ([`trend`], [`is_settled`]) and the stopping rule ([`ci_target`]) serve the
//! sweep: the field notes record that CPU and GPU power ramp over about one second after a
//! load change and fans and temperatures much more slowly, so a level is measured only once
//! its power has stopped trending, and for only as long as its interval needs.

use serde::Serialize;
use thiserror::Error;

/// What went wrong computing a statistic.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum StatsError {
    /// Too few readings for the statistic asked for.
    #[error("{what} needs at least {need} readings, got {got}")]
    TooFewSamples {
        what: &'static str,
        need: usize,
        got: usize,
    },
    /// A reading was NaN or infinite.
    #[error("reading {index} is not a finite number ({value})")]
    NonFinite { index: usize, value: f64 },
}

fn check_finite(xs: &[f64]) -> Result<(), StatsError> {
    match xs.iter().position(|x| !x.is_finite()) {
        Some(index) => Err(StatsError::NonFinite {
            index,
            value: xs[index],
        }),
        None => Ok(()),
    }
}

fn need(what: &'static str, xs: &[f64], need: usize) -> Result<(), StatsError> {
    if xs.len() < need {
        return Err(StatsError::TooFewSamples {
            what,
            need,
            got: xs.len(),
        });
    }
    check_finite(xs)
}

/// Arithmetic mean, in the unit of the readings. Needs one finite reading.
pub fn mean(xs: &[f64]) -> Result<f64, StatsError> {
    need("a mean", xs, 1)?;
    Ok(xs.iter().sum::<f64>() / xs.len() as f64)
}

/// Sample standard deviation (divisor `n - 1`), in the unit of the readings. Needs two
/// finite readings.
pub fn sample_sd(xs: &[f64]) -> Result<f64, StatsError> {
    need("a standard deviation", xs, 2)?;
    let m = xs.iter().sum::<f64>() / xs.len() as f64;
    let ss: f64 = xs.iter().map(|x| (x - m) * (x - m)).sum();
    Ok((ss / (xs.len() - 1) as f64).sqrt())
}

/// Two-sided 95 % quantile of the standard normal distribution.
pub const Z_975: f64 = 1.959_963_984_540_054;

/// Student-t 97.5 % quantiles for 1..=30 degrees of freedom (standard tables, 9 digits).
const T_975_TABLE: [f64; 30] = [
    12.706_204_736,
    4.302_652_730,
    3.182_446_305,
    2.776_445_105,
    2.570_581_836,
    2.446_911_851,
    2.364_624_252,
    2.306_004_135,
    2.262_157_163,
    2.228_138_852,
    2.200_985_160,
    2.178_812_830,
    2.160_368_656,
    2.144_786_688,
    2.131_449_546,
    2.119_905_299,
    2.109_815_578,
    2.100_922_040,
    2.093_024_054,
    2.085_963_447,
    2.079_613_845,
    2.073_873_068,
    2.068_657_610,
    2.063_898_562,
    2.059_538_553,
    2.055_529_439,
    2.051_830_516,
    2.048_407_142,
    2.045_229_642,
    2.042_272_456,
];

/// The Student-t 97.5 % quantile (the multiplier of a two-sided 95 % interval) for `df`
/// degrees of freedom.
///
/// Exact table values for `df <= 30`; beyond that the Cornish-Fisher expansion in `1/df`
/// (Abramowitz and Stegun 26.7.5, four terms), which is within 1e-6 of the true quantile
/// for `df > 30`. `df == 0` has no finite quantile and returns `f64::INFINITY`.
pub fn t_975(df: usize) -> f64 {
    match df {
        0 => f64::INFINITY,
        1..=30 => T_975_TABLE[df - 1],
        _ => {
            let z = Z_975;
            let v = df as f64;
            let z2 = z * z;
            let z3 = z2 * z;
            let z5 = z3 * z2;
            let z7 = z5 * z2;
            let z9 = z7 * z2;
            let g1 = (z3 + z) / 4.0;
            let g2 = (5.0 * z5 + 16.0 * z3 + 3.0 * z) / 96.0;
            let g3 = (3.0 * z7 + 19.0 * z5 + 17.0 * z3 - 15.0 * z) / 384.0;
            let g4 = (79.0 * z9 + 776.0 * z7 + 1482.0 * z5 - 1920.0 * z3 - 945.0 * z) / 92160.0;
            z + g1 / v + g2 / (v * v) + g3 / (v * v * v) + g4 / (v * v * v * v)
        }
    }
}

/// Summary of independent readings, all in the readings' unit.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Summary {
    /// Number of readings.
    pub n: usize,
    /// Arithmetic mean.
    pub mean: f64,
    /// Sample standard deviation (divisor `n - 1`).
    pub sd: f64,
    /// Smallest reading.
    pub min: f64,
    /// Largest reading.
    pub max: f64,
    /// Half-width of the 95 % interval for the mean, `t_975(n - 1) * sd / sqrt(n)`, which
    /// assumes independent readings (use [`batch_means_ci`] for raw 1 Hz samples).
    pub ci95: f64,
}

impl Summary {
    /// Summarises at least two finite readings.
    pub fn of(xs: &[f64]) -> Result<Self, StatsError> {
        need("a summary", xs, 2)?;
        let n = xs.len();
        let mean = xs.iter().sum::<f64>() / n as f64;
        let sd = sample_sd(xs)?;
        let min = xs.iter().copied().fold(f64::INFINITY, f64::min);
        let max = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        Ok(Self {
            n,
            mean,
            sd,
            min,
            max,
            ci95: t_975(n - 1) * sd / (n as f64).sqrt(),
        })
    }
}

/// Lag-1 autocorrelation `sum (x_t - m)(x_{t+1} - m) / sum (x_t - m)^2`, in `-1..=1`.
/// A constant series has no correlation to speak of and returns 0. Needs three readings.
pub fn lag1_autocorrelation(xs: &[f64]) -> Result<f64, StatsError> {
    need("an autocorrelation", xs, 3)?;
    let m = xs.iter().sum::<f64>() / xs.len() as f64;
    let den: f64 = xs.iter().map(|x| (x - m) * (x - m)).sum();
    if den <= 0.0 {
        return Ok(0.0);
    }
    let num: f64 = xs.windows(2).map(|w| (w[0] - m) * (w[1] - m)).sum();
    Ok((num / den).clamp(-1.0, 1.0))
}

/// Fewest batches used by [`batch_means_ci`]; below this the interval's own uncertainty
/// (a t quantile on fewer than 9 degrees of freedom) makes it too wide to be useful.
pub const MIN_BATCHES: usize = 10;
/// Most batches used by [`batch_means_ci`]; more batches mean shorter ones, and short
/// batches of a correlated series underestimate the variance of the mean.
pub const MAX_BATCHES: usize = 20;
/// A batch must be this many times `rho / (1 - rho^2)` samples long (see [`batch_means_ci`]).
pub const BATCH_SIZE_FACTOR: f64 = 10.0;
/// The lag-1 autocorrelation is capped here: a series more correlated than this is a trend,
/// not noise, and gets a (very wide) interval rather than a division by zero.
const RHO_CAP: f64 = 0.99;

/// How a [`MeanCi`] was computed.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "method", rename_all = "snake_case")]
pub enum CiMethod {
    /// Non-overlapping batch means: `batches` batches of `batch_size` consecutive samples.
    BatchMeans { batches: usize, batch_size: usize },
    /// Too few samples for batch means: the naive interval widened by the AR(1) variance
    /// factor `sqrt((1 + rho) / (1 - rho))`, with `effective_n = n (1 - rho) / (1 + rho)`.
    Ar1Adjusted { effective_n: f64 },
}

/// A mean and its 95 % interval for autocorrelated samples, in the samples' unit.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct MeanCi {
    /// Samples used (batch means drop the oldest `n mod batches`; see [`batch_means_ci`]).
    pub n: usize,
    /// Mean of the samples used.
    pub mean: f64,
    /// Half-width of the 95 % interval for the mean.
    pub ci95: f64,
    /// Lag-1 autocorrelation of the samples, as measured (before any capping).
    pub lag1: f64,
    /// How the interval was computed.
    pub method: CiMethod,
}

/// Mean and 95 % interval of consecutive, autocorrelated samples (raw 1 Hz meter watts).
///
/// Method: non-overlapping batch means.
///
/// 1. Measure the lag-1 autocorrelation `rho` (negative values are treated as 0, which is
///    conservative; values above 0.99 are capped).
/// 2. Choose a batch size that makes consecutive batch means nearly independent. For an
///    AR(1) series the correlation between adjacent means of `b`-sample batches is about
///    `rho / ((1 - rho^2) b)`, and the variance of a batch mean is underestimated by about
///    twice that, so a batch must be at least `10 * rho / (1 - rho^2)` samples
///    ([`BATCH_SIZE_FACTOR`]): within about 10 % on the variance (rho = 0.9 needs 48).
/// 3. Use as many batches as that allows, but between [`MIN_BATCHES`] (10) and
///    [`MAX_BATCHES`] (20), all of equal size `b = n / k`. With few correlated samples per
///    second this gives batches at least `n / 20` long, which also grows like the classic
///    `sqrt(n)` rule for the run lengths a sweep uses. The oldest `n mod k` samples (closest
///    to the level change) are dropped so every batch is full.
/// 4. The batch means are treated as `k` independent readings:
///    `ci95 = t_975(k - 1) * sd(batch means) / sqrt(k)`.
///
/// Fallback, when fewer than 10 batches of the needed size fit (a short or very correlated
/// run): the naive interval widened by the AR(1) variance inflation factor,
/// `ci95 = t_975(n_eff - 1) * sd / sqrt(n) * sqrt((1 + rho) / (1 - rho))` with
/// `n_eff = n (1 - rho) / (1 + rho)`. This trusts the AR(1) model, and `rho` from a short
/// run is biased low, so the fallback is somewhat optimistic; the result says which
/// method was used. Fewer than three samples cannot show a correlation and get the plain
/// independent interval. Needs two finite samples.
pub fn batch_means_ci(xs: &[f64]) -> Result<MeanCi, StatsError> {
    batch_means_ci_up_to(xs, MAX_BATCHES)
}

/// [`batch_means_ci`] with at most `max_batches` batches (at least [`MIN_BATCHES`]): more
/// batches give a smaller t quantile and a steadier spread where the readings are nearly
/// independent, which a sequential stopping rule needs (a sweep's level uses 30).
pub fn batch_means_ci_up_to(xs: &[f64], max_batches: usize) -> Result<MeanCi, StatsError> {
    need("a confidence interval", xs, 2)?;
    let n = xs.len();
    let lag1 = if n >= 3 {
        lag1_autocorrelation(xs)?
    } else {
        0.0
    };
    let rho = lag1.clamp(0.0, RHO_CAP);
    let needed = (BATCH_SIZE_FACTOR * rho / (1.0 - rho * rho))
        .ceil()
        .max(1.0) as usize;
    let batches = (n / needed).min(max_batches.max(MIN_BATCHES));
    if batches >= MIN_BATCHES {
        let size = n / batches;
        let used = &xs[n - batches * size..];
        let means: Vec<f64> = used
            .chunks_exact(size)
            .map(|c| c.iter().sum::<f64>() / size as f64)
            .collect();
        let mean = means.iter().sum::<f64>() / batches as f64;
        let sd = sample_sd(&means)?;
        return Ok(MeanCi {
            n: used.len(),
            mean,
            ci95: t_975(batches - 1) * sd / (batches as f64).sqrt(),
            lag1,
            method: CiMethod::BatchMeans {
                batches,
                batch_size: size,
            },
        });
    }
    let mean = xs.iter().sum::<f64>() / n as f64;
    let sd = sample_sd(xs)?;
    let inflation = (1.0 + rho) / (1.0 - rho);
    let effective_n = n as f64 / inflation;
    let df = (effective_n.floor() as usize).saturating_sub(1).max(1);
    Ok(MeanCi {
        n,
        mean,
        ci95: t_975(df) * sd / (n as f64).sqrt() * inflation.sqrt(),
        lag1,
        method: CiMethod::Ar1Adjusted { effective_n },
    })
}

/// The straight-line trend of a window of consecutive samples (one per sample period).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Trend {
    /// Least-squares slope, in reading units per sample (W/s at 1 Hz).
    pub slope_per_sample: f64,
    /// The slope's change across the window, `slope * (len - 1)`, in reading units.
    pub drift: f64,
    /// Half-width of the 95 % interval of `drift` (treating the residuals as independent).
    pub drift_ci95: f64,
}

/// The least-squares trend of a window of consecutive samples. Needs three samples.
pub fn trend(window: &[f64]) -> Result<Trend, StatsError> {
    need("a trend", window, 3)?;
    let n = window.len() as f64;
    let xm = (n - 1.0) / 2.0;
    let ym = window.iter().sum::<f64>() / n;
    let mut sxx = 0.0;
    let mut sxy = 0.0;
    for (i, y) in window.iter().enumerate() {
        let dx = i as f64 - xm;
        sxx += dx * dx;
        sxy += dx * (y - ym);
    }
    let slope = sxy / sxx;
    let sse: f64 = window
        .iter()
        .enumerate()
        .map(|(i, y)| {
            let r = y - (ym + slope * (i as f64 - xm));
            r * r
        })
        .sum();
    let df = window.len() - 2;
    let slope_se = (sse / df as f64 / sxx).sqrt();
    let span = n - 1.0;
    Ok(Trend {
        slope_per_sample: slope,
        drift: slope * span,
        drift_ci95: t_975(df) * slope_se * span,
    })
}

/// Whether a window of the most recent samples has stopped trending.
///
/// Settled when the fitted drift across the window is within `tolerance` (reading units,
/// e.g. watts) once the noise is allowed for: `|drift| <= tolerance + drift_ci95`. A clean
/// ramp (a fan spinning up) is caught because its drift dwarfs the noise; a flat but noisy
/// window passes because its drift is indistinguishable from zero. The residuals are
/// treated as independent, which understates `drift_ci95` for correlated samples and so
/// errs towards waiting longer. Fewer than three samples, or a non-finite one, are never
/// settled. A sensible `tolerance` is [`ci_target`] of the level's mean.
pub fn is_settled(window: &[f64], tolerance: f64) -> bool {
    trend(window).is_ok_and(|t| t.drift.abs() <= tolerance.max(0.0) + t.drift_ci95)
}

/// The stopping rule: a level's mean is known well enough once its 95 % half-width is at
/// most `max(0.5 W, 1 % of the mean)`. Watts in, watts out.
pub fn ci_target(mean_w: f64) -> f64 {
    (0.01 * mean_w.abs()).max(0.5)
}

/// Synthetic series for tests of interval rules.
#[cfg(test)]
pub(crate) mod synthetic {
    use rand::Rng;
    use rand::rngs::StdRng;

    /// A standard normal deviate (Box-Muller; 1 - u keeps the logarithm finite).
    pub(crate) fn normal(rng: &mut StdRng) -> f64 {
        let u1: f64 = 1.0 - rng.random::<f64>();
        let u2: f64 = rng.random::<f64>();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
}

#[cfg(test)]
mod tests;
