//! Measures the workload loops on this machine: how long `LoopSet::stop` takes (the design
//! budget is 100 ms) and the operations per second per thread of each loop kind.
//!
//! `cargo run -p wattson --example workload_probe [SYSFS_ROOT] [SECONDS]`; build it optimised
//! (see BENCHMARKS-workload.md) or the rates mean little. `SYSFS_ROOT` (default `/sys`) is
//! where the memory loop's cache size is read; `SECONDS` (default 2) is each rate run.

use std::io::{self, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use wattson::sweep::workload::{LoopKind, LoopSet, Workload, cpu_order};

const STOP_TRIALS: usize = 31;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let sys_root = PathBuf::from(args.next().unwrap_or_else(|| "/sys".to_owned()));
    let secs: f64 = args.next().map_or(Ok(2.0), |s| s.parse())?;
    let order = cpu_order(None);
    let mut out = io::stdout().lock();
    writeln!(out, "cpus in order: {order:?}")?;
    for kind in LoopKind::ALL {
        let built = Instant::now();
        let workload = Workload::prepare(kind, &sys_root)?;
        if let Some(bytes) = workload.chase_bytes() {
            writeln!(
                out,
                "memory buffer: {} MiB, built in {:.2} s",
                bytes >> 20,
                built.elapsed().as_secs_f64()
            )?;
        }
        for threads in [1, order.len()] {
            let set = LoopSet::start_workload(&workload, &order[..threads])?;
            std::thread::sleep(Duration::from_secs_f64(secs));
            let stats = set.stop();
            writeln!(
                out,
                "{kind:6} threads={threads} pinned={} per-thread ops/s={:.3e} total ops/s={:.3e}",
                stats.pinned,
                stats.ops_per_s_per_thread(),
                stats.ops_per_s
            )?;
        }
        let mut latencies = Vec::with_capacity(STOP_TRIALS);
        for _ in 0..STOP_TRIALS {
            let set = LoopSet::start_workload(&workload, &order)?;
            // Let every thread get into its loop before asking it to stop.
            let deadline = Instant::now() + Duration::from_secs(5);
            while set.per_thread_ops().contains(&0) && Instant::now() < deadline {
                std::thread::yield_now();
            }
            std::thread::sleep(Duration::from_millis(20));
            let asked = Instant::now();
            let stats = set.stop();
            latencies.push((asked.elapsed(), stats.stop_latency));
        }
        latencies.sort_unstable();
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let pick = |q: f64| latencies[((latencies.len() - 1) as f64 * q).round() as usize].0;
        writeln!(
            out,
            "{kind:6} stop latency over {STOP_TRIALS} stops of {} threads: median {:.3} ms, p90 {:.3} ms, max {:.3} ms",
            order.len(),
            ms(pick(0.5)),
            ms(pick(0.9)),
            ms(pick(1.0)),
        )?;
    }
    Ok(())
}
