//! A sweep's stored fit is a calibration, read as a one-signal model: a database that holds
//! only the row an older sweep stored (its line and error, not the range it saw) still gives
//! `wattson run` with no meter a stored estimate with its band after an upgrade, estimated
//! everywhere and said so; `status` and `calibration show` say where it came from, and it is
//! lent to no other host. With a newer calibration whose signal cannot be read here, the
//! daemon takes the sweep's, and `status` names the one the daemon took.

#![allow(clippy::unwrap_used, clippy::panic, clippy::missing_panics_doc)]

use std::time::Duration;

use wattson::store::Store;
use wattson_tests::{Child, TestEnv, wattson};

use super::calibration::json;
use super::calibration_live::{Package, estimates};

/// When the old sweep ended: 2025-12-05 00:00 UTC.
const SWEPT_MS: i64 = 1_764_892_800_000;

/// The row a sweep stored before sweeps recorded the range they saw, as that wattson wrote
/// it: `wall = 31.5 W + 1.2 x package`, rms 0.6 W over 4 levels.
const OLD_ROW: &str = r#"{"source":"rapl/package-0","intercept_w":31.5,"slope":1.2,"r2":0.998,"rms_error_w":0.6,"levels":4,"estimate":true}"#;

#[test]
fn an_old_sweeps_calibration_row_still_gives_a_stored_estimate_with_its_band() {
    let env = TestEnv::new();
    let sys = env.path("sys");
    // The machine's RAPL package draws 20 W: the estimate is 31.5 + 1.2 x 20 = 55.5 W.
    let package = Package::start(&sys, 20.0);
    let proc = wattson_tests::kvm_fixture().join("proc");
    let config = env.config_with_roots(
        &sys,
        &proc,
        "\n[cpu]\nenabled = false\n\n[power]\ninterval = \"500ms\"\n",
    );
    {
        let store = Store::open(&env.db, &wattson::store::StoreOptions::default()).unwrap();
        store
            .conn()
            .execute(
                "INSERT INTO calibration (host, source, fit, created_ms) VALUES (?1, 'rapl/package-0', ?2, ?3)",
                rusqlite::params![wattson_tests::HOST, OLD_ROW, SWEPT_MS],
            )
            .unwrap();
    }
    let started = wattson_tests::now_ms();
    let mut daemon = Child::run_daemon(&config, &[]);
    let watts = daemon.wait_for(
        "three estimated wall samples",
        Duration::from_secs(60),
        || {
            let s = estimates(&env.db, "", started);
            (s.len() >= 3).then_some(s)
        },
    );
    // The first reading after a counter's first may span a start-up stall.
    for (_, w) in &watts[1..] {
        assert!(
            (w - 55.5).abs() <= 0.03 * 55.5,
            "{w} W for 55.5 W: {watts:?}"
        );
    }
    let errors = estimates(&env.db, "error", started);
    assert!(!errors.is_empty());
    assert!(
        errors.iter().all(|(_, e)| (e - 1.2).abs() < 1e-9),
        "the band is twice the rms error: {errors:?}"
    );
    let basis = "estimated from a sweep on 2025-12-05, +/- 1.2 W (3.8 %), the range it saw not \
                 recorded";
    daemon.wait_for_log(
        &format!(
            "no wall meter: estimating wall power as 31.50 W + 1.2 x rapl/power/package-0: {basis}"
        ),
        Duration::from_secs(5),
    );
    daemon.wait_for_log(
        "the estimate is not withheld anywhere: the sweep it comes from did not record the range of rapl/power/package-0 it saw",
        Duration::from_secs(5),
    );
    // Far above anything a package of this machine draws: estimated, not withheld.
    package.set(400.0);
    daemon.wait_for("an estimate at 400 W", Duration::from_secs(30), || {
        estimates(&env.db, "", started)
            .iter()
            .any(|(_, w)| (w - (31.5 + 1.2 * 400.0)).abs() <= 0.03 * 511.5)
            .then_some(())
    });
    status_names(&config, basis);
    daemon.signal(nix::sys::signal::Signal::SIGTERM);
    assert!(daemon.wait_exit(Duration::from_secs(30)).is_some());
    drop(package);

    // `calibration show` says what it is and what it lacks.
    let shown = wattson()
        .arg("--config")
        .arg(&config)
        .args(["calibration", "show"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&shown.stdout);
    assert!(shown.status.success(), "{text}");
    for line in [
        "calibration of e2e from a sweep",
        "  model      31.50 W + 1.2 x rapl/power/package-0",
        "  fitted on  4 levels of a sweep ended 2025-12-05 00:00 UTC",
        "  saw        not recorded",
        "  error      rms 0.60 W over its levels (r2 0.998); nothing held out",
        &format!("  shown as   \"{basis}\""),
    ] {
        assert!(text.contains(line), "no {line:?} in:\n{text}");
    }
    let model = json(&config, &["calibration", "show"]);
    assert_eq!(model["origin"]["kind"], "sweep");
    assert_eq!(model["origin"]["levels"], 4);
    assert!(model.get("wall_span").is_none(), "{model}");
    // A sweep's fit names no hardware: never lent to another host.
    let export = wattson()
        .arg("--config")
        .arg(&config)
        .args(["calibration", "export", "--format", "file"])
        .output()
        .unwrap();
    assert_eq!(export.status.code(), Some(65));
    assert!(
        String::from_utf8_lossy(&export.stderr).contains("records no hardware"),
        "{}",
        String::from_utf8_lossy(&export.stderr)
    );

    the_daemons_choice_is_named_by_status(&env, &config, (&sys, &proc), basis);
}

/// A newer calibration whose signal (IPMI, off in this config) the daemon cannot read: it
/// passes over it to the sweep's (`basis`), and `status` names the one it took.
fn the_daemons_choice_is_named_by_status(
    env: &TestEnv,
    config: &std::path::Path,
    (sys, proc): (&std::path::Path, &std::path::Path),
    basis: &str,
) {
    save_a_model_of_an_unreadable_signal(&env.db, sys, proc);
    let package = Package::start(sys, 20.0);
    let started = wattson_tests::now_ms();
    let mut daemon = Child::run_daemon(config, &[]);
    daemon.wait_for_log(
        "no wall estimate from the calibration (",
        Duration::from_secs(30),
    );
    daemon.wait_for_log(
        &format!(
            "no wall meter: estimating wall power as 31.50 W + 1.2 x rapl/power/package-0: {basis}"
        ),
        Duration::from_secs(30),
    );
    daemon.wait_for("an estimate", Duration::from_secs(60), || {
        (!estimates(&env.db, "", started).is_empty()).then_some(())
    });
    status_names(config, basis);
    daemon.signal(nix::sys::signal::Signal::SIGTERM);
    assert!(daemon.wait_exit(Duration::from_secs(30)).is_some());
    drop(package);
}

/// `wattson status` shows the estimated wall with its band and `basis`: where it came from.
fn status_names(config: &std::path::Path, basis: &str) {
    let status = wattson()
        .arg("--config")
        .arg(config)
        .arg("status")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(
        text.contains(&format!(
            "W estimated \u{b1} 1.20 W (no wall meter: {basis})"
        )),
        "status does not name the calibration the daemon took:\n{text}"
    );
}

/// Stores, in `db`, a calibration fitted on ordinary running (now, so newest) over one
/// signal, the IPMI sensor's power: `wall = 40 W + 0.5 x ipmi`.
fn save_a_model_of_an_unreadable_signal(
    db: &std::path::Path,
    sys: &std::path::Path,
    proc: &std::path::Path,
) {
    use wattson::calibration::{Feature, choose, history::Table, persist, refit};
    let now = wattson_tests::now_ms();
    let minutes: Vec<i64> = (0..600).map(|m| now - (600 - m) * 60_000).collect();
    let ipmi: Vec<f64> = (0..600).map(|m| 60.0 + f64::from(m % 97)).collect();
    let table = Table {
        minutes,
        wall: ipmi.iter().map(|w| 40.0 + 0.5 * w).collect(),
        columns: vec![ipmi],
    };
    let root = wattson_collectors::SysRoot::new(sys, proc);
    let model = choose::calibrate(
        wattson_tests::HOST,
        "meter:wall",
        &table,
        &[Feature::parse("ipmi/power").unwrap()],
        0.3,
        refit::hardware(&root, wattson_tests::HOST),
        now,
    )
    .unwrap();
    let store = Store::open(db, &wattson::store::StoreOptions::default()).unwrap();
    persist::save(&store, wattson_tests::HOST, &model).unwrap();
}
