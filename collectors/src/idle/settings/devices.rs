//! PCIe ASPM (Documentation/admin-guide/kernel-parameters.txt `pcie_aspm=`,
//! Documentation/ABI/testing/sysfs-bus-pci `link/*_aspm`) and runtime power management of
//! PCI, USB and ATA devices (Documentation/power/runtime_pm.rst: `power/control` is `on`
//! (never suspend) or `auto` (suspend when idle); `power/runtime_status` says what it is now).

use super::{Setting, SettingKind, current_of_list, list_entries, read, sorted_entries};
use crate::sysroot::SysRoot;

/// The ASPM policy, relative to the sysfs root.
pub(super) const ASPM_POLICY: &str = "module/pcie_aspm/parameters/policy";

/// From most to least power: each policy's next lower one.
fn lower_policy(current: &str, available: &[String]) -> Option<String> {
    let next = match current {
        "performance" | "default" => "powersave",
        "powersave" => "powersupersave",
        _ => return None,
    };
    available.iter().any(|a| a == next).then(|| next.to_owned())
}

pub(super) fn aspm_policy(root: &SysRoot) -> Option<Setting> {
    let path = root.sys_path(ASPM_POLICY);
    let text = read(&path)?;
    let current = current_of_list(&text);
    let mut available = list_entries(&text);
    if available.len() <= 1 {
        available = ["default", "performance", "powersave", "powersupersave"]
            .map(str::to_owned)
            .to_vec();
    }
    let lower = lower_policy(&current, &available);
    Some(Setting {
        kind: SettingKind::PcieAspm,
        id: SettingKind::PcieAspm.as_str().to_owned(),
        label: "PCIe ASPM policy".to_owned(),
        note: Some(match current.as_str() {
            "default" => "default keeps the firmware's per-link choice, which is often off".into(),
            "performance" => "performance disables ASPM on every link".into(),
            "powersave" => "powersupersave adds the L1 substates".into(),
            _ => "the deepest policy".into(),
        }),
        current,
        available,
        lower,
        files: vec![path],
    })
}

/// `0000:03:00.0 (network)`.
fn pci_label(dev: &std::path::Path, name: &str) -> String {
    match read(&dev.join("class")).and_then(|c| pci_class_name(&c)) {
        Some(class) => format!("{name} ({class})"),
        None => name.to_owned(),
    }
}

/// The PCI base class of a `class` file's `0xCCSSPP`, in words.
pub fn pci_class_name(class: &str) -> Option<&'static str> {
    let code = u32::from_str_radix(class.trim().trim_start_matches("0x"), 16).ok()?;
    Some(match (code >> 16, (code >> 8) & 0xFF) {
        (0x01, 0x06) => "SATA controller",
        (0x01, 0x08) => "NVMe controller",
        (0x01, _) => "storage controller",
        (0x02, _) => "network controller",
        (0x03, _) => "display controller",
        (0x04, _) => "multimedia controller",
        (0x05, _) => "memory controller",
        (0x06, 0x04) => "PCI bridge",
        (0x06, _) => "bridge",
        (0x0C, 0x03) => "USB controller",
        (0x0C, 0x05) => "SMBus controller",
        (0x0C, _) => "serial bus controller",
        (0x0D, _) => "wireless controller",
        (0x11, _) => "signal processing controller",
        _ => "other device",
    })
}

pub(super) fn link_aspm(root: &SysRoot) -> Vec<Setting> {
    const STATES: [(&str, &str); 5] = [
        ("l0s_aspm", "L0s"),
        ("l1_aspm", "L1"),
        ("l1_1_aspm", "L1.1"),
        ("l1_2_aspm", "L1.2"),
        ("clkpm", "ClockPM"),
    ];
    let mut out = Vec::new();
    for (name, dev) in sorted_entries(&root.sys_path("bus/pci/devices")) {
        let link = dev.join("link");
        let states: Vec<(&str, bool)> = STATES
            .iter()
            .filter_map(|(file, label)| Some((*label, read(&link.join(file))? == "1")))
            .collect();
        if states.is_empty() {
            continue;
        }
        let on: Vec<&str> = states.iter().filter(|s| s.1).map(|s| s.0).collect();
        let off: Vec<&str> = states.iter().filter(|s| !s.1).map(|s| s.0).collect();
        out.push(Setting {
            kind: SettingKind::PcieLinkAspm,
            id: format!("{}:{name}", SettingKind::PcieLinkAspm.as_str()),
            label: format!("PCIe link ASPM {}", pci_label(&dev, &name)),
            current: if on.is_empty() {
                "off".to_owned()
            } else {
                format!("{} on", on.join(", "))
            },
            available: Vec::new(),
            lower: (!off.is_empty()).then(|| format!("{} on", off.join(", "))),
            files: Vec::new(),
            note: (!off.is_empty()).then(|| {
                format!(
                    "set by the ASPM policy; by hand: echo 1 > {}/<state>_aspm",
                    link.display()
                )
            }),
        });
    }
    out
}

/// Why a device's runtime PM is never offered for `auto`, whatever it saves.
const HID_NOTE: &str = "an input device (HID): never autosuspended, since keyboards and mice \
                        lose keystrokes and clicks while they wake";

/// `power/control` and `power/runtime_status` of one device as a setting. A device whose
/// driver reports runtime PM `unsupported`, or that `never` names (an input device), is
/// shown but offers no lower value and no file, so nothing measures, applies or restores it.
fn runtime_setting(
    kind: SettingKind,
    bus: &str,
    name: &str,
    label: &str,
    dev: &std::path::Path,
    never: Option<&str>,
) -> Option<Setting> {
    let control = dev.join("power/control");
    let current = read(&control)?;
    let status = read(&dev.join("power/runtime_status"));
    let unsupported = status.as_deref() == Some("unsupported");
    let note = match (never, unsupported) {
        (Some(why), _) => Some(why.to_owned()),
        (None, true) => Some("its driver reports runtime PM unsupported".to_owned()),
        (None, false) => status.map(|s| format!("runtime status {s}")),
    };
    // A device left alone has no files: nothing measures, applies or restores it.
    let left_alone = never.is_some() || unsupported;
    Some(Setting {
        kind,
        id: format!("{}:{name}", kind.as_str()),
        label: format!("runtime PM {bus} {label}"),
        lower: (current == "on" && !left_alone).then(|| "auto".to_owned()),
        available: vec!["on".to_owned(), "auto".to_owned()],
        note,
        current,
        files: if left_alone {
            Vec::new()
        } else {
            vec![control]
        },
    })
}

/// Whether USB device `name` has an interface of the HID class (`bInterfaceClass` 03) among
/// `entries` (the `bus/usb/devices` directory: devices and their `name:C.I` interfaces).
fn is_hid(name: &str, entries: &[(String, std::path::PathBuf)]) -> bool {
    let prefix = format!("{name}:");
    entries
        .iter()
        .filter(|(n, _)| n.starts_with(&prefix))
        .any(|(_, dir)| read(&dir.join("bInterfaceClass")).as_deref() == Some("03"))
}

pub(super) fn runtime_pm(root: &SysRoot) -> Vec<Setting> {
    let mut out = Vec::new();
    for (name, dev) in sorted_entries(&root.sys_path("bus/pci/devices")) {
        let label = pci_label(&dev, &name);
        out.extend(runtime_setting(
            SettingKind::RuntimePmPci,
            "PCI",
            &name,
            &label,
            &dev,
            None,
        ));
    }
    let usb = sorted_entries(&root.sys_path("bus/usb/devices"));
    for (name, dev) in &usb {
        let (name, dev) = (name.clone(), dev.clone());
        // Interfaces (`1-1:1.0`) follow their device; only devices have a control of their own.
        if name.contains(':') {
            continue;
        }
        let product = read(&dev.join("product"));
        let label = product.map_or_else(|| name.clone(), |p| format!("{name} ({p})"));
        out.extend(runtime_setting(
            SettingKind::RuntimePmUsb,
            "USB",
            &name,
            &label,
            &dev,
            is_hid(&name, &usb).then_some(HID_NOTE),
        ));
    }
    for (name, port) in sorted_entries(&root.sys_path("class/ata_port")) {
        out.extend(runtime_setting(
            SettingKind::RuntimePmAta,
            "ATA",
            &name,
            &name,
            &port.join("device"),
            None,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_devices_and_unsupported_drivers_offer_no_lower_value() {
        let dir = tempfile::tempdir().unwrap();
        let usb = dir.path().join("sys/bus/usb/devices");
        let put = |rel: &str, text: &str| {
            let p = usb.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        put("1-1/power/control", "on\n");
        put("1-1/product", "USB Keyboard\n");
        put("1-1:1.0/bInterfaceClass", "03\n");
        put("1-2/power/control", "on\n");
        put("1-2/power/runtime_status", "unsupported\n");
        put("1-3/power/control", "on\n");
        put("1-3:1.0/bInterfaceClass", "08\n");
        let root = SysRoot::new(dir.path().join("sys"), dir.path().join("proc"));
        let all = runtime_pm(&root);
        let by = |id: &str| all.iter().find(|s| s.id == id).unwrap();
        let keyboard = by("runtime_pm_usb:1-1");
        assert_eq!((keyboard.lower.as_ref(), keyboard.files.len()), (None, 0));
        assert!(
            keyboard.note.as_deref().unwrap().contains("HID"),
            "{keyboard:?}"
        );
        let unsupported = by("runtime_pm_usb:1-2");
        assert_eq!(
            (unsupported.lower.as_ref(), unsupported.files.len()),
            (None, 0)
        );
        assert!(unsupported.note.as_deref().unwrap().contains("unsupported"));
        assert_eq!(by("runtime_pm_usb:1-3").lower.as_deref(), Some("auto"));
    }

    #[test]
    fn policies_step_down_one_at_a_time() {
        let all: Vec<String> = ["default", "performance", "powersave", "powersupersave"]
            .map(str::to_owned)
            .to_vec();
        assert_eq!(
            lower_policy("performance", &all).as_deref(),
            Some("powersave")
        );
        assert_eq!(lower_policy("default", &all).as_deref(), Some("powersave"));
        assert_eq!(
            lower_policy("powersave", &all).as_deref(),
            Some("powersupersave")
        );
        assert_eq!(lower_policy("powersupersave", &all), None);
        assert_eq!(lower_policy("powersave", &all[..3]), None);
    }

    #[test]
    fn pci_classes_in_words() {
        assert_eq!(pci_class_name("0x010601"), Some("SATA controller"));
        assert_eq!(pci_class_name("0x020000\n"), Some("network controller"));
        assert_eq!(pci_class_name("0x0c0330"), Some("USB controller"));
        assert_eq!(pci_class_name("zz"), None);
    }
}
