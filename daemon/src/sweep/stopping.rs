//! When a level has measured enough: where its readings stopped changing (the warm-up cut),
//! and whether the interval of the readings after it has reached the target (the sequential
//! stopping rule, looked at after every reading).

use crate::analysis::stats::{self, CiMethod, MeanCi};

/// Most batches a level's interval uses. Where the readings are nearly independent (a meter
/// read at 1 Hz with white noise) 30 batches give `t_975(29) = 2.05` against `2.09` for 20,
/// and a steadier spread, so a level reaches its target with fewer readings and stops less
/// often on a spread that happened to come out low.
pub const MAX_BATCHES: usize = 30;

/// Batches a level's interval needs before the level may stop (the interval itself may use
/// as few as [`stats::MIN_BATCHES`] while it is shown). The rule looks after every reading
/// and stops on the first narrow enough look, which favours looks where the spread of the
/// batch means came out low; 20 batches or more keep that spread steady enough for the
/// stopped 95 % interval to cover the mean about 94 % of the time on white noise
/// (`stopped_intervals_cover_the_mean`). A stricter threshold (stopping at 85-95 % of the
/// target) was measured too: it costs 8-27 % more readings and does not raise the coverage,
/// because what an early stop gets wrong is the spread, not the threshold.
pub const MIN_BATCHES_TO_STOP: usize = 20;

/// The warm-up cut of a level's readings: how many of the first readings to drop because
/// the power was still moving towards its new level. MSER (White 1997): the `d` in
/// `0..=n/2` minimising `sum((x_i - mean_d)^2 for i >= d) / (n - d)^2`, the squared standard
/// error of the mean of what is left. A ramp's readings are far from the settled mean and
/// cost more spread than they are worth; on readings that never settle the minimum sits at
/// the bound `n/2` (see [`Look::settled`]).
pub fn warmup_cut(xs: &[f64]) -> usize {
    let n = xs.len();
    if n < 4 {
        return 0;
    }
    // Sums of x and x^2 from each index to the end; centred on the last reading so the
    // squares do not lose precision around a large mean.
    let centre = xs[n - 1];
    let (mut s1, mut s2) = (vec![0.0; n + 1], vec![0.0; n + 1]);
    for i in (0..n).rev() {
        let x = xs[i] - centre;
        s1[i] = s1[i + 1] + x;
        s2[i] = s2[i + 1] + x * x;
    }
    let mut best = (0, f64::INFINITY);
    for d in 0..=n / 2 {
        let m = (n - d) as f64;
        let ss = (s2[d] - s1[d] * s1[d] / m).max(0.0);
        let stat = ss / (m * m);
        if stat < best.1 {
            best = (d, stat);
        }
    }
    best.0
}

/// How many batches `xs` may be cut into: as many as keep each batch at least as long as
/// [`stats::batch_means_ci`]'s rule asks for the lag-1 correlation plus one standard error
/// (`rho + 1 / sqrt(n)`), not the estimate itself. A short run's estimate is biased low and
/// varies, and a rule that stops on its first narrow look would stop on exactly the looks
/// where it came out low; between [`stats::MIN_BATCHES`] and [`MAX_BATCHES`].
fn batches_for(xs: &[f64]) -> usize {
    let n = xs.len();
    let rho = stats::lag1_autocorrelation(xs).unwrap_or(0.0).max(0.0);
    let upper = (rho + 1.0 / (n.max(1) as f64).sqrt()).min(0.99);
    let needed = (stats::BATCH_SIZE_FACTOR * upper / (1.0 - upper * upper))
        .ceil()
        .max(1.0) as usize;
    (n / needed).clamp(stats::MIN_BATCHES, MAX_BATCHES)
}

/// One look at a level's readings so far.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Look {
    /// Readings dropped as settling ([`warmup_cut`]).
    pub cut: usize,
    /// Whether the cut came before its bound (half the readings): the power stopped changing.
    pub settled: bool,
    /// The interval of the readings after the cut, once there are `min_samples` of them.
    pub ci: Option<MeanCi>,
    /// Whether the level may stop now.
    pub done: bool,
}

/// Look at `xs` (a level's readings since its loops started): the cut, the interval of the
/// rest once at least `min_samples` remain, and whether it reaches `target(mean)` by the
/// stopping rule (settled, batch means with at least [`MIN_BATCHES_TO_STOP`] batches, the
/// interval at most the target).
pub fn look(xs: &[f64], min_samples: usize, target: impl Fn(f64) -> f64) -> Look {
    let cut = warmup_cut(xs);
    let settled = xs.len() >= 4 && cut < xs.len() / 2;
    let used = &xs[cut..];
    let ci = (used.len() >= min_samples.max(2))
        .then(|| stats::batch_means_ci_up_to(used, batches_for(used)).ok())
        .flatten();
    let done = settled && ci.is_some_and(|c| {
        matches!(c.method, CiMethod::BatchMeans { batches, .. } if batches >= MIN_BATCHES_TO_STOP)
            && c.ci95 <= target(c.mean)
    });
    Look {
        cut,
        settled,
        ci,
        done,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::stats::synthetic::normal;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    /// A level as a 1 Hz meter sees it: a step from `from` to `to` W through a 1 s ramp,
    /// plus AR(1) noise of stationary sd `sd` and lag-1 correlation `phi`.
    fn level(seed: u64, n: usize, from: f64, to: f64, sd: f64, phi: f64) -> Vec<f64> {
        let mut rng = StdRng::seed_from_u64(seed);
        let innov = sd * (1.0 - phi * phi).sqrt();
        let mut dev = sd * normal(&mut rng);
        (0..n)
            .map(|i| {
                dev = phi * dev + innov * normal(&mut rng);
                to + (from - to) * (-(i as f64)).exp() + dev
            })
            .collect()
    }

    /// Run the rule over `xs` as a sweep does, one reading at a time: the look it stopped
    /// on (or the last) and the readings it took.
    fn run(xs: &[f64], min_samples: usize) -> (Look, usize) {
        for n in 1..=xs.len() {
            let l = look(&xs[..n], min_samples, |m| (0.01 * m.abs()).max(0.5));
            if l.done || n == xs.len() {
                return (l, n);
            }
        }
        unreachable!("a non-empty series")
    }

    #[test]
    fn the_cut_drops_a_ramp_and_little_of_a_flat_series() {
        // From 40 W to 55 W: the first readings (15, 5.5, 2 W short) are dropped.
        let xs = level(3, 60, 40.0, 55.0, 2.0, 0.0);
        let cut = warmup_cut(&xs);
        assert!((1..=6).contains(&cut), "cut {cut}");
        // Flat white noise: over many series the cut is mostly 0 to a few readings.
        let cuts: Vec<usize> = (0..200)
            .map(|s| warmup_cut(&level(s, 60, 40.0, 40.0, 2.0, 0.0)))
            .collect();
        let mean = cuts.iter().sum::<usize>() as f64 / cuts.len() as f64;
        assert!(mean < 4.0, "mean cut {mean} of 60 flat readings");
        // A series that never settles: the cut sits at its bound and the look says so.
        let climbing: Vec<f64> = (0..40).map(|i| 50.0 + 3.0 * f64::from(i)).collect();
        assert_eq!(warmup_cut(&climbing), 20);
        let l = look(&climbing, 4, |_| 1e9);
        assert!(!l.settled && !l.done, "{l:?}");
    }

    #[test]
    fn stopped_intervals_cover_the_mean() {
        // Each series is long enough that only the rule stops it; the 95 % intervals it stops
        // on must cover the true level about 95 % of the time: >= 90 % of 400 seeds on white
        // noise (the binomial sd at 95 % is 1.1 %). Correlated readings (lag-1 0.5, as an
        // averaging meter gives) keep >= 85 %: batch means on so few readings per batch
        // cover about 89 % even at a fixed length, before any stopping.
        for (phi, label, floor) in [(0.0, "white", 0.90), (0.5, "correlated", 0.85)] {
            let mut covered = 0;
            let mut readings = 0;
            let runs = 400;
            for seed in 0..runs {
                let xs = level(seed, 1000, 40.0, 55.0, 2.0, phi);
                let (l, n) = run(&xs, 20);
                assert!(l.done, "{label} seed {seed}: never stopped: {l:?}");
                let ci = l.ci.unwrap();
                covered += usize::from((ci.mean - 55.0).abs() <= ci.ci95);
                readings += n;
            }
            let coverage = covered as f64 / runs as f64;
            let mean_n = readings as f64 / runs as f64;
            eprintln!("{label}: coverage {coverage:.3}, mean readings {mean_n:.1}");
            assert!(coverage >= floor, "{label}: coverage {coverage}");
        }
    }

    #[test]
    fn a_level_stops_only_with_enough_batches_and_settled() {
        // Constant readings: a zero-width interval from the first reading, but no stop
        // before `min_samples` readings and 20 batches.
        let xs = vec![40.0; 60];
        let (l, n) = run(&xs, 20);
        assert!(l.done);
        assert!((20..=60).contains(&n), "stopped after {n}");
        let c = l.ci.unwrap();
        assert!(matches!(c.method, CiMethod::BatchMeans { batches, .. } if batches >= 20));
        // A level still climbing never stops, however narrow its interval.
        let climbing: Vec<f64> = (0..60).map(|i| 40.0 + 0.5 * f64::from(i)).collect();
        let (l, _) = run(&climbing, 20);
        assert!(!l.done && !l.settled, "{l:?}");
    }
}
