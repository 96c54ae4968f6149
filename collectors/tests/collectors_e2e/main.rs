//! The collectors' integration tests, one module per file, linked into one test binary
//! (`collectors_e2e`) rather than one per file. The fixture trees stay in `tests/fixtures/`
//! (read by path from `CARGO_MANIFEST_DIR`); `common` finds and copies them.
//!
//! One file's tests: `cargo test -p wattson-collectors --test collectors_e2e cpu::`.

#![allow(
    clippy::disallowed_methods,
    reason = "the tests open fixture files and databases in their own process, never beside a connection of the daemon's"
)]

mod cgroup;
mod common;
mod cpu;
mod gpu;
mod idle;
mod ipmi;
mod meter_pty;
mod nut;
mod power;
