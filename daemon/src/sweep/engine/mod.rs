//! The measurement loop of a sweep, over any meter and CPU [`Collector`]s: the plan and the
//! instruments here, each level's idle guard, settling and stopping in `level`; what it
//! found and the fits are [`super::outcome`].

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use wattson_collectors::source::channel;

use wattson_collectors::{Collector, Metric, Sample};

use crate::sweep::SweepError;
use crate::sweep::outcome::{LevelResult, SweepOutcome};
use crate::sweep::workload::{LoopKind, LoopSet, Workload};

mod level;
use level::run_level;

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
) -> Result<SweepOutcome, SweepError> {
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
    let fits = crate::sweep::outcome::fits(&plan.kinds, &mut results, plan.physical_cores);
    Ok(SweepOutcome {
        levels: results,
        fits,
        complete,
        started_ms,
        ended_ms: now_ms(),
    })
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
