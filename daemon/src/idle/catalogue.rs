//! The settings catalogue: every file `wattson idle` could ever write on this machine,
//! re-derived under the configured sysfs and procfs roots from what the kernel shows there
//! (`wattson_collectors::idle::settings`), with the kind of its setting and the values it
//! takes. What a database asks root to write or restore is checked against it, and what
//! root writes into a file another program reads is composed from it (SECURITY.md).

use std::path::{Path, PathBuf};

use wattson_collectors::SysRoot;
use wattson_collectors::idle::settings::SettingKind;

use super::trials::MEASURABLE;

/// Every file `wattson idle --measure` could ever write on this machine, re-derived from the
/// settings catalogue under the configured roots, with the values each takes. What the idle
/// journal of a database asks to restore is checked against it: a database decides neither
/// where root writes nor what (SECURITY.md).
#[derive(Debug, Clone)]
pub struct Catalogue {
    root: SysRoot,
    /// Each file, the kind of its setting and the values it lists (empty: a plain value,
    /// such as a number).
    files: std::collections::BTreeMap<PathBuf, (SettingKind, Vec<String>)>,
}

/// The longest value a setting takes (EPP and governor names are under 32 characters).
const MAX_VALUE_CHARS: usize = 64;

/// The most bytes a setting's file holds as recorded (a list file of a few names).
const MAX_CONTENT_BYTES: usize = 4096;

/// Why the catalogue refuses to write a value into a file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The file is none of the settings wattson changes.
    #[error(
        "{} is not a setting wattson changes under [host] sysfs {} and procfs {}",
        path.display(),
        sysfs.display(),
        procfs.display()
    )]
    NotASetting {
        path: PathBuf,
        sysfs: PathBuf,
        procfs: PathBuf,
    },
    /// The value is not one a setting takes (its first 80 characters).
    #[error(
        "{value:?} for {} is not a setting's value (1 to {MAX_VALUE_CHARS} printable \
         characters, no spaces)",
        path.display()
    )]
    NotAValue { value: String, path: PathBuf },
    /// The setting offers other values.
    #[error("{value:?} is not among the values {} offers ({offered})", path.display())]
    NotOffered {
        value: String,
        path: PathBuf,
        offered: String,
    },
    /// The recorded text is not what the value reads as.
    #[error("the recorded text of {} does not read as {value:?}", path.display())]
    RecordedTextDiffers { path: PathBuf, value: String },
}

impl Catalogue {
    /// The settings this machine has now, under `root`.
    pub fn of(root: &SysRoot) -> Catalogue {
        let files = wattson_collectors::idle::settings::read_all(root)
            .into_iter()
            .filter(|s| MEASURABLE.contains(&s.kind) || s.kind == SettingKind::DiskStandby)
            .flat_map(|s| {
                let available = s.available.clone();
                let kind = s.kind;
                let disk = kind == SettingKind::DiskStandby;
                // A disk's standby delay (its second file) takes a number, not control's values.
                s.files.into_iter().enumerate().map(move |(i, f)| {
                    let values = if disk && i > 0 {
                        Vec::new()
                    } else {
                        available.clone()
                    };
                    (f, (kind, values))
                })
            })
            .collect();
        Catalogue {
            root: root.clone(),
            files,
        }
    }

    pub fn root(&self) -> &SysRoot {
        &self.root
    }

    /// Whether `value` may be written into `path`: a file of a setting wattson changes,
    /// and a value that setting takes; `Err` says why not.
    pub fn vet_value(&self, path: &Path, value: &str) -> Result<(), Refusal> {
        self.vet(path, value, value.as_bytes())
    }

    /// The catalogue's own file, the kind of its setting and its own spelling of `value`
    /// (for a setting that takes a number, `value` once vetted), when `value` may be written
    /// into `path`: what a file another program reads is composed of, so that nothing of
    /// the caller's (a database row) is copied into it.
    pub fn entry<'a>(
        &'a self,
        path: &Path,
        value: &'a str,
    ) -> Result<(&'a Path, SettingKind, &'a str), Refusal> {
        self.vet_value(path, value)?;
        let Some((file, (kind, available))) = self.files.get_key_value(path) else {
            return Err(Refusal::NotASetting {
                path: path.to_owned(),
                sysfs: self.root.sys.clone(),
                procfs: self.root.proc.clone(),
            });
        };
        let value = available
            .iter()
            .find(|a| *a == value)
            .map_or(value, String::as_str);
        Ok((file, *kind, value))
    }

    /// Whether restoring `value` (and, where the value does not read back, `content`) into
    /// `path` is a restore wattson could have recorded; `Err` says why not.
    pub fn vet(&self, path: &Path, value: &str, content: &[u8]) -> Result<(), Refusal> {
        let Some((_, available)) = self.files.get(path) else {
            return Err(Refusal::NotASetting {
                path: path.to_owned(),
                sysfs: self.root.sys.clone(),
                procfs: self.root.proc.clone(),
            });
        };
        let plain = !value.is_empty()
            && value.chars().count() <= MAX_VALUE_CHARS
            && value.chars().all(|c| c.is_ascii_graphic());
        if !plain {
            return Err(Refusal::NotAValue {
                value: value.chars().take(80).collect(),
                path: path.to_owned(),
            });
        }
        if !available.is_empty() && !available.iter().any(|a| a == value) {
            return Err(Refusal::NotOffered {
                value: value.to_owned(),
                path: path.to_owned(),
                offered: available.join(", "),
            });
        }
        let as_text = String::from_utf8_lossy(content);
        if content.len() > MAX_CONTENT_BYTES
            || content.contains(&0)
            || wattson_collectors::idle::settings::current_of_list(&as_text) != value
        {
            return Err(Refusal::RecordedTextDiffers {
                path: path.to_owned(),
                value: value.to_owned(),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_disks_control_takes_on_or_auto_and_its_delay_a_number() {
        let dir = tempfile::tempdir().unwrap();
        let disk = dir.path().join("sys/block/sda");
        std::fs::create_dir_all(disk.join("queue")).unwrap();
        std::fs::create_dir_all(disk.join("device/power")).unwrap();
        std::fs::write(disk.join("queue/rotational"), "1\n").unwrap();
        let (control, delay) = (
            disk.join("device/power/control"),
            disk.join("device/power/autosuspend_delay_ms"),
        );
        std::fs::write(&control, "on\n").unwrap();
        std::fs::write(&delay, "600000\n").unwrap();
        let cat = Catalogue::of(&SysRoot::new(
            dir.path().join("sys"),
            dir.path().join("proc"),
        ));
        cat.vet_value(&control, "auto").unwrap();
        cat.vet_value(&delay, "1000").unwrap();
        let e = cat.vet_value(&control, "1000").unwrap_err();
        assert!(matches!(e, Refusal::NotOffered { .. }), "{e}");
    }
}
