//! The trials `wattson idle --measure` may run: one setting change per kind of setting (all
//! SATA hosts together, every PCI device whose runtime PM is `on` together), each with the
//! files it writes and the value it writes there. The files of the chosen trials are the
//! allowlist: nothing else is ever written.
//!
//! Beside them, one trial per spinning disk that the kernel can put to standby
//! ([`SettingKind::DiskStandby`], id `disk_standby:sda`): not a saving to keep but the A/B
//! that finds what the disk costs spun up, measured only when `--only` names it.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::Serialize;
use wattson_collectors::SysRoot;
use wattson_collectors::idle::settings::{STANDBY_DELAY_MS, Setting, SettingKind};

/// Kinds that may be changed for a measurement, in the order they are measured.
pub(super) const MEASURABLE: [SettingKind; 11] = [
    SettingKind::PcieAspm,
    SettingKind::SataAlpm,
    SettingKind::RuntimePmPci,
    SettingKind::RuntimePmAta,
    SettingKind::RuntimePmUsb,
    SettingKind::NmiWatchdog,
    SettingKind::DirtyWriteback,
    SettingKind::AudioPowerSave,
    SettingKind::Epp,
    SettingKind::CpufreqGovernor,
    SettingKind::Turbo,
];

/// One setting to measure: what it writes where.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Trial {
    /// The kind's stable name, as `--only`/`--skip` take it (`pcie_aspm`, `sata_alpm`, ...),
    /// and for a disk's standby its name after a colon (`disk_standby:sda`).
    pub id: String,
    pub kind: SettingKind,
    /// Short name for results and reports (`ASPM powersave`, `SATA ALPM med_power_with_dipm`).
    pub name: String,
    /// The value(s) as found, in words (`performance`, `max_performance on host0-host3`).
    pub original: String,
    /// The value tried.
    pub changed: String,
    /// `(file, value)` for every write this trial makes.
    pub writes: Vec<(PathBuf, String)>,
}

/// `host0-host3` for a contiguous run, else a comma-separated list.
pub fn compact_names(names: &[String]) -> String {
    let split = |n: &str| {
        let digits = n.len() - n.trim_end_matches(|c: char| c.is_ascii_digit()).len();
        let (head, tail) = n.split_at(n.len() - digits);
        (head.to_owned(), tail.parse::<u64>().ok())
    };
    let parts: Vec<(String, Option<u64>)> = names.iter().map(|n| split(n)).collect();
    let contiguous = names.len() > 2
        && parts.iter().all(|(h, n)| *h == parts[0].0 && n.is_some())
        && parts.windows(2).all(|w| w[1].1 == w[0].1.map(|x| x + 1));
    if contiguous {
        format!("{}-{}", names[0], names[names.len() - 1])
    } else {
        names.join(", ")
    }
}

/// The device part of an id (`0000:03:00.0` of `runtime_pm_pci:0000:03:00.0`).
pub fn device_of(setting: &Setting) -> &str {
    setting
        .id
        .split_once(':')
        .map_or(setting.id.as_str(), |(_, d)| d)
}

/// The name of a setting of `kind` set to `changed` on `devices` devices (`ASPM powersave`,
/// `PCI runtime PM auto (3 devices)`): the catalogue's own words, never a database's.
pub fn name_for(kind: SettingKind, changed: &str, devices: usize) -> String {
    let n = |what: &str| {
        if devices == 1 {
            format!("1 {what}")
        } else {
            format!("{devices} {what}s")
        }
    };
    match kind {
        SettingKind::PcieAspm => format!("ASPM {changed}"),
        SettingKind::SataAlpm => format!("SATA ALPM {changed}"),
        SettingKind::RuntimePmPci => format!("PCI runtime PM {changed} ({})", n("device")),
        SettingKind::RuntimePmUsb => format!("USB autosuspend ({})", n("device")),
        SettingKind::RuntimePmAta => format!("ATA runtime PM {changed} ({})", n("port")),
        SettingKind::NmiWatchdog => "NMI watchdog off".to_owned(),
        SettingKind::DirtyWriteback => format!("writeback every {changed} cs"),
        SettingKind::AudioPowerSave => format!("HD-audio power save {changed} s"),
        SettingKind::CpufreqGovernor => format!("governor {changed}"),
        SettingKind::Epp => format!("EPP {changed}"),
        SettingKind::Turbo => "turbo off".to_owned(),
        SettingKind::PcieLinkAspm | SettingKind::Disk | SettingKind::DiskStandby => {
            kind.as_str().to_owned()
        }
    }
}

/// The trials these settings offer: for each measurable kind, every setting of it that
/// has a lower-power value and files to write.
pub fn trials(settings: &[Setting]) -> Vec<Trial> {
    let mut out = Vec::new();
    for kind in MEASURABLE {
        let of_kind: Vec<&Setting> = settings
            .iter()
            .filter(|s| s.kind == kind && s.lower.is_some() && !s.files.is_empty())
            .collect();
        let Some(first) = of_kind.first() else {
            continue;
        };
        let changed = first.lower.clone().unwrap_or_default();
        let writes: Vec<(PathBuf, String)> = of_kind
            .iter()
            .flat_map(|s| {
                let value = s.lower.clone().unwrap_or_default();
                s.files.iter().map(move |f| (f.clone(), value.clone()))
            })
            .collect();
        let devices: Vec<String> = of_kind.iter().map(|s| device_of(s).to_owned()).collect();
        let mut currents: Vec<&str> = of_kind.iter().map(|s| s.current.as_str()).collect();
        currents.dedup();
        let original = if of_kind.len() > 1 {
            format!("{} on {}", currents.join("/"), compact_names(&devices))
        } else {
            first.current.clone()
        };
        out.push(Trial {
            id: kind.as_str().to_owned(),
            kind,
            name: name_for(kind, &changed, of_kind.len()),
            original,
            changed,
            writes,
        });
    }
    out.extend(disk_standby(settings));
    out
}

/// One trial per spinning disk that is kept spinning now (`power/control` `on`): the
/// delay set short first, then `auto`, so the kernel stops the drive a second after its
/// last I/O.
fn disk_standby(settings: &[Setting]) -> Vec<Trial> {
    settings
        .iter()
        .filter(|s| s.kind == SettingKind::DiskStandby && s.lower.is_some())
        .filter_map(|s| {
            let (control, delay) = s.files.split_first()?;
            let disk = device_of(s);
            let mut writes: Vec<(PathBuf, String)> = delay
                .iter()
                .map(|d| (d.clone(), STANDBY_DELAY_MS.to_owned()))
                .collect();
            writes.push((control.clone(), "auto".to_owned()));
            Some(Trial {
                id: s.id.clone(),
                kind: s.kind,
                name: format!("{disk} in standby"),
                original: format!("{disk} spinning (runtime PM {})", s.current),
                changed: "auto".to_owned(),
                writes,
            })
        })
        .collect()
}

/// The disk a `disk_standby:sda` trial id names.
pub fn standby_disk(id: &str) -> Option<&str> {
    id.strip_prefix(SettingKind::DiskStandby.as_str())?
        .strip_prefix(':')
        .filter(|d| !d.is_empty())
}

/// The kind a trial id names (`pcie_aspm`), among those wattson changes.
pub fn kind_of(id: &str) -> Option<SettingKind> {
    MEASURABLE.into_iter().find(|k| k.as_str() == id)
}

/// Every trial id `--only`/`--skip` accept (`disk_standby` also as `disk_standby:sda`).
pub fn known_ids() -> Vec<&'static str> {
    MEASURABLE
        .iter()
        .chain([&SettingKind::DiskStandby])
        .map(|k| k.as_str())
        .collect()
}

/// Whether `--only`/`--skip` `id` names trial `c`: its id, or for a disk's standby the
/// kind alone (every such disk).
fn names(id: &str, c: &Trial) -> bool {
    id == c.id || (c.kind == SettingKind::DiskStandby && id == c.kind.as_str())
}

/// Why a selection cannot be made.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SelectError {
    #[error("{option} {id:?} is not a setting wattson measures: it measures {}", known_ids().join(", "))]
    Unknown { option: &'static str, id: String },
    #[error(
        "--only {id}: this machine has nothing to change for it (it is already at its \
         lowest-power value, or the machine lacks it); `wattson idle` lists every setting"
    )]
    NothingToChange { id: String },
}

/// The trials `--only` (empty: all) and `--skip` leave.
pub fn select(
    all: Vec<Trial>,
    only: &[String],
    skip: &[String],
) -> Result<Vec<Trial>, SelectError> {
    let known = known_ids();
    for (option, ids) in [("--only", only), ("--skip", skip)] {
        if let Some(id) = ids
            .iter()
            .find(|id| !known.contains(&id.as_str()) && standby_disk(id).is_none())
        {
            return Err(SelectError::Unknown {
                option,
                id: id.clone(),
            });
        }
    }
    if let Some(id) = only.iter().find(|id| !all.iter().any(|c| names(id, c))) {
        return Err(SelectError::NothingToChange { id: id.clone() });
    }
    Ok(all
        .into_iter()
        .filter(|c| {
            if only.is_empty() {
                c.kind != SettingKind::DiskStandby
            } else {
                only.iter().any(|o| names(o, c))
            }
        })
        .filter(|c| !skip.iter().any(|s| names(s, c)))
        .collect())
}

/// The files the chosen trials may write, every one of them under the configured sysfs
/// or procfs root: the allowlist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allowlist {
    files: BTreeSet<PathBuf>,
    root: SysRoot,
}

impl Allowlist {
    /// The allowlist of `chosen`; `Err` names a file outside both roots (never expected: the
    /// readers build every path from the roots).
    pub fn of(chosen: &[Trial], root: &SysRoot) -> Result<Allowlist, PathBuf> {
        let mut files = BTreeSet::new();
        for (path, _) in chosen.iter().flat_map(|c| &c.writes) {
            if !(path.starts_with(&root.sys) || path.starts_with(&root.proc)) {
                return Err(path.clone());
            }
            files.insert(path.clone());
        }
        Ok(Allowlist {
            files,
            root: root.clone(),
        })
    }

    pub fn contains(&self, path: &Path) -> bool {
        self.files.contains(path)
    }

    pub fn files(&self) -> impl Iterator<Item = &PathBuf> {
        self.files.iter()
    }

    /// The roots the files are under.
    pub fn root(&self) -> &SysRoot {
        &self.root
    }

    pub fn len(&self) -> usize {
        self.files.len()
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setting(kind: SettingKind, dev: &str, current: &str, lower: Option<&str>) -> Setting {
        Setting {
            kind,
            id: format!("{}:{dev}", kind.as_str()),
            label: dev.to_owned(),
            current: current.to_owned(),
            available: Vec::new(),
            lower: lower.map(str::to_owned),
            files: vec![PathBuf::from(format!("/sys/x/{dev}"))],
            note: None,
        }
    }

    #[test]
    fn one_trial_per_kind_with_every_file_that_has_a_lower_value() {
        let s = vec![
            setting(
                SettingKind::SataAlpm,
                "host0",
                "max_performance",
                Some("med_power_with_dipm"),
            ),
            setting(
                SettingKind::SataAlpm,
                "host1",
                "max_performance",
                Some("med_power_with_dipm"),
            ),
            setting(
                SettingKind::SataAlpm,
                "host2",
                "max_performance",
                Some("med_power_with_dipm"),
            ),
            setting(SettingKind::SataAlpm, "host3", "med_power_with_dipm", None),
            setting(
                SettingKind::RuntimePmPci,
                "0000:03:00.0",
                "on",
                Some("auto"),
            ),
            setting(SettingKind::NmiWatchdog, "", "0", None),
        ];
        let c = trials(&s);
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].id, "sata_alpm");
        assert_eq!(c[0].writes.len(), 3);
        assert_eq!(c[0].original, "max_performance on host0-host2");
        assert_eq!(c[0].name, "SATA ALPM med_power_with_dipm");
        assert_eq!(c[1].name, "PCI runtime PM auto (1 device)");
        let root = SysRoot::new("/sys", "/proc");
        assert_eq!(Allowlist::of(&c, &root).unwrap().len(), 4);
        assert!(Allowlist::of(&c, &SysRoot::new("/elsewhere", "/proc")).is_err());
    }

    #[test]
    fn a_spinning_disk_is_a_trial_of_its_own_measured_only_when_named() {
        let disk = |name: &str, current: &str| Setting {
            kind: SettingKind::DiskStandby,
            id: format!("disk_standby:{name}"),
            label: name.to_owned(),
            current: current.to_owned(),
            available: Vec::new(),
            lower: (current == "on").then(|| "auto".to_owned()),
            files: vec![
                PathBuf::from(format!("/sys/block/{name}/device/power/control")),
                PathBuf::from(format!(
                    "/sys/block/{name}/device/power/autosuspend_delay_ms"
                )),
            ],
            note: None,
        };
        let c = trials(&[
            setting(SettingKind::NmiWatchdog, "", "1", Some("0")),
            disk("sda", "on"),
            disk("sdb", "auto"),
        ]);
        assert_eq!(c.len(), 2);
        assert_eq!(c[1].id, "disk_standby:sda");
        assert_eq!(c[1].name, "sda in standby");
        assert_eq!(
            c[1].writes,
            [
                (
                    PathBuf::from("/sys/block/sda/device/power/autosuspend_delay_ms"),
                    STANDBY_DELAY_MS.to_owned()
                ),
                (
                    PathBuf::from("/sys/block/sda/device/power/control"),
                    "auto".to_owned()
                ),
            ],
            "the delay is set short before the kernel may stop the drive"
        );
        let ids = |v: Vec<Trial>| v.into_iter().map(|c| c.id).collect::<Vec<_>>();
        assert_eq!(ids(select(c.clone(), &[], &[]).unwrap()), ["nmi_watchdog"]);
        for only in ["disk_standby", "disk_standby:sda"] {
            assert_eq!(
                ids(select(c.clone(), &[only.into()], &[]).unwrap()),
                ["disk_standby:sda"]
            );
        }
        let e = select(c.clone(), &["disk_standby:sdb".into()], &[]).unwrap_err();
        assert!(matches!(e, SelectError::NothingToChange { .. }), "{e}");
        let e = select(c, &["disk_standby:".into()], &[]).unwrap_err();
        assert!(matches!(e, SelectError::Unknown { .. }), "{e}");
        assert_eq!(standby_disk("disk_standby:sda"), Some("sda"));
        assert_eq!(standby_disk("disk_standbyx"), None);
        assert_eq!(kind_of("disk_standby:sda"), None, "never kept by --apply");
    }

    #[test]
    fn only_and_skip_are_checked_against_what_exists() {
        let c = trials(&[
            setting(SettingKind::PcieAspm, "", "performance", Some("powersave")),
            setting(SettingKind::NmiWatchdog, "", "1", Some("0")),
        ]);
        let ids = |v: Vec<Trial>| v.into_iter().map(|c| c.id).collect::<Vec<_>>();
        assert_eq!(
            ids(select(c.clone(), &[], &[]).unwrap()),
            ["pcie_aspm", "nmi_watchdog"]
        );
        assert_eq!(
            ids(select(c.clone(), &[], &["pcie_aspm".into()]).unwrap()),
            ["nmi_watchdog"]
        );
        let e = select(c.clone(), &["aspm".into()], &[]).unwrap_err();
        assert!(e.to_string().contains("pcie_aspm, sata_alpm"), "{e}");
        let e = select(c, &["sata_alpm".into()], &[]).unwrap_err();
        assert!(matches!(e, SelectError::NothingToChange { .. }), "{e}");
        assert_eq!(
            compact_names(&["host0".into(), "host2".into()]),
            "host0, host2"
        );
    }
}
