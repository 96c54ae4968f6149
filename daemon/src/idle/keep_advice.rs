//! How to keep a setting that saved something by hand: `wattson idle --measure` restores
//! every change it made, and prints after its results the line to add for each saver (or
//! `wattson idle --apply` keeps them in a file of its own, [`super::apply`]): a kernel
//! command-line option, a udev rule (systemd udev's `ATTR{...}=` assignment on `add`), a
//! sysctl.d entry, or a tmpfiles.d `w` line (systemd tmpfiles.d(5): write to a file at boot).

use super::trials::Trial;
use wattson_collectors::idle::settings::SettingKind;

/// The lines that make `c` permanent, each with the file it belongs in.
pub fn how_to_keep(c: &Trial) -> Vec<String> {
    let tmpfiles = |c: &Trial| -> Vec<String> {
        c.writes
            .iter()
            .map(|(path, value)| {
                format!(
                    "/etc/tmpfiles.d/wattson-idle.conf: w {} - - - - {value}",
                    path.display()
                )
            })
            .collect()
    };
    match c.kind {
        SettingKind::PcieAspm => vec![
            format!(
                "kernel command line (GRUB_CMDLINE_LINUX_DEFAULT in /etc/default/grub, then \
                 update-grub): pcie_aspm.policy={}",
                c.changed
            ),
            tmpfiles(c).join("\n"),
        ],
        SettingKind::SataAlpm => vec![format!(
            "/etc/udev/rules.d/60-wattson-sata-alpm.rules: ACTION==\"add\", \
             SUBSYSTEM==\"scsi_host\", KERNEL==\"host*\", \
             ATTR{{link_power_management_policy}}=\"{}\"",
            c.changed
        )],
        SettingKind::RuntimePmPci => c
            .writes
            .iter()
            .map(|(path, value)| {
                let device = path
                    .parent()
                    .and_then(|p| p.parent())
                    .and_then(|p| p.file_name())
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                format!(
                    "/etc/udev/rules.d/60-wattson-runtime-pm.rules: ACTION==\"add\", \
                     SUBSYSTEM==\"pci\", KERNEL==\"{device}\", ATTR{{power/control}}=\"{value}\""
                )
            })
            .collect(),
        SettingKind::RuntimePmUsb => vec![
            "/etc/udev/rules.d/60-wattson-usb-autosuspend.rules: ACTION==\"add\", \
             SUBSYSTEM==\"usb\", TEST==\"power/control\", ATTR{power/control}=\"auto\" \
             (some keyboards and mice lose input when suspended: match their idVendor/idProduct \
             to leave them out)"
                .to_owned(),
        ],
        SettingKind::NmiWatchdog => vec![
            "/etc/sysctl.d/60-wattson-idle.conf: kernel.nmi_watchdog = 0".to_owned(),
            "or the kernel command line: nmi_watchdog=0".to_owned(),
        ],
        SettingKind::DirtyWriteback => vec![format!(
            "/etc/sysctl.d/60-wattson-idle.conf: vm.dirty_writeback_centisecs = {}",
            c.changed
        )],
        SettingKind::AudioPowerSave => vec![format!(
            "/etc/modprobe.d/wattson-audio.conf: options snd_hda_intel power_save={}",
            c.changed
        )],
        SettingKind::RuntimePmAta
        | SettingKind::CpufreqGovernor
        | SettingKind::Epp
        | SettingKind::Turbo
        | SettingKind::PcieLinkAspm
        | SettingKind::Disk
        | SettingKind::DiskStandby => tmpfiles(c),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn each_kind_says_where_its_line_goes() {
        let c = Trial {
            id: "pcie_aspm".into(),
            kind: SettingKind::PcieAspm,
            name: "ASPM powersave".into(),
            original: "performance".into(),
            changed: "powersave".into(),
            writes: vec![(
                PathBuf::from("/sys/module/pcie_aspm/parameters/policy"),
                "powersave".into(),
            )],
        };
        let lines = how_to_keep(&c).join("\n");
        assert!(lines.contains("pcie_aspm.policy=powersave"), "{lines}");
        assert!(
            lines.contains("w /sys/module/pcie_aspm/parameters/policy - - - - powersave"),
            "{lines}"
        );
        let pci = Trial {
            kind: SettingKind::RuntimePmPci,
            writes: vec![(
                PathBuf::from("/sys/bus/pci/devices/0000:03:00.0/power/control"),
                "auto".into(),
            )],
            ..c
        };
        assert!(how_to_keep(&pci)[0].contains("KERNEL==\"0000:03:00.0\""));
    }
}
