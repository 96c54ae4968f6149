//! Real tariffs through the real binary: `wattson tariff import` of files written from the
//! published formats (`daemon/tests/fixtures/tariff/`: an Octopus Agile day with negative
//! slots, the Europe/London clock-change day, two API pages, an ENTSO-E day-ahead export on
//! the CET change day, a GB carbon-intensity day), each hostile file refused whole and
//! named by line and field, the measured energy priced per slot by `wattson report` (to the
//! penny of the hand-computed sum) and beside other tariffs with `--tariffs`, and the live
//! price of `[tariff] price_topic` over a real broker into `wattson status`, kept across a
//! restart, with bad payloads counted and never applied.
#![allow(clippy::unwrap_used, clippy::panic, clippy::missing_panics_doc)]

use std::path::{Path, PathBuf};

use serde_json::Value;
use wattson::store::{Store, StoreOptions, Writer};
use wattson_collectors::{Metric, Sample};
use wattson_tests::{q, wattson, workspace_root};

mod hostile;
mod live;

const HOST: &str = "e2e";
/// The configured flat price, GBP per kWh.
const FLAT: f64 = 0.245;

fn fixture(name: &str) -> PathBuf {
    workspace_root()
        .join("daemon/tests/fixtures/tariff")
        .join(name)
}

fn ms(s: &str) -> i64 {
    chrono::DateTime::parse_from_rfc3339(s)
        .unwrap()
        .timestamp_millis()
}

fn config(dir: &Path, db: &Path, currency: &str, extra: &str) -> PathBuf {
    let text = format!(
        "[host]\nname = \"{HOST}\"\n\n[storage]\npath = {}\nflush_interval = \"200ms\"\n\n[cpu]\n\
         enabled = false\n\n[tariff]\ncurrency = \"{currency}\"\nprice_per_kwh = {FLAT}\n\
         timezone = \"Europe/London\"\n{extra}",
        q(db)
    );
    let path = dir.join("wattson.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// A constant `watts` on `meter:wall` from `from_ms` to `to_ms` inclusive, every 10 s,
/// written through the store's real writer.
fn measured(db: &Path, watts: f64, from_ms: i64, to_ms: i64) {
    let mut opts = StoreOptions {
        host: HOST.into(),
        ..StoreOptions::default()
    };
    opts.spacing_ms.insert("meter:wall".into(), 10_000);
    let mut w = Writer::new(Store::open(db, &opts).unwrap(), opts.clone());
    let samples: Vec<Sample> = (from_ms..=to_ms)
        .step_by(10_000)
        .map(|t| Sample::new(t, "meter:wall", Metric::Power, "", watts))
        .collect();
    for chunk in samples.chunks(5000) {
        w.push(None, chunk.to_vec());
        w.flush().unwrap();
    }
}

/// `wattson --config CONFIG ARGS`: (exit code, stdout, stderr).
fn run(config: &Path, args: &[&str]) -> (i32, String, String) {
    let out = wattson()
        .arg("--config")
        .arg(config)
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn ok(config: &Path, args: &[&str]) -> String {
    let (code, out, err) = run(config, args);
    assert_eq!(code, 0, "wattson {args:?}: {err}");
    out
}

/// `wattson tariff import` of the named fixture files, which must succeed; its output.
fn import_fixtures(config: &Path, names: &[&str]) -> String {
    let paths: Vec<String> = names
        .iter()
        .map(|n| fixture(n).to_str().unwrap().to_owned())
        .collect();
    let mut args = vec!["tariff", "import"];
    args.extend(paths.iter().map(String::as_str));
    ok(config, &args)
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// Σ slot hours x slot price of an Octopus file (inc VAT, pence -> GBP), over slots
/// inside `from..to`: the hand computation, apart from wattson's code.
fn octopus_sum(file: &str, from: i64, to: i64) -> (f64, usize) {
    let v = json(&std::fs::read_to_string(fixture(file)).unwrap());
    let mut sum = 0.0;
    let mut n = 0;
    for r in v["results"].as_array().unwrap() {
        let a = ms(r["valid_from"].as_str().unwrap());
        let b = ms(r["valid_to"].as_str().unwrap());
        if a >= from && b <= to {
            sum += (b - a) as f64 / 3_600_000.0 * r["value_inc_vat"].as_f64().unwrap() / 100.0;
            n += 1;
        }
    }
    (sum, n)
}

fn penny(what: &str, got: f64, want: f64) {
    assert!(
        (got - want).abs() < 0.005,
        "{what}: {got} against the hand-computed {want}"
    );
}

fn series_count(config: &Path) -> usize {
    json(&ok(config, &["tariff", "list", "--json"]))
        .as_array()
        .unwrap()
        .len()
}

#[test]
fn a_measured_day_at_100_w_on_an_agile_day_costs_the_sum_of_its_slots() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("w.db");
    let (from, to) = (ms("2026-11-29T00:00:00Z"), ms("2026-11-30T00:00:00Z"));
    measured(&db, 100.0, from, to);
    let cfg = config(dir.path(), &db, "GBP", "");
    let out = import_fixtures(&cfg, &["agile-2026-11-29.json"]);
    assert!(out.contains("imported 48 price slots"), "{out}");
    assert!(out.contains("48 new, 0 changed, 0 unchanged"), "{out}");
    assert!(out.contains("4 slot(s) with a negative price"), "{out}");
    let (sum, n) = octopus_sum("agile-2026-11-29.json", from, to);
    assert_eq!(n, 48);
    let want = 0.1 * sum;
    let r = json(&ok(
        &cfg,
        &["report", "--format", "json", "--tariffs", "current,tariff"],
    ));
    let m = &r["measured"];
    penny(
        "measured energy cost",
        m["energy_cost"].as_f64().unwrap(),
        want,
    );
    assert!((m["energy_cost"].as_f64().unwrap() - want).abs() < 1e-9);
    assert!((m["kwh"].as_f64().unwrap() - 2.4).abs() < 1e-9);
    let t = &r["tariffs"];
    assert_eq!(t["fallback_kwh"].as_f64(), Some(0.0));
    assert_eq!(t["priced_by"][0]["source"], "octopus");
    let rows = t["comparison"].as_array().unwrap();
    assert_eq!(rows[0]["name"], "current");
    penny("current", rows[0]["cost"].as_f64().unwrap(), want);
    assert_eq!(rows[1]["name"], "tariff");
    penny("flat", rows[1]["cost"].as_f64().unwrap(), 2.4 * FLAT);
    // Annual: the day's cost x 365 (24 h covered).
    penny(
        "annual current",
        rows[0]["annual_cost"].as_f64().unwrap(),
        want * 365.0,
    );
    let cheapest = if want < 2.4 * FLAT {
        "current"
    } else {
        "tariff"
    };
    assert_eq!(t["cheapest"], cheapest);
    // The series' window is stated with the annual figures.
    let basis = t["price_basis"]["text"].as_str().unwrap();
    assert!(
        basis.contains("octopus") && basis.contains("2026-11-29 00:00 UTC"),
        "{basis}"
    );
    eprintln!(
        "100 W on the Agile day: GBP {want:.4} (0.1 kW x sum of slot hours x price); flat GBP {:.4}",
        2.4 * FLAT
    );
    // Every format carries the section.
    let table = ok(&cfg, &["report", "--tariffs", "current,tariff"]);
    assert!(table.contains("Real tariffs"), "{table}");
    assert!(table.contains("cheapest for this machine"), "{table}");
    let md = ok(
        &cfg,
        &[
            "report",
            "--format",
            "markdown",
            "--tariffs",
            "current,tariff",
        ],
    );
    assert!(md.contains("## Real tariffs"), "{md}");
    let csv = ok(
        &cfg,
        &["report", "--format", "csv", "--tariffs", "current,tariff"],
    );
    assert!(
        csv.lines()
            .any(|l| l.starts_with("current,tariff,measured,")),
        "{csv}"
    );
    assert!(
        csv.lines()
            .any(|l| l.starts_with("tariff,tariff,measured,")),
        "{csv}"
    );
    let html = ok(
        &cfg,
        &["report", "--format", "html", "--tariffs", "current,tariff"],
    );
    assert!(html.contains("Real tariffs"));
}

#[test]
fn agile_kept_to_compare_beside_the_flat_tariff() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("w.db");
    let (from, to) = (ms("2026-11-29T00:00:00Z"), ms("2026-11-30T00:00:00Z"));
    measured(&db, 100.0, from, to);
    let cfg = config(
        dir.path(),
        &db,
        "GBP",
        "[[tariff.alternative]]\nname = \"economy7\"\nprice_per_kwh = 0.30\n\
         [[tariff.alternative.period]]\nstart = \"00:30\"\nend = \"07:30\"\nprice_per_kwh = 0.12\n",
    );
    let out = ok(
        &cfg,
        &[
            "tariff",
            "import",
            "--name",
            "agile",
            "--compare-only",
            fixture("agile-2026-11-29.json").to_str().unwrap(),
        ],
    );
    assert!(out.contains("kept to compare"), "{out}");
    let r = json(&ok(
        &cfg,
        &[
            "report",
            "--format",
            "json",
            "--tariffs",
            "current,agile,economy7",
        ],
    ));
    // Not applied: the measured energy is at the flat price.
    penny(
        "measured",
        r["measured"]["energy_cost"].as_f64().unwrap(),
        2.4 * FLAT,
    );
    let rows = r["tariffs"]["comparison"].as_array().unwrap();
    let (sum, _) = octopus_sum("agile-2026-11-29.json", from, to);
    penny("agile", rows[1]["cost"].as_f64().unwrap(), 0.1 * sum);
    // Economy 7: 7 h at 0.12, 17 h at 0.30 (GMT: local = UTC), 100 W.
    penny(
        "economy7",
        rows[2]["cost"].as_f64().unwrap(),
        0.1 * (7.0 * 0.12 + 17.0 * 0.30),
    );
    let costs: Vec<f64> = rows
        .iter()
        .map(|x| x["annual_cost"].as_f64().unwrap())
        .collect();
    let best = costs.iter().copied().fold(f64::INFINITY, f64::min);
    penny(
        "saving",
        r["tariffs"]["cheapest_saving_per_year"].as_f64().unwrap(),
        costs[0] - best,
    );
    let table = ok(&cfg, &["report", "--tariffs", "current,agile,economy7"]);
    eprintln!(
        "{}",
        table
            .lines()
            .skip_while(|l| !l.starts_with("Real tariffs"))
            .take(8)
            .collect::<Vec<_>>()
            .join("\n")
    );
    let (code, _, err) = run(&cfg, &["report", "--tariffs", "current,tibber"]);
    assert_ne!(code, 0);
    assert!(
        err.contains("no tariff \"tibber\"") && err.contains("agile"),
        "{err}"
    );
}

#[test]
fn the_london_clock_change_day_prices_twenty_five_hours() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("w.db");
    // Local midnight to midnight on 25 October 2026: 25 hours.
    let (from, to) = (ms("2026-10-24T23:00:00Z"), ms("2026-10-26T00:00:00Z"));
    measured(&db, 100.0, from, to);
    let cfg = config(dir.path(), &db, "GBP", "");
    let out = import_fixtures(&cfg, &["agile-2026-10-25-dst.json"]);
    assert!(out.contains("imported 50 price slots"), "{out}");
    let (sum, n) = octopus_sum("agile-2026-10-25-dst.json", from, to);
    assert_eq!(n, 50);
    let r = json(&ok(&cfg, &["report", "--format", "json"]));
    assert!((r["measured"]["kwh"].as_f64().unwrap() - 2.5).abs() < 1e-9);
    penny(
        "25 h day",
        r["measured"]["energy_cost"].as_f64().unwrap(),
        0.1 * sum,
    );
    // One local day in the daily figures, of 2.5 kWh.
    let daily = r["measured"]["daily"].as_array().unwrap();
    let day = daily.iter().find(|d| d["date"] == "2026-10-25").unwrap();
    assert!((day["kwh"].as_f64().unwrap() - 2.5).abs() < 1e-9, "{day}");
}

#[test]
fn slots_without_a_price_fall_back_and_the_report_says_how_much() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("w.db");
    let (from, to) = (ms("2026-11-29T00:00:00Z"), ms("2026-11-30T00:00:00Z"));
    measured(&db, 100.0, from, to);
    let cfg = config(dir.path(), &db, "GBP", "");
    // Page 1 only: the afternoon (newest first), 12:00-24:00.
    let out = import_fixtures(&cfg, &["agile-page-1.json"]);
    assert!(out.contains("next page"), "{out}");
    let r = json(&ok(&cfg, &["report", "--format", "json"]));
    let t = &r["tariffs"];
    assert!(
        (t["fallback_kwh"].as_f64().unwrap() - 1.2).abs() < 1e-9,
        "{t}"
    );
    let (sum, _) = octopus_sum("agile-page-1.json", from, to);
    penny(
        "half agile, half flat",
        r["measured"]["energy_cost"].as_f64().unwrap(),
        0.1 * sum + 1.2 * FLAT,
    );
    let notes = t["notes"].as_array().unwrap();
    assert!(
        notes.iter().any(|n| n
            .as_str()
            .unwrap()
            .contains("1.200 kWh of the measured 2.400 kWh")),
        "{notes:?}"
    );
    // Both pages at once: the whole day, none left to the fallback.
    let out = import_fixtures(&cfg, &["agile-page-1.json", "agile-page-2.json"]);
    assert!(out.contains("24 new, 0 changed, 24 unchanged"), "{out}");
    let r = json(&ok(&cfg, &["report", "--format", "json"]));
    assert_eq!(r["tariffs"]["fallback_kwh"].as_f64(), Some(0.0));
}

#[test]
fn an_overlapping_import_replaces_by_source_and_counts_what_changed() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("w.db");
    let cfg = config(dir.path(), &db, "GBP", "");
    let file = fixture("agile-2026-11-29.json");
    ok(&cfg, &["tariff", "import", file.to_str().unwrap()]);
    // The same day again, six prices revised.
    let mut v = json(&std::fs::read_to_string(&file).unwrap());
    for r in v["results"].as_array_mut().unwrap().iter_mut().take(6) {
        r["value_inc_vat"] = (r["value_inc_vat"].as_f64().unwrap() + 1.0).into();
    }
    let revised = dir.path().join("revised.json");
    std::fs::write(&revised, v.to_string()).unwrap();
    let out = ok(&cfg, &["tariff", "import", revised.to_str().unwrap()]);
    assert!(
        out.contains("0 new, 6 changed, 42 unchanged; 6 stored slot(s) replaced"),
        "{out}"
    );
    // Another source is left alone.
    let out = ok(
        &cfg,
        &[
            "tariff",
            "import",
            "--name",
            "other",
            file.to_str().unwrap(),
        ],
    );
    assert!(out.contains("48 new"), "{out}");
    assert_eq!(series_count(&cfg), 2);
    let out = ok(&cfg, &["tariff", "list"]);
    assert!(
        out.contains("octopus") && out.contains("other") && out.contains("48 slots"),
        "{out}"
    );
}

#[test]
fn day_ahead_csv_is_converted_from_mwh_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("w.db");
    let cfg = config(dir.path(), &db, "EUR", "");
    let out = import_fixtures(&cfg, &["entsoe-de-lu-2026-10-25.csv"]);
    assert!(
        out.contains("imported 24 price slots (entsoe-csv, EUR/kWh)"),
        "{out}"
    );
    assert!(out.contains("prices in EUR/MWh, divided by 1000"), "{out}");
    assert!(out.contains("1 slot(s) had no price"), "{out}");
    let list = json(&ok(&cfg, &["tariff", "list", "--json"]));
    assert_eq!(
        list[0]["from_ms"].as_i64(),
        Some(ms("2026-10-24T22:00:00Z"))
    );
    assert_eq!(list[0]["to_ms"].as_i64(), Some(ms("2026-10-25T23:00:00Z")));
    let out = import_fixtures(&cfg, &["nordpool-se3-2026-11-30.csv"]);
    assert!(
        out.contains("imported 24 price slots (nordpool-csv"),
        "{out}"
    );
}

#[test]
fn carbon_per_slot_from_the_gb_api() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("w.db");
    let (from, to) = (ms("2026-11-29T00:00:00Z"), ms("2026-11-30T00:00:00Z"));
    measured(&db, 100.0, from, to);
    let cfg = config(dir.path(), &db, "GBP", "");
    let out = import_fixtures(&cfg, &["carbon-2026-11-29.json"]);
    assert!(out.contains("imported 48 carbon slots"), "{out}");
    let v = json(&std::fs::read_to_string(fixture("carbon-2026-11-29.json")).unwrap());
    let want_kg: f64 = v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            let i = &d["intensity"];
            let g = i["actual"].as_f64().or(i["forecast"].as_f64()).unwrap();
            0.05 * g / 1000.0
        })
        .sum();
    let r = json(&ok(&cfg, &["report", "--format", "json", "--co2", "200"]));
    let c = &r["tariffs"]["carbon"];
    assert!(
        (c["co2_kg"].as_f64().unwrap() - want_kg).abs() < 1e-9,
        "{c}"
    );
    assert!((c["annual_co2_kg"].as_f64().unwrap() - want_kg * 365.0).abs() < 1e-6);
    assert_eq!(c["fallback_kwh"].as_f64(), Some(0.0));
    // The measured energy is still priced by the flat tariff.
    penny(
        "flat",
        r["measured"]["energy_cost"].as_f64().unwrap(),
        2.4 * FLAT,
    );
}
