//! A compressed day of a host for calibration tests: a load script, the software-visible
//! signals that follow it (RAPL package watts, the CPU's busy share and mean frequency),
//! and the wall that a meter would read, related to them non-linearly:
//! `wall = 1.12 x package + 23 W + a fan's 6 W above 60 % load + noise`, and where a test
//! asks, a disk's 6 W while it is spun up. Written into a real database through the store's
//! writer, a sample every 10 s.

use std::path::Path;

use wattson::store::{MINUTE_MS, Store, StoreOptions, Writer};
use wattson_collectors::{Metric, Sample};

/// Seconds between samples.
pub const STEP_MS: i64 = 10_000;

/// One minute of the script: the load (0..1) and what the wall truly drew, W (the mean of
/// its samples).
#[derive(Debug, Clone, Copy)]
pub struct Minute {
    pub start_ms: i64,
    pub load: f64,
    pub wall_w: f64,
}

/// A small deterministic generator (no dependency, the same day every run).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }

    /// About normal, mean 0, sd 1 (the sum of twelve uniforms).
    fn noise(&mut self) -> f64 {
        (0..12).map(|_| self.next()).sum::<f64>() - 6.0
    }
}

/// The package's watts at `load`.
pub fn package_w(load: f64) -> f64 {
    9.0 + 55.0 * load
}

/// The CPU's mean frequency at `load`, MHz.
pub fn frequency_mhz(load: f64) -> f64 {
    1400.0 + 2000.0 * (2.0 * load).min(1.0)
}

/// What the wall draws at `load` without noise.
pub fn wall_w(load: f64) -> f64 {
    23.0 + 1.12 * package_w(load) + if load > 0.6 { 6.0 } else { 0.0 }
}

/// The day's load script from `t0_ms`, a minute at a time: a quiet night, a working day
/// that wanders between 10 % and 80 % with bursts, `peak` minutes at the end above
/// anything before (a batch job at 92-98 %).
pub fn script(t0_ms: i64, minutes: usize, peak: usize) -> Vec<Minute> {
    let mut rng = Lcg(0x5eed);
    let mut level: f64 = 0.1;
    (0..minutes)
        .map(|i| {
            let load = if i + peak >= minutes {
                0.92 + 0.06 * rng.next()
            } else {
                // A random walk, pulled back into 5-80 %, now and then a burst.
                level += 0.08 * (rng.next() - 0.5);
                if rng.next() < 0.02 {
                    level = 0.1 + 0.7 * rng.next();
                }
                level = level.clamp(0.05, 0.8);
                level
            };
            Minute {
                start_ms: t0_ms + i as i64 * MINUTE_MS,
                load,
                wall_w: 0.0,
            }
        })
        .collect()
}

/// What was written: each minute with the wall it truly drew.
pub struct Written {
    pub minutes: Vec<Minute>,
}

/// Writes `script`'s signals for `host` into `db`, and the wall meter's power
/// (`meter:wall`) for the minutes `with_meter` says; every minute's true wall goes into
/// the result whether stored or not.
pub fn write(
    db: &Path,
    host: &str,
    script: &[Minute],
    with_meter: impl Fn(usize) -> bool,
) -> Written {
    write_with_disk(db, host, script, with_meter, |_| None)
}

/// The watts a disk (`sda`) draws above standby while spun up.
pub const DISK_W: f64 = 6.0;

/// [`write`], and a disk `sda` that is spun up in the minutes `disk` says `Some(true)`:
/// [`DISK_W`] more at the wall, and its spun-up share stored as wattson's daemon stores
/// it (`disk/disk_spun_up/sda`; `None`: not followed that minute).
pub fn write_with_disk(
    db: &Path,
    host: &str,
    script: &[Minute],
    with_meter: impl Fn(usize) -> bool,
    disk: impl Fn(usize) -> Option<bool>,
) -> Written {
    let opts = StoreOptions {
        host: host.into(),
        ..StoreOptions::default()
    };
    let mut w = Writer::new(Store::open(db, &opts).unwrap(), opts.clone());
    let mut rng = Lcg(0xca11b);
    let mut out = Vec::with_capacity(script.len());
    for (i, m) in script.iter().enumerate() {
        let mut batch = Vec::new();
        let mut sum = 0.0;
        let per = MINUTE_MS / STEP_MS;
        for k in 0..per {
            let t = m.start_ms + k * STEP_MS;
            let up = disk(i);
            let wall =
                wall_w(m.load) + 1.5 * rng.noise() + if up == Some(true) { DISK_W } else { 0.0 };
            if let Some(up) = up {
                batch.push(Sample::new(
                    t,
                    "disk",
                    Metric::DiskSpunUp,
                    "sda",
                    if up { 1.0 } else { 0.0 },
                ));
            }
            sum += wall;
            batch.push(Sample::new(
                t,
                "rapl",
                Metric::Power,
                "package-0",
                package_w(m.load) + 0.3 * rng.noise(),
            ));
            batch.push(Sample::new(t, "cpu", Metric::CpuBusy, "all", m.load));
            batch.push(Sample::new(
                t,
                "cpu",
                Metric::CoreFrequency,
                "mean",
                frequency_mhz(m.load),
            ));
            if with_meter(i) {
                batch.push(Sample::new(t, "meter:wall", Metric::Power, "", wall));
            }
        }
        w.push(None, batch);
        out.push(Minute {
            wall_w: sum / per as f64,
            ..*m
        });
        if i % 60 == 59 {
            w.flush().unwrap();
        }
    }
    w.flush().unwrap();
    Written { minutes: out }
}
