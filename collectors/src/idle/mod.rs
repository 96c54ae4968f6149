//! What idle is made of, on injected roots: package C-state residency ([`package`], from the
//! residency MSRs under `[host] devfs`, else the `cstate_pkg` perf PMU: [`perf`]), which counters a CPU model has ([`cpu_model`]), and
//! the device power settings that keep a package awake ([`settings`]), and who wakes the
//! CPUs: each process's and each interrupt line's wake-ups per second ([`wakeups`]), and each
//! disk's spin state and who woke it ([`disks`]).
//!
//! Nothing here writes: [`settings`] reads values and says which lower-power value exists;
//! changing one (for `wattson idle --measure`) is the daemon's job, from an allowlist.

pub mod cpu_model;
pub mod disks;
pub mod errors;
pub mod package;
pub mod perf;
pub mod settings;
pub mod wakeups;

pub use cpu_model::{CpuIdentity, PackageLimit, PcState, Vendor};
pub use package::{PackageReader, PackageUnavailable};
pub use perf::{CounterId, PerfCounters, PerfEventOpen};
