//! RAPL and hwmon collectors against fixture trees (see each fixture's README).
// Helpers outside #[test] functions are not covered by allow-unwrap-in-tests.
#![allow(clippy::unwrap_used)]

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use wattson_collectors::power::hwmon::HwmonCollector;
use wattson_collectors::power::rapl::{RaplCollector, RaplError};
use wattson_collectors::power::{FileSource, RealFiles};
use wattson_collectors::{
    Action, CollectError, Collector, Metric, MonotonicClock, Sample, SysRoot,
};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn root_at(dir: &Path) -> SysRoot {
    SysRoot::new(dir.join("sys"), dir.join("proc"))
}

fn copy_fixture(name: &str) -> tempfile::TempDir {
    fn copy(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for entry in std::fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            let dst = to.join(entry.file_name());
            if entry.file_type().unwrap().is_dir() {
                copy(&entry.path(), &dst);
            } else {
                std::fs::copy(entry.path(), &dst).unwrap();
            }
        }
    }
    let dir = tempfile::tempdir().unwrap();
    copy(&fixture(name), dir.path());
    dir
}

fn stepped_clock() -> (Arc<AtomicU64>, MonotonicClock) {
    let us = Arc::new(AtomicU64::new(5_000_000));
    let r = Arc::clone(&us);
    (
        us,
        Box::new(move || Duration::from_micros(r.load(Ordering::SeqCst))),
    )
}

fn value(samples: &[Sample], metric: Metric, channel: &str) -> Option<f64> {
    samples
        .iter()
        .find(|s| s.metric == metric && s.channel == channel)
        .map(|s| s.value)
}

fn write(dir: &Path, rel: &str, v: u64) {
    std::fs::write(dir.join(rel), format!("{v}\n")).unwrap();
}

const PC: &str = "sys/class/powercap";

#[test]
fn intel_zones_are_named_by_parent_and_mmio_duplicate_is_dropped() {
    let (_, clock) = stepped_clock();
    let c = RaplCollector::with_parts(
        &root_at(&fixture("rapl-intel-desktop")),
        Box::new(RealFiles),
        clock,
    )
    .unwrap();
    let channels: Vec<&str> = c.zones().map(|z| z.channel.as_str()).collect();
    assert_eq!(
        channels,
        ["package-0", "package-0/core", "package-0/uncore", "psys"]
    );
    assert!(c.zones().all(|z| z.max_energy_range_uj == 262_143_328_850));
    assert!(
        c.zones().all(|z| !z.dir.to_string_lossy().contains("mmio")),
        "the MSR zone is kept, not the MMIO one"
    );
}

#[test]
fn rapl_watts_from_energy_over_elapsed_time() {
    let dir = copy_fixture("rapl-intel-desktop");
    let d = dir.path();
    let (us, clock) = stepped_clock();
    let mut c = RaplCollector::with_parts(&root_at(d), Box::new(RealFiles), clock).unwrap();
    assert!(c.poll(0).unwrap().is_empty(), "first poll has no interval");
    write(
        d,
        &format!("{PC}/intel-rapl:0/energy_uj"),
        123_456_789 + 5_000_000,
    );
    write(
        d,
        &format!("{PC}/intel-rapl:0:0/energy_uj"),
        50_000_000 + 2_500_000,
    );
    us.fetch_add(500_000, Ordering::SeqCst);
    let s = c.poll(500).unwrap();
    assert_eq!(value(&s, Metric::Power, "package-0"), Some(10.0));
    assert_eq!(value(&s, Metric::Power, "package-0/core"), Some(5.0));
    assert_eq!(value(&s, Metric::Power, "psys"), Some(0.0));
    assert_eq!(s.len(), 4);
    assert!(s.iter().all(|x| x.source == "rapl" && x.ts_ms == 500));
}

#[test]
fn rapl_counter_wrap_is_corrected_with_max_energy_range() {
    let dir = copy_fixture("rapl-intel-desktop");
    let d = dir.path();
    let pkg = format!("{PC}/intel-rapl:0/energy_uj");
    write(d, &pkg, 262_143_328_850 - 1_000_000);
    let (us, clock) = stepped_clock();
    let mut c = RaplCollector::with_parts(&root_at(d), Box::new(RealFiles), clock).unwrap();
    c.poll(0).unwrap();
    write(d, &pkg, 3_000_000);
    us.fetch_add(1_000_000, Ordering::SeqCst);
    let s = c.poll(1000).unwrap();
    assert_eq!(value(&s, Metric::Power, "package-0"), Some(4.0));
}

#[test]
fn amd_two_sockets_have_package_and_core_zones() {
    let dir = copy_fixture("rapl-amd-epyc-2s");
    let d = dir.path();
    let (us, clock) = stepped_clock();
    let mut c = RaplCollector::with_parts(&root_at(d), Box::new(RealFiles), clock).unwrap();
    let channels: Vec<&str> = c.zones().map(|z| z.channel.as_str()).collect();
    assert_eq!(
        channels,
        ["package-0", "package-0/core", "package-1", "package-1/core"]
    );
    c.poll(0).unwrap();
    write(
        d,
        &format!("{PC}/intel-rapl:1/energy_uj"),
        2_000_000 + 90_000_000,
    );
    us.fetch_add(1_000_000, Ordering::SeqCst);
    let s = c.poll(1000).unwrap();
    assert_eq!(value(&s, Metric::Power, "package-1"), Some(90.0));
    assert_eq!(value(&s, Metric::Power, "package-0"), Some(0.0));
}

/// Reads like the real machine for an unprivileged user since Linux 5.10.
struct RootOnlyEnergy;

impl FileSource for RootOnlyEnergy {
    fn read_to_string(&mut self, path: &Path) -> io::Result<String> {
        if path.ends_with("energy_uj") {
            return Err(io::Error::from(io::ErrorKind::PermissionDenied));
        }
        std::fs::read_to_string(path)
    }
}

#[test]
fn permission_denied_says_how_to_fix_it() {
    let (_, clock) = stepped_clock();
    let err = RaplCollector::with_parts(
        &root_at(&fixture("rapl-intel-desktop")),
        Box::new(RootOnlyEnergy),
        clock,
    )
    .unwrap_err();
    assert!(matches!(err, RaplError::PermissionDenied { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains("intel-rapl:0/energy_uj"), "{msg}");
    assert!(
        msg.contains("ExecStartPre=+") && msg.contains("as root"),
        "{msg}"
    );
    let err = CollectError::from(err);
    assert_eq!(err.action(), Action::Stop);
}

#[test]
fn no_powercap_means_unavailable() {
    let dir = tempfile::tempdir().unwrap();
    let err = RaplCollector::new(&root_at(dir.path())).unwrap_err();
    assert!(matches!(err, RaplError::NoZones { .. }));
    assert_eq!(CollectError::from(err).action(), Action::Stop);
}

#[test]
fn hwmon_reads_psu_gpu_and_energy_sensors() {
    let dir = copy_fixture("hwmon-psu-amdgpu");
    let d = dir.path();
    let (us, clock) = stepped_clock();
    let mut c = HwmonCollector::with_parts(&root_at(d), Box::new(RealFiles), clock).unwrap();
    let channels: Vec<&str> = c.sensors().map(|s| s.channel.as_str()).collect();
    assert_eq!(
        channels,
        [
            "amdgpu/PPT",
            "corsairpsu/power total",
            "corsairpsu/power 12v",
            "amd_energy/Esocket0"
        ]
    );
    let s = c.poll(0).unwrap();
    assert_eq!(value(&s, Metric::Power, "amdgpu/PPT"), Some(35.0));
    assert_eq!(
        value(&s, Metric::Power, "corsairpsu/power total"),
        Some(120.0)
    );
    assert_eq!(value(&s, Metric::Power, "corsairpsu/power 12v"), Some(85.0));
    assert_eq!(
        value(&s, Metric::EnergyCounter, "amd_energy/Esocket0"),
        Some(1.0)
    );
    assert_eq!(value(&s, Metric::Power, "amd_energy/Esocket0"), None);

    write(
        d,
        "sys/class/hwmon/hwmon3/energy1_input",
        3_600_000_000 + 60_000_000,
    );
    us.fetch_add(2_000_000, Ordering::SeqCst);
    let s = c.poll(2000).unwrap();
    assert_eq!(value(&s, Metric::Power, "amd_energy/Esocket0"), Some(30.0));
}

#[test]
fn hwmon_chips_sharing_a_name_get_their_index_and_missing_labels_a_default() {
    let dir = copy_fixture("hwmon-psu-amdgpu");
    let d = dir.path();
    let second = d.join("sys/class/hwmon/hwmon4");
    std::fs::create_dir_all(&second).unwrap();
    std::fs::write(second.join("name"), "amdgpu\n").unwrap();
    std::fs::write(second.join("power1_average"), "12500000\n").unwrap();
    std::fs::write(second.join("power1_input"), "13000000\n").unwrap();
    let (_, clock) = stepped_clock();
    let mut c = HwmonCollector::with_parts(&root_at(d), Box::new(RealFiles), clock).unwrap();
    let s = c.poll(0).unwrap();
    assert_eq!(value(&s, Metric::Power, "amdgpu-hwmon1/PPT"), Some(35.0));
    // power1_input wins over power1_average.
    assert_eq!(value(&s, Metric::Power, "amdgpu-hwmon4/power1"), Some(13.0));
}
