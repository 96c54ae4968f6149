//! NVIDIA GPU readings through `nvidia-smi --query-gpu=... --format=csv` (nvidia-smi(1),
//! "--help-query-gpu"): the fallback where NVML cannot be loaded by wattson itself but the
//! tool works. Same source name, channels and units as [`super::nvml`]: [`Metric::Power`]
//! W (`power.draw`), [`Metric::GpuClock`] MHz (`clocks.current.sm`),
//! [`Metric::GpuUtilisation`] share (`utilization.gpu`, percent / 100), [`Metric::PState`]
//! (`pstate`, `P0` = 0). Columns are found by header name, so the parser also reads
//! captures taken with other column sets, with or without `nounits`.
//!
//! [`Metric::GpuProcesses`] (count) comes from a second query,
//! `--query-compute-apps=gpu_uuid,pid --format=csv,noheader` (one line per compute
//! process, none when the GPUs are bare), matched to GPUs by the `uuid` column. It is best
//! effort: where that query fails or prints something unreadable the count is left out
//! and the poll goes on.

use crate::SourceId;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use super::command::{self, CommandError};
use super::nvml::SOURCE;
use crate::{CollectError, Collector, Metric, Sample, Scope};

/// The columns the collector asks for.
pub const QUERY: &str = "index,uuid,power.draw,clocks.current.sm,utilization.gpu,pstate";

/// The compute-process query: which GPU (by UUID) each process holds a context on.
pub const APPS_QUERY: &str = "gpu_uuid,pid";

/// What goes wrong reading nvidia-smi output.
#[derive(Debug, thiserror::Error)]
pub enum SmiError {
    #[error("nvidia-smi output has no header line")]
    NoHeader,
    #[error("nvidia-smi output line {line}: {detail}")]
    Parse { line: usize, detail: String },
    #[error("nvidia-smi output line {line}: {text:?} is not a number")]
    NotANumber { line: usize, text: String },
    #[error(transparent)]
    Command(#[from] CommandError),
    #[error("{program} failed ({status}): {message}")]
    Failed {
        program: PathBuf,
        status: String,
        message: String,
    },
}

impl From<SmiError> for CollectError {
    fn from(e: SmiError) -> Self {
        let source_name = format!("{SOURCE} (nvidia-smi)");
        let detail = e.to_string();
        match e {
            SmiError::Command(CommandError::Timeout { timeout, .. }) => CollectError::Timeout {
                source_name,
                timeout_ms: timeout.as_millis() as u64,
            },
            SmiError::Command(_) => CollectError::Unavailable {
                source_name,
                detail,
            },
            SmiError::NoHeader | SmiError::Parse { .. } | SmiError::NotANumber { .. } => {
                CollectError::BadFrame {
                    source_name,
                    detail,
                }
            }
            SmiError::Failed { .. } => CollectError::Failed {
                source_name,
                detail,
            },
        }
    }
}

/// One CSV row: one GPU at one instant. `None` where the column is absent or says N/A.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SmiRow {
    /// `index`; the row's position among rows of one query where the column is absent.
    pub index: u32,
    /// `uuid` (`GPU-...`), the key `--query-compute-apps` names GPUs by.
    pub uuid: Option<String>,
    /// `timestamp` as UTC milliseconds (nvidia-smi prints local time; read as if UTC).
    pub timestamp_ms: Option<i64>,
    /// `power.draw`, W.
    pub power_w: Option<f64>,
    /// `clocks.current.sm`, MHz.
    pub sm_clock_mhz: Option<f64>,
    /// `utilization.gpu`, percent.
    pub utilisation_pct: Option<f64>,
    /// `pstate` number (`P8` = 8).
    pub pstate: Option<u32>,
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// `2026/11/29 23:37:22.503` -> milliseconds since the epoch.
fn parse_timestamp(text: &str) -> Option<i64> {
    let (date, time) = text.trim().split_once(' ')?;
    let mut ymd = date.split('/').map(str::parse::<i64>);
    let (year, month, day) = (ymd.next()?.ok()?, ymd.next()?.ok()?, ymd.next()?.ok()?);
    let (hms, frac) = time.split_once('.').unwrap_or((time, "0"));
    let mut clock = hms.split(':').map(str::parse::<i64>);
    let (hour, min, sec) = (
        clock.next()?.ok()?,
        clock.next()?.ok()?,
        clock.next()?.ok()?,
    );
    let millis: i64 = format!("{frac:0<3}").get(..3)?.parse().ok()?;
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || min > 59 || sec > 60 {
        return None;
    }
    let minutes = (days_from_civil(year, month, day) * 24 + hour) * 60 + min;
    Some(minutes * 60_000 + sec * 1000 + millis)
}

/// A number with an optional unit suffix (`76.98`, `76.98 W`, `0 %`); `None` for `N/A`,
/// `[N/A]`, `[Not Supported]` and the like.
fn number(field: &str, line: usize) -> Result<Option<f64>, SmiError> {
    let f = field.trim();
    if f.is_empty() || f.starts_with('[') || f.eq_ignore_ascii_case("n/a") {
        return Ok(None);
    }
    let num = f.split_whitespace().next().unwrap_or(f);
    num.parse::<f64>()
        .map(Some)
        .map_err(|_| SmiError::NotANumber {
            line,
            text: f.to_owned(),
        })
}

/// Parse `--format=csv` output (with its header line; `nounits` or not).
pub fn parse_csv(text: &str) -> Result<Vec<SmiRow>, SmiError> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let (_, header) = lines.next().ok_or(SmiError::NoHeader)?;
    // `power.draw [W]` -> `power.draw`.
    let columns: Vec<String> = header
        .split(',')
        .map(|c| c.split('[').next().unwrap_or(c).trim().to_owned())
        .collect();
    if !columns.iter().any(|c| c == "power.draw") {
        return Err(SmiError::NoHeader);
    }
    let mut rows = Vec::new();
    for (n, line) in lines {
        let line_no = n + 1;
        let fields: Vec<&str> = line.split(',').collect();
        if fields.len() != columns.len() {
            return Err(SmiError::Parse {
                line: line_no,
                detail: format!("{} fields, header has {}", fields.len(), columns.len()),
            });
        }
        let bad = |detail: String| SmiError::Parse {
            line: line_no,
            detail,
        };
        let mut row = SmiRow {
            index: rows.len() as u32,
            ..SmiRow::default()
        };
        for (col, field) in columns.iter().zip(&fields) {
            match col.as_str() {
                "index" => {
                    row.index = field
                        .trim()
                        .parse()
                        .map_err(|_| bad(format!("index {:?}", field.trim())))?;
                }
                "timestamp" => row.timestamp_ms = parse_timestamp(field),
                "uuid" | "gpu_uuid" => {
                    let f = field.trim();
                    row.uuid = (!f.is_empty() && !f.starts_with('[')).then(|| f.to_owned());
                }
                "power.draw" => row.power_w = number(field, line_no)?,
                "clocks.current.sm" | "clocks.sm" => {
                    row.sm_clock_mhz = number(field, line_no)?;
                }
                "utilization.gpu" => row.utilisation_pct = number(field, line_no)?,
                "pstate" => {
                    let f = field.trim();
                    row.pstate = match f.strip_prefix('P') {
                        Some(n) => Some(n.parse().map_err(|_| bad(format!("pstate {f:?}")))?),
                        None => None,
                    };
                }
                _ => {}
            }
        }
        rows.push(row);
    }
    Ok(rows)
}

/// Compute processes per GPU UUID from `--query-compute-apps=gpu_uuid,pid
/// --format=csv,noheader` output (a header line, if present, is skipped). Empty output
/// means no process on any GPU. A PID listed twice for one GPU counts once.
pub fn parse_compute_apps(text: &str) -> Result<BTreeMap<String, u32>, SmiError> {
    let mut seen: BTreeSet<(String, u32)> = BTreeSet::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with("gpu_uuid") {
            continue;
        }
        let bad = |detail: String| SmiError::Parse {
            line: n + 1,
            detail,
        };
        let mut fields = line.split(',').map(str::trim);
        let (Some(uuid), Some(pid), None) = (fields.next(), fields.next(), fields.next()) else {
            return Err(bad(format!("{line:?} is not `gpu_uuid, pid`")));
        };
        if uuid.is_empty() || uuid.starts_with('[') {
            return Err(bad(format!("no GPU UUID in {line:?}")));
        }
        let pid: u32 = pid
            .parse()
            .map_err(|_| bad(format!("pid {pid:?} is not a number")))?;
        seen.insert((uuid.to_owned(), pid));
    }
    let mut counts = BTreeMap::new();
    for (uuid, _) in seen {
        *counts.entry(uuid).or_insert(0) += 1;
    }
    Ok(counts)
}

/// Samples for one query's rows, all stamped `now_ms`. `apps` (from
/// [`parse_compute_apps`]) adds each GPU's process count where the row has a UUID; `None`
/// leaves the count out.
pub fn samples(rows: &[SmiRow], apps: Option<&BTreeMap<String, u32>>, now_ms: i64) -> Vec<Sample> {
    let mut out = Vec::with_capacity(rows.len() * 5);
    for r in rows {
        let channel = crate::source::channel::gpu(r.index);
        let processes = apps
            .zip(r.uuid.as_ref())
            .map(|(a, u)| f64::from(a.get(u).copied().unwrap_or(0)));
        let readings = [
            (Metric::Power, r.power_w),
            (Metric::GpuClock, r.sm_clock_mhz),
            (Metric::GpuUtilisation, r.utilisation_pct.map(|p| p / 100.0)),
            (Metric::PState, r.pstate.map(f64::from)),
            (Metric::GpuProcesses, processes),
        ];
        for (metric, value) in readings {
            if let Some(v) = value {
                out.push(Sample::new(now_ms, SOURCE, metric, channel.as_str(), v));
            }
        }
    }
    out
}

/// Runs `nvidia-smi --query-gpu=QUERY --format=csv,nounits` once per poll.
#[derive(Debug)]
pub struct NvidiaSmiCollector {
    program: PathBuf,
    timeout: Duration,
}

impl NvidiaSmiCollector {
    /// What nvidia-smi's power readings measure: one GPU board.
    pub const SCOPE: Scope = Scope::Component;

    /// `program` is `nvidia-smi` (searched on `PATH`) or a full path; each run is killed
    /// after `timeout`. Runs it once to check it works: a missing binary or a failing
    /// driver is an error here, not at every poll.
    pub fn new(program: impl Into<PathBuf>, timeout: Duration) -> Result<Self, SmiError> {
        let c = NvidiaSmiCollector {
            program: program.into(),
            timeout,
        };
        let rows = c.query()?;
        if rows.is_empty() {
            return Err(SmiError::Failed {
                program: c.program,
                status: "no rows".to_owned(),
                message: "nvidia-smi lists no GPUs".to_owned(),
            });
        }
        Ok(c)
    }

    pub fn scope(&self) -> Scope {
        Self::SCOPE
    }

    fn query(&self) -> Result<Vec<SmiRow>, SmiError> {
        let query = format!("--query-gpu={QUERY}");
        parse_csv(&self.run(&[&query, "--format=csv,nounits"])?)
    }

    /// Compute processes per GPU UUID; an error where the query fails.
    fn query_apps(&self) -> Result<BTreeMap<String, u32>, SmiError> {
        let query = format!("--query-compute-apps={APPS_QUERY}");
        parse_compute_apps(&self.run(&[&query, "--format=csv,noheader"])?)
    }

    /// The program's standard output, or its failure with the first line it printed.
    fn run(&self, args: &[&str]) -> Result<String, SmiError> {
        let out = command::run(&self.program, args, self.timeout)?;
        if !out.status.success() {
            // e.g. "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA
            // driver. Make sure that the latest NVIDIA driver is installed and running."
            return Err(SmiError::Failed {
                program: self.program.clone(),
                status: out.status.to_string(),
                message: out.first_line().to_owned(),
            });
        }
        Ok(out.stdout)
    }
}

impl Collector for NvidiaSmiCollector {
    fn source(&self) -> &SourceId {
        &SOURCE
    }

    fn scope(&self) -> Option<Scope> {
        Some(Self::SCOPE)
    }

    fn poll(&mut self, now_ms: i64) -> Result<Vec<Sample>, CollectError> {
        let rows = self.query()?;
        let apps = if rows.iter().any(|r| r.uuid.is_some()) {
            self.query_apps()
                .map_err(|e| {
                    tracing::debug!(
                        "{SOURCE} (nvidia-smi): {}; process count left out",
                        crate::ErrorChain(&e)
                    );
                })
                .ok()
        } else {
            None
        };
        Ok(samples(&rows, apps.as_ref(), now_ms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_read_as_utc_milliseconds() {
        // 1795995448.867 s is the capture's "idle0 start" (h200-phases.txt).
        assert_eq!(
            parse_timestamp("2026/11/29 23:37:28.867"),
            Some(1_795_995_448_867)
        );
        assert_eq!(parse_timestamp("1970/01/01 00:00:00.5"), Some(500));
        assert_eq!(parse_timestamp("2026/13/01 00:00:00"), None);
        assert_eq!(parse_timestamp("garbage"), None);
    }

    #[test]
    fn units_and_not_available_are_understood() {
        let text = "index, power.draw [W], clocks.current.sm [MHz], utilization.gpu [%], pstate\n\
                    0, 76.98 W, 345 MHz, 0 %, P0\n\
                    1, [N/A], [Not Supported], 50 %, P8\n";
        let rows = parse_csv(text).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].power_w, Some(76.98));
        assert_eq!(rows[0].sm_clock_mhz, Some(345.0));
        assert_eq!(rows[1].index, 1);
        assert_eq!(rows[1].power_w, None);
        assert_eq!(rows[1].pstate, Some(8));
        let s = samples(&rows, None, 7);
        // gpu1 has no power or clock: utilisation and pstate only.
        assert_eq!(s.iter().filter(|s| s.channel == "gpu1").count(), 2);
        let util = s
            .iter()
            .find(|s| s.channel == "gpu1" && s.metric == Metric::GpuUtilisation)
            .unwrap();
        assert_eq!(util.value, 0.5);
    }

    #[test]
    fn compute_apps_count_per_gpu_uuid() {
        // `nvidia-smi --query-compute-apps=gpu_uuid,pid --format=csv,noheader` on two GPUs:
        // two processes on the first (one listed twice), one on the second.
        let text = "GPU-00000000-0000-0000-0000-000000000000, 4242\n\
                    GPU-00000000-0000-0000-0000-000000000000, 4243\n\
                    GPU-00000000-0000-0000-0000-000000000000, 4243\n\
                    GPU-11111111-0000-0000-0000-000000000000, 77\n";
        let apps = parse_compute_apps(text).unwrap();
        assert_eq!(apps["GPU-00000000-0000-0000-0000-000000000000"], 2);
        assert_eq!(apps["GPU-11111111-0000-0000-0000-000000000000"], 1);
        // No process anywhere prints nothing; a header (without noheader) is skipped.
        assert!(parse_compute_apps("").unwrap().is_empty());
        assert!(parse_compute_apps("gpu_uuid, pid\n").unwrap().is_empty());
        let err = parse_compute_apps("No running processes found\n").unwrap_err();
        assert!(matches!(err, SmiError::Parse { line: 1, .. }), "{err}");
        assert!(parse_compute_apps("GPU-0, many\n").is_err());

        let rows = parse_csv(
            "index, uuid, power.draw [W]\n\
             0, GPU-00000000-0000-0000-0000-000000000000, 119.6\n\
             1, GPU-22222222-0000-0000-0000-000000000000, 77.0\n",
        )
        .unwrap();
        let count = |s: &[Sample], ch: &str| {
            s.iter()
                .find(|s| s.channel == ch && s.metric == Metric::GpuProcesses)
                .map(|s| s.value)
        };
        let s = samples(&rows, Some(&apps), 1);
        assert_eq!(count(&s, "gpu0"), Some(2.0));
        assert_eq!(count(&s, "gpu1"), Some(0.0), "a GPU nobody lists has none");
        let s = samples(&rows, None, 1);
        assert_eq!(count(&s, "gpu0"), None, "no query, no count");
    }

    #[test]
    fn bad_rows_name_their_line() {
        let text = "index, power.draw [W]\n0, 70\n1, lots\n";
        let err = parse_csv(text).unwrap_err();
        assert!(err.to_string().contains("line 3"), "{err}");
        assert!(matches!(parse_csv(""), Err(SmiError::NoHeader)));
        assert!(matches!(
            parse_csv("index, power.draw\n0, 1, 2\n"),
            Err(SmiError::Parse { line: 2, .. })
        ));
    }
}
