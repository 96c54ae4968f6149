//! The gap, explained, through the real binary: a history whose best idle hours drew 35.5 W
//! at the wall (the simulated machine with ASPM at powersave and SATA link power at
//! med_power_with_dipm) and whose newest ones draw 40 W (both back at their defaults), with
//! ASPM measured to save 3.0 W and SATA ALPM 1.5 W: `wattson idle` assigns the 4.5 W gap to
//! the two settings that are not in effect, and once ASPM is back at powersave in the fixture
//! it names SATA alone and shows the rest as unexplained.

#![allow(clippy::unwrap_used, clippy::panic)]

use wattson::idle::store::{Effect, begin_run, end_run, save_effect};
use wattson::store::{Store, StoreOptions, Writer};
use wattson_collectors::{Metric, Sample};
use wattson_tests::TestEnv;
use wattson_tests::idle::{host_toml, intel_desktop, run_ok};

const HOUR_MS: i64 = 3_600_000;

/// Hours of (W at the wall, CPU busy share), every 10 s, the newest ending an hour ago.
fn history(db: &std::path::Path, hours: &[(f64, f64)]) {
    let mut opts = StoreOptions {
        host: "e2e".into(),
        ..StoreOptions::default()
    };
    opts.spacing_ms.insert("meter:wall".into(), 10_000);
    let now = chrono::Utc::now().timestamp_millis();
    let mut t = (now / HOUR_MS - hours.len() as i64 - 1) * HOUR_MS;
    let mut w = Writer::new(Store::open(db, &opts).unwrap(), opts.clone());
    for &(watts, busy) in hours {
        let end = t + HOUR_MS;
        let mut batch = Vec::new();
        while t < end {
            batch.push(Sample::new(t, "meter:wall", Metric::Power, "", watts));
            batch.push(Sample::new(t, "cpu", Metric::CpuBusy, "all", busy));
            t += 10_000;
        }
        w.push(None, batch);
        w.flush().unwrap();
    }
}

/// The start of the newest hour [`history`] writes.
fn newest_hour() -> i64 {
    (chrono::Utc::now().timestamp_millis() / HOUR_MS - 2) * HOUR_MS
}

/// sda's stored spin: spun up `up_s` of the hour from `hour_ms`.
fn disk_hour(db: &std::path::Path, hour_ms: i64, up_s: f64) {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.execute(
        "INSERT INTO disk_hour (host, disk, hour_ms, up_s, covered_s, spinups, source)
         VALUES ('e2e', 'sda', ?1, ?2, 3600, 1, 'inferred')",
        rusqlite::params![hour_ms, up_s],
    )
    .unwrap();
}

fn measured(db: &std::path::Path) {
    measured_with(db, &[]);
}

/// The three settings measured, and `more` (candidate, name, changed, W) beside them.
fn measured_with(db: &std::path::Path, more: &[(&str, &str, &str, f64)]) {
    let store = Store::open(db, &StoreOptions::default()).unwrap();
    let run_id = begin_run(&store, "e2e", 1, "pzem004t", &serde_json::json!({})).unwrap();
    let more = more
        .iter()
        .map(|&(id, name, changed, w)| (id, name, changed, w, true));
    for (id, name, changed, delta, effect) in [
        ("pcie_aspm", "ASPM powersave", "powersave", -3.0, true),
        (
            "sata_alpm",
            "SATA ALPM med_power_with_dipm",
            "med_power_with_dipm",
            -1.5,
            true,
        ),
        ("nmi_watchdog", "NMI watchdog off", "0", -0.05, false),
    ]
    .into_iter()
    .chain(more)
    {
        save_effect(
            &store,
            &Effect {
                run_id,
                host: "e2e".into(),
                trial: id.into(),
                name: name.into(),
                original: "as found".into(),
                changed: changed.into(),
                started_ms: 10,
                ended_ms: 11,
                baseline_w: 40.0,
                changed_w: 40.0 + delta,
                delta_w: delta,
                delta_ci95_w: 0.3,
                n: 140,
                effect,
                phases: serde_json::Value::Null,
            },
        )
        .unwrap();
    }
    end_run(&store, run_id, 20, "complete").unwrap();
}

#[test]
fn the_gap_to_the_best_idle_seen_is_assigned_to_the_measured_settings_not_in_effect() {
    let env = TestEnv::new();
    let root = env.path("machine");
    intel_desktop(&root);
    let config = env.path("wattson.toml");
    std::fs::write(
        &config,
        format!(
            "{}\n[tariff]\ncurrency = \"GBP\"\nprice_per_kwh = 0.30\n",
            host_toml(&root, &env.db)
        ),
    )
    .unwrap();
    // Two best idle hours, a busy one (not idle), three idle hours as now.
    history(
        &env.db,
        &[
            (35.5, 0.02),
            (35.5, 0.03),
            (90.0, 0.6),
            (40.0, 0.02),
            (40.0, 0.02),
            (40.0, 0.03),
        ],
    );
    measured(&env.db);

    let gap = |args: &[&str]| -> serde_json::Value {
        let mut all = vec!["idle", "--json", "--sample", "0"];
        all.extend(args);
        let v: serde_json::Value = serde_json::from_str(&run_ok(&config, &all)).unwrap();
        v["gap"].clone()
    };
    let g = gap(&[]);
    let num = |v: &serde_json::Value| v.as_f64().unwrap_or_else(|| panic!("{g}"));
    assert!((num(&g["gap_watts"]) - 4.5).abs() < 0.01, "{g}");
    let names: Vec<&str> = g["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["ASPM powersave", "SATA ALPM med_power_with_dipm"],
        "{g}"
    );
    assert!(num(&g["explained_share"]) >= 0.8, "{g}");
    // 4.5 W all year at 0.30/kWh.
    assert!(
        (num(&g["gap_annual_cost"]) - 4.5 * 8.76 * 0.30).abs() < 0.05,
        "{g}"
    );

    // ASPM back at powersave: SATA alone, 3 W unexplained.
    std::fs::write(
        root.join("sys/module/pcie_aspm/parameters/policy"),
        "default performance [powersave] powersupersave\n",
    )
    .unwrap();
    let g = gap(&[]);
    assert_eq!(g["causes"].as_array().unwrap().len(), 1, "{g}");
    assert!((num(&g["unexplained_watts"]) - 3.0).abs() < 0.01, "{g}");
    let text = run_ok(&config, &["idle", "--sample", "0"]);
    assert!(
        text.contains("The gap: idle now against the best idle seen"),
        "{text}"
    );
    assert!(
        text.contains("unexplained: 3.0 W (33 % of the gap"),
        "{text}"
    );
}

/// A disk spun up for half of the newest idle hour and not at all in the best ones, its
/// spinning measured at 6 W: the gap's 7.5 W is the two settings' 4.5 W and the disk's 3 W.
#[test]
fn a_disk_spun_up_in_the_newest_idle_hour_is_a_cause_at_its_measured_watts() {
    let env = TestEnv::new();
    let root = env.path("machine");
    intel_desktop(&root);
    let config = env.path("wattson.toml");
    std::fs::write(
        &config,
        format!(
            "{}\n[tariff]\ncurrency = \"GBP\"\nprice_per_kwh = 0.30\n",
            host_toml(&root, &env.db)
        ),
    )
    .unwrap();
    let hours = [(35.5, 0.02), (35.5, 0.03), (43.0, 0.02), (43.0, 0.02)];
    history(&env.db, &hours);
    measured_with(
        &env.db,
        &[("disk_standby:sda", "sda in standby", "auto", -6.0)],
    );
    let newest = newest_hour();
    disk_hour(&env.db, newest, 1800.0);
    disk_hour(&env.db, newest - 3 * HOUR_MS, 0.0);

    let v: serde_json::Value =
        serde_json::from_str(&run_ok(&config, &["idle", "--json", "--sample", "0"])).unwrap();
    let g = &v["gap"];
    let num = |v: &serde_json::Value| v.as_f64().unwrap_or_else(|| panic!("{g}"));
    assert!((num(&g["gap_watts"]) - 7.5).abs() < 0.01, "{g}");
    let causes = g["causes"].as_array().unwrap();
    let names: Vec<&str> = causes.iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "ASPM powersave",
            "SATA ALPM med_power_with_dipm",
            "sda spun up"
        ],
        "{g}"
    );
    assert!((num(&causes[2]["watts"]) - 3.0).abs() < 0.01, "{g}");
    assert!((num(&causes[2]["watts_ci95"]) - 0.15).abs() < 0.01, "{g}");
    assert!(num(&g["explained_share"]) >= 0.8, "{g}");
    assert!((num(&g["unexplained_watts"])).abs() < 0.01, "{g}");
    let text = run_ok(&config, &["idle", "--sample", "0"]);
    assert!(
        text.contains("sda spun up: 3.0 +/- ")
            && text.contains(
                "W, GBP 7.88 a year (spun up 50 % of the newest idle hour against 0 % of the \
                 best, at 6.0 W (measured at the wall"
            ),
        "{text}"
    );
}
