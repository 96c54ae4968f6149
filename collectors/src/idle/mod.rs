//! What idle is made of, on injected roots: package C-state residency ([`package`], from the
//! residency MSRs under `[host] devfs`), which counters a CPU model has ([`cpu_model`]), and
//! the device power settings that keep a package awake ([`settings`]).
//!
//! Nothing here writes: [`settings`] reads values and says which lower-power value exists;
//! changing one (for `wattson idle --measure`) is the daemon's job, from an allowlist.

pub mod cpu_model;
pub mod package;
pub mod settings;

pub use cpu_model::{CpuIdentity, PackageLimit, PcState, Vendor};
pub use package::{PackageReader, PackageUnavailable};
