//! Samples: one typed measurement from one source at one instant.

use serde::{Deserialize, Serialize};

use crate::SourceId;

/// The unit a sample's value is in. Values never travel as strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    Watt,
    Volt,
    Ampere,
    /// Dimensionless ratio, e.g. power factor.
    Ratio,
    Hertz,
    /// Energy in watt-hours.
    WattHour,
    /// Share of an interval, 0.0 ..= 1.0 (utilisation, C-state residency).
    Share,
    Megahertz,
    /// Dimensionless count.
    Count,
    /// Seconds (CPU time).
    Second,
}

impl Unit {
    /// Short symbol for tables and storage.
    pub fn symbol(self) -> &'static str {
        match self {
            Unit::Watt => "W",
            Unit::Volt => "V",
            Unit::Ampere => "A",
            Unit::Ratio => "",
            Unit::Hertz => "Hz",
            Unit::WattHour => "Wh",
            Unit::Share => "share",
            Unit::Megahertz => "MHz",
            Unit::Count => "count",
            Unit::Second => "s",
        }
    }
}

/// What a sample measures. The unit follows from the metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Active power, W.
    Power,
    /// RMS voltage, V.
    Voltage,
    /// RMS current, A.
    Current,
    /// Power factor, 0..1.
    PowerFactor,
    /// Mains frequency, Hz.
    Frequency,
    /// A device's own cumulative energy counter, Wh (as the device reports it: it may reset).
    EnergyCounter,
    /// Energy counted since the collector started, Wh: monotonic across device counter
    /// resets and wraps (derived from `EnergyCounter`).
    EnergyTotal,
    /// CPU busy share of the interval (1 - idle - iowait), 0..1. Channel: `all` or `cpuN`.
    CpuBusy,
    /// CPU time share of one /proc/stat field. Channel: `all/<field>` or `cpuN/<field>`.
    CpuTime,
    /// Core frequency, MHz. Channel: `cpuN` or `mean`.
    CoreFrequency,
    /// Share of the interval spent in one idle state. Channel: `cpuN/<state>` or `all/<state>`.
    IdleResidency,
    /// Share of the sample period a GPU kernel was running (NVML `utilization.gpu`), 0..1.
    /// Channel: `gpuN`.
    GpuUtilisation,
    /// GPU streaming-multiprocessor clock, MHz. Channel: `gpuN`.
    GpuClock,
    /// GPU performance state number (0 = P0, fastest; 15 = P15, slowest). Channel: `gpuN`.
    PState,
    /// Compute processes holding a context on a GPU (NVML's running compute processes,
    /// nvidia-smi's `--query-compute-apps`), a count. An idle GPU with one resident draws
    /// far more than a bare one (the SM clock is held up). Channel: `gpuN`.
    GpuProcesses,
    /// Share of the interval a CPU package spent in one package C-state (`PC2` .. `PC10`),
    /// from the package residency counters against the TSC, 0..1. Channel: `all/<state>`
    /// (the mean over packages) and, with more than one package, `packageN/<state>`.
    PackageResidency,
    /// Readings a source rejected as implausible since its collector started, a count
    /// (cumulative; it restarts at zero with the daemon). Channel: the reason
    /// ([`crate::plausibility::Reason::as_str`]).
    Rejected,
    /// CPU time a control group used since the previous poll, s (the `groups` channel is a
    /// count). Channel: `<kind>:<name>`, `other`, `rest`, `total`, `elapsed`, `groups`
    /// ([`crate::cgroup`]). Accounted per service by the daemon, never stored as a series.
    CgroupCpu,
    /// Share of the interval a disk was spun up (not in standby), 0..1, from its spin state
    /// as the daemon follows it (`[[disk]]`). Channel: the disk (`sda`).
    DiskSpunUp,
}

impl Metric {
    /// The unit of this metric's values.
    pub fn unit(self) -> Unit {
        match self {
            Metric::Power => Unit::Watt,
            Metric::Voltage => Unit::Volt,
            Metric::Current => Unit::Ampere,
            Metric::PowerFactor => Unit::Ratio,
            Metric::Frequency => Unit::Hertz,
            Metric::EnergyCounter | Metric::EnergyTotal => Unit::WattHour,
            Metric::CpuBusy
            | Metric::CpuTime
            | Metric::IdleResidency
            | Metric::GpuUtilisation
            | Metric::PackageResidency
            | Metric::DiskSpunUp => Unit::Share,
            Metric::CoreFrequency | Metric::GpuClock => Unit::Megahertz,
            Metric::PState | Metric::GpuProcesses | Metric::Rejected => Unit::Count,
            Metric::CgroupCpu => Unit::Second,
        }
    }

    /// Stable name used in storage and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Metric::Power => "power",
            Metric::Voltage => "voltage",
            Metric::Current => "current",
            Metric::PowerFactor => "power_factor",
            Metric::Frequency => "frequency",
            Metric::EnergyCounter => "energy_counter",
            Metric::EnergyTotal => "energy_total",
            Metric::CpuBusy => "cpu_busy",
            Metric::CpuTime => "cpu_time",
            Metric::CoreFrequency => "core_frequency",
            Metric::IdleResidency => "idle_residency",
            Metric::GpuUtilisation => "gpu_utilisation",
            Metric::GpuClock => "gpu_clock",
            Metric::PState => "pstate",
            Metric::GpuProcesses => "gpu_processes",
            Metric::PackageResidency => "package_residency",
            Metric::Rejected => "rejected",
            Metric::CgroupCpu => "cgroup_cpu",
            Metric::DiskSpunUp => "disk_spun_up",
        }
    }

    /// Inverse of [`Metric::as_str`].
    pub fn parse(name: &str) -> Option<Metric> {
        [
            Metric::Power,
            Metric::Voltage,
            Metric::Current,
            Metric::PowerFactor,
            Metric::Frequency,
            Metric::EnergyCounter,
            Metric::EnergyTotal,
            Metric::CpuBusy,
            Metric::CpuTime,
            Metric::CoreFrequency,
            Metric::IdleResidency,
            Metric::GpuUtilisation,
            Metric::GpuClock,
            Metric::PState,
            Metric::GpuProcesses,
            Metric::PackageResidency,
            Metric::Rejected,
            Metric::CgroupCpu,
            Metric::DiskSpunUp,
        ]
        .into_iter()
        .find(|m| m.as_str() == name)
    }
}

/// One measurement.
///
/// `source` names where it came from; `channel` says which part of the source (`cpu3`,
/// `cpu3/C6`, `package-0`, built with [`crate::source::channel`]; empty for the source as a
/// whole).
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// UTC milliseconds since the Unix epoch.
    pub ts_ms: i64,
    pub source: SourceId,
    pub metric: Metric,
    pub channel: String,
    pub value: f64,
}

impl Sample {
    pub fn new(
        ts_ms: i64,
        source: impl Into<SourceId>,
        metric: Metric,
        channel: impl Into<String>,
        value: f64,
    ) -> Self {
        Sample {
            ts_ms,
            source: source.into(),
            metric,
            channel: channel.into(),
            value,
        }
    }

    pub fn unit(&self) -> Unit {
        self.metric.unit()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metric_names_round_trip() {
        for m in [
            Metric::Power,
            Metric::IdleResidency,
            Metric::CpuTime,
            Metric::GpuUtilisation,
            Metric::GpuClock,
            Metric::PState,
            Metric::GpuProcesses,
            Metric::PackageResidency,
            Metric::Rejected,
            Metric::CgroupCpu,
            Metric::DiskSpunUp,
        ] {
            assert_eq!(Metric::parse(m.as_str()), Some(m));
        }
        assert_eq!(Metric::parse("bogus"), None);
    }
}
