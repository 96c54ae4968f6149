//! What each service costs, through the real binary: `wattson run` on a fixture cgroup v2
//! tree whose `usage_usec` counters the test advances at known rates, with a simulated wall
//! meter and a stored sweep fit (idle 40 W, 15 W per busy CPU); then `wattson services`,
//! `wattson status` and every `wattson report` format. And a cgroup v1 host, and a host
//! without a sweep.

#![allow(clippy::unwrap_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use serde_json::Value;
use wattson_collectors::cgroup::fixture::FixtureTree;
use wattson_tests::http::{bound_addr, get};
use wattson_tests::{Child, HOST, TestEnv, meter_toml, simulate, wattson};

const CONTAINER: &str = "4f1c2a9b7d3e4f1c2a9b7d3e4f1c2a9b7d3e4f1c2a9b7d3e4f1c2a9b7d3e4f1c";
const PRICE: f64 = 0.30;

/// CPUs each group keeps busy: jellyfin half a CPU, the container a quarter, and a quarter
/// in the root alone (the kernel): one busy CPU in all.
const RATES: [(&str, f64); 2] = [
    ("system.slice/jellyfin.service", 0.5),
    (
        "system.slice/docker-4f1c2a9b7d3e4f1c2a9b7d3e4f1c2a9b7d3e4f1c2a9b7d3e4f1c2a9b7d3e4f1c.scope",
        0.25,
    ),
];

/// Advances every counter at its rate in 20 ms steps until `stop`.
fn advance(tree: &FixtureTree, stop: &AtomicBool) {
    let start = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let us = start.elapsed().as_micros() as f64;
        for (g, rate) in RATES {
            tree.set_usage(g, (us * rate) as u64).unwrap();
        }
        tree.set_root_usage(us as u64).unwrap();
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A stored sweep fit for host `e2e`: spin loops 40 W + 15 W per busy CPU.
fn store_sweep(db: &Path) {
    let store = wattson::store::Store::open(db, &wattson::store::StoreOptions::default()).unwrap();
    let conn = store.conn();
    conn.execute(
        "INSERT INTO configuration (name, kind, host, created_ms) VALUES ('basket', 'sweep', ?1, 0)",
        [HOST],
    )
    .unwrap();
    let fit = r#"[{"kind":"spin","loops":{"n":5,"intercept":40.0,"slope":15.0,"intercept_ci95":0.4,"slope_ci95":0.3,"r2":0.999}}]"#;
    conn.execute(
        "INSERT INTO sweep_run (configuration_id, started_ms, ended_ms, status, kinds, meter, settings, fit)
         VALUES (1, 1000, 2000, 'complete', 'spin', 'pzem004t', '{}', ?1)",
        [fit],
    )
    .unwrap();
}

struct Host {
    env: TestEnv,
    tree: FixtureTree,
    config: PathBuf,
}

fn host(v1: bool, extra: &str) -> Host {
    let env = TestEnv::new();
    let sys = env.path("sys");
    let tree = if v1 {
        FixtureTree::v1(&sys).unwrap()
    } else {
        let t = FixtureTree::v2(&sys).unwrap();
        t.debian_docker_host(CONTAINER).unwrap();
        t
    };
    let body = format!(
        "[cpu]\nenabled = false\n[power]\nrapl = false\nhwmon = false\ngpu = false\n\
         [tariff]\ncurrency = \"GBP\"\nprice_per_kwh = {PRICE}\ntimezone = \"UTC\"\n\
         [services]\ninterval = \"1s\"\n{extra}"
    );
    let config = env.config_with_roots(&sys, &env.path("proc"), &body);
    Host { env, tree, config }
}

fn cli(config: &Path, args: &[&str]) -> String {
    let out = wattson()
        .arg("--config")
        .arg(config)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "wattson {args:?}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `wattson services --json` once the daemon has created the database; `None` before.
fn services_json_when_stored(config: &Path) -> Option<Value> {
    let out = wattson()
        .arg("--config")
        .arg(config)
        .args(["services", "--json"])
        .output()
        .unwrap();
    out.status
        .success()
        .then(|| serde_json::from_slice(&out.stdout).unwrap())
}

fn group<'v>(e: &'v Value, name: &str) -> &'v Value {
    e["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == name)
        .unwrap_or_else(|| panic!("no group {name} in {e:#}"))
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn a_service_using_half_a_cpu_costs_half_the_dynamic_power_with_the_floor_apart() {
    // The meter: 55 W (40 W floor + 15 W for the one busy CPU).
    let meter = simulate("pzem004t", &[1], 55.0);
    let h = host(
        false,
        &meter_toml("wall", "pzem004t", &meter.path, "500ms", Some(1)),
    );
    let config = h.config.clone();
    store_sweep(&h.env.db);
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (tree, stop) = (h.tree.clone(), stop.clone());
        std::thread::spawn(move || advance(&tree, &stop))
    };
    let mut daemon = Child::run_daemon(&config, &[]);
    let e = daemon.wait_for(
        "eight services intervals with wall readings",
        Duration::from_secs(40),
        || {
            let e = services_json_when_stored(&config)?;
            (f(&e["metered_hours"]) * 3600.0 >= 8.0).then_some(e)
        },
    );
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    daemon.signal(Signal::SIGTERM);
    assert!(
        daemon
            .wait_exit(Duration::from_secs(10))
            .is_some_and(|s| s.success()),
        "{}",
        daemon.stderr()
    );

    assert_eq!(e["estimate"], true);
    assert_eq!(e["fit"]["kind"], "spin");
    let j = &group(&e, "jellyfin.service")["cost"];
    let (w, ci) = (f(&j["watts"]), f(&j["watts_ci95"]));
    // Half of 15 W, within its interval (half the floor's +/- 0.4 W) and the sampling of
    // the fixture's counters.
    assert!((w - 7.5).abs() <= ci + 0.3, "jellyfin {w} +/- {ci} W");
    assert!((ci - 0.2).abs() < 0.02, "interval {ci}");
    // A year on the tariff at its load by hour of the week: about W x 8760 h / 1000 (7.5 W:
    // 65.7 kWh; the hours it was sampled in weigh as they fall in the year's 365 days), at
    // the flat GBP 0.30 a kWh; a month and a day are the year's 12th and 365th.
    let (kwh, year) = (f(&j["kwh_per_year"]), f(&j["cost_per_year"]));
    assert!(
        (kwh - w * 8.76).abs() <= 0.01 * w * 8.76,
        "{kwh} kWh against {w} W"
    );
    assert!((year - kwh * PRICE).abs() < 1e-9, "{j}");
    assert!((f(&j["cost_per_month"]) - year / 12.0).abs() < 1e-9, "{j}");
    assert!((f(&j["cost_per_day"]) - year / 365.0).abs() < 1e-9, "{j}");
    let container = f(&group(&e, "docker 4f1c2a9b7d3e")["cost"]["watts"]);
    assert!((container - 3.75).abs() <= 0.3, "container {container} W");
    let groups = e["groups"].as_array().unwrap();
    let sum: f64 = groups.iter().map(|g| f(&g["cost"]["watts"])).sum();
    let dynamic = f(&e["dynamic"]["watts"]);
    assert!(
        (sum - dynamic).abs() < 1e-6,
        "shares {sum} sum to the dynamic {dynamic}"
    );
    assert!((dynamic - 15.0).abs() < 0.5, "dynamic {dynamic}");
    assert!(
        (f(&e["idle_floor"]["watts"]) - 40.0).abs() < 1e-9,
        "the floor apart"
    );
    assert!(groups.iter().all(|g| g["kind"] != "self"));
    assert!(
        e["wattson"]["cpu_hours"].is_number(),
        "wattson itself: {e:#}"
    );

    every_surface_names_the_services(&config, &e);
    the_exporter_carries_the_services(&h.env, &config, w);
}

/// `services`, `status` and every report format name the services; the JSON report's groups
/// are the estimate `e`'s.
fn every_surface_names_the_services(config: &Path, e: &Value) {
    let text = cli(config, &["services"]);
    for needle in [
        "Estimates, not measurements",
        "jellyfin.service",
        "The box being on",
        "+/-",
        "wattson itself:",
    ] {
        assert!(text.contains(needle), "{needle:?} in\n{text}");
    }
    let status = cli(config, &["status"]);
    assert!(status.contains("wattson itself:"), "{status}");
    assert!(status.contains("cgroup v2 at"), "{status}");
    for format in ["table", "markdown", "html"] {
        let report = cli(config, &["report", "--format", format]);
        assert!(
            report.contains("What each service costs"),
            "{format}:\n{report}"
        );
        assert!(report.contains("jellyfin.service"), "{format}");
        assert!(report.contains("The box being on"), "{format}");
    }
    let csv = cli(config, &["report", "--format", "csv"]);
    assert!(
        csv.lines()
            .any(|l| l.starts_with("jellyfin.service,service,service,")),
        "{csv}"
    );
    assert!(
        csv.lines()
            .any(|l| l.starts_with("the box being on,service,idle floor,40,0.4,350.4,")),
        "{csv}"
    );
    let json: Value = serde_json::from_str(&cli(config, &["report", "--format", "json"])).unwrap();
    let names = |v: &Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|g| g["name"].to_string())
            .collect()
    };
    assert_eq!(names(&json["services"]["groups"]), names(&e["groups"]));
    assert_eq!(json["services"]["estimate"], true);
}

/// The exporter carries the costliest groups (jellyfin's at `w` watts) and wattson itself,
/// from the stored hours.
fn the_exporter_carries_the_services(env: &TestEnv, config: &Path, w: f64) {
    let with_http = env.path("with-http.toml");
    let mut text = std::fs::read_to_string(config).unwrap();
    text.push_str("\n[http]\nlisten = \"127.0.0.1:0\"\n");
    std::fs::write(&with_http, text).unwrap();
    let daemon = Child::run_daemon(&with_http, &[]);
    let addr = bound_addr(&daemon);
    let series = |body: &str, family: &str, group: &str| -> Option<f64> {
        body.lines()
            .find(|line| line.starts_with(&format!("{family}{{")) && line.contains(group))
            .and_then(|line| line.rsplit(' ').next()?.parse().ok())
    };
    let body = daemon.wait_for(
        "service figures in /metrics",
        Duration::from_secs(20),
        || {
            let body = get(addr, "/metrics", &[])?.body;
            series(
                &body,
                "wattson_service_estimated_power_watts",
                "jellyfin.service",
            )
            .map(|_| body)
        },
    );
    let jellyfin_watts = series(
        &body,
        "wattson_service_estimated_power_watts",
        r#"group="jellyfin.service""#,
    )
    .unwrap();
    assert!(
        (jellyfin_watts - w).abs() < 0.5,
        "{jellyfin_watts} vs {w}\n{body}"
    );
    let share = series(
        &body,
        "wattson_service_cpu_share_ratio",
        r#"group="jellyfin.service""#,
    );
    assert!(
        share.is_some_and(|ratio| ratio > 0.0 && ratio <= 1.0),
        "{body}"
    );
    assert!(
        body.lines()
            .any(|l| l.starts_with("wattson_service_cpu_share_ratio{")
                && l.contains(r#"kind="self""#)),
        "wattson itself in\n{body}"
    );
}

#[test]
fn without_a_sweep_services_show_cpu_hours_and_say_watts_need_a_sweep() {
    let h = host(false, "");
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (tree, stop) = (h.tree.clone(), stop.clone());
        std::thread::spawn(move || advance(&tree, &stop))
    };
    let mut daemon = Child::run_daemon(&h.config, &[]);
    let e = daemon.wait_for("three services intervals", Duration::from_secs(30), || {
        let e = services_json_when_stored(&h.config)?;
        (f(&e["covered_hours"]) * 3600.0 >= 3.0).then_some(e)
    });
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    daemon.signal(Signal::SIGTERM);
    daemon.wait_exit(Duration::from_secs(10));
    let j = group(&e, "jellyfin.service");
    assert!(f(&j["cpu_hours"]) > 0.0);
    assert!((f(&j["cpu_share"]) - 0.5).abs() < 0.1, "{j}");
    assert!(j["cost"].is_null() && j["watts_now"].is_null(), "{j}");
    assert!(e["idle_floor"].is_null());
    let text = cli(&h.config, &["services"]);
    assert!(text.contains("watts need `wattson sweep`"), "{text}");
}

#[test]
fn a_cgroup_v1_host_says_per_service_cpu_time_is_unavailable_and_why() {
    let h = host(true, "");
    let mut daemon = Child::run_daemon(&h.config, &["--duration", "1s"]);
    daemon.wait_for_log("services: unavailable", Duration::from_secs(10));
    assert!(daemon.wait_exit(Duration::from_secs(10)).is_some());
    assert!(daemon.stderr().contains("cgroup v1"), "{}", daemon.stderr());
    let status = cli(&h.config, &["status"]);
    let line = status
        .lines()
        .find(|l| l.trim_start().starts_with("services"))
        .unwrap();
    assert!(
        line.contains("unavailable") && line.contains("cgroup v1"),
        "{line}"
    );
    // `services` says it never will be recorded here, why, and what would make it work.
    let text = cli(&h.config, &["services"]);
    assert!(
        text.contains("no CPU time per service is recorded on this machine, and none will be")
            && text.contains("cgroup v1")
            && text.contains("systemd.unified_cgroup_hierarchy=1"),
        "{text}"
    );
    assert!(!text.contains("recorded yet"), "{text}");
    let json: Value = serde_json::from_str(&cli(&h.config, &["services", "--json"])).unwrap();
    let warnings = json["warnings"].to_string();
    assert!(
        warnings.contains("not recorded on this machine") && warnings.contains("cgroup v1"),
        "{json}"
    );
}
