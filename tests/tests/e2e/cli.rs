//! The command line around the daemon: bad configs exit 78 naming key and line, `config
//! check` never shows a secret, and `status --json` shows what `run` stored.

// Helpers outside #[test] fns are test code too.
#![allow(clippy::panic)]

use std::time::Duration;

use wattson_tests::{Child, HOST, TestEnv, kvm_fixture, q, wattson};

/// Run `wattson ARGS` to completion: (exit code, stdout, stderr).
fn run(args: &[&std::ffi::OsStr]) -> (Option<i32>, String, String) {
    let out = wattson().args(args).output().expect("running wattson");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn os(s: &str) -> &std::ffi::OsStr {
    s.as_ref()
}

#[test]
fn a_bad_config_exits_78_and_names_the_key_and_line() {
    let env = TestEnv::new();
    // An invalid value: line 8 holds storage.flush_interval.
    let config = env.config("");
    let text = std::fs::read_to_string(&config).expect("config");
    let text = text.replace("flush_interval = \"200ms\"", "flush_interval = \"soon\"");
    std::fs::write(&config, &text).expect("config");
    let line = text
        .lines()
        .position(|l| l.contains("\"soon\""))
        .expect("line")
        + 1;
    for command in [&["run"][..], &["config", "check"]] {
        let mut args = vec![os("--config"), config.as_os_str()];
        args.extend(command.iter().map(|s| os(s)));
        let (code, _, stderr) = run(&args);
        assert_eq!(code, Some(78), "{command:?}: {stderr}");
        assert!(
            stderr.contains("storage.flush_interval"),
            "{command:?}: {stderr}"
        );
        assert!(
            stderr.contains(&format!(":{line}:")) || stderr.contains(&format!("line {line}")),
            "{command:?}: line {line} not named: {stderr}"
        );
    }
    assert!(
        !env.db.exists(),
        "a refused config still created the database"
    );

    // An unknown key is an error too, named with its line.
    let config = env.config("\n[cpu]\nintreval = \"1s\"\n");
    let text = std::fs::read_to_string(&config).expect("config");
    let line = text
        .lines()
        .position(|l| l.starts_with("intreval"))
        .expect("line")
        + 1;
    let (code, _, stderr) = run(&[os("--config"), config.as_os_str(), os("run")]);
    assert_eq!(code, Some(78), "{stderr}");
    assert!(stderr.contains("cpu.intreval"), "{stderr}");
    assert!(
        stderr.contains(&format!(":{line}:")),
        "line {line}: {stderr}"
    );
}

#[test]
fn config_check_prints_the_effective_config_and_never_the_password() {
    let env = TestEnv::new();
    let secret = "s3cr3t-Pa55-do-not-print";
    let password_file = env.path("mqtt-password");
    std::fs::write(&password_file, format!("{secret}\n")).expect("password file");
    let config = env.config(&format!(
        "\n[mqtt]\nurl = \"mqtt://broker.lan:1883\"\nusername = \"wattson\"\npassword_file = {}\n",
        q(&password_file)
    ));
    let (code, stdout, stderr) = run(&[
        os("--config"),
        config.as_os_str(),
        os("config"),
        os("check"),
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        !stdout.contains(secret) && !stderr.contains(secret),
        "secret printed"
    );
    assert!(
        !stdout.contains("do-not-print"),
        "part of the secret printed"
    );
    // The effective config: defaults filled in, our values kept.
    for needle in [
        "[host]",
        &format!("name = \"{HOST}\""),
        "flush_interval = \"200ms\"",
        "raw_retention = \"30d\"",
        "[cpu]",
        "[mqtt]",
        "username = \"wattson\"",
        "password_file",
    ] {
        assert!(stdout.contains(needle), "no {needle:?} in:\n{stdout}");
    }
    // It must parse back as TOML with the same database path.
    assert!(stdout.contains(&env.db.display().to_string()), "{stdout}");

    // Verbose logging does not leak it either.
    let (code, stdout, stderr) = run(&[
        os("-v"),
        os("--config"),
        config.as_os_str(),
        os("config"),
        os("check"),
    ]);
    assert_eq!(code, Some(0));
    assert!(!stdout.contains(secret) && !stderr.contains(secret));
}

/// The fixture's `cpu MHz` (the same for both vCPUs).
fn fixture_mhz() -> f64 {
    let text = std::fs::read_to_string(kvm_fixture().join("proc/cpuinfo")).expect("cpuinfo");
    text.lines()
        .find_map(|l| {
            l.strip_prefix("cpu MHz")?
                .split(':')
                .nth(1)?
                .trim()
                .parse()
                .ok()
        })
        .expect("cpu MHz line")
}

#[test]
fn run_for_five_seconds_then_status_json_shows_the_cpu_readings() {
    let env = TestEnv::new();
    let config = env.config("");
    let mut daemon = Child::run_daemon(&config, &["--duration", "5s"]);
    let status = daemon
        .wait_exit(Duration::from_secs(15))
        .unwrap_or_else(|| panic!("--duration 5s still running; stderr:\n{}", daemon.stderr()));
    assert_eq!(status.code(), Some(0), "stderr:\n{}", daemon.stderr());

    let (code, stdout, stderr) = run(&[
        os("--config"),
        config.as_os_str(),
        os("status"),
        os("--json"),
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    let json: serde_json::Value = serde_json::from_str(&stdout).expect("status --json is JSON");
    assert_eq!(json["host"], HOST);
    assert_eq!(json["database"], env.db.display().to_string());
    let readings = json["readings"].as_array().expect("readings");
    let mean = readings
        .iter()
        .find(|r| r["source"] == "cpu" && r["metric"] == "core_frequency" && r["channel"] == "mean")
        .unwrap_or_else(|| panic!("no mean core frequency in {readings:?}"));
    assert_eq!(mean["unit"], "MHz");
    let mhz = mean["value"].as_f64().expect("value");
    // Stored at 1 MHz resolution.
    assert!((mhz - fixture_mhz()).abs() <= 0.5, "{mhz} MHz");
    assert!(mean["ts_ms"].as_i64().expect("ts") > 0);
    // Per-core frequencies are stored too (both vCPUs), counted rather than listed.
    assert!(
        json["per_core_series"].as_u64().expect("per_core_series") >= 2,
        "{json}"
    );
    // No meter: no cost summary, and the sources say why.
    assert!(json["cost"].is_null());
    let sources = json["sources"].as_array().expect("sources");
    assert!(
        sources
            .iter()
            .any(|s| s["source"] == "meter" && s["available"] == false),
        "{sources:?}"
    );
    // The KVM guest's cpu MHz is the nominal constant (no aperfmperf flag), and says so.
    assert!(
        sources.iter().any(|s| s["source"] == "cpu frequency"
            && s["available"] == true
            && s["detail"]
                .as_str()
                .is_some_and(|d| d.starts_with("nominal, not measured"))),
        "{sources:?}"
    );

    // About five seconds of 1 Hz frequency samples (the fixture is static: no busy shares).
    let store = wattson::store::Store::open_read_only(&env.db).expect("database");
    let freq = wattson_tests::points(&store, "cpu", wattson_collectors::Metric::CoreFrequency);
    let mean_samples = freq.len() / 3; // cpu0, cpu1, mean
    assert!(
        (4..=7).contains(&mean_samples),
        "{} frequency samples",
        freq.len()
    );
    assert!(wattson_tests::points(&store, "cpu", wattson_collectors::Metric::CpuBusy).is_empty());
}
