//! One level of a sweep: the idle guard, the loops started, the meter read until the
//! level's interval is narrow enough or its time cap, and what was measured.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use wattson_collectors::Sample;

use super::{
    CpuAcc, Instruments, LoopSlot, Progress, SweepPlan, mean, now_ms, sleep_until, stop_loops,
};
use crate::analysis::stats;
use crate::sweep::SweepError;
use crate::sweep::outcome::LevelResult;
use crate::sweep::stopping::{self, Look};
use crate::sweep::workload::{LoopSet, Workload};

/// One meter reading of a level, with what was read beside it.
struct Reading {
    /// Seconds since the level's loops started.
    at_s: f64,
    /// The loops' operations so far.
    ops: u64,
    /// CPU and component samples taken with it.
    beside: Vec<Sample>,
}

/// Progress after a look: settling until the interval exists, then measuring from the cut.
fn report_look(l: &Look, xs: &[f64], readings: &[Reading], progress: &mut dyn FnMut(Progress)) {
    let last = readings.last().map_or(0.0, |r| r.at_s);
    match l.ci {
        Some(c) => progress(Progress::Measuring {
            elapsed_s: last - readings.get(l.cut).map_or(last, |r| r.at_s),
            mean_w: c.mean,
            ci95_w: Some(c.ci95),
            n: xs.len() - l.cut,
        }),
        None => progress(Progress::Settling {
            elapsed_s: last,
            last_w: xs.last().copied().unwrap_or_default(),
        }),
    }
}

/// One level; `None` when interrupted.
pub(super) fn run_level(
    plan: &SweepPlan,
    inst: &mut Instruments<'_>,
    workload: &Workload,
    loops: usize,
    stop: &AtomicBool,
    slot: &LoopSlot,
    progress: &mut dyn FnMut(Progress),
) -> Result<Option<LevelResult>, SweepError> {
    let level_start = Instant::now();
    let deadline = level_start + plan.max_level;
    let mut warnings = Vec::new();
    let mut guard_acc = CpuAcc::default();
    if loops == 0 {
        idle_guard(plan, inst, stop, progress, &mut warnings, &mut guard_acc);
    }
    let pinned = start_loops(plan, workload, loops, slot, &mut warnings)?;
    let started_ms = now_ms();
    let t0 = Instant::now();
    let Some(Phase {
        readings,
        xs,
        look,
        first_error,
    }) = read_phase(plan, inst, t0, deadline, stop, slot, progress)
    else {
        return Ok(None);
    };
    let ops_end = ops(slot);
    let elapsed_s = t0.elapsed().as_secs_f64();
    let stats_done = stop_loops(slot);
    let ended_ms = now_ms();
    let cut = look.map_or(0, |l| l.cut);
    if let Some(l) = look.filter(|l| !l.done) {
        cap_warnings(plan, &l, xs.len(), elapsed_s, &mut warnings);
    }
    // What was measured: the readings from the cut on.
    let measured = &readings[cut.min(readings.len())..];
    let settle_s = measured.first().map_or(elapsed_s, |r| r.at_s);
    let measure_s = (elapsed_s - settle_s).max(0.0);
    let ops0 = measured.first().map_or(ops_end, |r| r.ops);
    let mut acc = guard_acc;
    for r in measured {
        acc.add(&r.beside);
    }
    let xs = &xs[cut.min(xs.len())..];
    if xs.len() < 2 {
        return Err(SweepError::TooFewReadings {
            readings: xs.len(),
            measure_s,
            loops,
            why: first_error.map_or_else(
                || ": check it is connected and answering".to_owned(),
                |e| format!(" (first failure: {e})"),
            ),
        });
    }
    let summary = stats::Summary::of(xs)?;
    let ci = match look.and_then(|l| l.ci) {
        Some(c) => c,
        None => stats::batch_means_ci_up_to(xs, stopping::MAX_BATCHES)?,
    };
    let ops_per_s = if measure_s > 0.0 {
        ops_end.saturating_sub(ops0) as f64 / measure_s
    } else {
        0.0
    };
    if let Some(s) = &stats_done
        && !s.pinned
        && loops > 0
    {
        warnings
            .push("loops could not be pinned to CPUs (restricted cpuset?): ran unpinned".into());
    }
    let busy = mean(&acc.busy);
    let busy_cpus = busy.map(|b| b * inst.online_cpus as f64);
    // On the level's line and in its record, once (not logged as well).
    warnings.extend(other_load(busy_cpus, loops, &warnings));
    Ok(Some(LevelResult {
        kind: workload.kind(),
        loops,
        started_ms,
        ended_ms,
        settle_s,
        n: xs.len(),
        mean_w: ci.mean,
        sd_w: summary.sd,
        ci95_w: ci.ci95,
        ci_method: format!("{:?}", ci.method),
        min_w: summary.min,
        max_w: summary.max,
        mean_mhz: mean(&acc.mhz),
        busy,
        busy_cpus,
        residency: acc
            .residency
            .iter()
            .filter_map(|(k, v)| Some((k.clone(), mean(v)?)))
            .collect(),
        ops_per_s,
        joules_per_op: (ops_per_s > 0.0).then(|| ci.mean / ops_per_s),
        components: acc
            .components
            .iter()
            .filter_map(|(k, v)| Some((k.clone(), mean(v)?)))
            .collect(),
        component_ranges: acc
            .components
            .iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| {
                let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
                let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                (k.clone(), (lo, hi))
            })
            .collect(),
        pinned: pinned || loops == 0,
        smt_siblings: loops > plan.physical_cores,
        warnings,
    }))
}

/// Busy CPUs beyond a level's loops, over its measuring, that say other work ran beside it.
const OTHER_LOAD_CPUS: f64 = 0.5;

/// The warning for a level whose CPUs were busier than its loops explain by more than
/// [`OTHER_LOAD_CPUS`] over its measuring, unless the idle guard already said so: it names
/// "other load", which the fit reads.
fn other_load(busy_cpus: Option<f64>, loops: usize, warnings: &[String]) -> Option<String> {
    let busy = busy_cpus?;
    let extra = busy - loops as f64;
    (extra > OTHER_LOAD_CPUS && !warnings.iter().any(|w| w.contains("other load"))).then(|| {
        format!(
            "other load while measuring ({busy:.2} CPUs busy where its {loops} loops explain \
             {loops}): the level may read high"
        )
    })
}

/// Starts `loops` loops of `workload` on the plan's CPUs (in turn, two to a CPU where there
/// are more loops than CPUs), held in `slot`. Returns whether they were pinned.
fn start_loops(
    plan: &SweepPlan,
    workload: &Workload,
    loops: usize,
    slot: &LoopSlot,
    warnings: &mut Vec<String>,
) -> Result<bool, SweepError> {
    let cpus: Vec<usize> = plan.cpu_order.iter().copied().cycle().take(loops).collect();
    if loops > plan.cpu_order.len() {
        warnings.push(format!(
            "{loops} loops on {} CPUs: some CPUs run two loops",
            plan.cpu_order.len()
        ));
    }
    let set = LoopSet::start_workload(workload, &cpus)?;
    let pinned = set.pinned();
    if let Ok(mut s) = slot.lock() {
        *s = Some(set);
    }
    Ok(pinned)
}

/// The operations the loops in `slot` have done so far.
fn ops(slot: &LoopSlot) -> u64 {
    slot.lock()
        .ok()
        .and_then(|s| s.as_ref().map(LoopSet::ops))
        .unwrap_or(0)
}

/// What a level's phase read: the readings and their watts, the last look at them, and the
/// meter's first failure.
struct Phase {
    readings: Vec<Reading>,
    xs: Vec<f64>,
    look: Option<Look>,
    first_error: Option<String>,
}

/// One phase from the loops' start (`t0`): read, and after each reading look at them all:
/// the warm-up cut drops the first readings while the power still moves (settling), the
/// interval of the rest decides when the level has measured enough (see `stopping`), else
/// `deadline` ends it. `None` when interrupted (the loops are stopped).
fn read_phase(
    plan: &SweepPlan,
    inst: &mut Instruments<'_>,
    t0: Instant,
    deadline: Instant,
    stop: &AtomicBool,
    slot: &LoopSlot,
    progress: &mut dyn FnMut(Progress),
) -> Option<Phase> {
    let mut readings: Vec<Reading> = Vec::new();
    let mut xs: Vec<f64> = Vec::new();
    let mut look: Option<Look> = None;
    let mut next = Instant::now();
    // The first failure of the meter says most (later ones may only be "reopening").
    let mut first_error: Option<String> = None;
    loop {
        if stop.load(Ordering::SeqCst) {
            stop_loops(slot);
            return None;
        }
        match inst.poll() {
            Ok((Some(w), beside)) => {
                xs.push(w);
                readings.push(Reading {
                    at_s: t0.elapsed().as_secs_f64(),
                    ops: ops(slot),
                    beside,
                });
                let l = stopping::look(&xs, plan.min_samples, |m| plan.ci_target(m));
                report_look(&l, &xs, &readings, progress);
                look = Some(l);
            }
            Ok((None, _)) => {}
            Err(e) => {
                let text = wattson_collectors::ErrorChain(&e).to_string();
                tracing::debug!("meter: {text}");
                first_error.get_or_insert(text);
            }
        }
        if look.is_some_and(|l| l.done) {
            break;
        }
        next += plan.interval;
        // The cap covers the whole level: no reading is started past the deadline.
        if next >= deadline {
            break;
        }
        sleep_until(next, stop);
    }
    Some(Phase {
        readings,
        xs,
        look,
        first_error,
    })
}

/// The warnings of a level the time cap stopped (`l`, its last look at `readings`
/// readings over `elapsed_s`): still settling, or short of its target.
fn cap_warnings(
    plan: &SweepPlan,
    l: &Look,
    readings: usize,
    elapsed_s: f64,
    warnings: &mut Vec<String>,
) {
    if !l.settled {
        warnings.push(format!(
            "power was still changing after {elapsed_s:.1} s; measured anyway (the last {} of {} readings)",
            readings - l.cut,
            readings
        ));
    }
    // A level the cap stopped that met its target anyway (too few batches to stop
    // earlier by the rule) is measured as asked: no warning.
    if let Some(c) = l.ci.filter(|c| c.ci95 > plan.ci_target(c.mean)) {
        warnings.push(format!(
            "time cap of {:.1} s per level (settling included) reached at +/- {:.2} W (target {:.2} W)",
            plan.max_level.as_secs_f64(),
            c.ci95,
            plan.ci_target(c.mean)
        ));
    }
}

/// Wait for other load to go away before measuring idle; warn and record it if it stays.
fn idle_guard(
    plan: &SweepPlan,
    inst: &mut Instruments<'_>,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(Progress),
    warnings: &mut Vec<String>,
    acc: &mut CpuAcc,
) {
    let t0 = Instant::now();
    // Prime the CPU deltas.
    let _ = inst.busy_cpus(acc);
    let mut next = Instant::now();
    let mut worst = 0.0f64;
    // Part of the level's time cap: leave settling and measuring at least two thirds of it.
    let wait = plan.idle_guard_wait.min(plan.max_level / 3);
    loop {
        next += plan.interval;
        sleep_until(next, stop);
        let Some(busy) = inst.busy_cpus(acc) else {
            return;
        };
        if busy <= plan.idle_guard_busy_cpus || stop.load(Ordering::SeqCst) {
            return;
        }
        worst = worst.max(busy);
        progress(Progress::Waiting(format!(
            "waiting for other load to settle ({busy:.2} CPUs busy)"
        )));
        if t0.elapsed() >= wait {
            let w = format!(
                "other load present before idle ({worst:.2} CPUs busy after waiting {:.0} s): idle may read high",
                wait.as_secs_f64()
            );
            tracing::warn!("{w}");
            warnings.push(w);
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Seen: idle measured at 31.5 % busy with no warning. A level whose CPUs were busier
    /// than its loops by more than half a CPU says so, once.
    #[test]
    fn a_level_busier_than_its_loops_names_the_other_load() {
        let w = other_load(Some(1.26), 0, &[]).unwrap();
        assert_eq!(
            w,
            "other load while measuring (1.26 CPUs busy where its 0 loops explain 0): the \
             level may read high"
        );
        assert_eq!(other_load(Some(2.3), 2, &[]), None);
        assert_eq!(other_load(None, 0, &[]), None);
        let guarded = ["other load present before idle (1.20 CPUs busy after waiting 30 s)".into()];
        assert_eq!(other_load(Some(1.26), 0, &guarded), None);
    }
}
