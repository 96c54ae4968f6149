//! What a report prints of a candidate's name (issue 44): HTML and Markdown in a name are
//! text in `--format markdown`.

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
