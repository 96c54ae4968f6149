//! The daemon crate's integration tests, one module per file, linked into one test binary
//! (`daemon_e2e`) rather than one per file.
//!
//! One file's tests: `cargo test -p wattson --test daemon_e2e report_formats::`. A filter
//! matches anywhere in a test's path: `idle_report::` also runs `gpu_idle_report::` unless
//! `-- --skip gpu_idle_report::`.

mod gpu_idle_report;
mod idle_report;
mod man_and_completions;
mod report_formats;
mod report_ledger;
