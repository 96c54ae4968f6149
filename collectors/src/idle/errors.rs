//! The error counters that power settings are known to break, read from sysfs under an
//! injected root, so a setting applied to keep can be watched and put back when they rise:
//!
//! - PCIe Advanced Error Reporting per device (`bus/pci/devices/*/aer_dev_correctable`,
//!   `aer_dev_nonfatal`, `aer_dev_fatal`: one `NAME COUNT` line per error kind and a
//!   `TOTAL_ERR_*` line; Documentation/ABI/testing/sysfs-bus-pci-devices-aer-stats), which
//!   ASPM and PCI runtime PM can raise on a link or device that handles them badly;
//! - each network interface's receive and transmit errors and link drops
//!   (`class/net/*/statistics/rx_errors`, `tx_errors`, `class/net/*/carrier_changes`;
//!   Documentation/ABI/testing/sysfs-class-net-statistics), the symptom of a NIC whose link
//!   ASPM or autosuspend upsets;
//! - each SCSI/ATA disk's I/O error count (`block/*/device/ioerr_cnt`, hexadecimal), which
//!   SATA link power management can raise on drives or controllers that mishandle it.
//!
//! Reading them never opens a device. The loopback interface is left out.

use std::path::Path;

use serde::Serialize;

use super::settings::sorted_entries;
use crate::sysroot::SysRoot;

/// Which kind of counter, as power settings map onto them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    /// PCIe AER counts of a PCI device.
    PcieAer,
    /// A network interface's errors and link drops.
    Network,
    /// A disk's I/O errors.
    Disk,
}

impl Family {
    pub fn as_str(self) -> &'static str {
        match self {
            Family::PcieAer => "PCIe AER",
            Family::Network => "network",
            Family::Disk => "disk",
        }
    }
}

/// One counter's value now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Counter {
    pub family: Family,
    /// The PCI address, interface or disk (`0000:03:00.0`, `enp3s0`, `sda`).
    pub device: String,
    /// The file it is read from (`aer_dev_correctable`, `rx_errors`, `ioerr_cnt`).
    pub name: String,
    pub value: u64,
    /// For a network interface: whether its device hangs off USB (a `usbN` directory on the
    /// way to it in sysfs) or not; `None` where sysfs does not say (no `device` link).
    pub via_usb: Option<bool>,
}

impl Counter {
    /// `network enp3s0 rx_errors`.
    pub fn label(&self) -> String {
        format!("{} {} {}", self.family.as_str(), self.device, self.name)
    }
}

/// Every error counter under `root`, in a stable order.
pub fn read_all(root: &SysRoot) -> Vec<Counter> {
    let mut out = Vec::new();
    for (device, dir) in sorted_entries(&root.sys_path("bus/pci/devices")) {
        for name in ["aer_dev_correctable", "aer_dev_nonfatal", "aer_dev_fatal"] {
            if let Some(value) = read_aer(&dir.join(name)) {
                out.push(counter(Family::PcieAer, &device, name, value));
            }
        }
    }
    for (device, dir) in sorted_entries(&root.sys_path("class/net")) {
        if device == "lo" {
            continue;
        }
        let via_usb = std::fs::canonicalize(dir.join("device")).ok().map(|p| {
            p.components().any(|c| {
                c.as_os_str()
                    .to_str()
                    .and_then(|n| n.strip_prefix("usb"))
                    .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            })
        });
        for (name, rel) in [
            ("rx_errors", "statistics/rx_errors"),
            ("tx_errors", "statistics/tx_errors"),
            ("carrier_changes", "carrier_changes"),
        ] {
            if let Some(value) = read_decimal(&dir.join(rel)) {
                out.push(Counter {
                    via_usb,
                    ..counter(Family::Network, &device, name, value)
                });
            }
        }
    }
    for (device, dir) in sorted_entries(&root.sys_path("block")) {
        let text = std::fs::read_to_string(dir.join("device/ioerr_cnt")).ok();
        if let Some(value) = text.as_deref().and_then(parse_hex) {
            out.push(counter(Family::Disk, &device, "ioerr_cnt", value));
        }
    }
    out
}

/// The counters of `after` that are above their value in `before`, with both values.
pub fn risen<'a>(before: &[Counter], after: &'a [Counter]) -> Vec<(&'a Counter, u64)> {
    after
        .iter()
        .filter_map(|a| {
            let b = before
                .iter()
                .find(|b| b.family == a.family && b.device == a.device && b.name == a.name)
                .map_or(0, |b| b.value);
            (a.value > b).then_some((a, b))
        })
        .collect()
}

fn counter(family: Family, device: &str, name: &str, value: u64) -> Counter {
    Counter {
        family,
        device: device.to_owned(),
        name: name.to_owned(),
        value,
        via_usb: None,
    }
}

fn read_decimal(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// An AER statistics file: its `TOTAL_ERR_*` line, else the sum of its lines.
fn read_aer(path: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    let mut sum = 0u64;
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let (Some(name), Some(count)) = (words.next(), words.next()) else {
            continue;
        };
        let Ok(count) = count.parse::<u64>() else {
            continue;
        };
        if name.starts_with("TOTAL_ERR") {
            return Some(count);
        }
        sum = sum.saturating_add(count);
    }
    Some(sum)
}

fn parse_hex(text: &str) -> Option<u64> {
    let t = text.trim();
    u64::from_str_radix(t.strip_prefix("0x").unwrap_or(t), 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aer_network_and_disk_counters_are_read_and_rises_found() {
        let dir = tempfile::tempdir().unwrap();
        let put = |rel: &str, text: &str| {
            let p = dir.path().join("sys").join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        put(
            "bus/pci/devices/0000:03:00.0/aer_dev_correctable",
            "RxErr 2\nBadTLP 1\nTOTAL_ERR_COR 3\n",
        );
        put(
            "bus/pci/devices/0000:03:00.0/aer_dev_fatal",
            "Undefined 0\n",
        );
        put("class/net/enp3s0/statistics/rx_errors", "0\n");
        put("class/net/enp3s0/statistics/tx_errors", "4\n");
        put("class/net/enp3s0/carrier_changes", "2\n");
        put("class/net/lo/statistics/rx_errors", "9\n");
        put("block/sda/device/ioerr_cnt", "0x1f\n");
        put(
            "devices/pci0000:00/0000:00:14.0/usb1/1-2/1-2:1.0/uevent",
            "",
        );
        put("class/net/enx001/statistics/rx_errors", "0\n");
        std::os::unix::fs::symlink(
            "../../../devices/pci0000:00/0000:00:14.0/usb1/1-2/1-2:1.0",
            dir.path().join("sys/class/net/enx001/device"),
        )
        .unwrap();
        let root = SysRoot::new(dir.path().join("sys"), dir.path().join("proc"));
        let before = read_all(&root);
        let labels: Vec<(String, u64)> = before.iter().map(|c| (c.label(), c.value)).collect();
        assert_eq!(
            labels,
            vec![
                ("PCIe AER 0000:03:00.0 aer_dev_correctable".to_owned(), 3),
                ("PCIe AER 0000:03:00.0 aer_dev_fatal".to_owned(), 0),
                ("network enp3s0 rx_errors".to_owned(), 0),
                ("network enp3s0 tx_errors".to_owned(), 4),
                ("network enp3s0 carrier_changes".to_owned(), 2),
                ("network enx001 rx_errors".to_owned(), 0),
                ("disk sda ioerr_cnt".to_owned(), 31),
            ]
        );
        put("class/net/enp3s0/statistics/rx_errors", "12\n");
        let after = read_all(&root);
        let usb = |n: &str| before.iter().find(|c| c.device == n).unwrap().via_usb;
        assert_eq!((usb("enp3s0"), usb("enx001")), (None, Some(true)));
        let up = risen(&before, &after);
        assert_eq!(up.len(), 1);
        assert_eq!(
            (up[0].0.label(), up[0].1, up[0].0.value),
            ("network enp3s0 rx_errors".to_owned(), 0, 12)
        );
    }
}
