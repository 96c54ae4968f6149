//! GPU idle states from stored samples (the GPU collectors' `gpuN` channels: power W,
//! utilisation share, compute-process count, SM clock MHz, all stamped with one poll's
//! time): busy, idle with a resident process, idle bare.
//!
//! An idle GPU with a process holding a CUDA context draws much more than a bare one: on
//! the H200 capture in `collectors/tests/fixtures/gpu-h200/`, 119.6 W against 77 W, because
//! the driver holds the SM clock at its maximum (1980 MHz) instead of dropping it to
//! 345 MHz. A sample at 0 % utilisation is therefore classified by
//! - the process count where one was recorded ([`Rule::ProcessCount`]): 0 = bare, more =
//!   resident;
//! - else the SM clock ([`Rule::SmClock`]): held at [`RESIDENT_CLOCK_SHARE`] or more of
//!   the highest clock the GPU showed = resident, at [`BARE_CLOCK_SHARE`] or less = bare.
//!   The rule needs the GPU to have shown both a high and a low clock in the window;
//!   where it never did (always resident, or always bare) it cannot tell, and such samples
//!   stay [`GpuState::Unclassified`].
//!
//! Power ramps over about a second after every change of state (the capture shows 525 W
//! falling to 120 W over 1 s after a load stops), so a state's mean watts only count
//! samples [`SETTLE_MS`] or more into a run of that state; every sample counts towards the
//! time spent in its state. Units: W, MHz, UTC ms, shares `0..=1`.

use serde::Serialize;

/// Samples closer than this to a change of state (or the start of the data) are left out
/// of that state's mean watts, ms.
pub const SETTLE_MS: i64 = 2_000;

/// An SM clock at this share of the GPU's highest clock or more, at 0 % utilisation,
/// means a context is resident.
pub const RESIDENT_CLOCK_SHARE: f64 = 0.8;

/// An SM clock at this share of the GPU's highest clock or less, at 0 % utilisation,
/// means the GPU is bare.
pub const BARE_CLOCK_SHARE: f64 = 0.5;

/// Utilisation below this share prints as 0 %: idle.
const IDLE_UTILISATION: f64 = 0.005;

/// One poll of one GPU.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct GpuPoint {
    /// UTC ms.
    pub ts_ms: i64,
    /// Board power, W.
    pub watts: f64,
    /// Share of the sample period a kernel ran, `0..=1`.
    pub utilisation: Option<f64>,
    /// Compute processes holding a context.
    pub processes: Option<u32>,
    /// SM clock, MHz.
    pub sm_clock_mhz: Option<f64>,
}

/// What a GPU was doing at one sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GpuState {
    /// Utilisation above 0 %.
    Busy,
    /// 0 % utilisation with a process holding a context.
    IdleResident,
    /// 0 % utilisation with no process.
    IdleBare,
    /// No utilisation recorded, or idle with nothing to tell resident from bare.
    Unclassified,
}

/// Which evidence decided the idle samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// The recorded compute-process count.
    ProcessCount,
    /// The SM clock (no process count recorded).
    SmClock,
    /// The process count where recorded, the SM clock elsewhere.
    Mixed,
    /// No idle sample could be classified.
    None,
}

impl Rule {
    /// Plain words for reports.
    pub fn explain(self) -> &'static str {
        match self {
            Rule::ProcessCount => "by the recorded compute-process count",
            Rule::SmClock => {
                "by the SM clock (no process count recorded): held near its maximum at 0 % \
                 utilisation = a context is resident, near its idle clock = bare"
            }
            Rule::Mixed => {
                "by the recorded compute-process count where there is one, else by the SM clock"
            }
            Rule::None => {
                "not classified: no process count, and the SM clock never showed both \
                 an idle and a held clock"
            }
        }
    }
}

/// Time and settled mean watts in one state.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct StateStats {
    /// Time in the state, ms.
    pub ms: i64,
    /// Samples in the state.
    pub samples: usize,
    /// Samples that counted towards `mean_watts` (settled, see [`SETTLE_MS`]).
    pub settled_samples: usize,
    /// Time-weighted mean W over settled samples; over all of them where none settled.
    pub mean_watts: Option<f64>,
}

/// One GPU's history, classified.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GpuIdleSummary {
    /// Time the samples cover, ms (gaps longer than 3 sampling intervals excluded).
    pub covered_ms: i64,
    pub busy: StateStats,
    pub idle_resident: StateStats,
    pub idle_bare: StateStats,
    pub unclassified: StateStats,
    /// Idle samples decided by the process count.
    pub by_process_count: usize,
    /// Idle samples decided by the SM clock.
    pub by_sm_clock: usize,
    /// The highest SM clock seen, MHz.
    pub max_clock_mhz: Option<f64>,
}

impl GpuIdleSummary {
    /// Which rule decided the idle samples.
    pub fn rule(&self) -> Rule {
        match (self.by_process_count, self.by_sm_clock) {
            (0, 0) => Rule::None,
            (_, 0) => Rule::ProcessCount,
            (0, _) => Rule::SmClock,
            _ => Rule::Mixed,
        }
    }

    /// `stats.ms` as a share of covered time, `0..=1`.
    pub fn share(&self, stats: &StateStats) -> f64 {
        if self.covered_ms > 0 {
            stats.ms as f64 / self.covered_ms as f64
        } else {
            0.0
        }
    }

    fn stats_mut(&mut self, state: GpuState) -> &mut StateStats {
        match state {
            GpuState::Busy => &mut self.busy,
            GpuState::IdleResident => &mut self.idle_resident,
            GpuState::IdleBare => &mut self.idle_bare,
            GpuState::Unclassified => &mut self.unclassified,
        }
    }
}

/// The SM-clock fallback's reference: the highest clock, where the GPU also showed one at
/// [`BARE_CLOCK_SHARE`] of it or less (else the clock cannot tell the states apart).
fn clock_reference(points: &[GpuPoint]) -> (Option<f64>, Option<f64>) {
    let clocks = points
        .iter()
        .filter_map(|p| p.sm_clock_mhz)
        .filter(|c| c.is_finite() && *c > 0.0);
    let (lo, hi) = clocks.fold((None::<f64>, None::<f64>), |(lo, hi), c| {
        (
            Some(lo.map_or(c, |l| l.min(c))),
            Some(hi.map_or(c, |h| h.max(c))),
        )
    });
    let usable = match (lo, hi) {
        (Some(l), Some(h)) if l <= BARE_CLOCK_SHARE * h => Some(h),
        _ => None,
    };
    (hi, usable)
}

/// One sample's state, and whether the process count (`Some(true)`) or the clock
/// (`Some(false)`) decided an idle one. `clock_ref` is the GPU's highest clock where the
/// clock rule is usable.
pub fn classify(p: &GpuPoint, clock_ref: Option<f64>) -> (GpuState, Option<bool>) {
    let Some(util) = p.utilisation.filter(|u| u.is_finite()) else {
        return (GpuState::Unclassified, None);
    };
    if util >= IDLE_UTILISATION {
        return (GpuState::Busy, None);
    }
    if let Some(n) = p.processes {
        let state = if n > 0 {
            GpuState::IdleResident
        } else {
            GpuState::IdleBare
        };
        return (state, Some(true));
    }
    match (p.sm_clock_mhz, clock_ref) {
        (Some(c), Some(max)) if c >= RESIDENT_CLOCK_SHARE * max => {
            (GpuState::IdleResident, Some(false))
        }
        (Some(c), Some(max)) if c <= BARE_CLOCK_SHARE * max => (GpuState::IdleBare, Some(false)),
        _ => (GpuState::Unclassified, None),
    }
}

/// Classifies one GPU's points (any order) and sums time and settled watts per state.
pub fn summarise(points: &[GpuPoint]) -> GpuIdleSummary {
    let mut pts: Vec<GpuPoint> = points
        .iter()
        .filter(|p| p.watts.is_finite())
        .copied()
        .collect();
    pts.sort_by_key(|p| p.ts_ms);
    pts.dedup_by_key(|p| p.ts_ms);
    let (max_clock, clock_ref) = clock_reference(&pts);
    let mut out = GpuIdleSummary {
        max_clock_mhz: max_clock,
        ..GpuIdleSummary::default()
    };
    if pts.is_empty() {
        return out;
    }
    // Each sample stands for the time to the next one, up to 3 sampling intervals (the
    // store's gap rule); the last one for one interval.
    let mut steps: Vec<i64> = pts.windows(2).map(|w| w[1].ts_ms - w[0].ts_ms).collect();
    steps.sort_unstable();
    let interval = steps.get(steps.len() / 2).copied().unwrap_or(1000).max(1);
    let cap = interval * 3;

    // Weighted sums per state: (settled W x ms, settled ms, all W x ms, all ms).
    let mut sums = [[0.0_f64; 4]; 4];
    let index = |s: GpuState| match s {
        GpuState::Busy => 0,
        GpuState::IdleResident => 1,
        GpuState::IdleBare => 2,
        GpuState::Unclassified => 3,
    };
    let mut run: Option<(GpuState, i64)> = None;
    for (i, p) in pts.iter().enumerate() {
        let next_gap = pts.get(i + 1).map(|n| n.ts_ms - p.ts_ms);
        let ms = next_gap.filter(|g| *g <= cap).unwrap_or(interval);
        let (state, by_count) = classify(p, clock_ref);
        match by_count {
            Some(true) => out.by_process_count += 1,
            Some(false) => out.by_sm_clock += 1,
            None => {}
        }
        let since = match run {
            Some((s, since)) if s == state => since,
            _ => p.ts_ms,
        };
        let settled = p.ts_ms - since >= SETTLE_MS;
        let st = out.stats_mut(state);
        st.ms += ms;
        st.samples += 1;
        let w = ms as f64;
        let sum = &mut sums[index(state)];
        if settled {
            st.settled_samples += 1;
            sum[0] += p.watts * w;
            sum[1] += w;
        }
        sum[2] += p.watts * w;
        sum[3] += w;
        out.covered_ms += ms;
        // A gap ends the run: after it, the state must settle again.
        run = if next_gap.is_some_and(|g| g > cap) {
            None
        } else {
            Some((state, since))
        };
    }
    for state in [
        GpuState::Busy,
        GpuState::IdleResident,
        GpuState::IdleBare,
        GpuState::Unclassified,
    ] {
        let s = sums[index(state)];
        out.stats_mut(state).mean_watts = if s[1] > 0.0 {
            Some(s[0] / s[1])
        } else if s[3] > 0.0 {
            Some(s[2] / s[3])
        } else {
            None
        };
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pt(ts_ms: i64, watts: f64, util: f64, clock: f64, procs: Option<u32>) -> GpuPoint {
        GpuPoint {
            ts_ms,
            watts,
            utilisation: Some(util),
            processes: procs,
            sm_clock_mhz: Some(clock),
        }
    }

    #[test]
    fn the_clock_decides_where_no_process_count_exists() {
        // The H200's three states, 1 s apart: 10 s bare at 345 MHz, 10 s busy, 10 s idle
        // with the clock held at 1980 MHz.
        let mut pts = Vec::new();
        for i in 0..10 {
            pts.push(pt(i * 1000, 77.0, 0.0, 345.0, None));
        }
        for i in 10..20 {
            pts.push(pt(i * 1000, 690.0, 0.95, 1545.0, None));
        }
        for i in 20..30 {
            // The first second after the load is still ramping down.
            let w = if i == 20 { 500.0 } else { 119.6 };
            pts.push(pt(i * 1000, w, 0.0, 1980.0, None));
        }
        let s = summarise(&pts);
        assert_eq!(s.rule(), Rule::SmClock);
        assert_eq!(s.by_sm_clock, 20);
        assert_eq!(s.covered_ms, 30_000);
        assert_eq!(
            (s.idle_bare.ms, s.busy.ms, s.idle_resident.ms),
            (10_000, 10_000, 10_000)
        );
        assert!((s.share(&s.idle_resident) - 1.0 / 3.0).abs() < 1e-9);
        assert_eq!(s.idle_bare.mean_watts, Some(77.0));
        // The ramp (500 W at the change) is outside the settled mean.
        assert_eq!(s.idle_resident.mean_watts, Some(119.6));
        assert_eq!(s.idle_resident.settled_samples, 8);
        assert_eq!(s.max_clock_mhz, Some(1980.0));

        // A clock between the two thresholds tells nothing.
        assert_eq!(
            classify(&pt(0, 90.0, 0.0, 1200.0, None), Some(1980.0)).0,
            GpuState::Unclassified
        );
    }

    #[test]
    fn the_process_count_wins_over_the_clock() {
        // Held clock but no process (another tool pinned the clocks): bare by count.
        let (state, by_count) = classify(&pt(0, 80.0, 0.0, 1980.0, Some(0)), Some(1980.0));
        assert_eq!((state, by_count), (GpuState::IdleBare, Some(true)));
        let (state, _) = classify(&pt(0, 119.6, 0.0, 345.0, Some(2)), Some(1980.0));
        assert_eq!(state, GpuState::IdleResident);
        assert_eq!(
            classify(&pt(0, 600.0, 0.5, 1500.0, Some(1)), None).0,
            GpuState::Busy
        );
        let mixed = summarise(&[
            pt(0, 77.0, 0.0, 345.0, Some(0)),
            pt(1000, 119.6, 0.0, 1980.0, None),
        ]);
        assert_eq!(mixed.rule(), Rule::Mixed);
    }

    #[test]
    fn a_clock_that_never_dropped_cannot_tell_and_gaps_are_not_time() {
        // Always at 1980 MHz, no count: resident or pinned, the clock cannot say.
        let pts: Vec<GpuPoint> = (0..5)
            .map(|i| pt(i * 1000, 119.6, 0.0, 1980.0, None))
            .collect();
        let s = summarise(&pts);
        assert_eq!(s.rule(), Rule::None);
        assert_eq!(s.unclassified.samples, 5);
        assert_eq!(s.idle_resident.samples, 0);

        // A 1-hour hole between two runs counts one interval, not the hour.
        let mut pts: Vec<GpuPoint> = (0..5)
            .map(|i| pt(i * 1000, 77.0, 0.0, 345.0, Some(0)))
            .collect();
        pts.extend((0..5).map(|i| pt(3_600_000 + i * 1000, 77.0, 0.0, 345.0, Some(0))));
        let s = summarise(&pts);
        assert_eq!(s.covered_ms, 10_000);
        // Each run starts unsettled again: 2 of 5 samples in each are within 2 s.
        assert_eq!(s.idle_bare.settled_samples, 6);
        // No utilisation at all: unclassified, still covered time.
        let s = summarise(&[GpuPoint {
            ts_ms: 0,
            watts: 50.0,
            ..GpuPoint::default()
        }]);
        assert_eq!((s.unclassified.samples, s.covered_ms), (1, 1000));
        assert_eq!(summarise(&[]).covered_ms, 0);
    }
}
