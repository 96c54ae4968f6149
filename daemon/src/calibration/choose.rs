//! Least squares and the choice of a model by its error on history it was not fitted on.
//!
//! The history (aligned minutes with the wall) is split in time: the first part fits each
//! candidate, the later part (`holdout`, 30 % by default) scores it, by the rms of a
//! minute's error over the held-out minutes inside the range the candidate saw. The
//! candidates: for each signal that varies, a straight line and calibrate tables of 4 and
//! 8 segments (knots at its quantiles, which follow a fan's step or a turbo knee a line
//! cannot); and straight lines over every power signal with the CPU's busy share, and over
//! every signal. Where a disk's spun-up share varies, each power signal's and the busy
//! share's tables also come with a line in it (a disk's watts add to whatever the CPU
//! draws), and the straight line over the power signals takes it in. The best is fitted again on the whole history, and keeps the held-out
//! figures of its first fit: that is how well it did on minutes it had not seen.

use wattson_collectors::Metric;

use super::CalibrationError;
use super::history::Table;
use super::model::{Feature, Model, Shape, Span, WallModel};
use crate::store::HOUR_MS;

/// The fewest minutes a fit uses, and the fewest held out.
pub const MIN_FIT_MINUTES: usize = 30;
pub const MIN_HELDOUT_MINUTES: usize = 10;

/// Where `n` minutes split into fitted and held out: the later `holdout` share held out,
/// moved so that at least [`MIN_FIT_MINUTES`] are fitted and [`MIN_HELDOUT_MINUTES`] held
/// out; `None` under their sum. The refusal says exactly this.
fn split_at(n: usize, holdout: f64) -> Option<usize> {
    (n >= MIN_FIT_MINUTES + MIN_HELDOUT_MINUTES).then(|| {
        let share = ((n as f64) * (1.0 - holdout)).round() as usize;
        share.clamp(MIN_FIT_MINUTES, n - MIN_HELDOUT_MINUTES)
    })
}

/// A candidate: which columns of the table, and the shape to fit.
#[derive(Debug, Clone, PartialEq)]
enum Candidate {
    Linear(Vec<usize>),
    /// A calibrate table over `column`, plus a line in each of the `plus` columns.
    Table {
        column: usize,
        segments: usize,
        plus: Vec<usize>,
    },
}

/// The model chosen, how it did held out, the others considered (with their held-out rms,
/// W) and the range of each of its signals over the whole history.
#[derive(Debug)]
pub struct Chosen {
    pub model: Model,
    pub score: Score,
    pub considered: Vec<(String, f64)>,
    pub spans: Vec<Span>,
}

/// How a model did on held-out minutes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Score {
    pub minutes: usize,
    pub outside: usize,
    pub rms_w: f64,
    pub energy_error_pct: f64,
    pub interval_pct: f64,
}

/// Fits `table` (its `wall` and its columns, which are `features`) and chooses by held-out
/// error. `holdout` is the later share of the minutes scored, not fitted.
pub fn choose(
    table: &Table,
    features: &[Feature],
    holdout: f64,
) -> Result<Chosen, CalibrationError> {
    let n = table.len();
    let Some(split) = split_at(n, holdout) else {
        return Err(CalibrationError::NotEnough(format!(
            "{n} minutes with the wall meter and the signals both stored: a calibration needs \
             at least {}, {MIN_FIT_MINUTES} to fit and {MIN_HELDOUT_MINUTES} held out (leave \
             the meter in longer, or widen --since/--until)",
            MIN_FIT_MINUTES + MIN_HELDOUT_MINUTES
        )));
    };
    let (fit, held) = (table.slice(0..split), table.slice(split..n));
    let varying: Vec<usize> = (0..features.len())
        .filter(|&j| {
            let s = span(&fit.columns[j]);
            s.max - s.min > 1e-9 * s.max.abs().max(1.0)
        })
        .collect();
    if varying.is_empty() {
        return Err(CalibrationError::NotEnough(
            "no signal varied while the meter was in: a model needs the load to change (run \
             `wattson sweep`, or leave the meter in through busier hours)"
                .into(),
        ));
    }
    let mut candidates = Vec::new();
    for &j in &varying {
        candidates.push(Candidate::Linear(vec![j]));
        for segments in [4, 8] {
            candidates.push(Candidate::Table {
                column: j,
                segments,
                plus: Vec::new(),
            });
        }
    }
    let metric_is = |j: usize, m: Metric| features[j].metric == m;
    let power: Vec<usize> = varying
        .iter()
        .copied()
        .filter(|&j| metric_is(j, Metric::Power) || metric_is(j, Metric::CpuBusy))
        .collect();
    // Disks spun up: watts that add to whatever the CPU draws, in every shape.
    let disks: Vec<usize> = varying
        .iter()
        .copied()
        .filter(|&j| metric_is(j, Metric::DiskSpunUp))
        .collect();
    if !disks.is_empty() {
        for &j in &power {
            for segments in [4, 8] {
                candidates.push(Candidate::Table {
                    column: j,
                    segments,
                    plus: disks.clone(),
                });
            }
        }
    }
    let power = [power, disks].concat();
    if power.len() >= 2 {
        candidates.push(Candidate::Linear(power.clone()));
    }
    if varying.len() >= 2 && varying.len() != power.len() && fit.len() >= 10 * varying.len() {
        candidates.push(Candidate::Linear(varying.clone()));
    }

    let mut scored: Vec<(Candidate, Model, Score)> = Vec::new();
    for c in candidates {
        let Some(model) = fit_candidate(&fit, features, &c) else {
            continue;
        };
        let spans: Vec<Span> = columns_of(&c)
            .iter()
            .map(|&j| span(&fit.columns[j]))
            .collect();
        let score = score(&model, &spans, &held, &columns_of(&c));
        // A candidate that could judge under half the held-out minutes saw too little.
        if score.minutes * 2 < held.len() {
            continue;
        }
        scored.push((c, model, score));
    }
    scored.sort_by(|a, b| a.2.rms_w.total_cmp(&b.2.rms_w));
    let considered = scored
        .iter()
        .map(|(_, m, s)| (m.describe(), s.rms_w))
        .collect();
    let Some((best, _, score)) = scored.into_iter().next() else {
        return Err(CalibrationError::NotEnough(
            "no model could be fitted: the held-out minutes lie outside the range of the \
             fitted ones (the load changed; leave the meter in longer)"
                .into(),
        ));
    };
    // The chosen shape fitted again on all of it.
    let model = fit_candidate(table, features, &best).ok_or_else(|| {
        CalibrationError::NotEnough(
            "the chosen model could not be fitted on the whole history".into(),
        )
    })?;
    let spans = columns_of(&best)
        .iter()
        .map(|&j| span(&table.columns[j]))
        .collect();
    Ok(Chosen {
        model,
        score,
        considered,
        spans,
    })
}

fn columns_of(c: &Candidate) -> Vec<usize> {
    match c {
        Candidate::Linear(cols) => cols.clone(),
        Candidate::Table { column, plus, .. } => [vec![*column], plus.clone()].concat(),
    }
}

pub fn span(v: &[f64]) -> Span {
    Span {
        min: v.iter().copied().fold(f64::INFINITY, f64::min),
        max: v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    }
}

fn fit_candidate(t: &Table, features: &[Feature], c: &Candidate) -> Option<Model> {
    match c {
        Candidate::Linear(cols) => {
            let x: Vec<&[f64]> = cols.iter().map(|&j| t.columns[j].as_slice()).collect();
            let beta = least_squares(&x, &t.wall)?;
            Some(Model {
                features: cols.iter().map(|&j| features[j].clone()).collect(),
                shape: Shape::Linear {
                    intercept_w: beta[0],
                    coefficients: beta[1..].to_vec(),
                },
            })
        }
        Candidate::Table {
            column,
            segments,
            plus,
        } => {
            let x = &t.columns[*column];
            let knots = quantile_knots(x, *segments);
            if knots.len() < 3 {
                return None;
            }
            // wall = a + b x + sum of c_k max(0, x - knot_k) over the inner knots: straight
            // lines between the knots, joined.
            let hinges: Vec<Vec<f64>> = knots[1..knots.len() - 1]
                .iter()
                .map(|k| x.iter().map(|v| (v - k).max(0.0)).collect())
                .collect();
            let mut cols: Vec<&[f64]> = vec![x.as_slice()];
            cols.extend(hinges.iter().map(Vec::as_slice));
            cols.extend(plus.iter().map(|&j| t.columns[j].as_slice()));
            let beta = least_squares(&cols, &t.wall)?;
            let inner = hinges.len();
            let at = |v: f64| {
                beta[0]
                    + beta[1] * v
                    + knots[1..knots.len() - 1]
                        .iter()
                        .zip(&beta[2..])
                        .map(|(k, c)| c * (v - k).max(0.0))
                        .sum::<f64>()
            };
            Some(Model {
                features: std::iter::once(*column)
                    .chain(plus.iter().copied())
                    .map(|j| features[j].clone())
                    .collect(),
                shape: Shape::Table {
                    points: knots.iter().map(|&k| (k, at(k))).collect(),
                    plus: beta[2 + inner..].to_vec(),
                },
            })
        }
    }
}

/// `segments + 1` knots at the quantiles of `x` (its least and most at the ends), repeats
/// dropped.
fn quantile_knots(x: &[f64], segments: usize) -> Vec<f64> {
    let mut sorted = x.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mut knots: Vec<f64> = (0..=segments)
        .map(|i| sorted[(i * (sorted.len() - 1)) / segments])
        .collect();
    knots.dedup_by(|a, b| (*a - *b).abs() <= 1e-9 * b.abs().max(1.0));
    knots
}

/// How `model` (whose features are `cols` of `held`, seen over `spans`) does on `held`.
pub fn score(model: &Model, spans: &[Span], held: &Table, cols: &[usize]) -> Score {
    let mut sq = 0.0;
    let (mut est_sum, mut wall_sum) = (0.0, 0.0);
    let mut hours: std::collections::BTreeMap<i64, (f64, f64, usize)> =
        std::collections::BTreeMap::new();
    let (mut minutes, mut outside) = (0, 0);
    for i in 0..held.len() {
        let x: Vec<f64> = cols.iter().map(|&j| held.columns[j][i]).collect();
        if !x.iter().zip(spans).all(|(v, s)| s.holds(*v)) {
            outside += 1;
            continue;
        }
        let (est, wall) = (model.predict(&x), held.wall[i]);
        sq += (est - wall).powi(2);
        est_sum += est;
        wall_sum += wall;
        let h = hours
            .entry(held.minutes[i].div_euclid(HOUR_MS))
            .or_default();
        h.0 += est;
        h.1 += wall;
        h.2 += 1;
        minutes += 1;
    }
    let rms_w = (sq / minutes.max(1) as f64).sqrt();
    let energy_error_pct = if wall_sum > 0.0 {
        100.0 * (est_sum - wall_sum) / wall_sum
    } else {
        0.0
    };
    Score {
        minutes,
        outside,
        rms_w,
        energy_error_pct,
        interval_pct: interval_pct(
            &hours,
            rms_w,
            wall_sum / minutes.max(1) as f64,
            energy_error_pct,
        ),
    }
}

/// The 95 % half-width of an estimated energy, %: twice the rms of the held-out hours'
/// energy errors where three or more hours were held out with half their minutes, else
/// twice a minute's rms error over the mean wall draw (minutes' errors do not cancel
/// then, which overstates it); never less than the held-out stretch's own energy error.
fn interval_pct(
    hours: &std::collections::BTreeMap<i64, (f64, f64, usize)>,
    rms_w: f64,
    mean_w: f64,
    energy_error_pct: f64,
) -> f64 {
    let errs: Vec<f64> = hours
        .values()
        .filter(|(_, w, n)| *n >= 30 && *w > 0.0)
        .map(|(e, w, _)| (e - w) / w)
        .collect();
    let band = if errs.len() >= 3 {
        200.0 * (errs.iter().map(|e| e * e).sum::<f64>() / errs.len() as f64).sqrt()
    } else if mean_w > 0.0 {
        200.0 * rms_w / mean_w
    } else {
        f64::INFINITY
    };
    band.max(energy_error_pct.abs())
}

/// Ordinary least squares of `wall` on an intercept and `columns`
/// ([`crate::analysis::least_squares`]): the coefficients, intercept first; `None` when they
/// are collinear or `wall` is short.
pub fn least_squares(columns: &[&[f64]], wall: &[f64]) -> Option<Vec<f64>> {
    if wall.len() <= columns.len() + 1 {
        return None;
    }
    crate::analysis::least_squares::solve(columns, wall, None).map(|s| s.beta)
}

/// The stored calibration of `host` from `table` (wall and `features`), chosen with
/// `holdout`.
pub fn calibrate(
    host: &str,
    wall_source: &str,
    table: &Table,
    features: &[Feature],
    holdout: f64,
    hardware: super::model::Hardware,
    now_ms: i64,
) -> Result<WallModel, CalibrationError> {
    let Chosen {
        model,
        score,
        considered,
        spans: feature_spans,
    } = choose(table, features, holdout)?;
    let split = ((table.len() as f64) * (1.0 - holdout)).round() as usize;
    Ok(WallModel {
        host: host.to_owned(),
        created_ms: now_ms,
        wall_source: wall_source.to_owned(),
        model,
        from_ms: table.minutes[0],
        to_ms: table.minutes[table.len() - 1],
        minutes: table.len(),
        feature_spans,
        wall_span: Some(span(&table.wall)),
        heldout_from_ms: table.minutes[split],
        heldout_minutes: score.minutes,
        heldout_rms_w: score.rms_w,
        heldout_energy_error_pct: score.energy_error_pct,
        interval_pct: score.interval_pct,
        considered,
        hardware,
        borrowed_from: None,
        origin: super::model::Origin::Running,
    })
}

#[cfg(test)]
mod tests {
    /// The refusal's rule and the split agree: 30 fitted and 10 held out at the least.
    #[test]
    fn the_split_keeps_the_minimums_its_refusal_names() {
        use super::split_at;
        assert_eq!(split_at(39, 0.3), None);
        assert_eq!(split_at(40, 0.3), Some(30));
        assert_eq!(split_at(41, 0.3), Some(30));
        assert_eq!(split_at(100, 0.3), Some(70));
        assert_eq!(split_at(41, 0.05), Some(31));
    }

    use super::*;

    #[test]
    fn least_squares_recovers_a_plane() {
        let a: Vec<f64> = (0..50).map(|i| f64::from(i) * 0.02).collect();
        let b: Vec<f64> = (0..50)
            .map(|i| 2000.0 + f64::from((i * 7) % 13) * 100.0)
            .collect();
        let y: Vec<f64> = a
            .iter()
            .zip(&b)
            .map(|(a, b)| 20.0 + 30.0 * a + 0.01 * b)
            .collect();
        let beta = least_squares(&[&a, &b], &y).unwrap();
        assert!((beta[0] - 20.0).abs() < 1e-6, "{beta:?}");
        assert!((beta[1] - 30.0).abs() < 1e-6, "{beta:?}");
        assert!((beta[2] - 0.01).abs() < 1e-9, "{beta:?}");
        assert!(least_squares(&[&a, &a], &y).is_none(), "collinear");
    }

    #[test]
    fn a_table_follows_a_step_a_line_cannot() {
        // 23 W + 1.12 x pkg, and a fan's 6 W above 60 % load, over a load that rises and
        // falls through the day.
        let n = 400;
        let load: Vec<f64> = (0..n).map(|i| (f64::from(i) * 0.37).sin().abs()).collect();
        let pkg: Vec<f64> = load.iter().map(|l| 8.0 + 50.0 * l).collect();
        let wall: Vec<f64> = load
            .iter()
            .zip(&pkg)
            .map(|(l, p)| 23.0 + 1.12 * p + if *l > 0.6 { 6.0 } else { 0.0 })
            .collect();
        let table = Table {
            minutes: (0..i64::from(n)).map(|i| i * 60_000).collect(),
            wall,
            columns: vec![pkg],
        };
        let f = [Feature::parse("rapl/power/package-0").unwrap()];
        let Chosen {
            model,
            score,
            considered,
            ..
        } = choose(&table, &f, 0.3).unwrap();
        assert!(matches!(model.shape, Shape::Table { .. }), "{considered:?}");
        assert!(score.energy_error_pct.abs() < 1.0, "{score:?}");
        assert!(considered.len() == 3, "{considered:?}");
    }

    #[test]
    fn a_disk_spun_up_adds_its_watts_to_the_table_over_the_cpu() {
        // The fan's step as above, and a disk that draws 6 W more while spun up, spun up
        // for stretches that do not follow the load (a backup, a scrub).
        let n = 600;
        let load: Vec<f64> = (0..n).map(|i| (f64::from(i) * 0.37).sin().abs()).collect();
        let pkg: Vec<f64> = load.iter().map(|l| 8.0 + 50.0 * l).collect();
        let disk: Vec<f64> = (0..n)
            .map(|i| match i % 97 {
                0..40 => 1.0,
                40 => 0.5,
                _ => 0.0,
            })
            .collect();
        let wall: Vec<f64> = (0..n as usize)
            .map(|i| 23.0 + 1.12 * pkg[i] + if load[i] > 0.6 { 6.0 } else { 0.0 } + 6.0 * disk[i])
            .collect();
        let table = Table {
            minutes: (0..i64::from(n)).map(|i| i * 60_000).collect(),
            wall,
            columns: vec![pkg, disk],
        };
        let f = [
            Feature::parse("rapl/power/package-0").unwrap(),
            Feature::parse("disk/disk_spun_up/sda").unwrap(),
        ];
        let Chosen {
            model,
            score,
            considered,
            ..
        } = choose(&table, &f, 0.3).unwrap();
        let Shape::Table { plus, .. } = &model.shape else {
            panic!("{considered:?}");
        };
        assert_eq!(model.features.len(), 2, "{considered:?}");
        assert!((plus[0] - 6.0).abs() < 0.5, "{plus:?}: {considered:?}");
        assert!(score.energy_error_pct.abs() < 1.0, "{score:?}");
        assert!(
            model.describe().ends_with(" W x disk/disk_spun_up/sda"),
            "{}",
            model.describe()
        );
        model.check().unwrap();
        // The disk alone: 6 W more at the same load.
        let idle = model.predict(&[20.0, 0.0]);
        assert!((model.predict(&[20.0, 1.0]) - idle - plus[0]).abs() < 1e-9);
    }

    #[test]
    fn too_little_history_says_how_much_is_needed() {
        let table = Table {
            minutes: vec![0, 60_000],
            wall: vec![1.0, 2.0],
            columns: vec![vec![1.0, 2.0]],
        };
        let e = choose(
            &table,
            &[Feature::parse("rapl/power/package-0").unwrap()],
            0.3,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("2 minutes") && e.contains("needs at least 40, 30 to fit and 10 held out"),
            "{e}"
        );
    }
}
