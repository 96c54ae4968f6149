//! Each measured setting as configurations that `wattson report` compares: [`AS_FOUND`]
//! (the A phases) and "idle with <setting>" (the B phases), stored as a sweep stores its
//! configurations ([`crate::sweep::persist::save`]: the `configuration`, `sweep_run` and
//! `sweep_level` tables), each with one idle level. The changed configuration's run names
//! the one it was measured against, and the difference measured in alternating phases, in
//! its settings (`{"idle_measure": Pairing}`), so the report compares the two with that
//! difference's own interval instead of the two means' combined one.
//!
//! Units: W; `*_ci95_w` are 95 % half-widths; UTC ms.

use serde::{Deserialize, Serialize};

use super::IdleError;
use super::measure::{Outcome, Phase};
use super::store::Effect;
use crate::store::Store;
use crate::sweep::fingerprint::Fingerprint;
use crate::sweep::outcome::{LevelResult, SweepOutcome};
use crate::sweep::workload::LoopKind;

/// The configuration of idle as `wattson idle --measure` found it.
pub const AS_FOUND: &str = "idle as found";

/// The configuration of idle with the setting `name` (`ASPM powersave`) changed.
pub fn changed_name(name: &str) -> String {
    format!("idle with {name}")
}

/// What a changed configuration's run says about how it was measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pairing {
    /// The configuration it was measured against ([`AS_FOUND`]).
    pub against: String,
    /// The `idle_run` it came from, and the trial's id (`pcie_aspm`; `candidate` in the
    /// stored JSON, as it always was).
    pub idle_run: i64,
    #[serde(rename = "candidate")]
    pub trial: String,
    pub original: String,
    pub changed: String,
    /// Idle as found during this setting's A phases, W.
    pub baseline_w: f64,
    /// Changed minus as found, W (negative saves), and its 95 % half-width.
    pub delta_w: f64,
    pub delta_ci95_w: f64,
    /// The interval excludes zero.
    pub effect: bool,
}

impl Pairing {
    /// The pairing stored in a sweep run's settings, if it is one.
    pub fn of_settings(settings: Option<&serde_json::Value>) -> Option<Pairing> {
        serde_json::from_value(settings?.get("idle_measure")?.clone()).ok()
    }
}

/// How a run stored by [`save`] was measured, in words; `None` for any other run.
pub fn describe(settings: Option<&serde_json::Value>, meter: &str) -> Option<String> {
    if let Some(p) = Pairing::of_settings(settings) {
        return Some(format!(
            "measured by `wattson idle --measure` with {meter}: {} {} -> {}, in phases \
             alternating with {:?}",
            p.trial, p.original, p.changed, p.against
        ));
    }
    settings?.get(AS_FOUND_KEY)?;
    Some(format!(
        "measured by `wattson idle --measure` with {meter}: idle with every setting as found"
    ))
}

/// The settings key of an [`AS_FOUND`] run.
const AS_FOUND_KEY: &str = "idle_measure_as_found";

/// One side (`A` or `B`) of `o` as a sweep's idle level.
fn level(o: &Outcome, side: &str, mean_w: f64, ci95_w: f64) -> LevelResult {
    let phases: Vec<&Phase> = o.phases.iter().filter(|p| p.phase == side).collect();
    let n: usize = phases.iter().map(|p| p.n).sum();
    // Pooled over the side's phases: within-phase spread plus the phases' differences.
    let ss: f64 = phases
        .iter()
        .map(|p| {
            let d = p.mean_w - mean_w;
            (p.n.saturating_sub(1)) as f64 * p.sd_w * p.sd_w + p.n as f64 * d * d
        })
        .sum();
    let unsettled = phases.iter().filter(|p| p.unsettled).count();
    LevelResult {
        kind: LoopKind::Spin,
        loops: 0,
        started_ms: o.started_ms,
        ended_ms: o.ended_ms,
        settle_s: phases.iter().map(|p| p.settle_s).fold(0.0, f64::max),
        n,
        mean_w,
        sd_w: (ss / n.saturating_sub(1).max(1) as f64).sqrt(),
        ci95_w,
        ci_method: "batch means per phase, drift-cancelling weights across the A B A phases".into(),
        min_w: phases.iter().map(|p| p.min_w).fold(f64::INFINITY, f64::min),
        max_w: phases
            .iter()
            .map(|p| p.max_w)
            .fold(f64::NEG_INFINITY, f64::max),
        mean_mhz: None,
        busy: None,
        busy_cpus: None,
        residency: std::collections::BTreeMap::new(),
        ops_per_s: 0.0,
        joules_per_op: None,
        components: std::collections::BTreeMap::new(),
        component_ranges: std::collections::BTreeMap::new(),
        pinned: false,
        smt_siblings: false,
        warnings: if unsettled > 0 {
            vec![format!(
                "{unsettled} phase(s) still settling at the cap; measured anyway"
            )]
        } else {
            Vec::new()
        },
    }
}

/// Store `e` (measured as `o`) as [`AS_FOUND`] and "idle with <setting>", each a new run of
/// its configuration (the report shows each configuration's newest run).
pub fn save(
    store: &Store,
    fingerprint: &Fingerprint,
    e: &Effect,
    o: &Outcome,
) -> Result<(), IdleError> {
    let outcome = |level: LevelResult| SweepOutcome {
        levels: vec![level],
        fits: Vec::new(),
        complete: true,
        started_ms: o.started_ms,
        ended_ms: o.ended_ms,
    };
    let found = serde_json::json!({
        AS_FOUND_KEY: { "idle_run": e.run_id, "candidate": e.trial },
    });
    crate::sweep::persist::save(
        store,
        AS_FOUND,
        fingerprint,
        &outcome(level(
            o,
            "A",
            o.figures.baseline_w,
            o.figures.baseline_ci95_w,
        )),
        &found,
    )?;
    let pairing = Pairing {
        against: AS_FOUND.to_owned(),
        idle_run: e.run_id,
        trial: e.trial.clone(),
        original: e.original.clone(),
        changed: e.changed.clone(),
        baseline_w: e.baseline_w,
        delta_w: e.delta_w,
        delta_ci95_w: e.delta_ci95_w,
        effect: e.effect,
    };
    crate::sweep::persist::save(
        store,
        &changed_name(&e.name),
        fingerprint,
        &outcome(level(o, "B", o.figures.changed_w, o.figures.changed_ci95_w)),
        &serde_json::json!({ "idle_measure": pairing }),
    )?;
    Ok(())
}
