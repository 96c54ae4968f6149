//! A machine wattson swept, on another host, as a candidate, through the real binary:
//! `wattson candidate from-sweep` reads the sweep from that host's database file, its curve
//! is the levels' watts at k busy CPUs of N, and its throughput over this machine's is the
//! two sweeps' spin-loop rates with every CPU busy. `wattson report` then prices it on this
//! machine's measured load (the hand year of the sweep's curve by hour of the week, the cost
//! to the cent) and says where the curve and the ratio came from in every format. Sweeps that
//! cannot make a curve (short of every CPU, another loop kind, none) are refused with 65.
#![allow(clippy::unwrap_used, clippy::panic, clippy::missing_panics_doc)]

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;
use wattson::store::{Store, StoreOptions, Writer};
use wattson::sweep::fingerprint::Fingerprint;
use wattson::sweep::outcome::{LevelResult, SweepOutcome, fit_kind};
use wattson::sweep::workload::LoopKind;
use wattson_collectors::cpu::topology::CpuFacts;
use wattson_collectors::{Metric, Sample};
use wattson_tests::{hand_year, q, wattson};

const HOST: &str = "e2e";
const PRICE: f64 = 0.09;
const HOUR_MS: i64 = 3_600_000;
/// This machine's load: 24 h at 10 %, 12 h at 50 %, 12 h at 80 % of its maximum.
const PROFILE: [(i64, f64); 3] = [(24, 0.1), (12, 0.5), (12, 0.8)];
/// The other host's sweep: 4 CPUs, (loops, W, spin operations/s).
const MINI: [(usize, f64, f64); 5] = [
    (0, 11.0, 0.0),
    (1, 19.0, 1.5e6),
    (2, 25.0, 3.0e6),
    (3, 30.0, 4.5e6),
    (4, 34.0, 6.0e6),
];
/// This machine's sweep: 2 CPUs.
const THIS: [(usize, f64, f64); 3] = [(0, 40.0, 0.0), (1, 55.0, 1.0e6), (2, 70.0, 2.0e6)];

fn config(dir: &Path, db: &Path) -> std::path::PathBuf {
    let text = format!(
        "[host]\nname = \"{HOST}\"\n\n[storage]\npath = {}\n\n[cpu]\nenabled = false\n\n\
         [tariff]\ncurrency = \"GBP\"\nprice_per_kwh = {PRICE}\ntimezone = \"UTC\"\n",
        q(db)
    );
    let path = dir.join("wattson.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// A constant 70 W at the wall and the profile's CPU load, every 10 s, ending an hour ago;
/// returns where it starts, UTC ms.
fn history(db: &Path) -> i64 {
    let mut opts = StoreOptions {
        host: HOST.into(),
        ..StoreOptions::default()
    };
    opts.spacing_ms.insert("meter:wall".into(), 10_000);
    let hours: i64 = PROFILE.iter().map(|p| p.0).sum();
    let now = chrono::Utc::now().timestamp_millis();
    let mut t = (now / HOUR_MS - hours - 1) * HOUR_MS;
    let start = t;
    let mut w = Writer::new(Store::open(db, &opts).unwrap(), opts.clone());
    for (h, busy) in PROFILE {
        let end = t + h * HOUR_MS;
        let mut batch = Vec::new();
        while t < end {
            batch.push(Sample::new(t, "meter:wall", Metric::Power, "", 70.0));
            batch.push(Sample::new(t, "cpu", Metric::CpuBusy, "all", busy));
            t += 10_000;
        }
        w.push(None, batch);
        w.flush().unwrap();
    }
    start
}

/// Stores a complete spin sweep of `levels` on a host of `cpus` CPUs as `name` in `db`.
fn sweep(db: &Path, host: &str, name: &str, cpus: usize, levels: &[(usize, f64, f64)]) {
    let opts = StoreOptions {
        host: host.into(),
        ..StoreOptions::default()
    };
    let store = Store::open(db, &opts).unwrap();
    let levels: Vec<LevelResult> = levels
        .iter()
        .map(|&(loops, watts, ops)| LevelResult {
            kind: LoopKind::Spin,
            loops,
            started_ms: 1_764_547_200_000,
            ended_ms: 1_764_547_260_000,
            settle_s: 5.0,
            n: 60,
            mean_w: watts,
            sd_w: 0.5,
            ci95_w: 0.2,
            ci_method: "batch means".into(),
            min_w: watts - 1.0,
            max_w: watts + 1.0,
            mean_mhz: None,
            busy: Some(loops as f64 / cpus as f64),
            busy_cpus: Some(loops as f64),
            residency: BTreeMap::new(),
            ops_per_s: ops,
            joules_per_op: None,
            components: BTreeMap::new(),
            component_ranges: BTreeMap::new(),
            pinned: true,
            smt_siblings: false,
            warnings: Vec::new(),
        })
        .collect();
    let fits = fit_kind(LoopKind::Spin, &levels, cpus)
        .into_iter()
        .collect();
    let outcome = SweepOutcome {
        levels,
        fits,
        complete: true,
        started_ms: 1_764_547_200_000,
        ended_ms: 1_764_547_500_000,
    };
    let fp = Fingerprint {
        host: host.into(),
        cpu: CpuFacts {
            model_name: Some(format!("{host} CPU")),
            logical_cpus: cpus,
            physical_cores: cpus,
            packages: 1,
            ..CpuFacts::default()
        },
        memory_bytes: Some(8 << 30),
        kernel: None,
        meter: "pzem004t wall on /dev/ttyUSB0".into(),
    };
    wattson::sweep::persist::save(&store, name, &fp, &outcome, &serde_json::json!({})).unwrap();
}

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

/// Annual kWh of the other host's curve on this machine's profile (from `start`) at
/// `ratio`, by hand.
fn hand_kwh(ratio: f64, start: i64) -> f64 {
    let pts: Vec<(f64, f64)> = MINI.iter().map(|l| (l.0 as f64 / 4.0, l.1)).collect();
    hand_year::year_kwh(&PROFILE, start, |u| hand_year::curve_at(&pts, u / ratio))
}

#[test]
fn a_machine_swept_on_another_host_is_priced_on_this_load_with_its_measured_throughput() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("w.db");
    let other = dir.path().join("mini.db");
    let start = history(&db);
    sweep(&db, HOST, "this box", 2, &THIS);
    sweep(&other, "mini", "mini", 4, &MINI);
    sweep(&other, "mini", "half", 4, &MINI[..3]);
    let cfg = config(dir.path(), &db);
    let from = other.to_str().unwrap();

    // Sweeps that cannot be a curve: refused with what to do, nothing stored.
    for (args, says) in [
        (vec!["--configuration", "half"], "up to 2 of its 4 CPUs"),
        (
            vec!["--configuration", "mini", "--kind", "memory"],
            "not swept with memory loops",
        ),
        (vec!["--configuration", "nope"], "no sweep of configuration"),
    ] {
        let mut all = vec!["candidate", "from-sweep", "x", "--from", from];
        all.extend(args);
        let (code, _, err) = run(&cfg, &all);
        assert_eq!(code, 65, "{all:?}: {err}");
        assert!(err.contains(says), "{all:?}: {err}");
    }
    assert!(ok(&cfg, &["candidate", "list"]).contains("no candidates"));

    let shown: Value = serde_json::from_str(&ok(
        &cfg,
        &[
            "candidate",
            "from-sweep",
            "mini",
            "--configuration",
            "mini",
            "--from",
            from,
            "--price",
            "350",
            "--json",
        ],
    ))
    .unwrap();
    assert_eq!(shown["curve_kind"], "measured", "{shown}");
    assert_eq!(shown["threads"], 4, "{shown}");
    let ratio = shown["perf_ratio"].as_f64().unwrap();
    // 6.0e6 spin operations/s with 4 CPUs busy over this box's 2.0e6 with 2.
    assert!((ratio - 3.0).abs() < 1e-9, "{shown}");
    let basis = shown["perf_ratio_basis"].as_str().unwrap();
    assert!(
        basis.contains("\"mini\"") && basis.contains("\"this box\""),
        "{basis}"
    );
    let points: Vec<(f64, f64)> = shown["curve"]["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["load"].as_f64().unwrap(), p["watts"].as_f64().unwrap()))
        .collect();
    assert_eq!(
        points,
        vec![
            (0.0, 11.0),
            (0.25, 19.0),
            (0.5, 25.0),
            (0.75, 30.0),
            (1.0, 34.0)
        ]
    );

    let json: Value = serde_json::from_str(&ok(
        &cfg,
        &["report", "--format", "json", "--candidates", "mini"],
    ))
    .unwrap();
    let c = &json["candidates"];
    let mini = &c["candidates"][0];
    let want = hand_kwh(3.0, start);
    let kwh = mini["annual_kwh"].as_f64().unwrap();
    assert!((kwh - want).abs() / want < 1e-9, "{kwh} kWh, hand {want}");
    // To the cent: within half a cent of the hand figure (comparing two roundings would
    // fail on a figure that lands on a half cent, as 131.1667 kWh at 0.09 does).
    let cost = mini["annual_cost"].as_f64().unwrap();
    assert!(
        (cost - want * PRICE).abs() < 0.005,
        "{cost}, hand {}",
        want * PRICE
    );
    assert_eq!(mini["perf_ratio_from"], "from sweep loop rates", "{mini}");
    assert_eq!(mini["interpolated"], false, "{mini}");
    let keep = c["keep"]["annual_cost"].as_f64().unwrap();
    let payback = mini["payback_years"].as_f64().unwrap();
    assert!(
        (payback - 350.0 / (keep - want * PRICE)).abs() < 0.01,
        "{mini}"
    );
    for format in ["table", "markdown", "csv", "html"] {
        let text = ok(
            &cfg,
            &["report", "--format", format, "--candidates", "mini"],
        );
        assert!(
            text.contains("measured at the wall by a sweep"),
            "{format}: no curve basis"
        );
        assert!(
            text.contains("from sweep loop rates"),
            "{format}: no ratio basis"
        );
    }

    // The ratio given by hand replaces the measured one, and says so.
    ok(&cfg, &["candidate", "set", "mini", "--perf-ratio", "2"]);
    let shown = ok(&cfg, &["candidate", "show", "mini"]);
    assert!(shown.contains("perf ratio: 2 (given)"), "{shown}");
}
