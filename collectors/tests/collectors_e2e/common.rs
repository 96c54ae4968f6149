//! Fixture trees for the collectors' integration tests: where they are, and copies of them
//! in temp dirs for tests that advance counters or lay an overlay over a base machine.
#![allow(clippy::unwrap_used, dead_code)]

use std::path::{Path, PathBuf};

use wattson_collectors::SysRoot;

/// `tests/fixtures/<name>`.
pub(crate) fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// The `sys/` and `proc/` of a fixture tree.
pub(crate) fn root_at(dir: &Path) -> SysRoot {
    SysRoot::new(dir.join("sys"), dir.join("proc"))
}

/// Copy the tree at `from` over `to` (symlinks kept as links).
pub(crate) fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type().unwrap();
        if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&src).unwrap(), &dst).unwrap();
        } else if kind.is_dir() {
            copy_tree(&src, &dst);
        } else {
            std::fs::copy(&src, &dst).unwrap();
        }
    }
}

/// Copy fixture trees into a temp dir, each over the one before (a base machine, then its
/// overlays), so a test can change them.
pub(crate) fn copy_fixtures(names: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for name in names {
        copy_tree(&fixture(name), dir.path());
    }
    dir
}
