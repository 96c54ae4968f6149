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
mod tests {
    use super::synthetic::normal;
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    /// A stationary AR(1) series around `mu`: `x_t - mu = phi (x_{t-1} - mu) + sigma e_t`.
    fn ar1(seed: u64, n: usize, mu: f64, phi: f64, sigma: f64) -> Vec<f64> {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut dev = normal(&mut rng) * sigma / (1.0 - phi * phi).sqrt();
        (0..n)
            .map(|_| {
                dev = phi * dev + sigma * normal(&mut rng);
                mu + dev
            })
            .collect()
    }

    #[test]
    fn mean_and_sd_of_known_values() {
        let xs = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0];
        assert_eq!(mean(&xs).unwrap(), 5.0);
        // Population sd is 2; the sample sd is 2 * sqrt(8/7).
        assert!((sample_sd(&xs).unwrap() - 2.0 * (8.0f64 / 7.0).sqrt()).abs() < 1e-12);
    }

    #[test]
    fn empty_and_non_finite_input_are_errors_not_panics() {
        assert!(matches!(
            mean(&[]),
            Err(StatsError::TooFewSamples {
                need: 1,
                got: 0,
                ..
            })
        ));
        assert!(matches!(
            sample_sd(&[1.0]),
            Err(StatsError::TooFewSamples {
                need: 2,
                got: 1,
                ..
            })
        ));
        assert!(matches!(
            Summary::of(&[1.0, f64::NAN]),
            Err(StatsError::NonFinite { index: 1, .. })
        ));
        assert!(batch_means_ci(&[3.0]).is_err());
        assert!(!is_settled(&[1.0, 1.0], 10.0));
        assert!(!is_settled(&[1.0, f64::INFINITY, 1.0], 10.0));
    }

    #[test]
    fn t_quantiles_match_published_values() {
        let known = [
            (1, 12.706_204_736),
            (2, 4.302_652_730),
            (5, 2.570_581_836),
            (10, 2.228_138_852),
            (19, 2.093_024_054),
            (30, 2.042_272_456),
            (31, 2.039_513_446),
            (40, 2.021_075_390),
            (60, 2.000_297_822),
            (120, 1.979_930_405),
            (1000, 1.962_339_081),
        ];
        for (df, t) in known {
            assert!(
                (t_975(df) - t).abs() < 1e-5,
                "df {df}: {} vs {t}",
                t_975(df)
            );
        }
        assert!((t_975(10_000_000) - Z_975).abs() < 1e-6);
        assert_eq!(t_975(0), f64::INFINITY);
        // Monotone decreasing across the table/approximation seam.
        assert!(t_975(30) > t_975(31) && t_975(31) > t_975(32));
    }

    #[test]
    fn summary_of_known_values() {
        let s = Summary::of(&[10.0, 12.0, 14.0]).unwrap();
        assert_eq!(
            (s.n, s.mean, s.sd, s.min, s.max),
            (3, 12.0, 2.0, 10.0, 14.0)
        );
        assert!((s.ci95 - 4.302_652_730 * 2.0 / 3.0f64.sqrt()).abs() < 1e-9);
    }

    #[test]
    fn lag1_of_alternating_and_constant_series() {
        let alt: Vec<f64> = (0..100)
            .map(|i| if i % 2 == 0 { 1.0 } else { -1.0 })
            .collect();
        assert!(lag1_autocorrelation(&alt).unwrap() < -0.95);
        assert_eq!(lag1_autocorrelation(&[5.0; 10]).unwrap(), 0.0);
        let x = ar1(7, 20_000, 0.0, 0.9, 1.0);
        assert!((lag1_autocorrelation(&x).unwrap() - 0.9).abs() < 0.02);
    }

    #[test]
    fn batch_means_covers_the_true_mean_where_the_naive_interval_does_not() {
        // 20 minutes of 1 Hz watts wandering around 240 W with lag-1 correlation 0.9.
        let (mu, runs) = (240.0, 400u64);
        let mut naive_hits = 0;
        let mut batch_hits = 0;
        let mut width_ratio = 0.0;
        for seed in 0..runs {
            let x = ar1(seed, 1200, mu, 0.9, 2.0);
            let naive = Summary::of(&x).unwrap();
            let bm = batch_means_ci(&x).unwrap();
            assert!(matches!(bm.method, CiMethod::BatchMeans { .. }), "{bm:?}");
            naive_hits += usize::from((naive.mean - mu).abs() <= naive.ci95);
            batch_hits += usize::from((bm.mean - mu).abs() <= bm.ci95);
            width_ratio += bm.ci95 / naive.ci95 / runs as f64;
        }
        let naive_cov = naive_hits as f64 / runs as f64;
        let batch_cov = batch_hits as f64 / runs as f64;
        eprintln!("naive {naive_cov}, batch means {batch_cov}, width ratio {width_ratio}");
        assert!(naive_cov < 0.6, "naive coverage {naive_cov}");
        assert!(
            (0.90..=0.99).contains(&batch_cov),
            "batch coverage {batch_cov}"
        );
        // The true inflation for phi = 0.9 is sqrt(19), about 4.4.
        assert!(
            (3.0..6.0).contains(&width_ratio),
            "width ratio {width_ratio}"
        );
    }

    #[test]
    fn white_noise_gets_batch_means_close_to_the_naive_interval() {
        let mut hits = 0;
        for seed in 0..400u64 {
            let x = ar1(seed + 10_000, 300, 40.0, 0.0, 2.0);
            let bm = batch_means_ci(&x).unwrap();
            assert_eq!(
                bm.method,
                CiMethod::BatchMeans {
                    batches: 20,
                    batch_size: 15
                }
            );
            hits += usize::from((bm.mean - 40.0).abs() <= bm.ci95);
        }
        let cov = hits as f64 / 400.0;
        eprintln!("white noise coverage {cov}");
        assert!((0.90..=0.99).contains(&cov), "coverage {cov}");
    }

    #[test]
    fn short_correlated_runs_still_cover() {
        // 90 s per level (the sweep budget) of a strongly correlated meter: rho from 90
        // samples is biased low, so some runs get short batches and some the fallback.
        let mut hits = 0;
        let mut fallbacks = 0;
        for seed in 0..400u64 {
            let x = ar1(seed + 20_000, 90, 100.0, 0.8, 2.0);
            let ci = batch_means_ci(&x).unwrap();
            fallbacks += usize::from(matches!(ci.method, CiMethod::Ar1Adjusted { .. }));
            hits += usize::from((ci.mean - 100.0).abs() <= ci.ci95);
        }
        let cov = hits as f64 / 400.0;
        eprintln!("coverage {cov}, fallbacks {fallbacks}");
        assert!((0.85..=0.99).contains(&cov), "coverage {cov}");
        assert!(fallbacks > 0);
    }

    #[test]
    fn too_short_for_ten_batches_uses_the_ar1_adjustment() {
        let x = ar1(5, 40, 100.0, 0.9, 2.0);
        let ci = batch_means_ci(&x).unwrap();
        let CiMethod::Ar1Adjusted { effective_n } = ci.method else {
            panic!("{ci:?}")
        };
        let rho = ci.lag1.clamp(0.0, 0.99);
        assert!((effective_n - 40.0 * (1.0 - rho) / (1.0 + rho)).abs() < 1e-9);
        let naive = Summary::of(&x).unwrap();
        assert!(ci.ci95 > naive.ci95 * ((1.0 + rho) / (1.0 - rho)).sqrt());
    }

    #[test]
    fn batch_means_drops_the_oldest_remainder() {
        let x: Vec<f64> = (0..203)
            .map(|i| if i % 2 == 0 { 4.0 } else { 6.0 })
            .collect();
        let ci = batch_means_ci(&x).unwrap();
        assert_eq!(
            ci.method,
            CiMethod::BatchMeans {
                batches: 20,
                batch_size: 10
            }
        );
        // The oldest three samples (4, 6, 4) are dropped; the rest average exactly 5.
        assert_eq!(ci.n, 200);
        assert_eq!(ci.mean, 5.0);
        assert_eq!(ci.ci95, 0.0);
    }

    #[test]
    fn a_ramp_is_not_settled_and_a_noisy_plateau_is() {
        let mut rng = StdRng::seed_from_u64(3);
        let ramp: Vec<f64> = (0..30)
            .map(|i| 100.0 + 0.5 * f64::from(i) + 2.0 * normal(&mut rng))
            .collect();
        assert!(!is_settled(&ramp, ci_target(110.0)));
        let flat: Vec<f64> = (0..30).map(|_| 100.0 + 2.0 * normal(&mut rng)).collect();
        assert!(is_settled(&flat, ci_target(100.0)));
        let t = trend(&[1.0, 2.0, 3.0, 4.0]).unwrap();
        assert!((t.slope_per_sample - 1.0).abs() < 1e-12 && (t.drift - 3.0).abs() < 1e-12);
        // A noiseless slow drift within tolerance is settled; beyond it is not.
        let slow: Vec<f64> = (0..20).map(|i| 50.0 + 0.01 * f64::from(i)).collect();
        assert!(is_settled(&slow, 0.5));
        assert!(!is_settled(&slow, 0.1));
    }

    #[test]
    fn stopping_rule_is_half_a_watt_or_one_percent() {
        assert_eq!(ci_target(40.0), 0.5);
        assert_eq!(ci_target(240.0), 2.4);
        assert_eq!(ci_target(50.0), 0.5);
    }
}
