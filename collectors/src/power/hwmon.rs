//! Power and energy sensors through hwmon sysfs, `class/hwmon/hwmonN/`
//! (Documentation/hwmon/sysfs-interface.rst): `name`, `powerK_input` or `powerK_average`
//! (microwatts), `energyK_input` (microjoules, cumulative), `powerK_label`/`energyK_label`.
//! Typical sources: PSUs (`corsairpsu`), GPUs (`amdgpu` PPT), ACPI power meters
//! (`power_meter`), `amd_energy` on older kernels.
//!
//! Power sensors give [`Metric::Power`] in W directly. Energy sensors give
//! [`Metric::EnergyCounter`] in Wh as read, and [`Metric::Power`] from the delta over
//! elapsed monotonic time (unless a power sensor already has that channel).

use crate::SourceId;
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use crate::sysroot::SysRoot;
use crate::{CollectError, Collector, Metric, MonotonicClock, Sample};

use super::{FileSource, RealFiles};
use crate::counter::WrappingCounter;

const SOURCE: SourceId = SourceId::Hwmon;
const HWMON: &str = "class/hwmon";
const UJ_PER_WH: f64 = 3.6e9;

/// What goes wrong finding hwmon sensors.
#[derive(Debug, thiserror::Error)]
pub enum HwmonError {
    #[error("no hwmon power or energy sensors under {dir}")]
    NoSensors { dir: PathBuf },
    #[error("reading {path}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl From<HwmonError> for CollectError {
    fn from(e: HwmonError) -> Self {
        match e {
            HwmonError::Io { path, source } => CollectError::io(path, source),
            e @ HwmonError::NoSensors { .. } => CollectError::Unavailable {
                source_name: SOURCE.to_string(),
                detail: e.to_string(),
            },
        }
    }
}

/// What a sensor file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SensorKind {
    /// `powerK_input` or `powerK_average`, microwatts.
    Power,
    /// `energyK_input`, microjoules, cumulative.
    Energy,
}

/// One sensor file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sensor {
    /// `<chip name>/<label>`; the label is `powerK`/`energyK` where the chip gives none, and
    /// the chip name gets `-hwmonN` where two chips share a name.
    pub channel: String,
    pub kind: SensorKind,
    pub path: PathBuf,
}

fn read_trim(files: &mut dyn FileSource, path: &Path) -> Option<String> {
    files
        .read_to_string(path)
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
}

/// Find power and energy sensors under `root`, in hwmon order.
pub fn discover(root: &SysRoot, files: &mut dyn FileSource) -> Result<Vec<Sensor>, HwmonError> {
    let dir = root.sys_path(HWMON);
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(HwmonError::NoSensors { dir });
        }
        Err(source) => return Err(HwmonError::Io { path: dir, source }),
    };
    let mut chips: Vec<(u32, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let n = e
                .file_name()
                .to_str()?
                .strip_prefix("hwmon")? // kernel name
                .parse()
                .ok()?;
            Some((n, e.path()))
        })
        .collect();
    chips.sort();
    let named: Vec<(u32, PathBuf, String)> = chips
        .into_iter()
        .filter_map(|(n, d)| {
            let name = read_trim(files, &d.join("name"))?;
            Some((n, d, name))
        })
        .collect();
    let mut sensors = Vec::new();
    for (n, chip, name) in &named {
        let shared = named.iter().filter(|(_, _, other)| other == name).count() > 1;
        let chip_name = if shared {
            format!("{name}-hwmon{n}")
        } else {
            name.clone()
        };
        // index -> (file suffix, path); `_input` wins over `_average`.
        let mut power: BTreeMap<u32, (bool, PathBuf)> = BTreeMap::new();
        let mut energy: BTreeMap<u32, PathBuf> = BTreeMap::new();
        let Ok(entries) = std::fs::read_dir(chip) else {
            continue;
        };
        for entry in entries.filter_map(Result::ok) {
            let Ok(file) = entry.file_name().into_string() else {
                continue;
            };
            if let Some(rest) = file.strip_prefix("power") {
                let (idx, is_input) = if let Some(i) = rest.strip_suffix("_input") {
                    (i, true)
                } else if let Some(i) = rest.strip_suffix("_average") {
                    (i, false)
                } else {
                    continue;
                };
                let Ok(idx) = idx.parse::<u32>() else {
                    continue;
                };
                let slot = power.entry(idx).or_insert((is_input, entry.path()));
                if is_input && !slot.0 {
                    *slot = (true, entry.path());
                }
            } else if let Some(idx) = file
                .strip_prefix("energy")
                .and_then(|r| r.strip_suffix("_input"))
                .and_then(|i| i.parse::<u32>().ok())
            {
                energy.insert(idx, entry.path());
            }
        }
        for (idx, (_, path)) in power {
            let label = read_trim(files, &chip.join(format!("power{idx}_label")))
                .unwrap_or_else(|| format!("power{idx}"));
            sensors.push(Sensor {
                channel: format!("{chip_name}/{label}"),
                kind: SensorKind::Power,
                path,
            });
        }
        for (idx, path) in energy {
            let label = read_trim(files, &chip.join(format!("energy{idx}_label")))
                .unwrap_or_else(|| format!("energy{idx}"));
            sensors.push(Sensor {
                channel: format!("{chip_name}/{label}"),
                kind: SensorKind::Energy,
                path,
            });
        }
    }
    if sensors.is_empty() {
        return Err(HwmonError::NoSensors { dir });
    }
    Ok(sensors)
}

struct SensorState {
    sensor: Sensor,
    counter: WrappingCounter,
    /// Whether to derive watts from this energy counter (no power sensor on the channel).
    derive_power: bool,
}

/// Polls hwmon power and energy sensors.
pub struct HwmonCollector {
    files: Box<dyn FileSource>,
    clock: MonotonicClock,
    sensors: Vec<SensorState>,
    last: Option<std::time::Duration>,
}

impl std::fmt::Debug for HwmonCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let channels: Vec<&str> = self
            .sensors
            .iter()
            .map(|s| s.sensor.channel.as_str())
            .collect();
        f.debug_struct("HwmonCollector")
            .field("sensors", &channels)
            .finish_non_exhaustive()
    }
}

impl HwmonCollector {
    pub fn new(root: &SysRoot) -> Result<Self, HwmonError> {
        Self::with_parts(root, Box::new(RealFiles), crate::monotonic_clock())
    }

    /// As [`HwmonCollector::new`], with the file reader and clock injected (tests).
    pub fn with_parts(
        root: &SysRoot,
        mut files: Box<dyn FileSource>,
        clock: MonotonicClock,
    ) -> Result<Self, HwmonError> {
        let found = discover(root, files.as_mut())?;
        let sensors = found
            .iter()
            .map(|s| SensorState {
                derive_power: s.kind == SensorKind::Energy
                    && !found
                        .iter()
                        .any(|p| p.kind == SensorKind::Power && p.channel == s.channel),
                sensor: s.clone(),
                // hwmon energy counters are 64-bit and do not wrap in practice.
                counter: WrappingCounter::new(0),
            })
            .collect();
        Ok(HwmonCollector {
            files,
            clock,
            sensors,
            last: None,
        })
    }

    pub fn sensors(&self) -> impl Iterator<Item = &Sensor> {
        self.sensors.iter().map(|s| &s.sensor)
    }
}

impl Collector for HwmonCollector {
    fn source(&self) -> &SourceId {
        &SOURCE
    }

    fn scope(&self) -> Option<crate::Scope> {
        Some(crate::Scope::Component)
    }

    fn poll(&mut self, now_ms: i64) -> Result<Vec<Sample>, CollectError> {
        let elapsed = crate::counter::since_last_poll(&mut self.last, (self.clock)());
        let mut out = Vec::with_capacity(self.sensors.len() * 2);
        let mut first_err = None;
        for s in &mut self.sensors {
            let path = &s.sensor.path;
            let text = match self.files.read_to_string(path) {
                Ok(text) => text,
                // A GPU asleep or a PSU unplugged answers with an error: skip this sensor.
                Err(e) => {
                    first_err.get_or_insert_with(|| CollectError::io(path, e));
                    continue;
                }
            };
            let Ok(raw) = text.trim().parse::<u64>() else {
                first_err.get_or_insert_with(|| {
                    CollectError::parse(path, format!("{:?} is not a number", text.trim()))
                });
                continue;
            };
            let channel = s.sensor.channel.as_str();
            match s.sensor.kind {
                SensorKind::Power => {
                    out.push(Sample::new(
                        now_ms,
                        SOURCE,
                        Metric::Power,
                        channel,
                        raw as f64 / 1e6,
                    ));
                }
                SensorKind::Energy => {
                    out.push(Sample::new(
                        now_ms,
                        SOURCE,
                        Metric::EnergyCounter,
                        channel,
                        raw as f64 / UJ_PER_WH,
                    ));
                    let step = s.counter.update(raw);
                    if s.derive_power
                        && let Some(watts) = crate::counter::microjoule_watts(step, elapsed)
                    {
                        out.push(Sample::new(now_ms, SOURCE, Metric::Power, channel, watts));
                    }
                }
            }
        }
        match first_err {
            Some(e) if out.is_empty() => Err(e),
            Some(e) => {
                tracing::debug!("hwmon: {}", crate::ErrorChain(&e));
                Ok(out)
            }
            None => Ok(out),
        }
    }
}
