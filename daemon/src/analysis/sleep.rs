//! What sleeping when idle would save, the analysis: from this machine's history by local
//! hour of the week (mean wall watts, CPU busy share, who woke the CPUs, disks spun up),
//! which hours were idle enough to sleep by stated [`Thresholds`], the nightly suspend
//! window(s) that follow from them ("01:00-07:00 every night"), the watts sleeping there
//! would not draw, and what the window would have interrupted, named by service
//! ("backup.service at 03:00 on Sundays"). Pricing it is the ledger's
//! ([`crate::ledger::annual::on_week`]); no I/O here.
//!
//! Units: W, shares of all CPUs (0..1), wake-ups per second, hours; hours of the week are
//! local, Monday 00:00-01:00 first.

mod window;

pub use window::Window;

use serde::Serialize;

/// Hours in a week.
pub const WEEK_HOURS: usize = 168;

const DAY_NAMES: [&str; 7] = [
    "Mondays",
    "Tuesdays",
    "Wednesdays",
    "Thursdays",
    "Fridays",
    "Saturdays",
    "Sundays",
];

/// One hour of the week as the history holds it (over every week of the window).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HourOfWeek {
    /// Mean wall power over its covered time, W; `None` where not measured.
    pub watts: Option<f64>,
    /// Mean CPU busy share of all CPUs (0..1); `None` where not recorded.
    pub cpu_busy: Option<f64>,
    /// Each service's wake-ups per second of the recorded windows (`service:x`, the name
    /// as `wattson idle` groups it; `(other)` is never named).
    pub wakeups: Vec<(String, f64)>,
    /// Disk spin-ups in the hour: (disk, who woke it).
    pub disk_spinups: Vec<(String, String)>,
}

/// What counts as idle enough to sleep, and what makes a window; each stated in the output.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Thresholds {
    /// An hour's CPU busy share may be at most this, % of all CPUs.
    pub max_cpu_percent: f64,
    /// An hour's mean power may be at most this much above the quietest hour's, %.
    pub max_watts_over_floor_percent: f64,
    /// No one service may wake the CPUs more often than this in the hour, per second.
    pub max_service_wakeups_per_s: f64,
    /// An hour of the day joins the window where it was idle on at least this share of
    /// the days it was measured, %.
    pub min_idle_days_percent: f64,
    /// A window shorter than this is not proposed (a suspend and resume for less is not
    /// worth it), hours.
    pub min_window_hours: usize,
}

impl Default for Thresholds {
    fn default() -> Thresholds {
        Thresholds {
            max_cpu_percent: 5.0,
            max_watts_over_floor_percent: 10.0,
            max_service_wakeups_per_s: 5.0,
            min_idle_days_percent: 80.0,
            min_window_hours: 2,
        }
    }
}

impl Thresholds {
    /// The thresholds in words, as every output states them.
    pub fn text(&self) -> String {
        format!(
            "an hour is idle with CPU at most {} % busy, power within {} % of the quietest \
             hour's, no service waking the CPUs over {}/s and no disk spun up; an hour of the \
             day is slept where it was idle on at least {} % of the days measured, in windows \
             of {} h or more",
            self.max_cpu_percent,
            self.max_watts_over_floor_percent,
            self.max_service_wakeups_per_s,
            self.min_idle_days_percent,
            self.min_window_hours
        )
    }
}

/// Something the window would have slept through.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Interruption {
    /// Who: a service (`backup.service`), a disk's waker (`sda woken by backup.service`),
    /// or what was seen without a name (`CPU 30 % busy`, `power 20 W over the quietest hour`).
    pub what: String,
    /// Hour of the day it was seen in, local.
    pub hour: usize,
    /// The days of the week (0 = Monday) it was seen on at that hour.
    pub days: Vec<usize>,
    /// The highest rate seen, wake-ups per second, where it is a service's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wakeups_per_s: Option<f64>,
}

impl Interruption {
    /// "backup.service at 03:00 on Sundays".
    pub fn text(&self) -> String {
        let days = if self.days.len() == 7 {
            "every day".to_owned()
        } else {
            let names: Vec<&str> = self.days.iter().map(|&d| DAY_NAMES[d % 7]).collect();
            format!("on {}", names.join(", "))
        };
        let rate = self
            .wakeups_per_s
            .map(|r| format!(" ({r:.0} wake-ups/s)"))
            .unwrap_or_default();
        format!("{} at {:02}:00 {days}{rate}", self.what, self.hour)
    }
}

/// The proposal: where to sleep and what it would not draw.
#[derive(Debug, Clone, PartialEq)]
pub struct SleepPlan {
    /// The nightly windows, earliest first.
    pub windows: Vec<Window>,
    /// The quietest measured hour of the week's mean power, W: what idle is measured against.
    pub floor_watts: f64,
    /// The power sleeping would not draw in each hour of the week, W (the idle power of that
    /// hour; where the hour was busy or not measured, the mean of its hour of the day on the
    /// idle days: the work that kept it awake is done anyway, at another time); `None`
    /// outside the windows.
    pub idle_watts: Vec<Option<f64>>,
    /// The nights in the week the window would have slept through, and those interrupted.
    pub nights: usize,
    pub nights_interrupted: usize,
    /// What the window would have slept through, by what and hour of the day.
    pub interrupted: Vec<Interruption>,
    /// Hours of the windows in the week the history does not hold.
    pub unmeasured_hours: usize,
}

impl SleepPlan {
    /// Hours a week asleep.
    pub fn hours_a_week(&self) -> usize {
        self.idle_watts.iter().filter(|w| w.is_some()).count()
    }

    /// The mean power of the slept hours, W.
    pub fn idle_watts_mean(&self) -> Option<f64> {
        let w: Vec<f64> = self.idle_watts.iter().flatten().copied().collect();
        (!w.is_empty()).then(|| w.iter().sum::<f64>() / w.len() as f64)
    }

    /// The windows in words: "01:00-07:00 every night".
    pub fn windows_text(&self) -> String {
        self.windows
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Why no window is proposed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoPlan {
    /// Not every hour of the day is measured: what is missing.
    TooLittleHistory(String),
    /// No hour of the day was idle often enough, or the idle ones make no window long
    /// enough: the nearest it came.
    NeverIdle(String),
}

impl std::fmt::Display for NoPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NoPlan::TooLittleHistory(s) | NoPlan::NeverIdle(s) => f.write_str(s),
        }
    }
}

/// Why hour `h` was not idle, each reason as an [`Interruption`]'s `what` (with the rate
/// where a service's); empty where it was idle.
fn awake_because(h: &HourOfWeek, floor: f64, t: &Thresholds) -> Vec<(String, Option<f64>)> {
    let mut out: Vec<(String, Option<f64>)> = h
        .wakeups
        .iter()
        .filter(|(name, rate)| *rate > t.max_service_wakeups_per_s && !name.starts_with('('))
        .map(|(name, rate)| (display_name(name).to_owned(), Some(*rate)))
        .collect();
    out.extend(
        h.disk_spinups
            .iter()
            .map(|(disk, by)| (format!("{disk} spun up by {}", display_name(by)), None)),
    );
    if out.is_empty() {
        if let Some(busy) = h.cpu_busy.filter(|b| *b * 100.0 > t.max_cpu_percent) {
            out.push((
                format!("CPU {:.0} % busy (no service named)", busy * 100.0),
                None,
            ));
        } else if let Some(w) = h
            .watts
            .filter(|w| *w > floor * (1.0 + t.max_watts_over_floor_percent / 100.0))
        {
            out.push((
                format!(
                    "power {:.1} W over the quietest hour's (no service named)",
                    w - floor
                ),
                None,
            ));
        }
    }
    out
}

/// `service:backup.service` as `backup.service`.
fn display_name(group: &str) -> &str {
    group
        .split_once(':')
        .filter(|(kind, _)| *kind == "service")
        .map_or(group, |(_, name)| name)
}

/// The windows the week's `hours` (168, Monday 00:00 local first) propose under `t`.
pub fn plan(hours: &[HourOfWeek], t: &Thresholds) -> Result<SleepPlan, NoPlan> {
    let measured = |h: usize| hours.get(h).and_then(|x| x.watts).is_some();
    let missing: Vec<usize> = (0..24)
        .filter(|hod| !(0..7).any(|d| measured(d * 24 + hod)))
        .collect();
    if !missing.is_empty() {
        return Err(NoPlan::TooLittleHistory(format!(
            "the history holds no power for {} of the day's 24 hours (first {:02}:00): a day \
             of `wattson run` at least, a week or more to see each day of the week",
            missing.len(),
            missing[0]
        )));
    }
    let floor = hours
        .iter()
        .filter_map(|h| h.watts)
        .fold(f64::INFINITY, f64::min);
    let awake: Vec<Vec<(String, Option<f64>)>> =
        hours.iter().map(|h| awake_because(h, floor, t)).collect();
    let idle = |h: usize| measured(h) && awake[h].is_empty();
    let windows = window::choose(&idle, &measured, t)?;
    let mut idle_watts = vec![None; WEEK_HOURS];
    let mut interrupted: Vec<Interruption> = Vec::new();
    let (mut nights, mut nights_interrupted, mut unmeasured) = (0, 0, 0);
    for w in &windows {
        for day in 0..7 {
            nights += 1;
            let mut broken = false;
            for hod in w.hours() {
                let h = (day * 24 + hod) % WEEK_HOURS;
                let same_hour_idle: Vec<f64> = (0..7)
                    .map(|d| d * 24 + hod % 24)
                    .filter(|&x| idle(x))
                    .filter_map(|x| hours[x].watts)
                    .collect();
                let fallback = same_hour_idle.iter().sum::<f64>() / same_hour_idle.len() as f64;
                idle_watts[h] = Some(if idle(h) {
                    hours[h].watts.unwrap_or(fallback)
                } else {
                    fallback
                });
                unmeasured += usize::from(!measured(h));
                broken |= !awake[h].is_empty();
                for (what, rate) in &awake[h] {
                    note(&mut interrupted, what, hod % 24, h / 24, *rate);
                }
            }
            nights_interrupted += usize::from(broken);
        }
    }
    interrupted.sort_by(|a, b| (a.hour, &a.days, &a.what).cmp(&(b.hour, &b.days, &b.what)));
    Ok(SleepPlan {
        windows,
        floor_watts: floor,
        idle_watts,
        nights,
        nights_interrupted,
        interrupted,
        unmeasured_hours: unmeasured,
    })
}

/// Adds `what` seen at `hour` of the day on `day` to `list`, one entry per what and hour.
fn note(list: &mut Vec<Interruption>, what: &str, hour: usize, day: usize, rate: Option<f64>) {
    if let Some(i) = list.iter_mut().find(|i| i.what == what && i.hour == hour) {
        if !i.days.contains(&day) {
            i.days.push(day);
            i.days.sort_unstable();
        }
        i.wakeups_per_s = match (i.wakeups_per_s, rate) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
    } else {
        list.push(Interruption {
            what: what.to_owned(),
            hour,
            days: vec![day],
            wakeups_per_s: rate,
        });
    }
}

#[cfg(test)]
mod tests;
