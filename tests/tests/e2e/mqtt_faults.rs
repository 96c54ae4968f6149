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
use wattson_tests::broker::{Kind, Options, TestBroker, Watcher, in_ci, kinds, publish_acked};
use wattson_tests::scripted::{Behaviour, ScriptedBroker};
use wattson_tests::{Child, HOST, TestEnv, db_points, now_ms, q, wattson};

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
// Oversized messages.
// ---------------------------------------------------------------------------------------

fn oversized_home_assistant_status(kind: Kind) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _rt = rt.enter();
    let broker = TestBroker::start(kind, &Options::default());
    rt.block_on(publish_acked(
        broker.port,
        "ha".into(),
        vec![("homeassistant/status".to_owned(), vec![b'x'; 20 * 1024])],
        true,
        None,
    ));
    let env = TestEnv::new();
    let config = env.config(&mqtt_section(&broker.url(false), ""));
    let w = Watcher::start(broker.port, "watch", &["wattson/#"]);
    let state = format!("wattson/{HOST}/state");
    let mut daemon = Child::run_daemon(&config, &[]);
    daemon.wait_for("five states", Duration::from_secs(20), || {
        (w.on(&state).len() >= 5).then_some(())
    });
    daemon.wait_for_log(
        "MQTT: skipped a 20480-byte retained message on \"homeassistant/status\": larger than the 16384 bytes",
        Duration::from_secs(5),
    );
    // A real announcement after it is still acted on.
    rt.block_on(publish_acked(
        broker.port,
        "ha".into(),
        vec![("homeassistant/status".to_owned(), "online")],
        true,
        None,
    ));
    daemon.wait_for_log(
        "Home Assistant is online: re-sending discovery",
        Duration::from_secs(10),
    );
    let states = w.on(&state).len();
    daemon.wait_for("more states", Duration::from_secs(10), || {
        (w.on(&state).len() > states + 2).then_some(())
    });
    assert_eq!(stop(&mut daemon), Some(0), "{}", daemon.stderr());
    let log = daemon.stderr();
    eprintln!(
        "{kind:?}: 20 KB retained status: {} states published, {:?}",
        w.on(&state).len(),
        lines(&log, "skipped")
    );
    assert_eq!(lines(&log, "MQTT: connected").len(), 1, "{log}");
    assert_eq!(lines(&log, "skipped a").len(), 1, "{log}");
    assert!(lines(&log, "retrying in").is_empty(), "{log}");
}

/// A 20 KB retained message on `homeassistant/status` (the publisher takes 16 KiB there)
/// is skipped once, with its topic and size; the connection stays up, state goes on being
/// published, and a later `online` is acted on. Before: "payload size limit exceeded" on
/// every connect, and no state was ever published again.
#[test]
fn a_20_kb_retained_home_assistant_status_is_skipped_and_state_goes_on() {
    for kind in kinds() {
        oversized_home_assistant_status(kind);
    }
}

fn oversized_plug_message(kind: Kind) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _rt = rt.enter();
    let broker = TestBroker::start(kind, &Options::default());
    let topic = "tele/desk/SENSOR";
    rt.block_on(publish_acked(
        broker.port,
        "plug".into(),
        vec![(topic.to_owned(), vec![b' '; 12 * 1024])],
        true,
        None,
    ));
    let env = TestEnv::new();
    let config = env.config(&mqtt_section(
        &broker.url(false),
        "\n[[plug]]\nid = \"desk\"\nkind = \"tasmota\"\ntopic = \"desk\"\n",
    ));
    let mut daemon = Child::run_daemon(&config, &[]);
    daemon.wait_for_log(
        "plugs: skipped a 12288-byte retained message on \"tele/desk/SENSOR\": larger than the 8192 bytes",
        Duration::from_secs(20),
    );
    // A malformed reading is skipped too; a good one is stored.
    rt.block_on(publish_acked(
        broker.port,
        "plug".into(),
        vec![(topic.to_owned(), "{oops")],
        false,
        None,
    ));
    daemon.wait_for_log(
        "plugs: skipped a 5-byte message on \"tele/desk/SENSOR\": not JSON",
        Duration::from_secs(10),
    );
    let reading = r#"{"Time":"2024-03-02T18:04:21","ENERGY":{"Total":152.347,"Power":38,"Voltage":236,"Current":0.221,"Factor":0.73}}"#;
    daemon.wait_for("a stored plug reading", Duration::from_secs(20), || {
        rt.block_on(publish_acked(
            broker.port,
            "plug".into(),
            vec![(topic.to_owned(), reading)],
            false,
            None,
        ));
        let power = db_points(&env.db, "meter:desk", Metric::Power);
        (!power.is_empty()).then_some(power)
    });
    assert_eq!(stop(&mut daemon), Some(0), "{}", daemon.stderr());
    let log = daemon.stderr();
    let power = db_points(&env.db, "meter:desk", Metric::Power);
    eprintln!(
        "{kind:?}: 12 KB retained plug message: {} plug readings stored, all 38 W: {}; {:?}",
        power.len(),
        power.iter().all(|p| p.1 == 38.0),
        lines(&log, "skipped")
    );
    assert!(power.iter().all(|p| p.1 == 38.0), "{power:?}");
    assert_eq!(lines(&log, "plugs: connected").len(), 1, "{log}");
    assert!(lines(&log, "plugs: mqtt://").is_empty(), "{log}");
}

/// A 12 KB retained message on a smart plug's topic (plugs take 8 KiB) is skipped once
/// with its topic and size, and so is a malformed one; the plug client stays connected and
/// the plug's next good reading is stored. Before: reconnects every ~0.4 s, no reading
/// ever stored.
#[test]
fn a_12_kb_retained_plug_message_is_skipped_and_readings_are_stored() {
    for kind in kinds() {
        oversized_plug_message(kind);
    }
}

fn oversized_collector_message(kind: Kind) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _rt = rt.enter();
    let broker = TestBroker::start(kind, &Options::default());
    let env = TestEnv::new();
    let config = env.config(&mqtt_section(&broker.url(false), ""));
    let db = env.path("fleet.db");
    let mut collector = collect(&config, &db, &["--client-id", "collector"]);
    wait_subscribed(&rt, broker.port, &collector, &db);
    let t0 = now_ms() - 60_000;
    let mut msgs = vec![("wattson/big/state".to_owned(), vec![b'x'; 10 * 1024 * 1024])];
    msgs.extend((0..5).map(|k| {
        (
            "wattson/h1/state".to_owned(),
            state_payload(t0 + k * 1000, 100.0).into_bytes(),
        )
    }));
    rt.block_on(publish_acked(broker.port, "h1".into(), msgs, false, None));
    collector.wait_for(
        "the five messages after the big one",
        Duration::from_secs(20),
        || {
            let store = wattson_tests::open_db(&db)?;
            (host_power(&store, "h1").len() == 5).then_some(())
        },
    );
    collector.wait_for_log(
        "collector: skipped a 10485760-byte message on \"wattson/big/state\": larger than the 65536 bytes",
        Duration::from_secs(5),
    );
    assert_eq!(stop(&mut collector), Some(0), "{}", collector.stderr());
    let first = collector.stderr();
    let probes = host_power(&wattson_tests::open_db(&db).unwrap(), "probe").len();
    assert_eq!(lines(&first, "collector: connected").len(), 1, "{first}");
    assert!(lines(&first, "retrying in").is_empty(), "{first}");
    assert!(
        first.contains(&format!("{} messages stored", probes + 5)),
        "{first}"
    );
    assert!(first.contains("1 oversized"), "{first}");

    // It was acknowledged: the next run on the same session does not get it again.
    let mut second = collect(&config, &db, &["--client-id", "collector"]);
    second.wait_for_log("collector: connected", Duration::from_secs(15));
    rt.block_on(publish_acked(
        broker.port,
        "h1".into(),
        vec![(
            "wattson/h1/state".to_owned(),
            state_payload(t0 + 5000, 100.0),
        )],
        false,
        None,
    ));
    second.wait_for("the sixth message", Duration::from_secs(20), || {
        let store = wattson_tests::open_db(&db)?;
        (host_power(&store, "h1").len() == 6).then_some(())
    });
    assert_eq!(stop(&mut second), Some(0), "{}", second.stderr());
    let log = second.stderr();
    eprintln!(
        "{kind:?}: 10 MB QoS 1 message: skipped once, 5 + 1 valid messages stored; second run: {:?}",
        lines(&log, "collector")
    );
    assert!(lines(&log, "skipped").is_empty(), "redelivered:\n{log}");
    let store = wattson_tests::open_db(&db).unwrap();
    let ts: Vec<i64> = host_power(&store, "h1").iter().map(|p| p.0).collect();
    assert_eq!(ts, (0..6).map(|k| t0 + k * 1000).collect::<Vec<_>>());
}

/// One 10 MB QoS 1 message to `wattson collect` on its persistent session (it takes 64
/// KiB): skipped, logged once, acknowledged; every later message stored; a restart on the
/// same session does not see it again. Before: an endless reconnect loop, and every later
/// message lost.
#[test]
fn a_10_mb_qos1_message_to_the_collector_is_skipped_and_never_comes_back() {
    for kind in kinds() {
        oversized_collector_message(kind);
    }
}

// ---------------------------------------------------------------------------------------
// The collector's database write fails.
// ---------------------------------------------------------------------------------------

/// An 8 MB tmpfs, unmounted on drop; `None` (the test is skipped with a note) where this
/// user may not mount. Under CI (`CI=true`), which runs as root, a failed mount fails the test.
struct SmallDisk {
    mnt: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl SmallDisk {
    fn mount() -> Option<SmallDisk> {
        let dir = tempfile::tempdir().unwrap();
        let mnt = dir.path().join("small");
        std::fs::create_dir(&mnt).unwrap();
        let out = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=8m", "tmpfs"])
            .arg(&mnt)
            .output();
        match out {
            Ok(o) if o.status.success() => Some(SmallDisk { mnt, _dir: dir }),
            Ok(o) => {
                let why = format!(
                    "mount -t tmpfs failed: {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                );
                assert!(!in_ci(), "CI=true and {why}");
                eprintln!("SKIPPED collector disk full: {why}");
                None
            }
            Err(e) => {
                assert!(!in_ci(), "CI=true and mount cannot run: {e}");
                eprintln!("SKIPPED collector disk full: cannot run mount: {e}");
                None
            }
        }
    }

    /// Fill the rest of the file system with one file; returns its path.
    fn fill(&self) -> std::path::PathBuf {
        use std::io::Write as _;
        let path = self.mnt.join("filler");
        let mut f = std::fs::File::create(&path).unwrap();
        let block = vec![0u8; 4096];
        while f.write_all(&block).is_ok() {}
        let _ = f.sync_all();
        path
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.mnt).status();
    }
}

fn collector_disk_full(kind: Kind) {
    let Some(disk) = SmallDisk::mount() else {
        return;
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _rt = rt.enter();
    let broker = TestBroker::start(kind, &Options::default());
    let env = TestEnv::new();
    let config = env.config(&mqtt_section(&broker.url(false), ""));
    let db = disk.mnt.join("fleet.db");
    let mut collector = collect(&config, &db, &["--client-id", "collector"]);
    wait_subscribed(&rt, broker.port, &collector, &db);
    let filler = disk.fill();
    // Messages until a commit fails (SQLite may first use room its write-ahead log holds).
    let t0 = now_ms() - 3_600_000;
    let mut sent = 0_i64;
    collector.wait_for(
        "a failed commit while the disk is full",
        Duration::from_secs(60),
        || {
            let msgs: Vec<(String, String)> = (sent..sent + 20)
                .map(|k| {
                    (
                        "wattson/h1/state".to_owned(),
                        state_payload(t0 + k * 1000, 50.0),
                    )
                })
                .collect();
            rt.block_on(publish_acked(broker.port, "h1".into(), msgs, false, None));
            sent += 20;
            collector
                .stderr()
                .contains("collector: could not store")
                .then_some(())
        },
    );
    let stored_while_full = wattson_tests::open_db(&db).map_or(0, |s| host_power(&s, "h1").len());
    // The broker keeps delivering them again (each time not acknowledged) until there is room.
    collector.wait_for_log(
        "so that it delivers again what was not acknowledged",
        Duration::from_secs(10),
    );
    std::fs::remove_file(&filler).unwrap();
    // Each failed commit was a reconnect a backoff step later (0.5 s doubling to 60 s): on a
    // loaded machine the test may see its first failure after several, and the collector may
    // then be asleep for up to a minute before the delivery that finds room.
    collector.wait_for(
        "every message stored once the disk has room",
        Duration::from_secs(150),
        || {
            let store = wattson_tests::open_db(&db)?;
            (host_power(&store, "h1").len() as i64 >= sent).then_some(())
        },
    );
    assert_eq!(stop(&mut collector), Some(0), "{}", collector.stderr());
    let log = collector.stderr();
    let store = wattson_tests::open_db(&db).unwrap();
    let ts: Vec<i64> = host_power(&store, "h1").iter().map(|p| p.0).collect();
    let failed = lines(&log, "collector: could not store");
    eprintln!(
        "{kind:?}: disk full under the collector: {sent} messages sent, {stored_while_full} stored before the disk filled up, all {} stored once after it had room; {} failed-commit lines, {} redelivery reconnects; first: {:?}; summary: {:?}",
        ts.len(),
        failed.len(),
        lines(&log, "delivers again").len(),
        failed.first(),
        lines(&log, "collector stopped")
    );
    assert_eq!(ts, (0..sent).map(|k| t0 + k * 1000).collect::<Vec<_>>());
    assert!(failed[0].contains("database or disk is full"), "{log}");
    assert!(failed[0].contains("not acknowledged"), "{log}");
    // Truthful: stored counts each message once (the probes too), failures apart.
    let probes = host_power(&store, "probe").len() as i64;
    assert!(
        log.contains(&format!("{} messages stored", sent + probes)),
        "{log}"
    );
    assert!(log.contains("storing again after"), "{log}");
    assert_eq!(wattson_tests::integrity_check(&db), "ok");
}

/// The collector's database fills up (an 8 MB tmpfs): it does not acknowledge what it could
/// not commit, does not count it as stored and says so; the broker delivers those messages
/// again on each reconnect until the disk has room, and then every one is stored exactly
/// once. Before: acknowledged anyway, never redelivered, and "15 messages stored" logged.
#[test]
fn a_collector_that_cannot_commit_does_not_acknowledge_and_stores_the_redelivery() {
    for kind in kinds() {
        collector_disk_full(kind);
    }
}

// ---------------------------------------------------------------------------------------
// Too many hosts.
// ---------------------------------------------------------------------------------------

fn many_hosts(kind: Kind) {
    const HOSTS: usize = 5000;
    const MAX: usize = 50;
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _rt = rt.enter();
    let broker = TestBroker::start(kind, &Options::default());
    let env = TestEnv::new();
    let config = env.config(&mqtt_section(&broker.url(false), ""));
    let db = env.path("fleet.db");
    let mut collector = collect(&config, &db, &["--max-hosts", &MAX.to_string()]);
    wait_subscribed(&rt, broker.port, &collector, &db);
    let rss_before = rss_kib(collector.pid());
    let ts = now_ms() - 10_000;
    let msgs: Vec<(String, String)> = (0..HOSTS)
        .map(|i| (format!("wattson/host{i}/state"), state_payload(ts, 10.0)))
        .collect();
    rt.block_on(publish_acked(
        broker.port,
        "flood".into(),
        msgs,
        false,
        None,
    ));
    collector.wait_for(
        "every message taken or refused",
        Duration::from_secs(60),
        || {
            collector
                .stderr()
                .contains(&format!("{} messages refused so far", 4000))
                .then_some(())
        },
    );
    // A host already taken is still served.
    collector.wait_for(
        "a later message of a taken host",
        Duration::from_secs(20),
        || {
            rt.block_on(publish_acked(
                broker.port,
                "host1".into(),
                vec![(
                    "wattson/host1/state".to_owned(),
                    state_payload(ts + 1000, 11.0),
                )],
                false,
                None,
            ));
            let store = wattson_tests::open_db(&db)?;
            (host_power(&store, "host1").len() == 2).then_some(())
        },
    );
    let rss_after = rss_kib(collector.pid());
    assert_eq!(stop(&mut collector), Some(0), "{}", collector.stderr());
    let log = collector.stderr();
    let hosts = stored_hosts(&db);
    let summary = lines(&log, "collector stopped");
    eprintln!(
        "{kind:?}: {HOSTS} hosts offered, --max-hosts {MAX}: {} hosts stored; RSS {rss_before} -> {rss_after} KiB; {} refusal lines; {summary:?}",
        hosts.len(),
        lines(&log, "refusing state").len()
    );
    // The probe host and the first MAX - 1 flood hosts.
    assert_eq!(hosts.len(), MAX, "{hosts:?}");
    let refused = HOSTS - (MAX - 1);
    assert!(
        log.contains(&format!("{refused} from hosts beyond --max-hosts")),
        "{log}"
    );
    assert!(lines(&log, "refusing state").len() <= 10, "{log}");
    assert!(
        rss_after < rss_before + 8 * 1024,
        "RSS grew from {rss_before} to {rss_after} KiB"
    );
}

/// 5,000 distinct host names to a collector that takes 50 (`--max-hosts`): the first 50
/// are stored, the rest are acknowledged, counted and logged (the first five and every
/// thousandth), memory stays flat, and the hosts taken keep being served. Before: RSS 11
/// -> 27 MB, never freed.
#[test]
fn five_thousand_hosts_are_capped_and_counted_with_bounded_memory() {
    for kind in kinds() {
        many_hosts(kind);
    }
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
