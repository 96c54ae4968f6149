//! Helpers for the ledger's end-to-end tests (`tests/e2e/ledger.rs`, `tests/e2e/hostile.rs`,
//! `tests/e2e/home_assistant.rs`): configs for a host on the KVM fixture with a flat tariff, the
//! real binary's `status` and `report` read back, stored samples, and the truth of a
//! constant load to hold every figure against.
//!
//! The truth of a run is [`WATTS`] over the time the meter was sampled: from the first
//! stored sample to the last, less the outages the database declares ([`truth_wh_in`]).
//! Units: W, Wh, UTC ms.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use wattson_collectors::Metric;

use crate::broker::{TestBroker, Watcher};
use crate::{Child, MiddayZone, kvm_fixture, open_db, q, wattson};

/// The constant load every simulated meter draws, W.
pub const WATTS: f64 = 50.0;
/// A price high enough that a minute's energy is worth cents, so "agree to the cent" says
/// something (currency per kWh).
pub const PRICE: f64 = 50.0;

/// A config for `host` writing `db`, with CPU telemetry off, a flat tariff in UTC, then
/// `extra`.
pub fn config_for(dir: &Path, host: &str, db: &Path, extra: &str) -> PathBuf {
    let root = kvm_fixture();
    let text = format!(
        "[host]\nname = {}\nsysfs = {}\nprocfs = {}\n\n[storage]\npath = {}\nflush_interval = \"200ms\"\n\n\
         [cpu]\nenabled = false\n\n[tariff]\ncurrency = \"GBP\"\nprice_per_kwh = {PRICE}\ntimezone = {}\n{extra}",
        q(host),
        q(root.join("sys")),
        q(root.join("proc")),
        q(db),
        q(MiddayZone::get().name())
    );
    let path = dir.join(format!("{host}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

pub fn mqtt_toml(broker: &TestBroker, publish: &str) -> String {
    format!(
        "\n[mqtt]\nurl = {}\npublish_interval = {}\nkeepalive = \"5s\"\n",
        q(broker.url(false)),
        q(publish)
    )
}

pub fn meter_toml(port: &Path, interval: &str) -> String {
    format!(
        "\n[[meter]]\nid = \"wall\"\nprotocol = \"pzem004t\"\nport = {}\naddress = 1\ninterval = {}\n",
        q(port),
        q(interval)
    )
}

/// A streaming meter (no address): every record between two polls counts.
pub fn streaming_meter_toml(protocol: &str, port: &Path, interval: &str) -> String {
    format!(
        "\n[[meter]]\nid = \"wall\"\nprotocol = {}\nport = {}\ninterval = {}\n",
        q(protocol),
        q(port),
        q(interval)
    )
}

/// Runs `wattson ARGS --config CONFIG` to completion; its stdout.
pub fn run(config: &Path, args: &[&str]) -> String {
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

pub fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// Stored power samples of `host`'s `source` in `db`, in time order.
pub fn power_points(db: &Path, host: &str, source: &str) -> Vec<(i64, f64)> {
    let Some(store) = open_db(db) else {
        return Vec::new();
    };
    let filter = wattson::store::SeriesFilter::all()
        .host(host)
        .source(&source.into())
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
pub fn truth_wh(points: &[(i64, f64)]) -> f64 {
    let span = points.last().unwrap().0 - points[0].0;
    WATTS * span as f64 / 3_600_000.0
}

/// [`truth_wh`] without the outages the database declares: the time between two stored
/// samples further apart than the series' spacing allows (`max_pair_ms`), or across a gap
/// recorded for the source. On a loaded machine a meter can miss polls for long enough;
/// the ledger then counts none of that time, as it promises, and neither does the truth.
pub fn truth_wh_in(db: &Path, host: &str, source: &str, points: &[(i64, f64)]) -> f64 {
    let Some(store) = open_db(db) else {
        return truth_wh(points);
    };
    let source_id: wattson_collectors::SourceId = source.into();
    let spacing = store
        .find_series(
            &wattson::store::SeriesFilter::all()
                .host(host)
                .source(&source_id)
                .metric(Metric::Power)
                .channel(""),
        )
        .ok()
        .and_then(|s| s.first().and_then(|s| s.spacing_ms));
    let gaps: Vec<(i64, i64)> = store
        .gaps(host, i64::MIN, i64::MAX)
        .unwrap_or_default()
        .into_iter()
        .filter(|g| g.source == source_id)
        .map(|g| (g.start_ms, g.end_ms))
        .collect();
    let max_pair = spacing.map_or(i64::MAX, wattson::store::integrate::max_pair_ms);
    let covered: i64 = points
        .windows(2)
        .filter(|w| wattson::store::integrate::continuous(w[0].0, w[1].0, max_pair, &gaps))
        .map(|w| w[1].0 - w[0].0)
        .sum();
    WATTS * covered as f64 / 3_600_000.0
}

pub fn within(what: &str, got: f64, want: f64, rel: f64) {
    assert!(
        (got - want).abs() <= rel * want.abs(),
        "{what}: {got} against the truth {want} ({:+.3} %, allowed {} %)",
        (got - want) / want * 100.0,
        rel * 100.0
    );
}

/// The first number in `text` after `after`.
pub fn number_after(text: &str, after: &str) -> f64 {
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
pub fn energy_in(text: &str, after: &str) -> f64 {
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
pub fn line_of<'t>(text: &'t str, needle: &str) -> &'t str {
    text.lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no line with {needle:?} in:\n{text}"))
}

/// Checks every figure of `host`'s wall source (`source`) in the database `config` names
/// (or `db`) against the truth of its stored samples; returns the truth in Wh.
pub fn check_figures(
    config: &Path,
    db: Option<&Path>,
    host: &str,
    source: &str,
    db_path: &Path,
) -> f64 {
    let points = power_points(db_path, host, source);
    assert!(points.len() >= 3, "{host}: {} samples", points.len());
    let truth = truth_wh_in(db_path, host, source, &points);
    // Outages may be left out of the truth, not most of the run.
    assert!(
        truth >= 0.8 * truth_wh(&points),
        "{host}: {truth} Wh of {} Wh covered",
        truth_wh(&points)
    );
    let mut args: Vec<String> = Vec::new();
    if let Some(db) = db {
        args.extend(["--db".into(), db.display().to_string()]);
    }
    args.extend(["--host".into(), host.to_owned()]);
    let a: Vec<&str> = args.iter().map(String::as_str).collect();

    let status = check_status(config, &a, host, source, truth);
    check_reports(config, &a, host, truth, &status["cost"]);
    truth
}

/// `status` of `host`, as JSON and as text (`a`: its arguments), against the truth in Wh
/// of its wall `source`; returns the JSON.
fn check_status(config: &Path, a: &[&str], host: &str, source: &str, truth: f64) -> Value {
    let mut s_args = vec!["status", "--json"];
    s_args.extend(a);
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
    t_args.extend(a);
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
    status
}

/// Every report format of `host` (`a`: its arguments) over the same window as status's
/// "today" against the truth in Wh, and its cost against status's `cost` to the cent.
fn check_reports(config: &Path, a: &[&str], host: &str, truth: f64, cost: &Value) {
    let today = MiddayZone::get().today();
    let report = |format: &str| {
        let mut r = vec!["report", "--since", today.as_str(), "--format", format];
        r.extend(a);
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
        // "measured (SOURCE) FROM to TO: ENERGY over ..., mean W": FROM and TO in RFC 3339
        // with the tariff zone's offset, which holds colons but no ": ".
        let window_end = &line[line.find(" to ").unwrap_or(0)..];
        within(
            &format!("{host} report {format} energy"),
            energy_in(window_end, ": "),
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
}

/// A `wattson collect` storing into `dir/collector.db`, once it has connected: the
/// database, its config and the process.
pub fn collector(dir: &Path, broker: &TestBroker) -> (PathBuf, PathBuf, Child) {
    let cdb = dir.join("collector.db");
    let cconf = config_for(dir, "collector", &cdb, &mqtt_toml(broker, "10s"));
    let mut c = wattson();
    c.arg("--config").arg(&cconf).arg("collect");
    let collect = Child::spawn(c);
    collect.wait_for_log("collector: subscribed", Duration::from_secs(20));
    (cdb, cconf, collect)
}

/// The states `watcher` saw from `host`, in arrival order.
pub fn states(watcher: &Watcher, host: &str) -> Vec<Value> {
    watcher
        .on(&format!("wattson/{host}/state"))
        .iter()
        .map(|m| serde_json::from_slice(&m.payload).unwrap())
        .collect()
}

/// The newest state of `host` that carries the ledger's energy: its power within 0.5 % and
/// its energy within 1 % of the truth up to its `energy_ts`.
pub fn check_state(watcher: &Watcher, host: &str, first_ms: i64) {
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

/// Publishes `payloads` as Tasmota telemetry on `topic`, `pace` apart.
pub async fn publish(port: u16, id: &str, topic: &str, payloads: Vec<String>, pace: Duration) {
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
pub fn tasmota(ts: i64, kwh: f64) -> String {
    tasmota_at(ts, WATTS, kwh)
}

/// [`tasmota`] at `watts` (the current is what 231 V and a power factor of 0.9 give).
pub fn tasmota_at(ts: i64, watts: f64, kwh: f64) -> String {
    let t = chrono::DateTime::from_timestamp_millis(ts)
        .unwrap()
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, false);
    let amps = watts / (231.0 * 0.9);
    format!(
        r#"{{"Time":"{t}","ENERGY":{{"Total":{kwh:.5},"Power":{watts},"Voltage":231,"Current":{amps:.3},"Factor":0.9}}}}"#
    )
}

/// `rejected` counts of `source` in `wattson status --json`, by reason.
pub fn rejected(config: &Path, extra: &[&str], source: &str) -> Vec<(String, u64)> {
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
