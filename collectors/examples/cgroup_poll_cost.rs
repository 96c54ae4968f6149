//! Measure what one `CgroupCollector::poll` costs: CPU time per poll (this thread's
//! `schedstat` run time, and wall time) on fixture cgroup v2 trees of 10, 100 and 1,000
//! services in nested slices (a temp dir), and on this machine's `/sys/fs/cgroup` where it
//! is cgroup v2. Run with
//! `cargo run --release -p wattson-collectors --example cgroup_poll_cost`.
#![allow(clippy::print_stdout, clippy::unwrap_used)]

use std::time::Instant;

use wattson_collectors::cgroup::fixture::FixtureTree;
use wattson_collectors::cgroup::{CgroupCollector, CgroupOptions};
use wattson_collectors::{Collector, SysRoot};

/// This thread's time on a CPU so far, ns (`/proc/thread-self/schedstat`, first field).
fn cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn measure(label: &str, root: &SysRoot, polls: u32) {
    let mut c = match CgroupCollector::new(root, CgroupOptions::default()) {
        Ok(c) => c,
        Err(e) => {
            println!("{label}: {e}");
            return;
        }
    };
    c.poll(0).unwrap();
    let (wall, cpu) = (Instant::now(), cpu_ns());
    let mut samples = 0;
    for i in 0..polls {
        samples += c.poll(i64::from(i) + 1).map_or(0, |s| s.len());
    }
    let per_wall = wall.elapsed() / polls;
    let per_cpu_us = (cpu_ns() - cpu) as f64 / f64::from(polls) / 1000.0;
    println!(
        "{label}: {} groups, {per_cpu_us:.0} us CPU ({per_wall:?} wall) per poll, {} samples per poll; \
         at the default 10 s interval {:.4} % of one core",
        c.tracked_groups(),
        samples / polls as usize,
        per_cpu_us / 10e6 * 100.0
    );
}

fn main() {
    for n in [10usize, 100, 1_000] {
        let dir = tempfile::tempdir().unwrap();
        let sys = dir.path().join("sys");
        let tree = FixtureTree::v2(&sys).unwrap();
        for (i, g) in tree.many_services(n).unwrap().iter().enumerate() {
            tree.set_usage(g, 1_000 * i as u64).unwrap();
        }
        measure(
            &format!("fixture, {n} services"),
            &SysRoot::new(&sys, dir.path()),
            200,
        );
    }
    measure("this machine", &SysRoot::new("/sys", "/proc"), 200);
}
