//! RAPL energy counters through powercap sysfs, `class/powercap/intel-rapl:*`
//! (Documentation/power/powercap/powercap.rst). Each zone has `name` (`package-N`, `core`,
//! `uncore`, `dram`, `psys`), `energy_uj` (microjoules, cumulative) and `max_energy_range_uj`
//! (where `energy_uj` wraps). AMD CPUs (kernel 5.11+) use the same `intel-rapl` control type
//! with package and core zones. `intel-rapl-mmio:*` repeats the package zone through MMIO on
//! recent Intel parts and is skipped where the MSR zone of the same name exists.
//!
//! Watts = energy delta (uJ) / elapsed monotonic time (us). `energy_uj` is root-only since
//! Linux 5.10 (CVE-2020-8694), so an unprivileged daemon needs a privileged step to open it.

use crate::SourceId;
use std::io;
use std::path::{Path, PathBuf};

use crate::sysroot::SysRoot;
use crate::{CollectError, Collector, Metric, MonotonicClock, Sample};

use super::{FileSource, RealFiles};
use crate::counter::WrappingCounter;

const SOURCE: SourceId = SourceId::Rapl;
const POWERCAP: &str = "class/powercap";

/// What goes wrong finding or reading RAPL zones.
#[derive(Debug, thiserror::Error)]
pub enum RaplError {
    #[error("no RAPL zones under {dir} (no intel_rapl_msr/rapl driver loaded, or not x86)")]
    NoZones { dir: PathBuf },
    #[error(
        "permission denied reading {path}: energy_uj is root-only since Linux 5.10. Run the \
         wattson unit, whose ExecStartPre=+ step runs `chgrp wattson` and `chmod g+r` on \
         /sys/class/powercap/intel-rapl:*/energy_uj, or run wattson as root"
    )]
    PermissionDenied { path: PathBuf },
    #[error("reading {path}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("parsing {path}: {text:?} is not a number")]
    Parse { path: PathBuf, text: String },
}

impl From<RaplError> for CollectError {
    fn from(e: RaplError) -> Self {
        match e {
            RaplError::Io { path, source } => CollectError::io(path, source),
            RaplError::Parse { path, text } => {
                CollectError::parse(path, format!("{text:?} is not a number"))
            }
            other @ (RaplError::NoZones { .. } | RaplError::PermissionDenied { .. }) => {
                CollectError::Unavailable {
                    source_name: SOURCE.to_string(),
                    detail: other.to_string(),
                }
            }
        }
    }
}

/// One powercap zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Zone {
    /// Sample channel: the zone name, prefixed by its parent's for subzones
    /// (`package-0`, `package-0/core`, `package-1/dram`, `psys`).
    pub channel: String,
    /// The zone directory (`.../intel-rapl:0:1`).
    pub dir: PathBuf,
    /// `max_energy_range_uj`, microjoules; 0 where unreadable.
    pub max_energy_range_uj: u64,
}

fn read_u64(files: &mut dyn FileSource, path: &Path) -> Result<u64, RaplError> {
    let text = files.read_to_string(path).map_err(|source| {
        if source.kind() == io::ErrorKind::PermissionDenied {
            RaplError::PermissionDenied {
                path: path.to_owned(),
            }
        } else {
            RaplError::Io {
                path: path.to_owned(),
                source,
            }
        }
    })?;
    text.trim().parse().map_err(|_| RaplError::Parse {
        path: path.to_owned(),
        text: text.trim().to_owned(),
    })
}

/// Find the RAPL zones under `root`, MMIO duplicates removed, sorted by channel.
pub fn discover(root: &SysRoot, files: &mut dyn FileSource) -> Result<Vec<Zone>, RaplError> {
    let dir = root.sys_path(POWERCAP);
    let entries = std::fs::read_dir(&dir).map_err(|source| match source.kind() {
        io::ErrorKind::NotFound => RaplError::NoZones { dir: dir.clone() },
        _ => RaplError::Io {
            path: dir.clone(),
            source,
        },
    })?;
    // (is_mmio, id path like [0, 1], zone dir)
    let mut found: Vec<(bool, Vec<u32>, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let (mmio, ids) = if let Some(ids) = name.strip_prefix("intel-rapl-mmio:") {
                (true, ids.to_owned())
            } else {
                (false, name.strip_prefix("intel-rapl:")?.to_owned())
            };
            let ids = ids
                .split(':')
                .map(str::parse)
                .collect::<Result<Vec<u32>, _>>()
                .ok()?;
            Some((mmio, ids, e.path()))
        })
        .collect();
    found.sort();
    let name_of = |files: &mut dyn FileSource, dir: &Path| {
        files
            .read_to_string(&dir.join("name"))
            .map(|s| s.trim().to_owned())
            .ok()
    };
    let mut zones: Vec<Zone> = Vec::new();
    for (mmio, ids, zone_dir) in &found {
        let Some(name) = name_of(files, zone_dir) else {
            continue;
        };
        let channel = if ids.len() > 1 {
            let parent = found
                .iter()
                .find(|(m, p, _)| m == mmio && p.as_slice() == &ids[..1])
                .and_then(|(_, _, d)| name_of(files, d))
                .unwrap_or_else(|| format!("zone-{}", ids[0]));
            format!("{parent}/{name}")
        } else {
            name
        };
        // MSR zones sort first; an MMIO zone repeating one of them is the same energy.
        if *mmio && zones.iter().any(|z| z.channel == channel) {
            continue;
        }
        let max = read_u64(files, &zone_dir.join("max_energy_range_uj")).unwrap_or(0);
        zones.push(Zone {
            channel,
            dir: zone_dir.clone(),
            max_energy_range_uj: max,
        });
    }
    if zones.is_empty() {
        return Err(RaplError::NoZones { dir });
    }
    zones.sort_by(|a, b| a.channel.cmp(&b.channel));
    Ok(zones)
}

struct ZoneState {
    zone: Zone,
    energy: PathBuf,
    counter: WrappingCounter,
}

/// Polls RAPL zones and emits [`Metric::Power`] (W) per zone; the first poll emits nothing.
pub struct RaplCollector {
    files: Box<dyn FileSource>,
    clock: MonotonicClock,
    zones: Vec<ZoneState>,
    last: Option<std::time::Duration>,
}

impl std::fmt::Debug for RaplCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let channels: Vec<&str> = self.zones.iter().map(|z| z.zone.channel.as_str()).collect();
        f.debug_struct("RaplCollector")
            .field("zones", &channels)
            .finish_non_exhaustive()
    }
}

impl RaplCollector {
    /// Find the zones under `root` and check `energy_uj` can be read. A
    /// [`RaplError::PermissionDenied`] says how to grant access.
    pub fn new(root: &SysRoot) -> Result<Self, RaplError> {
        Self::with_parts(root, Box::new(RealFiles), crate::monotonic_clock())
    }

    /// As [`RaplCollector::new`], with the file reader and clock injected (tests).
    pub fn with_parts(
        root: &SysRoot,
        mut files: Box<dyn FileSource>,
        clock: MonotonicClock,
    ) -> Result<Self, RaplError> {
        let zones = discover(root, files.as_mut())?;
        let zones: Vec<ZoneState> = zones
            .into_iter()
            .map(|zone| ZoneState {
                energy: zone.dir.join("energy_uj"),
                counter: WrappingCounter::new(zone.max_energy_range_uj),
                zone,
            })
            .collect();
        for z in &zones {
            read_u64(files.as_mut(), &z.energy)?;
        }
        Ok(RaplCollector {
            files,
            clock,
            zones,
            last: None,
        })
    }

    /// The zones being read.
    pub fn zones(&self) -> impl Iterator<Item = &Zone> {
        self.zones.iter().map(|z| &z.zone)
    }
}

impl Collector for RaplCollector {
    fn source(&self) -> &SourceId {
        &SOURCE
    }

    fn scope(&self) -> Option<crate::Scope> {
        Some(crate::Scope::Component)
    }

    fn poll(&mut self, now_ms: i64) -> Result<Vec<Sample>, CollectError> {
        let elapsed = crate::counter::since_last_poll(&mut self.last, (self.clock)());
        let mut out = Vec::with_capacity(self.zones.len());
        for z in &mut self.zones {
            let raw = read_u64(self.files.as_mut(), &z.energy)?;
            let step = z.counter.update(raw);
            if let Some(watts) = crate::counter::microjoule_watts(step, elapsed) {
                out.push(Sample::new(
                    now_ms,
                    SOURCE,
                    Metric::Power,
                    z.zone.channel.as_str(),
                    watts,
                ));
            }
        }
        Ok(out)
    }
}
