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
