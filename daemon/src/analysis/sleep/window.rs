//! The nightly windows: the runs of hours of the day (across midnight) that were idle on
//! enough of the days they were measured.

use std::fmt;

use super::{NoPlan, Thresholds};

/// A nightly suspend window: from `start` (hour of the day, local) for `hours` hours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub start: usize,
    pub hours: usize,
}

impl Window {
    /// Its hours from `start`, past 23 where it runs over midnight.
    pub fn hours(&self) -> std::ops::Range<usize> {
        self.start..self.start + self.hours
    }

    /// The local hour of the day it ends at.
    pub fn end(&self) -> usize {
        (self.start + self.hours) % 24
    }
}

impl fmt::Display for Window {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.hours >= 24 {
            return f.write_str("all day, every day");
        }
        write!(f, "{:02}:00-{:02}:00 every night", self.start, self.end())
    }
}

/// The windows (earliest start first) of the hours of the day `idle` on at least
/// `t.min_idle_days_percent` of the days `measured` says hold them.
pub(super) fn choose(
    idle: &dyn Fn(usize) -> bool,
    measured: &dyn Fn(usize) -> bool,
    t: &Thresholds,
) -> Result<Vec<Window>, NoPlan> {
    let share: Vec<f64> = (0..24)
        .map(|hod| {
            let days = (0..7).filter(|d| measured(d * 24 + hod)).count();
            let idle = (0..7).filter(|d| idle(d * 24 + hod)).count();
            if days == 0 {
                0.0
            } else {
                idle as f64 * 100.0 / days as f64
            }
        })
        .collect();
    let ok: Vec<bool> = share
        .iter()
        .map(|s| *s >= t.min_idle_days_percent - 1e-9)
        .collect();
    let runs = if ok.iter().all(|o| *o) {
        vec![Window {
            start: 0,
            hours: 24,
        }]
    } else {
        // Start scanning after an hour that is not slept, so a run over midnight is one run.
        let first = ok.iter().position(|o| !o).unwrap_or(0);
        let mut runs: Vec<Window> = Vec::new();
        let mut current: Option<Window> = None;
        for i in 1..=24 {
            let hod = (first + i) % 24;
            match (&mut current, ok[hod]) {
                (Some(w), true) => w.hours += 1,
                (None, true) => {
                    current = Some(Window {
                        start: hod,
                        hours: 1,
                    });
                }
                (_, false) => {
                    runs.extend(current.take());
                }
            }
        }
        runs.extend(current);
        runs
    };
    let longest = runs.iter().map(|w| w.hours).max().unwrap_or(0);
    let mut kept: Vec<Window> = runs
        .into_iter()
        .filter(|w| w.hours >= t.min_window_hours.max(1))
        .collect();
    if kept.is_empty() {
        let (best, most) =
            share.iter().enumerate().fold(
                (0, -1.0),
                |(b, m), (h, &s)| if s > m { (h, s) } else { (b, m) },
            );
        return Err(NoPlan::NeverIdle(format!(
            "no {} h window was idle often enough: the most idle hour of the day, {best:02}:00, \
             was idle on {most:.0} % of its days (at least {} % asked), and the longest run of \
             such hours is {longest} h",
            t.min_window_hours, t.min_idle_days_percent
        )));
    }
    kept.sort_by_key(|w| w.start);
    Ok(kept)
}
