//! Interval by interval, from the sampler's batches: each cgroup poll's CPU time per group
//! ([`wattson_collectors::cgroup`]) with the wall's mean power over the same interval, and
//! wattson's own CPU time over it. The result ([`Interval`]) is what [`super::store`] adds
//! to the hour; nothing is estimated here.

use std::time::Duration;

use wattson_collectors::cgroup::{ELAPSED, GROUPS, OTHER, REST, TOTAL};
use wattson_collectors::{Metric, Sample, SourceId};

/// The most wall readings held between two cgroup polls (a 250 ms meter over a 10 min
/// interval is 2,400).
const MAX_WALL_READINGS: usize = 10_000;

/// A group as stored: kind (`service`, ..., `other`, `rest`, `self`) and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GroupKey {
    pub kind: String,
    pub name: String,
}

impl GroupKey {
    pub fn new(kind: &str, name: &str) -> GroupKey {
        GroupKey {
            kind: kind.to_owned(),
            name: name.to_owned(),
        }
    }

    /// The group of a collector channel (`service:jellyfin.service`, `other`, `rest`);
    /// `None` for the host's own channels (`total`, `elapsed`, `groups`).
    pub fn of_channel(channel: &str) -> Option<GroupKey> {
        match channel.split_once(':') {
            Some((kind, name)) => Some(GroupKey::new(kind, name)),
            None if channel == OTHER || channel == REST => Some(GroupKey::new(channel, "")),
            None => None,
        }
    }

    /// Wattson's own process.
    pub fn wattson() -> GroupKey {
        GroupKey::new("self", "wattson")
    }
}

/// One cgroup poll's interval.
#[derive(Debug, Clone, PartialEq)]
pub struct Interval {
    /// End of the interval (the poll), UTC ms.
    pub ts_ms: i64,
    /// s.
    pub elapsed_s: f64,
    /// The host's busy CPU time, s.
    pub busy_cpu_s: f64,
    /// The wall's mean power over the interval, W; `None` without a reading in it.
    pub wall_w: Option<f64>,
    /// CPU time per group, s (the top groups, `other`, `rest`; `self` where known).
    pub groups: Vec<(GroupKey, f64)>,
    /// Groups the walk found.
    pub groups_found: usize,
}

impl Interval {
    /// A group's share of the host's busy CPU time. With no busy time at all, the rest
    /// holds the whole (so the shares always sum to one).
    pub fn share(&self, key: &GroupKey, cpu_s: f64) -> f64 {
        if self.busy_cpu_s > 0.0 {
            (cpu_s / self.busy_cpu_s).clamp(0.0, 1.0)
        } else if key.kind == REST {
            1.0
        } else {
            0.0
        }
    }
}

/// Reads wattson's own CPU time (user + system), cumulative.
pub type SelfClock = Box<dyn FnMut() -> Option<Duration> + Send>;

/// This process's CPU time (`CLOCK_PROCESS_CPUTIME_ID`): no file to read.
pub fn process_cpu_time() -> SelfClock {
    Box::new(|| {
        nix::time::clock_gettime(nix::time::ClockId::CLOCK_PROCESS_CPUTIME_ID)
            .ok()
            .map(Duration::from)
    })
}

/// Turns the sampler's batches into [`Interval`]s.
pub struct Account {
    /// The wall meter's source (`meter:<id>`); `None` without one.
    wall_source: Option<SourceId>,
    wall: Vec<(i64, f64)>,
    self_clock: SelfClock,
    self_last: Option<Duration>,
}

impl Account {
    pub fn new(wall_source: Option<SourceId>, self_clock: SelfClock) -> Account {
        Account {
            wall_source,
            wall: Vec::new(),
            self_clock,
            self_last: None,
        }
    }

    /// Takes the batch's cgroup samples out of it (they are never stored as series) and
    /// returns the intervals they close, in time order.
    pub fn take(&mut self, batch: &mut Vec<Sample>) -> Vec<Interval> {
        if let Some(wall) = &self.wall_source {
            self.wall.extend(
                batch
                    .iter()
                    .filter(|s| s.metric == Metric::Power && s.channel.is_empty())
                    .filter(|s| s.source == *wall && s.value.is_finite() && s.value >= 0.0)
                    .map(|s| (s.ts_ms, s.value)),
            );
            if self.wall.len() > MAX_WALL_READINGS {
                let excess = self.wall.len() - MAX_WALL_READINGS;
                self.wall.drain(..excess);
            }
        }
        let mut polls: Vec<Sample> = Vec::new();
        batch.retain(|s| {
            if s.metric == Metric::CgroupCpu {
                polls.push(s.clone());
                false
            } else {
                true
            }
        });
        let mut out = Vec::new();
        let mut start = 0;
        while start < polls.len() {
            let ts = polls[start].ts_ms;
            let end = polls[start..]
                .iter()
                .position(|s| s.ts_ms != ts)
                .map_or(polls.len(), |n| start + n);
            if let Some(i) = self.interval(&polls[start..end]) {
                out.push(i);
            }
            start = end;
        }
        out
    }

    fn interval(&mut self, poll: &[Sample]) -> Option<Interval> {
        let value = |ch: &str| poll.iter().find(|s| s.channel == ch).map(|s| s.value);
        let ts_ms = poll.first()?.ts_ms;
        let elapsed_s = value(ELAPSED).filter(|e| *e > 0.0)?;
        let busy_cpu_s = value(TOTAL).unwrap_or(0.0).max(0.0);
        let from = ts_ms - (elapsed_s * 1000.0).round() as i64;
        let window: Vec<f64> = self
            .wall
            .iter()
            .filter(|(t, _)| *t > from && *t <= ts_ms)
            .map(|(_, w)| *w)
            .collect();
        self.wall.retain(|(t, _)| *t > ts_ms);
        let wall_w = (!window.is_empty()).then(|| window.iter().sum::<f64>() / window.len() as f64);
        let mut groups: Vec<(GroupKey, f64)> = poll
            .iter()
            .filter_map(|s| GroupKey::of_channel(&s.channel).map(|k| (k, s.value.max(0.0))))
            .collect();
        let now = (self.self_clock)();
        if let (Some(now), Some(last)) = (now, self.self_last) {
            let own = now.saturating_sub(last).as_secs_f64().min(busy_cpu_s);
            groups.push((GroupKey::wattson(), own));
        }
        self.self_last = now;
        Some(Interval {
            ts_ms,
            elapsed_s,
            busy_cpu_s,
            wall_w,
            groups,
            groups_found: value(GROUPS).map_or(0, |g| g.max(0.0) as usize),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cg(ts: i64, ch: &str, v: f64) -> Sample {
        Sample::new(ts, SourceId::Services, Metric::CgroupCpu, ch, v)
    }

    #[test]
    fn an_interval_takes_the_wall_mean_over_its_own_time_and_its_samples_out() {
        let mut own = Duration::from_secs(1);
        let mut account = Account::new(
            Some(SourceId::meter("wall")),
            Box::new(move || {
                own += Duration::from_millis(20);
                Some(own)
            }),
        );
        let wall = |ts: i64, w: f64| Sample::new(ts, SourceId::meter("wall"), Metric::Power, "", w);
        let mut first = vec![cg(10_000, ELAPSED, 10.0), cg(10_000, TOTAL, 1.0)];
        first.extend((1..=10).map(|i| wall(i * 1000, 100.0)));
        assert_eq!(account.take(&mut first).len(), 1);
        assert_eq!(first.len(), 10, "cgroup samples are taken out");
        let mut batch: Vec<Sample> = (11..=20).map(|i| wall(i * 1000, 40.0 + i as f64)).collect();
        batch.push(wall(21_000, 999.0));
        batch.extend([
            cg(20_000, "service:a.service", 0.5),
            cg(20_000, REST, 0.5),
            cg(20_000, TOTAL, 1.0),
            cg(20_000, ELAPSED, 10.0),
        ]);
        let got = account.take(&mut batch);
        assert_eq!(got.len(), 1);
        let i = &got[0];
        assert_eq!(
            i.wall_w,
            Some(55.5),
            "mean of 51..=60 W, not the next interval's"
        );
        assert_eq!(i.groups.len(), 3);
        let own = i
            .groups
            .iter()
            .find(|(k, _)| *k == GroupKey::wattson())
            .unwrap();
        assert!((own.1 - 0.02).abs() < 1e-9);
        assert_eq!(i.share(&GroupKey::new("service", "a.service"), 0.5), 0.5);
    }
}
