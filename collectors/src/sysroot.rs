//! The injected roots of sysfs and procfs, so every reader can run against a fixture tree.

use std::path::{Path, PathBuf};

use crate::CollectError;

/// Where sysfs and procfs are mounted (`/sys` and `/proc` in production, from config).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SysRoot {
    pub sys: PathBuf,
    pub proc: PathBuf,
}

impl SysRoot {
    pub fn new(sys: impl Into<PathBuf>, proc: impl Into<PathBuf>) -> Self {
        SysRoot {
            sys: sys.into(),
            proc: proc.into(),
        }
    }

    /// A path under the sysfs root; `rel` must be relative (`devices/system/cpu`).
    pub fn sys_path(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.sys.join(rel)
    }

    /// A path under the procfs root; `rel` must be relative (`stat`).
    pub fn proc_path(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.proc.join(rel)
    }
}

/// Read a small text file, trimmed.
pub fn read_trimmed(path: &Path) -> Result<String, CollectError> {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_owned())
        .map_err(|e| CollectError::io(path, e))
}

/// Read a file holding one unsigned integer.
pub fn read_u64(path: &Path) -> Result<u64, CollectError> {
    let text = read_trimmed(path)?;
    text.parse::<u64>()
        .map_err(|e| CollectError::parse(path, format!("{text:?} is not an unsigned integer: {e}")))
}
