//! Power sources other than the serial wall meter, each labelled with the
//! [`crate::Scope`] it measures: RAPL energy counters (powercap) and hwmon power/energy
//! sensors (component), NVIDIA GPUs through NVML or nvidia-smi (component), the BMC's
//! DCMI power reading through ipmitool (wall), and a UPS through NUT's upsd (shared).
//! All report [`crate::Metric::Power`] in watts.

pub mod command;
pub mod hwmon;
pub mod ipmi;
pub mod nut;
pub mod nvidia_smi;
pub mod nvml;
pub mod nvml_ffi;
pub mod rapl;

use std::io;
use std::path::Path;

/// How power readers read files: the real filesystem, or a fake in tests (to simulate
/// `EACCES`, which a test running as root cannot get from file modes).
pub trait FileSource: Send {
    fn read_to_string(&mut self, path: &Path) -> io::Result<String>;
}

/// Reads the real filesystem under the injected root.
#[derive(Debug, Default, Clone, Copy)]
pub struct RealFiles;

impl FileSource for RealFiles {
    fn read_to_string(&mut self, path: &Path) -> io::Result<String> {
        std::fs::read_to_string(path)
    }
}

/// What one reading of a cumulative counter says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CounterStep {
    /// The first reading: nothing to compare with yet.
    First,
    /// A plain increase.
    Diff(u64),
    /// The counter passed its maximum and started again from zero; the corrected increase.
    Wrapped(u64),
    /// It went backwards with no known range (a reset): no increase can be trusted.
    Reset,
}

impl CounterStep {
    /// The increase, where there is one.
    pub fn delta(self) -> Option<u64> {
        match self {
            CounterStep::Diff(d) | CounterStep::Wrapped(d) => Some(d),
            CounterStep::First | CounterStep::Reset => None,
        }
    }
}

/// A cumulative counter that wraps at `max` (RAPL's `max_energy_range_uj`; 0 if unknown).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WrappingCounter {
    max: u64,
    last: Option<u64>,
}

impl WrappingCounter {
    pub fn new(max: u64) -> Self {
        WrappingCounter { max, last: None }
    }

    /// Feed a new raw reading.
    pub fn update(&mut self, raw: u64) -> CounterStep {
        match self.last.replace(raw) {
            None => CounterStep::First,
            Some(last) if raw >= last => CounterStep::Diff(raw - last),
            Some(last) if self.max >= last => CounterStep::Wrapped(self.max - last + raw),
            Some(_) => CounterStep::Reset,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_knows_first_diff_wrap_and_reset() {
        let mut c = WrappingCounter::new(1000);
        assert_eq!(c.update(900), CounterStep::First);
        assert_eq!(c.update(950), CounterStep::Diff(50));
        assert_eq!(c.update(30), CounterStep::Wrapped(80));
        assert_eq!(CounterStep::Wrapped(80).delta(), Some(80));
        let mut unknown = WrappingCounter::new(0);
        unknown.update(10);
        assert_eq!(unknown.update(5), CounterStep::Reset);
        assert_eq!(CounterStep::Reset.delta(), None);
    }
}
