//! Keeping what `wattson idle --measure` found to save (`wattson idle --apply`), and undoing
//! it (`--revert`).
//!
//! The settings kept are those whose newest measurement saved at the wall (a 95 % interval
//! wholly below zero), each with the files its kind has on this machine now, re-derived from
//! the settings catalogue under the configured roots: the database says which settings
//! saved and the value measured, never which files; a value is written only where the
//! setting offers it. Devices the catalogue leaves alone (USB input devices, drivers that
//! report runtime PM unsupported) have no files, so nothing here can touch them.
//!
//! What survives a reboot is one file wattson owns, a systemd-tmpfiles.d(5) file of `w`
//! lines (write this value to this file at boot), which reads plainly and holds sysfs and
//! procfs paths alike: `/etc/tmpfiles.d/wattson-idle.conf` unless told otherwise. Before
//! anything is written, each file's content as found is stored (`idle_applied`,
//! `schema/0012-idle-applied.sql`); `--revert` puts it back, checked against the catalogue
//! as the idle journal is, and takes wattson's lines out of the file only when its first
//! line says wattson wrote it ([`super::tmpfiles`], which keeps an administrator's lines).
//!
//! The file is composed, never copied: each line is a `w` line for a catalogue file (the
//! path the catalogue derived, as the running system names it) with the catalogue's own
//! spelling of a value that file takes, under a comment with the catalogue's name for the
//! setting; a database row only chooses among them, and its text (a setting's stored name)
//! never reaches the file.
//!
//! After applying, the error counters such settings are known to raise are watched
//! ([`wattson_collectors::idle::errors`]); a setting whose counters rise is put back and its
//! lines leave the file ([`watched_by`] says which counters each kind answers for).
//!
//! Units: W, UTC ms.

use std::path::{Path, PathBuf};

use rusqlite::params;
use wattson_collectors::SysRoot;
use wattson_collectors::idle::errors::{Counter, Family};
use wattson_collectors::idle::settings::{Setting, SettingKind};

use super::catalogue::Catalogue;
use super::journal::{self, Original};
use super::store::Effect;
use super::tmpfiles::{self, Lines};
use super::trials::{kind_of, name_for};
use crate::safe_open;
use crate::store::Store;

/// Why the settings cannot be applied or put back.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error(
        "no setting measured on this host saved at the wall (an interval wholly below zero): \
         run `wattson idle --measure` first; `wattson idle` lists what was measured"
    )]
    NothingSaved,
    #[error(
        "--only {0}: it was not measured to save on this host (`wattson idle` lists the \
         measured effects)"
    )]
    NotSaved(String),
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Tmpfiles(#[from] tmpfiles::FileError),
    #[error("the database {path}: {source}")]
    Sql {
        path: PathBuf,
        source: rusqlite::Error,
    },
}

/// One setting to keep: its measured saving and the files it writes now.
#[derive(Debug, Clone, PartialEq)]
pub struct Keep {
    /// The trial's id (`pcie_aspm`).
    pub setting: String,
    pub kind: SettingKind,
    /// `ASPM powersave`.
    pub name: String,
    /// The measured change at the wall (negative: saves) and its 95 % half-width.
    pub delta_w: f64,
    pub ci95_w: f64,
    pub writes: Vec<(PathBuf, String)>,
}

/// The settings to keep: each of `effects` that saved (selected by `only`, every one when
/// empty), with the files of its kind in `settings` that take the measured value. Returns
/// them and one line for each that saved but has nothing to write here now.
pub fn plan(
    effects: &[Effect],
    settings: &[Setting],
    only: &[String],
) -> Result<(Vec<Keep>, Vec<String>), ApplyError> {
    // A disk's standby is a measurement of the disk, not a setting to keep.
    let saved: Vec<&Effect> = effects
        .iter()
        .filter(|e| e.effect && e.delta_w < 0.0)
        .filter(|e| super::trials::standby_disk(&e.trial).is_none())
        .collect();
    if let Some(id) = only
        .iter()
        .find(|id| !saved.iter().any(|e| &e.trial == *id))
    {
        return Err(ApplyError::NotSaved(id.clone()));
    }
    let chosen: Vec<&Effect> = saved
        .into_iter()
        .filter(|e| only.is_empty() || only.contains(&e.trial))
        .collect();
    if chosen.is_empty() {
        return Err(ApplyError::NothingSaved);
    }
    let mut keeps = Vec::new();
    let mut notes = Vec::new();
    for e in chosen {
        let Some(kind) = kind_of(&e.trial) else {
            notes.push(format!(
                "{}: not a setting this version of wattson changes; left alone",
                e.name
            ));
            continue;
        };
        let writes: Vec<(PathBuf, String)> = settings
            .iter()
            .filter(|s| s.kind == kind && !s.files.is_empty())
            .filter(|s| s.available.is_empty() || s.available.contains(&e.changed))
            .flat_map(|s| s.files.iter().map(|f| (f.clone(), e.changed.clone())))
            .collect();
        if writes.is_empty() {
            notes.push(format!(
                "{}: this machine has no file for it now that takes {:?}; left alone",
                e.name, e.changed
            ));
            continue;
        }
        keeps.push(Keep {
            setting: e.trial.clone(),
            kind,
            name: e.name.clone(),
            delta_w: e.delta_w,
            ci95_w: e.delta_ci95_w,
            writes,
        });
    }
    Ok((keeps, notes))
}

/// The counters a setting of `kind` answers for: a rise in one of them after applying puts
/// it back. Settings that touch no device (the NMI watchdog, writeback, cpufreq) have none.
pub fn watched_by(kind: SettingKind) -> &'static [Family] {
    match kind {
        SettingKind::PcieAspm | SettingKind::PcieLinkAspm | SettingKind::RuntimePmPci => {
            &[Family::PcieAer, Family::Network]
        }
        SettingKind::SataAlpm
        | SettingKind::RuntimePmAta
        | SettingKind::Disk
        | SettingKind::DiskStandby => &[Family::Disk],
        SettingKind::RuntimePmUsb => &[Family::Network, Family::Disk],
        SettingKind::NmiWatchdog
        | SettingKind::DirtyWriteback
        | SettingKind::AudioPowerSave
        | SettingKind::Epp
        | SettingKind::CpufreqGovernor
        | SettingKind::Turbo => &[],
    }
}

/// Whether a setting of `kind` answers for a rise in `counter`: a counter of a family it
/// watches, except a network interface on the other bus (a PCI NIC's errors are not USB
/// autosuspend's, a USB NIC's not ASPM's) where sysfs says which bus it is on.
pub fn answers_for(kind: SettingKind, counter: &Counter) -> bool {
    if !watched_by(kind).contains(&counter.family) {
        return false;
    }
    match (counter.family, counter.via_usb) {
        (Family::Network, Some(usb)) => usb == (kind == SettingKind::RuntimePmUsb),
        _ => true,
    }
}

/// A file kept by `--apply`, as the database holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct Applied {
    pub path: PathBuf,
    pub setting: String,
    pub name: String,
    pub original: Original,
    pub value: String,
    pub delta_w: f64,
    pub ci95_w: f64,
}

fn sql(store: &Store) -> impl Fn(rusqlite::Error) -> ApplyError + '_ {
    |source| ApplyError::Sql {
        path: store.path().to_owned(),
        source,
    }
}

/// Every file kept, by path.
pub fn applied(store: &Store) -> Result<Vec<Applied>, ApplyError> {
    let mut stmt = store
        .conn()
        .prepare(
            "SELECT path, setting, name, content, original, value, saving_w, saving_ci95_w
             FROM idle_applied ORDER BY path",
        )
        .map_err(sql(store))?;
    stmt.query_map([], |r| {
        let path = PathBuf::from(r.get::<_, String>(0)?);
        Ok(Applied {
            original: Original {
                path: path.clone(),
                content: r.get(3)?,
                value: r.get(4)?,
            },
            path,
            setting: r.get(1)?,
            name: r.get(2)?,
            value: r.get(5)?,
            delta_w: r.get(6)?,
            ci95_w: r.get(7)?,
        })
    })
    .and_then(Iterator::collect)
    .map_err(sql(store))
}

/// Stores every file of `keeps` as it is now (one kept before keeps what was first found),
/// in one transaction, before anything is written.
pub fn record(store: &Store, keeps: &[Keep], now_ms: i64) -> Result<(), ApplyError> {
    let mut found = Vec::new();
    for k in keeps {
        for (path, value) in &k.writes {
            let o = Original::read(path)
                .map_err(|e| ApplyError::Refused(wattson_collectors::ErrorChain(&e).to_string()))?;
            found.push((k, o, value));
        }
    }
    let tx = store.conn().unchecked_transaction().map_err(sql(store))?;
    for (k, o, value) in found {
        tx.execute(
            "INSERT INTO idle_applied (path, setting, name, content, original, value, saving_w,
                                       saving_ci95_w, applied_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
             ON CONFLICT (path) DO UPDATE SET setting = excluded.setting, name = excluded.name,
                 value = excluded.value, saving_w = excluded.saving_w,
                 saving_ci95_w = excluded.saving_ci95_w, applied_ms = excluded.applied_ms",
            params![
                o.path.to_string_lossy(),
                k.setting,
                k.name,
                o.content,
                o.value,
                value,
                k.delta_w,
                k.ci95_w,
                now_ms
            ],
        )
        .map_err(sql(store))?;
    }
    tx.commit().map_err(sql(store))
}

/// Writes each kept value now. Returns one line per file that could not be written.
pub fn write_now(keeps: &[Keep], catalogue: &Catalogue) -> Vec<String> {
    let mut failed = Vec::new();
    for (path, value) in keeps.iter().flat_map(|k| &k.writes) {
        if let Err(why) = catalogue.vet_value(path, value) {
            failed.push(why.to_string());
            continue;
        }
        if let Err(e) = safe_open::write_setting(path, value.as_bytes(), catalogue.root()) {
            failed.push(format!("writing {value:?} to {}: {e}", path.display()));
        }
    }
    failed
}

/// The path the running system knows `path` by: the configured roots mapped back to `/sys`
/// and `/proc` (they differ only for a fixture tree).
fn system_path(path: &Path, root: &SysRoot) -> PathBuf {
    if let Ok(rel) = path.strip_prefix(&root.sys) {
        Path::new("/sys").join(rel)
    } else if let Ok(rel) = path.strip_prefix(&root.proc) {
        Path::new("/proc").join(rel)
    } else {
        path.to_owned()
    }
}

/// wattson's lines of the tmpfiles.d file for `kept`: for each row whose file the catalogue
/// holds with a value its setting takes, a `w` line of the catalogue's path and value,
/// grouped by the catalogue's kind under its name for the setting and the saving measured
/// (the rows come from a database: their names are never written).
pub fn file_lines(
    kept: &[Applied],
    catalogue: &Catalogue,
    host: &str,
    now: &str,
) -> Result<Lines, tmpfiles::LineError> {
    let mut lines = Lines::new();
    lines.comment(&format!(
        "The power settings `wattson idle --measure` found to save at the wall on {host},"
    ))?;
    lines.comment(&format!(
        "kept {now}. systemd-tmpfiles writes each value at boot (tmpfiles.d(5), type w)."
    ))?;
    lines.comment("`wattson idle --revert` takes these lines out and puts back what was found.")?;
    let mut entries: Vec<(SettingKind, &Path, &str, &Applied)> = kept
        .iter()
        .filter_map(|a| {
            let (path, kind, value) = catalogue.entry(&a.path, &a.value).ok()?;
            Some((kind, path, value, a))
        })
        .collect();
    entries.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
    for group in entries.chunk_by(|a, b| a.0 == b.0) {
        let (kind, _, value, first) = group[0];
        lines.blank();
        lines.comment(&format!(
            "{}: {:+.2} +/- {:.2} W at the wall",
            name_for(kind, value, group.len()),
            first.delta_w,
            first.ci95_w
        ))?;
        for (_, path, value, _) in group {
            lines.write(&system_path(path, catalogue.root()), value)?;
        }
    }
    Ok(lines)
}

/// Puts back every file of `settings` (every setting when `None`) as found, checked against
/// the catalogue, and forgets them. Returns the files put back and one line per refusal or
/// failure (those rows are kept).
pub fn put_back(
    store: &Store,
    catalogue: &Catalogue,
    settings: Option<&[String]>,
) -> Result<(Vec<PathBuf>, Vec<String>), ApplyError> {
    let (mut done, mut failed) = (Vec::new(), Vec::new());
    for a in applied(store)? {
        if settings.is_some_and(|s| !s.contains(&a.setting)) {
            continue;
        }
        let o = &a.original;
        if let Err(why) = catalogue.vet(&o.path, &o.value, &o.content) {
            failed.push(format!("refusing to restore: {why}"));
            continue;
        }
        match journal::restore(o, catalogue.root()) {
            Ok(()) => {
                store
                    .conn()
                    .execute(
                        "DELETE FROM idle_applied WHERE path = ?1",
                        [a.path.to_string_lossy()],
                    )
                    .map_err(sql(store))?;
                done.push(a.path);
            }
            Err(why) => failed.push(why.to_string()),
        }
    }
    Ok((done, failed))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn effect(id: &str, changed: &str, delta: f64, effect: bool) -> Effect {
        Effect {
            run_id: 1,
            host: "h".into(),
            trial: id.into(),
            name: format!("{id} {changed}"),
            original: "x".into(),
            changed: changed.into(),
            started_ms: 0,
            ended_ms: 1,
            baseline_w: 40.0,
            changed_w: 40.0 + delta,
            delta_w: delta,
            delta_ci95_w: 0.4,
            n: 100,
            effect,
            phases: serde_json::Value::Null,
        }
    }

    fn setting(kind: SettingKind, dev: &str, current: &str, files: usize) -> Setting {
        Setting {
            kind,
            id: format!("{}:{dev}", kind.as_str()),
            label: dev.into(),
            current: current.into(),
            available: Vec::new(),
            lower: None,
            files: (0..files)
                .map(|i| PathBuf::from(format!("/sys/{dev}/{i}")))
                .collect(),
            note: None,
        }
    }

    #[test]
    fn only_settings_that_saved_are_kept_with_the_files_they_have_now() {
        let effects = [
            effect("pcie_aspm", "powersave", -3.0, true),
            effect("nmi_watchdog", "0", -0.1, false),
            effect("dirty_writeback", "1500", 0.8, true),
            effect("runtime_pm_usb", "auto", -0.5, true),
        ];
        let settings = [
            setting(SettingKind::PcieAspm, "aspm", "performance", 1),
            setting(SettingKind::NmiWatchdog, "nmi", "1", 1),
            // An input device: shown, no files.
            setting(SettingKind::RuntimePmUsb, "1-1", "on", 0),
        ];
        let (keeps, notes) = plan(&effects, &settings, &[]).unwrap();
        assert_eq!(keeps.len(), 1);
        assert_eq!(keeps[0].setting, "pcie_aspm");
        assert_eq!(
            keeps[0].writes,
            vec![(PathBuf::from("/sys/aspm/0"), "powersave".to_owned())]
        );
        assert!(notes[0].contains("runtime_pm_usb auto") && notes[0].contains("no file"));
        assert!(matches!(
            plan(&effects, &settings, &["nmi_watchdog".into()]),
            Err(ApplyError::NotSaved(_))
        ));
        assert!(matches!(
            plan(&effects[1..3], &settings, &[]),
            Err(ApplyError::NothingSaved)
        ));
    }

    #[test]
    fn devices_settings_answer_for_their_counters_and_kernel_ones_for_none() {
        assert_eq!(
            watched_by(SettingKind::PcieAspm),
            &[Family::PcieAer, Family::Network]
        );
        assert_eq!(watched_by(SettingKind::SataAlpm), &[Family::Disk]);
        assert!(watched_by(SettingKind::NmiWatchdog).is_empty());
        let nic = |via_usb| Counter {
            family: Family::Network,
            device: "eth0".into(),
            name: "rx_errors".into(),
            value: 1,
            via_usb,
        };
        assert!(answers_for(SettingKind::PcieAspm, &nic(Some(false))));
        assert!(!answers_for(SettingKind::RuntimePmUsb, &nic(Some(false))));
        assert!(answers_for(SettingKind::RuntimePmUsb, &nic(Some(true))));
        assert!(!answers_for(SettingKind::PcieAspm, &nic(Some(true))));
        assert!(answers_for(SettingKind::RuntimePmUsb, &nic(None)));
    }

    #[test]
    fn the_file_names_system_paths_and_the_catalogues_names_only() {
        let dir = tempfile::tempdir().unwrap();
        let root = SysRoot::new(dir.path().join("sys"), dir.path().join("proc"));
        let policy = root.sys_path("module/pcie_aspm/parameters/policy");
        std::fs::create_dir_all(policy.parent().unwrap()).unwrap();
        std::fs::write(&policy, "default [performance] powersave powersupersave\n").unwrap();
        let catalogue = Catalogue::of(&root);
        let kept = [Applied {
            path: policy.clone(),
            setting: "pcie_aspm".into(),
            name: "ASPM powersave".into(),
            original: Original::read(&policy).unwrap(),
            value: "powersave".into(),
            delta_w: -3.0,
            ci95_w: 0.4,
        }];
        let text = file_lines(&kept, &catalogue, "nas", "2026-12-04 21:00 UTC")
            .unwrap()
            .text()
            .to_owned();
        assert!(
            text.contains("\nw /sys/module/pcie_aspm/parameters/policy - - - - powersave\n"),
            "{text}"
        );
        assert!(
            text.contains("# ASPM powersave: -3.00 +/- 0.40 W"),
            "{text}"
        );
        // A row whose file the catalogue does not hold never reaches the file, and a row's
        // own name never does: the catalogue's is written.
        let elsewhere = Applied {
            path: PathBuf::from("/etc/shadow"),
            ..kept[0].clone()
        };
        let lines = file_lines(&[elsewhere], &catalogue, "nas", "now").unwrap();
        assert_eq!(lines.writes(), 0);
        assert!(!lines.text().contains("shadow"));
        let injected = Applied {
            name: "ASPM\nf+ /etc/sudoers.d/x 0440 root root - x ALL=(ALL) ALL\n#".into(),
            ..kept[0].clone()
        };
        let text = file_lines(&[injected], &catalogue, "nas", "now")
            .unwrap()
            .text()
            .to_owned();
        assert!(!text.contains("f+") && !text.contains("sudoers"), "{text}");
        assert!(text.contains("# ASPM powersave: -3.00"), "{text}");
    }
}
