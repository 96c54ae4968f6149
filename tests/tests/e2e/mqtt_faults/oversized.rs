//! Oversized messages: a retained Home Assistant status, a plug's message and a QoS 1 message
//! to the collector, each skipped while the rest goes on.

use std::time::Duration;

use super::{collect, host_power, lines, mqtt_section, state_payload, stop, wait_subscribed};
use wattson_collectors::Metric;
use wattson_tests::broker::{Kind, Options, TestBroker, Watcher, kinds, publish_acked};
use wattson_tests::{Child, HOST, TestEnv, db_points, now_ms};

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
