//! The config file through the real binary: the limits every duration and the file itself
//! are held to (issue 14's config rows), configs `config check` used to pass and `run` to
//! refuse, a reload with a bad file keeping the running config, and the MQTT password as a
//! systemd credential. The property over generated configs is in `config_generated.rs`.

// Helpers outside #[test] fns are test code too.
#![allow(clippy::panic, clippy::unwrap_used)]

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use nix::sys::signal::Signal;
use wattson_collectors::Metric;
use wattson_tests::{Child, TestEnv, db_points, output_within, q, wattson};

mod mqtt_credential;

/// `wattson --config CONFIG ARGS` to completion, within 30 s: (exit code, stderr).
fn wattson_with(mut cmd: Command, config: &Path, args: &[&str]) -> (Option<i32>, String) {
    cmd.arg("--config").arg(config).args(args);
    output_within(cmd, Duration::from_secs(30))
}

fn check(config: &Path) -> (Option<i32>, String) {
    wattson_with(wattson(), config, &["config", "check"])
}

/// The 1-based line of `config` that contains `needle`.
fn line_of(config: &Path, needle: &str) -> usize {
    std::fs::read_to_string(config)
        .unwrap()
        .lines()
        .position(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no {needle:?} in {}", config.display()))
        + 1
}

/// Every command that reads the config refuses `extra` with exit 78, naming `key` and the
/// line holding `value`, and stores nothing.
fn refused_everywhere(extra: &str, key: &str, value: &str) {
    let env = TestEnv::new();
    let config = env.config(extra);
    let line = line_of(&config, value);
    for args in [
        &["config", "check"][..],
        &["run", "--duration", "2s"],
        &["status"],
        &["report"],
        &["sweep", "--name", "x", "--levels", "0"],
        &["meter", "simulate", "--protocol", "pzem004t"],
    ] {
        let (code, stderr) = wattson_with(wattson(), &config, args);
        assert_eq!(code, Some(78), "{args:?}: {stderr}");
        assert!(
            stderr.contains(&format!(":{line}: {key}:")),
            "{args:?}: {key} at line {line} not named: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
    assert!(!env.db.exists(), "a refused config created the database");
}

/// Regression: `interval = "18446744073709551616s"` panicked (exit 134) on every command.
#[test]
fn an_interval_past_u64_seconds_is_refused_by_every_command() {
    refused_everywhere(
        "\n[cpu]\ninterval = \"18446744073709551616s\"\n",
        "cpu.interval",
        "18446744073709551616s",
    );
}

/// Regression: `config check` passed `flush_interval = "60000000000000d"` and `run` panicked
/// ("overflow when adding duration to instant").
#[test]
fn a_flush_interval_of_sixty_trillion_days_is_refused() {
    let env = TestEnv::new();
    let config = env.config("");
    let text = std::fs::read_to_string(&config).unwrap().replace(
        "flush_interval = \"200ms\"",
        "flush_interval = \"60000000000000d\"",
    );
    std::fs::write(&config, text).unwrap();
    for args in [&["config", "check"][..], &["run", "--duration", "2s"]] {
        let (code, stderr) = wattson_with(wattson(), &config, args);
        assert_eq!(code, Some(78), "{args:?}: {stderr}");
        assert!(
            stderr.contains("storage.flush_interval: \"60000000000000d\" is too long"),
            "{args:?}: {stderr}"
        );
    }
}

/// Regression: `raw_retention = "18446744073709552s"` wrapped to 384 ms, and the first prune
/// deleted every raw sample. Now refused; the longest retention accepted keeps what is
/// stored.
#[test]
fn a_retention_that_would_wrap_is_refused_and_the_longest_allowed_keeps_samples() {
    let env = TestEnv::new();
    let config = env.config("");
    let base = std::fs::read_to_string(&config).unwrap();
    let with = |retention: &str| {
        base.replace(
            "flush_interval = \"200ms\"",
            &format!("flush_interval = \"200ms\"\n{retention}"),
        )
    };
    std::fs::write(&config, with("raw_retention = \"18446744073709552s\"")).unwrap();
    let (code, stderr) = check(&config);
    assert_eq!(code, Some(78), "{stderr}");
    assert!(
        stderr.contains("storage.raw_retention: \"18446744073709552s\" is too long"),
        "{stderr}"
    );

    std::fs::write(
        &config,
        with("raw_retention = \"36500d\"\ndetail_retention = \"36500d\""),
    )
    .unwrap();
    let (code, stderr) = wattson_with(wattson(), &config, &["run", "--duration", "3s"]);
    assert_eq!(code, Some(0), "{stderr}");
    let first = db_points(&env.db, "cpu", Metric::CoreFrequency);
    assert!(!first.is_empty(), "no CPU samples stored: {stderr}");
    // A second run (which prunes by the same retention) keeps every sample of the first.
    let (code, stderr) = wattson_with(wattson(), &config, &["run", "--duration", "2s"]);
    assert_eq!(code, Some(0), "{stderr}");
    let after = db_points(&env.db, "cpu", Metric::CoreFrequency);
    assert!(
        first.iter().all(|p| after.contains(p)) && after.len() > first.len(),
        "samples pruned: {} before, {} after; {stderr}",
        first.len(),
        after.len()
    );
}

/// Regression: `cpu.interval = "0.0001ms"` was accepted (about 340 samples/s per series).
#[test]
fn a_sub_millisecond_sampling_interval_is_refused_with_its_range() {
    let env = TestEnv::new();
    let config = env.config("\n[cpu]\ninterval = \"0.0001ms\"\n");
    let (code, stderr) = check(&config);
    assert_eq!(code, Some(78), "{stderr}");
    assert!(
        stderr.contains("cpu.interval: 0.0001ms is too short: use 100ms to 1h"),
        "{stderr}"
    );
}

/// Regression: `WATTSON_CONFIG=/dev/zero` read 1 GB and ran out of memory; a FIFO hung for
/// ever. Anything but a regular file of at most 1 MiB is refused at once.
#[test]
fn a_config_that_is_a_device_a_fifo_a_directory_or_huge_is_refused() {
    let env = TestEnv::new();
    let fifo = env.path("fifo.toml");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let huge = env.path("huge.toml");
    std::fs::write(&huge, format!("# {}\n", "x".repeat(2 * 1024 * 1024))).unwrap();
    for (path, why) in [
        (
            Path::new("/dev/zero"),
            "is a character device, not a regular file",
        ),
        (fifo.as_path(), "is a FIFO, not a regular file"),
        (env.dir.path(), "is a directory, not a regular file"),
        (
            huge.as_path(),
            "bytes; a config file is at most 1048576 bytes",
        ),
    ] {
        for args in [&["config", "check"][..], &["run", "--duration", "1s"]] {
            let mut cmd = wattson();
            cmd.env("WATTSON_CONFIG", path).args(args);
            // Fails the test if it hangs, as it did on a FIFO; reads all of stderr.
            let (code, stderr) = output_within(cmd, Duration::from_secs(10));
            assert_eq!(code, Some(78), "{}: {stderr}", path.display());
            assert!(
                stderr.contains(&format!("config {}", path.display())) && stderr.contains(why),
                "{}: {stderr}",
                path.display()
            );
        }
    }
}

/// Regression: a bad file written into a running daemon's config and a SIGHUP aborted it.
/// Now the reload is refused, the reason logged with the key and line, and the daemon keeps
/// collecting with the config it had.
#[test]
fn sighup_with_a_bad_config_keeps_the_running_one_and_says_why() {
    let env = TestEnv::new();
    let config = env.config("\n[cpu]\ninterval = \"250ms\"\n");
    let good = std::fs::read_to_string(&config).unwrap();
    let daemon = Child::run_daemon(&config, &["--duration", "60s"]);
    daemon.wait_for("CPU samples", Duration::from_secs(20), || {
        (!db_points(&env.db, "cpu", Metric::CoreFrequency).is_empty()).then_some(())
    });
    for (bad, key) in [
        (
            good.replace("\"250ms\"", "\"18446744073709551616s\""),
            "cpu.interval: \"18446744073709551616s\" is too long",
        ),
        (
            good.replace("\"250ms\"", "\"0.5ms\""),
            "cpu.interval: 0.5ms is too short",
        ),
        (good.replace("interval = ", "intervall = "), "cpu.intervall"),
    ] {
        std::fs::write(&config, &bad).unwrap();
        daemon.signal(Signal::SIGHUP);
        daemon.wait_for_log(key, Duration::from_secs(10));
        let before = db_points(&env.db, "cpu", Metric::CoreFrequency).len();
        daemon.wait_for(
            "samples after the refused reload",
            Duration::from_secs(10),
            || (db_points(&env.db, "cpu", Metric::CoreFrequency).len() >= before + 2).then_some(()),
        );
    }
    let log = daemon.stderr();
    assert_eq!(
        log.matches("reload refused, keeping the running configuration")
            .count(),
        3,
        "{log}"
    );
    let mut daemon = daemon;
    daemon.signal(Signal::SIGTERM);
    let status = daemon.wait_exit(Duration::from_secs(15)).expect("exit");
    assert_eq!(status.code(), Some(0), "{}", daemon.stderr());
}

/// Regression: `config check` passed what `run` then refused with exit 1: meters of two
/// protocols on one port, two meters sharing a port with no address, two streaming meters on
/// one port, a timeout under a millisecond. Also an empty port (accepted before).
#[test]
fn configs_run_refused_are_refused_by_config_check_with_78() {
    let env = TestEnv::new();
    let a = env.path("ttyA");
    let meter = |id: &str, protocol: &str, port: &Path, more: &str| {
        let mut s = format!(
            "\n[[meter]]\nid = {}\nprotocol = {}\nport = {}\n{more}",
            q(id),
            q(protocol),
            q(port)
        );
        if protocol == "line" {
            s.push_str("[meter.line]\nformat = \"csv\"\nfields = { power = 0 }\n");
        }
        s
    };
    let cases = [
        (
            meter("a", "pzem004t", &a, "address = 1\n")
                + &meter("b", "sdm120", &a, "address = 2\n"),
            "meter.protocol: meters a and b share",
        ),
        (
            meter("a", "pzem004t", &a, "") + &meter("b", "pzem004t", &a, ""),
            "meter.address: meter a on shared line",
        ),
        (
            meter("a", "sdm120", &a, "address = 1\n") + &meter("b", "sdm120", &a, ""),
            "meter.address: meters a and b on",
        ),
        (
            meter("a", "cse7766", &a, "") + &meter("b", "cse7766", &a, ""),
            "cse7766 meters stream on their own line",
        ),
        (
            meter("a", "line", &a, "") + &meter("b", "wattsup", &a, ""),
            "meter.protocol: meters a and b share",
        ),
        (
            meter("a", "pzem004t", &a, "timeout = \"0.5ms\"\n"),
            "meter.timeout: 0.5ms is too short",
        ),
        (
            meter("a", "pzem004t", Path::new(""), ""),
            "meter.port: \"\" is not a serial port",
        ),
        (
            meter("a", "line", &a, "").replace(
                "fields = { power = 0 }",
                "fields = { power = 0 }\nscale = { power = 0.0 }",
            ),
            "meter.line.scale.power: 0 must be a finite, non-zero multiplier",
        ),
        (
            "\n[[ups]]\nid = \"rack\"\nhost = \"127.0.0.1\"\nname = \"ups\"\n\n[[ups]]\nid = \"desk\"\nhost = \"192.0.2.1\"\nname = \"ups\"\n".to_owned(),
            "ups.name: \"ups\" is also [[ups]] rack's upsd name",
        ),
        (
            "\n[[ups]]\nid = \"rack\"\nhost = \"127.0.0.1\"\nname = \"a\"\n\n[[ups]]\nid = \"rack\"\nhost = \"127.0.0.1\"\nname = \"b\"\n".to_owned(),
            "ups.id: \"rack\" is already the id of another [[ups]]",
        ),
    ];
    for (extra, needle) in cases {
        let config = env.config(&extra);
        for args in [&["config", "check"][..], &["run", "--duration", "1s"]] {
            let (code, stderr) = wattson_with(wattson(), &config, args);
            assert_eq!(code, Some(78), "{args:?} {extra}: {stderr}");
            assert!(
                stderr.contains(needle),
                "{args:?} {extra}: no {needle:?} in {stderr}"
            );
        }
    }
}

/// Tariffs that `status` and `report` could not build were passed by `config check` and
/// `run` (exit 0) and then refused by those (exit 1, no line): overlapping periods (in
/// `[tariff]`, a change or an alternative), two changes on one date, a price of 1e308 or
/// beyond a `max_price_per_kwh` the file sets. Now every command refuses them with 78,
/// naming the key and line.
#[test]
fn tariffs_that_cannot_price_are_refused_by_config_check_and_every_command() {
    let env = TestEnv::new();
    let tariff = |more: &str| {
        format!("\n[tariff]\ncurrency = \"GBP\"\nprice_per_kwh = 0.09\ntimezone = \"UTC\"\n{more}")
    };
    let period = |table: &str, start: &str, end: &str| {
        format!("[[{table}]]\nstart = \"{start}\"\nend = \"{end}\"\nprice_per_kwh = 0.07\n")
    };
    let change = |date: &str| {
        format!("[[tariff.change]]\neffective_from = \"{date}\"\nprice_per_kwh = 0.2\n")
    };
    let cases = [
        (
            tariff(
                &(period("tariff.period", "00:00", "08:00")
                    + &period("tariff.period", "06:00", "09:00")),
            ),
            "wattson.toml:19: tariff.period: the period 06:00-09:00 overlaps 00:00-08:00",
        ),
        (
            // Across midnight.
            tariff(
                &(period("tariff.period", "23:30", "07:30")
                    + &period("tariff.period", "07:00", "08:00")),
            ),
            "the period 07:00-08:00 overlaps 23:30-07:30",
        ),
        (
            tariff(
                &(change("2026-01-01")
                    + &period("tariff.change.period", "01:00", "03:00")
                    + &period("tariff.change.period", "02:00", "04:00")),
            ),
            "tariff.change.period: the period 02:00-04:00 overlaps 01:00-03:00",
        ),
        (
            tariff(&(change("2026-01-01") + &change("2026-01-01"))),
            "tariff.change.effective_from: two [[tariff.change]] take effect on 2026-01-01",
        ),
        (
            tariff(
                "[[tariff.alternative]]\nname = \"e7\"\nprice_per_kwh = 0.3\n[[tariff.alternative.period]]\nstart = \"00:30\"\nend = \"07:30\"\nprice_per_kwh = 0.1\n[[tariff.alternative.period]]\nstart = \"07:00\"\nend = \"09:00\"\nprice_per_kwh = 0.1\n",
            ),
            "tariff.alternative.period: the period 07:00-09:00 overlaps 00:30-07:30",
        ),
        (
            tariff("").replace("price_per_kwh = 0.09", "price_per_kwh = 1e308"),
            "tariff.price_per_kwh: 100000000000000000000",
        ),
        (
            tariff("max_price_per_kwh = 1.0\n")
                .replace("price_per_kwh = 0.09", "price_per_kwh = 50"),
            "tariff.price_per_kwh: 50 per kWh is beyond tariff.max_price_per_kwh (1)",
        ),
        (
            tariff("").replace("price_per_kwh = 0.09", "price_per_kwh = inf"),
            "tariff.price_per_kwh: inf is not a price",
        ),
    ];
    for (extra, needle) in cases {
        let config = env.config(&extra);
        for args in [
            &["config", "check"][..],
            &["run", "--duration", "1s"],
            &["status"],
            &["report"],
        ] {
            let (code, stderr) = wattson_with(wattson(), &config, args);
            assert_eq!(code, Some(78), "{args:?} {extra}: {stderr}");
            assert!(
                stderr.contains(needle),
                "{args:?} {extra}: no {needle:?} in {stderr}"
            );
        }
    }
    // A yen price is not refused by the import limit's default of 10.
    let config = env.config(&tariff("").replace("GBP", "JPY").replace("0.09", "31.5"));
    let (code, stderr) = wattson_with(wattson(), &config, &["config", "check"]);
    assert_eq!(code, Some(0), "{stderr}");
}

/// A meter port that does not exist yet is a warning naming it (exit 0): the adapter may be
/// plugged in later, and `run` picks it up.
#[test]
fn config_check_warns_about_a_port_that_is_not_there() {
    let env = TestEnv::new();
    let port = env.path("ttyUSB9");
    let config = env.config(&format!(
        "\n[[meter]]\nid = \"wall\"\nprotocol = \"pzem004t\"\nport = {}\n",
        q(&port)
    ));
    let (code, stderr) = check(&config);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("WARN")
            && stderr.contains(&format!("meter wall: port {} is not there", port.display()))
            && stderr.contains("No such file or directory"),
        "{stderr}"
    );
}

/// `[tariff] timezone` comes from the system's tzdata (`$TZDIR` here), else from the IANA
/// database compiled into the binary. A name in the wrong case is refused by every command
/// with the right spelling; a corrupt tzdata file is refused naming the file, never
/// replaced by the compiled-in copy in silence.
#[test]
fn a_tariff_zone_is_read_from_tzdata_else_the_compiled_in_database_and_a_misspelt_one_is_refused() {
    let zone = |name: &str| format!("\n[tariff]\ncurrency = \"GBP\"\ntimezone = \"{name}\"\n");
    refused_everywhere(&zone("europe/london"), "tariff.timezone", "europe/london");

    let env = TestEnv::new();
    let (code, stderr) = check(&env.config(&zone("europe/london")));
    assert_eq!(code, Some(78), "{stderr}");
    assert!(
        stderr.contains("did you mean \"Europe/London\"?"),
        "{stderr}"
    );
    let (code, stderr) = check(&env.config(&zone("../../etc/passwd")));
    assert_eq!(code, Some(78), "{stderr}");
    assert!(stderr.contains("is not an IANA time zone name"), "{stderr}");

    // No tzdata on the machine: an empty $TZDIR.
    let empty = env.path("no-zoneinfo");
    std::fs::create_dir_all(&empty).unwrap();
    let config = env.config(&zone("Europe/London"));
    let mut cmd = wattson();
    cmd.env("TZDIR", &empty);
    let (code, stderr) = wattson_with(cmd, &config, &["config", "check"]);
    assert_eq!(code, Some(0), "{stderr}");
    for args in [
        &["run", "--duration", "2s"][..],
        &["report", "--format", "json"],
    ] {
        let mut cmd = wattson();
        cmd.env("TZDIR", &empty);
        let (code, stderr) = wattson_with(cmd, &config, args);
        assert_eq!(code, Some(0), "{args:?}: {stderr}");
    }

    // A corrupt file where the zone should be.
    let corrupt = env.path("corrupt-zoneinfo");
    std::fs::create_dir_all(corrupt.join("Europe")).unwrap();
    std::fs::write(corrupt.join("Europe/London"), "not tzdata").unwrap();
    let mut cmd = wattson();
    cmd.env("TZDIR", &corrupt);
    let (code, stderr) = wattson_with(cmd, &config, &["config", "check"]);
    assert_eq!(code, Some(78), "{stderr}");
    assert!(
        stderr.contains("corrupt-zoneinfo/Europe/London is not valid tzdata"),
        "{stderr}"
    );
}
