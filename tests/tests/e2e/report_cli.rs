//! `wattson report` through the real binary: comparisons run from the costlier configuration
//! to the cheaper one unless `--configs` gives the order, and use the target's upgrade cost.

use wattson_tests::{TestEnv, wattson};

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
    let out = report_output(env, args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    String::from_utf8_lossy(&out.stdout).into_owned()
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
