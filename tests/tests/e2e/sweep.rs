//! Sweep accuracy against a simulated meter over a real pseudo-terminal.
//!
//! The simulated PZEM-004T draws `40 W + 15 W x` the CPUs this test process keeps busy (its
//! own CPU time from /proc/<pid>/stat), plus Gaussian noise and a 1 s ramp. Following this
//! process rather than the whole machine keeps the result independent of whatever else the
//! machine runs. The sweep must recover idle within 0.5 W and watts per loop within 2 %.
//!
//! The short versions run in the normal suite (0.5 W noise, 4 Hz polling); the full version
//! of the DESIGN budget (2 W noise, 1 Hz, up to 90 s per level) is `#[ignore]`d:
//! `cargo test -p wattson-tests --test e2e sweep:: -- --ignored --nocapture`.
//!
//! The interruption tests run the `wattson sweep` binary, send it SIGINT or SIGTERM while
//! its 1-loop level runs, and time how long its loop threads (named `wattson-spin-<cpu>`)
//! outlive the signal, from `/proc/<pid>/task` of that child.

#![allow(clippy::unwrap_used, clippy::panic)]

use std::path::Path;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use wattson_tests::{Child, TestEnv, meter_toml, wattson};

use wattson::cli::SweepArgs;
use wattson::commands::sweep::sweep_with_config;
use wattson::config::{Config, MeterConfig};
use wattson::sources::simulated_power::PowerModel;
use wattson::store::Store;
use wattson::sweep::workload::LoopKind;
use wattson_collectors::SysRoot;
use wattson_collectors::meter::Protocol;

/// The highest level: one loop per CPU but one (at least one loop), at most 4.
fn levels_top() -> usize {
    std::thread::available_parallelism()
        .map_or(1, std::num::NonZero::get)
        .saturating_sub(1)
        .clamp(1, 4)
}

struct Fit {
    idle: f64,
    slope: f64,
    r2: f64,
    notes: Vec<String>,
}

fn run_sweep(
    noise: f64,
    curvature: f64,
    interval: Duration,
    max_level: Duration,
    dir: &Path,
) -> Fit {
    run_sweep_levels(noise, curvature, interval, max_level, levels_top(), dir)
}

fn run_sweep_levels(
    noise: f64,
    curvature: f64,
    interval: Duration,
    max_level: Duration,
    top: usize,
    dir: &Path,
) -> Fit {
    // The simulated meter follows the CPUs this process's spin loops ask for (time on a CPU
    // plus time waiting for one), so other work on the machine changes neither the watts nor
    // the slope; two in-process sweeps at once would see each other's loops.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let root = SysRoot::new("/sys", "/proc");
    let model = PowerModel {
        idle_w: 40.0,
        per_cpu_w: 15.0,
        follow_cpu: true,
        follow_pid: Some(std::process::id()),
        follow_demand: true,
        follow_threads: Some("wattson-spin".into()),
        noise_sd_w: noise,
        ramp_s: 1.0,
        curvature_w: curvature,
        ..PowerModel::default()
    };
    let sim =
        wattson::sources::meters::simulate(Protocol::Pzem004t, &[1], model, &root, 7).unwrap();
    let mut config = Config::defaults();
    config.meters = vec![MeterConfig {
        id: "wall".into(),
        protocol: Protocol::Pzem004t,
        port: sim.path.clone(),
        baud: None,
        parity: None,
        stop_bits: None,
        address: Some(1),
        interval,
        timeout: None,
        line: None,
        bidirectional: false,
    }];
    let db = dir.join("sweep.db");
    config.storage.path.clone_from(&db);
    let cpus = top;
    let args = SweepArgs {
        name: Some("accuracy".into()),
        levels: Some((0..=cpus).collect()),
        kinds: vec![LoopKind::Spin],
        governors: None,
        meter: None,
        max_level_time: max_level,
        ci_watts: 0.25,
        ci_percent: 0.5,
        min_samples: 20,
        idle_wait: Duration::from_secs(1),
        regression_check: false,
        list: false,
        show: None,
        json: false,
        db: Some(db.clone()),
        quiet: false,
    };
    assert!(
        sweep_with_config(&config, &args, "accuracy", &db).unwrap(),
        "sweep was interrupted"
    );
    sim.stop();
    let store = Store::open_read_only(&db).unwrap();
    let s = wattson::sweep::persist::load(&store, "accuracy")
        .unwrap()
        .expect("sweep stored");
    assert_eq!(s.status, "complete");
    assert_eq!(s.levels.len(), cpus + 1);
    // Each level's settle/measure split is stored with the run.
    let timing = s.settings.as_ref().unwrap()["level_timing"]
        .as_array()
        .unwrap();
    assert_eq!(timing.len(), cpus + 1, "{timing:?}");
    for (t, l) in timing.iter().zip(&s.levels) {
        assert_eq!(t["loops"].as_i64(), Some(l.loops), "{t}");
        assert_eq!(t["n"].as_i64(), Some(l.n), "{t}");
        let (settle, measure) = (
            t["settle_s"].as_f64().unwrap(),
            t["measure_s"].as_f64().unwrap(),
        );
        assert!(settle >= 0.0 && measure > 0.0, "{t}");
        assert!(settle + measure <= max_level.as_secs_f64() + 1.0, "{t}");
    }
    let fit = &s.fit.as_ref().unwrap()[0];
    Fit {
        idle: fit["loops"]["intercept"].as_f64().unwrap(),
        slope: fit["loops"]["slope"].as_f64().unwrap(),
        r2: fit["loops"]["r2"].as_f64().unwrap(),
        notes: fit["notes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_str().unwrap().to_owned())
            .collect(),
    }
}

#[test]
fn linear_machine_idle_and_watts_per_loop_are_recovered() {
    let dir = tempfile::tempdir().unwrap();
    let fit = run_sweep(
        0.5,
        0.0,
        Duration::from_millis(250),
        Duration::from_secs(30),
        dir.path(),
    );
    eprintln!(
        "idle {:.3} W, {:.3} W per loop, r2 {:.5}, notes {:?}",
        fit.idle, fit.slope, fit.r2, fit.notes
    );
    assert!((fit.idle - 40.0).abs() <= 0.5, "idle {}", fit.idle);
    // The simulated meter follows the CPU time the kernel accounts to this process; on a
    // virtual machine the loops lose 1-3 % of it to steal and to other tasks (seen: 14.58 W
    // per loop on a 2-vCPU guest), so the short version allows 5 %. The full version below
    // holds the DESIGN budget of 2 %.
    assert!(
        (fit.slope - 15.0).abs() <= 0.05 * 15.0,
        "slope {}",
        fit.slope
    );
    assert!(fit.r2 > 0.99, "r2 {}", fit.r2);
    assert!(
        !fit.notes.iter().any(|n| n.starts_with("later loops")),
        "a linear machine flagged as non-linear: {:?}",
        fit.notes
    );
}

#[test]
fn later_loops_cheaper_is_detected_and_reported() {
    // Three levels (idle, 1 and 2 loops) on any machine with two CPUs: the model's second
    // loop costs 15 - 8 = 7 W instead of 15 W, as when two loops share a turbo budget.
    let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    if cpus < 2 {
        eprintln!("SKIPPED: needs 2 CPUs, the machine has {cpus}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let fit = run_sweep_levels(
        0.5,
        -8.0,
        Duration::from_millis(250),
        Duration::from_secs(30),
        2,
        dir.path(),
    );
    eprintln!(
        "idle {:.3} W, {:.3} W per loop, r2 {:.5}, notes {:?}",
        fit.idle, fit.slope, fit.r2, fit.notes
    );
    assert!(
        fit.notes
            .iter()
            .any(|n| n.starts_with("later loops are cheaper")),
        "non-linearity not reported: {:?}",
        fit.notes
    );
}

#[test]
#[ignore = "full DESIGN budget: 2 W noise at 1 Hz, several minutes"]
fn full_budget_sweep_accuracy() {
    let dir = tempfile::tempdir().unwrap();
    let t0 = std::time::Instant::now();
    let fit = run_sweep(
        2.0,
        0.0,
        Duration::from_secs(1),
        Duration::from_secs(90),
        dir.path(),
    );
    // Leave one CPU for the meter, the simulator and the rest of the machine: with every
    // CPU busy the loops share them with whatever else runs, and the wall rises by less.
    let cpus = levels_top();
    eprintln!(
        "idle {:.3} W, {:.3} W per loop, r2 {:.5}, {:.0} s per level",
        fit.idle,
        fit.slope,
        fit.r2,
        t0.elapsed().as_secs_f64() / (cpus + 1) as f64
    );
    assert!((fit.idle - 40.0).abs() <= 0.5, "idle {}", fit.idle);
    assert!(
        (fit.slope - 15.0).abs() <= 0.02 * 15.0,
        "slope {}",
        fit.slope
    );
}

/// Threads of process `pid` running workload loops: `/proc/<pid>/task/*/comm` starting with
/// `wattson-spin` (the kernel keeps 15 bytes of a thread name: `wattson-spin-12`). 0 once
/// the process is gone.
fn loop_threads(pid: i32) -> usize {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .filter_map(Result::ok)
        .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
        .filter(|comm| comm.starts_with("wattson-spin"))
        .count()
}

/// What an interrupted sweep took, from the signal.
struct Interrupted {
    loops_gone: Duration,
    exited: Duration,
    code: Option<i32>,
    list: String,
}

/// `wattson sweep --levels 0,1` against a simulated meter read at 10 Hz; once the 1-loop
/// level's thread runs, send `signal` and time the loop threads out and the process exit.
fn interrupt_sweep(signal: Signal) -> Interrupted {
    let env = TestEnv::new();
    let model = PowerModel {
        idle_w: 60.0,
        noise_sd_w: 0.3,
        ramp_s: 0.0,
        ..PowerModel::default()
    };
    let fixture = wattson_tests::kvm_fixture();
    let root = SysRoot::new(fixture.join("sys"), fixture.join("proc"));
    let sim =
        wattson::sources::meters::simulate(Protocol::Pzem004t, &[1], model, &root, 3).unwrap();
    let config = env.config(&meter_toml("wall", "pzem004t", &sim.path, "100ms", Some(1)));
    let mut cmd = wattson();
    // Each level measures 40 readings (4 s): the idle level completes and is kept; the
    // signal lands inside the 1-loop level, which has 4 s to go when its thread appears.
    cmd.arg("--config").arg(&config).args([
        "sweep",
        "--name",
        "interrupted",
        "--levels",
        "0,1",
        "--min-samples",
        "40",
        "--idle-wait",
        "1s",
    ]);
    let mut child = Child::spawn(cmd);
    let pid = child.pid().as_raw();
    child.wait_for(
        "the 1-loop level's thread",
        Duration::from_secs(120),
        || (loop_threads(pid) >= 1).then_some(()),
    );
    let sent = Instant::now();
    child.signal(signal);
    // Poll as fast as /proc answers: the figure is the point of the test.
    let loops_gone = loop {
        if loop_threads(pid) == 0 {
            break sent.elapsed();
        }
        assert!(
            sent.elapsed() < Duration::from_secs(30),
            "loop threads still running 30 s after {signal}; stderr:\n{}",
            child.stderr()
        );
        std::thread::yield_now();
    };
    let status = child.wait_exit(Duration::from_secs(60)).unwrap_or_else(|| {
        panic!(
            "no exit within 60 s of {signal}; stderr:\n{}",
            child.stderr()
        )
    });
    let exited = sent.elapsed();
    let stderr = child.stderr();
    assert!(
        stderr.contains("interrupted: loops stopped"),
        "the sweep ended before {signal} reached it (the 1-loop level finished first?); stderr:\n{stderr}"
    );
    let list = wattson()
        .arg("--config")
        .arg(&config)
        .args(["sweep", "--list"])
        .output()
        .unwrap();
    sim.stop();
    Interrupted {
        loops_gone,
        exited,
        code: status.code(),
        list: String::from_utf8_lossy(&list.stdout).into_owned(),
    }
}

/// The design budget is 100 ms from Ctrl-C to the last loop thread gone. The assertion is a
/// generous 1 s so a shared, noisy machine cannot fail it; the printed figure is the
/// measurement (BENCHMARKS.md).
const STOP_BOUND: Duration = Duration::from_secs(1);

#[test]
fn sigint_stops_the_loops_at_once_keeps_the_partial_run_and_exits_130() {
    let r = interrupt_sweep(Signal::SIGINT);
    eprintln!(
        "SIGINT: loop threads gone after {:.2} ms, process exited after {:.1} ms",
        r.loops_gone.as_secs_f64() * 1e3,
        r.exited.as_secs_f64() * 1e3
    );
    assert!(
        r.loops_gone < STOP_BOUND,
        "loops ran {:?} past SIGINT",
        r.loops_gone
    );
    assert_eq!(r.code, Some(130));
    assert!(r.list.contains("interrupted (partial"), "{}", r.list);
}

#[test]
fn sigterm_stops_the_loops_at_once_keeps_the_partial_run_and_exits_143() {
    let r = interrupt_sweep(Signal::SIGTERM);
    eprintln!(
        "SIGTERM: loop threads gone after {:.2} ms, process exited after {:.1} ms",
        r.loops_gone.as_secs_f64() * 1e3,
        r.exited.as_secs_f64() * 1e3
    );
    assert!(
        r.loops_gone < STOP_BOUND,
        "loops ran {:?} past SIGTERM",
        r.loops_gone
    );
    assert_eq!(r.code, Some(143));
    assert!(r.list.contains("interrupted (partial"), "{}", r.list);
}

/// The meter has moved on: `wattson run` with no `[[meter]]`, on a machine whose powercap
/// tree (a fixture: one package zone) a sweep calibrated against, stores an estimated wall
/// draw with its error, and `wattson status` shows it as an estimate.
#[test]
fn without_a_meter_the_daemon_estimates_wall_power_from_the_calibration() {
    let env = TestEnv::new();
    let sys = env.path("sys");
    let zone = sys.join("class/powercap/intel-rapl:0");
    std::fs::create_dir_all(&zone).unwrap();
    std::fs::write(zone.join("name"), "package-0\n").unwrap();
    // A static counter: the package reads 0 W, so the estimate is the calibration's idle.
    std::fs::write(zone.join("energy_uj"), "5000000\n").unwrap();
    std::fs::write(zone.join("max_energy_range_uj"), "262143328850\n").unwrap();
    let proc = wattson_tests::kvm_fixture().join("proc");
    let config = env.config_with_roots(&sys, &proc, "\n[power]\ninterval = \"200ms\"\n");
    {
        let store = Store::open(&env.db, &wattson::store::StoreOptions::default()).unwrap();
        let cal = serde_json::json!({
            "source": "rapl/package-0", "intercept_w": 31.5, "slope": 1.2, "r2": 0.998,
            "rms_error_w": 0.6, "levels": 4, "estimate": true
        });
        store
            .conn()
            .execute(
                "INSERT INTO calibration (host, source, fit, created_ms) VALUES (?1, 'rapl/package-0', ?2, 1)",
                [wattson_tests::HOST, &cal.to_string()],
            )
            .unwrap();
    }
    let mut daemon = Child::run_daemon(&config, &[]);
    let (watts, error) =
        daemon.wait_for("an estimated wall sample", Duration::from_secs(60), || {
            let points = |channel: &str| {
                let store = wattson_tests::open_db(&env.db)?;
                let filter = wattson::store::SeriesFilter::all()
                    .host(wattson_tests::HOST)
                    .source(&"estimate:wall".into())
                    .metric(wattson_collectors::Metric::Power)
                    .channel(channel);
                store
                    .raw(&filter, 0, i64::MAX)
                    .ok()?
                    .into_iter()
                    .flat_map(|(_, p)| p)
                    .map(|(_, v)| v)
                    .next()
            };
            Some((points("")?, points("error")?))
        });
    daemon.signal(Signal::SIGTERM);
    assert!(daemon.wait_exit(Duration::from_secs(30)).is_some());
    assert!((watts - 31.5).abs() < 1e-9, "estimated {watts} W");
    assert!((error - 1.2).abs() < 1e-9, "error {error} W");
    assert!(
        daemon
            .stderr()
            .contains("no wall meter: estimating wall power"),
        "{}",
        daemon.stderr()
    );
    let status = wattson()
        .arg("--config")
        .arg(&config)
        .arg("status")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(
        text.contains("31.50 W estimated \u{b1} 1.20 W"),
        "status:\n{text}"
    );
}
