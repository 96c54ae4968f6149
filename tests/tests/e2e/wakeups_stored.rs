//! Who woke the CPUs, stored by the daemon (`[wakeups]`) and read back by `/metrics` and
//! `wattson report`, through the real binary on the home-server fixture procfs whose
//! counters a thread moves: `jellyfin.service` at 800 task wake-ups/s, `sshd.service` at
//! 200/s; the local timer at 1000 interrupts/s, `nvme0q1` at 300/s.

#![allow(clippy::unwrap_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use wattson_collectors::idle::wakeups::fixture::FixtureProc;
use wattson_tests::http::{HTTP_TOML, bound_addr, get};
use wattson_tests::idle::{advance_home_server, host_toml, intel_desktop, run_ok};
use wattson_tests::{Child, TestEnv};

/// The share of `name`'s wake-ups in a `/metrics` exposition's `kind` series.
fn metric_share(exposition: &str, kind: &str, name: &str) -> Option<f64> {
    let rows: Vec<(String, f64)> = exposition
        .lines()
        .filter(|l| l.starts_with("wattson_wakeups_per_second{"))
        .filter(|l| l.contains(&format!("kind=\"{kind}\"")))
        .filter_map(|l| {
            let (labels, value) = l.rsplit_once(' ')?;
            Some((labels.to_owned(), value.parse().ok()?))
        })
        .collect();
    let total: f64 = rows.iter().map(|r| r.1).sum();
    let mine = rows
        .iter()
        .find(|r| r.0.contains(&format!("name=\"{name}\"")))?
        .1;
    (total > 0.0).then_some(mine / total)
}

#[test]
fn the_daemon_stores_who_woke_the_cpus_for_metrics_and_the_report() {
    let env = TestEnv::new();
    let root = env.path("machine");
    intel_desktop(&root);
    let proc = FixtureProc::new(&root.join("proc")).unwrap();
    proc.add_home_server().unwrap();
    // /proc/interrupts exists before wattson first reads it, as it does on a machine.
    proc.set_interrupts(
        &[("LOC", 0), ("RES", 0)],
        &[(122, "nvme0q1", 0), (130, "enp3s0-rx-0", 0)],
    )
    .unwrap();
    let config = env.path("wattson.toml");
    std::fs::write(
        &config,
        format!(
            "{}\n[wakeups]\ninterval = \"1s\"\n\n[tariff]\ncurrency = \"GBP\"\n\
             price_per_kwh = 0.30\n{HTTP_TOML}",
            host_toml(&root, &env.db)
        ),
    )
    .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let advancer = advance_home_server(proc, stop.clone());
    let mut daemon = Child::run_daemon(&config, &[]);
    let addr = bound_addr(&daemon);
    // Three windows stored, then read by /metrics.
    let exposition = daemon.wait_for("wake-ups on /metrics", Duration::from_secs(60), || {
        let body = get(addr, "/metrics", &[])?.body;
        let share = metric_share(&body, "task", "service:jellyfin.service")?;
        (share > 0.0).then_some(body)
    });
    daemon.stop_cleanly();
    stop.store(true, Ordering::SeqCst);
    advancer.join().unwrap();

    let jellyfin = metric_share(&exposition, "task", "service:jellyfin.service").unwrap();
    let sshd = metric_share(&exposition, "task", "service:sshd.service").unwrap();
    assert!(
        (jellyfin - 0.8).abs() <= 0.1 && (sshd - 0.2).abs() <= 0.1,
        "{exposition}"
    );
    let nvme = metric_share(&exposition, "interrupt", "nvme0q1 (IRQ 122)").unwrap();
    assert!((nvme - 0.3 / 1.3).abs() <= 0.1, "{exposition}");
    assert!(
        exposition.contains("# HELP wattson_wakeups_per_second Wake-ups per second"),
        "{exposition}"
    );

    let json: serde_json::Value =
        serde_json::from_str(&run_ok(&config, &["report", "--format", "json"])).unwrap();
    let w = &json["idle"]["wakeups"];
    let services = w["by_service"]
        .as_array()
        .unwrap_or_else(|| panic!("{json}"));
    assert_eq!(services[0]["name"], "service:jellyfin.service", "{w}");
    assert!(
        (services[0]["share"].as_f64().unwrap() - 0.8).abs() <= 0.1,
        "{w}"
    );
    assert_eq!(services[1]["name"], "service:sshd.service", "{w}");
    assert!(w["seconds"].as_f64().unwrap() >= 1.0, "{w}");
    let text = run_ok(&config, &["report"]);
    assert!(text.contains("who woke the CPUs"), "{text}");
    // Its share in percent, within the same 10 points as the JSON's (a window may end between
    // the fixture's two writes of a step).
    let percent: f64 = text
        .split("service:jellyfin.service ")
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit() && c != '.').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no share of jellyfin in:\n{text}"));
    assert!((percent - 80.0).abs() <= 10.0, "{text}");
}
