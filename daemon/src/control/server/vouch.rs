//! What the daemon checks before it stores a sweep sent over the control socket: the
//! daemon never stores what it cannot vouch for. Every number is finite and in its range,
//! every text and list bounded, and each level's readings are ones this connection was sent:
//! a level of `n` readings between its start and end needs at least `n` readings of the
//! subscribed source delivered in that window. Units: W, UTC ms.

use wattson_collectors::SourceId;

use super::connection::Subscription;
use crate::control::messages::SweepRecord;
use crate::sweep::outcome::LevelResult;
use crate::sweep::workload::LoopKind;

/// Most levels a sweep may send (every level of three kinds on a 1024-CPU machine).
const MAX_LEVELS: usize = 3 * 1025;
/// Most loops a level may run.
const MAX_LOOPS: usize = 4096;
/// Longest name, characters.
const MAX_NAME: usize = 200;
/// Longest other text (a warning, a method, a map key), characters.
const MAX_TEXT: usize = 1000;
/// Most entries of a level's lists and maps.
const MAX_ENTRIES: usize = 256;

/// Why a sweep sent over the control socket is not stored.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(super) enum VouchError {
    #[error(
        "this connection is not subscribed to a meter, so no reading of the sweep came from \
         this daemon"
    )]
    NotSubscribed,
    #[error("measured on {measured}, but this connection is subscribed to {subscribed}")]
    OtherSource {
        measured: SourceId,
        subscribed: SourceId,
    },
    #[error("the name is empty")]
    EmptyName,
    #[error("{0} levels: a sweep has 1 to {MAX_LEVELS}")]
    Levels(usize),
    #[error("physical_cores {0}")]
    PhysicalCores(usize),
    #[error("settings: too many levels, or no kind or too many")]
    Settings,
    #[error("the sweep ends before it starts")]
    SweepEndsFirst,
    /// One of its levels (`level` named as the report names it, of loop kind `kind`).
    #[error("level {level} ({kind}): {why}")]
    Level {
        level: String,
        kind: LoopKind,
        why: Box<VouchError>,
    },
    #[error("a kind the settings do not name")]
    Kind,
    #[error("{0} loops")]
    Loops(usize),
    #[error("ends before it starts")]
    LevelEndsFirst,
    /// The level ran outside the window this connection was subscribed in (UTC ms).
    #[error(
        "it ran from {started_ms} to {ended_ms} (UTC ms), outside this connection's \
         subscription (since {since_ms})"
    )]
    OutsideSubscription {
        started_ms: i64,
        ended_ms: i64,
        since_ms: i64,
    },
    #[error("mean {mean_w} W outside its range {min_w}..{max_w} W")]
    MeanOutside { mean_w: f64, min_w: f64, max_w: f64 },
    #[error("more than {MAX_ENTRIES} entries in a list")]
    Entries,
    #[error("component {name}: {w}")]
    Component { name: String, w: f64 },
    #[error("component {name} read {lo} to {hi}")]
    ComponentRange { name: String, lo: f64, hi: f64 },
    /// More readings than this connection was sent of `source` while the level ran.
    #[error(
        "{n} readings, but this daemon sent this connection {delivered} readings of {meter} \
         while it ran"
    )]
    Readings {
        n: usize,
        delivered: usize,
        meter: SourceId,
    },
    #[error("{what} is {v}: not a finite number of at least 0")]
    Negative { what: String, v: f64 },
    #[error("{what} is {v}: not a share between 0 and 1")]
    Share { what: String, v: f64 },
    #[error("{what} is longer than {max} characters")]
    TooLong { what: &'static str, max: usize },
    #[error("{what} has control characters")]
    Control { what: &'static str },
}

/// `Ok` when `record` may be stored; else why not.
pub(super) fn check(
    record: &SweepRecord,
    subscription: Option<&Subscription>,
) -> Result<(), VouchError> {
    let Some(sub) = subscription else {
        return Err(VouchError::NotSubscribed);
    };
    if record.source != sub.source {
        return Err(VouchError::OtherSource {
            measured: record.source.clone(),
            subscribed: sub.source.clone(),
        });
    }
    text("name", &record.name, MAX_NAME)?;
    if record.name.trim().is_empty() {
        return Err(VouchError::EmptyName);
    }
    if record.levels.is_empty() || record.levels.len() > MAX_LEVELS {
        return Err(VouchError::Levels(record.levels.len()));
    }
    if !(1..=MAX_LOOPS).contains(&record.physical_cores) {
        return Err(VouchError::PhysicalCores(record.physical_cores));
    }
    let s = &record.settings;
    if s.levels.len() > MAX_LEVELS || s.kinds.is_empty() || s.kinds.len() > 3 {
        return Err(VouchError::Settings);
    }
    for (what, v) in [
        ("ci_watts", s.ci_watts),
        ("ci_percent", s.ci_percent),
        ("max_level_s", s.max_level_s),
    ] {
        non_negative(&format!("settings {what}"), v)?;
    }
    text("settings ci_method", &s.ci_method, MAX_TEXT)?;
    if let Some(g) = &s.governor {
        text("settings governor", g, 64)?;
    }
    let slack = sub
        .interval
        .map_or(2000, |i| 2 * i.as_millis() as i64 + 1000);
    let now = wattson_collectors::now_ms();
    if record.started_ms > record.ended_ms {
        return Err(VouchError::SweepEndsFirst);
    }
    for l in &record.levels {
        level(l, record, sub, slack, now).map_err(|why| VouchError::Level {
            level: crate::analysis::modes::level_name(l.loops as u32),
            kind: l.kind,
            why: Box::new(why),
        })?;
    }
    Ok(())
}

fn level(
    l: &LevelResult,
    record: &SweepRecord,
    sub: &Subscription,
    slack: i64,
    now: i64,
) -> Result<(), VouchError> {
    if !record.settings.kinds.contains(&l.kind) {
        return Err(VouchError::Kind);
    }
    if l.loops > MAX_LOOPS {
        return Err(VouchError::Loops(l.loops));
    }
    if l.started_ms > l.ended_ms {
        return Err(VouchError::LevelEndsFirst);
    }
    if l.started_ms < sub.since_ms - slack || l.ended_ms > now + slack {
        return Err(VouchError::OutsideSubscription {
            started_ms: l.started_ms,
            ended_ms: l.ended_ms,
            since_ms: sub.since_ms,
        });
    }
    for (what, v) in [
        ("mean_w", l.mean_w),
        ("sd_w", l.sd_w),
        ("ci95_w", l.ci95_w),
        ("min_w", l.min_w),
        ("max_w", l.max_w),
        ("settle_s", l.settle_s),
        ("ops_per_s", l.ops_per_s),
    ] {
        non_negative(what, v)?;
    }
    if l.min_w > l.mean_w + 1e-6 || l.mean_w > l.max_w + 1e-6 {
        return Err(VouchError::MeanOutside {
            mean_w: l.mean_w,
            min_w: l.min_w,
            max_w: l.max_w,
        });
    }
    for (what, v) in [
        ("mean_mhz", l.mean_mhz),
        ("busy_cpus", l.busy_cpus),
        ("joules_per_op", l.joules_per_op),
    ] {
        if let Some(v) = v {
            non_negative(what, v)?;
        }
    }
    if let Some(b) = l.busy {
        share("busy", b)?;
    }
    if l.residency.len() > MAX_ENTRIES
        || l.components.len() > MAX_ENTRIES
        || l.component_ranges.len() > MAX_ENTRIES
        || l.warnings.len() > MAX_ENTRIES
    {
        return Err(VouchError::Entries);
    }
    for (k, v) in &l.residency {
        text("a residency state", k, MAX_TEXT)?;
        share(k, *v)?;
    }
    for (k, v) in &l.components {
        text("a component", k, MAX_TEXT)?;
        if !v.is_finite() {
            return Err(VouchError::Component {
                name: k.clone(),
                w: *v,
            });
        }
    }
    for (k, &(lo, hi)) in &l.component_ranges {
        text("a component", k, MAX_TEXT)?;
        if !(lo.is_finite() && hi.is_finite() && lo <= hi) {
            return Err(VouchError::ComponentRange {
                name: k.clone(),
                lo,
                hi,
            });
        }
    }
    for w in &l.warnings {
        text("a warning", w, MAX_TEXT)?;
    }
    text("ci_method", &l.ci_method, MAX_TEXT)?;
    let delivered = sub
        .delivered
        .iter()
        .filter(|&&ts| ts >= l.started_ms - slack && ts <= l.ended_ms + slack)
        .count();
    if l.n < 2 || l.n > delivered {
        return Err(VouchError::Readings {
            n: l.n,
            delivered,
            meter: sub.source.clone(),
        });
    }
    Ok(())
}

fn non_negative(what: &str, v: f64) -> Result<(), VouchError> {
    if v.is_finite() && v >= 0.0 {
        Ok(())
    } else {
        Err(VouchError::Negative {
            what: what.to_owned(),
            v,
        })
    }
}

fn share(what: &str, v: f64) -> Result<(), VouchError> {
    if v.is_finite() && (0.0..=1.0 + 1e-6).contains(&v) {
        Ok(())
    } else {
        Err(VouchError::Share {
            what: what.to_owned(),
            v,
        })
    }
}

fn text(what: &'static str, s: &str, max: usize) -> Result<(), VouchError> {
    if s.chars().count() > max {
        return Err(VouchError::TooLong { what, max });
    }
    if s.chars().any(char::is_control) {
        return Err(VouchError::Control { what });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, VecDeque};
    use std::time::Duration;

    use super::*;
    use crate::control::messages::SweepSettings;
    use crate::sweep::workload::LoopKind;
    use wattson_collectors::SourceId;

    fn subscription(delivered: impl IntoIterator<Item = i64>) -> Subscription {
        let (tx, rx) = tokio::sync::broadcast::channel(1);
        drop(tx);
        Subscription {
            source: SourceId::meter("wall"),
            rx,
            since_ms: 1_000_000,
            interval: Some(Duration::from_millis(100)),
            delivered: delivered.into_iter().collect::<VecDeque<_>>(),
        }
    }

    fn level(loops: usize, start: i64, end: i64, n: usize) -> LevelResult {
        LevelResult {
            kind: LoopKind::Spin,
            loops,
            started_ms: start,
            ended_ms: end,
            settle_s: 0.5,
            n,
            mean_w: 40.0,
            sd_w: 0.3,
            ci95_w: 0.1,
            ci_method: "BatchMeans".into(),
            min_w: 39.0,
            max_w: 41.0,
            mean_mhz: None,
            busy: Some(0.01),
            busy_cpus: Some(0.02),
            residency: BTreeMap::new(),
            ops_per_s: 0.0,
            joules_per_op: None,
            components: BTreeMap::new(),
            component_ranges: BTreeMap::new(),
            pinned: true,
            smt_siblings: false,
            warnings: Vec::new(),
        }
    }

    fn record(levels: Vec<LevelResult>) -> SweepRecord {
        SweepRecord {
            name: "monthly".into(),
            source: SourceId::meter("wall"),
            settings: SweepSettings {
                levels: vec![0, 1],
                kinds: vec![LoopKind::Spin],
                ci_watts: 0.5,
                ci_percent: 1.0,
                min_samples: 20,
                max_level_s: 90.0,
                governor: None,
                ci_method: "batch means".into(),
            },
            physical_cores: 2,
            regression_check: true,
            levels,
            complete: true,
            started_ms: 1_000_000,
            ended_ms: 1_010_000,
        }
    }

    #[test]
    fn levels_need_the_readings_this_connection_was_sent() {
        // 30 readings at 100 ms from 1 000 100 ms on.
        let sub = subscription((1..=30).map(|i| 1_000_000 + 100 * i));
        let ok = record(vec![level(0, 1_000_100, 1_003_000, 25)]);
        check(&ok, Some(&sub)).unwrap();
        let invented = record(vec![level(0, 1_000_100, 1_003_000, 500)]);
        let e = check(&invented, Some(&sub)).unwrap_err().to_string();
        assert!(
            e.contains("500 readings") && e.contains("sent this connection 30"),
            "{e}"
        );
        assert!(
            check(&ok, None)
                .unwrap_err()
                .to_string()
                .contains("not subscribed")
        );
        let before = record(vec![level(0, 900_000, 903_000, 2)]);
        assert!(
            check(&before, Some(&sub))
                .unwrap_err()
                .to_string()
                .contains("outside")
        );
    }

    #[test]
    fn numbers_out_of_range_and_unbounded_text_are_refused() {
        let sub = subscription((1..=30).map(|i| 1_000_000 + 100 * i));
        let mut l = level(0, 1_000_100, 1_003_000, 25);
        l.mean_w = f64::NAN;
        assert!(
            check(&record(vec![l]), Some(&sub))
                .unwrap_err()
                .to_string()
                .contains("mean_w")
        );
        let mut l = level(0, 1_000_100, 1_003_000, 25);
        l.busy = Some(3.0);
        assert!(
            check(&record(vec![l]), Some(&sub))
                .unwrap_err()
                .to_string()
                .contains("busy")
        );
        let mut l = level(0, 1_000_100, 1_003_000, 25);
        l.component_ranges
            .insert("rapl/package-0".into(), (9.0, f64::INFINITY));
        assert!(
            check(&record(vec![l.clone()]), Some(&sub))
                .unwrap_err()
                .to_string()
                .contains("rapl/package-0 read 9 to inf")
        );
        l.component_ranges
            .insert("rapl/package-0".into(), (12.0, 9.0));
        assert!(check(&record(vec![l]), Some(&sub)).is_err());
        let mut r = record(vec![level(0, 1_000_100, 1_003_000, 25)]);
        r.name = "x".repeat(201);
        assert!(
            check(&r, Some(&sub))
                .unwrap_err()
                .to_string()
                .contains("name")
        );
        r.name = "a\u{1b}[31m".into();
        assert!(
            check(&r, Some(&sub))
                .unwrap_err()
                .to_string()
                .contains("control")
        );
        let mut r = record(vec![level(0, 1_000_100, 1_003_000, 25)]);
        r.source = SourceId::meter("other");
        assert!(
            check(&r, Some(&sub))
                .unwrap_err()
                .to_string()
                .contains("subscribed to meter:wall")
        );
    }
}
