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
use wattson_tests::Child;
use wattson_tests::idle::{
    Bench, bench, changed_content, effects, only_allowlist_written, run, run_ok, snapshot, touched,
    unrestored,
};

mod explain;
mod readers;

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
