//! `[http]` through the real binary: `/metrics` (Prometheus text and OpenMetrics) with the
//! meter's watts and the ledger's energy, `/healthz`, `/report.html` and `/report.json` with
//! the CLI's options, `/live.json`, read-only answers to everything else, the bound address
//! in the log and in `wattson status`, and the errors for a bad or busy `listen`.
// Test helpers fail loudly on a broken setup.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::net::SocketAddr;
use std::time::Duration;

use wattson_tests::http::{HttpDaemon, bound_addr, get, metric_value, request};
use wattson_tests::ledger::{PRICE, json, run};
use wattson_tests::{Child, TestEnv, output_within, wattson};

const HOST: &str = "web";

#[test]
fn metrics_health_and_reports_are_served_from_the_running_daemon() {
    let env = TestEnv::new();
    let HttpDaemon {
        meter: _meter,
        config,
        mut daemon,
        addr,
    } = HttpDaemon::start(&env, HOST, 123.4);

    metrics_count_the_ledger(&mut daemon, addr);

    let om = get(
        addr,
        "/metrics",
        &[("Accept", "application/openmetrics-text;version=1.0.0")],
    )
    .unwrap();
    assert!(
        om.header("content-type")
            .unwrap()
            .starts_with("application/openmetrics-text"),
        "{om:?}"
    );
    assert!(om.body.ends_with("# EOF\n"), "{}", om.body);

    let health = get(addr, "/healthz", &[]).unwrap();
    assert_eq!((health.status, health.body.as_str()), (200, "ok\n"));

    let live = json(&get(addr, "/live.json", &[]).unwrap().body);
    assert_eq!(live["power"]["watts"], 123.4, "{live}");
    assert_eq!(live["power"]["source"], "meter:wall");
    assert_eq!(live["currency"], "GBP");

    let page = get(addr, "/", &[]).unwrap();
    assert_eq!(page.status, 200);
    assert!(page.body.contains("id=\"watts\""));
    assert!(
        page.header("content-security-policy")
            .unwrap()
            .contains("default-src 'none'")
    );

    reports_answer_as_the_cli(addr);

    // `wattson status` names where the daemon serves.
    let status = run(&config, &["status"]);
    assert!(
        status.contains(&format!("http: http://{addr} ")),
        "{status}"
    );

    daemon.stop_cleanly();
}

/// `/metrics`: the meter's watts and a growing energy counter from the ledger, priced by the
/// cost counter.
fn metrics_count_the_ledger(daemon: &mut Child, addr: SocketAddr) {
    // The meter's watts and a growing energy counter, from the ledger.
    let power = r#"wattson_power_watts{host="web",source="meter:wall",channel=""}"#;
    let energy = r#"wattson_energy_joules_total{host="web",source="meter:wall"}"#;
    let first = daemon.wait_for("energy in /metrics", Duration::from_secs(30), || {
        let r = get(addr, "/metrics", &[])?;
        let e = metric_value(&r.body, energy).filter(|e| *e > 0.0)?;
        Some((r, e))
    });
    let (metrics, e0) = first;
    assert_eq!(metrics.status, 200);
    assert!(
        metrics
            .header("content-type")
            .unwrap()
            .starts_with("text/plain; version=0.0.4"),
        "{metrics:?}"
    );
    assert_eq!(metric_value(&metrics.body, power), Some(123.4));
    for line in [
        r#"wattson_voltage_volts{host="web",source="meter:wall",channel=""}"#,
        r#"wattson_cost_total{host="web",source="meter:wall",currency="GBP"}"#,
        r#"wattson_meter_frames_total{host="web",meter="wall",outcome="good"}"#,
        r#"wattson_healthy{host="web",part="store"} 1"#,
        "wattson_build_info{",
        "process_cpu_seconds_total ",
        "process_resident_memory_bytes ",
    ] {
        assert!(
            metrics.body.lines().any(|l| l.starts_with(line)),
            "no {line} in\n{}",
            metrics.body
        );
    }
    daemon.wait_for(
        "the energy counter to grow",
        Duration::from_secs(10),
        || {
            let r = get(addr, "/metrics", &[])?;
            (metric_value(&r.body, energy)? > e0).then_some(())
        },
    );
    // The cost counter prices the energy counter.
    let r = get(addr, "/metrics", &[]).unwrap();
    let (e, c) = (
        metric_value(&r.body, energy).unwrap(),
        metric_value(
            &r.body,
            r#"wattson_cost_total{host="web",source="meter:wall",currency="GBP"}"#,
        )
        .unwrap(),
    );
    assert!(
        (c - e / 3.6e6 * PRICE).abs() <= 1e-9 + 1e-6 * c,
        "cost {c} for {e} J at {PRICE}/kWh"
    );
}

/// `/report.json` and `/report.html` as the CLI makes them, with its options; a bad query
/// and an unknown path say what is wrong; nothing is written.
fn reports_answer_as_the_cli(addr: SocketAddr) {
    // The report as the CLI makes it, with its options.
    let report = get(addr, "/report.json?since=1d", &[]).unwrap();
    assert_eq!(report.status, 200, "{}", report.body);
    let report = json(&report.body);
    assert_eq!(report["currency"], "GBP", "{report}");
    let html = get(addr, "/report.html", &[]).unwrap();
    assert_eq!(html.status, 200);
    assert!(html.body.starts_with("<!DOCTYPE html>"), "{}", html.body);
    for (path, status, says) in [
        ("/report.json?since=last%20tuesday", 400, "since: "),
        (
            "/report.json?db=%2Fetc%2Fshadow",
            400,
            "unknown parameter \"db\"",
        ),
        ("/nothing-here", 404, "no page at /nothing-here"),
        // What the database does not have is the query's mistake, not the server's.
        ("/report.json?host=nobody", 400, "has nothing of that host"),
        ("/report.html?host=nobody", 400, "has nothing of that host"),
        (
            "/report.json?mode=flying",
            400,
            "no configuration has a mode named \"flying\"",
        ),
        (
            "/report.json?configs=nothing",
            400,
            "no configuration named \"nothing\"",
        ),
    ] {
        let r = get(addr, path, &[]).unwrap();
        assert_eq!(r.status, status, "{path}: {r:?}");
        assert!(r.body.contains(says), "{path}: {}", r.body);
    }
    let post = request(addr, "POST", "/metrics", &[("Content-Length", "0")]).unwrap();
    assert_eq!(post.status, 405);
    assert_eq!(post.header("allow"), Some("GET, HEAD"));
}

#[test]
fn a_listen_address_that_is_not_ip_and_port_is_refused_by_config_check_and_run() {
    let env = TestEnv::new();
    for bad in ["localhost:9877", "127.0.0.1", "[::1]", "127.0.0.1:99999"] {
        let config = env.config(&format!("\n[http]\nlisten = \"{bad}\"\n"));
        for args in [&["config", "check"][..], &["run", "--duration", "1s"][..]] {
            let mut cmd = wattson();
            cmd.arg("--config").arg(&config).args(args);
            let (code, stderr) = output_within(cmd, Duration::from_secs(20));
            assert_eq!(code, Some(78), "{bad} {args:?}: {stderr}");
            assert!(
                stderr.contains("wattson.toml:")
                    && stderr.contains("http.listen")
                    && stderr.contains(bad),
                "{bad} {args:?}: {stderr}"
            );
            if bad == "127.0.0.1:99999" {
                assert!(stderr.contains("port 99999 is beyond 65535"), "{stderr}");
            }
        }
    }
    // IPv6 and every interface are addresses like any other.
    for good in ["[::1]:9877", "0.0.0.0:9877", "[::]:0"] {
        let config = env.config(&format!("\n[http]\nlisten = \"{good}\"\n"));
        let out = run(&config, &["config", "check"]);
        assert!(out.contains(&format!("listen = \"{good}\"")), "{out}");
    }
}

#[test]
fn a_port_in_use_stops_the_start_naming_the_address_and_the_reason() {
    let env = TestEnv::new();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let config = env.config(&format!("\n[http]\nlisten = \"{addr}\"\n"));
    let mut cmd = wattson();
    cmd.arg("--config").arg(&config).args(["run"]);
    let (code, stderr) = output_within(cmd, Duration::from_secs(20));
    assert_ne!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!("http.listen {addr}: cannot listen: "))
            && stderr.contains("Address already in use")
            && stderr.contains("choose another port"),
        "{stderr}"
    );
    assert_eq!(
        stderr.matches("Address already in use").count(),
        1,
        "the reason once: {stderr}"
    );
}

#[test]
fn ipv6_loopback_is_served() {
    if std::net::TcpListener::bind("[::1]:0").is_err() {
        // No IPv6 on this machine's loopback: nothing to serve it on.
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "no IPv6 loopback under CI"
        );
        return;
    }
    let env = TestEnv::new();
    let config = env.config("\n[http]\nlisten = \"[::1]:0\"\n");
    let daemon = Child::run_daemon(&config, &[]);
    let addr = bound_addr(&daemon);
    assert!(addr.is_ipv6(), "{addr}");
    let r = get(addr, "/healthz", &[]).unwrap();
    assert_eq!(r.status, 200, "{r:?}");
}
