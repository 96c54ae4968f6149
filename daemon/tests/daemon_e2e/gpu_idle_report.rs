//! `wattson report`'s GPU section over the real H200 capture
//! (`collectors/tests/fixtures/gpu-h200/`): the nvidia-smi CSV through the collector's
//! parser, each row stored at its own time in a temp SQLite store, then gathered, built and
//! rendered in every format. The capture shows 77 W bare idle (SM clock 345 MHz, no
//! process), 119.6 W idle with a CUDA context resident (clock held at 1980 MHz), ~690 W
//! under load.
//!
//! gpu0 is stored as captured (no process count: the SM-clock rule decides); gpu1 is the
//! same capture with the process count the phase log implies (0 before the context was
//! created, 1 after), so the process-count rule decides.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use wattson::analysis::gpu_idle::Rule;
use wattson::config::Config;
use wattson::report::gather::gather_from_store;
use wattson::report::{self, Format, Report};
use wattson::report::{ReportRequest, input_from_config};
use wattson::store::{Store, StoreOptions, Writer};
use wattson_collectors::power::nvidia_smi;
use wattson_collectors::{Metric, Sample};

const HOST: &str = "h200";
const PRICE: f64 = 0.30;

fn config() -> Config {
    let text = format!(
        "[host]\nname = \"{HOST}\"\n\n[tariff]\ncurrency = \"GBP\"\nprice_per_kwh = {PRICE}\n\
         timezone = \"UTC\"\n"
    );
    Config::from_toml(&text, Path::new("gpu.toml")).unwrap()
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../collectors/tests/fixtures/gpu-h200")
        .join(name)
}

/// `idle0 start` of h200-phases.txt, ms: the load script has just created its context.
fn context_created_ms() -> i64 {
    let text = std::fs::read_to_string(fixture("h200-phases.txt")).unwrap();
    let secs: f64 = text
        .lines()
        .find(|l| l.starts_with("idle0 start "))
        .and_then(|l| l.split_whitespace().nth(2))
        .unwrap()
        .parse()
        .unwrap();
    (secs * 1000.0) as i64
}

/// The capture as samples of gpu0 (as captured) and gpu1 (with process counts); rows
/// before `keep_from_ms` are dropped.
fn replayed(keep_from_ms: i64) -> Vec<Sample> {
    let text = std::fs::read_to_string(fixture("h200-nvidia-smi-power.csv")).unwrap();
    let rows = nvidia_smi::parse_csv(&text).unwrap();
    assert_eq!(rows.len(), 307);
    // The power ramp of the new context shows in the row 50 ms before the `idle0` mark.
    let context_ms = context_created_ms() - 1_000;
    let mut out = Vec::new();
    for mut row in rows {
        // The capture has no `index` column (one GPU, one row per poll).
        row.index = 0;
        let ts = row.timestamp_ms.unwrap();
        if ts < keep_from_ms {
            continue;
        }
        out.extend(nvidia_smi::samples(std::slice::from_ref(&row), None, ts));
        let mut gpu1 = nvidia_smi::samples(std::slice::from_ref(&row), None, ts);
        for s in &mut gpu1 {
            s.channel = "gpu1".into();
        }
        let procs = if ts < context_ms { 0.0 } else { 1.0 };
        gpu1.push(Sample::new(ts, "gpu", Metric::GpuProcesses, "gpu1", procs));
        out.extend(gpu1);
    }
    out
}

fn report_over(samples: Vec<Sample>) -> Report {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("wattson.db");
    let options = StoreOptions {
        host: HOST.into(),
        ..StoreOptions::default()
    };
    let mut w = Writer::new(Store::open(&db, &options).unwrap(), options);
    w.push(None, samples);
    w.flush().unwrap();
    drop(w);
    let now: DateTime<Utc> = "2026-11-30T00:00:00Z".parse().unwrap();
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
    assert!(data.measured.is_none(), "no wall meter in this store");
    let input = input_from_config(&config(), data, &args(Format::Table), now).unwrap();
    report::build(&input).unwrap()
}

fn args(format: Format) -> ReportRequest {
    ReportRequest::new(format)
}

#[test]
fn h200_capture_prices_the_resident_process() {
    let r = report_over(replayed(i64::MIN));
    assert_eq!(r.gpus.len(), 2);
    let (g0, g1) = (&r.gpus[0], &r.gpus[1]);
    assert_eq!((g0.channel.as_str(), g0.rule), ("gpu0", Rule::SmClock));
    assert_eq!((g1.channel.as_str(), g1.rule), ("gpu1", Rule::ProcessCount));
    for g in [g0, g1] {
        let bare = g.idle_bare_watts.unwrap();
        let resident = g.idle_resident_watts.unwrap();
        let busy = g.busy_watts.unwrap();
        let extra = g.resident_extra_watts.unwrap();
        eprintln!(
            "{}: bare {bare:.2} W {:.3}, resident {resident:.2} W {:.3}, busy {busy:.2} W {:.3}, \
             unclassified {:.3}, extra {extra:.2} W, GBP {:.2}/yr observed, GBP {:.2}/yr all year",
            g.channel,
            g.idle_bare_share,
            g.idle_resident_share,
            g.busy_share,
            g.unclassified_share,
            g.resident_annual_cost.unwrap(),
            g.resident_all_year_cost.unwrap()
        );
        assert!(
            (bare - 76.93).abs() < 0.1,
            "{}: bare idle {bare} W",
            g.channel
        );
        // Settled resident idle: 119.6 W before any load, ~120.1 W while it cools after.
        assert!(
            (119.5..120.5).contains(&resident),
            "{}: resident idle {resident} W",
            g.channel
        );
        assert!(
            (42.6..43.6).contains(&extra),
            "{}: extra {extra} W",
            g.channel
        );
        assert!((extra - (resident - bare)).abs() < 1e-9);
        // Busy: full load (~690 W) and half duty (~505 W) together.
        assert!(
            (500.0..700.0).contains(&busy),
            "{}: busy {busy} W",
            g.channel
        );
        let shares =
            g.busy_share + g.idle_resident_share + g.idle_bare_share + g.unclassified_share;
        assert!((shares - 1.0).abs() < 1e-9, "{shares}");
        assert!(g.idle_bare_share > 0.05 && g.idle_resident_share > 0.3);
        // Priced at the tariff: W x share x 8760 h / 1000 x price.
        let kwh = extra * g.idle_resident_share * 8.76;
        assert!((g.resident_annual_kwh.unwrap() - kwh).abs() < 1e-9);
        assert!((g.resident_annual_cost.unwrap() - kwh * PRICE).abs() < 1e-9);
        assert!((g.resident_all_year_cost.unwrap() - extra * 8.76 * PRICE).abs() < 1e-9);
        // ~43 W all year at 0.30 is about GBP 113.
        assert!((110.0..115.0).contains(&g.resident_all_year_cost.unwrap()));
    }
    // The clock rule and the process count agree on this capture.
    assert!((g0.idle_resident_share - g1.idle_resident_share).abs() < 0.02);
    assert!((g0.resident_extra_watts.unwrap() - g1.resident_extra_watts.unwrap()).abs() < 0.3);

    let table = report::render(&r, Format::Table).unwrap();
    eprintln!("{table}");
    assert!(
        table.contains("GPU idle: what a resident process costs"),
        "{table}"
    );
    assert!(
        table.contains("gpu0: idle classified by the SM clock"),
        "{table}"
    );
    assert!(table.contains("gpu1: idle classified by the recorded compute-process count"));
    let extra_text = format!("adds {:.1} W at idle", g0.resident_extra_watts.unwrap());
    let cost_text = format!(
        "GBP {:.2}/yr if resident all year",
        g0.resident_all_year_cost.unwrap()
    );
    for format in [Format::Table, Format::Markdown, Format::Html] {
        let text = report::render(&r, format).unwrap();
        assert!(text.contains(&extra_text), "{format:?}: {text}");
        assert!(text.contains(&cost_text), "{format:?}: {text}");
        assert!(text.contains("idle bare 76.9 W"), "{format:?}: {text}");
    }

    let json: serde_json::Value =
        serde_json::from_str(&report::render(&r, Format::Json).unwrap()).unwrap();
    let j0 = &json["gpus"][0];
    assert_eq!(j0["rule"], "sm_clock");
    assert_eq!(json["gpus"][1]["rule"], "process_count");
    assert!((j0["idle_bare_watts"].as_f64().unwrap() - g0.idle_bare_watts.unwrap()).abs() < 1e-9);
    assert!(j0["resident_annual_cost"].as_f64().unwrap() > 0.0);

    let csv = report::render(&r, Format::Csv).unwrap();
    let row = |mode: &str| {
        csv.lines()
            .find(|l| l.starts_with(&format!("gpu0,gpu,{mode},")))
            .unwrap_or_else(|| panic!("no gpu0 {mode} row in\n{csv}"))
            .split(',')
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    let bare: f64 = row("idle bare")[3].parse().unwrap();
    assert!((bare - g0.idle_bare_watts.unwrap()).abs() < 1e-3, "{bare}");
    let all_year = row("resident process all year");
    assert_eq!(
        all_year[7],
        format!("{:.2}", g0.resident_all_year_cost.unwrap())
    );
    assert_eq!(
        row("resident process")[7],
        format!("{:.2}", g0.resident_annual_cost.unwrap())
    );
}

#[test]
fn without_a_bare_baseline_the_report_says_so() {
    // From the moment the context exists: resident idle and load, never bare.
    let r = report_over(replayed(context_created_ms()));
    let g1 = r.gpus.iter().find(|g| g.channel == "gpu1").unwrap();
    assert!(g1.idle_bare_watts.is_none() && g1.resident_extra_watts.is_none());
    assert!(g1.resident_annual_cost.is_none());
    assert!((119.5..120.5).contains(&g1.idle_resident_watts.unwrap()));
    // gpu0 has no count, and its clock never dropped to idle: the clock cannot tell.
    let g0 = r.gpus.iter().find(|g| g.channel == "gpu0").unwrap();
    assert_eq!(g0.rule, Rule::None);
    assert!(g0.idle_resident_watts.is_none());
    let table = report::render(&r, Format::Table).unwrap();
    assert!(
        table.contains("gpu1: no bare idle (no process) was observed"),
        "{table}"
    );
    assert!(!table.contains("if resident all year"), "{table}");
    assert!(table.contains("idle bare not seen"), "{table}");
}
