//! Measure what one `WakeupCollector::poll` costs (the read `wattson run` takes every
//! `[wakeups] interval`, 5 minutes by default): CPU time per poll (this thread's `schedstat` run
//! time, and wall time) and the heap it keeps between polls, on fixture procfs trees (a temp
//! dir, on tmpfs where /dev/shm is writable, as procfs is in memory) of 100 and 1,000
//! processes of two threads each in 50 services, with 100 device interrupt lines, and on
//! this machine's `/proc`. Run with
//! `cargo run --release -p wattson-collectors --example wakeups_poll_cost`.
#![allow(clippy::print_stdout, clippy::unwrap_used)]

use std::time::Instant;

use wattson_collectors::SysRoot;
use wattson_collectors::idle::wakeups::WakeupCollector;
use wattson_collectors::idle::wakeups::fixture::FixtureProc;

/// This thread's time on a CPU so far, ns (`/proc/thread-self/schedstat`, first field).
fn cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// This process' anonymous resident memory, KiB (`RssAnon` of `/proc/self/status`).
fn rss_anon_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("RssAnon:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

fn measure(label: &str, root: &SysRoot, polls: u32) {
    let before = rss_anon_kib();
    let mut c = WakeupCollector::new(root, None);
    if let Err(e) = c.poll() {
        println!("{label}: {e}");
        return;
    }
    let (wall, cpu) = (Instant::now(), cpu_ns());
    let mut threads = 0;
    for _ in 0..polls {
        threads = c.poll().ok().flatten().map_or(0, |w| w.threads);
    }
    let per_wall = wall.elapsed() / polls;
    let per_cpu_us = (cpu_ns() - cpu) as f64 / f64::from(polls) / 1000.0;
    println!(
        "{label}: {threads} threads, {per_cpu_us:.0} us CPU ({per_wall:?} wall) per poll; at the \
         default 5-minute interval {:.4} % of one core (at 60 s {:.4} %); anonymous memory +{} KiB \
         while kept",
        per_cpu_us / 300e6 * 100.0,
        per_cpu_us / 60e6 * 100.0,
        rss_anon_kib().saturating_sub(before)
    );
}

fn main() {
    let base = ["/dev/shm", "/tmp"]
        .into_iter()
        .find(|d| tempfile::tempdir_in(d).is_ok())
        .unwrap_or("/tmp");
    for processes in [100u32, 1_000] {
        let dir = tempfile::tempdir_in(base).unwrap();
        let proc = FixtureProc::new(&dir.path().join("proc")).unwrap();
        for p in 0..processes {
            let pid = 1_000 + p * 4;
            let unit = format!("/system.slice/service-{}.service", p % 50);
            proc.add_process(pid, &format!("worker-{p}"), &unit, &[pid, pid + 1])
                .unwrap();
            proc.set_count(pid, pid, u64::from(p) * 7).unwrap();
        }
        let devices: Vec<(u32, String, u64)> = (0..100)
            .map(|i| (30 + i, format!("dev{i}"), u64::from(i) * 1_000))
            .collect();
        let devices: Vec<(u32, &str, u64)> = devices
            .iter()
            .map(|(i, n, c)| (*i, n.as_str(), *c))
            .collect();
        proc.set_interrupts(&[("LOC", 1_000_000), ("RES", 1_000)], &devices)
            .unwrap();
        measure(
            &format!("fixture, {processes} processes, 100 interrupt lines"),
            &SysRoot::new(dir.path().join("sys"), dir.path().join("proc")),
            50,
        );
    }
    measure("this machine", &SysRoot::new("/sys", "/proc"), 50);
}
