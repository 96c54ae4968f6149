//! `wattson report` through the real binary: comparisons run from the costlier configuration
//! to the cheaper one unless `--configs` gives the order, and use the target's upgrade cost.

use wattson_tests::{TestEnv, stdout_of, wattson};

/// A cheaper box with an upgrade cost listed before the costlier one it would replace.
const CONFIGS: &str = r#"
[tariff]
currency = "EUR"
price_per_kwh = 0.30

[[config]]
name = "new box"
modes = { idle = 40.0 }
upgrade_cost = 300.0

[[config]]
name = "old box"
modes = { idle = 70.0 }
"#;

/// `wattson report ARGS` on [`CONFIGS`].
fn report_output(env: &TestEnv, args: &[&str]) -> std::process::Output {
    wattson()
        .arg("--config")
        .arg(env.config(CONFIGS))
        .arg("report")
        .args(args)
        .output()
        .expect("running wattson report")
}

fn report(env: &TestEnv, args: &[&str]) -> String {
    stdout_of(
        wattson()
            .arg("--config")
            .arg(env.config(CONFIGS))
            .arg("report")
            .args(args),
    )
}

#[test]
fn comparisons_run_from_the_costlier_configuration_with_the_targets_upgrade_cost() {
    let env = TestEnv::new();
    let json: serde_json::Value =
        serde_json::from_str(&report(&env, &["--format", "json"])).expect("JSON");
    assert_eq!(json["baseline"], "costliest");
    let c = &json["comparisons"][0];
    assert_eq!(c["from"], "old box", "{c}");
    assert_eq!(c["to"], "new box", "{c}");
    // 30 W x 8760 h = 262.8 kWh, at 0.30 = EUR 78.84 a year; 300 / 78.84 = 3.81 years.
    assert!(
        (c["annual_kwh_saved"].as_f64().unwrap() - 262.8).abs() < 1e-6,
        "{c}"
    );
    assert!(
        (c["annual_saving"].as_f64().unwrap() - 78.84).abs() < 1e-6,
        "{c}"
    );
    assert_eq!(c["upgrade_cost"], 300.0);
    assert!(
        (c["payback_years"].as_f64().unwrap() - 300.0 / 78.84).abs() < 1e-6,
        "{c}"
    );
    // The columns follow: the baseline first.
    assert_eq!(json["configs"][0]["name"], "old box");

    let table = report(&env, &[]);
    assert!(
        table.contains("old box -> new box at idle: 70 W -> 40 W saves 262.8 kWh, EUR 78.84/yr; the upgrade (EUR 300.00) pays for itself in 3.81 years"),
        "{table}"
    );
    assert!(
        table.contains("from the costliest configuration"),
        "{table}"
    );
    assert!(!table.contains("saves -"), "{table}");
    assert!(!table.contains("no upgrade cost given"), "{table}");
}

#[test]
fn configs_sets_the_order_and_the_baseline() {
    let env = TestEnv::new();
    let json: serde_json::Value = serde_json::from_str(&report(
        &env,
        &["--format", "json", "--configs", "new box,old box"],
    ))
    .expect("JSON");
    assert_eq!(json["baseline"], "first");
    let c = &json["comparisons"][0];
    assert_eq!(c["from"], "new box", "{c}");
    assert_eq!(c["to"], "old box", "{c}");
    assert!(c["annual_saving"].as_f64().unwrap() < 0.0, "{c}");
    assert!(
        c.get("payback_years").is_none() || c["payback_years"].is_null(),
        "{c}"
    );
}

/// A window that ends before it starts, or starts in the future, was reported with no
/// measured section and no word why (exit 0, `measured: null`). It is refused, saying which.
#[test]
fn an_empty_or_future_window_is_refused_saying_why() {
    let env = TestEnv::new();
    for (args, needle) in [
        (
            &["--since", "2026-12-03", "--until", "2026-12-01"][..],
            "holds no time: --until must come after --since",
        ),
        (
            &["--since", "2099-01-01"][..],
            "is in the future: nothing is measured after now",
        ),
    ] {
        let out = report_output(&env, args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}

/// The interval of a database's own history rests on the meter it was measured with, as the
/// daemon recorded its protocol, not on the configuration that reads it: the demo's
/// database (a simulated PZEM-004T, 0.5 % in the manual) reads the same interval, with its
/// source, in `report` and `status`, under a config without the meter and under one that
/// calls it a Watts Up? (+/- 1.5 % + 0.3 W).
#[test]
fn the_meters_accuracy_is_the_databases_whatever_the_config_reading_it_says() {
    let env = TestEnv::new();
    stdout_of(
        wattson()
            .arg("--config")
            .arg(env.config(""))
            .args(["demo", "--no-sweep", "--duration", "20s", "--db"])
            .arg(&env.db),
    );
    let read = |extra: &str| {
        let config = env.config(extra);
        let text = stdout_of(
            wattson()
                .arg("--config")
                .arg(&config)
                .args(["report", "--format", "json"]),
        );
        // No figure is a negative zero (an empty sum of f64 is -0, printed as -0.0).
        assert!(!text.contains(": -0.0"), "{text}");
        let report: serde_json::Value = serde_json::from_str(&text).unwrap();
        let status = stdout_of(
            wattson()
                .arg("--config")
                .arg(&config)
                .args(["status", "--json"]),
        );
        let status: serde_json::Value = serde_json::from_str(&status).unwrap();
        (
            report["measured"]["accuracy_watts"].as_f64(),
            report["measured"]["accuracy_source"].clone(),
            status["cost"]["mean_watts_interval"]["accuracy_watts"].as_f64(),
        )
    };
    let without = read("");
    let (Some(watts), source, Some(status_watts)) = without.clone() else {
        panic!("no accuracy for the demo's meter: {without:?}");
    };
    assert!(source.as_str().unwrap().contains("PZEM-004T"), "{source}");
    assert!((watts - status_watts).abs() < 1e-9, "{without:?}");
    let misnamed = read("[[meter]]\nid = \"demo\"\nprotocol = \"wattsup\"\nport = \"/dev/null\"\n");
    assert_eq!(misnamed, without);

    // Under an hour of history is told in minutes or seconds, not as "0.0 h" or "0 h".
    let text = report(&env, &[]);
    assert!(text.contains(" s covered of "), "{text}");
    assert!(!text.contains("0.0 h") && !text.contains(" 0 h"), "{text}");
}

/// Each column says where its watts come from: a `[[config]]` typed in by hand, a sweep
/// measured at the wall (with the meter it ran on); and a sweep's missing upgrade cost is
/// asked for on the command line only (it has no `[[config]]` to carry one).
#[test]
fn each_configuration_says_where_its_watts_come_from() {
    let env = TestEnv::new();
    wattson_tests::sweep::basket(&env.db);
    // Markdown escapes the brackets (they read as themselves when rendered).
    for (format, config) in [
        (&["--format", "table"][..], "[[config]]"),
        (&["--format", "markdown"], "\\[\\[config\\]\\]"),
    ] {
        let text = report(&env, format);
        assert!(
            text.contains("Configurations (where each column's watts come from)"),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "old box: typed in by hand ({config} in the configuration file): the watts \
                 as given, with no interval"
            )),
            "{text}"
        );
        assert!(
            text.contains("basket: measured at the wall, swept with pzem004t wall on /dev/ttyUSB0"),
            "{text}"
        );
    }
    // A mode typed in by hand has no interval, and says so: the fields are there, null.
    let json: serde_json::Value =
        serde_json::from_str(&report(&env, &["--format", "json"])).unwrap();
    let old_box = json["configs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "old box")
        .unwrap();
    for key in ["ci95_watts", "annual_kwh_ci95", "annual_cost_ci95"] {
        assert!(
            old_box["modes"][0]
                .get(key)
                .is_some_and(serde_json::Value::is_null),
            "{key}: {old_box}"
        );
    }
    let text = report(&env, &["--configs", "old box,basket"]);
    assert!(
        text.contains("old box -> basket")
            && text.contains("no upgrade cost given (--upgrade-cost)"),
        "{text}"
    );
}

/// Seen: an idle level of 48.38 W +/- 46.35 printed no warning in the sweep, the CSV or the
/// report. A stored level whose interval is wider than the 15 W step between levels carries
/// the warning in every format that shows it.
#[test]
fn a_level_wider_than_the_step_it_measures_is_warned_in_every_format() {
    let env = TestEnv::new();
    let options = wattson::store::StoreOptions {
        host: wattson_tests::HOST.to_owned(),
        ..wattson::store::StoreOptions::default()
    };
    let store = wattson::store::Store::open(&env.db, &options).unwrap();
    let mut levels: Vec<_> = (0..=2).map(wattson_tests::sweep::level).collect();
    levels[0].ci95_w = 20.0;
    wattson_tests::sweep::save_basket(&store, levels);
    drop(store);
    let warning = "its interval (+/- 20.00 W) is wider than the 15.00 W step between levels it \
                   measures: it cannot be told from its neighbours";
    for format in ["table", "markdown", "csv", "json"] {
        let out = report(&env, &["--configs", "basket", "--format", format]);
        assert!(out.contains(warning), "{format}: {out}");
    }
}
