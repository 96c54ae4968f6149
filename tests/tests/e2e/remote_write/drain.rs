//! The backlog of an hour's outage drained into a real Prometheus: a benchmark for
//! BENCHMARKS.md, not an assertion on time.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde_json::Value;
use wattson_collectors::Metric;
use wattson_tests::http::{HTTP_TOML, bound_addr, get};
use wattson_tests::ledger::{config_for, meter_toml};
use wattson_tests::{Child, TestEnv, now_ms};

use super::{SOURCE, form_encode, prometheus_bin, start_receiver};

/// The backlog of an hour's outage at 1 Hz drained into a real Prometheus, timed (a figure
/// for BENCHMARKS.md, not an assertion on time): an hour of one host's series (the wall
/// meter's five and the CPU's busy share and frequency, overall and for four cores) stored
/// as `wattson run` stores them, then `wattson run` on that database with the receiver up.
/// `cargo build --release -p wattson && WATTSON_BIN=target/release/wattson cargo test
/// -p wattson-tests --test e2e -- --ignored remote_write::backlog_drain --nocapture`
#[test]
#[ignore = "a benchmark: prints the drain rate"]
fn backlog_drain_rate() {
    use wattson_collectors::{Sample, SourceId};
    let Some(bin) = prometheus_bin() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (_prom, addr) = start_receiver(&bin, dir.path(), None);
    let env = TestEnv::new();
    let host = "rw-drain";
    let end = now_ms() / 1000 * 1000;
    let outage_s = 3600;
    let mut options = wattson::store::StoreOptions {
        host: host.to_owned(),
        ..wattson::store::StoreOptions::default()
    };
    options.spacing_ms.insert(SOURCE.into(), 1000);
    let (store, join) = wattson::store::StoreHandle::spawn(&env.db, options).unwrap();
    let mut series: Vec<(SourceId, Metric, String, f64)> = [
        (Metric::Power, 80.0),
        (Metric::Voltage, 230.0),
        (Metric::Current, 0.35),
        (Metric::PowerFactor, 0.95),
        (Metric::Frequency, 50.0),
    ]
    .into_iter()
    .map(|(m, v)| (SOURCE.into(), m, String::new(), v))
    .collect();
    for channel in ["all", "cpu0", "cpu1", "cpu2", "cpu3"] {
        series.push((SourceId::Cpu, Metric::CpuBusy, channel.into(), 0.2));
    }
    for channel in ["mean", "cpu0", "cpu1", "cpu2", "cpu3"] {
        series.push((SourceId::Cpu, Metric::CoreFrequency, channel.into(), 2400.0));
    }
    // A minute a batch: the writer's queue never fills.
    for minute in 0..outage_s / 60 {
        let mut batch = Vec::new();
        for s in minute * 60..(minute + 1) * 60 {
            let ts = end - (outage_s - s) * 1000;
            batch.extend(series.iter().map(|(source, m, c, v)| {
                Sample::new(ts, source.clone(), *m, c.clone(), v + (s % 7) as f64 * 0.01)
            }));
        }
        store.insert(batch).unwrap();
        store.flush().unwrap();
    }
    store.close().unwrap();
    join.join().unwrap().unwrap();
    let backlog = series.len() as i64 * outage_s;

    let meter = wattson_tests::simulate("pzem004t", &[1], 80.0);
    let extra = format!(
        "{}{HTTP_TOML}\n[prometheus]\nremote_write = \"http://{addr}/api/v1/write\"\n",
        meter_toml(&meter.path, "1s")
    );
    let config = config_for(env.dir.path(), host, &env.db, &extra);
    // Timed from the exec: the daemon's start-up is in the figure.
    let started = Instant::now();
    let daemon = Child::run_daemon(&config, &[]);
    let last = format!("wattson_cpu_frequency_hertz{{host=\"{host}\",channel=\"cpu3\"}}");
    daemon.wait_for(
        "the backlog in prometheus",
        Duration::from_secs(600),
        || (raw_samples_2h(addr, &last) >= outage_s as usize).then_some(()),
    );
    let took = started.elapsed().as_secs_f64();
    let power = raw_samples_2h(addr, &format!("wattson_power_watts{{host=\"{host}\"}}"));
    // The bodies the receiver took: the hour's backlog and the few seconds since.
    let metrics = get(bound_addr(&daemon), "/metrics", &[]).unwrap().body;
    let bytes =
        wattson_tests::http::metric_value(&metrics, "wattson_remote_write_sent_bytes_total{")
            .unwrap_or(0.0);
    eprintln!(
        "backlog: {backlog} samples ({} series x {outage_s} s) drained in {took:.2} s: \
         {:.0} samples/s, {:.0}x real time; {power} power samples in prometheus; \
         {bytes:.0} bytes sent ({:.2} bytes a sample, {:.1} MB a host-day at this rate); log:\n{}",
        series.len(),
        backlog as f64 / took,
        outage_s as f64 / took,
        bytes / backlog as f64,
        bytes * 24.0 / 1e6,
        daemon.stderr()
    );
}

/// How many samples the one series `selector` picks has over the last two hours.
fn raw_samples_2h(prom: SocketAddr, selector: &str) -> usize {
    let path = format!(
        "/api/v1/query?query={}",
        form_encode(&format!("count_over_time({selector}[2h])"))
    );
    get(prom, &path, &[])
        .and_then(|r| serde_json::from_str::<Value>(&r.body).ok())
        .and_then(|v| v["data"]["result"][0]["value"][1].as_str()?.parse().ok())
        .unwrap_or(0)
}
