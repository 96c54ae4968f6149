//! Errors through the real binary name their cause and what to do, exit non-zero where the
//! command cannot do its job, and print each OS reason once: a missing, a busy and a silent
//! meter port; a port that never existed; a port this user may not open; `meter probe` on a
//! port it cannot open; `status`
//! on a database it may not read; `report` with no database; `--levels` beyond the CPUs; a
//! `[tariff]` no tariff can be made of (78).

// Helpers outside #[test] fns are test code too.
#![allow(clippy::panic, clippy::unwrap_used)]

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use wattson_tests::{Child, TestEnv, meter_toml, q, simulate, wattson};

/// Run `wattson --config CONFIG ARGS` to completion: (exit code, stdout, stderr).
fn run(config: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let out = wattson()
        .arg("--config")
        .arg(config)
        .args(args)
        .output()
        .expect("running wattson");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Run `wattson run --config CONFIG ARGS` from `cmd` until it exits (within 20 s): its stderr.
fn daemon_until_it_exits(cmd: std::process::Command, config: &Path, args: &[&str]) -> String {
    let mut daemon = Child::run_daemon_with(cmd, config, args);
    daemon
        .wait_exit(Duration::from_secs(20))
        .unwrap_or_else(|| panic!("still running: {}", daemon.stderr()));
    daemon.stderr()
}

/// A pseudo-terminal nobody answers on: its path, and the master end to keep it open.
fn silent_pty() -> (PathBuf, std::os::fd::OwnedFd) {
    let pty = nix::pty::openpty(None, None).expect("openpty");
    let path = nix::unistd::ttyname(&pty.slave).expect("ttyname");
    // The slave stays open here too, so the line does not hang up when wattson closes it.
    std::mem::forget(pty.slave);
    (path, pty.master)
}

fn sweep_args() -> Vec<&'static str> {
    vec![
        "sweep",
        "--name",
        "x",
        "--levels",
        "0",
        "--max-level-time",
        "5s",
    ]
}

#[test]
fn a_missing_a_busy_and_a_silent_port_give_three_different_messages() {
    let env = TestEnv::new();

    let missing = env.path("ttyUSB9");
    let config = env.config(&meter_toml("wall", "pzem004t", &missing, "1s", Some(1)));
    let (code, _, missing_err) = run(&config, &sweep_args());
    assert_eq!(code, Some(1), "{missing_err}");
    assert!(
        missing_err.contains(&format!(
            "{}: No such file or directory (os error 2): check that the adapter is plugged in",
            missing.display()
        )),
        "{missing_err}"
    );
    assert_eq!(
        missing_err.matches("os error 2").count(),
        1,
        "{missing_err}"
    );

    // Busy: another program holds the port (serialport opens it exclusively, as the daemon
    // does).
    let sim = simulate("pzem004t", &[1], 40.0);
    let _held = serialport::new(sim.path.to_string_lossy(), 9600)
        .open()
        .expect("holding the simulator's port");
    let config = env.config(&meter_toml("wall", "pzem004t", &sim.path, "1s", Some(1)));
    let (code, _, busy_err) = run(&config, &sweep_args());
    assert_eq!(code, Some(1), "{busy_err}");
    assert!(
        busy_err.contains("in use by another program") && busy_err.contains("wattson run"),
        "{busy_err}"
    );

    let (silent, _master) = silent_pty();
    let config = env.config(&meter_toml("wall", "pzem004t", &silent, "1s", Some(1)));
    let (code, _, silent_err) = run(&config, &sweep_args());
    assert_eq!(code, Some(1), "{silent_err}");
    assert!(
        silent_err.contains("does not answer")
            && silent_err.contains("wattson meter probe")
            && silent_err.contains("pzem004t"),
        "{silent_err}"
    );

    for e in [&missing_err, &busy_err, &silent_err] {
        assert!(!e.contains("check it is connected"), "{e}");
        assert!(!e.contains("device gone"), "{e}");
    }
    assert!(missing_err != busy_err && busy_err != silent_err && missing_err != silent_err);
}

#[test]
fn the_daemon_says_a_port_that_never_existed_is_not_there() {
    let env = TestEnv::new();
    let missing = env.path("ttyUSB7");
    let config = env.config(&meter_toml("wall", "pzem004t", &missing, "1s", Some(1)));
    let stderr = daemon_until_it_exits(wattson(), &config, &["--duration", "2s"]);
    assert!(
        stderr.contains(&format!(
            "{}: No such file or directory (os error 2): check that the adapter is plugged in",
            missing.display()
        )),
        "{stderr}"
    );
    // Said once: by the collector, not again by run's checks before it.
    assert_eq!(stderr.matches("os error 2").count(), 1, "{stderr}");
    assert!(!stderr.contains("gone"), "{stderr}");
}

#[test]
fn meter_probe_names_a_port_it_could_not_open_and_lists_what_it_tried_once() {
    let env = TestEnv::new();
    let config = env.config("");
    let missing = env.path("ttyACM3");
    let missing_arg = missing.to_string_lossy().into_owned();
    let (code, _, stderr) = run(&config, &["meter", "probe", &missing_arg]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{missing_arg}: No such file or directory (os error 2): check that"
        )) && stderr.contains("no meter was tried"),
        "{stderr}"
    );
    assert_eq!(stderr.matches("os error 2").count(), 1, "{stderr}");
    assert!(!stderr.contains("no supported meter answered"), "{stderr}");

    let (silent, _master) = silent_pty();
    let silent_arg = silent.to_string_lossy().into_owned();
    let (code, _, stderr) = run(
        &config,
        &["meter", "probe", &silent_arg, "--timeout", "100ms"],
    );
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("no supported meter answered"), "{stderr}");
    // One list of what was tried, naming the settings used.
    assert_eq!(stderr.matches("pzem004t").count(), 1, "{stderr}");
    assert!(
        stderr.contains("sdm120 (2400 baud") && stderr.contains("cse7766"),
        "{stderr}"
    );
}

/// A serial port this user may not open: `meter probe` and the daemon name it, give the OS
/// reason once and say what to do. The port is a file only root may open; a test running as
/// root runs wattson as nobody (root opens everything).
#[test]
fn a_port_it_may_not_open_says_permission_denied_once_and_what_to_do() {
    let env = TestEnv::new();
    std::fs::set_permissions(env.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let port = env.path("ttyUSB0");
    std::fs::write(&port, b"").unwrap();
    let running_as_root = nix::unistd::geteuid().is_root();
    // The daemon's database lives where the user it runs as may write.
    let data = env.path("data");
    std::fs::create_dir(&data).unwrap();
    if running_as_root {
        std::fs::set_permissions(&port, std::fs::Permissions::from_mode(0o600)).unwrap();
        nix::unistd::chown(&data, Some(65_534.into()), Some(65_534.into())).unwrap();
    } else {
        std::fs::set_permissions(&port, std::fs::Permissions::from_mode(0o000)).unwrap();
    }
    let as_test_user = |mut cmd: std::process::Command| {
        if running_as_root {
            std::os::unix::process::CommandExt::uid(&mut cmd, 65_534);
            std::os::unix::process::CommandExt::gid(&mut cmd, 65_534);
        }
        cmd
    };
    let config = env.config(&meter_toml("wall", "pzem004t", &port, "1s", Some(1)));
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o644)).unwrap();
    let expected = format!(
        "{}: Permission denied (os error 13): add the service user to the dialout group",
        port.display()
    );

    let port_arg = port.to_string_lossy().into_owned();
    let mut probe = as_test_user(wattson());
    probe
        .arg("--config")
        .arg(&config)
        .args(["meter", "probe", &port_arg]);
    let out = probe.output().expect("running wattson meter probe");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(&expected), "{stderr}");
    assert_eq!(stderr.matches("os error 13").count(), 1, "{stderr}");
    assert_eq!(stderr.matches(&port_arg).count(), 1, "{stderr}");

    let db_arg = data.join("wattson.db").to_string_lossy().into_owned();
    let stderr = daemon_until_it_exits(
        as_test_user(wattson()),
        &config,
        &["--duration", "2s", "--db", &db_arg],
    );
    assert!(
        stderr.contains(&format!(
            "meter:wall: unavailable, no longer polled: {expected}"
        )),
        "{stderr}"
    );
    assert_eq!(stderr.matches("os error 13").count(), 1, "{stderr}");
    let line = stderr
        .lines()
        .find(|l| l.contains("os error 13"))
        .unwrap_or_default();
    assert_eq!(line.matches("unavailable").count(), 1, "{line}");
}

#[test]
fn status_on_a_database_it_may_not_read_says_so() {
    let env = TestEnv::new();
    // The config must stay readable to the user wattson runs as; the database's directory not.
    std::fs::set_permissions(env.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let private = env.path("private");
    std::fs::create_dir(&private).unwrap();
    let db = private.join("wattson.db");
    std::fs::write(&db, b"").unwrap();
    let config = env.config("");
    let db_arg = db.to_string_lossy().into_owned();
    let mut cmd = wattson();
    cmd.arg("--config")
        .arg(&config)
        .args(["status", "--db", &db_arg]);
    // A file this test created belongs to the user the test runs as.
    let running_as_root =
        std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(&db).unwrap()) == 0;
    if running_as_root {
        // root reads everything: run as nobody against a root-only directory.
        std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::os::unix::process::CommandExt::uid(&mut cmd, 65_534);
        std::os::unix::process::CommandExt::gid(&mut cmd, 65_534);
    } else {
        std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o000)).unwrap();
    }
    let out = cmd.output().expect("running wattson status");
    let _ = std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o755));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("cannot read the database")
            && stderr.contains("Permission denied")
            && stderr.contains(&db_arg),
        "{stderr}"
    );
    assert!(!stderr.contains("no database"), "{stderr}");
    assert_eq!(stderr.matches("os error 13").count(), 1, "{stderr}");
}

#[test]
fn report_without_a_database_or_a_manual_configuration_fails() {
    let env = TestEnv::new();
    let config = env.config("");
    let (code, stdout, stderr) = run(&config, &["report"]);
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    assert!(
        stderr.contains(&format!("no database at {}", env.db.display()))
            && stderr.contains("wattson sweep"),
        "{stderr}"
    );
    // A --db that names nothing is a path to check, not a database to pass.
    let missing = env.path("none.db");
    let (code, stdout, stderr) = run(&config, &["status", "--db", missing.to_str().unwrap()]);
    assert_ne!(code, Some(0), "{stdout}{stderr}");
    assert!(
        stderr.contains(&format!(
            "no database at {} (--db): check the path",
            missing.display()
        )) && !stderr.contains("or pass --db"),
        "{stderr}"
    );
    // With a configuration measured by hand there is something to report.
    let config = env.config("\n[[config]]\nname = \"old box\"\nmodes = { idle = 240.0 }\n");
    let (code, stdout, stderr) = run(&config, &["report"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("old box"), "{stdout}");
}

/// A config whose PZEM is on a port that does not exist.
fn absent_meter_config(env: &TestEnv) -> PathBuf {
    env.config(&meter_toml(
        "wall",
        "pzem004t",
        &env.path("ttyUSB0"),
        "1s",
        Some(1),
    ))
}

#[test]
fn levels_beyond_the_logical_cpus_are_refused() {
    let env = TestEnv::new();
    let config = absent_meter_config(&env);
    // The KVM fixture has 2 vCPUs.
    let (code, _, stderr) = run(&config, &["sweep", "--name", "x", "--levels", "0,1,999"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("--levels 999") && stderr.contains("2 logical CPUs"),
        "{stderr}"
    );
}

/// A level given twice ran the whole sweep and then failed on a raw SQLite constraint,
/// keeping nothing; an empty --name was stored as a configuration with no name. Both are
/// refused before the meter is opened (the port here does not exist).
#[test]
fn a_level_given_twice_and_an_empty_name_are_refused_before_the_sweep() {
    let env = TestEnv::new();
    let config = absent_meter_config(&env);
    let (code, _, stderr) = run(&config, &["sweep", "--name", "x", "--levels", "0,1,0"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("--levels 0 is given twice: each level is measured once"),
        "{stderr}"
    );
    assert!(!stderr.contains("ttyUSB0"), "{stderr}");
    for (name, why) in [
        ("", "must not be empty"),
        ("  ", "must not be empty"),
        ("a\nb", "U+000A"),
        ("bell\u{7}", "U+0007"),
    ] {
        let (code, _, stderr) = run(&config, &["sweep", "--name", name, "--levels", "0"]);
        assert_eq!(code, Some(2), "{stderr}");
        assert!(
            stderr.contains("--name") && stderr.contains(why),
            "{stderr}"
        );
    }
}

#[test]
fn os_errors_are_printed_once() {
    let env = TestEnv::new();
    let missing_config = env.path("nowhere.toml");
    let (code, _, stderr) = run(&missing_config, &["status"]);
    assert_eq!(code, Some(78), "{stderr}");
    assert!(stderr.contains("nowhere.toml"), "{stderr}");
    assert_eq!(stderr.matches("os error 2").count(), 1, "{stderr}");

    let out = env.path("no/such/dir/report.html");
    let out_arg = out.to_string_lossy().into_owned();
    let manual = env.config("\n[[config]]\nname = \"old box\"\nmodes = { idle = 240.0 }\n");
    let (code, _, stderr) = run(&manual, &["report", "--format", "html", "--out", &out_arg]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains(&out_arg), "{stderr}");
    assert_eq!(stderr.matches("os error 2").count(), 1, "{stderr}");

    // A password file that is not there: named, with its OS reason, once.
    let password = env.path("mqtt-password");
    let config = env.config(&format!(
        "\n[mqtt]\nurl = \"mqtt://127.0.0.1:1\"\nusername = \"u\"\npassword_file = {}\n",
        q(&password)
    ));
    let (code, _, stderr) = run(&config, &["run", "--duration", "1s"]);
    assert_ne!(code, Some(0), "{stderr}");
    assert!(stderr.contains("mqtt-password"), "{stderr}");
    for line in stderr.lines() {
        assert!(line.matches("os error 2").count() <= 1, "{line}");
    }
    assert!(
        stderr.lines().any(|l| l.contains("ERROR")
            && l.contains("mqtt-password")
            && l.contains("os error 2")),
        "{stderr}"
    );
}

/// A misspelt `--host` looked like a host with no readings yet (exit 0, "no readings
/// stored yet", this machine's sources beside it). `status` and `report` now refuse it,
/// naming the hosts the database has.
#[test]
fn a_host_the_database_has_nothing_of_is_refused_naming_those_it_has() {
    use wattson::store::{Store, StoreOptions, Writer};
    use wattson_collectors::{Metric, Sample};
    let env = TestEnv::new();
    let config = env.config("");
    let opts = StoreOptions {
        host: "other".into(),
        ..StoreOptions::default()
    };
    let mut w = Writer::new(Store::open(&env.db, &opts).unwrap(), opts);
    let now = wattson_tests::now_ms();
    w.push(
        Some("nas".to_owned()),
        vec![Sample::new(now, "meter:wall", Metric::Power, "", 40.0)],
    );
    w.flush().unwrap();
    drop(w);
    for args in [
        &["status", "--host", "nass"][..],
        &["report", "--host", "nass"],
    ] {
        let (code, _, stderr) = run(&config, args);
        assert_eq!(code, Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.contains("--host \"nass\":") && stderr.contains("it has \"nas\""),
            "{args:?}: {stderr}"
        );
    }
    let (code, _, stderr) = run(&config, &["status", "--host", "nas"]);
    assert_eq!(code, Some(0), "{stderr}");
}

/// A `[[tariff.change]]` dated the first day chrono knows is a date, but the configured
/// tariff's base prices are dated that day too, so no tariff could be made of the two.
/// `config check` refuses it with its line (the section is also built into a tariff when
/// the file is read, so nothing the ledger cannot price passes), and every command that
/// reads the file exits 78 with the same one line, not a failure later when it first
/// prices.
#[test]
fn a_tariff_that_cannot_be_built_is_the_config_files_error_with_its_line() {
    let env = TestEnv::new();
    let config = env.config(
        "\n[tariff]\nprice_per_kwh = 0.3\n[[tariff.change]]\neffective_from = \"-262143-01-01\"\n\
         price_per_kwh = 0.2\n",
    );
    let line = std::fs::read_to_string(&config)
        .unwrap()
        .lines()
        .position(|l| l.starts_with("effective_from"))
        .unwrap()
        + 1;
    // A database to read: the commands open it before they price.
    let opts = wattson::store::StoreOptions {
        host: wattson_tests::HOST.into(),
        ..wattson::store::StoreOptions::default()
    };
    drop(wattson::store::Store::open(&env.db, &opts).unwrap());
    let why = format!(
        ":{line}: tariff.change.effective_from: -262143-01-01 is the first date there is, from \
         which the base prices ([tariff] price_per_kwh) hold: a change takes effect after it"
    );
    for args in [
        &["config", "check"][..],
        &["status"],
        &["services"],
        &["report"],
    ] {
        let (code, _, stderr) = run(&config, args);
        assert_eq!(code, Some(78), "{args:?}: {stderr}");
        assert!(stderr.contains(&why), "{args:?}: {stderr}");
        assert_eq!(
            stderr.matches("the first date there is").count(),
            1,
            "{args:?}: {stderr}"
        );
    }
}
