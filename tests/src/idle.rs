//! Fixture trees for `wattson idle`: a base machine with an idle overlay copied over it
//! into a temp dir (`collectors/tests/fixtures/idle-*`, see their READMEs), residency MSRs
//! written by the test, and a snapshot of a whole tree to prove what was (not) written.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::workspace_root;

/// `collectors/tests/fixtures/<name>`.
pub fn fixture(name: &str) -> PathBuf {
    workspace_root()
        .join("collectors/tests/fixtures")
        .join(name)
}

fn copy(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type().unwrap();
        if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&src).unwrap(), &dst).unwrap();
        } else if kind.is_dir() {
            copy(&src, &dst);
        } else {
            std::fs::copy(&src, &dst).unwrap();
        }
    }
}

/// The Intel desktop (`intel-adl-desktop` with the `idle-intel-desktop` overlay) in `dir`:
/// `dir/sys`, `dir/proc`, `dir/dev` (with `cpu/0/msr` holding a TSC and zeroed residency
/// counters).
pub fn intel_desktop(dir: &Path) {
    copy(&fixture("intel-adl-desktop"), dir);
    copy(&fixture("idle-intel-desktop"), dir);
    write_msr(
        dir,
        0,
        &[
            (0x10, 1_000_000),
            (0x60D, 0),
            (0x3F8, 0),
            (0x3F9, 0),
            (0x630, 0),
            (0x632, 0),
            (0xE2, 0x8008),
        ],
    );
}

/// The AMD server (`amd-epyc-2s-server` with the `idle-amd-server` overlay) in `dir`.
pub fn amd_server(dir: &Path) {
    copy(&fixture("amd-epyc-2s-server"), dir);
    copy(&fixture("idle-amd-server"), dir);
}

/// Write MSR values into `dir/dev/cpu/N/msr`, the regular file that stands in for the msr
/// device: little-endian u64s at offset 8 x MSR number (see `wattson_collectors::idle::package`).
pub fn write_msr(dir: &Path, cpu: usize, values: &[(u64, u64)]) {
    use std::os::unix::fs::FileExt as _;
    let d = dir.join(format!("dev/cpu/{cpu}"));
    std::fs::create_dir_all(&d).unwrap();
    let f = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(false)
        .open(d.join("msr"))
        .unwrap();
    for &(msr, v) in values {
        f.write_all_at(&v.to_le_bytes(), msr * 8).unwrap();
    }
}

/// Every regular file under `root`: its bytes and modification time.
pub type Snapshot = BTreeMap<PathBuf, (Vec<u8>, SystemTime)>;

/// Snapshot every regular file under `root` (symlinks are not followed).
pub fn snapshot(root: &Path) -> Snapshot {
    fn walk(dir: &Path, out: &mut Snapshot) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                walk(&entry.path(), out);
            } else if kind.is_file() {
                let meta = entry.metadata().unwrap();
                out.insert(
                    entry.path(),
                    (
                        std::fs::read(entry.path()).unwrap(),
                        meta.modified().unwrap(),
                    ),
                );
            }
        }
    }
    let mut out = Snapshot::new();
    walk(root, &mut out);
    out
}

/// The files whose bytes differ between two snapshots (or that appeared or went).
pub fn changed_content(before: &Snapshot, after: &Snapshot) -> Vec<PathBuf> {
    let keys: std::collections::BTreeSet<&PathBuf> = before.keys().chain(after.keys()).collect();
    keys.into_iter()
        .filter(|k| before.get(*k).map(|v| &v.0) != after.get(*k).map(|v| &v.0))
        .cloned()
        .collect()
}

/// The files that were written at all (modification time moved) between two snapshots.
pub fn touched(before: &Snapshot, after: &Snapshot) -> Vec<PathBuf> {
    before
        .iter()
        .filter(|(k, v)| after.get(*k).is_none_or(|a| a.1 != v.1))
        .map(|(k, _)| k.clone())
        .collect()
}
