//! CPU utilisation from the `cpu` lines of `/proc/stat` (Documentation/filesystems/proc.rst,
//! "1.7 Miscellaneous kernel statistics in /proc/stat"). Fields are cumulative `USER_HZ` ticks;
//! we report each field's share of the interval and `busy = 1 - (idle + iowait) / total`.
//!
//! `guest` and `guest_nice` are already counted inside `user` and `nice`, so the interval's
//! total is the sum of the first eight fields. Counters can go backwards (CPU hotplug, the
//! nohz idle/iowait accounting): such an interval is skipped for that CPU, never reported.

use std::path::PathBuf;

use crate::source::channel;
use crate::sysroot::{SysFile, SysRoot};
use crate::{CollectError, Metric};

/// `/proc/stat` field names, in column order.
pub const FIELDS: [&str; 10] = [
    "user",
    "nice",
    "system",
    "idle",
    "iowait",
    "irq",
    "softirq",
    "steal",
    "guest",
    "guest_nice",
];

/// Fields summed for the interval's total (all but `guest` and `guest_nice`).
const TOTAL_FIELDS: usize = 8;
const IDLE: usize = 3;
const IOWAIT: usize = 4;

/// One `cpu` line: cumulative ticks per field (missing trailing fields on old kernels are 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuTimes(pub [u64; 10]);

/// Shares of one interval: each field's share of the total, and the busy share.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shares {
    pub fields: [f64; 10],
    pub busy: f64,
}

impl CpuTimes {
    /// The shares between `prev` and `self`, or `None` when no time passed or a counter went
    /// backwards.
    pub fn shares_since(&self, prev: &CpuTimes) -> Option<Shares> {
        let mut delta = [0u64; 10];
        for (d, (now, before)) in delta.iter_mut().zip(self.0.iter().zip(&prev.0)) {
            *d = now.checked_sub(*before)?;
        }
        let total: u64 = delta[..TOTAL_FIELDS].iter().sum();
        if total == 0 {
            return None;
        }
        let busy_ticks = total.saturating_sub(delta[IDLE] + delta[IOWAIT]);
        let total = total as f64;
        let fields = delta.map(|d| (d as f64 / total).clamp(0.0, 1.0));
        let busy = busy_ticks as f64 / total;
        Some(Shares { fields, busy })
    }
}

/// The prefix of `/proc/stat`'s CPU lines (`cpu`, `cpuN`).
const PROC_STAT_CPU: &str = "cpu"; // kernel name

/// Why a `cpu` line of `/proc/stat` cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StatLineError {
    #[error("bad cpu label in line {line:?}")]
    Label { line: String },
    #[error("{word:?} is not a tick count in line {line:?}")]
    Ticks { word: String, line: String },
    #[error("too few fields in line {line:?}")]
    TooFewFields { line: String },
}

/// Why `/proc/stat` cannot give utilisation here.
#[derive(Debug, thiserror::Error)]
pub enum StatError {
    /// It cannot be read.
    #[error("{0}")]
    Read(CollectError),
    #[error("{}: {line}", path.display())]
    Line { path: PathBuf, line: StatLineError },
    #[error("{} has no cpu lines", path.display())]
    NoCpuLines { path: PathBuf },
}

/// Parse the `cpu` lines, calling `emit(None, times)` for the aggregate line and
/// `emit(Some(n), times)` for `cpuN`. Stops at the first line that is not a `cpu` line.
pub fn parse_stat(
    text: &str,
    mut emit: impl FnMut(Option<usize>, CpuTimes),
) -> Result<(), StatLineError> {
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(PROC_STAT_CPU) else {
            break;
        };
        let mut words = rest.split_ascii_whitespace();
        let label = if rest.starts_with(' ') {
            None
        } else {
            let n = words.next().unwrap_or_default();
            Some(n.parse::<usize>().map_err(|_| StatLineError::Label {
                line: line.to_owned(),
            })?)
        };
        let mut times = CpuTimes::default();
        let mut count = 0;
        for (slot, word) in times.0.iter_mut().zip(words) {
            *slot = word.parse().map_err(|_| StatLineError::Ticks {
                word: word.to_owned(),
                line: line.to_owned(),
            })?;
            count += 1;
        }
        if count < 4 {
            return Err(StatLineError::TooFewFields {
                line: line.to_owned(),
            });
        }
        emit(label, times);
    }
    Ok(())
}

#[derive(Debug)]
struct Channels {
    busy: String,
    fields: [String; 10],
}

impl Channels {
    fn new(prefix: &str) -> Self {
        Channels {
            busy: prefix.to_owned(),
            fields: FIELDS.map(|f| format!("{prefix}/{f}")),
        }
    }
}

#[derive(Debug, Default)]
struct Slot {
    prev: Option<CpuTimes>,
    channels: Option<Channels>,
    seen: bool,
}

/// Reads `/proc/stat` and turns counter deltas into shares.
#[derive(Debug)]
pub struct StatReader {
    file: SysFile,
    all: Slot,
    per_cpu: Vec<Slot>,
}

impl StatReader {
    /// Check `/proc/stat` is readable and parseable. `Err` says why not.
    pub fn new(root: &SysRoot, keep_open: bool) -> Result<Self, StatError> {
        let mut reader = StatReader {
            file: SysFile::new(root.proc_path("stat"), keep_open),
            all: Slot {
                channels: Some(Channels::new(channel::ALL)),
                ..Slot::default()
            },
            per_cpu: Vec::new(),
        };
        let mut buf = Vec::new();
        reader.file.read(&mut buf).map_err(StatError::Read)?;
        let mut any = false;
        parse_stat(&String::from_utf8_lossy(&buf), |_, _| any = true).map_err(|line| {
            StatError::Line {
                path: reader.file.path().to_owned(),
                line,
            }
        })?;
        if !any {
            return Err(StatError::NoCpuLines {
                path: reader.file.path().to_owned(),
            });
        }
        Ok(reader)
    }

    /// Whether the last read listed exactly `cpus` (sorted), as `/proc/stat` lists the
    /// online CPUs.
    pub fn lists(&self, cpus: &[usize]) -> bool {
        self.per_cpu
            .iter()
            .enumerate()
            .filter(|(_, slot)| slot.seen)
            .map(|(n, _)| n)
            .eq(cpus.iter().copied())
    }

    /// Read once. With a previous reading, emit `(Metric::CpuBusy, "all" | "cpuN", share)` and
    /// `(Metric::CpuTime, "all/<field>", share)`, plus `cpuN/<field>` when `per_cpu_times`.
    pub fn read(
        &mut self,
        buf: &mut Vec<u8>,
        per_cpu_times: bool,
        mut emit: impl FnMut(Metric, &str, f64),
    ) -> Result<(), CollectError> {
        // The cpu lines come first; the interrupt lines after them can be tens of kilobytes.
        self.file
            .read_until(buf, |b| b.windows(6).any(|w| w == b"\nintr "))?;
        let text = String::from_utf8_lossy(buf);
        for slot in &mut self.per_cpu {
            slot.seen = false;
        }
        let (all, per_cpu) = (&mut self.all, &mut self.per_cpu);
        parse_stat(&text, |label, times| {
            let (slot, fields) = match label {
                None => (&mut *all, true),
                Some(n) => {
                    if per_cpu.len() <= n {
                        per_cpu.resize_with(n + 1, Slot::default);
                    }
                    let slot = &mut per_cpu[n];
                    slot.seen = true;
                    (slot, per_cpu_times)
                }
            };
            let prev = slot.prev.replace(times);
            let Some(shares) = prev.and_then(|p| times.shares_since(&p)) else {
                return;
            };
            let channels = slot.channels.get_or_insert_with(|| {
                Channels::new(&label.map_or_else(|| channel::ALL.to_owned(), channel::cpu))
            });
            emit(Metric::CpuBusy, &channels.busy, shares.busy);
            if fields {
                for (channel, share) in channels.fields.iter().zip(shares.fields) {
                    emit(Metric::CpuTime, channel, share);
                }
            }
        })
        .map_err(|e| CollectError::parse(self.file.path(), e.to_string()))?;
        // A CPU that went offline starts afresh when it returns.
        for slot in &mut self.per_cpu {
            if !slot.seen {
                slot.prev = None;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_exclude_guest_from_the_total() {
        let prev = CpuTimes([100, 0, 50, 800, 50, 0, 0, 0, 10, 0]);
        let now = CpuTimes([160, 0, 70, 900, 70, 0, 0, 0, 40, 0]);
        // delta: user 60, system 20, idle 100, iowait 20 -> total 200; guest 30 (inside user).
        let s = now.shares_since(&prev).unwrap();
        assert_eq!(s.fields[0], 0.3);
        assert_eq!(s.fields[3], 0.5);
        assert_eq!(s.fields[8], 0.15);
        assert_eq!(s.busy, 0.4);
    }

    #[test]
    fn counters_going_backwards_or_standing_still_give_nothing() {
        let prev = CpuTimes([100, 0, 50, 800, 50, 0, 0, 0, 0, 0]);
        let back = CpuTimes([110, 0, 60, 790, 50, 0, 0, 0, 0, 0]);
        assert_eq!(back.shares_since(&prev), None);
        assert_eq!(prev.shares_since(&prev), None);
    }

    #[test]
    fn parse_reads_aggregate_and_per_cpu_lines_and_stops_after() {
        let text = "cpu  1 2 3 4 5 6 7 8 9 10\ncpu0 1 1 1 1\ncpu12 2 2 2 2 2 2 2 2\nintr 5 6\n";
        let mut got = Vec::new();
        parse_stat(text, |l, t| got.push((l, t.0))).unwrap();
        assert_eq!(got.len(), 3);
        assert_eq!(got[0], (None, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]));
        assert_eq!(got[1], (Some(0), [1, 1, 1, 1, 0, 0, 0, 0, 0, 0]));
        assert_eq!(got[2].0, Some(12));
        assert!(parse_stat("cpu0 1 x 3 4\n", |_, _| {}).is_err());
        assert!(parse_stat("cpu0 1 2\n", |_, _| {}).is_err());
    }
}
