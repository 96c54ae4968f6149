//! Idle-state (C-state) residency from cpuidle sysfs, `cpuN/cpuidle/stateK/{name,time,disable}`
//! (Documentation/admin-guide/pm/cpuidle.rst). `time` is the cumulative time spent in the
//! state in microseconds; residency is its delta over the elapsed monotonic interval, a share
//! in 0.0 ..= 1.0.
//!
//! The kernel adds to `time` only when a CPU leaves the state, so a CPU asleep across the
//! whole interval shows 0 and then more than the interval on wake-up. The share is capped at
//! the interval and the excess carried into the following intervals (up to [`MAX_CARRY_US`]),
//! so a long stay is reported late rather than lost: clamping alone would under-report
//! residency on exactly the idle machines it is read on.

use crate::source::channel;
use std::path::{Path, PathBuf};

use crate::sysroot::{SysFile, SysRoot, read_trimmed};

use super::topology::CPU_DIR;

/// Depth of an idle state from its cpuidle name: `POLL` < `C1` < `C1E` < `C3` < `C6` < `C10`.
pub fn state_depth(name: &str) -> (i32, usize) {
    let digits: String = name
        .trim_start_matches(|c: char| !c.is_ascii_digit())
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    (digits.parse().unwrap_or(-1), name.len())
}

/// `stateK` directories under one CPU's `cpuidle` directory, sorted by K.
pub(crate) fn state_dirs(cpuidle: &Path) -> Vec<(usize, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(cpuidle) else {
        return Vec::new();
    };
    let mut dirs: Vec<(usize, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let index = e
                .file_name()
                .to_str()?
                .strip_prefix("state")?
                .parse()
                .ok()?;
            Some((index, e.path()))
        })
        .collect();
    dirs.sort_unstable_by_key(|(i, _)| *i);
    dirs
}

/// The most of a stay carried past the interval it was reported in (30 s): longer than any
/// one stay in a state with the tick on or off, short enough that a counter jump cannot
/// report a CPU asleep for long.
pub const MAX_CARRY_US: u64 = 30_000_000;

#[derive(Debug)]
struct State {
    index: usize,
    name: String,
    /// Index into [`IdleReader::names`], for the `all/<state>` mean.
    slot: usize,
    time: SysFile,
    prev_us: Option<u64>,
    /// Time the counter reported beyond the intervals it was read in, not yet counted (µs).
    carry_us: u64,
    /// `cpuN/<state>`, built once.
    channel: String,
}

#[derive(Debug)]
struct CpuStates {
    cpu: usize,
    states: Vec<State>,
}

/// Why no CPU has an idle state to read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CpuidleError {
    #[error(
        "cpuidle driver {driver} exposes no enabled states under {}/cpuN/cpuidle",
        cpu_dir.display()
    )]
    NoStates { driver: String, cpu_dir: PathBuf },
    #[error(
        "no cpuidle driver (no {}/cpuidle/current_driver, or it says none)",
        cpu_dir.display()
    )]
    NoDriver { cpu_dir: PathBuf },
}

/// Reads the enabled idle states of a set of CPUs; paths and channel names resolved once.
#[derive(Debug)]
pub struct IdleReader {
    base: PathBuf,
    keep_open: bool,
    cpus: Vec<CpuStates>,
    /// Every state name seen on any CPU, in first-seen order.
    names: Vec<String>,
    /// `all/<state>`, parallel to `names`.
    all_channels: Vec<String>,
    /// Per-name (sum of shares, CPUs counted) scratch for the mean.
    sums: Vec<(f64, u32)>,
}

impl IdleReader {
    /// Find the enabled idle states of `cpus`. `Err` says why there are none.
    pub fn discover(root: &SysRoot, cpus: &[usize], keep_open: bool) -> Result<Self, CpuidleError> {
        let mut reader = IdleReader {
            base: root.sys_path(CPU_DIR),
            keep_open,
            cpus: Vec::new(),
            names: Vec::new(),
            all_channels: Vec::new(),
            sums: Vec::new(),
        };
        reader.rediscover(cpus);
        if reader.cpus.iter().all(|c| c.states.is_empty()) {
            let driver = read_trimmed(&reader.base.join("cpuidle/current_driver")).ok();
            return Err(match driver {
                Some(driver) if driver != "none" => CpuidleError::NoStates {
                    driver,
                    cpu_dir: reader.base,
                },
                _ => CpuidleError::NoDriver {
                    cpu_dir: reader.base,
                },
            });
        }
        Ok(reader)
    }

    /// Walk the tree again for `cpus` (after hotplug, a driver change or a state being
    /// enabled or disabled), keeping the previous counter of every state that is still there.
    pub fn rediscover(&mut self, cpus: &[usize]) {
        let mut old = std::mem::take(&mut self.cpus);
        for &cpu in cpus {
            let mut previous = old
                .iter_mut()
                .find(|c| c.cpu == cpu)
                .map(|c| std::mem::take(&mut c.states))
                .unwrap_or_default();
            let mut states = Vec::new();
            for (index, dir) in state_dirs(&self.base.join(format!("cpu{cpu}/cpuidle"))) {
                let Ok(name) = read_trimmed(&dir.join("name")) else {
                    continue;
                };
                // A disabled state is never entered; reporting it would store zeros forever.
                if read_trimmed(&dir.join("disable")).is_ok_and(|d| d == "1") {
                    continue;
                }
                if let Some(pos) = previous
                    .iter()
                    .position(|s| s.index == index && s.name == name)
                {
                    states.push(previous.swap_remove(pos));
                    continue;
                }
                let slot = self.slot(&name);
                states.push(State {
                    index,
                    channel: channel::cpu_part(cpu, &name),
                    name,
                    slot,
                    time: SysFile::new(dir.join("time"), self.keep_open),
                    prev_us: None,
                    carry_us: 0,
                });
            }
            self.cpus.push(CpuStates { cpu, states });
        }
    }

    fn slot(&mut self, name: &str) -> usize {
        if let Some(i) = self.names.iter().position(|n| n == name) {
            return i;
        }
        self.names.push(name.to_owned());
        self.all_channels.push(channel::all(name));
        self.sums.push((0.0, 0));
        self.names.len() - 1
    }

    /// Number of `time` files read per poll.
    pub fn file_count(&self) -> usize {
        self.cpus.iter().map(|c| c.states.len()).sum()
    }

    /// Read every state's counter. With the previous reading and `elapsed_us` (monotonic
    /// microseconds since it) known, emit `(channel, share)` for `cpuN/<state>` and then the
    /// `all/<state>` means. Returns `true` if any file could not be read (the tree changed:
    /// the caller should [`IdleReader::rediscover`]).
    pub fn read(
        &mut self,
        buf: &mut Vec<u8>,
        elapsed_us: Option<u64>,
        mut emit: impl FnMut(&str, f64),
    ) -> bool {
        let mut stale = false;
        for s in &mut self.sums {
            *s = (0.0, 0);
        }
        for cpu in &mut self.cpus {
            for state in &mut cpu.states {
                let Ok(now) = state.time.read_u64(buf) else {
                    state.prev_us = None;
                    state.carry_us = 0;
                    stale = true;
                    continue;
                };
                let prev = state.prev_us.replace(now);
                let (Some(prev), Some(elapsed)) = (prev, elapsed_us) else {
                    continue;
                };
                // A counter going backwards means the state was reset; skip one interval.
                if elapsed == 0 || now < prev {
                    state.carry_us = 0;
                    continue;
                }
                let reported = (now - prev).saturating_add(state.carry_us);
                let counted = reported.min(elapsed);
                state.carry_us = (reported - counted).min(MAX_CARRY_US);
                let share = counted as f64 / elapsed as f64;
                emit(&state.channel, share);
                let sum = &mut self.sums[state.slot];
                sum.0 += share;
                sum.1 += 1;
            }
        }
        for (channel, (sum, n)) in self.all_channels.iter().zip(&self.sums) {
            if *n > 0 {
                emit(channel, sum / f64::from(*n));
            }
        }
        stale
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_depth_orders_real_names() {
        let mut names = vec!["C10", "C1E", "POLL", "C6", "C1", "C3"];
        names.sort_by_key(|n| state_depth(n));
        assert_eq!(names, ["POLL", "C1", "C1E", "C3", "C6", "C10"]);
    }

    /// A CPU asleep across intervals shows nothing and then the whole stay at once, as the
    /// kernel counts a stay on leaving it: the excess over an interval is carried, so the
    /// shares add up to what the counter says instead of losing what the cap cut off.
    #[test]
    fn a_stay_reported_on_wake_up_is_carried_not_lost() {
        let dir = tempfile::tempdir().unwrap();
        let root = SysRoot::new(dir.path().join("sys"), dir.path().join("proc"));
        let state = dir
            .path()
            .join("sys/devices/system/cpu/cpu0/cpuidle/state1");
        std::fs::create_dir_all(&state).unwrap();
        std::fs::write(state.join("name"), "C6\n").unwrap();
        let time = state.join("time");
        let mut reader = IdleReader::discover(&root, &[0], false).unwrap();
        let mut read = |counter_us: u64| {
            std::fs::write(&time, format!("{counter_us}\n")).unwrap();
            let mut got = None;
            reader.read(&mut Vec::new(), Some(100_000), |c, share| {
                if c == "cpu0/C6" {
                    got = Some(share);
                }
            });
            got
        };
        assert_eq!(read(0), None);
        // 100 ms intervals, 80 % asleep in truth, reported in a burst: nothing for two
        // intervals, then three intervals' 240 ms at once, then 80 ms an interval.
        let shares: Vec<f64> = [0, 0, 240, 320, 400, 480, 560, 640, 720, 800, 880]
            .into_iter()
            .map(|ms| read(ms * 1000).unwrap())
            .collect();
        assert_eq!(shares[..2], [0.0, 0.0]);
        assert!(shares[2..10].iter().all(|&s| s == 1.0), "{shares:?}");
        // Caught up: the steady 80 %, and over the 1.1 s the 880 ms the counter says.
        assert_eq!(shares[10], 0.8);
        assert!((shares.iter().sum::<f64>() - 8.8).abs() < 1e-9);
        // A jump carries at most MAX_CARRY_US; a counter going backwards (the state was
        // reset) skips an interval and drops whatever was carried.
        assert_eq!(read(1_000_000_000), Some(1.0));
        assert_eq!(read(0), None);
        assert_eq!(read(50_000), Some(0.5));
    }
}
