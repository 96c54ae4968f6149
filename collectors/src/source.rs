//! Source identity: which collector a sample came from ([`SourceId`]) and the channel names
//! shared by every reader of CPU telemetry ([`channel`]).
//!
//! The text form (`meter:wall`, `cpu`, `rapl`, `ups:nas`, `estimate:wall`) is what the
//! database, the control socket, the MQTT state payload and fleet batches carry; it is
//! written and read here only: everywhere else a source is a [`SourceId`], and a channel is
//! built and recognised with the functions of [`channel`]. A test in `wattson-tests`
//! (`source_literals`) keeps these texts out of the rest of the code.

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

/// Where a sample came from. Displays as, and parses from, its stored text.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SourceId {
    /// A meter at the wall: a serial meter, a smart plug, or a shared line's meters,
    /// by the configured id (`meter:<id>`).
    Meter(String),
    /// CPU telemetry: utilisation, frequency, idle residency (`cpu`).
    Cpu,
    /// RAPL energy counters: CPU package, core, uncore, DRAM (`rapl`).
    Rapl,
    /// hwmon power sensors (`hwmon`).
    Hwmon,
    /// GPU board power and state through NVML or nvidia-smi (`gpu`).
    Gpu,
    /// The BMC's whole-server power reading over IPMI DCMI (`ipmi`).
    Ipmi,
    /// CPU time per control group: systemd services, containers, sessions (`services`).
    Services,
    /// A UPS through NUT's upsd, by its upsd name (`ups:<name>`).
    Ups(String),
    /// The wall power estimated from a component source by the calibrated fit
    /// (`estimate:wall`).
    Estimate,
    /// A fleet host's state message as a whole, where the fleet collector counts the
    /// messages it rejected entire (`state`).
    FleetState,
    /// The spin state of the disks `[[disk]]` names (`disk`; the channel is the disk).
    Disk,
    /// Text no variant above claims: a fleet host's source from a newer wattson, or an old
    /// row. Kept as it came, so it is stored and shown unchanged.
    Other(String),
}

const METER_PREFIX: &str = "meter:";
const UPS_PREFIX: &str = "ups:";
const CPU: &str = "cpu";
const RAPL: &str = "rapl";
const HWMON: &str = "hwmon";
const GPU: &str = "gpu";
const IPMI: &str = "ipmi";
const SERVICES: &str = "services";
const ESTIMATE: &str = "estimate:wall";
const FLEET_STATE: &str = "state";
const DISK: &str = "disk";

impl SourceId {
    /// The meter (or plug, or shared line) with configured id `id`.
    pub fn meter(id: impl Into<String>) -> SourceId {
        SourceId::Meter(id.into())
    }

    /// The UPS upsd knows as `name`.
    pub fn ups(name: impl Into<String>) -> SourceId {
        SourceId::Ups(name.into())
    }

    /// The configured meter id, for a meter.
    pub fn meter_id(&self) -> Option<&str> {
        match self {
            SourceId::Meter(id) => Some(id),
            _ => None,
        }
    }

    /// Whether this is a meter at the wall (serial meter, plug or shared line).
    pub fn is_meter(&self) -> bool {
        matches!(self, SourceId::Meter(_))
    }

    /// The text before and after the variable part, so display and ordering need no
    /// allocation: `("meter:", "wall")`, `("cpu", "")`.
    fn parts(&self) -> (&str, &str) {
        match self {
            SourceId::Meter(id) => (METER_PREFIX, id),
            SourceId::Cpu => (CPU, ""),
            SourceId::Rapl => (RAPL, ""),
            SourceId::Hwmon => (HWMON, ""),
            SourceId::Gpu => (GPU, ""),
            SourceId::Ipmi => (IPMI, ""),
            SourceId::Services => (SERVICES, ""),
            SourceId::Ups(name) => (UPS_PREFIX, name),
            SourceId::Estimate => (ESTIMATE, ""),
            SourceId::FleetState => (FLEET_STATE, ""),
            SourceId::Disk => (DISK, ""),
            SourceId::Other(text) => (text, ""),
        }
    }

    /// Parses stored text; never fails (unknown text is [`SourceId::Other`]).
    pub fn from_text(text: &str) -> SourceId {
        match text {
            CPU => SourceId::Cpu,
            RAPL => SourceId::Rapl,
            HWMON => SourceId::Hwmon,
            GPU => SourceId::Gpu,
            IPMI => SourceId::Ipmi,
            SERVICES => SourceId::Services,
            ESTIMATE => SourceId::Estimate,
            FLEET_STATE => SourceId::FleetState,
            DISK => SourceId::Disk,
            _ => {
                if let Some(id) = text.strip_prefix(METER_PREFIX) {
                    SourceId::Meter(id.to_owned())
                } else if let Some(name) = text.strip_prefix(UPS_PREFIX) {
                    SourceId::Ups(name.to_owned())
                } else {
                    SourceId::Other(text.to_owned())
                }
            }
        }
    }

    /// Bytes held on the heap (for memory bounds on queues of samples).
    pub fn heap_bytes(&self) -> usize {
        match self {
            SourceId::Meter(s) | SourceId::Ups(s) | SourceId::Other(s) => s.capacity(),
            _ => 0,
        }
    }

    /// Whether this source's stored text is `text` (no allocation).
    pub fn is_text(&self, text: &str) -> bool {
        let (a, b) = self.parts();
        text.len() == a.len() + b.len() && text.starts_with(a) && text.ends_with(b)
    }
}

impl fmt::Display for SourceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (a, b) = self.parts();
        // `pad` for the first part keeps width specifiers working on the short names.
        if b.is_empty() {
            f.pad(a)
        } else {
            write!(f, "{a}{b}")
        }
    }
}

impl FromStr for SourceId {
    type Err = std::convert::Infallible;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(SourceId::from_text(s))
    }
}

/// The stored text, parsed (for tests and tools that hold wire text; the daemon builds its
/// sources from the variants).
impl From<&str> for SourceId {
    fn from(text: &str) -> SourceId {
        SourceId::from_text(text)
    }
}

/// Compares with stored text (for tests and tools holding wire text).
impl PartialEq<str> for SourceId {
    fn eq(&self, text: &str) -> bool {
        self.is_text(text)
    }
}

impl PartialEq<&str> for SourceId {
    fn eq(&self, text: &&str) -> bool {
        self.is_text(text)
    }
}

/// Ordered as the stored text is, so listings sort as they always did.
impl Ord for SourceId {
    fn cmp(&self, other: &Self) -> Ordering {
        let ((a1, b1), (a2, b2)) = (self.parts(), other.parts());
        if a1 == a2 {
            return b1.cmp(b2);
        }
        if !a1.starts_with(a2) && !a2.starts_with(a1) {
            // They differ within both first parts: that decides.
            return a1.cmp(a2);
        }
        a1.bytes()
            .chain(b1.bytes())
            .cmp(a2.bytes().chain(b2.bytes()))
    }
}

impl PartialOrd for SourceId {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl serde::Serialize for SourceId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for SourceId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Text;
        impl serde::de::Visitor<'_> for Text {
            type Value = SourceId;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a source name such as meter:wall or cpu")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<SourceId, E> {
                Ok(SourceId::from_text(v))
            }
        }
        d.deserialize_str(Text)
    }
}

/// Channel names of CPU telemetry, as stored: `all`, `mean`, `cpuN`, `all/<state>`,
/// `cpuN/<state>`. The empty channel is the source as a whole.
pub mod channel {
    /// The machine as a whole (CPU busy share, `/proc/stat`'s aggregate line).
    pub const ALL: &str = "all";
    /// The mean over the cores (core frequency).
    pub const MEAN: &str = "mean";
    /// The power a bidirectional source exports (its negative readings, as positive watts),
    /// beside its consumption (channel `""`, 0 W while it exports).
    pub const EXPORT: &str = "export";
    /// An estimated source's error beside its value (the wall estimate's power error).
    pub const ESTIMATE_ERROR: &str = "error";

    const CPU_PREFIX: &str = "cpu";
    const ALL_PREFIX: &str = "all/";

    /// Core `n`: `cpuN`.
    pub fn cpu(n: impl std::fmt::Display) -> String {
        format!("{CPU_PREFIX}{n}")
    }

    /// GPU `n`: `gpuN`.
    pub fn gpu(n: impl std::fmt::Display) -> String {
        format!("gpu{n}")
    }

    /// Whether the channel is one GPU's (`gpuN`).
    pub fn is_gpu(channel: &str) -> bool {
        channel.starts_with("gpu")
    }

    /// `<part>` of the machine as a whole: `all/<part>` (an idle state, a `/proc/stat` field).
    pub fn all(part: &str) -> String {
        format!("{ALL_PREFIX}{part}")
    }

    /// `<part>` of core `n`: `cpuN/<part>`.
    pub fn cpu_part(n: impl std::fmt::Display, part: &str) -> String {
        format!("{CPU_PREFIX}{n}/{part}")
    }

    /// The `<part>` of an `all/<part>` channel.
    pub fn all_part(channel: &str) -> Option<&str> {
        channel.strip_prefix(ALL_PREFIX)
    }

    /// Whether the channel is one core's: `cpuN` or `cpuN/<part>`.
    pub fn is_per_core(channel: &str) -> bool {
        let core = channel.split_once('/').map_or(channel, |(core, _)| core);
        core_digits(core).is_some()
    }

    /// The core number of a bare `cpuN` channel.
    pub fn core_number(channel: &str) -> Option<u32> {
        core_digits(channel)?.parse().ok()
    }

    fn core_digits(channel: &str) -> Option<&str> {
        channel
            .strip_prefix(CPU_PREFIX)
            .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_text_round_trips() {
        for (id, text) in [
            (SourceId::meter("wall"), "meter:wall"),
            (SourceId::meter("a+b"), "meter:a+b"),
            (SourceId::Cpu, "cpu"),
            (SourceId::Rapl, "rapl"),
            (SourceId::Hwmon, "hwmon"),
            (SourceId::Gpu, "gpu"),
            (SourceId::Ipmi, "ipmi"),
            (SourceId::Services, "services"),
            (SourceId::ups("nas"), "ups:nas"),
            (SourceId::Estimate, "estimate:wall"),
            (SourceId::FleetState, "state"),
            (SourceId::Other("warp".into()), "warp"),
        ] {
            assert_eq!(id.to_string(), text);
            assert_eq!(text.parse::<SourceId>().unwrap(), id);
            assert!(id.is_text(text));
            assert!(!id.is_text("x"));
        }
    }

    #[test]
    fn orders_as_the_stored_text() {
        let mut ids = vec![
            SourceId::meter("b"),
            SourceId::Cpu,
            SourceId::meter("a"),
            SourceId::Other("mean".into()),
            SourceId::Other("meter".into()),
            SourceId::Other("meter:a0".into()),
            SourceId::Other("ups".into()),
            SourceId::ups("b"),
            SourceId::Estimate,
            SourceId::Rapl,
        ];
        let mut texts: Vec<String> = ids.iter().map(ToString::to_string).collect();
        ids.sort();
        texts.sort();
        assert_eq!(
            ids.iter().map(ToString::to_string).collect::<Vec<_>>(),
            texts
        );
    }

    #[test]
    fn channels() {
        assert_eq!(channel::cpu(3), "cpu3");
        assert_eq!(channel::all("C6"), "all/C6");
        assert_eq!(channel::cpu_part(3, "C6"), "cpu3/C6");
        assert_eq!(channel::all_part("all/C6"), Some("C6"));
        assert_eq!(channel::all_part("cpu3/C6"), None);
        assert_eq!(channel::core_number("cpu12"), Some(12));
        assert_eq!(channel::core_number("cpu12/C6"), None);
        assert_eq!(channel::core_number("cpu"), None);
        assert!(channel::is_per_core("cpu1/C6"));
        assert!(channel::is_per_core("cpu1"));
        assert!(!channel::is_per_core("cpu/C6"));
        assert!(!channel::is_per_core("cpux"));
        assert!(!channel::is_per_core(channel::ALL));
        assert!(!channel::is_per_core(&channel::all("C6")));
    }
}
