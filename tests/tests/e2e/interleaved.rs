//! What users do, interleaved: the daemon reads a meter that misbehaves on a script
//! (`meter simulate --fault ... --fault-cycle`), publishes over MQTT, serves `[http]` and
//! remote-writes to a real Prometheus, while a loop runs every command that opens the
//! database (report, status, candidate add/set/remove, tariff import, calibration fit, idle,
//! services) and asks for HTTP reports and pages; then SIGKILL. Afterwards every 1 s tick
//! outside the fault windows is stored, but for the last flush interval, and the daemon never
//! held a deleted file.
//!
//! CI runs it for `SHORT_S`; `WATTSON_SOAK_S=1800 cargo test -p wattson-tests --test e2e
//! interleaved:: -- --ignored --nocapture` is the 30-minute soak (RELIABILITY.md).
// Test helpers fail loudly on a broken setup; the test prints its figures.
#![allow(clippy::unwrap_used, clippy::panic, clippy::print_stdout)]

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use wattson_collectors::Metric;
use wattson_tests::broker::{Kind, Options, TestBroker};
use wattson_tests::http::{bound_addr, get};
use wattson_tests::ledger::mqtt_toml;
use wattson_tests::{
    Child, TestEnv, host_points, meter_toml, now_ms, open_db, simulate_child, wait_for, wattson,
};

/// The CI variant's length, s.
const SHORT_S: u64 = 75;
/// The fault script, one 30 s cycle: (kind, start s, length s).
const FAULTS: [(&str, u64, u64); 3] = [
    ("exception:2", 8, 4),
    ("garbage", 16, 3),
    ("silence", 23, 4),
];
const CYCLE_S: u64 = 30;
const FLUSH_MS: i64 = 1_000;

/// Whether UTC ms `t` may lie in a fault window of the script started between `spawned`
/// and `printed`, with a second's slack either side.
fn in_fault(t: i64, spawned: i64, printed: i64) -> bool {
    let cycle = i64::try_from(CYCLE_S).unwrap() * 1000;
    FAULTS.iter().any(|(_, start, length)| {
        let (start, end) = (
            i64::try_from(*start).unwrap() * 1000,
            i64::try_from(start + length).unwrap() * 1000,
        );
        // Any cycle whose window, placed as early and as late as it can be, holds t.
        (0..=(t - spawned) / cycle + 1).any(|k| {
            let (a, b) = (spawned + k * cycle + start, printed + k * cycle + end);
            t >= a - 1_000 && t <= b + 1_000
        })
    })
}

/// What users do, in a loop for `seconds`: every command that opens the database and an
/// HTTP report or page after each; the daemon never holds a deleted file of its database.
/// Returns the commands run, those refused (how often, and the last reason), and the
/// requests made.
fn users(
    env: &TestEnv,
    config: &std::path::Path,
    addr: std::net::SocketAddr,
    pid: i32,
    seconds: u64,
) -> (usize, BTreeMap<String, (usize, String)>, usize) {
    let prices = env.path("prices.csv");
    let day = now_ms().div_euclid(86_400_000) * 86_400_000;
    let iso = |ms: i64| {
        chrono::DateTime::from_timestamp_millis(ms)
            .unwrap()
            .format("%Y-%m-%dT%H:%M:%SZ")
            .to_string()
    };
    std::fs::write(
        &prices,
        format!(
            "start,end,price_per_kwh\n{},{},0.20\n{},{},0.35\n",
            iso(day),
            iso(day + 43_200_000),
            iso(day + 43_200_000),
            iso(day + 86_400_000)
        ),
    )
    .unwrap();
    let prices = prices.display().to_string();
    let commands: Vec<Vec<&str>> = vec![
        vec!["report"],
        vec!["report", "--format", "json"],
        vec!["status"],
        vec!["status", "--json"],
        vec!["candidate", "add", "mini", "--idle", "8", "--at", "100%=30"],
        vec!["candidate", "set", "mini", "--perf-ratio", "2"],
        vec!["candidate", "remove", "mini"],
        vec!["tariff", "import", &prices, "--name", "soak"],
        vec!["calibration", "fit"],
        vec!["idle"],
        vec!["services"],
    ];
    let pages = [
        "/report.html",
        "/report.json",
        "/metrics",
        "/",
        "/live.json",
    ];
    let started = Instant::now();
    let (mut ran, mut failed, mut requests) = (0, BTreeMap::new(), 0);
    while started.elapsed() < Duration::from_secs(seconds) {
        for cmd in &commands {
            let out = wattson()
                .arg("--config")
                .arg(config)
                .args(cmd)
                .output()
                .unwrap();
            ran += 1;
            let err = String::from_utf8_lossy(&out.stderr);
            // A command may refuse (a fit with too little history); never for the store.
            assert!(
                !err.contains("disk I/O error") && !err.contains("database is locked"),
                "{cmd:?}: {err}"
            );
            if !out.status.success() {
                // The reason without the log line's time stamp and level.
                let why = err.lines().next().unwrap_or("");
                let why = why.split_once(" ERROR ").map_or(why, |(_, w)| w);
                let seen = failed
                    .entry(cmd.join(" "))
                    .or_insert((0_usize, String::new()));
                *seen = (seen.0 + 1, why.to_owned());
            }
            let page = pages[ran % pages.len()];
            let r = get(addr, page, &[]).unwrap();
            requests += 1;
            assert_eq!(r.status, 200, "{page}: {}", r.body);
            let deleted = wattson_tests::deleted_files_of(pid, &env.db);
            assert!(
                deleted.is_empty(),
                "after {cmd:?}: deleted files held {deleted:?}"
            );
            if started.elapsed() >= Duration::from_secs(seconds) {
                break;
            }
        }
    }
    (ran, failed, requests)
}

fn interleaved(seconds: u64) {
    let env = TestEnv::new();
    let broker = TestBroker::start(Kind::Rumqttd, &Options::default());
    let prometheus = super::remote_write::prometheus_bin();
    let receiver = prometheus
        .as_deref()
        .map(|bin| super::remote_write::start_receiver(bin, env.dir.path(), None));
    let mut args = Vec::new();
    for (kind, start, length) in FAULTS {
        args.push("--fault".to_owned());
        args.push(format!("{kind}@{start}s+{length}s"));
    }
    args.extend([
        "--fault-cycle".into(),
        format!("{CYCLE_S}s"),
        "--watts".into(),
        "100".into(),
    ]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let sim_config = env.config("");
    let spawned = now_ms();
    let (_sim, port) = simulate_child(&sim_config, "sdm630", &args);
    let printed = now_ms();
    let remote = receiver.as_ref().map_or_else(String::new, |(_, addr)| {
        format!(
            "\n[prometheus]\nremote_write = \"http://{addr}/api/v1/write\"\n\
             remote_write_interval = \"2s\"\n"
        )
    });
    let config = env.config(&format!(
        "{}{}discovery = true\n\n[http]\nlisten = \"127.0.0.1:0\"\n{remote}\n\
         [tariff]\nprice_per_kwh = 0.30\ncurrency = \"GBP\"\n",
        meter_toml("wall", "sdm630", &port, "1s", None),
        mqtt_toml(&broker, "2s"),
    ));
    let text = std::fs::read_to_string(&config)
        .unwrap()
        .replace("flush_interval = \"200ms\"", "flush_interval = \"1s\"");
    std::fs::write(&config, text).unwrap();
    let daemon = Child::run_daemon(&config, &[]);
    let addr = bound_addr(&daemon);
    let pid = daemon.pid().as_raw();
    let stored = || {
        open_db(&env.db).map_or_else(Vec::new, |s| {
            host_points(&s, wattson_tests::HOST, "meter:wall", Metric::Power)
        })
    };
    wait_for("the first samples stored", Duration::from_secs(20), || {
        (!stored().is_empty()).then_some(())
    });
    let (ran, failed, requests) = users(&env, &config, addr, pid, seconds);
    let killed_at = now_ms();
    daemon.signal(Signal::SIGKILL);
    drop(daemon);
    let points: BTreeSet<i64> = stored().into_iter().map(|p| p.0).collect();
    let first = *points.first().unwrap();
    // Every tick from the first stored to the kill, less the last flush interval and the
    // poll in flight, outside the fault windows.
    let expected: Vec<i64> = (first / 1000..=(killed_at - FLUSH_MS - 1_000) / 1000)
        .map(|s| s * 1000)
        .filter(|&t| !in_fault(t, spawned, printed))
        .collect();
    let lost: Vec<i64> = expected
        .iter()
        .copied()
        .filter(|t| !points.contains(t))
        .collect();
    println!(
        "interleaved, {seconds} s: {ran} commands (refused: {failed:?}), {requests} HTTP \
         requests; {} samples stored, {} ticks expected outside the fault windows, {} lost",
        points.len(),
        expected.len(),
        lost.len()
    );
    assert!(lost.is_empty(), "ticks lost outside the faults: {lost:?}");
    assert_eq!(wattson_tests::integrity_check(&env.db), "ok");
}

#[test]
fn commands_reports_and_meter_faults_interleaved_lose_no_sample() {
    interleaved(SHORT_S);
}

#[test]
#[ignore = "soak: WATTSON_SOAK_S seconds (RELIABILITY.md: 1800)"]
fn soak_commands_reports_and_meter_faults_interleaved() {
    let seconds = std::env::var("WATTSON_SOAK_S")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1800);
    interleaved(seconds);
}
