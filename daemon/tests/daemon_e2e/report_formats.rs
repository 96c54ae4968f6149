//! `wattson report` in every format over DESIGN.md's reference table: two machines measured
//! by hand at 0.09 GBP/kWh. 240 W all year = 2102.4 kWh = GBP 189.22; the idle saving from
//! the Opteron to the Athlon is 162 W = 1419.12 kWh = GBP 127.72 a year, so a GBP 300
//! upgrade pays for itself in 300 / 127.7208 = 2.35 years.

// Helpers outside #[test] functions unwrap too: a failure is the test failing.
#![allow(clippy::unwrap_used, clippy::many_single_char_names)]

use std::collections::BTreeMap;
use std::path::Path;

use chrono::{DateTime, Utc};
use wattson::config::Config;
use wattson::report::gather::StoreData;
use wattson::report::{
    self, ConfigInput, ConfigKind, ConfigStatus, FitInput, Format, LevelInput, MeasuredInput,
};
use wattson::report::{ReportRequest, input_from_config};

const OPTERON: &str = "2x Opteron 2.2 GHz, 6 disks";
const ATHLON: &str = "Athlon 64 1.8 GHz, 3 disks";

const CONFIG: &str = r#"
[host]
name = "basket"

[tariff]
currency = "GBP"
price_per_kwh = 0.09
timezone = "Europe/London"

[[config]]
name = "2x Opteron 2.2 GHz, 6 disks"
modes = { standby = 40.0, idle = 240.0, "1 loop" = 260.0, "2 loops" = 280.0 }

[[config]]
name = "Athlon 64 1.8 GHz, 3 disks"
modes = { standby = 4.0, idle = 78.0, "1 loop" = 111.0, "2 loops" = 111.0 }
upgrade_cost = 300.0
"#;

fn now() -> DateTime<Utc> {
    "2026-01-15T12:00:00Z".parse().unwrap()
}

fn args(format: Format) -> ReportRequest {
    ReportRequest::new(format)
}

fn config() -> Config {
    Config::from_toml(CONFIG, Path::new("design.toml")).unwrap()
}

fn report_of(
    args: &ReportRequest,
    extra: Vec<ConfigInput>,
    measured: Option<MeasuredInput>,
) -> report::Report {
    let store = StoreData {
        configs: extra,
        measured,
        regression: Vec::new(),
        gpus: vec![],
        ..StoreData::default()
    };
    let input = input_from_config(&config(), store, args, now()).unwrap();
    report::build(&input).unwrap()
}

fn rendered(format: Format) -> String {
    let a = args(format);
    report::render(&report_of(&a, vec![], None), format).unwrap()
}

/// The figures every format must show.
const FIGURES: [&str; 6] = ["2102.4", "189.22", "1419.12", "127.72", "683.28", "61.5"];

#[test]
fn table_reads_like_the_design_table_with_costs() {
    let t = rendered(Format::Table);
    println!("{t}");
    for f in FIGURES {
        assert!(t.contains(f), "missing {f} in\n{t}");
    }
    assert!(t.contains("240 W  2102.4 kWh  GBP 189.22/yr"), "{t}");
    assert!(t.contains("78 W  683.28 kWh  GBP 61.50/yr"), "{t}");
    assert!(t.contains("pays for itself in 2.35 years"), "{t}");
    // Aligned: every row's second column starts where the header's does.
    let lines: Vec<&str> = t.lines().collect();
    let header = lines
        .iter()
        .find(|l| l.starts_with("Mode \\ Config"))
        .unwrap();
    let col = header.find(OPTERON).unwrap();
    let second = header.find(ATHLON).unwrap();
    let mut ends = Vec::new();
    for mode in ["standby", "idle", "1 loop", "2 loops"] {
        let row = lines
            .iter()
            .find(|l| l.starts_with(&format!("{mode} ")))
            .unwrap();
        assert!(row[..col].ends_with("   "), "{mode}: {row:?}");
        // Units line up: each column's " W", " kWh" and "/yr" at the same offsets.
        ends.push((
            row[col..].find(" W").unwrap() + col,
            row[col..].find("/yr").unwrap() + col,
            row[second..].find(" W").unwrap() + second,
            row[second..].find("/yr").unwrap() + second,
        ));
    }
    assert!(ends.windows(2).all(|w| w[0] == w[1]), "{ends:?}\n{t}");
}

#[test]
fn markdown_has_the_table_and_the_saving() {
    let m = rendered(Format::Markdown);
    for f in FIGURES {
        assert!(m.contains(f), "missing {f} in\n{m}");
    }
    assert!(
        m.contains("| idle | 240 W  2102.4 kWh  GBP 189.22/yr | 78 W  683.28 kWh  GBP 61.50/yr |"),
        "{m}"
    );
    assert!(m.contains("|---|---|---|"), "{m}");
    assert!(m.contains("2.35 years"), "{m}");
}

/// RFC 4180 fields of one line (quotes, doubled quotes).
fn csv_fields(line: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                chars.next();
                out.last_mut().unwrap().push('"');
            }
            ('"', _) => quoted = !quoted,
            (',', false) => out.push(String::new()),
            (c, _) => out.last_mut().unwrap().push(c),
        }
    }
    assert!(!quoted, "unterminated quote in {line:?}");
    out
}

#[test]
fn csv_parses_with_one_row_per_config_and_mode() {
    let c = rendered(Format::Csv);
    let mut lines = c.lines();
    let header = csv_fields(lines.next().unwrap());
    assert_eq!(header, report::render::csv::HEADER);
    let rows: Vec<BTreeMap<String, String>> = lines
        .map(|l| {
            let f = csv_fields(l);
            assert_eq!(f.len(), header.len(), "{l}");
            header.iter().cloned().zip(f).collect()
        })
        .collect();
    assert_eq!(rows.len(), 8);
    let row = |config: &str, mode: &str| {
        rows.iter()
            .find(|r| r["config"] == config && r["mode"] == mode)
            .unwrap()
    };
    let o = row(OPTERON, "idle");
    assert_eq!(
        (o["watts"].as_str(), o["annual_kwh"].as_str()),
        ("240", "2102.4")
    );
    assert_eq!(o["annual_cost"], "189.22");
    assert_eq!(o["ci95_watts"], "");
    assert_eq!(o["kind"], "manual");
    let a = row(ATHLON, "idle");
    assert_eq!(a["annual_kwh_saved_vs_baseline"], "1419.12");
    assert_eq!(a["annual_saving_vs_baseline"], "127.72");
    assert_eq!(a["payback_years"], "2.35");
    assert_eq!(row(ATHLON, "standby")["payback_years"], "");
    assert_eq!(row(ATHLON, "2 loops")["annual_cost"], "87.51");
}

fn close(a: &serde_json::Value, b: f64) -> bool {
    a.as_f64().is_some_and(|a| (a - b).abs() < 1e-6)
}

#[test]
fn json_has_the_contract_fields() {
    let j: serde_json::Value = serde_json::from_str(&rendered(Format::Json)).unwrap();
    assert_eq!(j["currency"], "GBP");
    assert!(close(&j["price_per_kwh"], 0.09));
    assert!(close(&j["year_hours"], 8760.0));
    let configs = j["configs"].as_array().unwrap();
    assert_eq!(configs.len(), 2);
    assert_eq!(configs[0]["name"], OPTERON);
    let idle = &configs[0]["modes"][1];
    assert_eq!(idle["name"], "idle");
    assert!(close(&idle["watts"], 240.0));
    assert!(close(&idle["annual_kwh"], 2102.4));
    assert!(close(&idle["annual_cost"], 189.216));
    // Measured by hand: no interval (there, null: not known), no fit.
    assert!(
        idle.get("ci95_watts")
            .is_some_and(serde_json::Value::is_null)
    );
    assert!(configs[0].get("fit").is_none());
    let c = &j["comparisons"][0];
    assert_eq!(
        (c["from"].as_str(), c["to"].as_str()),
        (Some(OPTERON), Some(ATHLON))
    );
    assert!(close(&c["annual_saving"], 127.7208));
    assert!(close(&c["annual_kwh_saved"], 1419.12));
    assert!(close(&c["payback_years"], 300.0 / 127.7208));
    assert_eq!(c["mode"], "idle");
}

#[test]
fn upgrade_cost_option_and_co2_reach_the_comparison() {
    let mut a = args(Format::Json);
    a.upgrade_cost = Some(100.0);
    a.co2 = Some(200.0);
    a.mode = Some("2 loops".into());
    let r = report_of(&a, vec![], None);
    let c = &r.comparisons[0];
    // (280 - 111) W = 169 W = 1480.44 kWh = GBP 133.2396; 100 / 133.2396 years.
    assert!((c.annual_saving - 133.2396).abs() < 1e-9);
    assert!((c.payback_years.unwrap() - 100.0 / 133.2396).abs() < 1e-9);
    assert!((c.co2_kg_saved.unwrap() - 1480.44 * 0.2).abs() < 1e-9);
    assert!((r.configs[0].modes[1].annual_co2_kg.unwrap() - 2102.4 * 0.2).abs() < 1e-9);
    // Reversed order: the Athlon is the baseline and moving to the Opteron saves nothing.
    let mut b = args(Format::Json);
    b.configs = Some(format!("athlon,{OPTERON}"));
    let r = report_of(&b, vec![], None);
    assert_eq!(r.configs[0].name, ATHLON);
    assert!(r.comparisons[0].annual_saving < 0.0);
    assert_eq!(r.comparisons[0].payback_years, None);
}

/// The JSON inside `<script type="application/json" id="wattson-report">`.
fn embedded_json(html: &str) -> serde_json::Value {
    let open = "<script type=\"application/json\" id=\"wattson-report\">";
    let start = html.find(open).unwrap() + open.len();
    let end = start + html[start..].find("</script>").unwrap();
    serde_json::from_str(&html[start..end]).unwrap()
}

fn assert_self_contained(html: &str) {
    let svg_ns = "http://www.w3.org/2000/svg";
    let without = html.replace(&format!("xmlns=\"{svg_ns}\""), "");
    assert!(!without.contains("http://"), "external http reference");
    assert!(!without.contains("https://"), "external https reference");
    assert!(!html.contains("<link") && !html.contains("<img") && !html.contains(" src="));
}

#[test]
fn html_is_self_contained_with_charts_and_the_json() {
    let a = args(Format::Html);
    let r = report_of(&a, vec![], None);
    let html = report::render(&r, Format::Html).unwrap();
    for f in FIGURES {
        assert!(html.contains(f), "missing {f}");
    }
    assert!(html.contains("2.35 years"));
    assert_self_contained(&html);
    // Phone-ready: the viewport is the device's, and the wide table scrolls in its box.
    assert!(html.contains("<meta name=\"viewport\" content=\"width=device-width"));
    assert!(html.contains("<div class=\"scroll\">\n<table>"));
    // Watts per level and annual cost per configuration, each for a desktop and a phone.
    assert_eq!(html.matches("<svg").count(), 4);
    assert!(
        html.contains("Watts per load level") && html.contains("Annual cost per configuration")
    );
    // Manual figures have no intervals, so no error bars.
    assert!(!html.contains(&error_bar_colour()));
    let json: serde_json::Value =
        serde_json::from_str(&report::render(&r, Format::Json).unwrap()).unwrap();
    assert_eq!(embedded_json(&html), json);
}

fn error_bar_colour() -> String {
    let c = report::render::charts::ERROR_BAR;
    format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2)
}

fn sweep() -> ConfigInput {
    let levels = (0..=4)
        .map(|n| {
            let busy = f64::from(n) / 4.0;
            LevelInput {
                kind: "spin".into(),
                loops: n,
                mean_w: 40.0 + 15.0 * f64::from(n),
                ci95_w: 0.8,
                residency: BTreeMap::from([
                    ("C0".to_string(), 0.05 + 0.9 * busy),
                    ("C1".to_string(), 0.05),
                    ("C6".to_string(), 0.9 - 0.9 * busy),
                ]),
                mean_mhz: Some(1400.0 + 400.0 * busy),
                ops_per_s: Some(4e8 * f64::from(n)),
                joules_per_op: None,
                warnings: vec![],
            }
        })
        .collect();
    ConfigInput {
        name: "basket </script> now".into(),
        kind: ConfigKind::Sweep,
        host: Some("basket".into()),
        fingerprint: Some(serde_json::json!({"cpu": "Ryzen 5 5600G"})),
        description: None,
        modes: vec![],
        fit: Some(FitInput {
            idle_watts: 40.1,
            idle_ci95: Some(0.4),
            watts_per_loop: 14.98,
            watts_per_loop_ci95: Some(0.2),
            r2: 0.9995,
            notes: vec!["later loops cost more".into()],
            kind: "spin".into(),
        }),
        levels,
        upgrade_cost: None,
        status: ConfigStatus::Partial,
        paired: None,
        schedule: None,
    }
}

#[test]
fn a_sweep_renders_error_bars_residency_and_its_fit() {
    let a = args(Format::Html);
    let r = report_of(&a, vec![sweep()], None);
    let html = report::render(&r, Format::Html).unwrap();
    assert_self_contained(&html);
    assert!(html.contains(&error_bar_colour()), "no error bars");
    // Each of 5 levels gets a bar and two caps.
    let bars = html
        .matches(&format!("stroke=\"{}\"", error_bar_colour()))
        .count();
    assert!(bars >= 15, "{bars} error-bar paths");
    assert!(html.contains("C-state residency per level"));
    assert_eq!(html.matches("<svg").count(), 6);
    // A name that would end the script block is escaped and survives the round trip.
    assert!(!html.contains("basket </script> now"));
    let json: serde_json::Value =
        serde_json::from_str(&report::render(&r, Format::Json).unwrap()).unwrap();
    assert_eq!(embedded_json(&html), json);
    let s = &json["configs"][2];
    assert!(close(&s["fit"]["idle_watts"], 40.1));
    assert!(close(&s["fit"]["watts_per_loop"], 14.98));
    assert!(close(&s["fit"]["r2"], 0.9995));
    assert!(close(&s["modes"][1]["ci95_watts"], 0.8));
    assert_eq!(s["status"], "partial");
    let t = report::render(&r, Format::Table).unwrap();
    assert!(t.contains("55.0 ± 0.8 W"), "{t}");
    assert!(
        t.contains("idle 40.1 ± 0.4 W, 14.98 ± 0.20 W per spin loop, r2 1.000"),
        "{t}"
    );
    assert!(t.contains("later loops cost more"), "{t}");
    assert!(t.contains("interrupted"), "{t}");
}

#[test]
fn measured_history_adds_daily_charts_and_the_modelled_cost() {
    // Two days at 100 W but for a two-hour gap, half a CPU busy throughout.
    let h = 3_600_000;
    let t0 = "2026-01-10T00:00:00Z"
        .parse::<DateTime<Utc>>()
        .unwrap()
        .timestamp_millis();
    let energy: Vec<(i64, i64, f64)> = (0..48)
        .filter(|i| !(10..12).contains(i))
        .map(|i| (t0 + i * h, t0 + (i + 1) * h, 100.0))
        .collect();
    let m = MeasuredInput {
        from_ms: t0,
        to_ms: t0 + 48 * h,
        energy,
        covered_ms: 46 * h,
        gaps: vec![(t0 + 10 * h, t0 + 12 * h, "meter unplugged".into())],
        utilisation: (0..48)
            .map(|i| (t0 + i * h, t0 + (i + 1) * h, 0.5))
            .collect(),
        cpus: 4,
        config: None,
        ..MeasuredInput::default()
    };
    let a = args(Format::Html);
    let r = report_of(&a, vec![sweep()], Some(m));
    let mr = r.measured.as_ref().unwrap();
    assert!((mr.annual_kwh - 876.0).abs() < 1e-9, "{}", mr.annual_kwh);
    let md = mr.modelled.as_ref().unwrap();
    // 40.1 + 14.98 x 0.5 = 47.59 W all year = 416.8884 kWh.
    assert!((md.annual_kwh - 416.8884).abs() < 1e-9);
    assert!((mr.difference_kwh_percent.unwrap() - (416.8884 / 876.0 - 1.0) * 100.0).abs() < 1e-9);
    assert_eq!(mr.daily.len(), 2);
    assert!((mr.daily[0].kwh - 2.2).abs() < 1e-9 && (mr.daily[1].kwh - 2.4).abs() < 1e-9);
    let html = report::render(&r, Format::Html).unwrap();
    assert!(html.contains("Energy per day") && html.contains("Cost per day"));
    assert_self_contained(&html);
    let t = report::render(&r, Format::Table).unwrap();
    assert!(
        t.contains("(0.0900 GBP/kWh on average): 876 kWh, GBP 78.84/yr"),
        "{t}"
    );
    assert!(t.contains("meter unplugged"), "{t}");
    assert!(t.contains("-52.4% in energy"), "{t}");
}

#[test]
fn the_binary_writes_the_report_to_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("wattson.toml");
    std::fs::write(&cfg, CONFIG).unwrap();
    let out = dir.path().join("report.csv");
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_wattson"))
        .arg("--config")
        .arg(&cfg)
        .args(["report", "--format", "csv", "--db"])
        .arg(dir.path().join("none.db"))
        .arg("--out")
        .arg(&out)
        .status()
        .unwrap();
    assert!(status.success());
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.contains("189.22") && text.contains("127.72"), "{text}");
    let bad = std::process::Command::new(env!("CARGO_BIN_EXE_wattson"))
        .arg("--config")
        .arg(&cfg)
        .args(["report", "--mode", "turbo"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("turbo"));
}
