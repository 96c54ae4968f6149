//! Device and kernel power settings that decide how deep an idle machine sleeps, read from
//! sysfs and procfs under injected roots, each with its current value and the lower-power
//! value that exists (PowerTOP's "tunables", which it marks Good/Bad without measuring them):
//!
//! - PCIe ASPM: the policy (`module/pcie_aspm/parameters/policy`, a list with the current
//!   one in brackets) and each link's states (`bus/pci/devices/*/link/*_aspm`, Linux 5.5+);
//! - runtime power management (`power/control` = `on` | `auto`, `power/runtime_status`) of
//!   PCI devices, USB devices and ATA ports;
//! - SATA link power management (`class/scsi_host/host*/link_power_management_policy`);
//! - the NMI watchdog (`sys/kernel/nmi_watchdog`), the writeback interval
//!   (`sys/vm/dirty_writeback_centisecs`), HD-audio codec power save
//!   (`module/snd_hda_intel/parameters/power_save`);
//! - cpufreq: the governor, the energy-performance preference, turbo (`intel_pstate/no_turbo`
//!   or `cpufreq/boost`);
//! - whether each disk is spun down, from sysfs only (`block/*/device/power/runtime_status`,
//!   `block/*/stat`): a block device is never opened, since asking a sleeping disk anything
//!   can wake it.
//!
//! Values are what the kernel shows, trimmed; a list file yields its bracketed entry.

mod cpufreq;
mod devices;
mod kernel;

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::sysroot::SysRoot;

pub use devices::pci_class_name;
pub use kernel::STANDBY_DELAY_MS;

/// What a setting is; candidates for `wattson idle --measure` are grouped by kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SettingKind {
    /// The kernel-wide PCIe ASPM policy.
    PcieAspm,
    /// One PCIe link's ASPM states (shown; the policy sets them).
    PcieLinkAspm,
    /// Runtime power management of one PCI device.
    RuntimePmPci,
    /// Runtime power management (autosuspend) of one USB device.
    RuntimePmUsb,
    /// Runtime power management of one ATA port.
    RuntimePmAta,
    /// One SATA host's link power management policy.
    SataAlpm,
    NmiWatchdog,
    DirtyWriteback,
    /// HD-audio codec power save timeout, s (0 = never).
    AudioPowerSave,
    CpufreqGovernor,
    /// Energy-performance preference (intel_pstate / amd-pstate active mode).
    Epp,
    Turbo,
    /// Whether a disk is spun down (shown; nothing to set here).
    Disk,
    /// A rotational disk put to standby through its runtime power management, for
    /// `wattson idle --measure` to find what the disk costs spun up: its files are the SCSI
    /// device's `power/control` (`on` keeps it spinning, `auto` lets the kernel stop it) and,
    /// where it reads as a number, `power/autosuspend_delay_ms`, which the measurement sets
    /// short. Measured only when asked, and never kept by `--apply`.
    DiskStandby,
}

impl SettingKind {
    /// Stable name (JSON, `--only`/`--skip` candidate ids).
    pub fn as_str(self) -> &'static str {
        match self {
            SettingKind::PcieAspm => "pcie_aspm",
            SettingKind::PcieLinkAspm => "pcie_link_aspm",
            SettingKind::RuntimePmPci => "runtime_pm_pci",
            SettingKind::RuntimePmUsb => "runtime_pm_usb",
            SettingKind::RuntimePmAta => "runtime_pm_ata",
            SettingKind::SataAlpm => "sata_alpm",
            SettingKind::NmiWatchdog => "nmi_watchdog",
            SettingKind::DirtyWriteback => "dirty_writeback",
            SettingKind::AudioPowerSave => "audio_power_save",
            SettingKind::CpufreqGovernor => "cpufreq_governor",
            SettingKind::Epp => "epp",
            SettingKind::Turbo => "turbo",
            SettingKind::Disk => "disk",
            SettingKind::DiskStandby => "disk_standby",
        }
    }

    /// Every kind, in the order `wattson idle` lists them.
    pub const ALL: [SettingKind; 14] = [
        SettingKind::PcieAspm,
        SettingKind::PcieLinkAspm,
        SettingKind::SataAlpm,
        SettingKind::RuntimePmPci,
        SettingKind::RuntimePmUsb,
        SettingKind::RuntimePmAta,
        SettingKind::NmiWatchdog,
        SettingKind::DirtyWriteback,
        SettingKind::AudioPowerSave,
        SettingKind::CpufreqGovernor,
        SettingKind::Epp,
        SettingKind::Turbo,
        SettingKind::Disk,
        SettingKind::DiskStandby,
    ];
}

/// One setting as read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Setting {
    pub kind: SettingKind,
    /// Unique and stable: the kind, then the device where there is one
    /// (`runtime_pm_pci:0000:03:00.0`, `sata_alpm:host0`, `pcie_aspm`).
    pub id: String,
    /// What it is, in words (`PCIe ASPM policy`, `SATA link power host0`).
    pub label: String,
    /// The current value as the kernel shows it.
    pub current: String,
    /// The values the kernel offers, where it lists them.
    pub available: Vec<String>,
    /// A lower-power value that exists and is not the current one.
    pub lower: Option<String>,
    /// The files holding the setting; writing `lower` into each of them applies it. Empty
    /// for settings that are shown only.
    pub files: Vec<PathBuf>,
    /// A caveat or explanation, where one matters.
    pub note: Option<String>,
}

impl Setting {
    /// Whether the setting is already at its lowest-power value (or has none lower).
    pub fn is_low_power(&self) -> bool {
        self.lower.is_none()
    }
}

/// The current entry of a kernel list file (`[default] performance powersave`), or the
/// whole trimmed text when nothing is bracketed (a value written there by hand reads back
/// plain in a fixture, and some attributes print the bare value).
pub fn current_of_list(text: &str) -> String {
    text.split_whitespace()
        .find_map(|w| w.strip_prefix('[').and_then(|w| w.strip_suffix(']')))
        .map_or_else(|| text.trim().to_owned(), str::to_owned)
}

/// Every entry of a kernel list file, brackets removed.
pub fn list_entries(text: &str) -> Vec<String> {
    text.split_whitespace()
        .map(|w| w.trim_start_matches('[').trim_end_matches(']').to_owned())
        .collect()
}

/// A file's trimmed text, `None` when it cannot be read.
pub(crate) fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_owned())
}

/// The entries of a directory, sorted by name; empty when it is missing.
pub(crate) fn sorted_entries(dir: &Path) -> Vec<(String, PathBuf)> {
    let mut out: Vec<(String, PathBuf)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|e| Some((e.file_name().into_string().ok()?, e.path())))
        .collect();
    out.sort_by_key(|e| natural_key(&e.0));
    out
}

/// Sort `host10` after `host9`.
fn natural_key(name: &str) -> (String, u64) {
    let digits = name.len() - name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    let (head, tail) = name.split_at(name.len() - digits);
    (head.to_owned(), tail.parse().unwrap_or(0))
}

/// Every power setting this machine shows, in [`SettingKind::ALL`] order. Never fails:
/// what a machine lacks is simply not listed (see [`absent`] for the words).
pub fn read_all(root: &SysRoot) -> Vec<Setting> {
    let mut out = Vec::new();
    out.extend(devices::aspm_policy(root));
    out.extend(devices::link_aspm(root));
    out.extend(kernel::sata_alpm(root));
    out.extend(devices::runtime_pm(root));
    out.extend(kernel::nmi_watchdog(root));
    out.extend(kernel::dirty_writeback(root));
    out.extend(kernel::audio_power_save(root));
    out.extend(cpufreq::settings(root));
    out.extend(kernel::disks(root));
    out.extend(kernel::disk_standby(root));
    out.sort_by_key(|s| SettingKind::ALL.iter().position(|k| *k == s.kind));
    out
}

/// For each kind with nothing to show, why (the file it looked for).
pub fn absent(root: &SysRoot, settings: &[Setting]) -> Vec<(SettingKind, String)> {
    let missing = |kind: SettingKind, what: String| {
        (!settings.iter().any(|s| s.kind == kind)).then_some((kind, what))
    };
    let p = |rel: &str| root.sys_path(rel).display().to_string();
    let q = |rel: &str| root.proc_path(rel).display().to_string();
    [
        missing(
            SettingKind::PcieAspm,
            format!(
                "no {} (no PCIe ASPM support in this kernel)",
                p(devices::ASPM_POLICY)
            ),
        ),
        missing(
            SettingKind::SataAlpm,
            format!(
                "no {}/host*/link_power_management_policy (no SATA host)",
                p("class/scsi_host")
            ),
        ),
        missing(
            SettingKind::RuntimePmPci,
            format!("no {}/*/power/control", p("bus/pci/devices")),
        ),
        missing(
            SettingKind::NmiWatchdog,
            format!("no {}", q(kernel::NMI_WATCHDOG)),
        ),
        missing(
            SettingKind::DirtyWriteback,
            format!("no {}", q(kernel::DIRTY_WRITEBACK)),
        ),
        missing(
            SettingKind::AudioPowerSave,
            format!(
                "no {} (no HD-audio driver loaded)",
                p(kernel::AUDIO_POWER_SAVE)
            ),
        ),
        missing(
            SettingKind::CpufreqGovernor,
            format!(
                "no {}/cpu*/cpufreq (no cpufreq driver: usual in virtual machines)",
                p("devices/system/cpu")
            ),
        ),
        missing(SettingKind::Disk, format!("no disks under {}", p("block"))),
    ]
    .into_iter()
    .flatten()
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_files_give_their_bracketed_entry_or_the_plain_value() {
        let policy = "[default] performance powersave powersupersave\n";
        assert_eq!(current_of_list(policy), "default");
        assert_eq!(
            list_entries(policy),
            ["default", "performance", "powersave", "powersupersave"]
        );
        assert_eq!(current_of_list("powersave\n"), "powersave");
    }

    #[test]
    fn names_sort_naturally() {
        let dir = tempfile::tempdir().unwrap();
        for n in ["host10", "host2", "host1"] {
            std::fs::create_dir(dir.path().join(n)).unwrap();
        }
        let names: Vec<String> = sorted_entries(dir.path())
            .into_iter()
            .map(|e| e.0)
            .collect();
        assert_eq!(names, ["host1", "host2", "host10"]);
    }
}
