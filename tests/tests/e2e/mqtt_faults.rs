//! Hostile and broken MQTT, through the real `wattson` binary (`run` and `collect`): each
//! test injects one fault of RELIABILITY.md's MQTT table and checks that the program kept
//! working, lost nothing beyond what is documented, and said what happened in one clear
//! log line. Brokers: rumqttd embedded and mosquitto (required under `CI=true`), plus a
//! scripted broker (`wattson_tests::scripted`) for a broker that drops or stalls clients.
// Test helpers fail loudly on a broken setup.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use wattson::store::Store;
use wattson_collectors::Metric;
use wattson_tests::broker::{Kind, Options, TestBroker, Watcher, kinds, publish_acked};
use wattson_tests::scripted::{Behaviour, ScriptedBroker};
use wattson_tests::{Child, HOST, TestEnv, db_points, now_ms, q, wattson};

mod collector;
mod oversized;

/// `[mqtt]` for `url`, state every 500 ms.
fn mqtt_section(url: &str, extra: &str) -> String {
    format!(
        "\n[mqtt]\nurl = {}\nkeepalive = \"5s\"\npublish_interval = \"500ms\"\n{extra}",
        q(url)
    )
}

/// `wattson collect` on `config`, storing into `db`, with `args`.
fn collect(config: &Path, db: &Path, args: &[&str]) -> Child {
    let mut cmd = wattson();
    cmd.arg("--config")
        .arg(config)
        .arg("collect")
        .arg("--db")
        .arg(db)
        .args(args);
    Child::spawn(cmd)
}

/// SIGTERM, then the exit code within 5 s.
fn stop(child: &mut Child) -> Option<i32> {
    child.signal(Signal::SIGTERM);
    child
        .wait_exit(Duration::from_secs(5))
        .unwrap_or_else(|| panic!("no exit within 5 s of SIGTERM; stderr:\n{}", child.stderr()))
        .code()
}

/// Log lines of `log` containing `needle`.
fn lines<'a>(log: &'a str, needle: &str) -> Vec<&'a str> {
    log.lines().filter(|l| l.contains(needle)).collect()
}

/// Stored power samples `(ts, W)` of `host`'s `meter:wall`, in time order.
fn host_power(store: &Store, host: &str) -> Vec<(i64, f64)> {
    wattson_tests::host_points(store, host, "meter:wall", Metric::Power)
}

/// Hosts with anything stored.
fn stored_hosts(db: &Path) -> BTreeSet<String> {
    wattson_tests::open_db(db).map_or_else(BTreeSet::new, |s| {
        s.series().unwrap().into_iter().map(|s| s.host).collect()
    })
}

/// One state payload as a wattson host publishes it.
fn state_payload(ts: i64, watts: f64) -> String {
    format!(r#"{{"ts":{ts},"series":[["meter:wall","power","",{watts}]]}}"#)
}

/// Resident memory of `pid`, KiB.
fn rss_kib(pid: nix::unistd::Pid) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// Publish state messages of a probe host until the collector has stored one: its
/// subscription is then in place.
fn wait_subscribed(rt: &tokio::runtime::Runtime, port: u16, collector: &Child, db: &Path) {
    collector.wait_for(
        "the collector's subscription",
        Duration::from_secs(20),
        || {
            rt.block_on(publish_acked(
                port,
                "probe".into(),
                vec![(
                    "wattson/probe/state".to_owned(),
                    state_payload(now_ms(), 1.0),
                )],
                false,
                None,
            ));
            (!host_power(&wattson_tests::open_db(db)?, "probe").is_empty()).then_some(())
        },
    );
}

// ---------------------------------------------------------------------------------------
// One backoff policy.
// ---------------------------------------------------------------------------------------

/// A broker that accepts each client (CONNACK) and drops it at once: the publisher and the
/// plugs of `wattson run` and the collector of `wattson collect` back off alike, 0.5 s
/// doubling, each delay from the upper half of its step. (The plug client used to reset
/// its backoff on every CONNACK and came back every ~0.4 s.)
#[test]
fn a_broker_that_accepts_and_drops_each_client_sees_the_same_backoff_from_all_three() {
    const ATTEMPTS: usize = 5;
    let broker = ScriptedBroker::start(|_| Behaviour::AcceptThenDrop);
    let env = TestEnv::new();
    let config = env.config(&mqtt_section(
        &broker.url(),
        "\n[[plug]]\nid = \"desk\"\nkind = \"tasmota\"\ntopic = \"desk\"\n",
    ));
    let mut daemon = Child::run_daemon(&config, &[]);
    let mut collector = collect(&config, &env.path("fleet.db"), &[]);
    let clients = ["wattson-e2e", "wattson-e2e-plugs", "wattson-collect-e2e"];
    daemon.wait_for(
        "five connections from each client",
        Duration::from_secs(40),
        || {
            clients
                .iter()
                .all(|c| broker.attempts(c).len() >= ATTEMPTS)
                .then_some(())
        },
    );
    let mut report = Vec::new();
    for c in clients {
        let at = broker.attempts(c);
        let gaps: Vec<f64> = at
            .windows(2)
            .take(ATTEMPTS - 1)
            .map(|w| (w[1] - w[0]).as_secs_f64())
            .collect();
        report.push(format!("{c}: {gaps:.2?}"));
        for (k, gap) in gaps.iter().enumerate() {
            let step = 0.5 * f64::from(1u32 << k);
            // The sleep is at least half the step; connecting and the broker's drop add a
            // little; a loaded machine may add more.
            assert!(
                *gap >= step / 2.0 - 0.02 && *gap <= step + 1.0,
                "{c}: gap {k} was {gap:.3} s, outside [{:.2}, {:.2}] s; all: {report:?}",
                step / 2.0,
                step + 1.0
            );
        }
    }
    eprintln!("reconnect gaps against a broker that drops every client: {report:?}");
    assert_eq!(stop(&mut daemon), Some(0), "{}", daemon.stderr());
    assert_eq!(stop(&mut collector), Some(0), "{}", collector.stderr());
    let log = daemon.stderr();
    for role in ["MQTT", "plugs"] {
        let retries = lines(&log, &format!("{role}: {}", broker.url()));
        assert!(retries.len() >= ATTEMPTS - 1, "{log}");
        assert!(retries.iter().all(|l| l.contains("retrying in")), "{log}");
    }
}

// ---------------------------------------------------------------------------------------
// A stalling broker.
// ---------------------------------------------------------------------------------------

/// The broker answers the first connection for a moment and then stops reading and
/// answering (keeping the socket open); every later connection gets no CONNACK. The daemon
/// goes on storing every sample, says what the broker does, retries with backoff, and
/// stops promptly on SIGTERM.
#[test]
fn a_stalling_broker_delays_publishing_never_collection() {
    let broker = ScriptedBroker::start(|n| {
        if n == 0 {
            Behaviour::StallAfter { answer: 3 }
        } else {
            Behaviour::NeverConnack
        }
    });
    let env = TestEnv::new();
    let config = env.config(&format!(
        "\n[mqtt]\nurl = {}\nkeepalive = \"2s\"\npublish_interval = \"500ms\"\n",
        q(broker.url())
    ));
    let started = now_ms();
    let mut daemon = Child::run_daemon(&config, &[]);
    daemon.wait_for_log("no answer to a keepalive ping", Duration::from_secs(20));
    daemon.wait_for_log("no CONNACK within 5 s", Duration::from_secs(30));
    let cpu = db_points(&env.db, "cpu", Metric::CoreFrequency);
    let t0 = Instant::now();
    assert_eq!(stop(&mut daemon), Some(0), "{}", daemon.stderr());
    let stop_s = t0.elapsed().as_secs_f64();
    let log = daemon.stderr();
    let ts: BTreeSet<i64> = cpu.iter().map(|p| p.0).collect();
    let ts: Vec<i64> = ts.into_iter().filter(|t| *t >= started).collect();
    let widest = ts.windows(2).map(|w| w[1] - w[0]).max().unwrap();
    eprintln!(
        "stalled broker: {} CPU samples over {} ms, widest step {widest} ms; stopped {stop_s:.2} s after SIGTERM; {} connections; log: {:?}",
        ts.len(),
        ts[ts.len() - 1] - ts[0],
        broker.attempts("wattson-e2e").len(),
        lines(&log, "MQTT: mqtt://")
    );
    assert!(ts.len() >= 8, "{} CPU samples", ts.len());
    assert!(widest <= 2000, "a {widest} ms hole in the CPU samples");
    assert!(stop_s < 3.0, "stop took {stop_s} s");
    assert!(
        lines(&log, "MQTT: mqtt://")
            .iter()
            .all(|l| l.contains("retrying in")),
        "{log}"
    );
}

// ---------------------------------------------------------------------------------------
// A hostile announced-entities list.
// ---------------------------------------------------------------------------------------

fn hostile_announced_list(kind: Kind) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _rt = rt.enter();
    let broker = TestBroker::start(kind, &Options::default());
    let announced = format!("wattson/{HOST}/discovery");
    let light = format!("homeassistant/light/wattson_{HOST}/kitchen/config");
    let old_config = format!("homeassistant/sensor/wattson_{HOST}/old_sensor/config");
    rt.block_on(publish_acked(
        broker.port,
        "other".into(),
        vec![
            (
                announced.clone(),
                r#"["power","sensor/zz#","light/kitchen","old_sensor"]"#.to_owned(),
            ),
            (light.clone(), r#"{"name":"Kitchen"}"#.to_owned()),
            (old_config.clone(), r#"{"name":"Old"}"#.to_owned()),
        ],
        true,
        None,
    ));
    let env = TestEnv::new();
    let config = env.config(&mqtt_section(&broker.url(false), ""));
    let w = Watcher::start(broker.port, "watch", &["wattson/#", "homeassistant/#"]);
    let cpu = format!("homeassistant/sensor/wattson_{HOST}/cpu_frequency/config");
    let own_list = |payload: &[u8]| {
        serde_json::from_slice::<Vec<String>>(payload).is_ok_and(|keys| {
            keys.iter()
                .all(|k| wattson::publish::mqtt::discovery::is_own_key(k) && k != "old_sensor")
        })
    };
    let mut daemon = Child::run_daemon(&config, &[]);
    daemon.wait_for(
        "discovery, the stale entity removed, the list rewritten",
        Duration::from_secs(20),
        || {
            let removed = w.last(&old_config).is_some_and(|m| m.payload.is_empty());
            let rewritten = w.last(&announced).is_some_and(|m| own_list(&m.payload));
            let discovery = w.last(&cpu).is_some_and(|m| !m.payload.is_empty());
            (discovery && removed && rewritten).then_some(())
        },
    );
    let state = format!("wattson/{HOST}/state");
    let states = w.on(&state).len();
    daemon.wait_for("state goes on", Duration::from_secs(10), || {
        (w.on(&state).len() > states + 2).then_some(())
    });
    assert_eq!(stop(&mut daemon), Some(0), "{}", daemon.stderr());
    let log = daemon.stderr();
    // What a client subscribing now gets: the light untouched, the list wattson's own.
    let late = Watcher::start(broker.port, "late", &["wattson/#", "homeassistant/#"]);
    let list = wattson_tests::wait_for("retained messages", Duration::from_secs(10), || {
        late.last(&announced)
            .filter(|_| late.last(&light).is_some())
    });
    let keys: Vec<String> = serde_json::from_slice(&list.payload).unwrap();
    let skipped = lines(&log, "name no entity wattson creates");
    eprintln!(
        "{kind:?}: hostile announced list: light kept {:?}; list now {keys:?}; {skipped:?}",
        late.last(&light)
            .map(|m| String::from_utf8_lossy(&m.payload).into_owned())
    );
    assert_eq!(late.last(&light).unwrap().payload, br#"{"name":"Kitchen"}"#);
    assert!(own_list(&list.payload), "{keys:?}");
    assert!(
        w.on(&light).iter().all(|m| !m.payload.is_empty()),
        "the light's config was deleted"
    );
    assert_eq!(skipped.len(), 1, "{log}");
    assert!(
        skipped[0].contains(
            "the announced list on \"wattson/e2e/discovery\" has 2 entries that name no entity wattson creates (\"sensor/zz#\", \"light/kitchen\"): left alone"
        ),
        "{log}"
    );
}

/// A retained announced-entities list on the host's own discovery topic naming an invalid
/// topic (`sensor/zz#`) and an entity of another kind (`light/kitchen`): both are left
/// alone (logged once), a stale entity wattson did create is removed, discovery
/// and state go on, and the list is rewritten with wattson's own entities. Before: the
/// invalid topic blocked every later discovery publish, and the light was deleted.
#[test]
fn an_announced_list_with_an_invalid_topic_or_another_kind_changes_only_wattsons_topics() {
    for kind in kinds() {
        hostile_announced_list(kind);
    }
}
