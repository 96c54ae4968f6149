//! One ledger, through the real binary: simulated meters at every interval, smart plugs,
//! fleet hosts, restarts and hostile input, against the truth of a constant 50 W load.
//!
//! The truth of a run is 50 W over the time the meter was sampled: from the first stored
//! sample to the last (no gaps occur in these runs unless a test makes them). Every figure
//! (`wattson status`, each `wattson report` format, the MQTT state, the fleet collector's
//! database) must give the mean power within 0.5 % and the energy within 1 % of it.
//!
//! Paths exercised: serial meters are simulated PZEM-004T on pseudo-terminals polled in real
//! time by `wattson run` at their interval; fleet hosts are those same daemons publishing
//! every 2 s or 10 s to a real broker, stored by a real `wattson collect`; smart plugs at 60 s
//! and 300 s are Tasmota messages carrying their own time (`Time` with an offset), published
//! a few per second with times 60 s or 300 s apart ending now, which `wattson run` stamps
//! with those times (they lie within an hour of their receipt: see `sources/plug.rs`).
// Test helpers fail loudly on a broken setup.
#![allow(clippy::unwrap_used, clippy::panic, clippy::missing_panics_doc)]

use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use nix::sys::signal::Signal;
use serde_json::Value;
use wattson_collectors::Metric;
use wattson_tests::broker::{Kind, Options, TestBroker, Watcher};
use wattson_tests::{Child, TestEnv, kvm_fixture, now_ms, open_db, q, wattson};

/// The constant load every simulated meter draws, W.
const WATTS: f64 = 50.0;
/// A price high enough that a minute's energy is worth cents, so "agree to the cent" says
/// something (currency per kWh).
const PRICE: f64 = 50.0;

/// A config for `host` writing `db`, with CPU telemetry off, a flat tariff in UTC, then
/// `extra`.
fn config_for(dir: &Path, host: &str, db: &Path, extra: &str) -> PathBuf {
    let root = kvm_fixture();
    let text = format!(
        "[host]\nname = {}\nsysfs = {}\nprocfs = {}\n\n[storage]\npath = {}\nflush_interval = \"200ms\"\n\n\
         [cpu]\nenabled = false\n\n[tariff]\ncurrency = \"GBP\"\nprice_per_kwh = {PRICE}\ntimezone = \"UTC\"\n{extra}",
        q(host),
        q(root.join("sys")),
        q(root.join("proc")),
        q(db)
    );
    let path = dir.join(format!("{host}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

fn mqtt_toml(broker: &TestBroker, publish: &str) -> String {
    format!(
        "\n[mqtt]\nurl = {}\npublish_interval = {}\nkeepalive = \"5s\"\n",
        q(broker.url(false)),
        q(publish)
    )
}

fn meter_toml(port: &Path, interval: &str) -> String {
    format!(
        "\n[[meter]]\nid = \"wall\"\nprotocol = \"pzem004t\"\nport = {}\naddress = 1\ninterval = {}\n",
        q(port),
        q(interval)
    )
}

/// Runs `wattson ARGS --config CONFIG` to completion; its stdout.
fn run(config: &Path, args: &[&str]) -> String {
    let out = wattson()
        .arg("--config")
        .arg(config)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "wattson {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// Stored power samples of `host`'s `source` in `db`, in time order.
fn power_points(db: &Path, host: &str, source: &str) -> Vec<(i64, f64)> {
    let Some(store) = open_db(db) else {
        return Vec::new();
    };
    let filter = wattson::store::SeriesFilter::all()
        .host(host)
        .source(source)
        .metric(Metric::Power)
        .channel("");
    let mut p: Vec<(i64, f64)> = store
        .raw(&filter, i64::MIN, i64::MAX)
        .unwrap()
        .into_iter()
        .flat_map(|(_, p)| p)
        .collect();
    p.sort_by_key(|x| x.0);
    p
}

/// The truth over the stored samples: 50 W from the first to the last, Wh.
fn truth_wh(points: &[(i64, f64)]) -> f64 {
    let span = points.last().unwrap().0 - points[0].0;
    WATTS * span as f64 / 3_600_000.0
}

fn within(what: &str, got: f64, want: f64, rel: f64) {
    assert!(
        (got - want).abs() <= rel * want.abs(),
        "{what}: {got} against the truth {want} ({:+.3} %, allowed {} %)",
        (got - want) / want * 100.0,
        rel * 100.0
    );
}

/// The first number in `text` after `after`.
fn number_after(text: &str, after: &str) -> f64 {
    let i = text
        .find(after)
        .unwrap_or_else(|| panic!("no {after:?} in:\n{text}"))
        + after.len();
    let s: String = text[i..]
        .trim_start()
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == '-')
        .collect();
    s.parse()
        .unwrap_or_else(|_| panic!("no number after {after:?}: {s:?}"))
}

/// Wh from an energy figure as the text formats print it ("833.3 Wh", "1.234 kWh").
fn energy_in(text: &str, after: &str) -> f64 {
    let v = number_after(text, after);
    let i = text.find(after).unwrap() + after.len();
    let rest = text[i..].trim_start();
    let unit = rest
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .trim_end_matches(',');
    match unit {
        "kWh" => v * 1000.0,
        "Wh" => v,
        u => panic!("unit {u:?} after {after:?} in:\n{text}"),
    }
}

/// The first line of `text` that contains `needle`.
fn line_of<'t>(text: &'t str, needle: &str) -> &'t str {
    text.lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no line with {needle:?} in:\n{text}"))
}

/// Checks every figure of `host`'s wall source (`source`) in the database `config` names
/// (or `db`) against the truth of its stored samples; returns the truth in Wh.
fn check_figures(
    config: &Path,
    db: Option<&Path>,
    host: &str,
    source: &str,
    db_path: &Path,
) -> f64 {
    let points = power_points(db_path, host, source);
    assert!(points.len() >= 3, "{host}: {} samples", points.len());
    let truth = truth_wh(&points);
    let mut args: Vec<String> = Vec::new();
    if let Some(db) = db {
        args.extend(["--db".into(), db.display().to_string()]);
    }
    args.extend(["--host".into(), host.to_owned()]);
    let a: Vec<&str> = args.iter().map(String::as_str).collect();

    // status, JSON and text.
    let mut s_args = vec!["status", "--json"];
    s_args.extend(&a);
    let status = json(&run(config, &s_args));
    let cost = &status["cost"];
    assert_eq!(cost["source"], source, "{status}");
    within(
        &format!("{host} status total kWh"),
        cost["total"]["kwh"].as_f64().unwrap() * 1000.0,
        truth,
        0.01,
    );
    within(
        &format!("{host} status today kWh"),
        cost["today"]["kwh"].as_f64().unwrap() * 1000.0,
        truth,
        0.01,
    );
    within(
        &format!("{host} status mean W"),
        cost["mean_watts"].as_f64().unwrap(),
        WATTS,
        0.005,
    );
    let mut t_args = vec!["status"];
    t_args.extend(&a);
    let text = run(config, &t_args);
    let line = line_of(&text, "today");
    within(
        &format!("{host} status text"),
        energy_in(line, "today"),
        truth,
        0.01,
    );
    within(
        &format!("{host} status text mean"),
        number_after(line, "mean"),
        WATTS,
        0.005,
    );

    // Every report format over the same window as status's "today".
    let today = chrono::Utc::now().format("%Y-%m-%d").to_string();
    let report = |format: &str| {
        let mut r = vec!["report", "--since", today.as_str(), "--format", format];
        r.extend(&a);
        run(config, &r)
    };
    let j = json(&report("json"));
    let m = &j["measured"];
    within(
        &format!("{host} report json kWh"),
        m["kwh"].as_f64().unwrap() * 1000.0,
        truth,
        0.01,
    );
    within(
        &format!("{host} report json mean"),
        m["mean_watts"].as_f64().unwrap(),
        WATTS,
        0.005,
    );
    within(
        &format!("{host} report json annual"),
        m["annual_kwh"].as_f64().unwrap(),
        WATTS * 8.76,
        0.005,
    );
    // Status and report agree to the cent on the same window.
    let cents = |x: f64| (x * 100.0).round() as i64;
    assert_eq!(
        cents(cost["today"]["cost"].as_f64().unwrap()),
        cents(m["energy_cost"].as_f64().unwrap()),
        "{host}: status {} against report {}",
        cost["today"]["cost"],
        m["energy_cost"]
    );
    assert!(cents(m["energy_cost"].as_f64().unwrap()) > 0, "{host}: {m}");
    for format in ["table", "markdown", "html"] {
        let text = report(format);
        let line = line_of(&text, "measured (");
        // "measured (SOURCE) FROM to TO: ENERGY over ..., mean W": TO ends in +00:00.
        within(
            &format!("{host} report {format} energy"),
            energy_in(line, "+00:00: "),
            truth,
            0.01,
        );
        within(
            &format!("{host} report {format} mean"),
            number_after(line, ", mean"),
            WATTS,
            0.005,
        );
    }
    let csv = report("csv");
    let row = csv
        .lines()
        .find(|l| l.contains(",measured,measured,"))
        .unwrap_or_else(|| panic!("no measured row:\n{csv}"));
    let cols: Vec<&str> = row.split(',').collect();
    within(
        &format!("{host} report csv watts"),
        cols[3].parse().unwrap(),
        WATTS,
        0.005,
    );
    within(
        &format!("{host} report csv annual kWh"),
        cols[5].parse().unwrap(),
        WATTS * 8.76,
        0.005,
    );
    truth
}

/// The states `watcher` saw from `host`, in arrival order.
fn states(watcher: &Watcher, host: &str) -> Vec<Value> {
    watcher
        .on(&format!("wattson/{host}/state"))
        .iter()
        .map(|m| serde_json::from_slice(&m.payload).unwrap())
        .collect()
}

/// The newest state of `host` that carries the ledger's energy: its power within 0.5 % and
/// its energy within 1 % of the truth up to its `energy_ts`.
fn check_state(watcher: &Watcher, host: &str, first_ms: i64) {
    let all = states(watcher, host);
    let s = all
        .iter()
        .rev()
        .find(|s| s.get("energy").is_some() && s.get("energy_ts").is_some())
        .unwrap_or_else(|| panic!("{host}: no state with energy among {all:?}"));
    within(
        &format!("{host} MQTT power"),
        s["power"].as_f64().unwrap(),
        WATTS,
        0.005,
    );
    let until = s["energy_ts"].as_i64().unwrap();
    let truth = WATTS * (until - first_ms) as f64 / 3_600_000.0;
    within(
        &format!("{host} MQTT energy"),
        s["energy"].as_f64().unwrap() * 1000.0,
        truth,
        0.01,
    );
    assert!(s["cost_total"].as_f64().unwrap() > 0.0, "{s}");
}

/// Simulated meters at 250 ms, 1 s, 2 s, 5 s and 10 s (each its own `wattson run`, host and
/// database), publishing every 2 s or 10 s to a broker that one `wattson collect` stores:
/// every figure of each, in its own database and in the collector's, is the truth.
#[test]
fn meters_at_every_interval_and_their_fleet_states_report_the_truth() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _rt = rt.enter();
    let broker = TestBroker::start(Kind::Rumqttd, &Options::default());
    let watcher = Watcher::start(broker.port, "ledger-watch", &["wattson/+/state"]);
    let dir = tempfile::tempdir().unwrap();
    let cdb = dir.path().join("collector.db");
    let cconf = config_for(dir.path(), "collector", &cdb, &mqtt_toml(&broker, "10s"));
    let mut collect = {
        let mut c = wattson();
        c.arg("--config").arg(&cconf).arg("collect");
        Child::spawn(c)
    };
    collect.wait_for_log("collector connected", Duration::from_secs(20));
    let runs = [
        ("250ms", "2s"),
        ("1s", "2s"),
        ("2s", "2s"),
        ("5s", "10s"),
        ("10s", "10s"),
    ];
    let mut daemons = Vec::new();
    for (interval, publish) in runs {
        let host = format!("e2e-{interval}");
        let sim = wattson_tests::simulate("pzem004t", &[1], WATTS);
        let db = dir.path().join(format!("{host}.db"));
        let extra = meter_toml(&sim.path, interval) + &mqtt_toml(&broker, publish);
        let config = config_for(dir.path(), &host, &db, &extra);
        let child = Child::run_daemon(&config, &[]);
        daemons.push((host, sim, db, config, child));
    }
    // Until every meter has been sampled over 55 s (six intervals of the 10 s meter).
    wattson_tests::wait_for(
        "55 s of samples from every meter",
        Duration::from_secs(180),
        || {
            daemons
                .iter()
                .all(|(host, _, db, _, _)| {
                    let p = power_points(db, host, "meter:wall");
                    p.len() >= 2 && p[p.len() - 1].0 - p[0].0 >= 55_000
                })
                .then_some(())
        },
    );
    for (_, _, _, _, child) in &mut daemons {
        child.signal(Signal::SIGTERM);
        let status = child.wait_exit(Duration::from_secs(15)).unwrap();
        assert_eq!(status.code(), Some(0), "stderr:\n{}", child.stderr());
    }
    // The collector holds every host's last state.
    collect.wait_for(
        "every host's last state in the collector",
        Duration::from_secs(20),
        || {
            daemons
                .iter()
                .all(|(host, ..)| {
                    let last = states(&watcher, host).last().and_then(|s| s["ts"].as_i64());
                    let stored = power_points(&cdb, host, "meter:wall");
                    last.is_some() && stored.last().map(|p| p.0) == last
                })
                .then_some(())
        },
    );
    collect.signal(Signal::SIGTERM);
    assert!(collect.wait_exit(Duration::from_secs(10)).is_some());

    for (host, _, db, config, _) in &daemons {
        let truth = check_figures(config, None, host, "meter:wall", db);
        let first = power_points(db, host, "meter:wall")[0].0;
        check_state(&watcher, host, first);
        let fleet = check_figures(&cconf, Some(&cdb), host, "meter:wall", &cdb);
        eprintln!(
            "{host}: truth {truth:.4} Wh in its own database, {fleet:.4} Wh in the collector's"
        );
    }
}

/// Publishes `payloads` as Tasmota telemetry on `topic`, `pace` apart.
async fn publish(port: u16, id: &str, topic: &str, payloads: Vec<String>, pace: Duration) {
    let mut opts = rumqttc::MqttOptions::new(id, "127.0.0.1", port);
    opts.set_keep_alive(Duration::from_secs(5));
    let (client, mut el) = rumqttc::AsyncClient::new(opts, 64);
    let poller = tokio::spawn(async move { while el.poll().await.is_ok() {} });
    for p in payloads {
        client
            .publish(topic, rumqttc::QoS::AtLeastOnce, false, p)
            .await
            .unwrap();
        tokio::time::sleep(pace).await;
    }
    let _ = client.disconnect().await;
    let _ = tokio::time::timeout(Duration::from_secs(2), poller).await;
}

/// A Tasmota SENSOR payload taken at `ts` (UTC ms, with its offset) at 50 W, its `Total`
/// counter at `kwh` (to 5 decimals: Tasmota's `EnergyRes 5`).
fn tasmota(ts: i64, kwh: f64) -> String {
    let t = chrono::DateTime::from_timestamp_millis(ts)
        .unwrap()
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, false);
    format!(
        r#"{{"Time":"{t}","ENERGY":{{"Total":{kwh:.5},"Power":{WATTS},"Voltage":231,"Current":0.24,"Factor":0.9}}}}"#
    )
}

/// Smart plugs reporting every 60 s and every 300 s (Tasmota's default TelePeriod): every
/// figure is the truth. The readings carry their own time (see the module documentation).
#[test]
fn smart_plugs_at_60_and_300_s_report_the_truth() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _rt = rt.enter();
    let broker = TestBroker::start(Kind::Rumqttd, &Options::default());
    let watcher = Watcher::start(broker.port, "plug-watch", &["wattson/+/state"]);
    let dir = tempfile::tempdir().unwrap();
    for (period_s, count) in [(60_i64, 30_i64), (300, 11)] {
        let host = format!("e2e-plug{period_s}");
        let db = dir.path().join(format!("{host}.db"));
        let extra = format!(
            "{}\n[[plug]]\nid = \"plug\"\nkind = \"tasmota\"\ntopic = {}\n",
            mqtt_toml(&broker, "1s"),
            q(&host)
        );
        let config = config_for(dir.path(), &host, &db, &extra);
        let mut daemon = Child::run_daemon(&config, &[]);
        let topic = format!("tele/{host}/SENSOR");
        // `count` readings `period_s` apart ending a period ago, the oldest within the hour a
        // plug's own time is trusted; then one more, now, as the plug's next report.
        let now = now_ms();
        let first = now - count * period_s * 1000;
        let reading = |k: i64| {
            let ts = first + k * period_s * 1000;
            tasmota(ts, 1.0 + WATTS * (ts - first) as f64 / 3_600_000.0 / 1000.0)
        };
        daemon.wait_for_log("plugs: subscribed", Duration::from_secs(20));
        let send = |from: i64, to: i64| {
            rt.block_on(publish(
                broker.port,
                &format!("{host}-plug-{from}"),
                &topic,
                (from..to).map(reading).collect(),
                Duration::from_millis(150),
            ));
        };
        send(0, count);
        daemon.wait_for("the readings stored", Duration::from_secs(20), || {
            (power_points(&db, &host, "meter:plug").len() as i64 == count).then_some(())
        });
        // A state goes out when a report arrives, with the energy stored by then.
        let stored = power_points(&db, &host, "meter:plug").last().unwrap().0;
        send(count, count + 1);
        daemon.wait_for(
            "a state counting the readings",
            Duration::from_secs(20),
            || {
                states(&watcher, &host)
                    .iter()
                    .any(|s| s["energy_ts"].as_i64() >= Some(stored))
                    .then_some(())
            },
        );
        daemon.signal(Signal::SIGTERM);
        assert_eq!(
            daemon.wait_exit(Duration::from_secs(10)).unwrap().code(),
            Some(0)
        );
        let truth = check_figures(&config, None, &host, "meter:plug", &db);
        within(
            &format!("{host} truth"),
            truth,
            WATTS * (count * period_s) as f64 / 3600.0,
            1e-9,
        );
        check_state(&watcher, &host, first);
        let status = json(&run(&config, &["status", "--json"]));
        // The plug's own counter agrees with the integral.
        let counter = status["counter_today"]["counter_wh"].as_f64().unwrap();
        within(&format!("{host} counter"), counter, truth, 0.01);
    }
}

/// Three restarts in a run: Home Assistant's `energy` never goes down, each downtime is a
/// gap, and the energy elsewhere is continuous. Time is compressed to seconds: a run of
/// about 40 s with three stops of about 3 s each.
#[test]
fn three_restarts_keep_energy_rising_and_store_the_downtime_as_gaps() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _rt = rt.enter();
    let broker = TestBroker::start(Kind::Rumqttd, &Options::default());
    let watcher = Watcher::start(broker.port, "restart-watch", &["wattson/+/state"]);
    let env = TestEnv::new();
    let host = "e2e-restarts";
    let sim = wattson_tests::simulate("pzem004t", &[1], WATTS);
    let extra = meter_toml(&sim.path, "1s") + &mqtt_toml(&broker, "1s");
    let config = config_for(env.dir.path(), host, &env.db, &extra);
    let mut segments: Vec<(i64, i64)> = Vec::new();
    for run in 0..4 {
        let before = power_points(&env.db, host, "meter:wall").len();
        let mut daemon = Child::run_daemon(&config, &[]);
        daemon.wait_for("eight samples of this run", Duration::from_secs(30), || {
            (power_points(&env.db, host, "meter:wall").len() >= before + 8).then_some(())
        });
        daemon.signal(Signal::SIGTERM);
        assert_eq!(
            daemon.wait_exit(Duration::from_secs(10)).unwrap().code(),
            Some(0)
        );
        let p = power_points(&env.db, host, "meter:wall");
        segments.push((p[before].0, p[p.len() - 1].0));
        if run < 3 {
            // The downtime (a scenario, not a synchronisation).
            std::thread::sleep(Duration::from_secs(3));
        }
    }
    let energies: Vec<f64> = states(&watcher, host)
        .iter()
        .filter_map(|s| s["energy"].as_f64())
        .collect();
    assert!(energies.len() >= 8, "{energies:?}");
    assert!(
        energies.windows(2).all(|w| w[1] >= w[0]),
        "Home Assistant's energy went down: {energies:?}"
    );
    let store = open_db(&env.db).unwrap();
    let gaps: Vec<_> = store
        .gaps(host, 0, i64::MAX)
        .unwrap()
        .into_iter()
        .filter(|g| g.reason == "wattson was not running")
        .collect();
    assert_eq!(gaps.len(), 3, "{gaps:?}");
    for (g, w) in gaps.iter().zip(segments.windows(2)) {
        assert_eq!(
            g.start_ms, w[0].1,
            "the gap starts at the last sample before the stop"
        );
        assert!(
            g.end_ms <= w[1].0 && w[1].0 - g.end_ms < 3000,
            "{g:?} {w:?}"
        );
    }
    let e = wattson::ledger::energy::energy(&store, host, "meter:wall", 0, i64::MAX).unwrap();
    let covered: i64 = segments.iter().map(|(a, b)| b - a).sum();
    assert_eq!(
        e.covered_ms, covered,
        "continuous within each run, nothing across a stop"
    );
    within(
        "energy over the runs",
        e.wh,
        WATTS * covered as f64 / 3_600_000.0,
        0.01,
    );
    let last = energies[energies.len() - 1] * 1000.0;
    assert!(
        last <= e.wh + 1e-6 && last > 0.9 * e.wh,
        "{last} against {}",
        e.wh
    );
}

/// A PZEM-004T at address 1 on a pseudo-terminal that answers its `n`th read request with
/// `reply(n)`: any register values, CRC-valid.
struct CraftedPzem {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for CraftedPzem {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// PZEM-004T input registers 0..10 for 230 V, `watts`, `energy_wh`, and raw frequency (0.1
/// Hz) and power factor (0.01) registers, as a reply frame.
fn pzem_frame(watts: f64, energy_wh: u32, freq_raw: u16, pf_raw: u16) -> Vec<u8> {
    let p = (watts * 10.0).round() as u32;
    let i = (watts / 230.0 * 1000.0).round() as u32;
    let regs: [u16; 10] = [
        2300,
        (i & 0xFFFF) as u16,
        (i >> 16) as u16,
        (p & 0xFFFF) as u16,
        (p >> 16) as u16,
        (energy_wh & 0xFFFF) as u16,
        (energy_wh >> 16) as u16,
        freq_raw,
        pf_raw,
        0,
    ];
    let data: Vec<u8> = regs.iter().flat_map(|r| r.to_be_bytes()).collect();
    wattson_collectors::meter::modbus::registers_reply(1, 4, &data)
}

fn crafted_pzem(mut reply: impl FnMut(u64) -> Vec<u8> + Send + 'static) -> CraftedPzem {
    use serialport::SerialPort as _;
    let (mut master, slave) = wattson::sources::meters::pty_pair().unwrap();
    master.set_timeout(Duration::from_millis(50)).unwrap();
    let path = PathBuf::from(slave.name().unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let thread = std::thread::spawn(move || {
        let _slave = slave;
        let mut pending = Vec::new();
        let mut n = 0;
        let mut buf = [0u8; 64];
        while !stop2.load(Ordering::SeqCst) {
            if let Ok(k) = master.read(&mut buf) {
                pending.extend_from_slice(&buf[..k]);
            }
            // A read request is 8 bytes.
            while pending.len() >= 8 {
                pending.drain(..8);
                let _ = master.write_all(&reply(n));
                n += 1;
            }
        }
    });
    CraftedPzem {
        path,
        stop,
        thread: Some(thread),
    }
}

/// `wattson run` on a crafted PZEM polled every 250 ms until `polls` readings were tried;
/// returns the config and the daemon's stderr.
fn run_crafted(env: &TestEnv, host: &str, pzem: &CraftedPzem, stored: usize) -> PathBuf {
    let config = config_for(
        env.dir.path(),
        host,
        &env.db,
        &meter_toml(&pzem.path, "250ms"),
    );
    let mut daemon = Child::run_daemon(&config, &[]);
    daemon.wait_for("readings stored", Duration::from_secs(30), || {
        (power_points(&env.db, host, "meter:wall").len() >= stored).then_some(())
    });
    daemon.signal(Signal::SIGTERM);
    assert_eq!(
        daemon.wait_exit(Duration::from_secs(10)).unwrap().code(),
        Some(0),
        "{}",
        daemon.stderr()
    );
    config
}

/// The monotonic counter total a daemon stored, its largest value, Wh.
fn stored_counter_total(db: &Path, host: &str) -> f64 {
    let store = open_db(db).unwrap();
    let filter = wattson::store::SeriesFilter::all()
        .host(host)
        .source("meter:wall")
        .metric(Metric::EnergyTotal);
    store
        .raw(&filter, i64::MIN, i64::MAX)
        .unwrap()
        .into_iter()
        .flat_map(|(_, p)| p)
        .map(|p| p.1)
        .fold(0.0, f64::max)
}

/// The stored energy (the ledger's and the counter's) is no more than the largest plausible
/// power over the elapsed time, and no more than the measured 50 W (plus one counter step)
/// either.
fn assert_no_energy_invented(db: &Path, host: &str) {
    let p = power_points(db, host, "meter:wall");
    let elapsed_h = (p[p.len() - 1].0 - p[0].0) as f64 / 3_600_000.0;
    let store = open_db(db).unwrap();
    let ledger = wattson::ledger::energy::total(&store, host, "meter:wall")
        .unwrap()
        .wh;
    let counter = stored_counter_total(db, host);
    for (what, wh) in [("ledger", ledger), ("counter total", counter)] {
        assert!(
            wh <= wattson_collectors::plausibility::MAX_POWER_W * elapsed_h,
            "{host}: {what} {wh} Wh in {elapsed_h} h"
        );
        assert!(
            wh <= WATTS * elapsed_h * 1.5 + 1.0,
            "{host}: {what} {wh} Wh in {elapsed_h} h at 50 W"
        );
    }
}

/// `rejected` counts of `source` in `wattson status --json`, by reason.
fn rejected(config: &Path, extra: &[&str], source: &str) -> Vec<(String, u64)> {
    let mut args = vec!["status", "--json"];
    args.extend(extra);
    let status = json(&run(config, &args));
    status["rejected"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["source"] == source)
        .flat_map(|r| r["counts"].as_array().unwrap().clone())
        .map(|c| (c[0].as_str().unwrap().to_owned(), c[1].as_u64().unwrap()))
        .collect()
}

/// Regression: a PZEM counter that stepped back by 10 Wh was taken as a reset and the
/// whole raw counter added (energy_total 0.3 -> 99,990 Wh).
#[test]
fn hostile_a_counter_stepping_back_adds_nothing() {
    let env = TestEnv::new();
    let host = "hostile-stepback";
    let pzem = crafted_pzem(|n| pzem_frame(WATTS, if n < 5 { 100_000 } else { 99_990 }, 500, 90));
    let config = run_crafted(&env, host, &pzem, 12);
    assert_no_energy_invented(&env.db, host);
    assert!(stored_counter_total(&env.db, host) < 1.0);
    assert!(
        rejected(&config, &[], "meter:wall").contains(&("energy_counter".to_owned(), 1)),
        "{:?}",
        rejected(&config, &[], "meter:wall")
    );
}

/// Regression: a counter reading 4,000,000 Wh three times became the new baseline, its
/// jump counted.
#[test]
fn hostile_a_counter_jumping_three_times_adds_nothing() {
    let env = TestEnv::new();
    let host = "hostile-jump";
    let pzem = crafted_pzem(|n| {
        pzem_frame(
            WATTS,
            if (4..7).contains(&n) { 4_000_000 } else { 1 },
            500,
            90,
        )
    });
    let config = run_crafted(&env, host, &pzem, 12);
    assert_no_energy_invented(&env.db, host);
    assert!(
        stored_counter_total(&env.db, host) <= 2.0,
        "{}",
        stored_counter_total(&env.db, host)
    );
    let r = rejected(&config, &[], "meter:wall");
    assert!(
        r.iter().any(|(why, n)| why == "energy_counter" && *n >= 1),
        "{r:?}"
    );
}

/// Regression: a power factor of 2.55 and 6553.5 Hz were stored.
#[test]
fn hostile_power_factor_and_frequency_out_of_range_are_rejected() {
    let env = TestEnv::new();
    let host = "hostile-pf";
    let pzem = crafted_pzem(|n| match n % 4 {
        1 => pzem_frame(WATTS, 10, 500, 255),
        2 => pzem_frame(WATTS, 10, 65_535, 90),
        _ => pzem_frame(WATTS, 10, 500, 90),
    });
    let config = run_crafted(&env, host, &pzem, 8);
    let store = open_db(&env.db).unwrap();
    for (metric, lo, hi) in [
        (Metric::PowerFactor, 0.0, 1.0),
        (Metric::Frequency, 40.0, 70.0),
    ] {
        let filter = wattson::store::SeriesFilter::all()
            .host(host)
            .source("meter:wall")
            .metric(metric);
        for (_, points) in store.raw(&filter, i64::MIN, i64::MAX).unwrap() {
            assert!(
                points.iter().all(|p| (lo..=hi).contains(&p.1)),
                "{metric:?}: {points:?}"
            );
        }
    }
    let r = rejected(&config, &[], "meter:wall");
    assert!(
        r.iter().any(|(why, n)| why == "power_factor" && *n >= 1),
        "{r:?}"
    );
    assert!(
        r.iter().any(|(why, n)| why == "frequency" && *n >= 1),
        "{r:?}"
    );
    assert_no_energy_invented(&env.db, host);
    let text = run(&config, &["status"]);
    assert!(
        text.contains("rejected readings") && text.contains("power factor"),
        "{text}"
    );
}

/// Regression: `{"ENERGY":{"Power":99999999,"Total":100}}` from a smart plug was stored
/// (27.9 kWh in 20 s).
#[test]
fn hostile_plug_power_is_rejected() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _rt = rt.enter();
    let broker = TestBroker::start(Kind::Rumqttd, &Options::default());
    let env = TestEnv::new();
    let host = "hostile-plug";
    let extra = format!(
        "{}\n[[plug]]\nid = \"wall\"\nkind = \"tasmota\"\ntopic = \"hostile\"\n",
        mqtt_toml(&broker, "1s")
    );
    let config = config_for(env.dir.path(), host, &env.db, &extra);
    let mut daemon = Child::run_daemon(&config, &[]);
    let good = |kwh: f64| format!(r#"{{"ENERGY":{{"Power":{WATTS},"Total":{kwh}}}}}"#);
    daemon.wait_for_log("plugs: subscribed", Duration::from_secs(20));
    let hostile = r#"{"ENERGY":{"Power":99999999,"Total":100}}"#.to_owned();
    rt.block_on(publish(
        broker.port,
        "hostile",
        "tele/hostile/SENSOR",
        vec![good(0.1), hostile.clone(), hostile, good(0.1)],
        Duration::from_millis(1100),
    ));
    daemon.wait_for("the rejections counted", Duration::from_secs(20), || {
        rejected(&config, &[], "meter:wall")
            .contains(&("power".to_owned(), 2))
            .then_some(())
    });
    daemon.signal(Signal::SIGTERM);
    assert!(daemon.wait_exit(Duration::from_secs(10)).is_some());
    let p = power_points(&env.db, host, "meter:wall");
    assert!(p.iter().all(|x| x.1 == WATTS), "{p:?}");
    assert_no_energy_invented(&env.db, host);
}

/// Regression: fleet states with -1e12 W or 1e300 W were stored (`status` showed GBP
/// 1,152,909,004), and one state in the year 9999 made every later state of its host "not
/// after the newest stored".
#[test]
fn hostile_fleet_states_are_rejected_and_do_not_shut_out_later_ones() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _rt = rt.enter();
    let broker = TestBroker::start(Kind::Rumqttd, &Options::default());
    let dir = tempfile::tempdir().unwrap();
    let cdb = dir.path().join("collector.db");
    let cconf = config_for(dir.path(), "collector", &cdb, &mqtt_toml(&broker, "10s"));
    let mut collect = {
        let mut c = wattson();
        c.arg("--config").arg(&cconf).arg("collect");
        Child::spawn(c)
    };
    collect.wait_for_log("collector connected", Duration::from_secs(20));
    let host = "hostile-fleet";
    let state = |ts: i64, w: f64| {
        format!(r#"{{"ts":{ts},"interval_s":1,"series":[["meter:wall","power","",{w}]]}}"#)
    };
    let now = now_ms();
    let msgs = vec![
        state(now - 4000, WATTS),
        state(now - 3000, -1e12),
        state(now - 2000, 1e300),
        state(253_402_300_799_000, WATTS),
        state(now - 1000, WATTS),
        state(now, WATTS),
    ];
    rt.block_on(publish(
        broker.port,
        host,
        &format!("wattson/{host}/state"),
        msgs,
        Duration::from_millis(50),
    ));
    collect.wait_for(
        "the states after the year 9999 one",
        Duration::from_secs(20),
        || (power_points(&cdb, host, "meter:wall").last().map(|p| p.0) == Some(now)).then_some(()),
    );
    collect.signal(Signal::SIGTERM);
    assert!(collect.wait_exit(Duration::from_secs(10)).is_some());
    let p = power_points(&cdb, host, "meter:wall");
    assert_eq!(
        p,
        vec![(now - 4000, WATTS), (now - 1000, WATTS), (now, WATTS)]
    );
    let status = json(&run(
        &cconf,
        &[
            "status",
            "--json",
            "--db",
            cdb.to_str().unwrap(),
            "--host",
            host,
        ],
    ));
    let cost = status["cost"]["total"]["cost"].as_f64().unwrap();
    // 50 W for 4 s at 50 per kWh: well under a penny.
    assert!((0.0..0.01).contains(&cost), "{status}");
    let r = rejected(
        &cconf,
        &["--db", cdb.to_str().unwrap(), "--host", host],
        "meter:wall",
    );
    assert!(r.contains(&("power".to_owned(), 2)), "{r:?}");
    let t = rejected(
        &cconf,
        &["--db", cdb.to_str().unwrap(), "--host", host],
        "state",
    );
    assert!(t.contains(&("timestamp".to_owned(), 1)), "{t:?}");
}

/// Home Assistant's verdict on an entity, restated from its sources (home-assistant/core):
/// - `homeassistant/components/sensor/const.py`, `DEVICE_CLASS_STATE_CLASSES`: `energy`
///   allows `total` and `total_increasing`, `monetary` only `total`, `power` only
///   `measurement` (a sensor breaking this is logged as impossible on every state write);
/// - the recorder compiles long-term statistics only for sensors with a state class, so an
///   entity without one has none (`statistics_not_defined`);
/// - `homeassistant/components/energy/validate.py`, `_async_validate_usage_stat` (the grid
///   consumption, `stat_energy_from`): statistics defined, a numeric state that is not
///   negative (`entity_negative_state`), device class `energy`
///   (`entity_unexpected_device_class`), a unit of `UnitOfEnergy`
///   (`entity_unexpected_unit_energy`), state class `measurement`, `total` or
///   `total_increasing` (`entity_unexpected_state_class`), and `measurement` only with
///   `last_reset`; `_async_validate_cost_stat` (the "entity tracking the total costs",
///   `stat_cost`): statistics defined, and the same state classes.
mod home_assistant {
    use serde_json::Value;

    const STATE_CLASSES: [&str; 3] = ["measurement", "total", "total_increasing"];
    /// `UnitOfEnergy` (homeassistant/const.py).
    const ENERGY_UNITS: [&str; 13] = [
        "J", "kJ", "MJ", "GJ", "mWh", "Wh", "kWh", "MWh", "GWh", "TWh", "cal", "kcal", "Mcal",
    ];

    /// `DEVICE_CLASS_STATE_CLASSES` for the classes wattson uses.
    pub fn impossible(config: &Value) -> Option<String> {
        let dc = config["device_class"].as_str()?;
        let sc = config["state_class"].as_str()?;
        let allowed: &[&str] = match dc {
            "energy" => &["total", "total_increasing"],
            "monetary" => &["total"],
            "power" | "voltage" | "current" | "power_factor" | "frequency" => &["measurement"],
            _ => return None,
        };
        (!allowed.contains(&sc)).then(|| format!("state class {sc} with device class {dc}"))
    }

    fn common(config: &Value, issues: &mut Vec<&'static str>) {
        match config["state_class"].as_str() {
            None => {
                issues.push("statistics_not_defined");
                issues.push("entity_unexpected_state_class");
            }
            Some(sc) if !STATE_CLASSES.contains(&sc) => {
                issues.push("entity_unexpected_state_class");
            }
            Some("measurement") if config.get("last_reset").is_none() => {
                issues.push("entity_state_class_measurement_no_last_reset");
            }
            Some(_) => {}
        }
    }

    /// `_async_validate_usage_stat` on an energy entity with its current state.
    pub fn usage_issues(config: &Value, state: Option<f64>) -> Vec<&'static str> {
        let mut issues = Vec::new();
        match state {
            None => issues.push("entity_unavailable"),
            Some(v) if v < 0.0 => issues.push("entity_negative_state"),
            Some(_) => {}
        }
        if config["device_class"].as_str() == Some("energy") {
            let unit = config["unit_of_measurement"].as_str().unwrap_or_default();
            if !ENERGY_UNITS.contains(&unit) {
                issues.push("entity_unexpected_unit_energy");
            }
        } else {
            issues.push("entity_unexpected_device_class");
        }
        common(config, &mut issues);
        issues
    }

    /// `_async_validate_cost_stat` on a cost entity.
    pub fn cost_issues(config: &Value) -> Vec<&'static str> {
        let mut issues = Vec::new();
        common(config, &mut issues);
        issues
    }

    /// The state field a wattson entity's value template reads
    /// (`{{ value_json.FIELD | default(none) }}`).
    pub fn value(config: &Value, state: &Value) -> Option<f64> {
        let t = config["value_template"].as_str()?;
        let field = t
            .split("value_json.")
            .nth(1)?
            .split([' ', '|', '}'])
            .next()?;
        state.get(field)?.as_f64()
    }
}

/// Home Assistant's Energy dashboard validation reports no error for wattson's energy and
/// cost entities as `wattson run` announces them (and reproduces the refusal of the
/// `cost_today`/`cost_month` entities that led to `cost_total`).
#[test]
fn home_assistant_energy_validation_accepts_the_energy_and_cost_entities() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _rt = rt.enter();
    let broker = TestBroker::start(Kind::Rumqttd, &Options::default());
    let watcher = Watcher::start(broker.port, "ha", &["homeassistant/#", "wattson/+/state"]);
    let env = TestEnv::new();
    let host = "e2e-ha";
    let sim = wattson_tests::simulate("pzem004t", &[1], WATTS);
    let extra = meter_toml(&sim.path, "1s") + &mqtt_toml(&broker, "1s");
    let config = config_for(env.dir.path(), host, &env.db, &extra);
    let mut daemon = Child::run_daemon(&config, &[]);
    let topic = |object: &str| format!("homeassistant/sensor/wattson_e2e_ha/{object}/config");
    let state = daemon.wait_for(
        "the energy and cost entities",
        Duration::from_secs(30),
        || {
            let s = states(&watcher, host)
                .into_iter()
                .rev()
                .find(|s| s.get("energy").is_some() && s.get("cost_total").is_some())?;
            (watcher.last(&topic("energy")).is_some()
                && watcher.last(&topic("cost_total")).is_some())
            .then_some(s)
        },
    );
    daemon.signal(Signal::SIGTERM);
    assert!(daemon.wait_exit(Duration::from_secs(10)).is_some());
    let config_of = |object: &str| -> Value {
        serde_json::from_slice(&watcher.last(&topic(object)).unwrap().payload).unwrap()
    };
    let energy = config_of("energy");
    assert_eq!(
        home_assistant::usage_issues(&energy, home_assistant::value(&energy, &state)),
        Vec::<&str>::new(),
        "{energy}"
    );
    let cost = config_of("cost_total");
    assert_eq!(
        home_assistant::cost_issues(&cost),
        Vec::<&str>::new(),
        "{cost}"
    );
    for object in [
        "energy",
        "cost_total",
        "power",
        "energy_today",
        "cost_today",
    ] {
        let c = config_of(object);
        assert_eq!(home_assistant::impossible(&c), None, "{object}: {c}");
    }
    // What Home Assistant said of the daily cost sensors, which have no state class (and
    // keep none: their daily reset would be booked as a refund).
    let today = config_of("cost_today");
    assert_eq!(
        home_assistant::cost_issues(&today),
        ["statistics_not_defined", "entity_unexpected_state_class"]
    );
}
