//! A real Prometheus server (Debian's `prometheus` package) scraping `wattson run` with a
//! simulated meter every second: its HTTP API shows the target up, wattson's power equal to
//! the meter's watts, and `increase()` of the energy counter over a minute equal to the
//! store's energy for that minute within 1 %. `promtool check metrics` finds nothing to say
//! about wattson's exposition. The shipped rules (`dashboards/prometheus-rules.yml`) pass
//! `promtool check rules` and their unit tests under `promtool test rules`, and a real
//! Prometheus evaluating them over the daemon records its meter's watts, energy and cost.
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
/// The host that remote-writes instead, and its meter's watts.
const PUSHED: &str = "pushed";
const PUSHED_WATTS: f64 = 61.5;

/// `name` on the PATH (or in /usr/sbin, /usr/bin), or `None` (a skip) where it is not
/// installed and CI is not set.
pub(crate) fn program(name: &str) -> Option<PathBuf> {
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
    start_prometheus_with(bin, dir, target, "", &[])
}

/// [`start_prometheus`] with `extra` appended to its configuration (`rule_files:`) and
/// `flags` on its command line.
fn start_prometheus_with(
    bin: &Path,
    dir: &Path,
    target: SocketAddr,
    extra: &str,
    flags: &[&str],
) -> (Child, SocketAddr) {
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
             scrape_configs:\n  - job_name: wattson\n    static_configs:\n      - targets: ['{target}']\n{extra}"
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
            .args(flags)
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
    let v = api(prom, &path)?;
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

/// The rules shipped for Prometheus (`dashboards/prometheus-rules.yml`).
fn rules_file() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../dashboards/prometheus-rules.yml")
}

/// Every rule the file defines: its `record:` and `alert:` names, in order.
fn rule_names(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            let l = l.trim_start().strip_prefix("- ")?;
            l.strip_prefix("record:")
                .or_else(|| l.strip_prefix("alert:"))
                .map(|n| n.trim().to_owned())
        })
        .collect()
}

/// A response of Prometheus' API as JSON (`get` puts a chunked body together again).
fn api(prom: SocketAddr, path: &str) -> Option<Value> {
    let r = get(prom, path, &[])?;
    if r.status != 200 {
        return None;
    }
    serde_json::from_str(&r.body).ok()
}

/// A range selector's samples (`SERIES[5m]`) at `at_s`, if it selects exactly one series.
fn samples(prom: SocketAddr, selector: &str, at_s: f64) -> Option<Vec<(f64, f64)>> {
    let path = format!(
        "/api/v1/query?query={}&time={at_s:.3}",
        form_encode(selector)
    );
    let v = api(prom, &path)?;
    let result = v["data"]["result"].as_array()?;
    if result.len() != 1 {
        return None;
    }
    result[0]["values"]
        .as_array()?
        .iter()
        .map(|p| Some((p[0].as_f64()?, p[1].as_str()?.parse().ok()?)))
        .collect()
}

fn run(cmd: &mut Command) -> (bool, String) {
    let out = cmd.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// `promtool check rules` passes the shipped rules file and counts every rule in it, and
/// `promtool test rules` runs its unit tests (`dashboards/prometheus-rules.test.yml`:
/// synthetic hosts, scraped and remote-written, through every recording rule, and every
/// alert firing with its rendered annotations, or holding back where it must).
#[test]
fn promtool_checks_the_rules_and_passes_their_unit_tests() {
    let Some(promtool) = program("promtool") else {
        return;
    };
    let rules = rules_file();
    let names = rule_names(&std::fs::read_to_string(&rules).unwrap());
    let (ok, out) = run(Command::new(&promtool).args(["check", "rules"]).arg(&rules));
    assert!(ok, "promtool check rules: {out}");
    assert!(
        out.contains(&format!("SUCCESS: {} rules found", names.len())),
        "{names:?}: {out}"
    );
    let (ok, out) = run(Command::new(&promtool)
        .args(["test", "rules"])
        .arg(rules.with_file_name("prometheus-rules.test.yml")));
    assert!(ok && out.contains("SUCCESS"), "promtool test rules: {out}");
}

/// A real Prometheus loads the shipped rules (`rule_files:`) and evaluates them every second
/// over two `wattson run` daemons with simulated meters, one it scrapes and one that
/// remote-writes into it: every rule of the file healthy; for each host the 5-minute mean
/// power its meter's watts and the hour's energy its counter's increase (within Prometheus'
/// extrapolation at the window's edges), that the store's energy over the same time and the
/// meter's watts times it (within 1 %); the scraped host's day's cost that energy at the
/// tariff's price; every fleet panel of the Grafana dashboard finding the hosts in what they
/// recorded, and no alert pending or firing for healthy hosts.
#[test]
fn prometheus_evaluates_the_shipped_rules_over_a_scraped_and_a_remote_writing_host() {
    let Some(prometheus) = program("prometheus") else {
        return;
    };
    let env = TestEnv::new();
    let HttpDaemon {
        meter: _meter,
        daemon,
        addr: target,
        ..
    } = HttpDaemon::start(&env, HOST, WATTS);
    let rules = rules_file();
    let mut names = rule_names(&std::fs::read_to_string(&rules).unwrap());
    assert!(names.len() >= 9, "{names:?}");
    let (_prom, prom) = start_prometheus_with(
        &prometheus,
        env.dir.path(),
        target,
        &format!("rule_files:\n  - '{}'\n", rules.display()),
        &["--web.enable-remote-write-receiver"],
    );
    // The host Prometheus does not scrape: it remote-writes its samples every second.
    let pushed_env = TestEnv::new();
    let pushed_meter = wattson_tests::simulate("pzem004t", &[1], PUSHED_WATTS);
    let pushed_config = wattson_tests::ledger::config_for(
        pushed_env.dir.path(),
        PUSHED,
        &pushed_env.db,
        &format!(
            "{}\n[prometheus]\nremote_write = \"http://{prom}/api/v1/write\"\nremote_write_interval = \"1s\"\n",
            wattson_tests::ledger::meter_toml(&pushed_meter.path, "250ms"),
        ),
    );
    let pushed = Child::run_daemon(&pushed_config, &[]);

    // Every rule loaded and evaluated without an error.
    let loaded = evaluated_rules(&daemon, prom);
    assert!(
        loaded.iter().all(|(_, h, e)| h == "ok" && e.is_empty()),
        "{loaded:?}"
    );
    let mut loaded: Vec<String> = loaded.into_iter().map(|(n, ..)| n).collect();
    loaded.sort();
    names.sort();
    assert_eq!(loaded, names);

    // The mean wall power over 5 minutes: each meter's watts.
    for (host, watts) in [(HOST, WATTS), (PUSHED, PUSHED_WATTS)] {
        let mean = daemon.wait_for("the recorded mean power", Duration::from_secs(60), || {
            query(
                prom,
                &format!("host:wattson_power_watts:avg5m{{host=\"{host}\"}}"),
                None,
            )
        });
        assert!(
            (mean - watts).abs() <= 1e-9 * watts,
            "{host}: {mean} W for {watts} W"
        );
    }

    // The hour's energy: a scrape may be in flight while the rule runs (its sample then
    // lands just before the evaluation's time, one interval late); the pushed host's
    // samples arrive after they are stored, up to a few seconds late.
    let at_s = check_recorded_energy(&daemon, prom, HOST, WATTS, &env.db, 1.0);
    let pushed_at_s =
        check_recorded_energy(&pushed, prom, PUSHED, PUSHED_WATTS, &pushed_env.db, 5.0);

    // The day's cost, from the same evaluation: the day's energy at the tariff's price.
    let day_kwh = query(
        prom,
        &format!("host:wattson_energy_kwh:increase1d{{host=\"{HOST}\"}}"),
        Some(at_s),
    )
    .unwrap();
    let cost = query(
        prom,
        &format!("host_currency:wattson_cost:increase1d{{host=\"{HOST}\",currency=\"GBP\"}}"),
        Some(at_s),
    )
    .unwrap();
    let price = wattson_tests::ledger::PRICE;
    assert!(
        day_kwh > 0.0 && (cost - day_kwh * price).abs() <= 0.01 * day_kwh * price,
        "GBP {cost} for {day_kwh} kWh at {price} a kWh"
    );

    // Each fleet panel of the Grafana dashboard finds the hosts in what the rules recorded:
    // both in power and energy, the scraped one in cost (remote write carries no cost).
    for (expr, mut hosts) in fleet_panels(prom, pushed_at_s) {
        hosts.sort();
        if expr.contains("cost") {
            assert_eq!(hosts, [HOST], "{expr}");
        } else {
            assert_eq!(hosts, [PUSHED, HOST], "{expr}");
        }
    }

    // Healthy hosts with meters that answer raise nothing.
    let alerts = api(prom, "/api/v1/alerts").unwrap();
    assert_eq!(alerts["data"]["alerts"], serde_json::json!([]), "{alerts}");
    drop(pushed_meter);
}

/// `host:wattson_energy_kwh:increase1h` for `host` as the rule recorded it at its latest
/// evaluation once `host`'s counter spans half a minute in Prometheus, against the counter's
/// samples up to that evaluation (of which those up to `late_s` old may have arrived after
/// it), the store's energy over them and the meter's `watts` times their span; the
/// evaluation's time.
fn check_recorded_energy(
    daemon: &Child,
    prom: SocketAddr,
    host: &str,
    watts: f64,
    db: &Path,
    late_s: f64,
) -> f64 {
    let counter = format!("wattson_energy_joules_total{{host=\"{host}\",source=\"meter:wall\"}}");
    let first_s = daemon.wait_for("the energy counter", Duration::from_secs(60), || {
        let now_s = now_ms() as f64 / 1000.0;
        Some(samples(prom, &format!("{counter}[1h]"), now_s)?.first()?.0)
    });
    let (at_s, kwh) = daemon.wait_for(
        "half a minute of recorded energy",
        Duration::from_secs(120),
        || {
            let now_s = now_ms() as f64 / 1000.0;
            if now_s < first_s + 32.0 {
                return None;
            }
            let selector = format!("host:wattson_energy_kwh:increase1h{{host=\"{host}\"}}[5s]");
            samples(prom, &selector, now_s)?.last().copied()
        },
    );
    let seen = samples(prom, &format!("{counter}[1h]"), at_s).unwrap();
    let (&(t0, e0), &(t1, e1)) = (seen.first().unwrap(), seen.last().unwrap());
    let span = t1 - t0;
    let interval = span / (seen.len() - 1) as f64;
    let raw_j = e1 - e0;
    let recorded_j = kwh * 3.6e6;
    assert!(span >= 30.0, "{host}: {seen:?}");
    // increase() extrapolates past the first and last samples by at most half an
    // interval and to the evaluation's time (up to 1.1 intervals); never below the samples
    // it read.
    assert!(
        recorded_j >= (raw_j - watts * late_s) * (1.0 - 1e-9)
            && recorded_j <= raw_j * (span + 2.0 * interval) / span * (1.0 + 1e-9),
        "{host}: recorded {recorded_j} J at {at_s}; the counter rose {raw_j} J over {span} s"
    );
    let store = open_db(db).unwrap();
    let stored_j = wattson::ledger::energy::energy(
        &store,
        host,
        &"meter:wall".into(),
        (t0 * 1000.0).round() as i64,
        (t1 * 1000.0).round() as i64,
    )
    .unwrap()
    .wh * 3600.0;
    assert!(
        (raw_j - stored_j).abs() <= 0.01 * stored_j,
        "{host}: Prometheus' counter rose {raw_j} J from {t0} to {t1}; the store: {stored_j} J"
    );
    assert!(
        (raw_j - watts * span).abs() <= 0.01 * watts * span,
        "{host}: {raw_j} J in {span} s at {watts} W"
    );
    at_s
}

/// Every rule Prometheus loaded, once each has been evaluated: its name, health and last
/// error.
fn evaluated_rules(daemon: &Child, prom: SocketAddr) -> Vec<(String, String, String)> {
    daemon.wait_for("every rule evaluated", Duration::from_secs(60), || {
        let v = api(prom, "/api/v1/rules")?;
        let loaded: Vec<(String, String, String)> = v["data"]["groups"]
            .as_array()?
            .iter()
            .flat_map(|g| g["rules"].as_array().into_iter().flatten())
            .map(|r| {
                let s = |k: &str| r[k].as_str().unwrap_or_default().to_owned();
                (s("name"), s("health"), s("lastError"))
            })
            .collect();
        (!loaded.is_empty() && loaded.iter().all(|(_, h, _)| h != "unknown")).then_some(loaded)
    })
}

/// Each query of the Grafana dashboard that reads a recorded series (`level:wattson_...`),
/// with the hosts it finds at `at_s`.
fn fleet_panels(prom: SocketAddr, at_s: f64) -> Vec<(String, Vec<String>)> {
    let dashboard =
        std::fs::read_to_string(rules_file().with_file_name("grafana-prometheus.json")).unwrap();
    let fleet: Vec<String> = json(&dashboard)["panels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["targets"].as_array().into_iter().flatten())
        .filter_map(|t| t["expr"].as_str())
        .filter(|e| e.contains(":wattson_"))
        .map(str::to_owned)
        .collect();
    assert!(fleet.len() >= 4, "{fleet:?}");
    fleet
        .into_iter()
        .map(|expr| {
            let path = format!("/api/v1/query?query={}&time={at_s:.3}", form_encode(&expr));
            let v = api(prom, &path).unwrap();
            let hosts = v["data"]["result"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|r| r["metric"]["host"].as_str().map(str::to_owned))
                .collect();
            (expr, hosts)
        })
        .collect()
}
