//! What `wattson idle` reads of the machine, and why a reader is unavailable: the residency
//! MSRs and the perf PMU, a disk's spin state, who wakes the CPUs.

use std::time::{Duration, Instant};

use wattson_tests::TestEnv;
use wattson_tests::idle::{OpenWatch, host_toml, intel_desktop, run_ok};

#[test]
fn amd_server_and_kvm_guest_say_why_each_reader_is_unavailable() {
    let env = TestEnv::new();
    let amd = env.path("amd");
    wattson_tests::idle::amd_server(&amd);
    let kvm = wattson_tests::kvm_fixture();
    for (root, expect) in [
        (
            amd.as_path(),
            "AMD documents no package C-state residency counters",
        ),
        (kvm.as_path(), "a virtual machine"),
    ] {
        let config = env.path("wattson.toml");
        std::fs::write(&config, host_toml(root, &env.db)).unwrap();
        let json = run_ok(&config, &["idle", "--json", "--sample", "200ms"]);
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        let reason = v["package"]["unavailable"]["reason"].as_str().unwrap();
        assert!(reason.contains(expect), "{reason}");
        assert!(
            v["package"]["unavailable"]["has"][0]
                .as_str()
                .unwrap()
                .contains("core idle states"),
            "{v}"
        );
        let findings = v["findings"].to_string();
        assert!(findings.contains("package C-states unknown"), "{findings}");
        if root == kvm.as_path() {
            let absent = v["absent"].as_array().unwrap();
            for kind in [
                "pcie_aspm",
                "sata_alpm",
                "runtime_pm_pci",
                "nmi_watchdog",
                "cpufreq_governor",
                "disk",
            ] {
                let why = absent
                    .iter()
                    .find(|a| a["kind"] == kind)
                    .unwrap_or_else(|| panic!("no reason for {kind}: {absent:?}"));
                assert!(why["why"].as_str().unwrap().starts_with("no "), "{why}");
            }
            let text = run_ok(&config, &["idle", "--sample", "200ms"]);
            assert!(text.contains("pcie_aspm: not here (no "), "{text}");
            assert!(text.contains("unavailable: a virtual machine"), "{text}");
        } else {
            let v_settings = v["settings"].as_array().unwrap();
            assert!(
                v_settings
                    .iter()
                    .any(|s| s["id"] == "sata_alpm:host0" && s["lower"].is_null())
            );
        }
    }
}

/// A disk's spin state comes from sysfs alone: `wattson idle` reports the spun-down disk
/// without ever opening a block device under `[host] devfs` (opening one, even for a power
/// mode query, can spin the disk up).
#[test]
fn disk_spin_state_is_read_without_opening_a_disk() {
    let env = TestEnv::new();
    let root = env.path("machine");
    intel_desktop(&root);
    let dev = root.join("dev");
    for disk in ["sda", "sdb", "nvme0n1"] {
        std::fs::write(dev.join(disk), b"").unwrap();
    }
    let config = env.path("wattson.toml");
    std::fs::write(&config, host_toml(&root, &env.db)).unwrap();
    let mut watch = OpenWatch::new(&dev);
    let v: serde_json::Value =
        serde_json::from_str(&run_ok(&config, &["idle", "--json", "--sample", "200ms"])).unwrap();
    let disk = |id: &str| {
        v["settings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["id"] == id)
            .unwrap_or_else(|| panic!("no {id} in {v}"))
            .clone()
    };
    assert!(
        disk("disk:sdb")["current"]
            .as_str()
            .unwrap()
            .contains("spun down"),
        "{v}"
    );
    assert!(disk("disk:sda")["current"].is_string(), "{v}");
    let text = run_ok(&config, &["idle", "--sample", "200ms"]);
    assert!(text.contains("spun down (runtime suspended)"), "{text}");
    let opened = watch.opened();
    assert!(
        !opened
            .iter()
            .any(|n| n.starts_with("sd") || n.starts_with("nvme")),
        "a block device was opened: {opened:?}"
    );
}

/// Without the msr device and with a perf PMU the kernel does not describe fully (no `type`),
/// `wattson idle` says why neither can be read, naming both; nothing is opened.
#[test]
fn without_the_msrs_or_the_perf_pmu_idle_names_both() {
    let env = TestEnv::new();
    let root = env.path("machine");
    intel_desktop(&root);
    std::fs::remove_file(root.join("dev/cpu/0/msr")).unwrap();
    let config = env.path("wattson.toml");
    std::fs::write(&config, host_toml(&root, &env.db)).unwrap();
    let v: serde_json::Value =
        serde_json::from_str(&run_ok(&config, &["idle", "--json", "--sample", "100ms"])).unwrap();
    let why = v["package"]["unavailable"]["reason"].as_str().unwrap();
    assert!(
        why.starts_with("the residency MSRs cannot be read (no ")
            && why.contains("modprobe msr")
            && why.contains("nor the perf PMU that has the same counters (reading ")
            && why.contains("cstate_pkg/type"),
        "{why}"
    );
    assert_eq!(v["package"]["readable"], false);
    let text = run_ok(&config, &["idle", "--sample", "100ms"]);
    assert!(text.contains("nor the perf PMU"), "{text}");
}

/// Who wakes the CPUs, through the real binary on a fixture procfs whose counters a thread
/// moves while `wattson idle` samples: `jellyfin.service` (two processes, one of them in a
/// sub-group of the service, three threads) at 800 wake-ups/s, `sshd.service` at 200/s, a
/// kernel thread asleep; interrupts: the local timer at 1000/s, `nvme0q1` at 300/s, the
/// NIC's `enp3s0-rx-0` at 100/s.
#[test]
fn wakeups_rank_the_services_that_wake_the_cpus_and_name_each_interrupts_device() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use wattson_collectors::idle::wakeups::fixture::FixtureProc;

    let env = TestEnv::new();
    let root = env.path("machine");
    intel_desktop(&root);
    let proc = FixtureProc::new(&root.join("proc")).unwrap();
    proc.add_home_server().unwrap();
    // /proc/interrupts exists before wattson first reads it, as it does on a machine.
    proc.set_interrupts(
        &[("LOC", 0), ("RES", 0)],
        &[(122, "nvme0q1", 0), (130, "enp3s0-rx-0", 0)],
    )
    .unwrap();
    let config = env.path("wattson.toml");
    std::fs::write(&config, host_toml(&root, &env.db)).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let advancer = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let t0 = Instant::now();
            while !stop.load(Ordering::SeqCst) {
                let at = |per_s: f64| (t0.elapsed().as_secs_f64() * per_s) as u64;
                proc.set_count(100, 100, at(500.0)).unwrap();
                proc.set_count(100, 101, at(100.0)).unwrap();
                proc.set_count(120, 120, at(200.0)).unwrap();
                proc.set_count(200, 200, at(200.0)).unwrap();
                proc.set_interrupts(
                    &[("LOC", at(1000.0)), ("RES", 0)],
                    &[(122, "nvme0q1", at(300.0)), (130, "enp3s0-rx-0", at(100.0))],
                )
                .unwrap();
                std::thread::sleep(Duration::from_millis(10));
            }
        })
    };
    let text = run_ok(&config, &["idle", "--sample", "1s"]);
    let json = run_ok(&config, &["idle", "--json", "--sample", "1s", "--top", "2"]);
    stop.store(true, Ordering::SeqCst);
    advancer.join().unwrap();
    eprintln!("{text}");

    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let w = &v["wakeups"];
    assert!(
        w["tasks_from"]
            .as_str()
            .unwrap()
            .contains("task/<tid>/schedstat"),
        "{w}"
    );
    let services = w["by_service"].as_array().unwrap();
    assert_eq!(services.len(), 2, "{w}");
    let share = |e: &serde_json::Value| e["share"].as_f64().unwrap();
    assert_eq!(services[0]["group"], "service:jellyfin.service", "{w}");
    assert!((share(&services[0]) - 0.8).abs() <= 0.1, "{w}");
    assert_eq!(services[1]["group"], "service:sshd.service", "{w}");
    assert!((share(&services[1]) - 0.2).abs() <= 0.1, "{w}");
    assert_eq!(
        services[0]["processes"],
        serde_json::json!(["jellyfin", "ffmpeg"])
    );
    // The rates themselves depend on when the two reads fall between the writer's steps;
    // the shares do not.
    let total = w["task_wakeups_per_s"].as_f64().unwrap();
    assert!((600.0..=1400.0).contains(&total), "{w}");
    // --top 2: two processes listed, shares still of every task's wake-ups.
    let processes = w["by_process"].as_array().unwrap();
    assert_eq!(processes.len(), 2, "{w}");
    assert_eq!(processes[0]["comm"], "jellyfin");
    assert!((share(&processes[0]) - 0.6).abs() <= 0.1, "{w}");
    let irqs = w["interrupts"].as_array().unwrap();
    assert_eq!(irqs.len(), 2, "{w}");
    assert_eq!(
        (&irqs[0]["irq"], &irqs[0]["kernel"], &irqs[0]["name"]),
        (
            &serde_json::json!("LOC"),
            &serde_json::json!(true),
            &serde_json::json!("Local timer interrupts")
        ),
        "{w}"
    );
    assert_eq!(
        (&irqs[1]["irq"], &irqs[1]["name"]),
        (&serde_json::json!("122"), &serde_json::json!("nvme0q1"))
    );
    assert!((share(&irqs[1]) - 0.3 / 1.4).abs() <= 0.1, "{w}");

    assert!(text.contains("Who wakes the CPUs (sampled 1 s)"), "{text}");
    assert!(
        text.contains("times each thread was given a CPU, the third field of "),
        "{text}"
    );
    let at = |s: &str| text.find(s).unwrap_or_else(|| panic!("no {s:?} in {text}"));
    assert!(
        at("service:jellyfin.service  (jellyfin, ffmpeg)") < at("service:sshd.service  (sshd)")
    );
    assert!(at("LOC (Local timer interrupts)") < at("nvme0q1 (IRQ 122)"));
    assert!(at("nvme0q1 (IRQ 122)") < at("enp3s0-rx-0 (IRQ 130)"));
    assert!(
        !text.contains("kthreadd"),
        "a thread that never woke is listed: {text}"
    );
    assert!(
        text.contains("who wakes the CPUs most: service:jellyfin.service ("),
        "{text}"
    );
}
