//! Headless Chromium for the tests that look at what wattson draws: the binary (a test
//! that needs it fails under CI=true without it, and is skipped otherwise) and its flags for
//! a quiet, sandbox-free run with a profile of its own.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The Chromium binary, or `None` (a skip) where it is not installed and CI is not set.
pub fn chromium() -> Option<PathBuf> {
    for name in ["chromium", "chromium-browser", "google-chrome"] {
        if let Some(dir) = std::env::var_os("PATH")
            .iter()
            .flat_map(std::env::split_paths)
            .find(|d| d.join(name).is_file())
        {
            return Some(dir.join(name));
        }
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "chromium is not installed (apt-get install chromium); CI must run this test"
    );
    eprintln!("skipped: chromium is not installed");
    None
}

/// Chromium's flags for a quiet, sandbox-free headless run with its own profile.
pub fn headless(chromium: &Path, profile: &Path) -> Command {
    let mut cmd = Command::new(chromium);
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
    ])
    .arg(format!("--user-data-dir={}", profile.display()));
    cmd
}
