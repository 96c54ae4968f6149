//! Measure what one read of the package C-state counters costs: `PackageReader::read` over
//! 20,000 reads, against a temp tree holding an Alder Lake's cpuinfo and a regular file in
//! place of `/dev/cpu/0/msr` (TSC and five residency counters: six `pread`s per package
//! per read, on one held-open file, no allocation). On real hardware each `pread` of the msr
//! device also costs an inter-processor interrupt to the CPU read, which this cannot show.
//! Run with `cargo run --release -p wattson-collectors --example package_poll_cost`.
#![allow(clippy::print_stdout, clippy::unwrap_used)]
#![allow(
    clippy::disallowed_methods,
    reason = "a benchmark making its own fixture files, never beside a database"
)]

use std::os::unix::fs::FileExt as _;
use std::time::Instant;

use wattson_collectors::SysRoot;
use wattson_collectors::idle::PackageReader;

fn main() {
    let dir = std::env::temp_dir().join(format!("wattson-package-cost-{}", std::process::id()));
    let cpu = dir.join("sys/devices/system/cpu/cpu0/topology");
    std::fs::create_dir_all(&cpu).unwrap();
    std::fs::create_dir_all(dir.join("proc")).unwrap();
    std::fs::create_dir_all(dir.join("dev/cpu/0")).unwrap();
    std::fs::write(dir.join("sys/devices/system/cpu/online"), "0\n").unwrap();
    std::fs::write(cpu.join("physical_package_id"), "0\n").unwrap();
    std::fs::write(
        dir.join("proc/cpuinfo"),
        "vendor_id : GenuineIntel\ncpu family : 6\nmodel : 151\nmodel name : i3-12100\n",
    )
    .unwrap();
    let msr = std::fs::File::create(dir.join("dev/cpu/0/msr")).unwrap();
    for (m, v) in [
        (0x10u64, 1u64),
        (0x60D, 0),
        (0x3F8, 0),
        (0x3F9, 0),
        (0x630, 0),
        (0x632, 0),
    ] {
        msr.write_all_at(&v.to_le_bytes(), m * 8).unwrap();
    }
    let root = SysRoot::new(dir.join("sys"), dir.join("proc"));
    let mut reader = PackageReader::discover(&root, &dir.join("dev")).unwrap();
    let reads = 20_000u32;
    let mut tsc = 1u64;
    let mut emitted = 0usize;
    let t = Instant::now();
    for _ in 0..reads {
        tsc += 3_300_000;
        msr.write_all_at(&tsc.to_le_bytes(), 0x10 * 8).unwrap();
        reader.read(|_, _| emitted += 1).unwrap();
    }
    let per = t.elapsed() / reads;
    println!(
        "{per:?} per read (with one 8-byte write to advance the TSC), {} states, {} shares per read",
        reader.states().len(),
        emitted / reads as usize
    );
    std::fs::remove_dir_all(&dir).ok();
}
