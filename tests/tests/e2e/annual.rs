//! One price for every watt-hour, on every surface: a steady meter on a time-of-use tariff
//! with a standing charge, the cheap rate starting mid-hour while the daemon runs, read from
//! `status --json`, the MQTT state, `/metrics`, the live page as Chromium renders it and
//! `report` (JSON and `--tariffs`): today's cost equal to the cent and to the energy priced
//! by hand when it was used; a year on the tariff equal to the cent, and to the steady
//! load's year on that tariff worked by hand; the standing charge its own figure with the
//! all-in year beside it; and all of it again after a price series is imported.
//!
//! Every surface is read once the meter has stopped answering (`STALE` in `status`), so
//! they all price the same samples, whatever instant each is read at.

// Test helpers unwrap: a failed expectation is a panic with a message.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use wattson_collectors::Metric;
use wattson_tests::broker::{Kind, Options, TestBroker, Watcher};
use wattson_tests::http::{HTTP_TOML, bound_addr, get, metric_value};
use wattson_tests::ledger::{meter_toml, run};
use wattson_tests::{
    Child, HOST, MiddayZone, TestEnv, host_points, kvm_fixture, now_ms, open_db, q, simulate,
};

const MINUTE: i64 = 60_000;
const HOUR: i64 = 3_600_000;

/// The tariff: `base` all day but for `cheap` from `start` for 6 h and `peak` for the 3 h
/// after, a standing charge of 0.50 a day.
struct Tou {
    base: f64,
    cheap: f64,
    peak: f64,
    /// UTC ms the cheap rate starts (a whole local minute, not a whole UTC hour).
    start_ms: i64,
}

impl Tou {
    fn price_at(&self, t: i64) -> f64 {
        if t < self.start_ms {
            self.base
        } else if t < self.start_ms + 6 * HOUR {
            self.cheap
        } else if t < self.start_ms + 9 * HOUR {
            self.peak
        } else {
            self.base
        }
    }

    /// A steady `watts` for 365 days: 6 h cheap, 3 h peak, 15 h base a day.
    fn year_of(&self, watts: f64) -> f64 {
        watts / 1000.0 * 365.0 * (6.0 * self.cheap + 3.0 * self.peak + 15.0 * self.base)
    }

    fn toml(&self) -> String {
        let local = |ms: i64| {
            chrono::DateTime::from_timestamp_millis(
                ms + i64::from(MiddayZone::get().offset_h) * HOUR,
            )
            .unwrap()
            .format("%H:%M")
            .to_string()
        };
        let (a, b, c) = (
            local(self.start_ms),
            local(self.start_ms + 6 * HOUR),
            local(self.start_ms + 9 * HOUR),
        );
        format!(
            "[tariff]\ncurrency = \"GBP\"\nprice_per_kwh = {}\nstanding_charge_per_day = 0.5\n\
             timezone = {}\n\n[[tariff.period]]\nstart = \"{a}\"\nend = \"{b}\"\nprice_per_kwh = {}\n\n\
             [[tariff.period]]\nstart = \"{b}\"\nend = \"{c}\"\nprice_per_kwh = {}\n",
            self.base,
            q(MiddayZone::get().name()),
            self.cheap,
            self.peak
        )
    }
}

/// The next whole minute at least 20 s away that is not a whole UTC hour: the boundary then
/// falls inside the hour the daemon starts in (or the next), where the ledger prices a
/// stretch shorter than an hour.
fn boundary_ahead() -> i64 {
    let mut t = (now_ms() + 20_000).div_euclid(MINUTE) * MINUTE + MINUTE;
    if t % HOUR == 0 {
        t += MINUTE;
    }
    t
}

fn cents(x: f64) -> i64 {
    (x * 100.0).round() as i64
}

#[test]
fn every_watt_hour_is_priced_when_it_was_used_on_every_surface() {
    let Some(chromium) = wattson_tests::browser::chromium() else {
        return;
    };
    let tou = Tou {
        base: 0.30,
        cheap: 0.10,
        peak: 0.40,
        start_ms: boundary_ahead(),
    };
    every_surface(&chromium, 2000.0, &tou, [0.10, 0.30]);
}

fn every_surface(chromium: &Path, watts: f64, tou: &Tou, tiers: [f64; 2]) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _rt = rt.enter();
    let broker = TestBroker::start(Kind::Rumqttd, &Options::default());
    let env = TestEnv::new();
    let root = kvm_fixture();
    let config = env.dir.path().join("wattson.toml");
    let write_config = |meter: &Path| {
        std::fs::write(
            &config,
            format!(
                "[host]\nname = {}\nsysfs = {}\nprocfs = {}\n\n[storage]\npath = {}\n\
                 flush_interval = \"200ms\"\n\n[cpu]\nenabled = false\n\n{}{}{HTTP_TOML}\n\
                 [mqtt]\nurl = {}\npublish_interval = \"300ms\"\n",
                q(HOST),
                q(root.join("sys")),
                q(root.join("proc")),
                q(&env.db),
                tou.toml(),
                meter_toml(meter, "250ms"),
                q(broker.url(false))
            ),
        )
        .unwrap();
    };
    let watcher = Watcher::start(broker.port, "one-price", &["wattson/#"]);
    let topic = format!("wattson/{HOST}/state");
    let energy_ts = || -> Option<i64> {
        let v: Value = serde_json::from_slice(&watcher.last(&topic)?.payload).ok()?;
        v["energy_ts"].as_i64()
    };

    // Energy on both sides of the boundary, then the meter gone: every surface then prices
    // the same stored samples.
    let meter = simulate("pzem004t", &[1], watts);
    write_config(&meter.path);
    let mut daemon = Child::run_daemon(&config, &[]);
    let addr = bound_addr(&daemon);
    daemon.wait_for(
        "samples 5 s past the start of the cheap rate",
        Duration::from_secs(120),
        || (energy_ts()? > tou.start_ms + 5000).then_some(()),
    );
    let _port = wattson_tests::stop_meter_keeping_its_port(meter);
    daemon.wait_for("the meter stale", Duration::from_secs(30), || {
        run(&config, &["status"]).contains("STALE").then_some(())
    });

    // Today's energy priced by hand, each trapezoid at the price of its time (the pair
    // across the boundary split at it).
    let store = open_db(&env.db).unwrap();
    let points = host_points(&store, HOST, "meter:wall", Metric::Power);
    drop(store);
    let mut truth = 0.0;
    for w in points.windows(2) {
        let ((t0, v0), (t1, v1)) = (w[0], w[1]);
        let at = |t: i64| v0 + (v1 - v0) * (t - t0) as f64 / (t1 - t0) as f64;
        let cut = tou.start_ms.clamp(t0, t1);
        for (a, b) in [(t0, cut), (cut, t1)] {
            let wh = f64::midpoint(at(a), at(b)) * (b - a) as f64 / HOUR as f64;
            truth += wh / 1000.0 * tou.price_at(a);
        }
    }
    assert!(points.first().unwrap().0 < tou.start_ms, "{points:?}");
    let surfaces = read_every_surface(chromium, &config, addr, &watcher, &topic);
    eprintln!("today priced by hand {truth:.6}; surfaces {surfaces:#?}");
    assert_eq!(cents(surfaces.status.today), cents(truth), "{surfaces:#?}");
    surfaces.agree(Some(tou.year_of(watts)));
    daemon.stop_cleanly();

    // Started again on a new meter, and a price series imported while it runs: every
    // surface again, once the daemon has read the series and the meter is gone.
    let meter = simulate("pzem004t", &[1], watts);
    write_config(&meter.path);
    let mut daemon = Child::run_daemon(&config, &[]);
    let addr = bound_addr(&daemon);
    let restarted = now_ms();
    daemon.wait_for("samples after the restart", Duration::from_secs(60), || {
        (energy_ts()? > restarted).then_some(())
    });
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
    let before = surfaces.status.annual;
    daemon.wait_for(
        "the series in the MQTT state's projection",
        Duration::from_secs(30),
        || {
            let v: Value = serde_json::from_slice(&watcher.last(&topic)?.payload).ok()?;
            (cents(v["cost_annual_projection"].as_f64()?) != cents(before)).then_some(())
        },
    );
    let _port = wattson_tests::stop_meter_keeping_its_port(meter);
    daemon.wait_for("the meter stale", Duration::from_secs(30), || {
        run(&config, &["status"]).contains("STALE").then_some(())
    });
    let surfaces = read_every_surface(chromium, &config, addr, &watcher, &topic);
    eprintln!("after the series: {surfaces:#?}");
    surfaces.agree(None);
    daemon.stop_cleanly();
}

/// Today's cost, a year on the tariff, its standing charge and the all-in year, as one
/// surface shows them.
#[derive(Debug, Clone, Copy)]
struct Figures {
    today: f64,
    annual: f64,
    standing: f64,
    all_in: f64,
}

#[derive(Debug)]
struct Surfaces {
    status: Figures,
    mqtt: Figures,
    metrics: Figures,
    /// The page's texts: today's cost, the year, and the standing-charge line.
    page: (String, String, String),
    /// The JSON report's today (its last day) and year, and `--tariffs`' current row.
    report: (f64, f64, f64),
    basis: (String, String, String),
}

impl Surfaces {
    /// Every figure equal to the cent; the year also to `year` where given.
    fn agree(&self, year: Option<f64>) {
        let s = self.status;
        for (what, f) in [("MQTT", self.mqtt), ("/metrics", self.metrics)] {
            assert_eq!(cents(f.today), cents(s.today), "{what} today: {self:#?}");
            assert_eq!(cents(f.annual), cents(s.annual), "{what} year: {self:#?}");
            assert_eq!(cents(f.standing), cents(s.standing), "{what}: {self:#?}");
            assert_eq!(cents(f.all_in), cents(s.all_in), "{what}: {self:#?}");
        }
        assert_eq!(cents(s.standing), 18250, "{self:#?}");
        assert_eq!(cents(s.all_in), cents(s.annual + 182.5), "{self:#?}");
        assert_eq!(
            cents(self.report.0),
            cents(s.today),
            "report today: {self:#?}"
        );
        assert_eq!(
            cents(self.report.1),
            cents(s.annual),
            "report year: {self:#?}"
        );
        assert_eq!(
            cents(self.report.2),
            cents(s.annual),
            "--tariffs: {self:#?}"
        );
        let money = |x: f64| wattson::ledger::price::format_money(x, "GBP");
        assert!(
            self.page.0.contains(&money(s.today)),
            "page today: {self:#?}"
        );
        assert!(
            self.page.1.contains(&money(s.annual)),
            "page year: {self:#?}"
        );
        assert!(
            self.page.2.contains(&money(s.all_in)),
            "page all-in: {self:#?}"
        );
        // One basis, worded alike after each surface's window.
        let tail = |b: &str| b[b.find(", priced over").unwrap()..].to_owned();
        assert_eq!(tail(&self.basis.1), tail(&self.basis.0), "{self:#?}");
        assert_eq!(tail(&self.basis.2), tail(&self.basis.0), "{self:#?}");
        assert!(
            self.basis.0.starts_with("under a day measured"),
            "{self:#?}"
        );
        if let Some(y) = year {
            assert_eq!(cents(s.annual), cents(y), "the year by hand: {self:#?}");
        }
    }
}

fn read_every_surface(
    chromium: &Path,
    config: &Path,
    addr: std::net::SocketAddr,
    watcher: &Watcher,
    topic: &str,
) -> Surfaces {
    let status: Value = serde_json::from_str(&run(config, &["status", "--json"])).unwrap();
    let c = &status["cost"];
    let status_fig = Figures {
        today: c["today"]["cost"].as_f64().unwrap(),
        annual: c["annual_cost"].as_f64().unwrap(),
        standing: c["standing_charge_per_year"].as_f64().unwrap(),
        all_in: c["annual_cost_all_in"].as_f64().unwrap(),
    };
    // The last state: published for the pass of the last reading, it counts every stored
    // sample (no state goes out for passes without a reading).
    let state: Value = serde_json::from_slice(&watcher.last(topic).unwrap().payload).unwrap();
    let store = open_db(&config_db(config)).unwrap();
    let newest = host_points(&store, HOST, "meter:wall", Metric::Power)
        .last()
        .unwrap()
        .0;
    assert_eq!(state["energy_ts"].as_i64(), Some(newest), "{state}");
    let mqtt = Figures {
        today: state["cost_today"].as_f64().unwrap(),
        annual: state["cost_annual_projection"].as_f64().unwrap(),
        standing: state["cost_annual_standing_charge"].as_f64().unwrap(),
        all_in: state["cost_annual_all_in"].as_f64().unwrap(),
    };
    let body = get(addr, "/metrics", &[]).unwrap().body;
    let m = |name: &str| metric_value(&body, &format!("wattson_{name}{{")).unwrap();
    let metrics = Figures {
        today: m("cost_today"),
        annual: m("annual_cost_projection"),
        standing: m("annual_standing_charge"),
        all_in: m("annual_cost_all_in"),
    };
    let dom = rendered_page(chromium, addr);
    let page = (
        shown(&dom, "cost-today"),
        shown(&dom, "projection"),
        shown(&dom, "standing-charge"),
    );
    let json: Value = serde_json::from_str(&run(
        config,
        &["report", "--format", "json", "--tariffs", "current,tariff"],
    ))
    .unwrap();
    let measured = &json["measured"];
    let days = measured["daily"].as_array().unwrap();
    let report = (
        days.last().unwrap()["cost"].as_f64().unwrap(),
        measured["annual_cost"].as_f64().unwrap(),
        json["tariffs"]["comparison"][0]["annual_cost"]
            .as_f64()
            .unwrap(),
    );
    Surfaces {
        status: status_fig,
        mqtt,
        metrics,
        page,
        report,
        basis: (
            c["annual_basis"].as_str().unwrap().to_owned(),
            state["cost_annual_basis"].as_str().unwrap().to_owned(),
            measured["annual_basis"].as_str().unwrap().to_owned(),
        ),
    }
}

/// The database `config` names (`path = "..."` under `[storage]`).
fn config_db(config: &Path) -> std::path::PathBuf {
    let text = std::fs::read_to_string(config).unwrap();
    let v: toml::Value = toml::from_str(&text).unwrap();
    v["storage"]["path"].as_str().unwrap().into()
}

/// Hourly slots from 26 h ago to 2 h ahead, the two tiers two hours each by turns.
fn price_series(path: &Path, tiers: [f64; 2]) {
    let first = (now_ms() / HOUR - 26) * HOUR;
    let mut csv = String::from("start,end,price_per_kwh\n");
    for i in 0..28 {
        let at = |ms: i64| {
            chrono::DateTime::from_timestamp_millis(ms)
                .unwrap()
                .format("%Y-%m-%dT%H:%M:%SZ")
                .to_string()
        };
        let from = first + i * HOUR;
        let price = tiers[(i - 26).div_euclid(2).rem_euclid(2) as usize];
        let _ = writeln!(csv, "{},{},{price}", at(from), at(from + HOUR));
    }
    std::fs::write(path, csv).unwrap();
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
