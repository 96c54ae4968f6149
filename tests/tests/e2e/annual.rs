//! One annual figure on every surface: a machine on a time-of-use tariff with an imported
//! two-tier price series, read from `status --json`, the MQTT state, `/metrics`, the live
//! page as Chromium renders it, and `report` in every format (JSON, CSV, text, `--tariffs`):
//! the same "projected as measured" annual cost to the cent, with the same basis phrase,
//! and the same cost today.

// Test helpers unwrap: a failed expectation is a panic with a message.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use wattson_tests::broker::{Kind, Options, TestBroker, Watcher};
use wattson_tests::http::{HTTP_TOML, bound_addr, get, metric_value};
use wattson_tests::ledger::{config_for, meter_toml, run};
use wattson_tests::{Child, HOST, TestEnv, now_ms, q, simulate};

/// Hourly slots from 26 h ago to 2 h ahead, the two tiers two hours each by turns: a series
/// long enough to price a year, and two prices for the figures to disagree on if they
/// price differently. The hour of now and the next one share a price, so the test's few
/// seconds never straddle a change of price, even across the top of the hour.
fn price_series(path: &Path, tiers: [f64; 2]) {
    let hour = 3_600_000;
    let first = (now_ms() / hour - 26) * hour;
    let mut csv = String::from("start,end,price_per_kwh\n");
    for i in 0..28 {
        let at = |ms: i64| {
            chrono::DateTime::from_timestamp_millis(ms)
                .unwrap()
                .format("%Y-%m-%dT%H:%M:%SZ")
                .to_string()
        };
        let from = first + i * hour;
        let price = tiers[(i - 26).div_euclid(2).rem_euclid(2) as usize];
        let _ = writeln!(csv, "{},{},{price}", at(from), at(from + hour));
    }
    std::fs::write(path, csv).unwrap();
}

fn cents(x: f64) -> i64 {
    (x * 100.0).round() as i64
}

#[test]
fn the_annual_figure_and_todays_cost_agree_on_every_surface() {
    let Some(chromium) = wattson_tests::browser::chromium() else {
        return;
    };
    every_surface(&chromium, 55.0, [0.10, 0.30]);
    // Held out: another database, another draw, other prices.
    every_surface(&chromium, 131.7, [0.0712, 0.4137]);
}

fn every_surface(chromium: &Path, watts: f64, tiers: [f64; 2]) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _rt = rt.enter();
    let broker = TestBroker::start(Kind::Rumqttd, &Options::default());
    let env = TestEnv::new();
    let meter = simulate("pzem004t", &[1], watts);
    let config = config_for(
        env.dir.path(),
        HOST,
        &env.db,
        &format!(
            "\n[[tariff.period]]\nstart = \"00:00\"\nend = \"06:00\"\nprice_per_kwh = 0.05\n\
             {}{HTTP_TOML}\n[mqtt]\nurl = {}\npublish_interval = \"300ms\"\n\n\
             [[config]]\nname = \"by hand\"\nmodes = {{ idle = 40.0, \"1 loop\" = 70.0 }}\n",
            meter_toml(&meter.path, "250ms"),
            q(broker.url(false))
        ),
    );
    let prices = env.path("prices.csv");
    price_series(&prices, tiers);
    run(
        &config,
        &[
            "tariff",
            "import",
            prices.to_str().unwrap(),
            "--name",
            "two-tier",
        ],
    );
    let watcher = Watcher::start(broker.port, "consistency", &["wattson/#"]);
    let mut daemon = Child::run_daemon(&config, &[]);
    let addr = bound_addr(&daemon);

    // The MQTT state once it carries the ledger's projection (not the current draw's).
    let topic = format!("wattson/{HOST}/state");
    let state = daemon.wait_for(
        "the projection in the MQTT state",
        Duration::from_secs(40),
        || {
            let m = watcher.last(&topic)?;
            let v: Value = serde_json::from_slice(&m.payload).ok()?;
            v["cost_annual_basis"]
                .as_str()?
                .starts_with("projected from")
                .then_some(v)
        },
    );
    let status: Value = serde_json::from_str(&run(&config, &["status", "--json"])).unwrap();
    let cost = &status["cost"];
    let annual = cost["annual_cost"].as_f64().unwrap();
    let basis = cost["annual_basis"].as_str().unwrap().to_owned();
    assert!(basis.starts_with("projected from"), "{basis}");
    // The meter draws a constant power within one price slot: every surface's projection
    // is 55 W for a year at that slot's price, whenever it was read.
    assert_eq!(
        cents(state["cost_annual_projection"].as_f64().unwrap()),
        cents(annual),
        "MQTT {state} against status {cost}"
    );
    let price = cost["annual_cost"].as_f64().unwrap() / cost["annual_kwh"].as_f64().unwrap();
    let tier = [tiers[0], tiers[1], 0.05]
        .into_iter()
        .find(|p| (p - price).abs() < 1e-6)
        .unwrap_or_else(|| panic!("priced at {price}, not a price of the hour"));
    assert_eq!(cents(annual), cents(watts * 8.76 * tier), "{cost}");
    // The price basis, worded alike everywhere (the window before it is each surface's:
    // the last 7 days live, the report's window in a report).
    let same_basis = |what: &str, text: &str| same_basis(&basis, what, text);
    same_basis(
        "the MQTT state",
        state["cost_annual_basis"].as_str().unwrap(),
    );

    let metrics = get(addr, "/metrics", &[]).unwrap().body;
    let scraped = metric_value(&metrics, "wattson_annual_cost_projection{").unwrap();
    assert_eq!(cents(scraped), cents(annual), "{metrics}");
    let today = metric_value(&metrics, "wattson_cost_today{").unwrap();
    let status_today = cost["today"]["cost"].as_f64().unwrap();
    assert!(
        (today - status_today).abs() < 0.01,
        "/metrics {today}, status {status_today}"
    );

    // The page as rendered.
    let dom = rendered_page(chromium, addr);
    let yearly = crate_money(annual);
    assert!(
        shown(&dom, "projection").contains(&yearly),
        "page shows {:?}, not {yearly}",
        shown(&dom, "projection")
    );
    same_basis("the live page", &shown(&dom, "projection-basis"));

    reports_agree(&config, annual, tier, &same_basis);

    daemon.stop_cleanly();
    drop(meter);
}

/// The words of the price basis after its window (each surface's own: the last 7 days live,
/// the report's window in a report), as `basis` has them.
fn same_basis(basis: &str, what: &str, text: &str) {
    let phrase = &basis[basis.find(", at the prices").unwrap()..];
    assert!(
        text.contains(phrase),
        "{what} words the basis otherwise:\n{text}\nnot {basis}"
    );
}

/// The live page at `addr` as Chromium renders it.
fn rendered_page(chromium: &Path, addr: std::net::SocketAddr) -> String {
    let profile = tempfile::tempdir().unwrap();
    let dom = wattson_tests::browser::headless(chromium, profile.path())
        .args(["--virtual-time-budget=5000", "--dump-dom"])
        .arg(format!("http://{addr}/"))
        .output()
        .unwrap();
    String::from_utf8_lossy(&dom.stdout).into_owned()
}

/// The text of the element `id` in `dom`.
fn shown(dom: &str, id: &str) -> String {
    dom.split(&format!("id=\"{id}\">"))
        .nth(1)
        .and_then(|r| r.split('<').next())
        .unwrap_or_default()
        .to_owned()
}

/// Every report format: the measured annual figure (`annual`, priced at `tier`) and its
/// basis.
fn reports_agree(config: &Path, annual: f64, tier: f64, same_basis: &dyn Fn(&str, &str)) {
    let yearly = crate_money(annual);
    let json: Value = serde_json::from_str(&run(config, &["report", "--format", "json"])).unwrap();
    let measured = &json["measured"];
    assert_eq!(
        cents(measured["annual_cost"].as_f64().unwrap()),
        cents(annual),
        "{measured}"
    );
    same_basis(
        "the JSON report",
        measured["annual_basis"].as_str().unwrap(),
    );
    let text = run(config, &["report"]);
    assert!(
        text.contains(&format!("{yearly} ±")) || text.contains(&format!("{yearly}/yr")),
        "{text}"
    );
    same_basis("the text report", &text);
    let csv = run(config, &["report", "--format", "csv"]);
    let row = csv
        .lines()
        .find(|l| l.split(',').nth(1) == Some("measured"))
        .unwrap_or_else(|| panic!("{csv}"));
    let cols: Vec<&str> = row.split(',').collect();
    assert_eq!(cents(cols[7].parse().unwrap()), cents(annual), "{row}");
    assert!(
        (cols[10].parse::<f64>().unwrap() - tier).abs() < 1e-6,
        "{row}"
    );
    let tariffs: Value = serde_json::from_str(&run(
        config,
        &["report", "--format", "json", "--tariffs", "current,tariff"],
    ))
    .unwrap();
    let current = &tariffs["tariffs"]["comparison"][0];
    assert_eq!(current["name"], "current", "{current}");
    assert_eq!(
        cents(current["annual_cost"].as_f64().unwrap()),
        cents(annual),
        "{current}"
    );
}

/// Money as the surfaces print it (`GBP 240.90`).
fn crate_money(x: f64) -> String {
    wattson::analysis::cost::format_money(x, "GBP")
}
