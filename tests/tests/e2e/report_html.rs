//! The HTML report as a browser draws it: `wattson report --format html` over an empty, a
//! one-day and a one-year database, laid out by headless Chromium. A probe script measures
//! what was drawn (`getBBox` of every bar and label in each chart) and the test checks it:
//! the per-day charts have one bar per day, each cost label sits above its bar, the headline
//! chart is at the measured duty cycle, and the C-state chart shows the busy share. At a
//! phone's width (390 px) and a desktop's (1280 px) the summary leads the report, no text is
//! clipped, every chart's text is 11 px or more and inside its chart, and each bar chart has
//! a slot per bar, its cheapest bar alone in green ([`layout`]). Screenshots are kept in
//! `target/tmp/report-html/` to be looked at; `WATTSON_UPDATE_DIST=1` also writes those of
//! the summary to `dashboards/report-390.png` and `dashboards/report-1280.png`.
//!
//! Needs Chromium (`apt-get install chromium`); skipped without it, except under CI=true,
//! where it fails.

// Helpers outside #[test] fns are test code too.
#![allow(clippy::panic, clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::Path;

mod layout;

use serde_json::Value;
use wattson::store::{Store, StoreOptions, Writer};
use wattson::sweep::outcome::LevelResult;
use wattson_collectors::{Metric, Sample};
use wattson_tests::browser::{chromium, headless};
use wattson_tests::{HOST, TestEnv, stdout_of, wattson};

const DAY_MS: i64 = 86_400_000;
/// The history's sampling interval: 5 minutes keeps a year of it small.
const STEP_MS: i64 = 300_000;

/// UTC midnight of today, ms.
fn today_ms() -> i64 {
    wattson_tests::now_ms() / DAY_MS * DAY_MS
}

/// A sweep of this machine (idle 40 W, 15 W a loop) with C-state residency per level.
fn store_sweep(store: &Store) {
    let levels = (0..=2)
        .map(|loops| {
            let idle_share = 0.9 - 0.4 * loops as f64;
            LevelResult {
                busy: Some(1.0 - idle_share),
                busy_cpus: Some(2.0 * (1.0 - idle_share)),
                residency: BTreeMap::from([
                    ("C1".to_owned(), idle_share * 0.2),
                    ("C6".to_owned(), idle_share * 0.8),
                ]),
                ..wattson_tests::sweep::level(loops)
            }
        })
        .collect();
    wattson_tests::sweep::save_basket(store, levels);
}

/// A database holding `days` days of wall power and CPU utilisation up to today's UTC
/// midnight (none: just the schema), and with history a sweep.
fn database(path: &Path, days: i64) {
    let mut options = StoreOptions {
        host: HOST.to_owned(),
        ..StoreOptions::default()
    };
    for source in ["meter:wall", "cpu"] {
        options.spacing_ms.insert(source.into(), STEP_MS);
    }
    let store = Store::open(path, &options).unwrap();
    if days == 0 {
        return;
    }
    store_sweep(&store);
    let mut writer = Writer::new(store, options);
    let end = today_ms();
    let mut ts = end - days * DAY_MS;
    let mut batch = Vec::new();
    while ts < end {
        // Busy in the evening, and more on weekends; a little noise.
        let hour = (ts % DAY_MS) / 3_600_000;
        let day = ts / DAY_MS;
        let busy = if (18..23).contains(&hour) { 0.6 } else { 0.05 }
            + 0.1 * f64::from(day % 7 == 0)
            + 0.02 * ((ts / STEP_MS) % 5) as f64;
        batch.push(Sample::new(
            ts,
            "meter:wall",
            Metric::Power,
            "",
            40.0 + 30.0 * busy,
        ));
        batch.push(Sample::new(ts, "cpu", Metric::CpuBusy, "all", busy));
        if batch.len() >= 20_000 {
            writer.push(Some(HOST.to_owned()), std::mem::take(&mut batch));
            writer.flush().unwrap();
        }
        ts += STEP_MS;
    }
    writer.push(Some(HOST.to_owned()), batch);
    writer.flush().unwrap();
}

/// Measures every chart as Chromium lays it out and appends the figures as JSON.
const PROBE: &str = r"<script>
(function () {
  const figures = [];
  for (const svg of document.querySelectorAll('figure svg')) {
    // Each chart is drawn twice, for a desktop's width and a phone's: the one shown.
    if (svg.getBoundingClientRect().width === 0) continue;
    const size = svg.getBBox();
    const texts = [...svg.querySelectorAll('text')].map(t => {
      const b = t.getBBox();
      return { text: t.textContent.trim(), x: b.x, y: b.y, w: b.width, h: b.height };
    });
    const rects = [...svg.querySelectorAll('rect')].map(r => {
      const b = r.getBBox();
      return { x: b.x, y: b.y, w: b.width, h: b.height, fill: r.getAttribute('fill') || '' };
    }).filter(r => !(r.x <= 0 && r.y <= 0 && r.w >= size.width - 1));
    figures.push({ texts, rects });
  }
  const pre = document.createElement('pre');
  pre.id = 'wattson-probe';
  pre.textContent = JSON.stringify({ figures, text: document.body.innerText });
  document.body.appendChild(pre);
})();
</script>";

/// The report of `db` in Chromium: the probe's JSON, with a screenshot saved as `shot`.
fn render(chromium: &Path, env: &TestEnv, db: &Path, shot: &Path) -> Value {
    let config =
        env.config("\n[tariff]\ncurrency = \"EUR\"\nprice_per_kwh = 0.30\ntimezone = \"UTC\"\n");
    let html = env.path("report.html");
    stdout_of(
        wattson()
            .arg("--config")
            .arg(&config)
            .args(["report", "--format", "html", "--db"])
            .arg(db)
            .arg("--out")
            .arg(&html),
    );
    let text = std::fs::read_to_string(&html).unwrap();

    let profile = tempfile::tempdir().unwrap();
    let shot_out = headless(chromium, profile.path())
        .arg(format!("--screenshot={}", shot.display()))
        .arg("--window-size=1100,3000")
        .arg(format!("file://{}", html.display()))
        .output()
        .unwrap();
    assert!(
        shot.metadata().is_ok_and(|m| m.len() > 10_000),
        "no screenshot at {}: {}",
        shot.display(),
        String::from_utf8_lossy(&shot_out.stderr)
    );

    let probed = env.path("probed.html");
    std::fs::write(&probed, text.replace("</body>", &format!("{PROBE}</body>"))).unwrap();
    let profile = tempfile::tempdir().unwrap();
    let dom = headless(chromium, profile.path())
        .arg("--dump-dom")
        .arg(format!("file://{}", probed.display()))
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&dom.stdout);
    let Some((escaped, _)) = dom
        .split_once("<pre id=\"wattson-probe\">")
        .and_then(|(_, rest)| rest.split_once("</pre>"))
    else {
        panic!("no probe output in Chromium's DOM:\n{dom}");
    };
    let json = escaped
        .replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    serde_json::from_str(&json).unwrap()
}

/// The figure whose texts include `caption`.
fn figure<'a>(probe: &'a Value, caption: &str) -> Option<&'a Value> {
    probe["figures"].as_array().unwrap().iter().find(|f| {
        f["texts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["text"].as_str().unwrap().contains(caption))
    })
}

/// Bars (filled rectangles that are not white) of a figure.
fn bars(fig: &Value) -> Vec<&Value> {
    fig["rects"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| {
            let fill = r["fill"].as_str().unwrap().to_ascii_uppercase();
            !fill.is_empty()
                && fill != "#FFFFFF"
                && fill != "NONE"
                && r["h"].as_f64().unwrap() > 0.5
        })
        .collect()
}

fn check_history(probe: &Value, days: usize) {
    for caption in ["Energy per day", "Cost per day"] {
        let fig = figure(probe, caption).unwrap_or_else(|| panic!("no {caption:?} chart"));
        let drawn = bars(fig);
        assert_eq!(
            drawn.len(),
            days,
            "{caption}: {} bars for {days} days",
            drawn.len()
        );
        assert!(
            drawn.iter().all(|b| b["w"].as_f64().unwrap() >= 1.0),
            "{caption}: bars too thin"
        );
    }

    // The headline chart: each configuration at the measured duty cycle, its label above
    // its bar.
    let fig = figure(probe, "Annual cost per configuration").expect("annual cost chart");
    let texts = fig["texts"].as_array().unwrap();
    assert!(
        texts
            .iter()
            .any(|t| t["text"].as_str().unwrap().contains("measured duty cycle")),
        "{texts:?}"
    );
    let labels: Vec<&Value> = texts
        .iter()
        .filter(|t| {
            t["text"]
                .as_str()
                .unwrap()
                .strip_prefix("EUR ")
                .is_some_and(|v| v.parse::<f64>().is_ok())
        })
        .collect();
    let drawn = bars(fig);
    assert!(
        !labels.is_empty() && labels.len() == drawn.len(),
        "labels {labels:?}, bars {drawn:?}, texts {texts:?}"
    );
    for l in labels {
        let centre = l["x"].as_f64().unwrap() + l["w"].as_f64().unwrap() / 2.0;
        let bar = drawn
            .iter()
            .find(|b| {
                let x = b["x"].as_f64().unwrap();
                x <= centre && centre <= x + b["w"].as_f64().unwrap()
            })
            .unwrap_or_else(|| panic!("label {l} over no bar"));
        let label_bottom = l["y"].as_f64().unwrap() + l["h"].as_f64().unwrap();
        assert!(
            label_bottom <= bar["y"].as_f64().unwrap() + 0.5,
            "label {l} overlaps its bar {bar}"
        );
    }

    // C-states with the busy share.
    let fig = figure(probe, "C-state residency").expect("C-state chart");
    assert!(
        fig["texts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["text"] == "busy (C0)"),
        "no busy share in the C-state chart"
    );
}

#[test]
fn the_html_report_draws_an_empty_a_one_day_and_a_year_database() {
    let Some(chromium) = chromium() else {
        return;
    };
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report-html");
    std::fs::create_dir_all(&shots).unwrap();
    let env = TestEnv::new();

    let empty = env.path("empty.db");
    database(&empty, 0);
    let probe = render(&chromium, &env, &empty, &shots.join("empty.png"));
    assert!(probe["figures"].as_array().unwrap().is_empty());
    assert!(
        probe["text"]
            .as_str()
            .unwrap()
            .contains("Nothing to chart yet"),
        "{probe}"
    );

    let day = env.path("day.db");
    database(&day, 1);
    let probe = render(&chromium, &env, &day, &shots.join("one-day.png"));
    check_history(&probe, 1);

    let year = env.path("year.db");
    database(&year, 365);
    let probe = render(&chromium, &env, &year, &shots.join("year.png"));
    check_history(&probe, 365);
}
