//! The collectors' integration tests, one module per file, linked into one test binary
//! (`collectors_e2e`) rather than one per file. The fixture trees stay in `tests/fixtures/`
//! (read by path from `CARGO_MANIFEST_DIR`); `common` finds and copies them.
//!
//! One file's tests: `cargo test -p wattson-collectors --test collectors_e2e cpu::`.

mod cgroup;
mod common;
mod cpu;
mod gpu;
mod idle;
mod ipmi;
mod meter_pty;
mod nut;
mod power;
