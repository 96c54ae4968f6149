//! `wattson idle` without `--measure`: where the idle machine's package and cores sleep, and
//! which settings keep it from sleeping deeper, in words.
//!
//! Residency comes from the database's last hour when the daemon has been recording (package
//! states need it started with access to the MSRs), else from a live sample of a few seconds.
//! A state is *reached* when it holds at least [`REACHED`] of the window.

use std::fmt::Write as _;

use serde::Serialize;
use wattson_collectors::idle::settings::{Setting, SettingKind};
use wattson_collectors::idle::{PackageLimit, PackageUnavailable, PcState};

use super::trials::{Trial, compact_names, device_of};

mod gather;

pub use gather::gather;

/// Share of the window above which a state counts as reached (0.1 %).
pub const REACHED: f64 = 0.001;

/// One state's share of the window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Residency {
    pub state: String,
    /// 0..1.
    pub share: f64,
}

/// Where the residency figures come from.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "source", rename_all = "snake_case")]
pub enum Window {
    /// The database's samples of the last hour: the first and last one, UTC ms.
    History {
        from_ms: i64,
        to_ms: i64,
        samples: usize,
    },
    /// A live sample of this many seconds, taken now.
    Live { seconds: f64 },
    /// Nothing could be sampled.
    None,
}

impl Window {
    /// `the last hour` / `a 5 s sample`.
    pub fn describe(&self) -> String {
        match self {
            Window::History { from_ms, to_ms, .. } => {
                let seconds = (to_ms - from_ms) as f64 / 1000.0;
                if seconds >= 59.0 * 60.0 {
                    "the last hour".to_owned()
                } else if seconds >= 120.0 {
                    format!("the last {:.0} minutes recorded", seconds / 60.0)
                } else {
                    format!("the last {seconds:.0} s recorded")
                }
            }
            Window::Live { seconds } => format!("a {seconds:.0} s sample taken now"),
            Window::None => "no sample".to_owned(),
        }
    }
}

/// The package's C-states.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PackageView {
    /// Read here now (the MSRs, or the `cstate_pkg` perf PMU, answered).
    pub readable: bool,
    /// turbostat's name of the CPU's feature set (`adl`, `skl`, ...).
    pub platform: Option<String>,
    /// Where the counters are read, in words (the residency MSRs in ..., or the perf PMU).
    pub source: Option<String>,
    /// The msr files read (or the perf PMU's directory), one per package.
    pub files: Vec<String>,
    /// Shallowest first; empty when neither history nor a live read has any.
    pub states: Vec<Residency>,
    /// The deepest state holding at least [`REACHED`] of the window.
    pub deepest_reached: Option<String>,
    /// The firmware's limit, where it can be read and decoded.
    pub limit: Option<PackageLimit>,
    /// Why the counters cannot be read here, and what the machine has instead.
    pub unavailable: Option<PackageUnavailable>,
}

/// The cores' idle states (cpuidle), the mean over CPUs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CoreView {
    pub driver: Option<String>,
    /// Shallowest first.
    pub states: Vec<Residency>,
    /// Share of the window in C6 or deeper (the states that let the package go deep); where
    /// the driver has none that deep, in its deepest state.
    pub deep_share: Option<f64>,
    /// `C6 and deeper`, or the deepest state's name.
    pub deep_label: Option<String>,
}

/// Everything `wattson idle` shows.
#[derive(Debug, Clone, Serialize)]
pub struct IdleReport {
    pub host: String,
    pub window: Window,
    pub package: PackageView,
    pub cores: CoreView,
    /// Who woke the CPUs over a live window of `--sample` (every run samples it; `None`
    /// with `--sample 0`).
    pub wakeups: Option<super::wakeups::WakeupsView>,
    /// What it all means, most important first.
    pub findings: Vec<String>,
    /// What `--measure` would change here (`candidates` in the JSON, as it always was).
    #[serde(rename = "candidates")]
    pub trials: Vec<Trial>,
    pub settings: Vec<Setting>,
    /// Kinds of setting this machine does not have, with the file looked for.
    pub absent: Vec<Absent>,
    /// The newest measured effect of each setting (`wattson idle --measure`).
    pub measured: Vec<super::store::Effect>,
    /// From the daemon's hourly history (the last 30 days): the idle hours in which the
    /// package reached PC6 or deeper, and those in which it did not, with the wall draw.
    pub hours_deep: Option<super::history::HoursGroup>,
    pub hours_shallow: Option<super::history::HoursGroup>,
    /// Idle now against the best idle seen in that history, and what explains the gap.
    pub gap: Option<super::gap::Gap>,
    /// Each disk's spin state as `wattson run` stored it (`[[disk]]`, the last 30 days).
    pub disks: Vec<super::disk_hours::StoredDisk>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Absent {
    pub kind: SettingKind,
    pub why: String,
}

fn pct(share: f64) -> String {
    format!("{:.0} %", share * 100.0)
}

/// The settings that commonly keep a package out of its deep states, in words
/// (`ASPM is disabled (policy performance)`, `SATA host0-host3 at max_performance`).
pub fn awake_suspects(settings: &[Setting]) -> Vec<String> {
    let mut out = Vec::new();
    for s in settings.iter().filter(|s| s.lower.is_some()) {
        match (s.kind, s.current.as_str()) {
            (SettingKind::PcieAspm, "performance") => {
                out.push("ASPM is disabled (policy `performance`)".to_owned());
            }
            (SettingKind::PcieAspm, current) => {
                out.push(format!("ASPM policy `{current}` (not powersave)"));
            }
            _ => {}
        }
    }
    let alpm: Vec<&Setting> = settings
        .iter()
        .filter(|s| s.kind == SettingKind::SataAlpm && s.lower.is_some())
        .collect();
    if !alpm.is_empty() {
        let hosts: Vec<String> = alpm.iter().map(|s| device_of(s).to_owned()).collect();
        out.push(format!(
            "SATA {} at `{}`",
            compact_names(&hosts),
            alpm[0].current
        ));
    }
    for s in settings.iter().filter(|s| s.lower.is_some()) {
        match s.kind {
            SettingKind::RuntimePmPci | SettingKind::RuntimePmAta => {
                out.push(format!("{} runtime PM `{}`", device_of(s), s.current));
            }
            SettingKind::RuntimePmUsb => {
                out.push(format!("USB {} runtime PM `{}`", device_of(s), s.current));
            }
            SettingKind::AudioPowerSave => {
                out.push("HD-audio power save off".to_owned());
            }
            _ => {}
        }
    }
    out
}

/// The findings, most important first.
pub fn findings(r: &IdleReport) -> Vec<String> {
    let mut out = Vec::new();
    let window = r.window.describe();
    let suspects = awake_suspects(&r.settings);
    let suspects_text = if suspects.is_empty() {
        "no setting wattson reads is at a higher-power value: look for a busy process or a \
         device wattson cannot see (\"Who wakes the CPUs\" names the processes and interrupts)"
            .to_owned()
    } else {
        format!("candidates: {}", suspects.join(", "))
    };
    let deep_pkg = r
        .package
        .states
        .iter()
        .filter(|s| PcState::parse(&s.state).is_some_and(|p| p >= PcState::Pc6))
        .collect::<Vec<_>>();
    let deep_pkg_share: f64 = deep_pkg.iter().map(|s| s.share).sum();
    if let Some(limit) = &r.package.limit
        && limit.depth.is_some_and(|d| d < 6)
    {
        out.push(format!(
            "the firmware limits the package to {} (MSR_PKG_CST_CONFIG_CONTROL{}): no setting \
             in Linux gets it deeper; raise \"Package C-State Limit\" in the firmware setup",
            limit.label,
            if limit.locked { ", locked" } else { "" }
        ));
    }
    let cores = match (r.cores.deep_share, &r.cores.deep_label) {
        (Some(share), Some(label)) => Some((share, label)),
        _ => None,
    };
    if r.package.states.is_empty() {
        let why = r.package.unavailable.as_ref().map_or_else(
            || format!("no package C-state samples in {window}"),
            |u| u.reason.clone(),
        );
        out.push(format!("package C-states unknown: {why}"));
        if let Some((share, label)) = cores {
            out.push(format!(
                "the cores spend {} of {window} in {label}",
                pct(share)
            ));
        }
        if !suspects.is_empty() {
            out.push(format!(
                "settings that commonly keep a package awake and have a lower-power value: {}",
                suspects.join(", ")
            ));
        }
    } else {
        let deepest = r.package.deepest_reached.as_deref().unwrap_or("none");
        if deep_pkg.is_empty() || deep_pkg_share < REACHED {
            let mut line = format!(
                "deepest package C-state reached: {deepest} (PC6 and deeper never, {} of {window})",
                pct(deep_pkg_share)
            );
            if let Some((share, label)) = cores
                && share >= 0.5
            {
                let _ = write!(
                    line,
                    " although the cores spend {} in {label}: something keeps the package \
                     awake; {suspects_text}",
                    pct(share)
                );
            } else if let Some((share, label)) = cores {
                let _ = write!(
                    line,
                    "; the cores themselves spend only {} in {label}, so something keeps them \
                     busy or wakes them (a process, timer interrupts: \"Who wakes the CPUs\" \
                     names which)",
                    pct(share)
                );
            }
            out.push(line);
        } else {
            out.push(format!(
                "deepest package C-state reached: {deepest}; PC6 and deeper {} of {window}",
                pct(deep_pkg_share)
            ));
            if !suspects.is_empty() {
                out.push(format!(
                    "settings that may keep it out of the deep states longer than needed: {}",
                    suspects.join(", ")
                ));
            }
        }
    }
    if let Some(w) = &r.wakeups {
        out.extend(wakeup_finding(w));
    }
    if let (Some(d), Some(s)) = (&r.hours_deep, &r.hours_shallow) {
        out.push(format!(
            "at the wall over the last 30 days: {:.1} W in the {} idle hours the package reached \
             PC6 or deeper, {:.1} W in the {} it did not ({:+.1} W; an association: \
             `--measure` measures a setting's own effect)",
            d.mean_wall_watts,
            d.hours,
            s.mean_wall_watts,
            s.hours,
            d.mean_wall_watts - s.mean_wall_watts
        ));
    }
    out
}

/// `who wakes the CPUs most: service:jellyfin.service (80 % of the tasks' 1000 wake-ups/s);
/// of the interrupts, LOC (Local timer interrupts) (70 % of 1200/s)`.
fn wakeup_finding(w: &super::wakeups::WakeupsView) -> Option<String> {
    let group = w.by_service.first()?;
    let mut line = format!(
        "who wakes the CPUs most: {} ({} of the tasks' {:.0} wake-ups/s over {:.0} s)",
        group.group,
        pct(group.share),
        w.task_wakeups_per_s,
        w.seconds
    );
    if let Some(i) = w.interrupts.first() {
        let _ = write!(
            line,
            "; of the interrupts, {} ({} of {:.0}/s)",
            i.label(),
            pct(i.share),
            w.interrupts_per_s
        );
    }
    Some(line)
}
