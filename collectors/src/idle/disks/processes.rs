//! Who did block I/O, by process, where there is no cgroup v2 `io.stat` to ask: each
//! process's `read_bytes` + `write_bytes` from `<procfs>/<pid>/io` (bytes that reached the
//! block layer: proc(5)), summed by its `comm` as `process:<comm>`, in 4 KiB blocks.
//!
//! Unlike `io.stat` these count every device, not the disk asked about, and another user's
//! process's `io` is readable only with `CAP_SYS_PTRACE` (or as root): a process that cannot
//! be read is left out. At most [`MAX_PROCESSES`] are read.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io::Read as _;
use std::path::Path;

use crate::SysRoot;
use crate::cgroup::names::printable;

/// Processes read in one scan at most.
pub const MAX_PROCESSES: usize = 65_536;

/// `read_bytes` + `write_bytes` of an `io` file.
pub fn bytes_of_io(text: &str) -> Option<u64> {
    let mut total = None;
    for line in text.lines() {
        if let Some((k, v)) = line.split_once(':')
            && (k == "read_bytes" || k == "write_bytes")
        {
            let n: u64 = v.trim().parse().ok()?;
            total = Some(total.unwrap_or(0u64).wrapping_add(n));
        }
    }
    total
}

#[allow(clippy::disallowed_methods, reason = "a procfs file: never a database")]
fn read(path: &Path, buf: &mut String) -> Option<()> {
    buf.clear();
    std::fs::File::open(path).ok()?.read_to_string(buf).ok()?;
    Some(())
}

/// Each process name's block I/O so far, in 4 KiB blocks (`process:<comm>`); empty where
/// the procfs cannot be listed.
pub fn process_ios(root: &SysRoot) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(root.proc_path("")) else {
        return out;
    };
    let mut buf = String::with_capacity(256);
    for entry in entries.flatten().take(MAX_PROCESSES) {
        if !entry
            .file_name()
            .to_str()
            .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        {
            continue;
        }
        let dir = entry.path();
        let Some(bytes) = read(&dir.join("io"), &mut buf).and_then(|()| bytes_of_io(&buf)) else {
            continue;
        };
        let blocks = bytes.div_ceil(4096);
        if blocks == 0 {
            continue;
        }
        let comm = read(&dir.join("comm"), &mut buf).map_or_else(
            || "?".to_owned(),
            |()| printable(OsStr::new(buf.trim_end())),
        );
        *out.entry(format!("process:{comm}")).or_default() += blocks;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn process(proc: &Path, pid: u32, comm: &str, read: u64, write: u64) {
        let dir = proc.join(pid.to_string());
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("comm"), format!("{comm}\n")).unwrap();
        std::fs::write(
            dir.join("io"),
            format!(
                "rchar: 1\nwchar: 2\nsyscr: 3\nsyscw: 4\nread_bytes: {read}\nwrite_bytes: \
                 {write}\ncancelled_write_bytes: 0\n"
            ),
        )
        .unwrap();
    }

    #[test]
    fn processes_are_summed_by_name_in_blocks_and_the_unreadable_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let proc = dir.path().join("proc");
        process(&proc, 10, "rsync", 8192, 4096);
        process(&proc, 11, "rsync", 0, 1);
        process(&proc, 12, "sshd", 0, 0);
        std::fs::create_dir_all(proc.join("13")).unwrap();
        std::fs::create_dir_all(proc.join("self")).unwrap();
        let got = process_ios(&SysRoot::new(dir.path(), &proc));
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got["process:rsync"], 4);
        assert_eq!(bytes_of_io("read_bytes: x\nwrite_bytes: 1\n"), None);
        assert_eq!(bytes_of_io("rchar: 5\n"), None);
    }
}
