//! `wattson report --prometheus URL`: the report of a host read back from the engine remote
//! write filled, against the same report from the host's own database and from the fleet
//! collector's.

use std::net::SocketAddr;
use std::path::Path;

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::Value;

use super::Host;
use wattson_tests::ledger::{json, power_points, run};

fn moment(ms: i64) -> String {
    DateTime::<Utc>::from_timestamp_millis(ms)
        .unwrap()
        .to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// Where two JSON values differ, as `path: left != right` lines.
fn differences(path: &str, a: &Value, b: &Value, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for k in x.keys().chain(y.keys().filter(|k| !x.contains_key(*k))) {
                differences(
                    &format!("{path}.{k}"),
                    x.get(k).unwrap_or(&Value::Null),
                    y.get(k).unwrap_or(&Value::Null),
                    out,
                );
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                differences(&format!("{path}[{i}]"), p, q, out);
            }
        }
        (Value::Number(x), Value::Number(y)) => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            if (x - y).abs() > 1e-9 * x.abs().max(y.abs()).max(1.0) {
                out.push(format!("{path}: {x} != {y}"));
            }
        }
        _ if a != b => out.push(format!("{path}: {a} != {b}")),
        _ => {}
    }
}

/// The host's report over its stored samples up to `mark`, from Prometheus and from its
/// own database: the same JSON, figure for figure; the fleet collector's (states once a
/// second, means of the host's samples) the same annual cost to the cent.
pub(super) fn the_engines_report_is_the_stores(
    h: &Host,
    prom: SocketAddr,
    mark: i64,
    fleet_config: &Path,
    fleet_db: &Path,
) -> Value {
    let first = power_points(&h.env.db, &h.name, super::SOURCE)[0].0;
    let (since, until) = (moment(first), moment(mark));
    let window = [
        "report", "--format", "json", "--host", &h.name, "--since", &since, "--until", &until,
    ];
    let url = format!("http://{prom}");
    let out = wattson_tests::wattson()
        .arg("--config")
        .arg(fleet_config)
        .args(window)
        .args(["--prometheus", &url])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("series of host {} from {url}", h.name)),
        "{stderr}"
    );
    let engine = json(&String::from_utf8_lossy(&out.stdout));
    let own_db = h.env.db.to_str().unwrap();
    let own = json(&run(
        fleet_config,
        &[&window[..], &["--db", own_db]].concat(),
    ));
    // Every figure but when each was made and what the meter's own energy register says
    // (the report checks the integral against it, and counts a gap's energy by it, where
    // the database has it), which remote write does not send.
    let mut diff = Vec::new();
    differences("", &engine, &own, &mut diff);
    let unsent = |d: &str| {
        d.starts_with(".generated_at:")
            || d.starts_with(".measured.counter:")
            || (d.starts_with(".measured.gaps[") && d.contains("].counted"))
    };
    diff.retain(|d| !unsent(d));
    assert!(engine["measured"]["counter"].is_null(), "{engine}");
    assert!(
        diff.is_empty(),
        "{}: the engine's report differs from the host's own database's:\n{}",
        h.name,
        diff.join("\n")
    );
    let measured = &engine["measured"];
    assert!(measured["kwh"].as_f64().unwrap() > 0.0, "{engine}");
    let fleet_db = fleet_db.to_str().unwrap();
    let fleet = json(&run(
        fleet_config,
        &[&window[..], &["--db", fleet_db]].concat(),
    ));
    let cents = |v: &Value| (v["measured"]["annual_cost"].as_f64().unwrap() * 100.0).round();
    assert_eq!(
        cents(&engine),
        cents(&fleet),
        "{}: {engine}\n{fleet}",
        h.name
    );
    eprintln!(
        "{}: the report from Prometheus is the database's: {} kWh, {} a year",
        h.name, measured["kwh"], measured["annual_cost"]
    );
    engine
}

/// `--host a,b` reads each host: in JSON an array of their reports, the first the one asked
/// for alone over the same window; CSV, which holds one report, is refused for several.
pub(super) fn several_hosts_give_a_report_each(
    hosts: [&Host; 2],
    prom: SocketAddr,
    mark: i64,
    config: &Path,
    alone: &Value,
) {
    let first = power_points(&hosts[0].env.db, &hosts[0].name, super::SOURCE)[0].0;
    let (since, until) = (moment(first), moment(mark));
    let both = format!("{},{}", hosts[0].name, hosts[1].name);
    let url = format!("http://{prom}");
    let args = |format: &str| {
        let mut a = vec![
            "report", "--format", format, "--host", &both, "--since", &since,
        ];
        a.extend(["--until", &until, "--prometheus", &url]);
        a.into_iter().map(str::to_owned).collect::<Vec<_>>()
    };
    let reports = json(&run(
        config,
        &args("json").iter().map(String::as_str).collect::<Vec<_>>(),
    ));
    let reports = reports.as_array().expect("an array of reports");
    assert_eq!(reports.len(), 2);
    let mut diff = Vec::new();
    differences("", &reports[0], alone, &mut diff);
    diff.retain(|d| !d.starts_with(".generated_at:"));
    assert!(diff.is_empty(), "{}", diff.join("\n"));
    assert_eq!(reports[1]["host"], hosts[1].name.as_str(), "{}", reports[1]);
    let out = wattson_tests::wattson()
        .arg("--config")
        .arg(config)
        .args(args("csv"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("--format csv holds one host's report"),
        "{stderr}"
    );
}

/// A host Prometheus holds nothing of is refused, naming the hosts it does hold.
pub(super) fn a_host_the_engine_lacks_is_named_with_those_it_has(prom: SocketAddr, config: &Path) {
    let out = wattson_tests::wattson()
        .arg("--config")
        .arg(config)
        .args(["report", "--host", "rw-z", "--prometheus"])
        .arg(format!("http://{prom}"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("no wattson series of host \"rw-z\"")
            && stderr.contains("rw-a, rw-b, rw-c"),
        "{stderr}"
    );
}
