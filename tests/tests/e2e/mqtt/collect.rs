//! The real `wattson collect` into SQLite: a fleet of hosts, a message redelivered after a
//! kill, a host's own config.

use std::path::Path;
use std::time::Duration;

use wattson_collectors::Metric;
use wattson_tests::broker::{Kind, Options, TestBroker, Watcher, kinds};

/// One state payload as a wattson host publishes it: power and voltage at `ts`.
fn state_payload(ts: i64, watts: f64) -> String {
    format!(
        r#"{{"ts":{ts},"series":[["meter:wall","power","",{watts}],["meter:wall","voltage","",231.0]]}}"#
    )
}

/// Stored power samples `(ts, W)` of `host`, in time order.
fn host_power(store: &wattson::store::Store, host: &str) -> Vec<(i64, f64)> {
    wattson_tests::host_points(store, host, "meter:wall", Metric::Power)
}

fn fleet_into_sqlite(kind: Kind) {
    use wattson_tests::{Child, TestEnv, now_ms, q, wattson};
    const HOSTS: usize = 20;
    const MESSAGES: i64 = 60;
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _rt = rt.enter();
    let broker = TestBroker::start(kind, &Options::default());
    let env = TestEnv::new();
    let config = env.config(&format!(
        "\n[cpu]\nenabled = false\n\n[mqtt]\nurl = {}\nkeepalive = \"5s\"\n",
        q(broker.url(false))
    ));
    let mut cmd = wattson();
    cmd.arg("--config").arg(&config).arg("collect");
    let mut collector = Child::spawn(cmd);

    // The collector has subscribed once a probe host's message is stored.
    let probe = Watcher::start(broker.port, "probe", &[]);
    collector.wait_for(
        "the collector's subscription",
        Duration::from_secs(15),
        || {
            let _ = probe.client.try_publish(
                "wattson/probe/state",
                rumqttc::QoS::AtLeastOnce,
                false,
                state_payload(now_ms(), 1.0),
            );
            let store = wattson_tests::open_db(&env.db)?;
            (!host_power(&store, "probe").is_empty()).then_some(())
        },
    );

    // A minute of 1 Hz state per host, then each host sends its first five again, as a
    // publisher retrying unacknowledged messages would. Against mosquitto (the broker CI
    // installs) the hosts publish in real time, one state a second for 60 s; against the
    // embedded broker the same minute goes out as fast as the broker takes it.
    let pace = (kind == Kind::Mosquitto).then_some(Duration::from_secs(1));
    let t0 = now_ms() - 120_000;
    let started = std::time::Instant::now();
    let publishers: Vec<_> = (0..HOSTS)
        .map(|i| {
            let topic = format!("wattson/host{i}/state");
            let mut msgs: Vec<(String, String)> = (0..MESSAGES)
                .map(|k| {
                    (
                        topic.clone(),
                        state_payload(t0 + k * 1000, 100.0 + i as f64),
                    )
                })
                .collect();
            msgs.extend(msgs[..5].to_vec());
            rt.spawn(wattson_tests::broker::publish_acked(
                broker.port,
                format!("host{i}"),
                msgs,
                false,
                pace,
            ))
        })
        .collect();
    for p in publishers {
        rt.block_on(p).unwrap();
    }
    let published = started.elapsed();
    let want: Vec<i64> = (0..MESSAGES).map(|k| t0 + k * 1000).collect();
    collector.wait_for(
        "every host's minute in the database",
        Duration::from_secs(30),
        || {
            let store = wattson_tests::open_db(&env.db)?;
            (0..HOSTS)
                .all(|i| host_power(&store, &format!("host{i}")).len() as i64 >= MESSAGES)
                .then_some(())
        },
    );
    let stored = started.elapsed();
    collector.signal(nix::sys::signal::Signal::SIGTERM);
    let status = collector.wait_exit(Duration::from_secs(5)).unwrap();
    assert_eq!(status.code(), Some(0), "stderr:\n{}", collector.stderr());

    let store = wattson_tests::open_db(&env.db).unwrap();
    for i in 0..HOSTS {
        let host = format!("host{i}");
        let power = host_power(&store, &host);
        let ts: Vec<i64> = power.iter().map(|p| p.0).collect();
        assert_eq!(ts, want, "{kind:?} {host}: not each sample exactly once");
        assert!(power.iter().all(|p| p.1 == 100.0 + i as f64), "{host}");
        let hours = store
            .rollups(
                &wattson::store::SeriesFilter::all()
                    .host(&host)
                    .source(&"meter:wall".into())
                    .metric(Metric::Power),
                wattson::store::Resolution::Hour,
                0,
                i64::MAX,
            )
            .unwrap();
        let n: u64 = hours.iter().flat_map(|(_, h)| h).map(|h| h.n).sum();
        assert_eq!(n, MESSAGES as u64, "{kind:?} {host}: rollups count {n}");
    }
    eprintln!(
        "{kind:?}: {HOSTS} hosts x {MESSAGES} messages (+5 repeats each, {}) acknowledged by \
         the broker in {published:?}, all stored after {stored:?}",
        if pace.is_some() { "1 Hz" } else { "burst" }
    );
    assert_eq!(wattson_tests::integrity_check(&env.db), "ok");
}

/// 20 hosts' minute of 1 Hz state (in real time on mosquitto, compressed on rumqttd) through
/// a real broker into one `wattson collect` process and its SQLite file: every sample stored
/// exactly once.
#[test]
fn fleet_of_20_hosts_into_sqlite_stores_every_sample_once() {
    for kind in kinds() {
        fleet_into_sqlite(kind);
    }
}

/// A scripted MQTT 3.1.1 broker for one client at a time: it accepts the connection and the
/// subscription, delivers one QoS 1 message, and answers pings. What it does with the
/// client's PUBACK is the test's choice, which no real broker offers.
mod scripted {
    use std::io::Write;
    use std::net::TcpListener;
    use std::time::Duration;

    use wattson_tests::scripted::{packet, read_packet};

    /// One session: CONNACK (with `session_present`), SUBACK, then PUBLISH `payload` on
    /// `topic` at QoS 1 with packet id 7 (`dup` set on a redelivery). Serves until the
    /// client goes away; returns whether it acknowledged packet 7.
    pub(super) fn serve(
        listener: &TcpListener,
        session_present: bool,
        topic: &str,
        payload: &[u8],
        dup: bool,
        on_ack: impl Fn(),
    ) -> bool {
        let (mut s, _) = listener.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let (kind, _) = read_packet(&mut s).unwrap();
        assert_eq!(kind >> 4, 1, "CONNECT first");
        s.write_all(&packet(0x20, &[u8::from(session_present), 0]))
            .unwrap();
        let mut acked = false;
        let mut published = false;
        while let Ok((kind, body)) = read_packet(&mut s) {
            match kind >> 4 {
                8 => {
                    // SUBSCRIBE: grant QoS 1, then deliver.
                    s.write_all(&packet(0x90, &[body[0], body[1], 1])).unwrap();
                    if !published {
                        published = true;
                        let mut p = (topic.len() as u16).to_be_bytes().to_vec();
                        p.extend_from_slice(topic.as_bytes());
                        p.extend_from_slice(&7u16.to_be_bytes());
                        p.extend_from_slice(payload);
                        s.write_all(&packet(0x32 | if dup { 0x08 } else { 0 }, &p))
                            .unwrap();
                    }
                }
                4 if body == [0, 7] => {
                    acked = true;
                    on_ack();
                }
                12 => s.write_all(&[0xd0, 0]).unwrap(), // PINGREQ
                14 => break,                            // DISCONNECT
                _ => {}
            }
        }
        acked
    }
}

/// The fleet collector is killed (SIGKILL) after it stored a QoS 1 message, and the broker
/// never counts the acknowledgement, as when the process dies before its PUBACK leaves: the
/// broker redelivers the message (DUP set) to the next run, on the same session, and the
/// database still holds that sample once.
#[test]
fn a_message_redelivered_after_the_collector_is_killed_is_stored_once() {
    use wattson_tests::{Child, HOST, TestEnv, db_points, q, wattson};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let env = TestEnv::new();
    let config = env.config(&format!(
        "\n[cpu]\nenabled = false\n\n[mqtt]\nurl = {}\nkeepalive = \"5s\"\n",
        q(format!("mqtt://127.0.0.1:{port}"))
    ));
    let ts = wattson_tests::now_ms() - 5_000;
    let payload = state_payload(ts, 77.0);
    let topic = format!("wattson/{HOST}/state");
    let (acked_tx, acked_rx) = std::sync::mpsc::channel();
    let broker = std::thread::spawn(move || {
        // The first run's acknowledgement is lost with it; the second run's is awaited.
        let _ = scripted::serve(&listener, false, &topic, payload.as_bytes(), false, || {});
        scripted::serve(&listener, true, &topic, payload.as_bytes(), true, || {
            let _ = acked_tx.send(());
        })
    });
    let collect = || {
        let mut cmd = wattson();
        cmd.arg("--config")
            .arg(&config)
            .args(["collect", "--client-id", "collector"]);
        Child::spawn(cmd)
    };

    let mut first = collect();
    first.wait_for("the sample stored", Duration::from_secs(15), || {
        (!db_points(&env.db, "meter:wall", Metric::Power).is_empty()).then_some(())
    });
    first.signal(nix::sys::signal::Signal::SIGKILL);
    first.wait_exit(Duration::from_secs(5)).unwrap();

    let mut second = collect();
    acked_rx
        .recv_timeout(Duration::from_secs(15))
        .unwrap_or_else(|_| panic!("redelivery not acknowledged; stderr:\n{}", second.stderr()));
    second.signal(nix::sys::signal::Signal::SIGTERM);
    let status = second.wait_exit(Duration::from_secs(5)).unwrap();
    assert_eq!(status.code(), Some(0), "stderr:\n{}", second.stderr());
    assert!(broker.join().unwrap(), "second run acknowledged");

    assert_eq!(
        db_points(&env.db, "meter:wall", Metric::Power),
        vec![(ts, 77.0)],
        "stored once"
    );
    let store = wattson_tests::open_db(&env.db).unwrap();
    let hours = store
        .rollups(
            &wattson::store::SeriesFilter::all()
                .host(HOST)
                .source(&"meter:wall".into())
                .metric(Metric::Power),
            wattson::store::Resolution::Hour,
            0,
            i64::MAX,
        )
        .unwrap();
    let n: u64 = hours.iter().flat_map(|(_, h)| h).map(|h| h.n).sum();
    assert_eq!(n, 1, "the hour rollup counts it once");
}

/// `wattson collect` run with a host's own config file (its meter read every 1 s, its
/// states published every 5 s): the collector judges that host's pairs by the states'
/// spacing, not by the meter's interval of the config, and stores its energy within 1 %
/// of what the host stored itself over the same stretch (every pair was a gap).
#[test]
fn a_collector_with_the_hosts_own_config_stores_the_hosts_energy() {
    use wattson_tests::{Child, HOST, TestEnv, q, simulate, wattson};
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _rt = rt.enter();
    let broker = TestBroker::start(Kind::Rumqttd, &Options::default());
    let env = TestEnv::new();
    let meter = simulate("pzem004t", &[1], 80.0);
    let config = env.config(&format!(
        "\n[cpu]\nenabled = false\n{}\n[mqtt]\nurl = {}\npublish_interval = \"5s\"\ndiscovery = false\n",
        wattson_tests::meter_toml("wall", "pzem004t", &meter.path, "1s", Some(1)),
        q(broker.url(false))
    ));
    let fleet_db = env.path("fleet.db");
    let mut cmd = wattson();
    cmd.arg("--config")
        .arg(&config)
        .args(["collect", "--db"])
        .arg(&fleet_db);
    let mut collector = Child::spawn(cmd);
    collector.wait_for_log("collecting every host's samples", Duration::from_secs(15));
    let mut host = Child::run_daemon(&config, &[]);
    let power = |db: &Path| {
        wattson_tests::open_db(db).map_or_else(Vec::new, |s| {
            wattson_tests::host_points(&s, HOST, "meter:wall", Metric::Power)
        })
    };
    collector.wait_for(
        "seven of the host's states collected",
        Duration::from_secs(60),
        || (power(&fleet_db).len() >= 7).then_some(()),
    );
    host.stop_cleanly();
    collector.signal(nix::sys::signal::Signal::SIGTERM);
    collector.wait_exit(Duration::from_secs(10)).unwrap();
    let collected = power(&fleet_db);
    let (from, to) = (collected[0].0, collected[collected.len() - 1].0);
    let energy = |db: &Path| {
        let store = wattson_tests::open_db(db).unwrap();
        wattson::ledger::energy::energy(&store, HOST, &"meter:wall".into(), from, to)
            .unwrap()
            .wh
    };
    let (own, fleet) = (energy(&env.db), energy(&fleet_db));
    assert!(own > 0.0, "the host stored nothing");
    assert!(
        (fleet - own).abs() <= 0.01 * own,
        "collected {fleet} Wh against the host's own {own} Wh over {from}..{to}"
    );
    drop(meter);
}
