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

/// A sysfs or procfs file that is read again and again (every poll, for years).
///
/// Where `keep_open` is set the handle stays open and each read is one `pread` at offset 0,
/// which makes sysfs (kernfs) and `seq_file` procfs files regenerate their contents; that is
/// one syscall per read instead of open, statx, read and close. A handle that fails (a CPU
/// unplugged under it, say) is dropped and the file opened once more before giving up.
#[derive(Debug)]
pub struct SysFile {
    path: PathBuf,
    keep_open: bool,
    file: Option<std::fs::File>,
}

impl SysFile {
    pub fn new(path: PathBuf, keep_open: bool) -> Self {
        SysFile {
            path,
            keep_open,
            file: None,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Read the whole file into `buf` (cleared first).
    pub fn read(&mut self, buf: &mut Vec<u8>) -> Result<(), CollectError> {
        self.read_until(buf, |_| false)
    }

    /// Read from the start into `buf` (cleared first), stopping early once `enough(buf)`.
    /// `/proc/stat` uses this to skip the long interrupt lines after the CPU lines.
    pub fn read_until(
        &mut self,
        buf: &mut Vec<u8>,
        enough: impl Fn(&[u8]) -> bool,
    ) -> Result<(), CollectError> {
        let had_handle = self.file.is_some();
        match self.read_once(buf, &enough) {
            Ok(()) => Ok(()),
            // A cached handle may be stale (the node was removed and re-created): reopen once.
            Err(_) if had_handle => self
                .read_once(buf, &enough)
                .map_err(|e| CollectError::io(&self.path, e)),
            Err(e) => Err(CollectError::io(&self.path, e)),
        }
    }

    /// As [`SysFile::read`], first letting go of a kept handle whose file is no longer linked:
    /// replaced by a rename (as fixture trees update their files; the kernel's never are) or
    /// removed. One `statx` on the handle, no path walk.
    pub fn read_current(&mut self, buf: &mut Vec<u8>) -> Result<(), CollectError> {
        use std::os::unix::fs::MetadataExt;
        if self
            .file
            .as_ref()
            .is_some_and(|f| f.metadata().is_ok_and(|m| m.nlink() == 0))
        {
            self.file = None;
        }
        self.read(buf)
    }

    /// Whether a handle is held open between reads.
    pub fn is_open(&self) -> bool {
        self.file.is_some()
    }

    /// Read a file holding one unsigned integer.
    pub fn read_u64(&mut self, buf: &mut Vec<u8>) -> Result<u64, CollectError> {
        self.read(buf)?;
        let text = String::from_utf8_lossy(buf);
        let text = text.trim();
        text.parse::<u64>().map_err(|e| {
            CollectError::parse(
                &self.path,
                format!("{text:?} is not an unsigned integer: {e}"),
            )
        })
    }

    #[allow(
        clippy::disallowed_methods,
        reason = "a sysfs or procfs file under the configured root: never a database"
    )]
    fn read_once(
        &mut self,
        buf: &mut Vec<u8>,
        enough: &impl Fn(&[u8]) -> bool,
    ) -> std::io::Result<()> {
        use std::os::unix::fs::FileExt;
        const CHUNK: usize = 4096;
        let file = match self.file.take() {
            Some(f) => f,
            None => std::fs::File::open(&self.path)?,
        };
        buf.clear();
        let mut offset = 0u64;
        loop {
            let start = buf.len();
            buf.resize(start + CHUNK, 0);
            let n = match file.read_at(&mut buf[start..], offset) {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {
                    buf.truncate(start);
                    continue;
                }
                Err(e) => {
                    buf.truncate(start);
                    return Err(e);
                }
            };
            buf.truncate(start + n);
            if n == 0 || enough(buf) {
                break;
            }
            offset += n as u64;
        }
        if self.keep_open {
            self.file = Some(file);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sys_file_sees_rewritten_contents_through_a_kept_handle() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("time");
        std::fs::write(&path, "100\n").unwrap();
        let mut file = SysFile::new(path.clone(), true);
        let mut buf = Vec::new();
        assert_eq!(file.read_u64(&mut buf).unwrap(), 100);
        std::fs::write(&path, "250\n").unwrap();
        assert_eq!(file.read_u64(&mut buf).unwrap(), 250);
    }

    #[test]
    fn read_current_sees_a_file_replaced_by_rename_and_keeps_its_handle_otherwise() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cpu.stat");
        std::fs::write(&path, "usage_usec 100\n").unwrap();
        let mut file = SysFile::new(path.clone(), true);
        let mut buf = Vec::new();
        file.read_current(&mut buf).unwrap();
        assert_eq!(buf, b"usage_usec 100\n");
        assert!(file.is_open());
        let tmp = dir.path().join(".cpu.stat.tmp");
        std::fs::write(&tmp, "usage_usec 250\n").unwrap();
        std::fs::rename(&tmp, &path).unwrap();
        file.read_current(&mut buf).unwrap();
        assert_eq!(buf, b"usage_usec 250\n");
        std::fs::remove_file(&path).unwrap();
        assert!(file.read_current(&mut buf).is_err());
    }

    #[test]
    fn sys_file_reads_past_one_chunk_and_names_the_path_on_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big");
        let text = "x".repeat(10_000);
        std::fs::write(&path, &text).unwrap();
        let mut file = SysFile::new(path, false);
        let mut buf = Vec::new();
        file.read(&mut buf).unwrap();
        assert_eq!(buf.len(), 10_000);

        let missing = dir.path().join("missing");
        let err = SysFile::new(missing.clone(), true)
            .read(&mut buf)
            .unwrap_err();
        assert!(err.to_string().contains("missing"), "{err}");
    }

    #[test]
    fn sys_file_rejects_non_numbers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("n");
        std::fs::write(&path, "abc").unwrap();
        let err = SysFile::new(path, true)
            .read_u64(&mut Vec::new())
            .unwrap_err();
        assert!(matches!(err, CollectError::Parse { .. }));
    }
}
