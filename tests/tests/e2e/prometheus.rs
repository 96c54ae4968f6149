//! A real Prometheus server (Debian's `prometheus` package) scraping `wattson run` with a
//! simulated meter every second: its HTTP API shows the target up, wattson's power equal to
//! the meter's watts, and `increase()` of the energy counter over a minute equal to the
//! store's energy for that minute within 1 %. `promtool check metrics` finds nothing to say
//! about wattson's exposition.
//!
//! Needs `prometheus` and `promtool` (`apt-get install prometheus`); skipped without them,
//! except under CI=true, where it fails.
// Test helpers fail loudly on a broken setup.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::fmt::Write as _;
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use wattson_tests::http::{HttpDaemon, free_port, get};
use wattson_tests::ledger::json;
use wattson_tests::{Child, TestEnv, now_ms, open_db};

const HOST: &str = "scraped";
const WATTS: f64 = 123.4;

/// `name` on the PATH (or in /usr/sbin, /usr/bin), or `None` (a skip) where it is not
/// installed and CI is not set.
fn program(name: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .chain([PathBuf::from("/usr/bin"), PathBuf::from("/usr/sbin")])
        .map(|d| d.join(name))
        .find(|p| p.is_file());
    if found.is_none() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{name} is not installed (apt-get install prometheus); CI must run this test"
        );
        eprintln!("skipped: {name} is not installed");
    }
    found
}

/// Prometheus scraping `target` every second, on a free port (another one if it is taken
/// by the time Prometheus binds it).
fn start_prometheus(bin: &Path, dir: &Path, target: SocketAddr) -> (Child, SocketAddr) {
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
             scrape_configs:\n  - job_name: wattson\n    static_configs:\n      - targets: ['{target}']\n"
        ),
    )
    .unwrap();
    for attempt in 0..5 {
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let mut cmd = Command::new(bin);
        cmd.arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join(format!("data{attempt}")).display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .stdin(Stdio::null());
        let mut child = Child::spawn(cmd);
        let up = wattson_tests::broker::wait_until(Duration::from_secs(30), || {
            child.wait_exit(Duration::ZERO).is_some()
                || get(addr, "/-/ready", &[]).is_some_and(|r| r.status == 200)
        });
        if up && child.wait_exit(Duration::ZERO).is_none() {
            return (child, addr);
        }
        assert!(
            child.stderr().contains("address already in use"),
            "prometheus did not start: {}",
            child.stderr()
        );
    }
    panic!("no free port for prometheus after 5 tries");
}

/// An instant query's single value, if it has exactly one series.
fn query(prom: SocketAddr, promql: &str, at_s: Option<f64>) -> Option<f64> {
    let mut path = format!("/api/v1/query?query={}", form_encode(promql));
    if let Some(t) = at_s {
        let _ = write!(path, "&time={t:.3}");
    }
    let r = get(prom, &path, &[])?;
    let v: Value = serde_json::from_str(&r.body).ok()?;
    let result = v["data"]["result"].as_array()?;
    if result.len() != 1 {
        return None;
    }
    result[0]["value"][1].as_str()?.parse().ok()
}

fn form_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' | b'.' | b'-' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[test]
fn prometheus_scrapes_the_meters_watts_and_the_ledgers_energy() {
    let (Some(prometheus), Some(promtool)) = (program("prometheus"), program("promtool")) else {
        return;
    };
    let env = TestEnv::new();
    let HttpDaemon {
        meter: _meter,
        daemon,
        addr: target,
        ..
    } = HttpDaemon::start(&env, HOST, WATTS);

    // promtool's lint says nothing about the exposition.
    let exposition = daemon.wait_for("energy in /metrics", Duration::from_secs(30), || {
        get(target, "/metrics", &[])
            .filter(|r| r.body.contains("wattson_energy_joules_total{"))
            .map(|r| r.body)
    });
    let mut lint = Command::new(&promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    lint.stdin
        .take()
        .unwrap()
        .write_all(exposition.as_bytes())
        .unwrap();
    let lint = lint.wait_with_output().unwrap();
    assert!(
        lint.status.success() && lint.stdout.is_empty() && lint.stderr.is_empty(),
        "promtool check metrics: {}{}\n{exposition}",
        String::from_utf8_lossy(&lint.stdout),
        String::from_utf8_lossy(&lint.stderr)
    );

    let (_prom, prom) = start_prometheus(&prometheus, env.dir.path(), target);
    daemon.wait_for("up == 1 in Prometheus", Duration::from_secs(60), || {
        (query(prom, "up{job=\"wattson\"}", None)? == 1.0).then_some(())
    });
    let power = daemon.wait_for(
        "wattson's power in Prometheus",
        Duration::from_secs(30),
        || query(prom, "wattson_power_watts{source=\"meter:wall\"}", None),
    );
    assert_eq!(power, WATTS);

    // A minute and a bit of scrapes, then the counter's increase over the last minute
    // against the store's energy for that minute.
    let scraping_from = now_ms();
    let energy = "increase(wattson_energy_joules_total{source=\"meter:wall\"}[1m])";
    let (at_ms, increase) = daemon.wait_for(
        "a minute of energy in Prometheus",
        Duration::from_secs(120),
        || {
            let at = now_ms() - 2_000;
            if at < scraping_from + 65_000 {
                return None;
            }
            Some((at, query(prom, energy, Some(at as f64 / 1000.0))?))
        },
    );
    let store = open_db(&env.db).unwrap();
    let stored =
        wattson::ledger::energy::energy(&store, HOST, &"meter:wall".into(), at_ms - 60_000, at_ms)
            .unwrap();
    let stored_j = stored.wh * 3600.0;
    assert!(
        (increase - stored_j).abs() <= 0.01 * stored_j,
        "Prometheus: {increase} J over the minute to {at_ms}; the store: {stored_j} J"
    );
    // And both are the meter's watts over a minute.
    assert!(
        (stored_j - WATTS * 60.0).abs() <= 0.01 * WATTS * 60.0,
        "the store: {stored_j} J in a minute at {WATTS} W"
    );
    let status = json(&get(prom, "/api/v1/targets", &[]).unwrap().body);
    assert_eq!(
        status["data"]["activeTargets"][0]["health"], "up",
        "{status}"
    );
}

/// The energy counter moves with every sample, not with the store's flushes (10 s by
/// default): `rate()` over 20 s of 1 s scrapes reads the meter's watts within 2 % from
/// the first full window on (it read 31.9 W for 55 W when the counter moved at flushes).
#[test]
fn the_energy_counters_rate_is_the_meters_watts_between_flushes() {
    const STEADY: f64 = 55.0;
    let Some(prometheus) = program("prometheus") else {
        return;
    };
    let env = TestEnv::new();
    let meter = wattson_tests::simulate("pzem004t", &[1], STEADY);
    let config = wattson_tests::ledger::config_for(
        env.dir.path(),
        HOST,
        &env.db,
        &format!(
            "{}{}",
            wattson_tests::ledger::meter_toml(&meter.path, "100ms"),
            wattson_tests::http::HTTP_TOML
        ),
    );
    // The store's default flush interval, not the tests' 200 ms.
    let text = std::fs::read_to_string(&config)
        .unwrap()
        .replace("flush_interval = \"200ms\"", "flush_interval = \"10s\"");
    std::fs::write(&config, text).unwrap();
    let daemon = Child::run_daemon(&config, &[]);
    let target = wattson_tests::http::bound_addr(&daemon);
    let (_prom, prom) = start_prometheus(&prometheus, env.dir.path(), target);
    let counter = "wattson_energy_joules_total{source=\"meter:wall\"}";
    let first_s = daemon.wait_for(
        "the energy counter in Prometheus",
        Duration::from_secs(60),
        || query(prom, &format!("timestamp({counter})"), None),
    );
    // Every 2 s for 30 s, once a full 20 s window of scrapes is in.
    let rate = format!("rate({counter}[20s])");
    let mut seen = Vec::new();
    for k in 0..15 {
        let at_s = first_s + 21.0 + 2.0 * f64::from(k);
        let w = daemon.wait_for("the rate at its time", Duration::from_secs(60), || {
            (now_ms() as f64 / 1000.0 > at_s + 1.5)
                .then(|| query(prom, &rate, Some(at_s)))
                .flatten()
        });
        seen.push(w);
    }
    assert!(
        seen.iter().all(|w| (w - STEADY).abs() <= 0.02 * STEADY),
        "rate over 20 s of a steady {STEADY} W meter: {seen:?}"
    );
    drop(meter);
}
