//! Power sources beside the wall meter, through the real binary: `wattson run` on a fixture
//! powercap tree whose RAPL counters the test advances, with a simulated wall meter, then
//! `wattson status`.

#![allow(clippy::unwrap_used, clippy::panic)]

use std::io::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use nix::sys::signal::Signal;
use wattson_collectors::Metric;
use wattson_tests::{Child, TestEnv, meter_toml, simulate, wattson};

/// Package 25 W and DRAM 3 W: the counters follow the time elapsed (as the hardware's do),
/// written every 10 ms, whole, by rename, as the kernel presents them. Counting steps
/// instead of time read 20 W on a loaded machine, where each step took longer than asked.
fn advance_counters(pkg: &Path, dram: &Path, stop: &AtomicBool) {
    let write = |path: &Path, v: u64| {
        let tmp = path.with_extension("tmp");
        let mut f = std::fs::File::create(&tmp).unwrap();
        writeln!(f, "{v}").unwrap();
        std::fs::rename(&tmp, path).unwrap();
    };
    let t0 = std::time::Instant::now();
    while !stop.load(Ordering::Relaxed) {
        // W = µJ per µs.
        let us = t0.elapsed().as_micros() as u64;
        write(pkg, 1_000_000 + us * 25);
        write(dram, 2_000_000 + us * 3);
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn status_shows_package_and_dram_watts_beside_the_wall_watts() {
    let env = TestEnv::new();
    let sys = env.path("sys");
    let pkg = sys.join("class/powercap/intel-rapl:0");
    let dram = sys.join("class/powercap/intel-rapl:0:1");
    for (dir, name) in [(&pkg, "package-0"), (&dram, "dram")] {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("name"), format!("{name}\n")).unwrap();
        std::fs::write(dir.join("max_energy_range_uj"), "262143328850\n").unwrap();
        std::fs::write(dir.join("energy_uj"), "0\n").unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let counters = {
        let (p, d, stop) = (pkg.join("energy_uj"), dram.join("energy_uj"), stop.clone());
        std::thread::spawn(move || advance_counters(&p, &d, &stop))
    };
    let meter = simulate("pzem004t", &[1], 60.0);
    let proc = wattson_tests::kvm_fixture().join("proc");
    let extra = format!(
        "{}\n[power]\ninterval = \"500ms\"\nrapl = true\nhwmon = false\ngpu = false\nipmi = false\n",
        meter_toml("wall", "pzem004t", &meter.path, "500ms", Some(1))
    );
    let config = env.config_with_roots(&sys, &proc, &extra);
    let mut daemon = Child::run_daemon(&config, &[]);
    daemon.wait_for(
        "wall and RAPL watts stored",
        Duration::from_secs(60),
        || {
            let store = wattson_tests::open_db(&env.db)?;
            let rapl = wattson_tests::points(&store, "rapl", Metric::Power);
            let wall = wattson_tests::points(&store, "meter:wall", Metric::Power);
            (rapl.len() >= 8 && !wall.is_empty()).then_some(())
        },
    );
    let status = wattson()
        .arg("--config")
        .arg(&config)
        .arg("status")
        .output()
        .unwrap();
    daemon.signal(Signal::SIGTERM);
    assert!(daemon.wait_exit(Duration::from_secs(30)).is_some());
    stop.store(true, Ordering::Relaxed);
    counters.join().unwrap();
    meter.stop();

    let text = String::from_utf8_lossy(&status.stdout).into_owned();
    eprintln!("{text}");
    assert!(status.status.success(), "{text}");
    let watts_on = |line_has: &str, section: &str| -> f64 {
        let body = text
            .split("\n\n")
            .find(|block| block.starts_with(section))
            .unwrap_or_else(|| panic!("no {section} section:\n{text}"));
        let line = body
            .lines()
            .find(|l| l.contains(line_has) && l.contains(" W"))
            .unwrap_or_else(|| panic!("no {line_has} line in {section}:\n{text}"));
        line.split_whitespace()
            .rev()
            .skip_while(|w| *w != "W")
            .nth(1)
            .and_then(|w| w.parse().ok())
            .unwrap_or_else(|| panic!("no watts in {line:?}"))
    };
    let wall = watts_on("power", "meter:wall");
    let package = watts_on("package-0 ", "rapl");
    let dram_w = watts_on("package-0/dram", "rapl");
    assert!(
        text.contains("meter:wall (measured at the wall;")
            && text.contains("rapl (measured inside the box: part of the wall figure;"),
        "each source says what its watts stand for:\n{text}"
    );
    assert!((wall - 60.0).abs() < 0.5, "wall {wall} W:\n{text}");
    assert!((package - 25.0).abs() < 5.0, "package {package} W:\n{text}");
    assert!((dram_w - 3.0).abs() < 1.0, "dram {dram_w} W:\n{text}");
}
