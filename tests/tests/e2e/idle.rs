//! `wattson idle --measure` through the real binary, against a simulated PZEM-004T on a real
//! pseudo-terminal whose idle watts depend on the fixture's setting files: 40 W, 3 W less
//! with the ASPM policy at `powersave`, 1.5 W less with all four SATA hosts at
//! `med_power_with_dipm` (0.375 W each), the NMI watchdog with no effect, noise sd 1 W.
//!
//! The default suite measures at 10 Hz with 2 s phases (the same statistics as 1 Hz with
//! 20 s phases, in a tenth of the time); the full budget (1 Hz, the default 20 s phases, at
//! most 3 minutes per setting) is `#[ignore]`d: `cargo test -p wattson-tests --test e2e
//! idle:: -- --ignored --nocapture`, figures in BENCHMARKS.md.
//!
//! Every test checks that every file of the fixture tree holds its original content
//! afterwards, and that nothing outside the allowlist's files was written anywhere in the
//! tree: after success, Ctrl-C, SIGTERM, and SIGKILL followed by the next command.

#![allow(clippy::unwrap_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use wattson_tests::idle::{
    Bench, OpenWatch, bench, changed_content, effects, host_toml, intel_desktop,
    only_allowlist_written, run, run_ok, snapshot, touched, unrestored,
};
use wattson_tests::{Child, TestEnv, q};

fn check_three_settings(db: &Path) {
    let found = effects(db);
    eprintln!("measured: {found:?}");
    let get = |id: &str| {
        found
            .iter()
            .find(|e| e.0 == id)
            .unwrap_or_else(|| panic!("{id} not measured: {found:?}"))
            .clone()
    };
    let aspm = get("pcie_aspm");
    assert!((aspm.1 + 3.0).abs() <= 0.5, "ASPM: {aspm:?}");
    assert!(aspm.3, "ASPM's 3 W must be distinguishable: {aspm:?}");
    let sata = get("sata_alpm");
    assert!((sata.1 + 1.5).abs() <= 0.5, "ALPM: {sata:?}");
    assert!(sata.3, "ALPM's 1.5 W must be distinguishable: {sata:?}");
    let nmi = get("nmi_watchdog");
    assert!(nmi.1.abs() <= 0.5, "NMI watchdog: {nmi:?}");
    assert!(!nmi.3, "the NMI watchdog has no effect here: {nmi:?}");
}

fn measure_three(interval: &str, phase: &str, seed: u64) {
    let b = bench(interval, seed);
    let before = snapshot(&b.root);
    let t0 = Instant::now();
    let out = b
        .idle(&[
            "--measure",
            "--only",
            "pcie_aspm,sata_alpm,nmi_watchdog",
            "--phase",
            phase,
        ])
        .output()
        .unwrap();
    let took = t0.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    eprintln!("{stdout}\n3 settings in {:.0} s", took.as_secs_f64());
    check_three_settings(&b.env.db);
    assert!(
        stdout.contains("ASPM powersave (performance -> powersave): -"),
        "{stdout}"
    );
    assert!(stdout.contains("a year (+/- GBP"), "{stdout}");
    assert!(
        stdout.contains("NMI watchdog off (1 -> 0): no effect that this meter can distinguish"),
        "{stdout}"
    );
    assert!(stdout.contains("pcie_aspm.policy=powersave"), "{stdout}");
    assert!(
        stdout.contains("ATTR{link_power_management_policy}=\"med_power_with_dipm\""),
        "{stdout}"
    );
    let after = snapshot(&b.root);
    assert_eq!(changed_content(&before, &after), Vec::<PathBuf>::new());
    // Only the allowlist was ever written: the policy, the four hosts, the NMI watchdog.
    let mut allowed = b.hosts();
    allowed.push(b.policy());
    allowed.push(b.root.join("proc/sys/kernel/nmi_watchdog"));
    allowed.sort();
    let mut written = touched(&before, &after);
    written.sort();
    assert_eq!(written, allowed);
    assert_eq!(unrestored(&b.env.db), 0);
    // `wattson idle` shows what was measured.
    let shown = b.idle(&["--sample", "100ms"]).output().unwrap();
    let text = String::from_utf8_lossy(&shown.stdout);
    assert!(text.contains("Measured at the wall"), "{text}");
    assert!(text.contains("SATA ALPM med_power_with_dipm"), "{text}");
    // And `wattson report` compares each with idle as found, in every format.
    let text = run_ok(&b.config, &["report"]);
    assert!(text.contains("Idle: where the watts go"), "{text}");
    assert!(text.contains("ASPM powersave: -"), "{text}");
    report_shows_the_three_in_every_format(&b.config);
}

/// `wattson report --format F` for every format names the idle section and each measured
/// setting, with the NMI watchdog as no effect; and compares each setting's configuration
/// with `idle as found` by the difference measured, with its interval and money a year.
fn report_shows_the_three_in_every_format(config: &Path) {
    text_reports_show_the_three(config);
    let comparison = json_report_shows_the_three(config);
    csv_report_shows_the_three(config, comparison["annual_saving"].as_f64().unwrap());
}

/// The text formats: the ASPM comparison by the difference measured, the NMI watchdog's
/// without an effect, and the idle section naming each setting.
fn text_reports_show_the_three(config: &Path) {
    for format in ["table", "markdown", "html"] {
        let text = run_ok(config, &["report", "--format", format]).replace("&gt;", ">");
        let line = text
            .lines()
            .find(|l| l.contains("idle as found -> idle with ASPM powersave at idle: "))
            .unwrap_or_else(|| panic!("{format}: no ASPM comparison in {text}"));
        let delta: f64 = line
            .split(" W (")
            .nth(1)
            .and_then(|t| t.split(" +/- ").next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{format}: no measured difference in {line}"));
        assert!((delta + 3.0).abs() <= 0.5, "{format}: {line}");
        assert!(
            line.contains(" W, measured in alternating phases) saves ")
                && line.contains("GBP ")
                && line.contains(" ± ")
                && line.contains("/yr"),
            "{format}: {line}"
        );
        assert!(
            text.contains("idle as found -> idle with NMI watchdog off at idle: ")
                && text.contains("(no effect that this meter can distinguish: "),
            "{format}: {text}"
        );
    }
    for format in ["markdown", "html"] {
        let text = run_ok(config, &["report", "--format", format]);
        assert!(
            text.contains("Idle: where the watts go"),
            "{format}: {text}"
        );
        assert!(text.contains("ASPM powersave: -"), "{format}: {text}");
        assert!(
            // Markdown escapes the underscores.
            text.contains("SATA ALPM med_power_with_dipm: -")
                || text.contains(r"SATA ALPM med\_power\_with\_dipm: -"),
            "{format}: {text}"
        );
        assert!(
            text.contains("NMI watchdog off: no effect that this meter can distinguish"),
            "{format}: {text}"
        );
    }
}

/// The JSON report: the settings, their configurations and the ASPM comparison; returns that
/// comparison.
fn json_report_shows_the_three(config: &Path) -> serde_json::Value {
    let json: serde_json::Value =
        serde_json::from_str(&run_ok(config, &["report", "--format", "json"])).unwrap();
    let settings = json["idle"]["settings"].as_array().unwrap();
    let ids: Vec<&str> = settings
        .iter()
        .filter_map(|s| s["setting"].as_str())
        .collect();
    assert_eq!(
        ids,
        ["pcie_aspm", "sata_alpm", "nmi_watchdog"],
        "{settings:?}"
    );
    let aspm = &settings[0];
    assert!(
        (aspm["delta_watts"].as_f64().unwrap() + 3.0).abs() <= 0.5,
        "{aspm}"
    );
    // Stored as configurations, and compared as configurations are.
    let configs: Vec<&str> = json["configs"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    for name in [
        "idle as found",
        "idle with ASPM powersave",
        "idle with SATA ALPM med_power_with_dipm",
        "idle with NMI watchdog off",
    ] {
        assert!(configs.contains(&name), "{name} not in {configs:?}");
    }
    let comparison = json["comparisons"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["to"] == "idle with ASPM powersave")
        .unwrap_or_else(|| panic!("no ASPM comparison: {}", json["comparisons"]));
    assert_eq!(comparison["from"], "idle as found", "{comparison}");
    let kind = |name: &str| {
        json["configs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .map(|c| c["kind"].clone())
    };
    assert_eq!(
        kind("idle with ASPM powersave"),
        Some("idle_measure".into())
    );
    assert_eq!(kind("idle as found"), Some("idle_measure".into()));
    assert_eq!(comparison["mode"], "idle", "{comparison}");
    let w = |k: &str| comparison[k].as_f64().unwrap();
    assert!(
        (w("to_watts") - w("from_watts") + 3.0).abs() <= 0.5,
        "{comparison}"
    );
    assert!(
        w("delta_ci95_watts") > 0.0 && w("delta_ci95_watts") < 1.0,
        "{comparison}"
    );
    assert!(
        w("annual_saving") > 0.0 && w("annual_saving_ci95") > 0.0,
        "{comparison}"
    );
    assert!(
        (w("annual_kwh_saved") - (w("from_watts") - w("to_watts")) * 8.76).abs() < 1e-6,
        "{comparison}"
    );
    assert!(aspm["annual_cost_change"].as_f64().unwrap() < 0.0, "{aspm}");
    comparison.clone()
}

/// The CSV report: a row per setting, and the ASPM configuration's row with its interval
/// and the saving against idle as found (`want`, the comparison's).
fn csv_report_shows_the_three(config: &Path, want: f64) {
    let csv = run_ok(config, &["report", "--format", "csv"]);
    let rows: Vec<&str> = csv
        .lines()
        .filter(|l| l.contains(",idle_setting,"))
        .collect();
    assert_eq!(rows.len(), 3, "{csv}");
    let columns = csv.lines().next().unwrap().split(',').count();
    for row in &rows {
        assert_eq!(row.split(',').count(), columns, "{row}");
    }
    assert!(
        rows[0].starts_with("ASPM powersave,idle_setting,idle,"),
        "{csv}"
    );
    // The configuration's row: its watts with their interval, and the saving against idle as
    // found (the comparison's), not against the costliest configuration.
    let row: Vec<&str> = csv
        .lines()
        .find(|l| l.starts_with("idle with ASPM powersave,idle_measure,idle,"))
        .unwrap_or_else(|| panic!("no configuration row: {csv}"))
        .split(',')
        .collect();
    assert_eq!(row.len(), columns, "{row:?}");
    let saving: f64 = row[12].parse().unwrap();
    assert!((saving - want).abs() <= 0.005, "{row:?} against {want}");
    assert!(!row[4].is_empty(), "the watts' interval: {row:?}");
}

#[test]
fn measure_finds_each_settings_effect_and_restores_every_file() {
    measure_three("100ms", "2s", 11);
}

/// The DESIGN's budget: a 1 Hz meter with noise sd 1 W, the default phases, at most three
/// minutes per setting.
#[test]
#[ignore = "about 8 minutes: the full-budget run, recorded in BENCHMARKS.md"]
fn measure_at_one_hertz_within_three_minutes_per_setting() {
    measure_three("1s", "20s", 11);
}

/// Start a measurement of ASPM alone and wait until its first changed phase has begun.
fn start_and_wait_for_change(b: &Bench) -> Child {
    let child = Child::spawn(b.idle(&["--measure", "--only", "pcie_aspm", "--phase", "2s"]));
    let policy = b.policy();
    child.wait_for("the policy to be changed", Duration::from_secs(30), || {
        std::fs::read_to_string(&policy)
            .ok()
            .filter(|t| t.trim() == "powersave")
    });
    child
}

fn interrupted_by(signal: Signal, code: i32) {
    let b = bench("100ms", 3);
    let before = snapshot(&b.root);
    let mut child = start_and_wait_for_change(&b);
    child.signal(signal);
    let status = child
        .wait_exit(Duration::from_secs(10))
        .expect("measure did not stop within 10 s");
    assert_eq!(status.code(), Some(code), "stderr:\n{}", child.stderr());
    only_allowlist_written(&b, &before, &[b.policy()]);
    assert_eq!(unrestored(&b.env.db), 0);
    let conn = rusqlite::Connection::open(&b.env.db).unwrap();
    let status: String = conn
        .query_row("SELECT status FROM idle_run", [], |r| r.get(0))
        .unwrap();
    assert_eq!(status, "interrupted");
}

#[test]
fn ctrl_c_puts_every_setting_back() {
    interrupted_by(Signal::SIGINT, 130);
}

#[test]
fn sigterm_puts_every_setting_back() {
    interrupted_by(Signal::SIGTERM, 143);
}

#[test]
fn after_sigkill_the_next_command_puts_every_setting_back() {
    let b = bench("100ms", 5);
    let before = snapshot(&b.root);
    let mut child = start_and_wait_for_change(&b);
    child.signal(Signal::SIGKILL);
    child.wait_exit(Duration::from_secs(10)).unwrap();
    assert_eq!(
        std::fs::read_to_string(b.policy()).unwrap().trim(),
        "powersave",
        "SIGKILL leaves the change in place until the next command"
    );
    assert_eq!(unrestored(&b.env.db), 1);
    // Any command: `wattson status` here.
    let (_, _, stderr) = run(&b.config, &["status"]);
    assert!(stderr.contains("ended without restoring"), "{stderr}");
    only_allowlist_written(&b, &before, &[b.policy()]);
    assert_eq!(unrestored(&b.env.db), 0);
}

#[test]
fn a_command_started_during_a_measurement_leaves_it_alone() {
    let b = bench("100ms", 7);
    let mut child = start_and_wait_for_change(&b);
    run_ok(&b.config, &["status"]);
    assert_eq!(
        std::fs::read_to_string(b.policy()).unwrap().trim(),
        "powersave",
        "status restored a setting under a running measurement"
    );
    child.signal(Signal::SIGINT);
    child.wait_exit(Duration::from_secs(10)).unwrap();
}

#[test]
fn without_write_access_measure_is_refused_and_nothing_changes() {
    use std::os::unix::fs::PermissionsExt as _;
    use std::os::unix::process::CommandExt as _;
    let b = bench("100ms", 9);
    let before = snapshot(&b.root);
    let mut cmd = b.idle(&["--measure", "--only", "pcie_aspm"]);
    if nix::unistd::geteuid().is_root() {
        // As an unprivileged user, who can read the tree but write none of it.
        for p in [b.env.dir.path(), b.root.as_path()] {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        std::fs::set_permissions(&b.config, std::fs::Permissions::from_mode(0o644)).unwrap();
        cmd.uid(65534).gid(65534);
    } else {
        std::fs::set_permissions(b.policy(), std::fs::Permissions::from_mode(0o444)).unwrap();
    }
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("cannot write"), "{stderr}");
    assert!(stderr.contains("only by root"), "{stderr}");
    assert!(stderr.contains("Nothing was changed"), "{stderr}");
    only_allowlist_written(&b, &before, &[]);
}

#[test]
fn idle_explains_a_package_kept_awake_from_the_daemons_history() {
    let env = TestEnv::new();
    let root = env.path("machine");
    intel_desktop(&root);
    let config = env.path("wattson.toml");
    std::fs::write(
        &config,
        format!(
            "{}flush_interval = \"200ms\"\n\n[cpu]\ninterval = \"100ms\"\n",
            host_toml(&root, &env.db)
        ),
    )
    .unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let advancer = {
        let (root, stop) = (root.clone(), stop.clone());
        std::thread::spawn(move || wattson_tests::idle::advance_counters(&root, &stop))
    };
    let mut daemon = Child::run_daemon(&config, &[]);
    // Wait for 80 package samples (8 s at 10 Hz) in the database.
    daemon.wait_for("package C-state history", Duration::from_secs(60), || {
        let n =
            wattson_tests::db_points(&env.db, "cpu", wattson_collectors::Metric::PackageResidency)
                .len();
        (n >= 5 * 80).then_some(())
    });
    daemon.signal(Signal::SIGTERM);
    daemon.wait_exit(Duration::from_secs(10)).unwrap();
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    advancer.join().unwrap();

    let text = run_ok(&config, &["idle"]);
    eprintln!("{text}");
    assert!(
        text.contains(
            "deepest package C-state reached: PC3 (PC6 and deeper never, 0 % of the last"
        ),
        "{text}"
    );
    // The cores' share is cpuidle time against the collector's own clock: near the 78 %
    // written. A stay is counted when the writer gets to it, late on a loaded machine; what
    // is late is carried, not lost, but the last lag before the daemon stops is not yet
    // seen (a third of a second of it is 3 points of 9 s).
    let cores = text
        .split("although the cores spend ")
        .nth(1)
        .and_then(|t| t.split(" %").next())
        .and_then(|n| n.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no core share in {text}"));
    assert!((72.0..=80.0).contains(&cores), "{cores} % in {text}");
    assert!(
        text.contains("% in C6 and deeper: something keeps the package awake"),
        "{text}"
    );
    assert!(
        text.contains(
            "something keeps the package awake; candidates: ASPM is disabled (policy \
             `performance`), SATA host0-host3 at `max_performance`, 0000:00:17.0 runtime PM `on`, \
             0000:03:00.0 runtime PM `on`"
        ),
        "{text}"
    );
    // The package's shares are the written 30 % and 70 %, give or take the same skew the
    // cores' share has: the simulated machine steps the TSC and the residency counters in
    // separate writes, and on a loaded machine a sample can land between them.
    let shares = text
        .lines()
        .find(|l| l.contains("PC2 ") && l.contains("PC10 "))
        .unwrap_or_else(|| panic!("no package shares in {text}"));
    let share = |state: &str| {
        shares
            .split(&format!("{state} "))
            .nth(1)
            .and_then(|t| t.split(" %").next())
            .and_then(|n| n.parse::<f64>().ok())
            .unwrap_or_else(|| panic!("no {state} share in {text}"))
    };
    assert!((28.0..=32.0).contains(&share("PC2")), "PC2 in {text}");
    assert!((68.0..=72.0).contains(&share("PC3")), "PC3 in {text}");
    assert!(text.contains("PC6 0.0 %  PC8 0.0 %  PC10 0.0 %"), "{text}");
    assert!(
        text.contains("firmware limit: unlimited (locked)"),
        "{text}"
    );
    assert!(text.contains("PCIe ASPM policy"), "{text}");
    let v: serde_json::Value = serde_json::from_str(&run_ok(&config, &["idle", "--json"])).unwrap();
    assert_eq!(v["package"]["deepest_reached"], "PC3");
    assert_eq!(v["window"]["source"], "history");
    assert_eq!(v["package"]["platform"], "adl");
    assert!(v["settings"].as_array().unwrap().len() > 20);
    assert!(
        v["candidates"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["id"] == "pcie_aspm" && c["changed"] == "powersave")
    );
}

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

#[test]
fn home_assistant_gets_the_deepest_package_state_and_its_residency() {
    use wattson_tests::broker::{Kind, Options, TestBroker, Watcher};
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _rt = rt.enter();
    let broker = TestBroker::start(Kind::Rumqttd, &Options::default());
    let env = TestEnv::new();
    let root = env.path("machine");
    intel_desktop(&root);
    let config = env.path("wattson.toml");
    std::fs::write(
        &config,
        format!(
            "{}flush_interval = \"200ms\"\n\n[cpu]\ninterval = \"100ms\"\n\n[mqtt]\nurl = {}\n\
             publish_interval = \"1s\"\n",
            host_toml(&root, &env.db),
            q(broker.url(false))
        ),
    )
    .unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let advancer = {
        let (root, stop) = (root.clone(), stop.clone());
        std::thread::spawn(move || wattson_tests::idle::advance_counters(&root, &stop))
    };
    let w = Watcher::start(broker.port, "watch-idle", &["wattson/#", "homeassistant/#"]);
    let daemon = Child::run_daemon(&config, &[]);
    let discovery = "homeassistant/sensor/wattson_e2e/package_cstate_deepest/config";
    let state: serde_json::Value = daemon.wait_for(
        "a state with the package's deepest state, and its discovery",
        Duration::from_secs(30),
        || {
            w.last(discovery)?;
            let m = w.last("wattson/e2e/state")?;
            let v: serde_json::Value = serde_json::from_slice(&m.payload).ok()?;
            (v["package_cstate_deepest"] == "PC3").then_some(v)
        },
    );
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    advancer.join().unwrap();
    let residency = state["package_cstate_deepest_residency"].as_f64().unwrap();
    assert!((residency - 70.0).abs() < 2.0, "{state}");
    let config: serde_json::Value =
        serde_json::from_slice(&w.last(discovery).unwrap().payload).unwrap();
    assert_eq!(config["device_class"], "enum");
    assert_eq!(
        config["default_entity_id"],
        "sensor.wattson_e2e_package_cstate_deepest"
    );
    let residency_config: serde_json::Value = serde_json::from_slice(
        &w.last("homeassistant/sensor/wattson_e2e/package_cstate_deepest_residency/config")
            .unwrap()
            .payload,
    )
    .unwrap();
    assert_eq!(residency_config["unit_of_measurement"], "%");
    assert_eq!(residency_config["state_class"], "measurement");
}

#[test]
fn measure_runs_through_the_daemon_that_owns_the_meter() {
    let b = bench("100ms", 13);
    let before = snapshot(&b.root);
    let mut daemon = Child::run_daemon(&b.config, &[]);
    let socket = wattson::control::socket_path(&b.env.db);
    daemon.wait_for("the control socket", Duration::from_secs(20), || {
        socket.exists().then_some(())
    });
    let out = run_ok(
        &b.config,
        &[
            "idle",
            "--measure",
            "--only",
            "pcie_aspm",
            "--phase",
            "2s",
            "--phases",
            "5",
        ],
    );
    assert!(out.contains("through the running daemon"), "{out}");
    assert!(
        out.contains("ASPM powersave (performance -> powersave): -"),
        "{out}"
    );
    let found = effects(&b.env.db);
    assert!((found[0].1 + 3.0).abs() <= 0.75, "{found:?}");
    only_allowlist_written(&b, &before, &[b.policy()]);
    daemon.signal(Signal::SIGTERM);
    assert_eq!(
        daemon
            .wait_exit(Duration::from_secs(10))
            .and_then(|s| s.code()),
        Some(0)
    );
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

/// Regression: the idle section took the wall draw from the first `meter:` series by name,
/// not from the wall source the rest of the report uses (the configured meter). Two meters
/// share the database: `a` (a second machine's plug, 100 W, first by name) and `b` (this
/// machine's configured wall meter, 40 W); the idle hours must be at 40 W.
#[test]
fn the_idle_sections_wall_draw_is_the_configured_meter_not_the_first_by_name() {
    use wattson::store::{Store, StoreOptions, Writer};
    use wattson_collectors::source::channel;
    use wattson_collectors::{Metric, Sample};

    let env = TestEnv::new();
    let config = env.config(&wattson_tests::meter_toml(
        "b",
        "pzem004t",
        &env.path("ttyUSB0"),
        "1s",
        None,
    ));
    let options = StoreOptions {
        host: wattson_tests::HOST.to_owned(),
        ..StoreOptions::default()
    };
    let mut writer = Writer::new(Store::open(&env.db, &options).unwrap(), options);
    // Three whole hours of samples a minute apart, ending at the last hour boundary.
    let hour = 3_600_000;
    let end = wattson_tests::now_ms() / hour * hour;
    let mut batch = Vec::new();
    for ts in (end - 3 * hour..end).step_by(60_000) {
        batch.push(Sample::new(ts, "meter:a", Metric::Power, "", 100.0));
        batch.push(Sample::new(ts, "meter:b", Metric::Power, "", 40.0));
        batch.push(Sample::new(ts, "cpu", Metric::CpuBusy, channel::ALL, 0.02));
        batch.push(Sample::new(
            ts,
            "cpu",
            Metric::PackageResidency,
            channel::all("PC2"),
            0.5,
        ));
    }
    writer.push(Some(wattson_tests::HOST.to_owned()), batch);
    writer.flush().unwrap();
    drop(writer);

    let json: serde_json::Value =
        serde_json::from_str(&run_ok(&config, &["report", "--format", "json"])).unwrap();
    assert_eq!(json["measured"]["source"], "meter:b", "{json}");
    let shallow = &json["idle"]["hours_shallow"];
    assert_eq!(shallow["hours"], 3, "{json}");
    assert!(
        (shallow["mean_wall_watts"].as_f64().unwrap() - 40.0).abs() < 1e-6,
        "{shallow}"
    );
    let text = run_ok(&config, &["report"]);
    assert!(
        text.contains(
            "at the wall: 40.0 W over 3 idle h, in none of which the package reached PC6"
        ),
        "{text}"
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
