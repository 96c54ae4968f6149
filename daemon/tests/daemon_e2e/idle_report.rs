//! `wattson report`'s "Idle: where the watts go" over a temp SQLite store: six idle hours of
//! history (three in which the package reached PC6 at 30 W at the wall, three in which it
//! stayed in PC2 at 38 W), a busy hour that is not idle, and two settings measured by
//! `wattson idle --measure` (one that saved 3 W, one with no effect), gathered, built and
//! rendered in every format.

#![allow(clippy::unwrap_used)]

use std::path::Path;

use chrono::{DateTime, Utc};
use wattson::config::Config;
use wattson::idle::store::{Effect, begin_run, save_effect};
use wattson::report::gather::gather_from_store;
use wattson::report::{self, Format};
use wattson::report::{ReportRequest, input_from_config};
use wattson::store::{HOUR_MS, Store, StoreOptions, Writer};
use wattson_collectors::{Metric, Sample};

const HOST: &str = "basket";
/// 2026-11-01T00:00:00Z.
const T0: i64 = 1_793_491_200_000;

fn config() -> Config {
    let text = format!(
        "[host]\nname = \"{HOST}\"\n\n[tariff]\ncurrency = \"GBP\"\nprice_per_kwh = 0.30\n\
         timezone = \"UTC\"\n"
    );
    Config::from_toml(&text, Path::new("idle.toml")).unwrap()
}

/// One sample every 10 s of each series through hour `h`.
fn hour(h: i64, wall: f64, pc2: f64, pc6: f64, busy: f64) -> Vec<Sample> {
    let mut out = Vec::new();
    for i in 0..360 {
        let ts = T0 + h * HOUR_MS + i * 10_000;
        out.push(Sample::new(ts, "meter:wall", Metric::Power, "", wall));
        out.push(Sample::new(
            ts,
            "cpu",
            Metric::PackageResidency,
            "all/PC2",
            pc2,
        ));
        out.push(Sample::new(
            ts,
            "cpu",
            Metric::PackageResidency,
            "all/PC6",
            pc6,
        ));
        out.push(Sample::new(ts, "cpu", Metric::CpuBusy, "all", busy));
    }
    out
}

fn effect(run_id: i64, trial: &str, name: &str, delta: f64, ci: f64) -> Effect {
    Effect {
        run_id,
        host: HOST.into(),
        trial: trial.into(),
        name: name.into(),
        original: "performance".into(),
        changed: "powersave".into(),
        started_ms: T0 + 7 * HOUR_MS,
        ended_ms: T0 + 7 * HOUR_MS + 600_000,
        baseline_w: 38.0,
        changed_w: 38.0 + delta,
        delta_w: delta,
        delta_ci95_w: ci,
        n: 140,
        effect: delta.abs() > ci,
        phases: serde_json::json!([]),
    }
}

#[test]
fn the_idle_section_links_package_states_to_watts_and_prices_each_setting() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("wattson.db");
    let options = StoreOptions {
        host: HOST.into(),
        ..StoreOptions::default()
    };
    let store = Store::open(&db, &options).unwrap();
    let run = begin_run(
        &store,
        HOST,
        T0 + 7 * HOUR_MS,
        "pzem004t wall",
        &serde_json::json!({}),
    )
    .unwrap();
    save_effect(
        &store,
        &effect(run, "pcie_aspm", "ASPM powersave", -3.1, 0.4),
    )
    .unwrap();
    save_effect(
        &store,
        &effect(run, "nmi_watchdog", "NMI watchdog off", 0.1, 0.4),
    )
    .unwrap();
    let mut w = Writer::new(store, options);
    for h in 0..3 {
        w.push(None, hour(h, 30.0, 0.3, 0.4, 0.02));
    }
    for h in 3..6 {
        w.push(None, hour(h, 38.0, 0.6, 0.0, 0.03));
    }
    w.push(None, hour(6, 90.0, 0.1, 0.0, 0.8));
    w.flush().unwrap();
    drop(w);

    let now: DateTime<Utc> = "2026-11-02T00:00:00Z".parse().unwrap();
    let store = wattson::store::open_database(&db).unwrap();
    let data = gather_from_store(
        Some(&store),
        HOST,
        None,
        None,
        true,
        (None, Some(now.timestamp_millis())),
        &|_, _| false,
    )
    .unwrap();
    let args = ReportRequest::new(Format::Table);
    let input = input_from_config(&config(), data, &args, now).unwrap();
    let r = report::build(&input).unwrap();
    let idle = r.idle.as_ref().expect("an idle section");
    assert_eq!(idle.deepest_reached.as_deref(), Some("PC6"));
    let deep = idle.hours_deep.as_ref().unwrap();
    let shallow = idle.hours_shallow.as_ref().unwrap();
    assert_eq!(
        (deep.hours, shallow.hours),
        (3, 3),
        "the busy hour is not idle"
    );
    assert!((deep.mean_wall_watts - 30.0).abs() < 1e-6);
    assert!((shallow.mean_wall_watts - 38.0).abs() < 1e-6);
    let aspm = &idle.settings[0];
    assert_eq!(aspm.setting, "pcie_aspm");
    // -3.1 W all year: 27.156 kWh, GBP 8.15 at 0.30.
    assert!((aspm.annual_kwh_change + 27.156).abs() < 1e-9, "{aspm:?}");
    assert!((aspm.annual_cost_change + 8.1468).abs() < 1e-9, "{aspm:?}");
    assert!(!idle.settings[1].effect);

    let table = report::render(&r, Format::Table).unwrap();
    assert!(table.contains("Idle: where the watts go"), "{table}");
    assert!(
        table.contains("ASPM powersave: -3.1 +/- 0.4 W (performance -> powersave, 38.0 -> 34.9 W), saves 27.2 kWh, GBP 8.15/yr"),
        "{table}"
    );
    assert!(
        table.contains("NMI watchdog off: no effect that this meter can distinguish"),
        "{table}"
    );
    assert!(
        table.contains("30.0 W in the 3 h the package reached PC6 or deeper, 38.0 W in the 3 h it did not (-8.0 W)"),
        "{table}"
    );
    for format in [Format::Markdown, Format::Html] {
        let text = report::render(&r, format).unwrap();
        assert!(text.contains("Idle: where the watts go"), "{format:?}");
        assert!(text.contains("ASPM powersave: -3.1"), "{format:?}");
    }
    let json: serde_json::Value =
        serde_json::from_str(&report::render(&r, Format::Json).unwrap()).unwrap();
    assert_eq!(json["idle"]["deepest_reached"], "PC6");
    assert_eq!(json["idle"]["settings"][0]["delta_watts"], -3.1);
    assert_eq!(json["idle"]["hours_deep"]["hours"], 3);
    let csv = report::render(&r, Format::Csv).unwrap();
    let row = csv
        .lines()
        .find(|l| l.starts_with("ASPM powersave,idle_setting,idle,"))
        .unwrap_or_else(|| panic!("no idle_setting row in\n{csv}"));
    let header_fields = csv.lines().next().unwrap().split(',').count();
    assert_eq!(row.split(',').count(), header_fields, "{row}");
    assert!(
        row.contains(",-3.1,0.4,-27.156,3.504,-8.15,1.05,GBP,"),
        "{row}"
    );
}

#[test]
fn wattson_idle_says_what_the_wall_drew_in_deep_and_shallow_idle_hours() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("wattson.db");
    let options = StoreOptions {
        host: HOST.into(),
        ..StoreOptions::default()
    };
    let mut w = Writer::new(Store::open(&db, &options).unwrap(), options);
    // The four hours before the current one: two deep at 30 W, two shallow at 38 W.
    let now = Utc::now().timestamp_millis();
    let this_hour = now - now.rem_euclid(HOUR_MS);
    let first = (this_hour - 4 * HOUR_MS - T0) / HOUR_MS;
    for (i, (wall, pc6)) in [(30.0, 0.4), (30.0, 0.4), (38.0, 0.0), (38.0, 0.0)]
        .into_iter()
        .enumerate()
    {
        w.push(None, hour(first + i as i64, wall, 0.3, pc6, 0.02));
    }
    w.flush().unwrap();
    drop(w);
    let store = Store::open_read_only(&db).unwrap();
    let mut config = config();
    // No live sample: nothing under these roots.
    config.host.sysfs = dir.path().join("sys");
    config.host.procfs = dir.path().join("proc");
    let r = wattson::idle::explain::gather(
        &config,
        Some(&store),
        std::time::Duration::from_millis(10),
        wattson::idle::wakeups::TOP,
    );
    let line = r
        .findings
        .iter()
        .find(|f| f.starts_with("at the wall over the last 30 days"))
        .unwrap_or_else(|| panic!("{:?}", r.findings));
    assert!(
        line.contains("30.0 W in the 2 idle hours the package reached PC6 or deeper, 38.0 W in the 2 it did not (-8.0 W"),
        "{line}"
    );
}
