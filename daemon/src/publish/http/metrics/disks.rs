//! Each configured disk's spin state over the stored hours of the last 24 (`[[disk]]`):
//! spin-ups per day, the spun-up share, and a year of the spun-up time at its spun-up watts
//! (measured, else the datasheet's) and the tariff. Bounded: one series per configured disk and family.

use super::{Families, Labels, Snapshot};

pub(super) fn disk_families(f: &mut Families<'_>, s: &Snapshot) {
    let disks = &s.extras.disks;
    if disks.is_empty() {
        return;
    }
    let labels = |d: &crate::idle::disk_hours::StoredDisk| -> Labels {
        vec![
            ("host", s.host.clone()),
            ("disk", d.disk.clone()),
            ("source", d.source.clone()),
        ]
    };
    f.gauge(
        "disk_spinups_per_day",
        "Spin-ups of the disk per day over the stored hours of the last 24 (source sysfs: the kernel's runtime PM status; inferred: from its I/O and its configured standby_after)",
        None,
        disks
            .iter()
            .map(|d| (labels(d), d.spinups_per_day))
            .collect(),
    );
    f.gauge(
        "disk_spun_up",
        "Share of the followed time the disk was spun up, over the stored hours of the last 24",
        Some("ratio"),
        disks.iter().map(|d| (labels(d), d.up_share)).collect(),
    );
    f.gauge(
        "disk_spun_up_annual_cost",
        "A year of the disk's spun-up time at its spun-up watts (measured at the wall by wattson idle --measure where it was, else the datasheet's [[disk]] spun_up_watts) and the tariff",
        None,
        disks
            .iter()
            .filter_map(|d| {
                let mut l = labels(d);
                l.push(("currency", s.extras.currency.clone()));
                Some((l, d.annual_cost?))
            })
            .collect(),
    );
}
