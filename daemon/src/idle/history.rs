//! The idle history the database holds for a host: package C-state residency over a window
//! (from the daemon's hourly rollups of `package_residency`), each hour's wall draw and CPU
//! busy share, and the newest measured effect of each setting. `wattson idle` and the
//! report's idle section both read it.
//!
//! An hour counts as idle when the CPU's mean busy share was under [`IDLE_BUSY`]; it reached
//! the deep states when PC6 and deeper together held at least [`REACHED`] of it.
//!
//! Units: shares 0..1, watts (W), UTC milliseconds.

use serde::Serialize;
use wattson_collectors::idle::PcState;
use wattson_collectors::source::channel;
use wattson_collectors::{Metric, SourceId};

use super::explain::REACHED;
use super::store::Effect;
use crate::store::{Resolution, SeriesFilter, Store, StoreError};

/// Hours with a mean CPU busy share below this are idle hours (10 %).
pub const IDLE_BUSY: f64 = 0.10;

/// One hour of history.
#[derive(Debug, Clone, PartialEq)]
pub struct IdleHour {
    /// Start of the hour, UTC ms.
    pub hour_ms: i64,
    /// Mean wall power, W.
    pub wall_w: Option<f64>,
    /// Mean share of the hour in PC6 and deeper, 0..1.
    pub deep_share: f64,
    /// Mean CPU busy share, 0..1.
    pub busy: Option<f64>,
}

/// What the database holds for the section.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct IdleInput {
    /// Mean share of each package state over the window (sample-weighted), shallowest first.
    pub states: Vec<(String, f64)>,
    pub hours: Vec<IdleHour>,
    /// The newest measured effect of each setting on this host.
    pub effects: Vec<Effect>,
    /// Who woke the CPUs over the window, as `wattson run` stored it.
    pub wakeups: Option<crate::idle::wakeup_hours::StoredWakeups>,
    /// Each disk's spin state over the window, as `wattson run` stored it (unpriced).
    pub disks: Vec<crate::idle::disk_hours::StoredDisk>,
    /// Every idle hour (CPU under [`IDLE_BUSY`]) with a wall reading, package states or
    /// not: `(start UTC ms, mean W)`, oldest first.
    pub idle_wall: Vec<(i64, f64)>,
}

impl IdleInput {
    pub fn is_empty(&self) -> bool {
        self.states.is_empty()
            && self.effects.is_empty()
            && self.wakeups.is_none()
            && self.disks.is_empty()
    }
}

/// Read the section's data for `host` over `[from_ms, to_ms)`, with the wall draw of the
/// `wall` source (the report's, see [`crate::ledger::energy::wall_power_source`]).
pub fn load(
    store: &Store,
    host: &str,
    wall: Option<&SourceId>,
    from_ms: i64,
    to_ms: i64,
) -> Result<IdleInput, StoreError> {
    let hourly = |filter: SeriesFilter| store.rollups(&filter, Resolution::Hour, from_ms, to_ms);
    let mut states: Vec<(PcState, f64, u64)> = Vec::new();
    let mut deep: std::collections::BTreeMap<i64, f64> = std::collections::BTreeMap::new();
    for (series, rollups) in hourly(
        SeriesFilter::all()
            .host(host)
            .source(&SourceId::Cpu)
            .metric(Metric::PackageResidency),
    )? {
        let Some(state) = channel::all_part(&series.channel).and_then(PcState::parse) else {
            continue;
        };
        let n: u64 = rollups.iter().map(|r| r.n).sum();
        if n == 0 {
            continue;
        }
        let weighted: f64 = rollups.iter().map(|r| r.mean * r.n as f64).sum();
        states.push((state, weighted / n as f64, n));
        if state >= PcState::Pc6 {
            for r in &rollups {
                *deep.entry(r.bucket_ms).or_default() += r.mean;
            }
        }
    }
    states.sort_by_key(|s| s.0);
    let mean_by_hour =
        |filter: SeriesFilter| -> Result<std::collections::BTreeMap<i64, f64>, StoreError> {
            Ok(hourly(filter)?
                .into_iter()
                .next()
                .map(|(_, r)| r.into_iter().map(|x| (x.bucket_ms, x.mean)).collect())
                .unwrap_or_default())
        };
    let wall = match wall {
        Some(w) => mean_by_hour(
            SeriesFilter::all()
                .host(host)
                .source(w)
                .metric(Metric::Power)
                .channel(""),
        )?,
        None => std::collections::BTreeMap::new(),
    };
    let busy = mean_by_hour(
        SeriesFilter::all()
            .host(host)
            .source(&SourceId::Cpu)
            .metric(Metric::CpuBusy)
            .channel(channel::ALL),
    )?;
    let hours = if states.is_empty() {
        Vec::new()
    } else {
        // Every hour with package samples (a deep share of 0 is a shallow hour).
        let with_package: std::collections::BTreeSet<i64> = hourly(
            SeriesFilter::all()
                .host(host)
                .source(&SourceId::Cpu)
                .metric(Metric::PackageResidency)
                .channel(&channel::all(states[0].0.name())),
        )?
        .into_iter()
        .flat_map(|(_, r)| r.into_iter().map(|x| x.bucket_ms))
        .collect();
        with_package
            .into_iter()
            .map(|h| IdleHour {
                hour_ms: h,
                wall_w: wall.get(&h).copied(),
                deep_share: deep.get(&h).copied().unwrap_or(0.0),
                busy: busy.get(&h).copied(),
            })
            .collect()
    };
    let idle_wall = wall
        .iter()
        .filter(|(h, _)| busy.get(*h).is_some_and(|b| *b < IDLE_BUSY))
        .map(|(h, w)| (*h, *w))
        .collect();
    Ok(IdleInput {
        idle_wall,
        states: states
            .into_iter()
            .map(|(s, share, _)| (s.name().to_owned(), share))
            .collect(),
        hours,
        effects: crate::idle::store::latest_effects(store, host)?,
        wakeups: crate::idle::wakeup_hours::load(
            store,
            host,
            from_ms,
            to_ms,
            crate::idle::wakeups::TOP,
        )?,
        disks: crate::idle::disk_hours::load(store, host, from_ms, to_ms)?,
    })
}

/// A group of idle hours.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HoursGroup {
    pub hours: usize,
    /// Mean wall power over those hours, W (measured at the wall).
    pub mean_wall_watts: f64,
}

fn group(hours: &[&IdleHour]) -> Option<HoursGroup> {
    let watts: Vec<f64> = hours.iter().filter_map(|h| h.wall_w).collect();
    (!watts.is_empty()).then(|| HoursGroup {
        hours: watts.len(),
        mean_wall_watts: watts.iter().sum::<f64>() / watts.len() as f64,
    })
}

/// The idle hours (CPU under [`IDLE_BUSY`]) in which the package reached PC6 or deeper, and
/// those in which it did not, each with its mean wall draw.
pub fn hour_groups(hours: &[IdleHour]) -> (Option<HoursGroup>, Option<HoursGroup>) {
    let idle: Vec<&IdleHour> = hours
        .iter()
        .filter(|h| h.busy.is_none_or(|b| b < IDLE_BUSY))
        .collect();
    let (deep, shallow): (Vec<&IdleHour>, Vec<&IdleHour>) =
        idle.into_iter().partition(|h| h.deep_share >= REACHED);
    (group(&deep), group(&shallow))
}
