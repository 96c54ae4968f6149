//! What a sweep found: each level's statistics ([`LevelResult`]), each loop kind's fitted
//! model ([`fit_kind`]: watts against loops, weighted by each level's interval where it can
//! be, and against utilisation), and the whole run ([`SweepOutcome`]). Units: W, seconds,
//! UTC ms, busy shares 0..1.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::analysis::fit::{self, LinearFit, UtilisationFit};
use crate::sweep::workload::LoopKind;

/// Statistics of one level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LevelResult {
    pub kind: LoopKind,
    pub loops: usize,
    pub started_ms: i64,
    pub ended_ms: i64,
    /// Seconds from the loops' start to the first reading measured: the readings before it
    /// were still moving towards the level ([`crate::sweep::stopping::warmup_cut`]).
    pub settle_s: f64,
    pub n: usize,
    pub mean_w: f64,
    pub sd_w: f64,
    pub ci95_w: f64,
    /// How the interval was computed.
    pub ci_method: String,
    pub min_w: f64,
    pub max_w: f64,
    pub mean_mhz: Option<f64>,
    /// Mean busy share of all CPUs, 0..1.
    pub busy: Option<f64>,
    /// Mean busy CPUs (busy share x online CPUs).
    pub busy_cpus: Option<f64>,
    /// Mean share of time in each idle state, over all CPUs.
    pub residency: BTreeMap<String, f64>,
    /// Loop operations per second, all threads.
    pub ops_per_s: f64,
    /// Joules per operation, gross (all watts / ops per s); the report derives the marginal
    /// figure against idle.
    pub joules_per_op: Option<f64>,
    /// Mean watts of software-visible sources during the level (RAPL, hwmon, GPU), by
    /// `source/channel`.
    pub components: BTreeMap<String, f64>,
    /// The least and most each of those sources read during the level, W: the range a
    /// calibration against it saw.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub component_ranges: BTreeMap<String, (f64, f64)>,
    pub pinned: bool,
    pub smt_siblings: bool,
    pub warnings: Vec<String>,
}

impl LevelResult {
    /// Seconds the level measured: from the first reading kept to the loops' stop.
    pub fn measure_s(&self) -> f64 {
        ((self.ended_ms - self.started_ms) as f64 / 1000.0 - self.settle_s).max(0.0)
    }

    /// How the level's time split, for the stored run's settings and its JSON:
    /// `{"kind", "loops", "settle_s", "measure_s", "n"}`.
    pub fn timing(&self) -> serde_json::Value {
        let round = |x: f64| (x * 10.0).round() / 10.0;
        serde_json::json!({
            "kind": self.kind.as_str(),
            "loops": self.loops,
            "settle_s": round(self.settle_s),
            "measure_s": round(self.measure_s()),
            "n": self.n,
        })
    }
}

/// A fitted model of one loop kind.
#[derive(Debug, Clone, Serialize)]
pub struct KindFit {
    pub kind: LoopKind,
    pub loops: LinearFit,
    pub utilisation_linear: Option<UtilisationFit>,
    pub utilisation_fan: Option<UtilisationFit>,
    /// Non-linearity and other findings, in plain words.
    pub notes: Vec<String>,
}

/// The result of a sweep (complete, or partial when interrupted).
#[derive(Debug, Clone, Serialize)]
pub struct SweepOutcome {
    pub levels: Vec<LevelResult>,
    pub fits: Vec<KindFit>,
    pub complete: bool,
    pub started_ms: i64,
    pub ended_ms: i64,
}

/// Each kind's fit of `levels`, and the warning on every level whose 95 % interval is wider
/// than the step it measures (the fit's watts per loop): such a level cannot be told from
/// its neighbours, and every output that shows the level (the sweep's lines, the stored
/// record, the report in each format) carries the warning; the fit names those levels too.
pub fn fits(kinds: &[LoopKind], levels: &mut [LevelResult], physical_cores: usize) -> Vec<KindFit> {
    let mut fits: Vec<KindFit> = kinds
        .iter()
        .filter_map(|&k| fit_kind(k, levels, physical_cores))
        .collect();
    for f in &mut fits {
        let step = f.loops.slope.abs();
        let mut wide = Vec::new();
        for l in levels.iter_mut().filter(|l| l.kind == f.kind) {
            if let Some(w) = wider_than_step(l.ci95_w, step) {
                wide.push(crate::analysis::modes::level_name(l.loops as u32));
                if !l.warnings.contains(&w) {
                    l.warnings.push(w);
                }
            }
        }
        if !wide.is_empty() {
            f.notes.push(format!(
                "{} measured with an interval wider than the {step:.2} W step between levels: \
                 they cannot be told from their neighbours (measure longer, or on a quieter \
                 machine)",
                wide.join(", ")
            ));
        }
    }
    fits
}

/// The warning for a level whose 95 % interval (`ci95_w`, W) is wider than `step` (W per
/// loop); `None` where it is narrower, or the step is not known. The report applies it to
/// stored sweeps too.
pub fn wider_than_step(ci95_w: f64, step: f64) -> Option<String> {
    (step.is_finite() && step > 0.0 && ci95_w > step).then(|| {
        format!(
            "its interval (+/- {ci95_w:.2} W) is wider than the {step:.2} W step between \
             levels it measures: it cannot be told from its neighbours"
        )
    })
}

/// Fit one kind's levels: watts against loops (weighted by each level's interval where
/// possible), and against utilisation.
pub fn fit_kind(kind: LoopKind, results: &[LevelResult], physical_cores: usize) -> Option<KindFit> {
    let lv: Vec<&LevelResult> = results.iter().filter(|r| r.kind == kind).collect();
    if lv.len() < 2 {
        return None;
    }
    let x: Vec<f64> = lv.iter().map(|r| r.loops as f64).collect();
    let y: Vec<f64> = lv.iter().map(|r| r.mean_w).collect();
    let c: Vec<f64> = lv.iter().map(|r| r.ci95_w.max(1e-3)).collect();
    // A level measured beside other work explains its own misfit first: what the shape of
    // the line would otherwise suggest (temperature, a turbo budget) is not diagnosed, and
    // the levels are not weighted by their intervals, which do not cover that work: the
    // fit's scatter (r2, the slope's interval) then shows it.
    let loaded: Vec<String> = lv
        .iter()
        .filter(|r| r.warnings.iter().any(|w| w.contains("other load")))
        .map(|r| {
            format!(
                "{} ({:.2} ± {:.2} W)",
                crate::analysis::modes::level_name(r.loops as u32),
                r.mean_w,
                r.ci95_w
            )
        })
        .collect();
    let loops_fit = if loaded.is_empty() {
        fit::wls(&x, &y, &c).or_else(|_| fit::ols(&x, &y)).ok()?
    } else {
        fit::ols(&x, &y).ok()?
    };
    let levels: Vec<(f64, f64, f64)> = lv
        .iter()
        .map(|r| (r.loops as f64, r.mean_w, r.ci95_w))
        .collect();
    let mut notes = fit::diagnose(&levels, &loops_fit);
    if !loaded.is_empty() {
        for n in &mut notes {
            if let Some((finding, _cause)) = n.split_once("; likely") {
                *n = format!("{finding}; not diagnosed further: other load was present");
            }
        }
        notes.insert(
            0,
            format!(
                "other load during the sweep: {} measured with other work running, so the fit \
                 (unweighted: the levels' intervals do not cover that work) and any bend in it \
                 are likely that work's, not the loops'; run the sweep again on an otherwise \
                 idle machine",
                loaded.join(", ")
            ),
        );
    }
    if lv.iter().any(|r| r.smt_siblings) {
        let phys: Vec<&&LevelResult> = lv.iter().filter(|r| !r.smt_siblings).collect();
        let smt: Vec<&&LevelResult> = lv.iter().filter(|r| r.smt_siblings).collect();
        if let (Some(a), Some(b)) = (phys.last(), smt.last())
            && b.loops > a.loops
        {
            let per_smt = (b.mean_w - a.mean_w) / (b.loops - a.loops) as f64;
            notes.push(format!(
                "loops beyond the {physical_cores} physical cores run on SMT siblings: {per_smt:.1} W per sibling loop against {:.1} W per loop overall",
                loops_fit.slope
            ));
        }
    }
    let (ux, uy): (Vec<f64>, Vec<f64>) =
        lv.iter().filter_map(|r| Some((r.busy?, r.mean_w))).unzip();
    let utilisation_linear = (ux.len() >= 2)
        .then(|| fit::fit_utilisation_linear(&ux, &uy).ok())
        .flatten();
    let utilisation_fan = (ux.len() >= 3)
        .then(|| fit::fit_fan(&ux, &uy, fit::FAN_R).ok())
        .flatten();
    Some(KindFit {
        kind,
        loops: loops_fit,
        utilisation_linear,
        utilisation_fan,
        notes,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn level(loops: usize, mean_w: f64, ci95_w: f64, warnings: &[&str]) -> LevelResult {
        LevelResult {
            kind: LoopKind::Spin,
            loops,
            started_ms: 0,
            ended_ms: 1,
            settle_s: 0.5,
            n: 40,
            mean_w,
            sd_w: ci95_w,
            ci95_w,
            ci_method: "BatchMeans".into(),
            min_w: mean_w - ci95_w,
            max_w: mean_w + ci95_w,
            mean_mhz: None,
            busy: None,
            busy_cpus: None,
            residency: BTreeMap::new(),
            ops_per_s: 0.0,
            joules_per_op: None,
            components: BTreeMap::new(),
            component_ranges: BTreeMap::new(),
            pinned: true,
            smt_siblings: false,
            warnings: warnings.iter().map(|w| (*w).to_owned()).collect(),
        }
    }

    /// Seen: idle at 62.74 +/- 68.15 W under other load was fitted as if exact ("5.88 +/-
    /// 1.00 W per loop, r2 1.0000") and a negative step blamed on rising temperature.
    #[test]
    fn a_level_under_other_load_widens_the_fit_and_is_named_first() {
        let levels = [
            level(
                0,
                62.74,
                68.15,
                &[
                    "other load present before idle (1.20 CPUs busy after waiting 30 s): idle may read high",
                ],
            ),
            level(1, 46.0, 0.5, &[]),
            level(2, 52.0, 0.5, &[]),
            level(3, 57.9, 0.5, &[]),
        ];
        let fit = fit_kind(LoopKind::Spin, &levels, 4).unwrap();
        assert!(
            fit.notes[0].starts_with("other load during the sweep: idle (62.74"),
            "{:?}",
            fit.notes
        );
        assert!(
            fit.notes.iter().all(|n| !n.contains("temperature")),
            "{:?}",
            fit.notes
        );
        let ci = fit.loops.slope_ci95.unwrap();
        assert!(
            ci > 5.0,
            "slope {} +/- {ci}: as if the idle level were exact",
            fit.loops.slope
        );
        assert!(fit.loops.r2 < 0.9, "r2 {}", fit.loops.r2);
        // Without other load, the same shape is weighted by the levels' intervals.
        let quiet = [
            level(0, 40.0, 0.5, &[]),
            level(1, 46.0, 0.5, &[]),
            level(2, 52.0, 0.5, &[]),
        ];
        let fit = fit_kind(LoopKind::Spin, &quiet, 4).unwrap();
        assert!(fit.loops.weighted && fit.loops.r2 > 0.99, "{:?}", fit.loops);
    }

    /// Seen: idle at 48.38 +/- 46.35 W printed no warning in the sweep, the CSV or the
    /// report, though its interval was wider than the 6 W step between levels.
    #[test]
    fn a_level_wider_than_the_step_is_warned_on_the_level_and_in_the_fit() {
        let mut levels = [
            level(0, 48.38, 46.35, &[]),
            level(1, 46.0, 0.5, &[]),
            level(2, 52.0, 0.5, &[]),
            level(3, 58.0, 0.5, &[]),
        ];
        let fits = fits(&[LoopKind::Spin], &mut levels, 4);
        let step = fits[0].loops.slope;
        assert!(step > 0.5 && step < 46.35, "step {step}");
        assert_eq!(
            levels[0].warnings,
            [format!(
                "its interval (+/- 46.35 W) is wider than the {step:.2} W step between levels it \
                 measures: it cannot be told from its neighbours"
            )]
        );
        assert!(levels[1..].iter().all(|l| l.warnings.is_empty()));
        assert!(
            fits[0]
                .notes
                .iter()
                .any(|n| n.starts_with("idle measured with an interval wider")),
            "{:?}",
            fits[0].notes
        );
        // Vetting again (the daemon's record of a sweep it ran) adds nothing twice.
        let again = super::fits(&[LoopKind::Spin], &mut levels, 4);
        assert_eq!(levels[0].warnings.len(), 1, "{:?}", levels[0].warnings);
        assert_eq!(again.len(), 1);
        assert_eq!(wider_than_step(0.4, 6.0), None);
        assert_eq!(wider_than_step(10.0, f64::NAN), None);
    }
}
