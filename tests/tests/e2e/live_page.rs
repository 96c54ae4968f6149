//! The live page (`/`) in headless Chromium, driven over the DevTools protocol: the DOM shows
//! the meter's watts and today's cost, both change when the meter's watts change without the
//! page being reloaded, the report's table and charts load in its frame, every request the
//! page makes stays on the daemon's origin, and it fits a phone's width. Screenshots are kept
//! in `target/tmp/live-page/`.
//!
//! The charts over a seeded history (power lines with their gaps, daily energy and cost
//! equal to `wattson report`'s, labels readable and inside their charts at 390 and 1280 px)
//! are in [`charts`].
//!
//! Needs Chromium (`apt-get install chromium`); skipped without it, except under CI=true,
//! where it fails.
// Test helpers fail loudly on a broken setup.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wattson_tests::browser::{Page, chromium, headless};
use wattson_tests::http::{SettableMeter, bound_addr};
use wattson_tests::{Child, TestEnv, meter_toml};

mod charts;

/// What the page shows, as the DOM has it.
const SHOWN: &str = r"JSON.stringify({
  watts: document.getElementById('watts').textContent,
  cost: document.getElementById('cost-today').textContent,
  energy: document.getElementById('energy-today').textContent,
  health: document.getElementById('health').textContent,
  package: document.getElementById('package-states').innerText,
  deepest: document.getElementById('package-deepest').textContent,
  marker: window.wattsonProbe || null,
  report: (() => { try { return document.getElementById('report').contentDocument.body.innerText; } catch (e) { return null; } })(),
  width: document.documentElement.scrollWidth,
})";

/// What the page shows; `Null` while there is no document to ask (the navigation is still
/// under way and the evaluation throws).
fn shown(cdp: &mut Page) -> Value {
    cdp.eval(SHOWN)
        .as_str()
        .and_then(|s| serde_json::from_str(s).ok())
        .unwrap_or(Value::Null)
}

/// Waits until what the page shows satisfies `ok`.
fn wait_shown(cdp: &mut Page, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let s = shown(cdp);
        if ok(&s) {
            return s;
        }
        assert!(
            Instant::now() < deadline,
            "the page never showed {what}: {s}"
        );
        // The page's own refresh is what is waited for; each look costs a round trip.
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn screenshot(chromium: &Path, addr: SocketAddr, size: &str, out: &Path) {
    let profile = tempfile::tempdir().unwrap();
    let shot = headless(chromium, profile.path())
        .arg(format!("--screenshot={}", out.display()))
        .arg(format!("--window-size={size}"))
        .arg("--virtual-time-budget=4000")
        .arg(format!("http://{addr}/"))
        .output()
        .unwrap();
    assert!(
        out.metadata().is_ok_and(|m| m.len() > 5_000),
        "no screenshot at {}: {}",
        out.display(),
        String::from_utf8_lossy(&shot.stderr)
    );
}

/// `wattson run` with `[http]` on the Intel desktop fixture, whose package and core counters
/// a thread advances (package 30 % PC2, 70 % PC3; cores 78 % C6), with a meter reading
/// `watts` and a flat tariff of `price` EUR per kWh. Stops the counters on drop.
struct LiveDaemon {
    _daemon: Child,
    addr: SocketAddr,
    meter: SettableMeter,
    stop: Arc<AtomicBool>,
    advancer: Option<std::thread::JoinHandle<()>>,
}

impl LiveDaemon {
    fn start(env: &TestEnv, watts: f64, price: f64) -> LiveDaemon {
        LiveDaemon::start_with(env, watts, price, "")
    }

    /// [`LiveDaemon::start`] with `extra` at the end of its config file.
    fn start_with(env: &TestEnv, watts: f64, price: f64, extra: &str) -> LiveDaemon {
        let root = env.path("machine");
        wattson_tests::idle::intel_desktop(&root);
        let stop = Arc::new(AtomicBool::new(false));
        let advancer = {
            let (root, stop) = (root.clone(), stop.clone());
            std::thread::spawn(move || wattson_tests::idle::advance_counters(&root, &stop))
        };
        let meter = SettableMeter::start(watts);
        let config = env.path("wattson.toml");
        std::fs::write(
            &config,
            format!(
                "{}flush_interval = \"200ms\"\n{}\n[tariff]\ncurrency = \"EUR\"\nprice_per_kwh = \
                 {price}\ntimezone = \"UTC\"\n\n[http]\nlisten = \"127.0.0.1:0\"\n{extra}",
                wattson_tests::idle::host_toml(&root, &env.db),
                meter_toml("wall", "line", &meter.path, "250ms", None)
            ),
        )
        .unwrap();
        let daemon = Child::run_daemon(&config, &[]);
        let addr = bound_addr(&daemon);
        LiveDaemon {
            _daemon: daemon,
            addr,
            meter,
            stop,
            advancer: Some(advancer),
        }
    }
}

impl Drop for LiveDaemon {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(a) = self.advancer.take() {
            let _ = a.join();
        }
    }
}

#[test]
fn the_live_page_shows_the_meters_watts_and_todays_cost_and_follows_them() {
    let Some(chromium) = chromium() else {
        return;
    };
    let env = TestEnv::new();
    // A price that makes seconds of energy worth cents, so today's cost visibly moves.
    let live = LiveDaemon::start(&env, 100.0, 2000.0);
    let (addr, meter) = (live.addr, &live.meter);

    // A phone's screen: 390 CSS pixels wide.
    let mut cdp = Page::open(&chromium, (390, 844));
    cdp.viewport((390, 844), 2);
    cdp.call("Network.enable", &json!({}));
    cdp.call(
        "Page.navigate",
        &json!({ "url": format!("http://{addr}/") }),
    );

    let first = wait_shown(&mut cdp, "100.0 W and a cost", |s| {
        s["watts"] == "100.0 W" && s["cost"].as_str().is_some_and(|c| c.starts_with("EUR "))
    });
    // The package's C-states beside the cores': the states it reached, deepest first.
    let package = wait_shown(&mut cdp, "the package C-states", |s| {
        s["deepest"] == "deepest reached: PC3"
    });
    let lines: Vec<&str> = package["package"].as_str().unwrap().lines().collect();
    assert_eq!(lines.len(), 2, "{package}");
    assert!(
        lines[0].starts_with("PC3: ") && lines[1].starts_with("PC2: "),
        "{package}"
    );
    cdp.eval("window.wattsonProbe = 'the same page'");
    meter.set(250.0);
    let after = wait_shown(&mut cdp, "250.0 W and a new cost", |s| {
        s["watts"] == "250.0 W" && s["cost"] != first["cost"]
    });
    assert_eq!(
        after["marker"], "the same page",
        "the page was reloaded: {after}"
    );
    assert_eq!(after["health"], "healthy", "{after}");
    // The report's table and charts, by the report's own renderer, in the frame.
    let with_report = wait_shown(&mut cdp, "the report in its frame", |s| {
        s["report"]
            .as_str()
            .is_some_and(|r| r.contains("Generated"))
    });
    // Readable on a phone: nothing wider than its screen.
    assert!(
        with_report["width"].as_f64().unwrap() <= 390.0,
        "wider than a phone: {with_report}"
    );
    // Every request the page made went to the daemon.
    let urls: Vec<String> = cdp
        .events
        .iter()
        .filter(|e| e["method"] == "Network.requestWillBeSent")
        .filter_map(|e| e["params"]["request"]["url"].as_str().map(str::to_owned))
        .collect();
    assert!(
        urls.iter().any(|u| u.ends_with("/live.json"))
            && urls.iter().any(|u| u.ends_with("/report.html")),
        "{urls:?}"
    );
    for u in &urls {
        assert!(
            u.starts_with(&format!("http://{addr}/")),
            "external request: {u}"
        );
    }
    drop(cdp);

    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("live-page");
    std::fs::create_dir_all(&shots).unwrap();
    screenshot(&chromium, addr, "1100,1400", &shots.join("desktop.png"));
    screenshot(&chromium, addr, "390,1200", &shots.join("phone.png"));
}
