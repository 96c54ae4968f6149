//! The measurement loop of a sweep, over any meter and CPU [`Collector`]s: the plan, each
//! level's settling and stopping, the idle guard; what it found and the fits are
//! [`super::outcome`].

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use wattson_collectors::source::channel;

use wattson_collectors::{Collector, Metric, Sample};

use crate::analysis::stats;
use crate::sweep::outcome::{LevelResult, SweepOutcome, fit_kind};
use crate::sweep::stopping::{self, Look};
use crate::sweep::workload::{LoopKind, LoopSet, Workload};

/// What to run and how precisely.
#[derive(Debug, Clone)]
pub struct SweepPlan {
    /// Busy loops per level; 0 is idle.
    pub levels: Vec<usize>,
    pub kinds: Vec<LoopKind>,
    /// CPUs in the order loops take them (physical cores first, then SMT siblings).
    pub cpu_order: Vec<usize>,
    /// Physical cores: levels above this put loops on SMT siblings.
    pub physical_cores: usize,
    /// Stop measuring when the 95 % interval half-width is at most max(abs, rel x mean).
    pub ci_abs_w: f64,
    pub ci_rel: f64,
    /// Readings before the interval is trusted.
    pub min_samples: usize,
    /// Time cap of a whole level, from its start (the idle guard's wait, settling and
    /// measuring together): the DESIGN's 90 s per level.
    pub max_level: Duration,
    /// Busy CPUs above which the idle level waits for other load to go away.
    pub idle_guard_busy_cpus: f64,
    /// How long the idle guard waits before measuring anyway (with a warning).
    pub idle_guard_wait: Duration,
    /// Meter reading interval.
    pub interval: Duration,
    /// Root of sysfs, for the memory loop's cache size.
    pub sysfs: std::path::PathBuf,
}

impl SweepPlan {
    /// The documented defaults for `levels` on this machine.
    pub fn new(
        levels: Vec<usize>,
        kinds: Vec<LoopKind>,
        cpu_order: Vec<usize>,
        physical_cores: usize,
    ) -> SweepPlan {
        SweepPlan {
            levels,
            kinds,
            cpu_order,
            physical_cores,
            ci_abs_w: 0.5,
            ci_rel: 0.01,
            min_samples: 20,
            max_level: Duration::from_secs(90),
            idle_guard_busy_cpus: 0.25,
            idle_guard_wait: Duration::from_secs(30),
            interval: Duration::from_secs(1),
            sysfs: "/sys".into(),
        }
    }

    fn ci_target(&self, mean: f64) -> f64 {
        (self.ci_rel * mean.abs()).max(self.ci_abs_w)
    }
}

/// Progress events for the command's progress bar.
#[derive(Debug, Clone)]
pub enum Progress {
    Level {
        kind: LoopKind,
        loops: usize,
        index: usize,
        total: usize,
    },
    Waiting(String),
    Settling {
        elapsed_s: f64,
        last_w: f64,
    },
    Measuring {
        elapsed_s: f64,
        mean_w: f64,
        ci95_w: Option<f64>,
        n: usize,
    },
    Done(Box<LevelResult>),
}

/// The running loops, reachable from a signal thread so Ctrl-C stops them at once.
pub type LoopSlot = Arc<Mutex<Option<LoopSet>>>;

/// Stop the loops in `slot`, if any (called from the signal handler thread too).
pub fn stop_loops(slot: &LoopSlot) -> Option<crate::sweep::workload::LoopStats> {
    let set = slot.lock().ok()?.take()?;
    Some(set.stop())
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// Sleep until `deadline` in short slices so `stop` is noticed within ~20 ms.
pub(crate) fn sleep_until(deadline: Instant, stop: &AtomicBool) {
    while !stop.load(Ordering::SeqCst) {
        let now = Instant::now();
        if now >= deadline {
            return;
        }
        std::thread::sleep((deadline - now).min(Duration::from_millis(20)));
    }
}

/// The wall watts in a poll's samples (the source's whole-device power).
pub(crate) fn wall_watts(samples: &[Sample]) -> Option<f64> {
    samples
        .iter()
        .find(|s| s.metric == Metric::Power && s.channel.is_empty())
        .map(|s| s.value)
}

/// Per-level CPU accumulators.
#[derive(Default)]
struct CpuAcc {
    mhz: Vec<f64>,
    busy: Vec<f64>,
    residency: BTreeMap<String, Vec<f64>>,
    components: BTreeMap<String, Vec<f64>>,
}

impl CpuAcc {
    fn add(&mut self, samples: &[Sample]) {
        for s in samples {
            match (s.metric, s.channel.as_str()) {
                (Metric::CoreFrequency, c) if c == channel::MEAN => self.mhz.push(s.value),
                (Metric::CpuBusy, c) if c == channel::ALL => self.busy.push(s.value),
                (Metric::IdleResidency, c) if channel::all_part(c).is_some() => {
                    self.residency
                        .entry(channel::all_part(c).unwrap_or_default().to_owned())
                        .or_default()
                        .push(s.value);
                }
                (Metric::Power, c) if !s.source.is_meter() => {
                    self.components
                        .entry(format!("{}/{c}", s.source))
                        .or_default()
                        .push(s.value);
                }
                _ => {}
            }
        }
    }
}

fn mean(xs: &[f64]) -> Option<f64> {
    (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64)
}

/// Everything the engine reads from.
pub struct Instruments<'a> {
    pub meter: &'a mut dyn Collector,
    pub cpu: Option<&'a mut dyn Collector>,
    /// Software power sources polled alongside, for calibration.
    pub components: Vec<&'a mut dyn Collector>,
    pub online_cpus: usize,
}

impl Instruments<'_> {
    /// One reading of the meter, with what the CPU and component sources said at it.
    fn poll(&mut self) -> Result<(Option<f64>, Vec<Sample>), wattson_collectors::CollectError> {
        let ts = now_ms();
        let w = wall_watts(&self.meter.poll(ts)?);
        let mut beside = Vec::new();
        if let Some(cpu) = self.cpu.as_deref_mut()
            && let Ok(s) = cpu.poll(ts)
        {
            beside.extend(s);
        }
        for c in &mut self.components {
            if let Ok(s) = c.poll(ts) {
                beside.extend(s);
            }
        }
        Ok((w, beside))
    }

    /// Busy CPUs right now, from one CPU poll a moment after the previous one.
    fn busy_cpus(&mut self, acc: &mut CpuAcc) -> Option<f64> {
        let cpu = self.cpu.as_deref_mut()?;
        let s = cpu.poll(now_ms()).ok()?;
        acc.add(&s);
        s.iter()
            .find(|x| x.metric == Metric::CpuBusy && x.channel == channel::ALL)
            .map(|x| x.value * self.online_cpus as f64)
    }
}

/// Run `plan`, reporting progress; stops early (a partial result) when `stop` is set.
/// `slot` holds the running loops so a signal handler can stop them directly.
pub fn run_sweep(
    plan: &SweepPlan,
    inst: &mut Instruments<'_>,
    stop: &AtomicBool,
    slot: &LoopSlot,
    progress: &mut dyn FnMut(Progress),
) -> anyhow::Result<SweepOutcome> {
    let started_ms = now_ms();
    let mut results: Vec<LevelResult> = Vec::new();
    let total = plan.levels.len() * plan.kinds.len();
    let mut index = 0;
    let mut complete = true;
    // Idle is the same for every kind: measure it once and reuse it.
    let mut idle_result: Option<LevelResult> = None;
    'kinds: for &kind in &plan.kinds {
        let workload = Workload::prepare(kind, &plan.sysfs)?;
        for &loops in &plan.levels {
            index += 1;
            if stop.load(Ordering::SeqCst) {
                complete = false;
                break 'kinds;
            }
            progress(Progress::Level {
                kind,
                loops,
                index,
                total,
            });
            if loops == 0
                && let Some(idle) = &idle_result
            {
                let mut r = idle.clone();
                r.kind = kind;
                progress(Progress::Done(Box::new(r.clone())));
                results.push(r);
                continue;
            }
            if let Some(r) = run_level(plan, inst, &workload, loops, stop, slot, progress)? {
                if loops == 0 {
                    idle_result = Some(r.clone());
                }
                progress(Progress::Done(Box::new(r.clone())));
                results.push(r);
            } else {
                complete = false;
                break 'kinds;
            }
        }
    }
    let fits = plan
        .kinds
        .iter()
        .filter_map(|&k| fit_kind(k, &results, plan.physical_cores))
        .collect();
    Ok(SweepOutcome {
        levels: results,
        fits,
        complete,
        started_ms,
        ended_ms: now_ms(),
    })
}

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
fn run_level(
    plan: &SweepPlan,
    inst: &mut Instruments<'_>,
    workload: &Workload,
    loops: usize,
    stop: &AtomicBool,
    slot: &LoopSlot,
    progress: &mut dyn FnMut(Progress),
) -> anyhow::Result<Option<LevelResult>> {
    let level_start = Instant::now();
    let deadline = level_start + plan.max_level;
    let mut warnings = Vec::new();
    let mut guard_acc = CpuAcc::default();
    if loops == 0 {
        idle_guard(plan, inst, stop, progress, &mut warnings, &mut guard_acc);
    }
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
    let started_ms = now_ms();
    let t0 = Instant::now();
    let ops = || {
        slot.lock()
            .ok()
            .and_then(|s| s.as_ref().map(LoopSet::ops))
            .unwrap_or(0)
    };

    // One phase from the loops' start: read, and after each reading look at them all: the
    // warm-up cut drops the first readings while the power still moves (settling), the
    // interval of the rest decides when the level has measured enough (see `stopping`).
    let mut readings: Vec<Reading> = Vec::new();
    let mut xs: Vec<f64> = Vec::new();
    let mut look: Option<Look> = None;
    let mut next = Instant::now();
    // The first failure of the meter says most (later ones may only be "reopening").
    let mut first_error: Option<String> = None;
    loop {
        if stop.load(Ordering::SeqCst) {
            stop_loops(slot);
            return Ok(None);
        }
        match inst.poll() {
            Ok((Some(w), beside)) => {
                xs.push(w);
                readings.push(Reading {
                    at_s: t0.elapsed().as_secs_f64(),
                    ops: ops(),
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
    let ops_end = ops();
    let elapsed_s = t0.elapsed().as_secs_f64();
    let stats_done = stop_loops(slot);
    let ended_ms = now_ms();
    let cut = look.map_or(0, |l| l.cut);
    if let Some(l) = look.filter(|l| !l.done) {
        if !l.settled {
            warnings.push(format!(
                "power was still changing after {elapsed_s:.1} s; measured anyway (the last {} of {} readings)",
                xs.len() - l.cut,
                xs.len()
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
        anyhow::bail!(
            "the meter gave {} readings in {measure_s:.0} s at {loops} loops{}",
            xs.len(),
            first_error.map_or_else(
                || ": check it is connected and answering".to_owned(),
                |e| format!(" (first failure: {e})")
            )
        );
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
        busy_cpus: busy.map(|b| b * inst.online_cpus as f64),
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
        pinned: pinned || loops == 0,
        smt_siblings: loops > plan.physical_cores,
        warnings,
    }))
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
    use std::sync::atomic::AtomicUsize;

    use wattson_collectors::CollectError;

    use super::*;
    use wattson_collectors::SourceId;

    static TEST: std::sync::LazyLock<SourceId> =
        std::sync::LazyLock::new(|| SourceId::meter("test"));

    /// A wall meter whose readings climb 3 W per reading, so they never settle and the
    /// interval never closes, counting its polls.
    struct Jittery {
        polls: Arc<AtomicUsize>,
    }

    impl Collector for Jittery {
        fn source(&self) -> &SourceId {
            &TEST
        }

        fn poll(&mut self, now_ms: i64) -> Result<Vec<Sample>, CollectError> {
            let n = self.polls.fetch_add(1, Ordering::Relaxed);
            let w = 50.0 + 3.0 * n as f64 + if n.is_multiple_of(2) { -0.5 } else { 0.5 };
            Ok(vec![Sample::new(
                now_ms,
                TEST.clone(),
                Metric::Power,
                "",
                w,
            )])
        }
    }

    #[test]
    fn the_level_time_cap_includes_settling() {
        // A target no reading can meet, so only the cap ends the level.
        let mut plan = SweepPlan::new(vec![0], vec![LoopKind::Spin], vec![0], 1);
        plan.interval = Duration::from_millis(20);
        plan.max_level = Duration::from_millis(400);
        plan.ci_abs_w = 1e-6;
        plan.ci_rel = 0.0;
        plan.min_samples = 4;
        let polls = Arc::new(AtomicUsize::new(0));
        let mut meter = Jittery {
            polls: polls.clone(),
        };
        let mut inst = Instruments {
            meter: &mut meter,
            cpu: None,
            components: Vec::new(),
            online_cpus: 1,
        };
        let stop = AtomicBool::new(false);
        let slot: LoopSlot = Arc::new(Mutex::new(None));
        let outcome = run_sweep(&plan, &mut inst, &stop, &slot, &mut |_| {}).unwrap();
        let level = &outcome.levels[0];
        // Readings are paced on a 20 ms grid from the level's start, and none starts past
        // the 400 ms cap: at most 21, however slowly the machine runs.
        let polls = polls.load(Ordering::Relaxed);
        assert!(polls <= 21, "{polls} readings in a 400 ms level");
        // The warm-up cut takes at most half of the readings, leaving the rest measured.
        assert!(level.settle_s < 0.4, "settled after {} s", level.settle_s);
        assert!(level.n >= 2, "{level:?}");
        let warned = |needle: &str| level.warnings.iter().any(|w| w.contains(needle));
        assert!(warned("still changing"), "{:?}", level.warnings);
        assert!(warned("settling included"), "{:?}", level.warnings);
        assert!(outcome.complete);
    }
}
