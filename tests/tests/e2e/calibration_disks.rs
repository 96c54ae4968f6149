//! A disk's spin state as a calibration's signal, through the real binary: over a simulated
//! day whose disk spins up for stretches that do not follow the load (a backup, a scrub)
//! and draws 6 W more then, `wattson calibration fit` chooses a model that reads the disk
//! (`disk/disk_spun_up/sda`, as the daemon stores it for each `[[disk]]`), it does better
//! on the held-out minutes than the best without the disk, and it estimates the afternoon
//! without the meter within its interval and 3 % of the truth; the daemon with no meter
//! reads the disk's spin state live for it.

#![allow(clippy::unwrap_used, clippy::panic, clippy::missing_panics_doc)]

use wattson_tests::simulated_day;

use super::calibration::{
    Day, METER_BACK, METER_OUT, day_with_disk, estimate, fit_morning, truth_wh,
};

/// The usual day (the meter in for the morning and back in the evening), with `sda` spun up
/// 40 minutes in every 97.
fn day_with_a_disk() -> Day {
    day_with_disk(
        wattson_tests::HOST,
        |i| i < METER_OUT || METER_BACK.contains(&i),
        |i| Some(i % 97 < 40),
    )
}

#[test]
fn a_calibration_reads_the_disks_spin_state_and_estimates_the_afternoon_within_3_percent() {
    let day = day_with_a_disk();
    let without = fit_morning(&day, &["--feature", "rapl/power/package-0"]);
    let model = fit_morning(&day, &[]);
    let described = model["model"]["features"].to_string();
    eprintln!(
        "with the disk: {} ({} W rms held out); without: {} ({} W rms)",
        model["considered"][0][0],
        model["heldout_rms_w"],
        without["considered"][0][0],
        without["heldout_rms_w"]
    );
    assert!(
        described.contains("\"disk\"") && described.contains("disk_spun_up"),
        "the model reads the disk: {model:#}"
    );
    assert!(
        model["heldout_rms_w"].as_f64().unwrap() < 0.7 * without["heldout_rms_w"].as_f64().unwrap(),
        "the disk explains the wall's steps: {model:#}\n{without:#}"
    );

    // The afternoon, the meter away: within the interval and 3 % of the truth.
    let e = estimate(&day, METER_OUT, METER_BACK.start);
    let (energy, interval) = (
        e["energy_wh"].as_f64().unwrap(),
        e["interval_wh"].as_f64().unwrap(),
    );
    let truth = truth_wh(&day, METER_OUT, METER_BACK.start, &e);
    let error_pct = 100.0 * (energy - truth) / truth;
    eprintln!(
        "afternoon: {energy:.1} Wh +/- {interval:.1} Wh, truth {truth:.1} Wh: {error_pct:+.2} %"
    );
    assert!(e["minutes"].as_u64().unwrap() >= 330, "{e:#}");
    assert!(
        (energy - truth).abs() <= interval,
        "outside the interval: {e:#}"
    );
    assert!(error_pct.abs() <= 3.0, "{error_pct} %: {e:#}");

    // `show` names the disk in the formula.
    let shown = super::calibration::ok(&day.config, &["calibration", "show"]);
    assert!(shown.contains("disk/disk_spun_up/sda"), "{shown}");
}

/// With no meter, the daemon reads the disk's spin state live for a calibration that reads
/// it: the estimate rises by the disk's watts while the disk is spun up.
#[test]
fn without_the_meter_the_live_estimate_rises_by_the_disks_watts_while_it_spins() {
    use std::time::Duration;

    let day = day_with_a_disk();
    let model = fit_morning(
        &day,
        &[
            "--feature",
            "rapl/power/package-0",
            "--feature",
            "disk/disk_spun_up/sda",
        ],
    );
    let shape = &model["model"]["shape"];
    let points: Vec<(f64, f64)> = shape["points"]
        .as_array()
        .unwrap_or_else(|| panic!("a table: {model:#}"))
        .iter()
        .map(|p| (p[0].as_f64().unwrap(), p[1].as_f64().unwrap()))
        .collect();
    let disk_w = shape["plus"][0].as_f64().unwrap();
    assert!((disk_w - simulated_day::DISK_W).abs() < 0.5, "{model:#}");
    let at = |x: f64| {
        let i = points.windows(2).position(|p| x <= p[1].0).unwrap();
        let ((x0, y0), (x1, y1)) = (points[i], points[i + 1]);
        y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    };

    // The machine: its RAPL package at 30 W, and sda, quiet (spun down a second after the
    // first reading), then read from (spun up).
    let sys = day.env.path("sys");
    let package = super::calibration_live::Package::start(&sys, 30.0);
    let sda = sys.join("block/sda");
    std::fs::create_dir_all(&sda).unwrap();
    std::fs::write(sda.join("dev"), "8:0\n").unwrap();
    let io = |n: u64| {
        let tmp = sda.join("stat.tmp");
        std::fs::write(&tmp, format!("{n} 0 0 0 0 0 0 0 0 0 0\n")).unwrap();
        std::fs::rename(&tmp, sda.join("stat")).unwrap();
    };
    io(10);
    let root = wattson_tests::kvm_fixture();
    let config = day.env.path("live.toml");
    std::fs::write(
        &config,
        format!(
            "[host]\nname = \"e2e\"\nsysfs = {}\nprocfs = {}\n\n[storage]\npath = {}\nflush_interval = \"200ms\"\n\n[cpu]\nenabled = false\n\n[power]\ninterval = \"1s\"\nhwmon = false\n\n[[disk]]\nname = \"sda\"\nstandby_after = \"1s\"\ninterval = \"1s\"\n",
            wattson_tests::q(&sys),
            wattson_tests::q(root.join("proc")),
            wattson_tests::q(&day.env.db)
        ),
    )
    .unwrap();
    let started = wattson_tests::now_ms();
    let mut daemon = wattson_tests::Child::run_daemon(&config, &[]);
    let down = at(30.0);
    let estimate_near = |want: f64, after: i64| {
        super::calibration_live::estimates(&day.env.db, "", after)
            .into_iter()
            .find(|(_, w)| (w - want).abs() <= 0.03 * want)
    };
    daemon.wait_for(
        "the estimate with the disk spun down",
        Duration::from_secs(60),
        || estimate_near(down, started),
    );
    // Reads on sda, one each time the estimates are looked at (about every 100 ms): spun
    // up, whole seconds at a time.
    let reading_from = wattson_tests::now_ms();
    let mut n = 10;
    let (t, up) = daemon.wait_for(
        "the estimate with the disk spun up",
        Duration::from_secs(60),
        || {
            n += 1;
            io(n);
            std::thread::sleep(Duration::from_millis(100));
            estimate_near(down + disk_w, reading_from)
        },
    );
    eprintln!(
        "estimated {down:.2} W with sda spun down, {up:.2} W at {t} with it spun up ({disk_w:.2} W \
         for the disk)"
    );
    daemon.wait_for_log(
        "W x disk/disk_spun_up/sda: estimated from the calibration of",
        Duration::from_secs(5),
    );
    daemon.signal(nix::sys::signal::Signal::SIGTERM);
    assert!(daemon.wait_exit(Duration::from_secs(30)).is_some());
    drop(package);
}
