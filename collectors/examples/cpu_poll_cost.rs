//! Measure what one `CpuCollector::poll` costs on this machine: wall time per poll over
//! 2000 polls against the real `/sys` and `/proc`. Run with
//! `cargo run --release -p wattson-collectors --example cpu_poll_cost`.
#![allow(clippy::print_stdout)]

use std::time::Instant;

use wattson_collectors::cpu::{CpuCollector, CpuOptions};
use wattson_collectors::sysroot::SysFile;
use wattson_collectors::{Collector, SysRoot};

fn main() {
    let mut buf = Vec::new();
    for path in [
        "/proc/stat",
        "/proc/cpuinfo",
        "/sys/devices/system/cpu/online",
    ] {
        let mut f = SysFile::new(path.into(), true);
        let t = Instant::now();
        for _ in 0..2000 {
            f.read(&mut buf).ok();
        }
        println!(
            "{path}: {:?} per read ({} bytes)",
            t.elapsed() / 2000,
            buf.len()
        );
    }
    for keep in [true, false] {
        let start = Instant::now();
        let options = CpuOptions {
            keep_files_open: keep,
            ..CpuOptions::default()
        };
        let mut c = CpuCollector::with_options(
            SysRoot::new("/sys", "/proc"),
            Box::new(move || start.elapsed()),
            options,
        );
        let polls = 2000u32;
        let mut samples = 0;
        let t = Instant::now();
        for i in 0..polls {
            samples += c.poll(i64::from(i)).map_or(0, |s| s.len());
        }
        let per = t.elapsed() / polls;
        println!(
            "keep_files_open={keep}: {per:?} per poll, {} samples per poll, cpus {:?}",
            samples / polls as usize,
            c.cpus()
        );
    }
}
