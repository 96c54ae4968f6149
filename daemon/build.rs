//! Release builds of `wattson` for x86-64 Linux link the functions the running daemon
//! executes first, in the order of `symbol-order.txt` (written by
//! `tests/bench/symbol-order.sh`): its resident code is then about 1 MB instead of most of
//! the text (BENCHMARKS.md, "Daemon self-cost").
//!
//! The order is a hint to the linker: names it does not find are skipped, so a stale file
//! costs memory, never a failed build. It is applied only where Rust links with its own
//! LLD (the default for `x86_64-unknown-linux-gnu` since Rust 1.90) and no other linker
//! was configured; `WATTSON_SYMBOL_ORDER=0` turns it off.

// A build script speaks to Cargo on stdout.
#![allow(clippy::print_stdout)]

use std::env;
use std::path::Path;

fn main() {
    println!("cargo:rerun-if-changed=symbol-order.txt");
    println!("cargo:rerun-if-env-changed=WATTSON_SYMBOL_ORDER");
    println!("cargo:rerun-if-env-changed=CARGO_ENCODED_RUSTFLAGS");
    let var = |name: &str| env::var(name).unwrap_or_default();
    let wanted = var("WATTSON_SYMBOL_ORDER") != "0";
    let release = var("PROFILE") == "release";
    let own_lld = var("TARGET") == "x86_64-unknown-linux-gnu"
        && env::var_os("RUSTC_LINKER").is_none()
        && !var("CARGO_ENCODED_RUSTFLAGS").contains("link");
    let order = Path::new(&var("CARGO_MANIFEST_DIR")).join("symbol-order.txt");
    if wanted && release && own_lld && order.is_file() {
        println!(
            "cargo:rustc-link-arg-bin=wattson=-Wl,--symbol-ordering-file={}",
            order.display()
        );
        println!("cargo:rustc-link-arg-bin=wattson=-Wl,--no-warn-symbol-ordering");
    }
}
