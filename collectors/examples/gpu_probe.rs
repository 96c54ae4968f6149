//! Print what NVML and nvidia-smi each say about every GPU, once a second, side by side,
//! plus what one NVML poll costs. Run with
//! `cargo run -p wattson-collectors --example gpu_probe -- [seconds]` (default 10), or
//! through `collectors/examples/gpu-check.sh`. On a machine without the driver it prints the one
//! error line the daemon would log and exits 0.
#![allow(clippy::print_stdout)]

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use wattson_collectors::power::nvidia_smi::NvidiaSmiCollector;
use wattson_collectors::power::nvml::NvmlCollector;
use wattson_collectors::{CollectError, Collector, Metric, Sample};

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn value(samples: &[Sample], channel: &str, metric: Metric) -> String {
    samples
        .iter()
        .find(|s| s.channel == channel && s.metric == metric)
        .map_or_else(|| "-".to_owned(), |s| format!("{:.2}", s.value))
}

fn main() {
    let seconds: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    let mut nvml = match NvmlCollector::new() {
        Ok(c) => c,
        Err(e) => {
            println!("{}", CollectError::from(e));
            return;
        }
    };
    for g in nvml.gpus() {
        println!("{}: {}", g.channel, g.name);
    }
    let mut smi = NvidiaSmiCollector::new("nvidia-smi", Duration::from_secs(5))
        .map_err(|e| println!("nvidia-smi: {}", CollectError::from(e)))
        .ok();
    println!(
        "{:>4} {:>6} | {:>9} {:>12} {:>3} {:>5} {:>6} | {:>9} {:>6} {:>5} {:>3} | {:>9}",
        "t",
        "gpu",
        "nvml W",
        "energy Wh",
        "P",
        "util",
        "SM MHz",
        "smi W",
        "SM MHz",
        "util",
        "P",
        "poll us"
    );
    let start = Instant::now();
    let mut last_energy: Option<(f64, Instant)> = None;
    for tick in 0..seconds {
        let t = Instant::now();
        let polled = nvml.poll(now_ms());
        let poll_us = t.elapsed().as_micros();
        let n = match polled {
            Ok(s) => s,
            Err(e) => {
                println!("nvml poll: {e} ({:?})", e.action());
                Vec::new()
            }
        };
        let s = smi.as_mut().map_or_else(Vec::new, |c| {
            c.poll(now_ms()).unwrap_or_else(|e| {
                println!("nvidia-smi poll: {e}");
                Vec::new()
            })
        });
        let channels: Vec<String> = nvml.gpus().map(|g| g.channel.clone()).collect();
        for ch in &channels {
            println!(
                "{:>4} {:>6} | {:>9} {:>12} {:>3} {:>5} {:>6} | {:>9} {:>6} {:>5} {:>3} | {:>9}",
                tick,
                ch,
                value(&n, ch, Metric::Power),
                value(&n, ch, Metric::EnergyCounter),
                value(&n, ch, Metric::PState),
                value(&n, ch, Metric::GpuUtilisation),
                value(&n, ch, Metric::GpuClock),
                value(&s, ch, Metric::Power),
                value(&s, ch, Metric::GpuClock),
                value(&s, ch, Metric::GpuUtilisation),
                value(&s, ch, Metric::PState),
                poll_us,
            );
        }
        // Watts from the energy counter of gpu0 between polls, as a cross-check.
        if let Some(e) = n
            .iter()
            .find(|s| s.channel == "gpu0" && s.metric == Metric::EnergyCounter)
        {
            let now = Instant::now();
            if let Some((prev, at)) = last_energy {
                let w = (e.value - prev) * 3600.0 / now.duration_since(at).as_secs_f64();
                println!("{:>4} {:>6} | energy-counter W {w:.2}", tick, "gpu0");
            }
            last_energy = Some((e.value, now));
        }
        let next = Duration::from_secs(tick + 1);
        if let Some(wait) = next.checked_sub(start.elapsed()) {
            std::thread::sleep(wait);
        }
    }
}
