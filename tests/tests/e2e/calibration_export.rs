//! A calibration in other tools' forms, through the real binary: the powercalc profile
//! and the Prometheus recording rule (evaluated by promtool, Prometheus' rule engine)
//! reproduce wattson's own estimate within 1 % on the same inputs; the file another host
//! of the same hardware imports, marked as borrowed, and refused for other hardware or
//! when it is not whole.

#![allow(clippy::unwrap_used, clippy::panic, clippy::missing_panics_doc)]

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::process::Command;

use wattson::store::MINUTE_MS;
use wattson_collectors::Metric;

use super::calibration::{
    DAY_MINUTES, Day, METER_OUT, day_of, estimate, fit_morning, json, ok, run, usual_day,
};

/// Afternoon minutes inside the fitted range, a spread of them.
fn afternoon_minutes(day: &Day) -> Vec<usize> {
    let (lo, hi) = day.minutes[..METER_OUT]
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), m| {
            (a.min(m.load), b.max(m.load))
        });
    (METER_OUT..DAY_MINUTES - super::calibration::PEAK_MINUTES)
        .step_by(23)
        .filter(|&i| (lo..=hi).contains(&day.minutes[i].load))
        .take(12)
        .collect()
}

/// wattson's estimate of minute `i`, W.
fn estimate_w(day: &Day, i: usize) -> f64 {
    let e = json(
        &day.config,
        &[
            "calibration",
            "estimate",
            "--since",
            &day.t(i),
            "--until",
            &day.t(i + 1),
        ],
    );
    assert_eq!(e["minutes"], 1, "{e:#}");
    e["energy_wh"].as_f64().unwrap() * 60.0
}

/// powercalc's `linear` strategy over a calibrate table, as it computes it: the closest
/// point at or below the value and the closest above, a straight line between them (the
/// keys are whole numbers: powercalc reads them with `int()`).
fn powercalc_watts(table: &[(i64, f64)], value: f64) -> f64 {
    let below = table
        .iter()
        .rev()
        .find(|p| p.0 as f64 <= value)
        .unwrap_or(&table[0]);
    let above = table
        .iter()
        .find(|p| p.0 as f64 > value)
        .unwrap_or(&table[table.len() - 1]);
    if below.0 == above.0 {
        return below.1;
    }
    below.1 + (value - below.0 as f64) * (above.1 - below.1) / (above.0 - below.0) as f64
}

#[test]
fn the_powercalc_profile_reproduces_the_estimate_within_1_percent() {
    let day = usual_day();
    // powercalc reads one Home Assistant entity: a model over the CPU's utilisation.
    let model = fit_morning(&day, &["--feature", "cpu/cpu_busy/all"]);
    assert_eq!(
        model["model"]["features"][0]["metric"], "cpu_busy",
        "{model:#}"
    );
    let yaml = ok(
        &day.config,
        &["calibration", "export", "--format", "powercalc"],
    );
    // Read as Home Assistant reads it: a YAML document of one sensor.
    let doc: serde_norway::Value = serde_norway::from_str(&yaml).unwrap();
    let sensor = &doc["powercalc"]["sensors"][0];
    assert_eq!(
        sensor["entity_id"].as_str(),
        Some("sensor.wattson_e2e_cpu_utilisation"),
        "{yaml}"
    );
    let table: Vec<(i64, f64)> = sensor["linear"]["calibrate"]
        .as_sequence()
        .unwrap_or_else(|| panic!("no calibrate table in {yaml}"))
        .iter()
        .filter_map(|p| p.as_str()?.split_once(" -> "))
        .map(|(k, w)| (k.parse().unwrap(), w.parse().unwrap()))
        .collect();
    assert!(table.len() >= 10, "{yaml}");
    assert!(table.windows(2).all(|p| p[0].0 < p[1].0), "{yaml}");
    let minutes = afternoon_minutes(&day);
    assert!(minutes.len() >= 8, "{minutes:?}");
    for i in minutes {
        // Home Assistant's entity: the busy share in per cent.
        let state = day.minutes[i].load * 100.0;
        let (ours, theirs) = (estimate_w(&day, i), powercalc_watts(&table, state));
        assert!(
            (ours - theirs).abs() <= 0.01 * ours,
            "minute {i} at {state:.2} %: wattson {ours:.2} W, powercalc {theirs:.2} W"
        );
    }

    // A model over RAPL has no Home Assistant entity to read: refused, saying what to do.
    fit_morning(&day, &["--feature", "rapl/power/package-0"]);
    let (code, _, err) = run(
        &day.config,
        &["calibration", "export", "--format", "powercalc"],
    );
    assert_eq!(code, 65, "{err}");
    assert!(err.contains("--feature cpu/cpu_busy/all"), "{err}");
}

/// The minute means of `host`'s stored `source/metric/channel`, by minute start.
fn minute_means(day: &Day, source: &str, metric: Metric, channel: &str) -> BTreeMap<i64, f64> {
    let store = wattson_tests::open_db(&day.env.db).unwrap();
    let series = store
        .find_series(
            &wattson::store::SeriesFilter::all()
                .host(wattson_tests::HOST)
                .source(&source.into())
                .metric(metric)
                .channel(channel),
        )
        .unwrap();
    let mut sums: BTreeMap<i64, (f64, f64)> = BTreeMap::new();
    for (t, v) in store.raw_points(&series[0], 0, i64::MAX).unwrap() {
        let e = sums.entry(t - t.rem_euclid(MINUTE_MS)).or_default();
        e.0 += v;
        e.1 += 1.0;
    }
    sums.into_iter().map(|(k, (s, n))| (k, s / n)).collect()
}

#[test]
fn the_recording_rule_reproduces_the_estimate_within_1_percent_in_prometheus() {
    let Some(promtool) = super::prometheus::program("promtool") else {
        return;
    };
    let day = usual_day();
    let model = fit_morning(&day, &[]);
    let rules = ok(
        &day.config,
        &["calibration", "export", "--format", "prometheus"],
    );
    let dir = day.env.dir.path();
    std::fs::write(dir.join("calibration.rules.yml"), &rules).unwrap();
    let out = Command::new(&promtool)
        .args(["check", "rules"])
        .arg(dir.join("calibration.rules.yml"))
        .output()
        .unwrap();
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && said.contains("SUCCESS: 1 rules found"),
        "{said}\n{rules}"
    );

    // The model's signals as wattson's /metrics exposes them, a minute apart, one minute of
    // the afternoon after another; the rule's value at each against wattson's estimate.
    // The afternoon's minutes inside what the model saw, then the batch job's above it.
    let mut minutes = afternoon_minutes(&day);
    let inside = minutes.len();
    minutes.extend([DAY_MINUTES - 40, DAY_MINUTES - 20]);
    let mut inputs = String::new();
    for f in model["model"]["features"].as_array().unwrap() {
        let (source, channel) = (
            f["source"].as_str().unwrap(),
            f["channel"].as_str().unwrap(),
        );
        let metric = Metric::parse(f["metric"].as_str().unwrap()).unwrap();
        let (series, scale) = match metric {
            Metric::Power => (
                format!(
                    "wattson_power_watts{{host=\"e2e\",source=\"{source}\",channel=\"{channel}\"}}"
                ),
                1.0,
            ),
            Metric::CpuBusy => (
                format!("wattson_cpu_utilisation_ratio{{host=\"e2e\",channel=\"{channel}\"}}"),
                1.0,
            ),
            Metric::CoreFrequency => (
                format!("wattson_cpu_frequency_hertz{{host=\"e2e\",channel=\"{channel}\"}}"),
                1e6,
            ),
            m => panic!("the simulated day stores no {m:?}"),
        };
        let means = minute_means(&day, source, metric, channel);
        let values: Vec<String> = minutes
            .iter()
            .map(|&i| format!("{}", means[&day.minutes[i].start_ms] * scale))
            .collect();
        let _ = writeln!(
            inputs,
            "      - series: '{series}'\n        values: '{}'",
            values.join(" ")
        );
    }
    let mut tests = String::new();
    for (k, &i) in minutes.iter().enumerate().skip(inside) {
        // Withheld by wattson, and so by the rule: no sample.
        let e = estimate(&day, i, i + 1);
        assert_eq!(e["minutes"], 0, "{e:#}");
        assert_eq!(e["withheld"][0]["minutes"], 1, "{e:#}");
        let _ = writeln!(
            tests,
            "      - expr: 'wattson:estimated_wall_power_watts'\n\
             \x20       eval_time: {k}m\n        exp_samples: []"
        );
    }
    for (k, &i) in minutes.iter().enumerate().take(inside) {
        let want = estimate_w(&day, i);
        let _ = writeln!(
            tests,
            "      - expr: 'abs(wattson:estimated_wall_power_watts - {want}) / {want} < bool 0.01'\n\
             \x20       eval_time: {k}m\n        exp_samples:\n\
             \x20         - labels: '{{host=\"e2e\", source=\"estimate:wall\"}}'\n            value: 1"
        );
    }
    let unit = format!(
        "rule_files:\n  - calibration.rules.yml\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n{inputs}    promql_expr_test:\n{tests}"
    );
    std::fs::write(dir.join("calibration.test.yml"), &unit).unwrap();
    let out = Command::new(&promtool)
        .current_dir(dir)
        .args(["test", "rules", "calibration.test.yml"])
        .output()
        .unwrap();
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && said.contains("SUCCESS"),
        "{said}\n{rules}\n{unit}"
    );
}

/// A host of the same hardware that stores none of the model's signals: the calibration
/// imports, and `status` and the report say why it gives no figure, instead of failing.
fn without_its_signal_a_calibration_gives_no_figure_and_says_why(
    twin: &super::calibration::Day,
    file: &std::path::Path,
) {
    let db = twin.env.path("bare.db");
    let config = twin.env.path("bare.toml");
    let text = std::fs::read_to_string(&twin.config)
        .unwrap()
        .replace("name = \"twin\"", "name = \"bare\"")
        .replace(&wattson_tests::q(&twin.env.db), &wattson_tests::q(&db));
    assert!(text.contains("bare.db"), "{text}");
    std::fs::write(&config, text).unwrap();
    ok(&config, &["calibration", "import", file.to_str().unwrap()]);
    let status = json(&config, &["status"]);
    let why = status["calibration_unavailable"]
        .as_str()
        .unwrap_or_else(|| panic!("{status:#}"));
    assert!(why.contains("bare has no stored"), "{why}");
    assert!(
        ok(&config, &["status"]).contains("calibration: gives no figure here: bare has no stored")
    );
    let report: serde_json::Value =
        serde_json::from_str(&ok(&config, &["report", "--format", "json"])).unwrap();
    assert!(
        report["notes"].as_array().unwrap().iter().any(|n| n
            .as_str()
            .unwrap()
            .starts_with("no estimate from the calibration: bare has no stored")),
        "{report:#}"
    );
}

/// `wattson report` on a host with no meter, in every format: the last 7 days estimated
/// from its calibration, priced as `calibration estimate` (`week`) prices it.
fn report_shows_the_same_estimate(config: &std::path::Path, week: &serde_json::Value) {
    let report: serde_json::Value =
        serde_json::from_str(&ok(config, &["report", "--format", "json"])).unwrap();
    let e = &report["estimated"];
    assert_eq!(e["cost"], week["cost"], "{report:#}");
    assert_eq!(e["energy_wh"], week["energy_wh"], "{report:#}");
    assert!(report["measured"].is_null(), "{report:#}");
    let year = week["cost"]["cost_per_year"].as_f64().unwrap();
    let title = "This machine: estimated from its calibration (no meter at the wall)";
    for format in ["table", "markdown", "html"] {
        let out = ok(config, &["report", "--format", format]);
        assert!(
            out.contains(title)
                && out.contains(&format!("GBP {year:.2} +/- GBP"))
                && out.contains("(estimated, not measured)")
                && out.contains("borrowed from e2e"),
            "{format}: {out}"
        );
    }
    let csv = ok(config, &["report", "--format", "csv"]);
    let line = csv
        .lines()
        .find(|l| l.starts_with("estimate:wall,estimated,estimated,"))
        .unwrap_or_else(|| panic!("{csv}"));
    let cost: f64 = line.split(',').nth(7).unwrap().parse().unwrap();
    assert!((cost - year).abs() < 0.005, "{csv}");
    assert!(
        line.contains(",\"estimated from the calibration of "),
        "{csv}"
    );
}

#[test]
fn another_host_of_the_same_hardware_borrows_the_calibration_and_says_so() {
    let day = usual_day();
    fit_morning(&day, &[]);
    let file = ok(&day.config, &["calibration", "export", "--format", "file"]);
    // The twin: the same fixture machine, its own day's signals, never a meter.
    let twin = day_of("twin", |_| false);
    let path = twin.env.path("e2e.calibration.json");
    std::fs::write(&path, &file).unwrap();
    let said = ok(
        &twin.config,
        &["calibration", "import", path.to_str().unwrap()],
    );
    assert!(
        said.contains("imported the calibration of e2e") && said.contains("borrowed from e2e"),
        "{said}"
    );
    let shown = json(&twin.config, &["calibration", "show"]);
    assert_eq!(shown["borrowed_from"], "e2e");
    assert_eq!(shown["host"], "twin");
    let e = json(
        &twin.config,
        &[
            "calibration",
            "estimate",
            "--since",
            &twin.t(METER_OUT),
            "--until",
            &twin.t(20 * 60),
        ],
    );
    assert!(
        e["provenance"]
            .as_str()
            .unwrap()
            .ends_with("borrowed from e2e"),
        "{e:#}"
    );
    assert!(e["minutes"].as_u64().unwrap() >= 330, "{e:#}");

    // With no meter, `status` shows the same estimate, priced the same: one answer.
    let week = json(&twin.config, &["calibration", "estimate", "--since", "7d"]);
    let status = json(&twin.config, &["status"]);
    let shown = &status["estimated"];
    assert!(
        status["cost"].is_null(),
        "no measured cost without a meter: {status:#}"
    );
    assert_eq!(shown["last_7_days"]["cost"], week["cost"], "{shown:#}");
    assert_eq!(shown["last_7_days"]["energy_wh"], week["energy_wh"]);
    assert!(
        shown["provenance"]
            .as_str()
            .unwrap()
            .ends_with("borrowed from e2e")
    );
    let text = ok(&twin.config, &["status"]);
    let year = week["cost"]["cost_per_year"].as_f64().unwrap();
    assert!(
        text.contains("no wall meter: estimated from the calibration of")
            && text.contains(&format!("GBP {year:.2} +/- GBP"))
            && text.contains("(estimated, not measured)"),
        "{text}"
    );
    report_shows_the_same_estimate(&twin.config, &week);
    without_its_signal_a_calibration_gives_no_figure_and_says_why(&twin, &path);

    // Other hardware, a model that is not whole, something else entirely, too large: 65,
    // and nothing stored.
    let mut other: serde_json::Value = serde_json::from_str(&file).unwrap();
    other["model"]["hardware"]["logical_cpus"] = 64.into();
    let mut broken: serde_json::Value = serde_json::from_str(&file).unwrap();
    broken["model"]["feature_spans"] = serde_json::json!([]);
    for (name, text, says) in [
        (
            "other-hardware.json",
            other.to_string(),
            "64 CPUs, this host has 2",
        ),
        ("broken.json", broken.to_string(), "not whole"),
        (
            "garbage.json",
            "{\"format\": 1".to_owned(),
            "not a wattson calibration file",
        ),
        (
            "huge.json",
            " ".repeat(2 << 20),
            "no calibration file is that large",
        ),
    ] {
        let p = twin.env.path(name);
        std::fs::write(&p, text).unwrap();
        let (code, _, err) = run(
            &twin.config,
            &["calibration", "import", p.to_str().unwrap()],
        );
        assert_eq!(code, 65, "{name}: {err}");
        assert!(err.contains(says), "{name}: {err}");
        assert_eq!(err.lines().count(), 1, "{name}: one line: {err}");
    }
    assert_eq!(
        json(&twin.config, &["calibration", "show"])["borrowed_from"],
        "e2e"
    );
}
