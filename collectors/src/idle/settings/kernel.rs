//! Kernel-wide idle settings and the disks: SATA link power management
//! (Documentation/ABI/testing/sysfs-class-scsi_host), the NMI watchdog and the writeback
//! interval (Documentation/admin-guide/sysctl/kernel.rst, vm.rst), HD-audio power save
//! (sound/pci/hda `power_save`, seconds), and each disk's power state from sysfs only.

use super::{Setting, SettingKind, read, sorted_entries};
use crate::sysroot::SysRoot;

pub(super) const NMI_WATCHDOG: &str = "sys/kernel/nmi_watchdog";
pub(super) const DIRTY_WRITEBACK: &str = "sys/vm/dirty_writeback_centisecs";
pub(super) const AUDIO_POWER_SAVE: &str = "module/snd_hda_intel/parameters/power_save";

/// The policy to try: `med_power_with_dipm` saves most of what `min_power` does, and
/// `min_power` (slumber without device-initiated wake) has been reported to cause link errors
/// or data loss on some drives (field notes; the kernel's own default since 4.15 is
/// `med_power_with_dipm` where `CONFIG_SATA_MOBILE_LPM_POLICY=3`).
const ALPM_TARGET: &str = "med_power_with_dipm";

pub(super) fn sata_alpm(root: &SysRoot) -> Vec<Setting> {
    let mut out = Vec::new();
    for (name, host) in sorted_entries(&root.sys_path("class/scsi_host")) {
        let path = host.join("link_power_management_policy");
        let Some(current) = read(&path) else { continue };
        let lower = matches!(
            current.as_str(),
            "max_performance" | "medium_power" | "keep_firmware_settings"
        )
        .then(|| ALPM_TARGET.to_owned());
        out.push(Setting {
            kind: SettingKind::SataAlpm,
            id: format!("{}:{name}", SettingKind::SataAlpm.as_str()),
            label: format!("SATA link power {name}"),
            available: [
                "max_performance",
                "medium_power",
                "med_power_with_dipm",
                "min_power",
            ]
            .map(str::to_owned)
            .to_vec(),
            note: (current == "min_power").then(|| {
                "min_power has been reported to cause link errors on some drives; \
                 med_power_with_dipm saves nearly as much"
                    .to_owned()
            }),
            current,
            lower,
            files: vec![path],
        });
    }
    out
}

pub(super) fn nmi_watchdog(root: &SysRoot) -> Option<Setting> {
    let path = root.proc_path(NMI_WATCHDOG);
    let current = read(&path)?;
    Some(Setting {
        kind: SettingKind::NmiWatchdog,
        id: SettingKind::NmiWatchdog.as_str().to_owned(),
        label: "NMI watchdog".to_owned(),
        lower: (current != "0").then(|| "0".to_owned()),
        available: vec!["0".to_owned(), "1".to_owned()],
        note: Some(
            "a perf-counter interrupt on every CPU; 0 also loses hard-lockup detection".to_owned(),
        ),
        current,
        files: vec![path],
    })
}

pub(super) fn dirty_writeback(root: &SysRoot) -> Option<Setting> {
    let path = root.proc_path(DIRTY_WRITEBACK);
    let current = read(&path)?;
    let centisecs: Option<u64> = current.parse().ok();
    Some(Setting {
        kind: SettingKind::DirtyWriteback,
        id: SettingKind::DirtyWriteback.as_str().to_owned(),
        label: "writeback interval (centiseconds)".to_owned(),
        // PowerTOP's value: wake the flusher every 15 s instead of every 5 s.
        lower: centisecs
            .is_some_and(|c| c != 0 && c < 1500)
            .then(|| "1500".to_owned()),
        available: Vec::new(),
        note: Some(
            "longer means fewer wake-ups, and up to that much more unwritten data lost on a \
             power cut"
                .to_owned(),
        ),
        current,
        files: vec![path],
    })
}

pub(super) fn audio_power_save(root: &SysRoot) -> Option<Setting> {
    let path = root.sys_path(AUDIO_POWER_SAVE);
    let current = read(&path)?;
    Some(Setting {
        kind: SettingKind::AudioPowerSave,
        id: SettingKind::AudioPowerSave.as_str().to_owned(),
        label: "HD-audio codec power save (s)".to_owned(),
        lower: (current == "0").then(|| "1".to_owned()),
        available: Vec::new(),
        note: Some("0 keeps the codec powered; 1 powers it down after a second of silence".into()),
        current,
        files: vec![path],
    })
}

/// Each disk's power state, without touching the device: the runtime PM status of its SCSI
/// device (`suspended` = spun down by the kernel) and its I/O counters. A drive's own standby
/// timer (`hdparm -S`) is invisible to sysfs, and asking the drive (`hdparm -C`) means opening
/// the block device, which wattson never does.
pub(super) fn disks(root: &SysRoot) -> Vec<Setting> {
    let mut out = Vec::new();
    for (name, dev) in sorted_entries(&root.sys_path("block")) {
        if !(name.starts_with("sd") || name.starts_with("nvme") || name.starts_with("hd")) {
            continue;
        }
        let rotational = read(&dev.join("queue/rotational")).is_some_and(|r| r == "1");
        let status = read(&dev.join("device/power/runtime_status"));
        let control = read(&dev.join("device/power/control"));
        let ios = read(&dev.join("stat")).and_then(|s| {
            let f: Vec<u64> = s
                .split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect();
            Some(f.first()? + f.get(4)?)
        });
        let current = match status.as_deref() {
            _ if !rotational => "solid state (nothing to spin down)".to_owned(),
            Some("suspended") => "spun down (runtime suspended)".to_owned(),
            Some("active") if rotational => "spinning as far as the kernel knows".to_owned(),
            Some(s) => format!("runtime status {s}"),
            None => "unknown".to_owned(),
        };
        let mut note = vec![
            if rotational {
                "rotational"
            } else {
                "no spindle"
            }
            .to_owned(),
        ];
        if let Some(n) = ios {
            note.push(format!("{n} reads and writes since boot"));
        }
        if rotational && status.as_deref() != Some("suspended") {
            note.push(
                "a drive's own standby timer (hdparm -S) is not visible in sysfs, and asking the \
                 drive would mean opening it, which can wake it"
                    .to_owned(),
            );
        }
        out.push(Setting {
            kind: SettingKind::Disk,
            id: format!("{}:{name}", SettingKind::Disk.as_str()),
            label: format!("disk {name}"),
            current,
            available: Vec::new(),
            lower: (rotational && control.as_deref() == Some("on"))
                .then(|| "runtime PM auto, with a standby timer (hdparm -S)".to_owned()),
            files: Vec::new(),
            note: Some(note.join("; ")),
        });
    }
    out
}

/// The autosuspend delay a standby measurement sets, ms: long enough for the kernel's own
/// I/O after the write to finish, short against a measuring phase.
pub const STANDBY_DELAY_MS: &str = "1000";

/// Each rotational disk whose SCSI device has runtime power management (`power/control`),
/// as a [`SettingKind::DiskStandby`]: `auto` there lets the kernel stop the drive once it has
/// been idle for `autosuspend_delay_ms` (the way TLP's `AHCI_RUNTIME_PM` spins disks down),
/// where the drive's driver stops it on runtime suspend (`manage_runtime_start_stop`, set by
/// libata since Linux 6.6). `lower` is `auto` only where it is `on` now: a disk the kernel
/// already manages has no spinning state to measure against.
pub(super) fn disk_standby(root: &SysRoot) -> Vec<Setting> {
    let mut out = Vec::new();
    for (name, dev) in sorted_entries(&root.sys_path("block")) {
        if !name.starts_with("sd") || read(&dev.join("queue/rotational")).as_deref() != Some("1") {
            continue;
        }
        let control = dev.join("device/power/control");
        let Some(current) = read(&control) else {
            continue;
        };
        let delay = dev.join("device/power/autosuspend_delay_ms");
        let mut files = vec![control];
        if read(&delay).is_some_and(|d| d.parse::<i64>().is_ok()) {
            files.push(delay);
        }
        out.push(Setting {
            kind: SettingKind::DiskStandby,
            id: format!("{}:{name}", SettingKind::DiskStandby.as_str()),
            label: format!("disk {name} runtime PM"),
            lower: (current == "on").then(|| "auto".to_owned()),
            available: vec!["on".to_owned(), "auto".to_owned()],
            files,
            note: Some(if current == "on" {
                format!(
                    "`wattson idle --measure --only disk_standby:{name}` measures what the disk \
                     costs spun up: it lets the kernel stop the drive after {STANDBY_DELAY_MS} \
                     ms idle, then keeps it spinning, in turn"
                )
            } else {
                "the kernel stops the drive after autosuspend_delay_ms idle, where its driver \
                 manages that (manage_runtime_start_stop)"
                    .to_owned()
            }),
            current,
        });
    }
    out
}
