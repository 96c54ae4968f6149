//! What each service costs, estimated: the wall's power above the idle floor of this host's
//! newest sweep fit, shared between groups by their share of busy CPU time interval by
//! interval ([`super::store`] keeps the sums that needs), priced through the ledger
//! ([`crate::ledger::estimated_cost`]). The idle floor is shown apart as the box being on,
//! never spread over services. Without a sweep there are CPU-hours only, and the words that
//! watts need `wattson sweep`. Every figure here is an estimate, with its interval: the idle
//! floor's 95 % interval, shared the same way.
//!
//! Units: W, Wh, hours, the tariff's currency; a `ci95` is a 95 % half-width.

use std::collections::BTreeMap;

use serde::Serialize;

use super::ServicesError;
use super::account::GroupKey;
use super::store::{self as services_store, GroupSums, HostSums, Latest};
use crate::ledger::estimated_cost::{EstimatedCost, project};
use crate::store::Store;
use crate::tariff::Tariff;

/// What `wattson services` says without a sweep.
pub const NEEDS_SWEEP: &str = "watts need `wattson sweep`: without this host's idle floor and \
                               watts per busy CPU, only CPU time is known";

/// The sweep fit the estimates rest on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FitBasis {
    /// The sweep configuration and when its run started (UTC ms).
    pub configuration: String,
    pub swept_ms: i64,
    /// The loop kind whose fit gives the idle floor (`spin`, `memory`, `pause`).
    pub kind: String,
    pub idle_watts: f64,
    pub idle_ci95: Option<f64>,
    /// W per busy CPU (one loop) of that kind.
    pub watts_per_cpu: f64,
    pub watts_per_cpu_ci95: Option<f64>,
    /// The other kinds the sweep ran, with their W per busy CPU.
    pub other_kinds: Vec<(String, f64)>,
}

/// One group's figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupFigure {
    /// `service`, `session`, `container`, `machine`, `other`, `rest`, `self`.
    pub kind: String,
    pub name: String,
    /// In words: `jellyfin.service`, `other groups`, `the rest (kernel, init, ended groups)`.
    pub label: String,
    pub cpu_hours: f64,
    /// Share of the host's busy CPU time over the window, 0..1.
    pub cpu_share: f64,
    /// Mean CPUs busy over the window.
    pub cpus: f64,
    /// In the newest interval: CPUs busy, and the estimated watts with their interval.
    pub cpus_now: Option<f64>,
    pub watts_now: Option<f64>,
    pub watts_now_ci95: Option<f64>,
    /// Over the window, projected (`None` without a sweep or without wall readings).
    pub cost: Option<EstimatedCost>,
}

/// The host's newest interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NowFigure {
    pub ts_ms: i64,
    pub busy_cpus: f64,
    pub wall_watts: Option<f64>,
    /// Wall above the idle floor, W.
    pub dynamic_watts: Option<f64>,
}

/// What each service costs on one host over a window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServicesEstimate {
    pub host: String,
    pub currency: String,
    /// Always true: none of these figures is measured.
    pub estimate: bool,
    /// What the figures rest on, in words.
    pub basis: String,
    pub fit: Option<FitBasis>,
    pub from_ms: i64,
    pub to_ms: i64,
    /// Hours the collector covered, and of those the hours with a wall reading.
    pub covered_hours: f64,
    pub metered_hours: f64,
    pub busy_cpu_hours: f64,
    pub now: Option<NowFigure>,
    /// The box being on: the idle floor, priced over the metered hours.
    pub idle_floor: Option<EstimatedCost>,
    /// The wall above the idle floor: the sum of the groups' figures.
    pub dynamic: Option<EstimatedCost>,
    /// Most costly first; `other` and `rest` last.
    pub groups: Vec<GroupFigure>,
    /// Wattson's own process, shown apart (its time is inside one of the groups).
    pub wattson: Option<GroupFigure>,
    pub warnings: Vec<String>,
}

impl ServicesEstimate {
    /// Whether any CPU time was recorded.
    pub fn is_empty(&self) -> bool {
        self.covered_hours <= 0.0
    }
}

/// The newest sweep fit measured on `host`, if any.
pub fn host_fit(store: &Store, host: &str) -> Result<Option<FitBasis>, ServicesError> {
    for s in crate::sweep::persist::list(store)? {
        if s.host.as_deref() != Some(host) {
            continue;
        }
        let Some(fits) = s.fit.as_ref().and_then(|f| f.as_array()) else {
            continue;
        };
        let parse = |f: &serde_json::Value| {
            let l = &f["loops"];
            Some((
                f["kind"].as_str().unwrap_or("spin").to_owned(),
                l["intercept"].as_f64().filter(|x| x.is_finite())?,
                l["intercept_ci95"].as_f64(),
                l["slope"].as_f64().filter(|x| x.is_finite())?,
                l["slope_ci95"].as_f64(),
            ))
        };
        let mut parsed = fits.iter().filter_map(parse);
        let Some((kind, idle, idle_ci, slope, slope_ci)) = parsed.next() else {
            continue;
        };
        return Ok(Some(FitBasis {
            configuration: s.name.clone(),
            swept_ms: s.started_ms,
            kind,
            idle_watts: idle,
            idle_ci95: idle_ci,
            watts_per_cpu: slope,
            watts_per_cpu_ci95: slope_ci,
            other_kinds: parsed.map(|(k, _, _, s, _)| (k, s)).collect(),
        }));
    }
    Ok(None)
}

/// The estimate for `host` over the hours starting in `[from_ms, to_ms)`.
pub fn estimate(
    store: &Store,
    host: &str,
    tariff: &Tariff,
    from_ms: i64,
    to_ms: i64,
) -> Result<ServicesEstimate, ServicesError> {
    let fit = host_fit(store, host)?;
    let (sums, groups) = services_store::window(store, host, from_ms, to_ms)?;
    let latest = services_store::latest(store, host)?;
    compute(
        host,
        tariff,
        fit,
        &sums,
        &groups,
        latest.as_ref(),
        from_ms,
        to_ms,
    )
}

fn label(key: &GroupKey) -> String {
    match key.kind.as_str() {
        "other" => "other groups (beyond the top)".to_owned(),
        "rest" => "the rest (kernel, init, groups that ended)".to_owned(),
        "self" => "wattson itself".to_owned(),
        _ => key.name.clone(),
    }
}

#[allow(clippy::too_many_arguments)]
pub(super) fn compute(
    host: &str,
    tariff: &Tariff,
    fit: Option<FitBasis>,
    sums: &HostSums,
    groups: &BTreeMap<GroupKey, GroupSums>,
    latest: Option<&Latest>,
    from_ms: i64,
    to_ms: i64,
) -> Result<ServicesEstimate, ServicesError> {
    let metered_hours = sums.metered_s / 3600.0;
    let covered_hours = sums.elapsed_s / 3600.0;
    let mut warnings = Vec::new();
    let shares = Shares {
        tariff,
        floor: fit.as_ref().map(|f| (f.idle_watts, f.idle_ci95)),
        sums,
        latest,
    };
    let (idle_floor, dynamic) = shares.floor_and_dynamic()?;
    let mut figures = Vec::new();
    let mut wattson = None;
    for (key, g) in groups {
        let f = shares.figure(key, g)?;
        if key.kind == "self" {
            wattson = Some(f);
        } else {
            figures.push(f);
        }
    }
    let tail = |f: &GroupFigure| matches!(f.kind.as_str(), "other" | "rest");
    figures.sort_by(|a, b| {
        tail(a)
            .cmp(&tail(b))
            .then(b.cpu_hours.total_cmp(&a.cpu_hours))
            .then(a.kind.cmp(&b.kind))
    });
    let basis = basis(fit.as_ref(), sums, covered_hours, &mut warnings);
    if let (Some(f), true) = (&fit, sums.metered_s > 0.0) {
        warnings.extend(model_disagrees(f, sums));
    }
    let now = latest.map(|l| NowFigure {
        ts_ms: l.ts_ms,
        busy_cpus: l.busy_cpu_s / l.elapsed_s,
        wall_watts: l.wall_w,
        dynamic_watts: shares
            .floor
            .zip(l.wall_w)
            .map(|((p0, _), w)| (w - p0).max(0.0)),
    });
    Ok(ServicesEstimate {
        host: host.to_owned(),
        currency: tariff.currency().to_owned(),
        estimate: true,
        basis,
        fit,
        from_ms,
        to_ms,
        covered_hours,
        metered_hours,
        busy_cpu_hours: sums.busy_cpu_s / 3600.0,
        now,
        idle_floor,
        dynamic,
        groups: figures,
        wattson,
        warnings,
    })
}

/// How the wall's power is shared: the part above the idle floor (`floor`: the sweep's idle
/// watts and their 95 % half-width), hour by hour, by each group's CPU time.
struct Shares<'a> {
    tariff: &'a Tariff,
    floor: Option<(f64, Option<f64>)>,
    sums: &'a HostSums,
    latest: Option<&'a Latest>,
}

impl Shares<'_> {
    /// Energy per hour priced and projected over the metered hours.
    fn priced(
        &self,
        hours: &[(i64, f64, f64)],
        ci_wh: Option<f64>,
    ) -> Result<Option<EstimatedCost>, ServicesError> {
        Ok(project(self.tariff, hours, ci_wh)?)
    }

    /// The idle floor's cost and the cost of the wall above it; none without a floor or
    /// wall readings.
    fn floor_and_dynamic(
        &self,
    ) -> Result<(Option<EstimatedCost>, Option<EstimatedCost>), ServicesError> {
        let sums = self.sums;
        Ok(match self.floor {
            Some((p0, ci)) if sums.metered_s > 0.0 => {
                let idle: Vec<(i64, f64, f64)> = sums
                    .hours
                    .iter()
                    .map(|&(h, s, _)| (h, p0 * s / 3600.0, metered_ms(s)))
                    .collect();
                let metered_hours = sums.metered_s / 3600.0;
                let ci_wh = ci.map(|c| c * metered_hours);
                (
                    self.priced(&idle, ci_wh)?,
                    self.priced(&dynamic_hours(p0, &sums.hours, &sums.hours), ci_wh)?,
                )
            }
            _ => (None, None),
        })
    }

    /// One group's CPU time, its share of the wall above the floor and that share's cost,
    /// and its CPUs and watts now.
    fn figure(&self, key: &GroupKey, g: &GroupSums) -> Result<GroupFigure, ServicesError> {
        let sums = self.sums;
        let busy = sums.busy_cpu_s.max(f64::MIN_POSITIVE);
        let cost = match self.floor {
            Some((p0, ci)) if sums.metered_s > 0.0 => self.priced(
                &dynamic_hours(p0, &g.hours, &sums.hours),
                ci.map(|c| c * g.metered_share_s / 3600.0),
            )?,
            _ => None,
        };
        let now = self.latest.map(|l| {
            let cpu = l
                .groups
                .iter()
                .find(|(k, _)| k == key)
                .map_or(0.0, |(_, c)| *c);
            let share = if l.busy_cpu_s > 0.0 {
                (cpu / l.busy_cpu_s).clamp(0.0, 1.0)
            } else {
                0.0
            };
            let watts = match (self.floor, l.wall_w) {
                (Some((p0, ci)), Some(w)) => {
                    Some((share * (w - p0).max(0.0), ci.map(|c| share * c)))
                }
                _ => None,
            };
            (cpu / l.elapsed_s, watts)
        });
        Ok(GroupFigure {
            kind: key.kind.clone(),
            name: key.name.clone(),
            label: label(key),
            cpu_hours: g.cpu_s / 3600.0,
            cpu_share: (g.cpu_s / busy).clamp(0.0, 1.0),
            cpus: if sums.elapsed_s > 0.0 {
                g.cpu_s / sums.elapsed_s
            } else {
                0.0
            },
            cpus_now: now.map(|(c, _)| c),
            watts_now: now.and_then(|(_, w)| w).map(|(w, _)| w),
            watts_now_ci95: now.and_then(|(_, w)| w).and_then(|(_, ci)| ci),
            cost,
        })
    }
}

/// The wall above the floor `p0`, hour by hour (energy, Wh), from rows of (hour, metered
/// seconds, watt-seconds): in every hour of the host's (`host`, its rows) with the host's
/// metered time in it, the time its energy is spread over. A group's rows hold its share of
/// that time, and it has none for an hour it did not run in: that hour's energy is 0, not
/// unknown.
fn dynamic_hours(
    p0: f64,
    rows: &[(i64, f64, f64)],
    host: &[(i64, f64, f64)],
) -> Vec<(i64, f64, f64)> {
    host.iter()
        .map(|&(h, metered, _)| {
            let wh = rows
                .iter()
                .find(|r| r.0 == h)
                .map_or(0.0, |&(_, s, ws)| ((ws - p0 * s) / 3600.0).max(0.0));
            (h, wh, metered_ms(metered))
        })
        .collect()
}

/// Metered seconds as ms.
fn metered_ms(s: f64) -> f64 {
    s * 1000.0
}

/// What the estimate rests on, in words; what weakens it added to `warnings`: no sweep, no
/// wall readings, loop kinds that cost differently.
fn basis(
    fit: Option<&FitBasis>,
    sums: &HostSums,
    covered_hours: f64,
    warnings: &mut Vec<String>,
) -> String {
    match fit {
        None => {
            warnings.push(NEEDS_SWEEP.to_owned());
            "CPU time only".to_owned()
        }
        Some(f) => {
            if sums.metered_s <= 0.0 && covered_hours > 0.0 {
                warnings.push(
                    "no wall readings while CPU time was recorded: watts need a wall meter \
                     ([[meter]] or [[plug]])"
                        .to_owned(),
                );
            }
            if let Some((k, s)) = f
                .other_kinds
                .iter()
                .find(|(_, s)| (s - f.watts_per_cpu).abs() > 0.1 * f.watts_per_cpu.abs())
            {
                warnings.push(format!(
                    "the sweep's loop kinds cost differently ({} {:.1} W per busy CPU, {k} {s:.1} W): \
                     power is shared by CPU time alone, as if every busy CPU-second cost the same; \
                     the idle floor is from the {} loops",
                    f.kind, f.watts_per_cpu, f.kind
                ));
            }
            format!(
                "the wall above the idle floor of sweep {:?} ({:.1} W{}, {} loops), shared by busy CPU time",
                f.configuration,
                f.idle_watts,
                f.idle_ci95
                    .map_or_else(String::new, |c| format!(" +/- {c:.1} W")),
                f.kind
            )
        }
    }
}

/// The model's view of the same CPU load, where it is far from the wall's: something other
/// than CPUs (disks, a GPU) draws, and its power is shared by CPU time too.
fn model_disagrees(f: &FitBasis, sums: &HostSums) -> Option<String> {
    let model = sums.busy_cpu_s / sums.elapsed_s.max(f64::MIN_POSITIVE) * f.watts_per_cpu;
    let measured = (sums.wall_ws / sums.metered_s - f.idle_watts).max(0.0);
    ((measured - model).abs() > 2.0 + 0.25 * model).then(|| {
        format!(
            "the wall's power above the idle floor ({measured:.1} W) is not what the sweep's \
             {:.1} W per busy CPU gives for this CPU load ({model:.1} W): something besides \
             the CPUs (disks, a GPU, fans) draws, and it is shared by CPU time too",
            f.watts_per_cpu
        )
    })
}
