//! Idle readers (package C-states, power settings) against fixture trees modelled on real
//! machines: an Intel desktop whose residency MSRs the test advances, an AMD server, and the
//! KVM capture, where every reader that cannot work says why.
// Helpers outside #[test] functions are not covered by allow-unwrap-in-tests.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use wattson_collectors::cpu::{CpuCollector, CpuOptions};
use wattson_collectors::idle::settings::{self, SettingKind};
use wattson_collectors::idle::{CounterId, PackageReader, PcState, PerfCounters};
use wattson_collectors::{Collector, Metric};

use crate::common::{self, fixture, root_at};

/// A base fixture with an overlay copied over it, in a temp dir.
fn compose(base: &str, overlay: &str) -> tempfile::TempDir {
    common::copy_fixtures(&[base, overlay])
}

/// Write MSR values into `dev/cpu/N/msr`, a regular file standing in for the msr device:
/// little-endian u64s indexed by MSR number (offset 8 x MSR; see `idle::package`).
fn write_msr(dir: &Path, cpu: usize, values: &[(u64, u64)]) {
    use std::os::unix::fs::FileExt as _;
    let d = dir.join(format!("dev/cpu/{cpu}"));
    std::fs::create_dir_all(&d).unwrap();
    let f = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(false)
        .open(d.join("msr"))
        .unwrap();
    for &(msr, v) in values {
        f.write_all_at(&v.to_le_bytes(), msr * 8).unwrap();
    }
}

#[test]
fn intel_desktop_package_states_advance_through_the_cpu_collector() {
    let dir = compose("intel-adl-desktop", "idle-intel-desktop");
    // TSC, PC2, PC3, PC6, PC8, PC10, and the firmware limit: PC10 allowed (unlimited).
    let start = [
        (0x10, 10_000_000),
        (0x60D, 0),
        (0x3F8, 0),
        (0x3F9, 0),
        (0x630, 0),
        (0x632, 0),
        (0xE2, 0x8008),
    ];
    write_msr(dir.path(), 0, &start);
    let us = Arc::new(AtomicU64::new(1_000_000));
    let clock = {
        let us = us.clone();
        Box::new(move || Duration::from_micros(us.load(Ordering::SeqCst)))
    };
    let mut cpu = CpuCollector::with_options(root_at(dir.path()), clock, CpuOptions::default())
        .with_devfs(dir.path().join("dev"));
    let parts = cpu.availability();
    assert!(
        parts
            .iter()
            .any(|(p, s)| *p == "package C-states" && s.is_ok()),
        "{parts:?}"
    );
    cpu.poll(0).unwrap();
    // One second at a 3.3 GHz TSC: 20 % PC2, 50 % PC6, 10 % PC10; PC3 and PC8 untouched.
    let tsc = 3_300_000_000u64;
    write_msr(
        dir.path(),
        0,
        &[
            (0x10, 10_000_000 + tsc),
            (0x60D, tsc / 5),
            (0x3F9, tsc / 2),
            (0x632, tsc / 10),
        ],
    );
    us.fetch_add(1_000_000, Ordering::SeqCst);
    let samples = cpu.poll(1000).unwrap();
    let share = |ch: &str| {
        samples
            .iter()
            .find(|s| s.metric == Metric::PackageResidency && s.channel == ch)
            .map(|s| s.value)
    };
    assert_eq!(share("all/PC2"), Some(0.2));
    assert_eq!(share("all/PC6"), Some(0.5));
    assert_eq!(share("all/PC10"), Some(0.1));
    assert_eq!(share("all/PC3"), Some(0.0));
    assert_eq!(share("all/PC7"), None, "Alder Lake has no PC7 counter");
    assert!(
        !samples
            .iter()
            .any(|s| s.metric == Metric::PackageResidency && s.channel.starts_with("package")),
        "one package: only the all/ channels"
    );
    let reader = PackageReader::discover(&root_at(dir.path()), &dir.path().join("dev")).unwrap();
    assert_eq!(reader.platform(), "adl");
    assert_eq!(reader.limit().unwrap().label, "unlimited");
    assert!(reader.limit().unwrap().locked);
    assert_eq!(reader.states().last(), Some(&PcState::Pc10));
}

#[test]
fn intel_desktop_settings_show_every_value_and_the_lower_one() {
    let dir = compose("intel-adl-desktop", "idle-intel-desktop");
    let root = root_at(dir.path());
    let all = settings::read_all(&root);
    let get = |id: &str| {
        all.iter().find(|s| s.id == id).unwrap_or_else(|| {
            panic!(
                "no {id} in {:?}",
                all.iter().map(|s| &s.id).collect::<Vec<_>>()
            )
        })
    };
    let aspm = get("pcie_aspm");
    assert_eq!(aspm.current, "performance");
    assert_eq!(aspm.lower.as_deref(), Some("powersave"));
    assert_eq!(aspm.available.len(), 4);
    for h in 0..4 {
        let s = get(&format!("sata_alpm:host{h}"));
        assert_eq!(s.current, "max_performance");
        assert_eq!(s.lower.as_deref(), Some("med_power_with_dipm"));
    }
    let nic = get("runtime_pm_pci:0000:03:00.0");
    assert_eq!(nic.current, "on");
    assert_eq!(nic.lower.as_deref(), Some("auto"));
    assert!(nic.label.contains("network controller"), "{}", nic.label);
    assert!(get("runtime_pm_pci:0000:00:14.0").is_low_power());
    assert_eq!(get("runtime_pm_usb:1-1").current, "on");
    assert!(
        !all.iter().any(|s| s.id.contains("1-1:1.0")),
        "interfaces are not devices"
    );
    assert_eq!(get("runtime_pm_ata:ata1").lower.as_deref(), Some("auto"));
    let link = get("pcie_link_aspm:0000:03:00.0");
    assert_eq!(link.current, "off");
    assert!(link.files.is_empty(), "link states are shown, not written");
    assert_eq!(get("nmi_watchdog").lower.as_deref(), Some("0"));
    assert_eq!(get("dirty_writeback").lower.as_deref(), Some("1500"));
    assert_eq!(get("audio_power_save").lower.as_deref(), Some("1"));
    let governor = get("cpufreq_governor");
    assert_eq!(governor.current, "powersave");
    assert!(governor.is_low_power());
    assert_eq!(governor.files.len(), 8);
    let epp = get("epp");
    assert_eq!(epp.current, "balance_performance");
    assert_eq!(epp.lower.as_deref(), Some("balance_power"));
    assert_eq!(get("turbo").lower.as_deref(), Some("1"));
    assert!(get("disk:sdb").current.contains("spun down"));
    assert!(
        get("disk:sda")
            .note
            .as_deref()
            .unwrap()
            .contains("hdparm -S")
    );
    // Listed in the documented order, every kind present.
    let kinds: Vec<SettingKind> = all.iter().map(|s| s.kind).collect();
    let mut sorted = kinds.clone();
    sorted.sort_by_key(|k| SettingKind::ALL.iter().position(|x| x == k));
    assert_eq!(kinds, sorted);
    assert!(settings::absent(&root, &all).is_empty());
}

#[test]
fn amd_server_says_it_has_no_package_counters_and_what_it_has() {
    let dir = compose("amd-epyc-2s-server", "idle-amd-server");
    let root = root_at(dir.path());
    let err = PackageReader::discover(&root, &dir.path().join("dev")).unwrap_err();
    assert!(
        err.reason.contains("AMD documents no package C-state"),
        "{err}"
    );
    let has = err.has.join("; ");
    assert!(has.contains("C1, C2"), "{has}");
    assert!(has.contains("RAPL"), "{has}");
    let cpu = CpuCollector::new(root.clone()).with_devfs(dir.path().join("dev"));
    let (_, state) = cpu
        .availability()
        .into_iter()
        .find(|(p, _)| *p == "package C-states")
        .unwrap();
    assert!(state.unwrap_err().to_string().contains("AMD"));
    let all = settings::read_all(&root);
    let sata = all.iter().find(|s| s.id == "sata_alpm:host0").unwrap();
    assert!(sata.is_low_power(), "{sata:?}");
    let policy = all.iter().find(|s| s.id == "pcie_aspm").unwrap();
    assert_eq!(policy.current, "default");
    assert!(
        all.iter()
            .any(|s| s.id == "runtime_pm_pci:0000:41:00.0" && s.label.contains("NVMe"))
    );
}

#[test]
fn kvm_guest_says_why_each_reader_is_unavailable() {
    let dir = fixture("kvm-amd-epyc-haltpoll");
    let root = root_at(&dir);
    let err = PackageReader::discover(&root, &dir.join("dev")).unwrap_err();
    assert!(err.reason.contains("virtual machine"), "{err}");
    assert!(err.reason.contains("hypervisor"), "{err}");
    assert!(err.has.join(" ").contains("haltpoll"), "{err}");
    let all = settings::read_all(&root);
    assert!(all.is_empty(), "{all:?}");
    let absent = settings::absent(&root, &all);
    let why = |k: SettingKind| {
        absent.iter().find(|(kind, _)| *kind == k).map_or_else(
            || panic!("no reason for {k:?}: {absent:?}"),
            |(_, w)| w.clone(),
        )
    };
    assert!(why(SettingKind::PcieAspm).contains("pcie_aspm/parameters/policy"));
    assert!(why(SettingKind::CpufreqGovernor).contains("virtual machines"));
    assert!(why(SettingKind::SataAlpm).contains("scsi_host"));
    assert!(why(SettingKind::NmiWatchdog).contains("nmi_watchdog"));
}

/// A perf event: `(type, config, cpu)`.
type Event = (u32, u64, usize);

/// Perf counters for tests: each opened event reads what the test set.
#[derive(Debug, Clone, Default)]
struct FakeCounters {
    values: Arc<Mutex<BTreeMap<Event, u64>>>,
    opened: Arc<Mutex<Vec<Event>>>,
    reads: Arc<AtomicU64>,
    /// Every open fails with this OS error.
    deny: Option<i32>,
}

impl FakeCounters {
    fn set(&self, pmu_type: u32, config: u64, value: u64) {
        self.values
            .lock()
            .unwrap()
            .insert((pmu_type, config, 0), value);
    }
}

impl PerfCounters for FakeCounters {
    fn open(&mut self, pmu_type: u32, config: u64, cpu: usize) -> std::io::Result<CounterId> {
        if let Some(e) = self.deny {
            return Err(std::io::Error::from_raw_os_error(e));
        }
        let mut opened = self.opened.lock().unwrap();
        opened.push((pmu_type, config, cpu));
        Ok(CounterId(opened.len() - 1))
    }

    fn read(&mut self, id: CounterId) -> std::io::Result<u64> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        let key = self.opened.lock().unwrap()[id.0];
        Ok(self.values.lock().unwrap().get(&key).copied().unwrap_or(0))
    }
}

/// The Intel desktop with its cstate_pkg and msr PMUs complete, and no msr device.
fn desktop_with_pmu() -> tempfile::TempDir {
    common::copy_fixtures(&[
        "intel-adl-desktop",
        "idle-intel-desktop",
        "idle-cstate-pkg-pmu",
    ])
}

#[test]
fn package_states_come_from_the_cstate_pkg_pmu_where_the_msrs_cannot_be_read() {
    let dir = desktop_with_pmu();
    let perf = FakeCounters::default();
    // cstate_pkg is type 24 (c2 0x00, c3 0x01, c6 0x02, c8 0x04, c10 0x06), msr type 12.
    perf.set(12, 0, 1_000_000);
    let mut r = PackageReader::discover_with(
        &root_at(dir.path()),
        &dir.path().join("dev"),
        Box::new(perf.clone()),
    )
    .unwrap();
    let names: Vec<&str> = r.states().iter().map(|s| s.name()).collect();
    assert_eq!(names, ["PC2", "PC3", "PC6", "PC8", "PC10"]);
    let source = r.source();
    assert!(
        source.contains("cstate_pkg perf PMU (c2-residency, c3-residency, c6-residency")
            && source.ends_with("on CPU 0"),
        "{source}"
    );
    assert_eq!(r.platform(), "adl");
    // Opened once: five states and the TSC, on the PMU's CPU.
    let opened = perf.opened.lock().unwrap().clone();
    assert_eq!(opened.len(), 6, "{opened:?}");
    assert!(opened.iter().all(|(_, _, cpu)| *cpu == 0));
    for tick in 1..=3u64 {
        // Each tick: 1e6 TSC ticks, 20 % in PC2, 50 % in PC6.
        perf.set(12, 0, 1_000_000 + tick * 1_000_000);
        perf.set(24, 0, tick * 200_000);
        perf.set(24, 2, tick * 500_000);
        let mut got = BTreeMap::new();
        r.read(|c, v| {
            got.insert(c.to_owned(), v);
        })
        .unwrap();
        assert_eq!(got["all/PC2"], 0.2, "{got:?}");
        assert_eq!(got["all/PC6"], 0.5, "{got:?}");
        assert_eq!(got["all/PC10"], 0.0, "{got:?}");
    }
    // Read per sample, never opened again.
    assert_eq!(perf.opened.lock().unwrap().len(), 6);
    assert_eq!(perf.reads.load(Ordering::SeqCst), 6 * 4);
}

#[test]
fn without_the_msrs_or_the_pmu_the_reason_names_both() {
    // The PMU is there, but opening its counters is refused (no CAP_PERFMON).
    let dir = desktop_with_pmu();
    let denied = FakeCounters {
        deny: Some(13),
        ..FakeCounters::default()
    };
    let err = PackageReader::discover_with(
        &root_at(dir.path()),
        &dir.path().join("dev"),
        Box::new(denied),
    )
    .unwrap_err();
    assert!(err.reason.contains("modprobe msr"), "{err}");
    assert!(
        err.reason.contains("cstate_pkg/c2-residency") && err.reason.contains("CAP_PERFMON"),
        "{err}"
    );
    // No PMU at all.
    let bare = compose("intel-adl-desktop", "idle-intel-desktop");
    std::fs::remove_dir_all(bare.path().join("sys/bus/event_source")).unwrap();
    let err = PackageReader::discover_with(
        &root_at(bare.path()),
        &bare.path().join("dev"),
        Box::new(FakeCounters::default()),
    )
    .unwrap_err();
    assert!(err.reason.contains("modprobe msr"), "{err}");
    assert!(err.reason.contains("no cstate_pkg perf PMU"), "{err}");
    // The PMU without the msr PMU's TSC to divide by.
    let no_tsc = desktop_with_pmu();
    std::fs::remove_dir_all(no_tsc.path().join("sys/bus/event_source/devices/msr")).unwrap();
    let err = PackageReader::discover_with(
        &root_at(no_tsc.path()),
        &no_tsc.path().join("dev"),
        Box::new(FakeCounters::default()),
    )
    .unwrap_err();
    assert!(err.reason.contains("tsc event"), "{err}");
}
