//! The live page's charts over a stored history, through the real binary: nine days of a
//! wall meter written through the store's writer (30 W from 01:00 to 07:00 UTC, 80 W
//! otherwise, a sample a minute, the last hour a sample a second, and a 20-minute hole three
//! hours ago), then the daemon reading its meter. `/history.json` carries the stored power
//! minute by minute with the hole as a break, the last hour in 5 s steps, the host's mode
//! levels, and each day's energy and cost equal to `wattson report`'s to the cent; in
//! Chromium at 390 and 1280 CSS px the four charts are drawn, every label is at least 11 px
//! and inside its chart, no two tick labels touch, the power line breaks at the hole, and
//! the lines go on from `/live.json` without the history being read again. Screenshots at
//! both widths go to `target/tmp/live-page/`, and with `WATTSON_UPDATE_DIST=1` to
//! `dashboards/live-page-390.png` and `dashboards/live-page-1280.png` (README.md and
//! docs/http-prometheus.md show them).

use serde_json::{Value, json};
use wattson::store::{HOUR_MS, MINUTE_MS, Store, StoreOptions, Writer};
use wattson_collectors::{Metric, Sample};
use wattson_tests::browser::{Page, chromium};
use wattson_tests::ledger::run;
use wattson_tests::{HOST, TestEnv, wait_for};

use super::{LiveDaemon, screenshot};

const NIGHT_W: f64 = 30.0;
const DAY_W: f64 = 80.0;
const PRICE: f64 = 0.30;
const DAY_MS: i64 = 24 * HOUR_MS;

/// The seeded meter's watts at `t` (UTC ms): 30 W from 01:00 to 07:00 UTC, 80 W otherwise.
fn watts_at(t: i64) -> f64 {
    let hour = t.rem_euclid(DAY_MS) / HOUR_MS;
    if (1..7).contains(&hour) {
        NIGHT_W
    } else {
        DAY_W
    }
}

/// What was stored: the hole's start and end (UTC ms).
struct Seeded {
    hole: (i64, i64),
}

/// Nine days of `meter:wall` from noon UTC nine days ago to two minutes ago: a sample a
/// minute, a sample a second over the last 70 minutes (the spacing the daemon's 250 ms meter
/// judges pairs by), none in the 20 minutes from three hours ago.
fn seed(env: &TestEnv, now: i64) -> Seeded {
    let mut opts = StoreOptions {
        host: HOST.into(),
        ..StoreOptions::default()
    };
    opts.spacing_ms.insert("meter:wall".into(), MINUTE_MS);
    let end = now / MINUTE_MS * MINUTE_MS - 2 * MINUTE_MS;
    let start = (now / DAY_MS - 9) * DAY_MS + 12 * HOUR_MS;
    let fine_from = end - 70 * MINUTE_MS;
    let hole_start = (now - 3 * HOUR_MS) / MINUTE_MS * MINUTE_MS;
    let hole = (hole_start, hole_start + 20 * MINUTE_MS);
    let mut w = Writer::new(Store::open(&env.db, &opts).unwrap(), opts.clone());
    let mut batch = Vec::new();
    let mut t = start;
    while t <= end {
        if !(hole.0..hole.1).contains(&t) {
            batch.push(Sample::new(t, "meter:wall", Metric::Power, "", watts_at(t)));
        }
        t += if t >= fine_from { 1000 } else { MINUTE_MS };
        if batch.len() >= 5000 {
            w.push(None, std::mem::take(&mut batch));
            w.flush().unwrap();
        }
    }
    w.push(None, batch);
    w.flush().unwrap();
    Seeded { hole }
}

/// Every chart's labels as the browser laid them out: any smaller than 11 px (the font size
/// times the SVG's own scale), outside its SVG's box, or touching another tick label.
const LAYOUT: &str = r"JSON.stringify((() => {
  const out = { charts: {}, problems: [], width: document.documentElement.scrollWidth, viewport: window.innerWidth };
  for (const svg of document.querySelectorAll('svg.chart-svg')) {
    const box = svg.getBoundingClientRect();
    const vb = svg.viewBox.baseVal;
    const scale = vb && vb.width ? box.width / vb.width : 1;
    const texts = Array.from(svg.querySelectorAll('text'));
    const line = svg.querySelector('path.line');
    out.charts[svg.id] = {
      width: box.width,
      bars: svg.querySelectorAll('rect.bar').length,
      moves: line ? line.getAttribute('d').split('M').length - 1 : 0,
      y: texts.filter((t) => t.classList.contains('y')).map((t) => t.textContent),
      x: texts.filter((t) => t.classList.contains('x')).map((t) => t.textContent),
      levels: texts.filter((t) => t.classList.contains('level-label')).map((t) => t.textContent),
    };
    for (const t of texts) {
      const r = t.getBoundingClientRect();
      const px = parseFloat(getComputedStyle(t).fontSize) * scale;
      if (px < 11) { out.problems.push(svg.id + ': ' + t.textContent + ' at ' + px + ' px'); }
      if (r.left < box.left - 0.5 || r.right > box.right + 0.5 || r.top < box.top - 0.5 || r.bottom > box.bottom + 0.5) {
        out.problems.push(svg.id + ': ' + t.textContent + ' outside its chart');
      }
    }
    const ticks = texts.filter((t) => t.classList.contains('tick')).map((t) => [t.textContent, t.getBoundingClientRect()]);
    for (let i = 0; i < ticks.length; i++) {
      for (let j = i + 1; j < ticks.length; j++) {
        const a = ticks[i][1], b = ticks[j][1];
        if (a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom) {
          out.problems.push(svg.id + ': ' + ticks[i][0] + ' touches ' + ticks[j][0]);
        }
      }
    }
  }
  const big = document.getElementById('projection');
  out.headline = { text: big.textContent, px: parseFloat(getComputedStyle(big).fontSize), basis: document.getElementById('projection-basis').textContent };
  out.drawn = window.wattsonHistoryDrawn || 0;
  out.marker = window.wattsonProbe || null;
  return out;
})())";

fn layout(cdp: &mut Page) -> Value {
    cdp.eval(LAYOUT)
        .as_str()
        .and_then(|s| serde_json::from_str(s).ok())
        .unwrap_or(Value::Null)
}

/// Waits until the page's layout satisfies `ok`; the layout then.
fn wait_layout(cdp: &mut Page, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let l = layout(cdp);
        if ok(&l) {
            return l;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the page never showed {what}: {l}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// The checks every width must pass: four charts, a bar a day, labels readable and inside,
/// round ticks in readable units, a headline with its basis, nothing wider than the screen.
fn assert_laid_out(l: &Value, days: usize, viewport: f64) {
    assert_eq!(l["problems"], json!([]), "{l}");
    assert!(
        l["width"].as_f64().unwrap() <= viewport,
        "wider than {viewport}: {l}"
    );
    let chart = |id: &str| &l["charts"][id];
    for id in [
        "chart-day-svg",
        "chart-hour-svg",
        "chart-kwh-svg",
        "chart-cost-svg",
    ] {
        assert!(chart(id).is_object(), "no {id}: {l}");
        assert!(chart(id)["x"].as_array().unwrap().len() >= 2, "{id}: {l}");
    }
    assert_eq!(chart("chart-kwh-svg")["bars"], days, "{l}");
    assert_eq!(chart("chart-cost-svg")["bars"], days, "{l}");
    // The hole three hours ago, and the stretch between the stored history and the
    // daemon's first reading: the day's line is drawn in at least two pieces.
    assert!(
        chart("chart-day-svg")["moves"].as_u64().unwrap() >= 2,
        "{l}"
    );
    assert!(
        chart("chart-hour-svg")["moves"].as_u64().unwrap() >= 1,
        "{l}"
    );
    assert!(
        chart("chart-day-svg")["levels"]
            .as_array()
            .unwrap()
            .contains(&json!("idle 30 W")),
        "{l}"
    );
    // Round ticks in readable units: 1.62 kWh a day, 48.6 cents.
    let labels = |id: &str, unit: &str| -> Vec<f64> {
        chart(id)["y"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| {
                let text = v.as_str().unwrap();
                let n = text
                    .strip_suffix(unit)
                    .unwrap_or_else(|| panic!("{text:?} is not in {unit}: {l}"));
                n.parse::<f64>().unwrap()
            })
            .collect()
    };
    for (id, unit) in [
        ("chart-kwh-svg", " kWh"),
        ("chart-cost-svg", " ¢"),
        ("chart-day-svg", " W"),
    ] {
        let v = labels(id, unit);
        assert!(v.len() >= 3 && v[0] == 0.0, "{id}: {v:?}");
        let step = v[1];
        for (i, x) in v.iter().enumerate() {
            assert!((x - step * i as f64).abs() < 1e-9, "{id}: {v:?}");
        }
        let mantissa = step / 10f64.powf(step.log10().floor());
        assert!(
            [1.0, 2.0, 2.5, 5.0]
                .iter()
                .any(|m| (m - mantissa).abs() < 1e-9),
            "{id}: a step of {step}"
        );
    }
    assert!(
        l["headline"]["text"].as_str().unwrap().ends_with("/yr"),
        "{l}"
    );
    assert!(l["headline"]["px"].as_f64().unwrap() >= 30.0, "{l}");
    assert!(!l["headline"]["basis"].as_str().unwrap().is_empty(), "{l}");
}

#[test]
fn the_charts_draw_the_stored_history_readably_and_price_days_as_the_report_does() {
    let Some(chromium) = chromium() else {
        return;
    };
    let env = TestEnv::new();
    let now = chrono::Utc::now().timestamp_millis();
    let seeded = seed(&env, now);
    let live = LiveDaemon::start_with(
        &env,
        41.5,
        PRICE,
        "\n[[config]]\nname = \"e2e\"\nmodes = { standby = 4.0, idle = 30.0 }\n",
    );
    let addr = live.addr;
    // The daemon's own readings stored beside the history.
    let h: Value = wait_for(
        "the daemon's readings in /history.json",
        std::time::Duration::from_secs(30),
        || {
            let r = wattson_tests::http::get(addr, "/history.json", &[])?;
            assert_eq!(r.status, 200, "{}", r.body);
            assert_eq!(r.header("content-type"), Some("application/json"));
            let v: Value = serde_json::from_str(&r.body).unwrap();
            let last = v["hour"]["series"][0]["points"].as_array()?.last()?.clone();
            let watts = last[1].as_f64()?;
            (last[0].as_i64()? > now && (watts - 41.5).abs() < 1e-6).then_some(v)
        },
    );
    assert_stored_history(&h, &seeded, now);
    // What one answer costs the daemon (a debug build, nine days stored), for the record.
    let asked = std::time::Instant::now();
    let again = wattson_tests::http::get(addr, "/history.json", &[]).unwrap();
    eprintln!(
        "/history.json: {} bytes in {} ms",
        again.body.len(),
        asked.elapsed().as_millis()
    );
    assert_days_as_the_report(&h, &env.path("wattson.toml"));
    let days = h["days"].as_array().unwrap().len();

    let mut cdp = Page::open(&chromium, (390, 844));
    cdp.viewport((390, 844), 2);
    cdp.call(
        "Page.navigate",
        &json!({ "url": format!("http://{addr}/") }),
    );
    let phone = wait_layout(&mut cdp, "the charts at 390 px", |l| {
        l["drawn"] == 1
            && l["charts"]["chart-cost-svg"]["bars"] == days
            && l["headline"]["text"] != "-"
    });
    assert_laid_out(&phone, days, 390.0);

    // The lines go on from /live.json: the hour's line grows without the history being read
    // again or the page reloaded.
    cdp.eval("window.wattsonProbe = 'the same page'");
    let path_len = "document.querySelector('#chart-hour-svg path.line').getAttribute('d').length";
    let before = cdp.eval(path_len).as_u64().unwrap();
    live.meter.set(60.0);
    wait_for(
        "the hour's line to grow",
        std::time::Duration::from_secs(30),
        || (cdp.eval(path_len).as_u64()? > before + 40).then_some(()),
    );
    let grown = layout(&mut cdp);
    assert_eq!(grown["drawn"], 1, "the history was read again: {grown}");
    assert_eq!(grown["marker"], "the same page", "{grown}");

    // A desktop's width, without reloading: the charts are drawn again at their new size.
    cdp.viewport((1280, 1000), 1);
    let desktop = wait_layout(&mut cdp, "the charts at 1280 px", |l| {
        l["charts"]["chart-day-svg"]["width"]
            .as_f64()
            .is_some_and(|w| w > 450.0)
    });
    assert_laid_out(&desktop, days, 1280.0);
    assert_eq!(desktop["marker"], "the same page");
    drop(cdp);

    let shots = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("live-page");
    std::fs::create_dir_all(&shots).unwrap();
    for (size, name) in [
        ("390,1500", "live-page-390.png"),
        ("1280,1100", "live-page-1280.png"),
    ] {
        let out = shots.join(name);
        screenshot(&chromium, addr, size, &out);
        if std::env::var_os("WATTSON_UPDATE_DIST").is_some() {
            let dist = wattson_tests::workspace_root()
                .join("dashboards")
                .join(name);
            std::fs::copy(&out, &dist).unwrap();
        }
    }
}

/// The power lines: the stored watts minute by minute with the hole as one break, the last
/// hour in 5 s steps, and the host's mode levels.
fn assert_stored_history(h: &Value, seeded: &Seeded, now: i64) {
    let day = &h["day"];
    assert_eq!(day["step_ms"], MINUTE_MS, "{day}");
    assert_eq!(day["series"][0]["source"], "meter:wall");
    assert_eq!(day["series"][0]["scope"], "measured at the wall");
    let points = day["series"][0]["points"].as_array().unwrap();
    assert!(points.len() <= 1440, "{} points", points.len());
    let at = |t: i64| points.iter().find(|p| p[0] == t).map(|p| p[1].clone());
    let close = |v: Option<Value>, w: f64| {
        v.and_then(|v| v.as_f64())
            .is_some_and(|v| (v - w).abs() < 1e-6)
    };
    // Mid-hour six hours ago: that hour's watts.
    let t = (now - 6 * HOUR_MS) / HOUR_MS * HOUR_MS + 30 * MINUTE_MS;
    assert!(close(at(t), watts_at(t)), "{t}: {:?}", at(t));
    // The hole: one break where it begins (the minute before it has no pair either), no
    // power inside it.
    let (a, b) = seeded.hole;
    assert_eq!(at(a - MINUTE_MS), Some(Value::Null), "{:?}", seeded.hole);
    assert!(
        points
            .iter()
            .all(|p| !(a..b).contains(&p[0].as_i64().unwrap()) || p[1].is_null()),
        "power inside the hole"
    );
    let hour = &h["hour"];
    assert_eq!(hour["step_ms"], 5000);
    let fine = hour["series"][0]["points"].as_array().unwrap();
    assert!(
        fine.len() <= 720 && fine.len() > 600,
        "{} points",
        fine.len()
    );
    let mid = (now - 30 * MINUTE_MS) / 5000 * 5000;
    let seen = fine.iter().find(|p| p[0] == mid).unwrap();
    assert!(close(Some(seen[1].clone()), watts_at(mid)), "{seen}");
    assert_eq!(
        h["levels"],
        json!([
            { "name": "standby", "watts": 4.0, "from": "[[config]] e2e" },
            { "name": "idle", "watts": 30.0, "from": "[[config]] e2e" },
        ])
    );
    assert_eq!(h["currency"], "EUR");
    assert_eq!(h["minor_unit"], json!({ "symbol": "¢", "per_unit": 100 }));
}

/// Each day's energy and cost: every whole stored day equal to `wattson report`'s to the
/// cent, and the days without the hole at the stored 1.62 kWh (6 h at 30 W, 18 h at 80 W)
/// and EUR 0.486, written 48.6 cents.
fn assert_days_as_the_report(h: &Value, config: &std::path::Path) {
    let days = h["days"].as_array().unwrap();
    // The first, from noon; eight whole days; today.
    assert_eq!(days.len(), 10, "{days:?}");
    assert_eq!(days[9]["today"], true);
    assert_eq!(h["days_source"], "meter:wall");
    let report: Value =
        serde_json::from_str(&run(config, &["report", "--format", "json"])).unwrap();
    let daily = report["measured"]["daily"].as_array().unwrap();
    for d in &days[1..9] {
        let r = daily
            .iter()
            .find(|r| r["date"] == d["date"])
            .unwrap_or_else(|| panic!("{} not in the report's {daily:?}", d["date"]));
        let (kwh, cost) = (d["kwh"].as_f64().unwrap(), d["cost"].as_f64().unwrap());
        assert!((kwh - r["kwh"].as_f64().unwrap()).abs() < 1e-9, "{d} {r}");
        assert_eq!(
            format!("{cost:.2}"),
            format!("{:.2}", r["cost"].as_f64().unwrap()),
            "{d} {r}"
        );
        assert!((cost - r["cost"].as_f64().unwrap()).abs() < 1e-9, "{d} {r}");
    }
    for d in &days[1..8] {
        let kwh = d["kwh"].as_f64().unwrap();
        assert!((kwh - 1.62).abs() < 1e-6, "{d}");
        assert!(
            (d["cost"].as_f64().unwrap() - 1.62 * PRICE).abs() < 1e-6,
            "{d}"
        );
        assert_eq!(d["energy_text"], "1.620 kWh", "{d}");
        assert_eq!(d["cost_text"], "48.6 ¢", "{d}");
        assert_eq!(d["covered_hours"], 24.0, "{d}");
    }
}
