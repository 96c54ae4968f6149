//! CPU collector against fixture trees modelled on real machines (see each fixture's README).
// Helpers outside #[test] functions are not covered by allow-unwrap-in-tests.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use wattson_collectors::cpu::{CpuCollector, CpuOptions, cpu_facts, pin_order, read_topology};
use wattson_collectors::{Action, Collector, Metric, Sample};

use crate::common::{self, fixture, root_at};

fn copy_fixture(name: &str) -> tempfile::TempDir {
    common::copy_fixtures(&[name])
}

/// A hand-stepped monotonic clock.
fn stepped_clock() -> (Arc<AtomicU64>, wattson_collectors::cpu::MonotonicClock) {
    let us = Arc::new(AtomicU64::new(1_000_000));
    let reader = Arc::clone(&us);
    (
        us,
        Box::new(move || Duration::from_micros(reader.load(Ordering::SeqCst))),
    )
}

fn value(samples: &[Sample], metric: Metric, channel: &str) -> Option<f64> {
    let found: Vec<f64> = samples
        .iter()
        .filter(|s| s.metric == metric && s.channel == channel)
        .map(|s| s.value)
        .collect();
    assert!(found.len() <= 1, "{channel} emitted {} times", found.len());
    found.first().copied()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
}

const CPU: &str = "sys/devices/system/cpu";

fn bump(dir: &Path, rel: &str, by: i64) {
    let path = dir.join(rel);
    let now: i64 = std::fs::read_to_string(&path)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    std::fs::write(&path, format!("{}\n", now + by)).unwrap();
}

/// Add `deltas` (user, nice, system, idle, iowait) to one `/proc/stat` line.
fn bump_stat(dir: &Path, label: &str, deltas: [u64; 5]) {
    let path = dir.join("proc/stat");
    let text = std::fs::read_to_string(&path).unwrap();
    let out: Vec<String> = text
        .lines()
        .map(|line| {
            let mut words = line.split_whitespace();
            if words.next() != Some(label) {
                return line.to_owned();
            }
            let nums: Vec<u64> = words
                .enumerate()
                .map(|(i, w)| w.parse::<u64>().unwrap() + deltas.get(i).copied().unwrap_or(0))
                .collect();
            let nums: Vec<String> = nums.iter().map(u64::to_string).collect();
            format!("{label} {}", nums.join(" "))
        })
        .collect();
    std::fs::write(&path, out.join("\n") + "\n").unwrap();
}

fn set_stat(dir: &Path, label: &str, field: usize, to: u64) {
    let path = dir.join("proc/stat");
    let text = std::fs::read_to_string(&path).unwrap();
    let out: Vec<String> = text
        .lines()
        .map(|line| {
            let mut words: Vec<String> = line.split_whitespace().map(str::to_owned).collect();
            if words.first().map(String::as_str) == Some(label) {
                words[field + 1] = to.to_string();
                words.join(" ")
            } else {
                line.to_owned()
            }
        })
        .collect();
    std::fs::write(&path, out.join("\n") + "\n").unwrap();
}

#[test]
fn intel_desktop_facts_and_pin_order() {
    let root = root_at(&fixture("intel-adl-desktop"));
    let facts = cpu_facts(&root);
    assert_eq!(
        facts.model_name.as_deref(),
        Some("12th Gen Intel(R) Core(TM) i3-12100")
    );
    assert_eq!(
        (facts.logical_cpus, facts.physical_cores, facts.packages),
        (8, 4, 1)
    );
    assert_eq!(facts.cpufreq_driver.as_deref(), Some("intel_pstate"));
    assert_eq!(facts.governor.as_deref(), Some("powersave"));
    assert_eq!(
        facts.energy_performance_preference.as_deref(),
        Some("balance_performance")
    );
    assert_eq!(facts.cpuidle_driver.as_deref(), Some("intel_idle"));
    assert_eq!(facts.cpuidle_governor.as_deref(), Some("menu"));
    assert_eq!(facts.idle_states, ["POLL", "C1", "C1E", "C6", "C8", "C10"]);

    let topology = read_topology(&root).unwrap();
    assert_eq!(topology.cpus[5].thread_siblings, vec![4, 5]);
    assert_eq!(pin_order(&topology), vec![0, 2, 4, 6, 1, 3, 5, 7]);
}

#[test]
fn first_poll_emits_only_cpufreq_frequencies() {
    let (_, clock) = stepped_clock();
    let mut c = CpuCollector::with_clock(root_at(&fixture("intel-adl-desktop")), clock);
    assert!(
        c.availability().iter().all(|(_, s)| s.is_ok()),
        "{:?}",
        c.availability()
    );
    let samples = c.poll(1_700_000_000_000).unwrap();
    assert!(samples.iter().all(|s| s.metric == Metric::CoreFrequency));
    assert!(
        samples
            .iter()
            .all(|s| s.source == "cpu" && s.ts_ms == 1_700_000_000_000)
    );
    assert_eq!(samples.len(), 9);
    // scaling_cur_freq (kHz) wins over /proc/cpuinfo's 3300 MHz.
    assert_eq!(value(&samples, Metric::CoreFrequency, "cpu1"), Some(4300.0));
    assert_eq!(
        value(&samples, Metric::CoreFrequency, "cpu3"),
        Some(800.012)
    );
    let mean = value(&samples, Metric::CoreFrequency, "mean").unwrap();
    assert!(close(mean, 14_600_012.0 / 8000.0), "{mean}");
}

#[test]
fn intel_second_poll_computes_residency_and_utilisation() {
    let dir = copy_fixture("intel-adl-desktop");
    let (us, clock) = stepped_clock();
    let mut c = CpuCollector::with_clock(root_at(dir.path()), clock);
    c.poll(0).unwrap();

    let d = dir.path();
    bump(d, &format!("{CPU}/cpu0/cpuidle/state3/time"), 600_000); // C6
    bump(d, &format!("{CPU}/cpu0/cpuidle/state5/time"), 300_000); // C10
    bump(d, &format!("{CPU}/cpu1/cpuidle/state3/time"), 1_500_000); // asleep across polls
    bump(d, &format!("{CPU}/cpu2/cpuidle/state3/time"), -5); // went backwards
    bump_stat(d, "cpu", [30, 0, 10, 50, 10]);
    bump_stat(d, "cpu0", [30, 0, 10, 50, 10]);
    set_stat(d, "cpu1", 3, 1); // idle went backwards (hotplug)
    std::fs::write(
        d.join(format!("{CPU}/cpufreq/policy0/scaling_cur_freq")),
        "4100000\n",
    )
    .unwrap();
    us.fetch_add(1_000_000, Ordering::SeqCst);

    let s = c.poll(1000).unwrap();
    assert_eq!(value(&s, Metric::CoreFrequency, "cpu0"), Some(4100.0));
    assert_eq!(value(&s, Metric::IdleResidency, "cpu0/C6"), Some(0.6));
    assert_eq!(value(&s, Metric::IdleResidency, "cpu0/C10"), Some(0.3));
    assert_eq!(value(&s, Metric::IdleResidency, "cpu0/POLL"), Some(0.0));
    assert_eq!(value(&s, Metric::IdleResidency, "cpu1/C6"), Some(1.0));
    assert_eq!(value(&s, Metric::IdleResidency, "cpu2/C6"), None);
    let all_c6 = value(&s, Metric::IdleResidency, "all/C6").unwrap();
    assert!(close(all_c6, 1.6 / 7.0), "{all_c6}");
    let all_c10 = value(&s, Metric::IdleResidency, "all/C10").unwrap();
    assert!(close(all_c10, 0.3 / 8.0), "{all_c10}");

    assert_eq!(value(&s, Metric::CpuBusy, "all"), Some(0.4));
    assert_eq!(value(&s, Metric::CpuBusy, "cpu0"), Some(0.4));
    assert_eq!(
        value(&s, Metric::CpuBusy, "cpu1"),
        None,
        "backwards counter skipped"
    );
    assert_eq!(
        value(&s, Metric::CpuBusy, "cpu2"),
        None,
        "no ticks, no share"
    );
    assert_eq!(value(&s, Metric::CpuTime, "all/user"), Some(0.3));
    assert_eq!(value(&s, Metric::CpuTime, "all/iowait"), Some(0.1));
    assert_eq!(value(&s, Metric::CpuTime, "all/steal"), Some(0.0));
    assert_eq!(
        value(&s, Metric::CpuTime, "cpu0/user"),
        None,
        "per-CPU times off by default"
    );
    assert!(
        s.iter()
            .all(|x| (0.0..=1.0).contains(&x.value) || x.metric == Metric::CoreFrequency)
    );
}

#[test]
fn per_cpu_times_when_asked() {
    let dir = copy_fixture("intel-adl-desktop");
    let (us, clock) = stepped_clock();
    let mut c = CpuCollector::with_clock(root_at(dir.path()), clock).with_per_cpu_times(true);
    c.poll(0).unwrap();
    bump_stat(dir.path(), "cpu3", [0, 25, 0, 75, 0]);
    us.fetch_add(1_000_000, Ordering::SeqCst);
    let s = c.poll(1000).unwrap();
    assert_eq!(value(&s, Metric::CpuTime, "cpu3/nice"), Some(0.25));
    assert_eq!(value(&s, Metric::CpuTime, "cpu3/idle"), Some(0.75));
    assert_eq!(value(&s, Metric::CpuBusy, "cpu3"), Some(0.25));
}

#[test]
fn disabled_states_are_not_reported_and_vanishing_states_do_not_crash() {
    let dir = copy_fixture("intel-adl-desktop");
    let d = dir.path();
    std::fs::write(d.join(format!("{CPU}/cpu0/cpuidle/state5/disable")), "1\n").unwrap();
    let (us, clock) = stepped_clock();
    // A kept handle on an unlinked tmpfs file still reads, where sysfs answers ENODEV; open
    // per read so that removing a state here behaves as it does in sysfs.
    let options = CpuOptions {
        keep_files_open: false,
        ..CpuOptions::default()
    };
    let mut c = CpuCollector::with_options(root_at(d), clock, options);
    c.poll(0).unwrap();
    bump(d, &format!("{CPU}/cpu1/cpuidle/state5/time"), 800_000);
    us.fetch_add(2_000_000, Ordering::SeqCst);
    let s = c.poll(2000).unwrap();
    assert_eq!(value(&s, Metric::IdleResidency, "cpu0/C10"), None);
    assert_eq!(value(&s, Metric::IdleResidency, "cpu1/C10"), Some(0.4));
    let all = value(&s, Metric::IdleResidency, "all/C10").unwrap();
    assert!(
        close(all, 0.4 / 7.0),
        "mean over the 7 CPUs with C10 enabled: {all}"
    );

    // C8 disappears from cpu2 (driver change): skipped, then rediscovered without it.
    std::fs::remove_dir_all(d.join(format!("{CPU}/cpu2/cpuidle/state4"))).unwrap();
    us.fetch_add(1_000_000, Ordering::SeqCst);
    let s = c.poll(3000).unwrap();
    assert_eq!(value(&s, Metric::IdleResidency, "cpu2/C8"), None);
    assert_eq!(value(&s, Metric::IdleResidency, "cpu2/C6"), Some(0.0));
    us.fetch_add(1_000_000, Ordering::SeqCst);
    let s = c.poll(4000).unwrap();
    assert_eq!(value(&s, Metric::IdleResidency, "cpu2/C8"), None);
    assert_eq!(value(&s, Metric::IdleResidency, "cpu3/C8"), Some(0.0));
}

#[test]
fn amd_server_skips_the_offline_cpu_and_counts_two_packages() {
    let root = root_at(&fixture("amd-epyc-2s-server"));
    let facts = cpu_facts(&root);
    assert_eq!(
        facts.model_name.as_deref(),
        Some("AMD EPYC 7252 8-Core Processor")
    );
    assert_eq!(
        (facts.logical_cpus, facts.physical_cores, facts.packages),
        (7, 4, 2)
    );
    assert_eq!(facts.cpufreq_driver.as_deref(), Some("acpi-cpufreq"));
    assert_eq!(facts.governor.as_deref(), Some("schedutil"));
    assert_eq!(facts.energy_performance_preference, None);
    assert_eq!(facts.cpuidle_driver.as_deref(), Some("acpi_idle"));
    assert_eq!(facts.idle_states, ["POLL", "C1", "C2"]);
    assert_eq!(
        pin_order(&read_topology(&root).unwrap()),
        vec![0, 1, 2, 7, 4, 5, 6]
    );

    let (_, clock) = stepped_clock();
    let mut c = CpuCollector::with_clock(root, clock);
    assert_eq!(c.cpus(), [0, 1, 2, 4, 5, 6, 7]);
    let s = c.poll(0).unwrap();
    assert_eq!(value(&s, Metric::CoreFrequency, "cpu3"), None);
    assert_eq!(value(&s, Metric::CoreFrequency, "cpu6"), Some(3100.0));
    let mean = value(&s, Metric::CoreFrequency, "mean").unwrap();
    assert!(close(mean, 15_100_000.0 / 7000.0), "{mean}");
}

#[test]
fn amd_cpu_coming_online_is_picked_up() {
    let dir = copy_fixture("amd-epyc-2s-server");
    let d = dir.path();
    let (us, clock) = stepped_clock();
    let mut c = CpuCollector::with_clock(root_at(d), clock);
    c.poll(0).unwrap();

    // Bring cpu3 online the way the kernel does: topology, cpuidle, cpufreq, a stat line.
    let cpu3 = d.join(format!("{CPU}/cpu3"));
    for (k, name) in ["POLL", "C1", "C2"].iter().enumerate() {
        let state = cpu3.join(format!("cpuidle/state{k}"));
        std::fs::create_dir_all(&state).unwrap();
        std::fs::write(state.join("name"), format!("{name}\n")).unwrap();
        std::fs::write(state.join("disable"), "0\n").unwrap();
        std::fs::write(state.join("time"), "1000\n").unwrap();
    }
    std::fs::create_dir_all(d.join(format!("{CPU}/cpufreq/policy3"))).unwrap();
    std::fs::write(
        d.join(format!("{CPU}/cpufreq/policy3/scaling_cur_freq")),
        "2200000\n",
    )
    .unwrap();
    std::os::unix::fs::symlink("../cpufreq/policy3", cpu3.join("cpufreq")).unwrap();
    std::fs::write(cpu3.join("online"), "1\n").unwrap();
    std::fs::write(d.join(format!("{CPU}/online")), "0-7\n").unwrap();
    let stat = std::fs::read_to_string(d.join("proc/stat")).unwrap();
    let stat = stat.replace("cpu4 ", "cpu3 100 0 100 800 0 0 0 0 0 0\ncpu4 ");
    std::fs::write(d.join("proc/stat"), stat).unwrap();
    us.fetch_add(1_000_000, Ordering::SeqCst);

    let s = c.poll(1000).unwrap();
    assert_eq!(c.cpus(), [0, 1, 2, 3, 4, 5, 6, 7]);
    assert_eq!(value(&s, Metric::CoreFrequency, "cpu3"), Some(2200.0));
    assert_eq!(
        value(&s, Metric::IdleResidency, "cpu3/C2"),
        None,
        "no interval yet"
    );
    assert_eq!(value(&s, Metric::IdleResidency, "cpu0/C2"), Some(0.0));

    bump(d, &format!("{CPU}/cpu3/cpuidle/state2/time"), 900_000);
    bump_stat(d, "cpu3", [10, 0, 0, 90, 0]);
    us.fetch_add(1_000_000, Ordering::SeqCst);
    let s = c.poll(2000).unwrap();
    assert_eq!(value(&s, Metric::IdleResidency, "cpu3/C2"), Some(0.9));
    assert_eq!(value(&s, Metric::CpuBusy, "cpu3"), Some(0.1));
}

/// A CPU going offline, as the kernel shows it: `online` and `/proc/stat` (which lists the
/// online CPUs only, and is what each poll reads; `online` is read again when it differs).
/// The same poll follows the new set.
#[test]
fn a_cpu_going_offline_is_dropped_in_the_poll_that_sees_it() {
    let dir = copy_fixture("kvm-amd-epyc-haltpoll");
    let d = dir.path();
    let (us, clock) = stepped_clock();
    let mut c = CpuCollector::with_clock(root_at(d), clock);
    c.poll(0).unwrap();
    us.fetch_add(1_000_000, Ordering::SeqCst);
    let s = c.poll(1000).unwrap();
    assert_eq!(c.cpus(), [0, 1]);
    assert!(value(&s, Metric::CoreFrequency, "cpu1").is_some());

    std::fs::write(d.join(format!("{CPU}/online")), "0\n").unwrap();
    let stat = std::fs::read_to_string(d.join("proc/stat")).unwrap();
    let stat: String = stat
        .lines()
        .filter(|l| !l.starts_with("cpu1 "))
        .fold(String::new(), |out, l| out + l + "\n");
    std::fs::write(d.join("proc/stat"), stat).unwrap();
    us.fetch_add(1_000_000, Ordering::SeqCst);
    let s = c.poll(2000).unwrap();
    assert_eq!(c.cpus(), [0]);
    assert_eq!(value(&s, Metric::CoreFrequency, "cpu1"), None);
    assert_eq!(value(&s, Metric::CoreFrequency, "cpu0"), Some(2596.146));
}

#[test]
fn kvm_guest_without_cpufreq_reads_cpuinfo_and_haltpoll_states() {
    let dir = copy_fixture("kvm-amd-epyc-haltpoll");
    let d = dir.path();
    let facts = cpu_facts(&root_at(d));
    assert_eq!(facts.model_name.as_deref(), Some("AMD EPYC"));
    assert_eq!((facts.cpufreq_driver, facts.governor), (None, None));
    assert_eq!(facts.cpuidle_driver.as_deref(), Some("haltpoll"));
    assert_eq!(facts.idle_states, ["POLL", "haltpoll idle"]);

    let (us, clock) = stepped_clock();
    let mut c = CpuCollector::with_clock(root_at(d), clock);
    assert!(
        c.availability().iter().all(|(_, s)| s.is_ok()),
        "{:?}",
        c.availability()
    );
    let s = c.poll(0).unwrap();
    assert_eq!(value(&s, Metric::CoreFrequency, "cpu0"), Some(2596.146));
    assert_eq!(value(&s, Metric::CoreFrequency, "cpu1"), Some(2596.146));
    assert_eq!(value(&s, Metric::CoreFrequency, "mean"), Some(2596.146));

    bump(d, &format!("{CPU}/cpu0/cpuidle/state1/time"), 250_000);
    bump(d, &format!("{CPU}/cpu1/cpuidle/state1/time"), 450_000);
    bump_stat(d, "cpu", [40, 0, 10, 140, 10]);
    us.fetch_add(500_000, Ordering::SeqCst);
    let s = c.poll(500).unwrap();
    assert_eq!(
        value(&s, Metric::IdleResidency, "cpu0/haltpoll idle"),
        Some(0.5)
    );
    assert_eq!(
        value(&s, Metric::IdleResidency, "cpu1/haltpoll idle"),
        Some(0.9)
    );
    let all = value(&s, Metric::IdleResidency, "all/haltpoll idle").unwrap();
    assert!(close(all, 0.7), "{all}");
    assert_eq!(value(&s, Metric::CpuBusy, "all"), Some(0.25));
    assert_eq!(value(&s, Metric::CpuTime, "all/user"), Some(0.2));
}

#[test]
fn a_machine_with_nothing_degrades_to_unavailable_without_panicking() {
    let dir = tempfile::tempdir().unwrap();
    let (_, clock) = stepped_clock();
    let mut c = CpuCollector::with_clock(root_at(dir.path()), clock);
    let parts: Vec<&str> = c.availability().iter().map(|(p, _)| *p).collect();
    assert_eq!(parts, ["topology", "frequency", "cpuidle", "stat"]);
    assert!(c.availability().iter().all(|(_, s)| s.is_err()));
    let err = c.poll(0).unwrap_err();
    assert_eq!(err.action(), Action::Stop);
    assert!(err.to_string().contains("stat"), "{err}");
}

#[test]
fn only_proc_stat_still_gives_utilisation() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir_all(d.join("proc")).unwrap();
    std::fs::write(d.join("proc/stat"), "cpu  10 0 10 80 0 0 0 0 0 0\nintr 0\n").unwrap();
    let (us, clock) = stepped_clock();
    let mut c = CpuCollector::with_clock(root_at(d), clock);
    let avail = c.availability();
    assert!(avail[3].1.is_ok());
    assert!(
        avail[2]
            .1
            .as_ref()
            .unwrap_err()
            .to_string()
            .contains("cpuidle"),
        "{avail:?}"
    );
    assert!(c.poll(0).unwrap().is_empty());
    std::fs::write(
        d.join("proc/stat"),
        "cpu  30 0 10 160 0 0 0 0 0 0\nintr 0\n",
    )
    .unwrap();
    us.fetch_add(1_000_000, Ordering::SeqCst);
    let s = c.poll(1000).unwrap();
    assert_eq!(value(&s, Metric::CpuBusy, "all"), Some(0.2));
}
