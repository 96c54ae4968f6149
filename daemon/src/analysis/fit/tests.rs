//! The fits against exact and noisy synthetic sweeps, and the diagnoses' thresholds.

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
