//! What a report prints of a candidate's name and figures (issue 44): HTML and Markdown in
//! a name are text in `--format markdown`, and a curve of 0 W is no candidate at all.

use std::path::{Path, PathBuf};

use wattson::store::{Store, StoreOptions, Writer};
use wattson_collectors::{Metric, Sample};
use wattson_tests::{TestEnv, q};

use super::run;

const HOUR_MS: i64 = 3_600_000;

/// Host `e2e`, the CPU off, GBP 0.09 a kWh; its database holds 240 W at the wall and a
/// 30 % busy CPU, every 10 s, for the six hours ending an hour ago.
fn measured(env: &TestEnv) -> PathBuf {
    let text = format!(
        "[host]\nname = \"e2e\"\n\n[storage]\npath = {}\n\n[cpu]\nenabled = false\n\n\
         [tariff]\ncurrency = \"GBP\"\nprice_per_kwh = 0.09\ntimezone = \"UTC\"\n",
        q(&env.db)
    );
    let path = env.path("wattson.toml");
    std::fs::write(&path, text).unwrap();
    let mut opts = StoreOptions {
        host: "e2e".into(),
        ..StoreOptions::default()
    };
    opts.spacing_ms.insert("meter:wall".into(), 10_000);
    let now = chrono::Utc::now().timestamp_millis();
    let t0 = (now / HOUR_MS - 7) * HOUR_MS;
    let mut w = Writer::new(Store::open(&env.db, &opts).unwrap(), opts.clone());
    let batch = (0..6 * 360)
        .flat_map(|i| {
            let t = t0 + i * 10_000;
            [
                Sample::new(t, "meter:wall", Metric::Power, "", 240.0),
                Sample::new(t, "cpu", Metric::CpuBusy, "all", 0.3),
            ]
        })
        .collect();
    w.push(None, batch);
    w.flush().unwrap();
    path
}

fn ok(config: &Path, args: &[&str]) -> String {
    let (code, out) = run(config, args);
    assert_eq!(code, Some(0), "wattson {args:?}: {out}");
    out
}

#[test]
fn html_in_a_candidates_name_is_text_in_markdown() {
    let env = TestEnv::new();
    let cfg = measured(&env);
    let names = [
        "<img src=x onerror=alert(1)>",
        "[click](javascript:alert(1)) `x` *y*",
    ];
    for name in names {
        ok(
            &cfg,
            &["candidate", "add", name, "--idle", "40", "--at", "100%=120"],
        );
    }
    let md = ok(&cfg, &["report", "--format", "markdown"]);
    println!("{md}");
    // No tag, comment or autolink can open: not one `<` in the document.
    assert!(!md.contains('<'), "{md}");
    assert!(
        md.contains("&lt;img src=x onerror=alert(1)&gt;"),
        "the name is not there as text: {md}"
    );
    assert!(
        md.contains(r"\[click\](javascript:alert(1)) \`x\` \*y\*"),
        "the link is not there as text: {md}"
    );
    // Each is one candidate's line, its figures after it.
    for escaped in ["&lt;img src=x onerror=alert(1)&gt;: ", r"\*y\*: "] {
        assert!(
            md.lines()
                .any(|l| l.starts_with("- ") && l.contains(escaped) && l.contains(" W mean")),
            "no candidate line for {escaped}: {md}"
        );
    }
}

#[test]
fn a_candidate_of_0_w_is_refused_at_add_import_and_set() {
    let env = TestEnv::new();
    let cfg = measured(&env);
    let reason = "is not a power a machine draws: above 0 W";
    let (code, out) = run(
        &cfg,
        &[
            "candidate",
            "add",
            "nothing",
            "--idle",
            "0",
            "--at",
            "100%=0",
        ],
    );
    assert_eq!(code, Some(65), "{out}");
    assert!(out.contains("0 W at 0 %") && out.contains(reason), "{out}");
    let (code, out) = run(
        &cfg,
        &[
            "candidate",
            "add",
            "idle-free",
            "--idle",
            "0",
            "--at",
            "100%=80",
        ],
    );
    assert_eq!(code, Some(65), "{out}");
    assert!(out.contains(reason), "{out}");
    let csv = env.path("two-point.csv");
    std::fs::write(
        &csv,
        "System,Hardware Vendor,avg. watts @ 100%,avg. watts @ active idle,overall ssj_ops/watt\n\
         Void V0,Void,0,0,5210\n",
    )
    .unwrap();
    let (code, out) = run(&cfg, &["candidate", "import", csv.to_str().unwrap()]);
    assert_eq!(code, Some(65), "{out}");
    assert!(out.contains("0 W") && out.contains(reason), "{out}");
    let list = ok(&cfg, &["candidate", "list", "--json"]);
    assert!(
        !list.contains("nothing") && !list.contains("Void"),
        "{list}"
    );
    // One stored as 0 W by another hand (the service user's database): `set` refuses it,
    // naming it and why, and changes nothing.
    ok(
        &cfg,
        &[
            "candidate",
            "add",
            "planted",
            "--idle",
            "40",
            "--at",
            "100%=120",
        ],
    );
    let conn = rusqlite::Connection::open(&env.db).unwrap();
    let zero = r#"[{"load":0.0,"watts":0.0},{"load":1.0,"watts":0.0}]"#;
    conn.execute(
        "UPDATE candidate SET curve = ?1 WHERE name = 'planted'",
        [zero],
    )
    .unwrap();
    let (code, out) = run(&cfg, &["candidate", "set", "planted", "--price", "1"]);
    assert_ne!(code, Some(0), "{out}");
    assert!(out.contains("\"planted\"") && out.contains(reason), "{out}");
    let price: Option<f64> = conn
        .query_row(
            "SELECT price FROM candidate WHERE name = 'planted'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(price, None);
    // Nor is it ranked first in a report: the report names it and why instead.
    let (code, out) = run(&cfg, &["report"]);
    assert_ne!(code, Some(0), "{out}");
    assert!(!out.contains("#1 planted"), "{out}");
    assert!(out.contains("\"planted\"") && out.contains(reason), "{out}");
}
