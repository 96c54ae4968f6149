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
