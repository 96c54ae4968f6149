//! A configuration wattson swept, on this host or on another, as a candidate: "what would
//! that box (or this box as it was set up then) cost on this machine's load".
//!
//! The curve is the sweep's levels of one loop kind, measured at the wall: active idle at
//! 0 % and `k` busy loops of `N` logical CPUs at `k / N` of the machine's maximum
//! throughput, which is how this machine's own load is expressed (busy CPUs / CPUs). A
//! sweep that did not reach every CPU gives no 100 % point and is refused: the curve is
//! never extrapolated.
//!
//! Its throughput over this machine's is measured where both machines were swept with the
//! same loop kind: the loops' rate with every CPU busy, the candidate's over this
//! machine's. Loops exercise the CPU (and for `memory`, its memory), so the ratio holds
//! for this machine's work as far as that work is of the same kind, and the report says so.
//!
//! Units: W, loop operations per second, load as a share of maximum throughput.

use super::{BadInput, Candidate};
use crate::analysis::candidate::{Curve, CurveKind, CurvePoint};
use crate::sweep::fingerprint::Fingerprint;
use crate::sweep::persist::{StoredLevel, StoredSweep};

/// The loop kind a measured curve is taken from when none is asked for: compute-bound
/// loops are what a CPU's power curve is usually drawn for.
const PREFERRED_KIND: &str = "spin";

/// The candidate `name` made of configuration `sweep`'s levels of `kind` (or of the
/// preferred kind it has), with `origin` naming where the sweep was read. Returns the
/// candidate and the loop kind used.
pub fn candidate(
    name: &str,
    sweep: &StoredSweep,
    kind: Option<&str>,
    source: &str,
) -> Result<(Candidate, String), BadInput> {
    let kind = pick_kind(sweep, kind)?;
    let fp = fingerprint(sweep)?;
    let cpus = fp.cpu.logical_cpus as i64;
    if sweep.status != "complete" {
        return Err(BadInput(format!(
            "configuration {:?}'s newest sweep is {}: sweep it again to the end \
             (`wattson sweep --name {:?}`)",
            sweep.name, sweep.status, sweep.name
        )));
    }
    let levels = levels_of(sweep, &kind);
    let top = levels.iter().map(|l| l.loops).max().unwrap_or(0);
    if top != cpus {
        return Err(BadInput(format!(
            "configuration {:?} was swept with {kind} loops up to {top} of its {cpus} CPUs: a \
             candidate's curve needs every CPU busy (100 %), and is never extrapolated; sweep \
             it with the default levels (0 .. {cpus})",
            sweep.name
        )));
    }
    let idle = levels
        .iter()
        .find(|l| l.loops == 0)
        .copied()
        .or_else(|| sweep.levels.iter().find(|l| l.loops == 0))
        .ok_or_else(|| {
            BadInput(format!(
                "configuration {:?}'s sweep has no idle level (0 loops): a curve starts at \
                 active idle",
                sweep.name
            ))
        })?;
    let mut points = vec![point(0.0, idle)];
    points.extend(
        levels
            .iter()
            .filter(|l| l.loops > 0)
            .map(|l| point(l.loops as f64 / cpus as f64, l)),
    );
    let curve = Curve::new(points, CurveKind::Measured)
        .map_err(|e| BadInput(format!("configuration {:?}'s sweep: {e}", sweep.name)))?;
    let host = sweep.host.as_deref().unwrap_or("an unnamed host");
    let date = chrono::DateTime::from_timestamp_millis(sweep.started_ms)
        .map_or_else(String::new, |t| t.format(" on %Y-%m-%d").to_string());
    let origin = format!(
        "sweep of {:?} ({kind} loops) on {host}{date}, {source}",
        sweep.name
    );
    let mut c = Candidate::new(name.to_owned(), curve, origin);
    c.system = Some(host.to_owned());
    c.cpu = fp.cpu.model_name;
    c.cores = u32::try_from(fp.cpu.physical_cores).ok().filter(|n| *n > 0);
    c.threads = u32::try_from(cpus).ok();
    c.memory_gb = fp
        .memory_bytes
        .map(|b| (b as f64 / f64::from(1u32 << 30) * 10.0).round() / 10.0)
        .filter(|g| *g > 0.0);
    Ok((c, kind))
}

/// The candidate's throughput over this machine's from the two sweeps' `kind` loop rates
/// with every CPU busy, and the sentence that says so; `None` when either lacks the rate.
pub fn loop_rate_ratio(
    candidate: &StoredSweep,
    this: &StoredSweep,
    kind: &str,
) -> Option<(f64, String)> {
    let full_rate = |s: &StoredSweep| {
        let cpus = fingerprint(s).ok()?.cpu.logical_cpus as i64;
        levels_of(s, kind)
            .into_iter()
            .find(|l| l.loops == cpus)
            .and_then(|l| l.ops_per_s)
            .filter(|r| r.is_finite() && *r > 0.0)
    };
    let (theirs, ours) = (full_rate(candidate)?, full_rate(this)?);
    let ratio = theirs / ours;
    Some((
        ratio,
        format!(
            "{kind} loops at 100 %: {theirs:.4e} operations/s in the sweep of {:?} over \
             {ours:.4e} in this machine's sweep of {:?}",
            candidate.name, this.name
        ),
    ))
}

/// Whether `sweep` has a complete `kind` level with every CPU busy and its loop rate.
pub fn has_full_rate(sweep: &StoredSweep, kind: &str) -> bool {
    sweep.status == "complete"
        && fingerprint(sweep).is_ok_and(|fp| {
            levels_of(sweep, kind).iter().any(|l| {
                l.loops == fp.cpu.logical_cpus as i64 && l.ops_per_s.is_some_and(|r| r > 0.0)
            })
        })
}

fn point(load: f64, l: &StoredLevel) -> CurvePoint {
    CurvePoint {
        load,
        watts: l.mean_w,
        ssj_ops: None,
    }
}

fn levels_of<'a>(sweep: &'a StoredSweep, kind: &str) -> Vec<&'a StoredLevel> {
    let mut v: Vec<&StoredLevel> = sweep.levels.iter().filter(|l| l.kind == kind).collect();
    v.sort_by_key(|l| l.loops);
    v
}

fn pick_kind(sweep: &StoredSweep, asked: Option<&str>) -> Result<String, BadInput> {
    let mut kinds: Vec<&str> = sweep.levels.iter().map(|l| l.kind.as_str()).collect();
    kinds.sort_unstable();
    kinds.dedup();
    match asked {
        Some(k) if kinds.contains(&k) => Ok(k.to_owned()),
        Some(k) => Err(BadInput(format!(
            "configuration {:?} was not swept with {k} loops (it has: {})",
            sweep.name,
            kinds.join(", ")
        ))),
        None if kinds.contains(&PREFERRED_KIND) => Ok(PREFERRED_KIND.to_owned()),
        None => kinds.first().map(|k| (*k).to_owned()).ok_or_else(|| {
            BadInput(format!(
                "configuration {:?}'s sweep holds no level",
                sweep.name
            ))
        }),
    }
}

/// What the sweep's machine was, with at least one logical CPU.
fn fingerprint(sweep: &StoredSweep) -> Result<Fingerprint, BadInput> {
    sweep
        .fingerprint
        .clone()
        .and_then(|f| serde_json::from_value::<Fingerprint>(f).ok())
        .filter(|f| f.cpu.logical_cpus > 0)
        .ok_or_else(|| {
            BadInput(format!(
                "configuration {:?}'s fingerprint does not say how many CPUs it has, so its \
                 levels cannot be shares of its maximum",
                sweep.name
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn level(kind: &str, loops: i64, watts: f64, ops: f64) -> StoredLevel {
        StoredLevel {
            kind: kind.to_owned(),
            loops,
            n: 60,
            mean_w: watts,
            sd_w: None,
            ci95_w: None,
            min_w: None,
            max_w: None,
            mean_mhz: None,
            busy: None,
            residency: None,
            ops_per_s: Some(ops),
            joules_per_op: None,
            warnings: None,
        }
    }

    fn sweep(name: &str, cpus: i64, levels: Vec<StoredLevel>) -> StoredSweep {
        StoredSweep {
            name: name.to_owned(),
            host: Some("nas".to_owned()),
            fingerprint: serde_json::to_value(Fingerprint {
                host: "nas".to_owned(),
                cpu: wattson_collectors::cpu::topology::CpuFacts {
                    model_name: Some("Example CPU".to_owned()),
                    logical_cpus: cpus as usize,
                    physical_cores: cpus as usize / 2,
                    ..Default::default()
                },
                memory_bytes: Some(17_179_869_184),
                kernel: None,
                meter: "pzem".to_owned(),
            })
            .ok(),
            run_id: 1,
            started_ms: 1_764_547_200_000,
            ended_ms: Some(1_764_547_300_000),
            status: "complete".to_owned(),
            kinds: "spin".to_owned(),
            meter: "pzem".to_owned(),
            settings: None,
            fit: None,
            levels,
            set_aside: Vec::new(),
        }
    }

    #[test]
    fn a_sweeps_levels_are_the_curve_at_busy_cpus_over_cpus() {
        let s = sweep(
            "nas",
            4,
            (0..=4)
                .map(|k| level("spin", k, 20.0 + 10.0 * k as f64, 1e6 * k as f64))
                .collect(),
        );
        let (c, kind) = candidate("old nas", &s, None, "nas.db").unwrap();
        assert_eq!(kind, "spin");
        let pts: Vec<(f64, f64)> = c.curve.points().iter().map(|p| (p.load, p.watts)).collect();
        assert_eq!(
            pts,
            vec![
                (0.0, 20.0),
                (0.25, 30.0),
                (0.5, 40.0),
                (0.75, 50.0),
                (1.0, 60.0)
            ]
        );
        assert_eq!(c.curve.kind(), CurveKind::Measured);
        assert_eq!(
            (c.threads, c.cores, c.memory_gb),
            (Some(4), Some(2), Some(16.0))
        );
        assert!(
            c.origin.contains("\"nas\"") && c.origin.contains("2025-12-01"),
            "{}",
            c.origin
        );
    }

    #[test]
    fn a_sweep_short_of_every_cpu_or_of_another_kind_is_refused() {
        let half = sweep(
            "half",
            4,
            (0..=2).map(|k| level("spin", k, 20.0, 1.0)).collect(),
        );
        let e = candidate("x", &half, None, "f").unwrap_err().0;
        assert!(
            e.contains("up to 2 of its 4 CPUs") && e.contains("never extrapolated"),
            "{e}"
        );
        let e = candidate("x", &half, Some("memory"), "f").unwrap_err().0;
        assert!(
            e.contains("not swept with memory loops (it has: spin)"),
            "{e}"
        );
        let mut partial = half.clone();
        partial.status = "partial".to_owned();
        let e = candidate("x", &partial, None, "f").unwrap_err().0;
        assert!(e.contains("newest sweep is partial"), "{e}");
    }

    #[test]
    fn the_loop_rate_ratio_is_theirs_over_ours_with_every_cpu_busy() {
        let theirs = sweep(
            "new",
            8,
            vec![level("spin", 0, 30.0, 0.0), level("spin", 8, 90.0, 8e6)],
        );
        let ours = sweep(
            "old",
            2,
            vec![level("spin", 0, 40.0, 0.0), level("spin", 2, 70.0, 2.5e6)],
        );
        let (r, why) = loop_rate_ratio(&theirs, &ours, "spin").unwrap();
        assert!((r - 3.2).abs() < 1e-12, "{r}");
        assert!(why.contains("\"new\"") && why.contains("\"old\""), "{why}");
        assert!(has_full_rate(&ours, "spin") && !has_full_rate(&ours, "memory"));
        assert!(loop_rate_ratio(&theirs, &ours, "memory").is_none());
    }
}
