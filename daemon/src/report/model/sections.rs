//! The report's sections beside the configurations' figures: the idle-regression check, a
//! configuration's fit and levels, and the GPU idle rule.

use std::collections::BTreeMap;

use serde::Serialize;
use wattson_collectors::SourceId;

use super::{MS_PER_HOUR, Pricer, rfc3339};
use crate::analysis::gpu_idle::{self, Rule};
use crate::report::input::{FitInput, GpuInput};

/// Whether idle power rose against a configuration's baseline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RegressionStatus {
    /// No check is stored.
    NotChecked,
    /// Checked; no configuration's idle rose.
    None,
    /// The newest check of at least one configuration found idle risen.
    Detected,
}

impl RegressionStatus {
    /// `not checked`, `none`, `detected`.
    pub fn as_str(self) -> &'static str {
        match self {
            RegressionStatus::NotChecked => "not checked",
            RegressionStatus::None => "none",
            RegressionStatus::Detected => "detected",
        }
    }
}

/// The idle-power regression checks in a report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RegressionReport {
    pub status: RegressionStatus,
    /// The newest check of each configuration, newest first.
    pub checks: Vec<RegressionCheckReport>,
}

/// One configuration's newest check. Watts in W; `*_ci95_watts` are 95 % half-widths.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RegressionCheckReport {
    pub config: String,
    pub detected: bool,
    /// RFC 3339, UTC.
    pub checked_at: String,
    pub checked_ms: i64,
    pub baseline_idle_watts: f64,
    pub baseline_ci95_watts: f64,
    pub latest_idle_watts: f64,
    pub latest_ci95_watts: f64,
    /// Latest minus baseline.
    pub delta_watts: f64,
    pub delta_ci95_watts: f64,
    /// The rise that counts as a regression.
    pub threshold_watts: f64,
    /// What the rise costs per year at the report's mean price, currency (negative: saves).
    pub delta_annual_cost: f64,
}

/// A sweep's fit with what idle and each loop cost per year.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FitReport {
    /// W.
    pub idle_watts: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_ci95: Option<f64>,
    /// W per loop.
    pub watts_per_loop: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub watts_per_loop_ci95: Option<f64>,
    pub r2: f64,
    /// Loop kind.
    pub kind: String,
    pub notes: Vec<String>,
    /// Currency per year at idle.
    pub idle_annual_cost: f64,
    /// Currency per year for each loop kept busy all year.
    pub per_loop_annual_cost: f64,
}

/// One sweep level.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LevelReport {
    pub kind: String,
    pub loops: u32,
    /// W.
    pub mean_w: f64,
    /// W.
    pub ci95_w: f64,
    /// C-state -> share of time (`0..=1`).
    pub residency: BTreeMap<String, f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_mhz: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ops_per_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub joules_per_op: Option<f64>,
    /// Currency per year at this level.
    pub annual_cost: f64,
}

/// One GPU's time in each state and the cost of a process resident while it idles.
/// Shares are of `covered_hours`, `0..=1`; watts are settled means (see
/// [`crate::analysis::gpu_idle::SETTLE_MS`]), absent where the state was never seen.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuIdleReport {
    /// `gpuN`.
    pub channel: String,
    pub source: SourceId,
    /// Which evidence told resident from bare idle.
    pub rule: Rule,
    /// `rule` in words.
    pub rule_explanation: String,
    /// Hours the samples cover.
    pub covered_hours: f64,
    /// W at utilisation above 0 %.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub busy_watts: Option<f64>,
    pub busy_share: f64,
    /// W at 0 % with a process holding a context.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_resident_watts: Option<f64>,
    pub idle_resident_share: f64,
    /// W at 0 % with no process.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_bare_watts: Option<f64>,
    pub idle_bare_share: f64,
    /// Samples that could not be classified (no utilisation, or an undecidable clock).
    pub unclassified_share: f64,
    /// `idle_resident_watts - idle_bare_watts`, W; absent without both.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resident_extra_watts: Option<f64>,
    /// `resident_extra_watts` x `idle_resident_share` x 8760 h / 1000, kWh per year.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resident_annual_kwh: Option<f64>,
    /// `resident_annual_kwh` priced at the year's mean price, currency per year.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resident_annual_cost: Option<f64>,
    /// The extra draw resident all year, kWh per year.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resident_all_year_kwh: Option<f64>,
    /// The extra draw resident all year, currency per year.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resident_all_year_cost: Option<f64>,
    /// Plain-words caveats about this GPU's figures.
    pub notes: Vec<String>,
}

pub(super) fn regression_report(
    checks: &[crate::sweep::regression::Check],
    pricer: &Pricer,
) -> RegressionReport {
    let status = if checks.is_empty() {
        RegressionStatus::NotChecked
    } else if checks.iter().any(|c| c.verdict.detected) {
        RegressionStatus::Detected
    } else {
        RegressionStatus::None
    };
    RegressionReport {
        status,
        checks: checks
            .iter()
            .map(|c| RegressionCheckReport {
                config: c.config.clone(),
                detected: c.verdict.detected,
                checked_at: rfc3339(c.checked_ms),
                checked_ms: c.checked_ms,
                baseline_idle_watts: c.baseline.watts,
                baseline_ci95_watts: c.baseline.ci95_w,
                latest_idle_watts: c.latest.watts,
                latest_ci95_watts: c.latest.ci95_w,
                delta_watts: c.verdict.delta_w,
                delta_ci95_watts: c.verdict.delta_ci95_w,
                threshold_watts: c.verdict.threshold_w,
                delta_annual_cost: pricer.figure(c.verdict.delta_w, None).cost,
            })
            .collect(),
    }
}

pub(super) fn gpu_idle_report(g: &GpuInput, pricer: &Pricer) -> GpuIdleReport {
    let s = gpu_idle::summarise(&g.points);
    let rule = s.rule();
    let extra = s
        .idle_resident
        .mean_watts
        .zip(s.idle_bare.mean_watts)
        .map(|(r, b)| r - b);
    let resident_share = s.share(&s.idle_resident);
    let mut notes = Vec::new();
    match (s.idle_resident.samples, s.idle_bare.samples) {
        (0, _) => notes.push(
            "no idle time with a resident process was observed: nothing to price".to_string(),
        ),
        (_, 0) => notes.push(
            "no bare idle (no process) was observed, so there is no baseline to price the \
             resident process against; stop it once while wattson runs to measure one"
                .to_string(),
        ),
        _ => {}
    }
    if s.unclassified.samples > 0 {
        notes.push(format!(
            "{} sample(s) ({:.1}% of the time) could not be classified: {}",
            s.unclassified.samples,
            s.share(&s.unclassified) * 100.0,
            if rule == Rule::None {
                Rule::None.explain()
            } else {
                "no utilisation recorded, or an SM clock between idle and held"
            }
        ));
    }
    let at = |w: f64| pricer.figure(w, None);
    GpuIdleReport {
        channel: g.channel.clone(),
        source: g.source.clone(),
        rule,
        rule_explanation: rule.explain().to_string(),
        covered_hours: s.covered_ms as f64 / MS_PER_HOUR,
        busy_watts: s.busy.mean_watts,
        busy_share: s.share(&s.busy),
        idle_resident_watts: s.idle_resident.mean_watts,
        idle_resident_share: resident_share,
        idle_bare_watts: s.idle_bare.mean_watts,
        idle_bare_share: s.share(&s.idle_bare),
        unclassified_share: s.share(&s.unclassified),
        resident_extra_watts: extra,
        resident_annual_kwh: extra.map(|w| at(w * resident_share).kwh),
        resident_annual_cost: extra.map(|w| at(w * resident_share).cost),
        resident_all_year_kwh: extra.map(|w| at(w).kwh),
        resident_all_year_cost: extra.map(|w| at(w).cost),
        notes,
    }
}

pub(super) fn fit_report(f: &FitInput, pricer: &Pricer) -> FitReport {
    FitReport {
        idle_watts: f.idle_watts,
        idle_ci95: f.idle_ci95,
        watts_per_loop: f.watts_per_loop,
        watts_per_loop_ci95: f.watts_per_loop_ci95,
        r2: f.r2,
        kind: f.kind.clone(),
        notes: f.notes.clone(),
        idle_annual_cost: pricer.figure(f.idle_watts, None).cost,
        per_loop_annual_cost: pricer.figure(f.watts_per_loop, None).cost,
    }
}
