//! The report at a phone's width and a desktop's: Chromium lays it out at 390 px and
//! 1280 px, and a probe evaluated over the DevTools protocol (the report itself runs no
//! script) measures it after layout. The summary table leads the report; no table cell's text is
//! clipped (each fits its cell, or its table scrolls in its own box); the page is no wider
//! than the screen; every chart shown fits the screen, each of its texts at least 11 px
//! on screen and inside the chart; a bar chart has a slot per bar (no empty one) and a
//! label under each, its cheapest bar alone in green; and a long name is never cut
//! silently (it is wrapped, or shortened with its whole text in a `<title>`).

use std::path::Path;

use serde_json::Value;
use wattson_tests::browser::{Page, chromium};
use wattson_tests::{TestEnv, stdout_of, wattson, workspace_root};

/// A name too long for its bar's slot.
const LONG: &str = "Fujitsu Primergy TX1320 M5 with four spinning disks and 2 PSUs";

/// The cheapest bar's colour, and every other bar's.
const GREEN: &str = "#2E7D32";
const NEUTRAL: &str = "#8A97A6";

/// Measures the laid-out page: its figures as a JSON string.
const PROBE: &str = r"(function () {
  const cells = [...document.querySelectorAll('td, th')].map(c => ({
    text: c.textContent.trim().slice(0, 60), sw: c.scrollWidth, cw: c.clientWidth,
    scroll: !!c.closest('.scroll') }));
  const svgs = [];
  for (const svg of document.querySelectorAll('figure svg')) {
    const box = svg.getBoundingClientRect();
    if (box.width === 0) continue;
    const vb = svg.viewBox.baseVal;
    const scale = box.width / vb.width;
    const texts = [...svg.querySelectorAll('text')].map(t => {
      const r = t.getBoundingClientRect();
      const spans = [...t.querySelectorAll('tspan')];
      const title = t.querySelector('title');
      return {
        text: (spans.length ? spans.map(s => s.textContent).join('') : t.textContent).trim(),
        title: title ? title.textContent : null,
        px: parseFloat(getComputedStyle(t).fontSize) * scale,
        inside: r.left >= box.left - 1 && r.right <= box.right + 1
          && r.top >= box.top - 1 && r.bottom <= box.bottom + 1,
        box: [r.left - box.left, r.top - box.top, r.width, r.height] };
    });
    const rects = [...svg.querySelectorAll('rect')].map(r => {
      const b = r.getBBox();
      return { x: b.x, y: b.y, w: b.width, h: b.height, fill: (r.getAttribute('fill') || '').toUpperCase() };
    }).filter(r => r.fill !== '#FFFFFF' && r.fill !== 'NONE' && r.h > 0.5);
    const mesh = [...svg.querySelectorAll('line')]
      .filter(l => l.getAttribute('y1') === l.getAttribute('y2') && l.getAttribute('opacity'))
      .map(l => [+l.getAttribute('x1'), +l.getAttribute('x2')]);
    svgs.push({ width: box.width, texts, rects, mesh });
  }
  const summary = document.querySelector('table.summary');
  return JSON.stringify({
    vw: window.innerWidth, page: document.documentElement.scrollWidth,
    first_h2: document.querySelector('h2').textContent,
    summary: summary ? [...summary.querySelectorAll('tbody tr')].map(tr => tr.innerText) : null,
    cells, svgs });
})()";

/// The probe's figures for `page` laid out `width` px wide, with a screenshot of the top
/// of it at `shot`.
fn probe(chromium: &Path, page: &Path, width: u32, shot: &Path) -> Value {
    let mut p = Page::open(chromium, (width, 900));
    p.goto(&format!("file://{}", page.display()));
    p.screenshot(shot, if width < 600 { 1800 } else { 1100 });
    assert!(
        shot.metadata().is_ok_and(|m| m.len() > 10_000),
        "no screenshot at {}",
        shot.display()
    );
    let json = p.eval(PROBE);
    serde_json::from_str(json.as_str().unwrap()).unwrap()
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap()
}

/// The shown chart whose texts include `caption`.
fn chart<'a>(p: &'a Value, caption: &str) -> &'a Value {
    p["svgs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| {
            s["texts"]
                .as_array()
                .unwrap()
                .iter()
                .any(|t| t["text"].as_str().unwrap().contains(caption))
        })
        .unwrap_or_else(|| panic!("no chart {caption:?} shown"))
}

/// A bar chart of `names` in order: a slot per bar (the room after the last bar is the
/// room before the first), each name to be read whole, `cheapest` alone in green.
fn check_bars(svg: &Value, names: &[&str], cheapest: &str, width: u32) {
    let bars = svg["rects"].as_array().unwrap();
    assert_eq!(bars.len(), names.len(), "{width} px: bars {bars:?}");
    let (left, right) = svg["mesh"]
        .as_array()
        .unwrap()
        .iter()
        .fold((f64::MAX, f64::MIN), |(l, r), m| {
            (l.min(f(&m[0])), r.max(f(&m[1])))
        });
    let first = &bars[0];
    let last = &bars[bars.len() - 1];
    let before = f(&first["x"]) - left;
    let after = right - (f(&last["x"]) + f(&last["w"]));
    assert!(
        (before - after).abs() < 2.0,
        "{width} px: {before} before the first bar, {after} after the last: an empty slot"
    );
    let texts = svg["texts"].as_array().unwrap();
    for name in names {
        assert!(
            texts.iter().any(|t| {
                let text = t["text"].as_str().unwrap();
                // Under its bar, in a key under the axis ("2: NAME"), or its title.
                text == *name
                    || text.split_once(": ").is_some_and(|(_, n)| n == *name)
                    || t["title"] == *name
            }),
            "{width} px: no label reads {name:?}: {texts:?}"
        );
    }
    let at = names.iter().position(|n| *n == cheapest).unwrap();
    for (i, b) in bars.iter().enumerate() {
        let want = if i == at { GREEN } else { NEUTRAL };
        assert_eq!(b["fill"], want, "{width} px: bar {} ({b})", names[i]);
    }
}

fn check(p: &Value, width: u32) {
    assert_eq!(
        f(&p["vw"]),
        f64::from(width),
        "the window is not {width} px wide"
    );
    // The summary leads, with the answers.
    assert_eq!(p["first_h2"], "Summary");
    let rows = p["summary"].to_string();
    for answer in [
        "A year on your tariff",
        "basket, a year",
        LONG_CONFIG,
        "Cheapest change",
    ] {
        assert!(rows.contains(answer), "{width} px: no {answer:?} in {rows}");
    }
    // Nothing clipped, and no sideways scrolling of the page itself.
    for c in p["cells"].as_array().unwrap() {
        assert!(
            f(&c["sw"]) <= f(&c["cw"]) + 1.0 || c["scroll"] == true,
            "{width} px: {c} is clipped"
        );
    }
    assert!(
        f(&p["page"]) <= f(&p["vw"]),
        "{width} px: the page is {} px wide",
        p["page"]
    );
    let svgs = p["svgs"].as_array().unwrap();
    assert!(svgs.len() >= 4, "{width} px: {} charts", svgs.len());
    for svg in svgs {
        assert!(
            f(&svg["width"]) <= f(&p["vw"]),
            "{width} px: a chart is wider"
        );
        for t in svg["texts"].as_array().unwrap() {
            assert!(
                !t["text"].as_str().unwrap().is_empty(),
                "{width} px: an empty label"
            );
            assert!(f(&t["px"]) >= 11.0, "{width} px: {t} is under 11 px");
            assert_eq!(t["inside"], true, "{width} px: {t} is outside its chart");
        }
    }
    // The costliest first.
    check_bars(
        chart(p, "Annual cost per configuration"),
        &[LONG_CONFIG, "basket"],
        "basket",
        width,
    );
    check_bars(
        chart(p, "Keep this box or buy another"),
        &[
            "keep this machine (measured)",
            "N100 mini PC (interpolated)",
            &format!("{LONG} (interpolated)"),
        ],
        "N100 mini PC (interpolated)",
        width,
    );
}

/// A configuration entered by hand, its name longer than its bar.
const LONG_CONFIG: &str = "old file server in the cupboard with six spinning disks";

#[test]
fn the_summary_leads_and_the_report_fits_a_phone_and_a_desktop() {
    let Some(chromium) = chromium() else {
        return;
    };
    let env = TestEnv::new();
    let db = env.path("day.db");
    super::database(&db, 1);
    let config = env.config(&format!(
        "\n[tariff]\ncurrency = \"EUR\"\nprice_per_kwh = 0.30\nstanding_charge_per_day = 0.40\n\
         timezone = \"UTC\"\n\n[[config]]\nname = \"{LONG_CONFIG}\"\nmodes = {{ idle = 95.0, \
         \"1 loop\" = 120.0 }}\n"
    ));
    for (name, idle, full, price) in [
        (LONG, "45", "140", "900"),
        ("N100 mini PC", "8", "60", "200"),
    ] {
        stdout_of(
            wattson()
                .arg("--config")
                .arg(&config)
                .args(["candidate", "add", name, "--idle", idle])
                .arg(format!("--at=100%={full}"))
                .args(["--price", price, "--db"])
                .arg(&db),
        );
    }
    let page = env.path("report.html");
    stdout_of(
        wattson()
            .arg("--config")
            .arg(&config)
            .args(["report", "--format", "html", "--db"])
            .arg(&db)
            .arg("--out")
            .arg(&page),
    );
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report-html");
    std::fs::create_dir_all(&shots).unwrap();
    for width in [390, 1280] {
        let shot = shots.join(format!("summary-{width}.png"));
        let p = probe(&chromium, &page, width, &shot);
        check(&p, width);
        if std::env::var_os("WATTSON_UPDATE_DIST").is_some() {
            let dist = workspace_root().join(format!("dashboards/report-{width}.png"));
            std::fs::copy(&shot, &dist).unwrap();
        }
    }
}
