//! `[[disk]]`: the disks whose spin state `wattson run` follows (see
//! [`crate::idle::disk_hours`]), each with its drive's own standby timer and, where given,
//! the datasheet's watts between spinning idle and standby.

use std::collections::BTreeSet;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::duration::{Range, Written};
use super::validate::{SAMPLING, Validator};
use super::{ConfigError, duration};

/// The drive's standby timer: 1 s (tests, compressed time) to a day.
pub const STANDBY_AFTER: Range = Range::new(Duration::from_secs(1), Duration::from_secs(86_400));
/// A disk's spun-up watts above standby, at most (a 3.5" drive spinning idle draws 4-9 W).
pub const MAX_SPUN_UP_WATTS: f64 = 100.0;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileDisk {
    pub(super) name: Spanned<String>,
    pub(super) standby_after: Spanned<Written>,
    pub(super) spun_up_watts: Option<Spanned<f64>>,
    pub(super) interval: Option<Spanned<Written>>,
}

/// One disk whose spin state is followed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DiskConfig {
    /// Its name under `<sysfs>/block` (`sda`).
    pub name: String,
    /// The drive's own spin-down timer (as set with `hdparm -S`): I/O unchanged that long
    /// means spun down, where the kernel does not manage the disk's power.
    #[serde(serialize_with = "duration::serialize")]
    pub standby_after: Duration,
    /// The datasheet's difference between spinning idle and standby, W.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spun_up_watts: Option<f64>,
    /// How often its sysfs files are read (default 10 s).
    #[serde(serialize_with = "duration::serialize")]
    pub interval: Duration,
}

impl Validator<'_> {
    /// The `[[disk]]` tables, each name a block device's and unique.
    pub(super) fn disks(&self, file: Vec<FileDisk>) -> Result<Vec<DiskConfig>, ConfigError> {
        let mut names = BTreeSet::new();
        let mut out = Vec::with_capacity(file.len());
        for d in file {
            let name = d.name.get_ref().trim().to_owned();
            let well_formed = !name.is_empty()
                && name.len() <= 32
                && !name.starts_with(['.', '-'])
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.');
            if !well_formed {
                return Err(self.err(
                    d.name.span(),
                    "disk.name",
                    format!(
                        "{name:?} must be a block device's name under /sys/block (sda, nvme0n1): \
                         1 to 32 letters, digits, '-', '_' or '.'"
                    ),
                ));
            }
            if !names.insert(name.clone()) {
                return Err(self.err(
                    d.name.span(),
                    "disk.name",
                    format!("{name:?} must be unique"),
                ));
            }
            let standby_after = STANDBY_AFTER
                .check(d.standby_after.get_ref().0)
                .map_err(|m| {
                    self.err(d.standby_after.span(), "disk.standby_after", m.to_string())
                })?;
            let spun_up_watts = match d.spun_up_watts {
                None => None,
                Some(w) => {
                    let v = *w.get_ref();
                    if !(v.is_finite() && v > 0.0 && v <= MAX_SPUN_UP_WATTS) {
                        return Err(self.err(
                            w.span(),
                            "disk.spun_up_watts",
                            format!(
                                "{v} must be watts above 0 and at most {MAX_SPUN_UP_WATTS}: the \
                                 datasheet's idle (spinning) less its standby figure"
                            ),
                        ));
                    }
                    Some(v)
                }
            };
            out.push(DiskConfig {
                name,
                standby_after,
                spun_up_watts,
                interval: self.duration(
                    d.interval.as_ref(),
                    "disk.interval",
                    Duration::from_secs(10),
                    SAMPLING,
                )?,
            });
        }
        Ok(out)
    }
}
