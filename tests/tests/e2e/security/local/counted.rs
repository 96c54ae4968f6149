//! What is refused is counted: connections to `[http]` closed unserved, and fleet states
//! empty or with control characters in the host name; `status` names a fleet collector's
//! database.

use std::time::{Duration, Instant};

use super::run;
use wattson_tests::{Child, TestEnv, q, wattson};

/// Row 7: a flood of connections to `[http]`: every one closed unserved is in the log's
/// count by the time the daemon stops, not only the first.
#[test]
fn every_connection_closed_unserved_is_counted() {
    const FLOOD: usize = 1000;
    let max = wattson::publish::http::MAX_CONNECTIONS;
    let (_, hard) =
        nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE).unwrap();
    nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE, hard, hard).unwrap();
    let env = TestEnv::new();
    let mut d = wattson_tests::http::HttpDaemon::start(&env, wattson_tests::HOST, 50.0);
    let started = Instant::now();
    let conns: Vec<std::net::TcpStream> = (0..FLOOD)
        .map(|_| std::net::TcpStream::connect(d.addr).unwrap())
        .collect();
    // A refused connection is closed at once; a served one waits (10 s) for its request.
    let closed = |c: &std::net::TcpStream| {
        use std::io::Read as _;
        c.set_nonblocking(true).unwrap();
        matches!((&*c).read(&mut [0u8; 1]), Ok(0))
    };
    wattson_tests::wait_for(
        "every refused connection closed",
        Duration::from_secs(8),
        || (conns.iter().filter(|c| closed(c)).count() >= FLOOD - max).then_some(()),
    );
    let refused = conns.iter().filter(|c| closed(c)).count();
    assert!(
        started.elapsed() < Duration::from_secs(9),
        "the flood took {:?}: served connections may have timed out, so the count is not {}",
        started.elapsed(),
        FLOOD - max
    );
    assert_eq!(refused, FLOOD - max);
    let log = d.daemon.stop_cleanly();
    drop(conns);
    let last = log
        .lines()
        .rfind(|l| l.contains("closed unserved"))
        .unwrap_or_else(|| panic!("{log}"));
    assert!(
        last.contains(&format!("({} since the server started)", FLOOD - max)),
        "{last}"
    );
}

/// Rows 9 and 10: fleet states without samples are counted as empty, not stored, host names
/// with control characters as malformed; `status` on the collector's database says it is a
/// fleet collector's, not "a wattson older than this one".
#[test]
fn the_fleet_collector_counts_what_it_stores_and_status_names_it() {
    use wattson_tests::broker::{Kind, Options, TestBroker, publish_acked};
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _rt = rt.enter();
    let broker = TestBroker::start(Kind::Rumqttd, &Options::default());
    let env = TestEnv::new();
    let config = env.config(&format!(
        "\n[cpu]\nenabled = false\n\n[mqtt]\nurl = {}\nkeepalive = \"5s\"\n",
        q(broker.url(false))
    ));
    let mut cmd = wattson();
    cmd.arg("--config").arg(&config).arg("collect");
    let mut collector = Child::spawn(cmd);
    let now = wattson_tests::now_ms();
    let good = |ts: i64| format!(r#"{{"ts":{ts},"series":[["meter:wall","power","",80.0]]}}"#);
    // The collector has subscribed once a probe's state is stored.
    collector.wait_for(
        "the collector's subscription",
        Duration::from_secs(15),
        || {
            rt.block_on(publish_acked(
                broker.port,
                "probe".into(),
                vec![(
                    "wattson/probe/state".to_owned(),
                    good(wattson_tests::now_ms()),
                )],
                false,
                None,
            ));
            let store = wattson_tests::open_db(&env.db)?;
            (!wattson_tests::host_points(
                &store,
                "probe",
                "meter:wall",
                wattson_collectors::Metric::Power,
            )
            .is_empty())
            .then_some(())
        },
    );
    let msgs = vec![
        (
            "wattson/h1/state".to_owned(),
            format!(r#"{{"ts":{}}}"#, now + 1),
        ),
        (
            "wattson/h1/state".to_owned(),
            format!(r#"{{"ts":{},"series":[]}}"#, now + 2),
        ),
        (
            "wattson/h1/state".to_owned(),
            format!(r#"{{"ts":{}}}"#, now + 3),
        ),
        ("wattson/a\u{7}b/state".to_owned(), good(now + 4)),
        ("wattson/tab\there/state".to_owned(), good(now + 5)),
        ("wattson/h1/state".to_owned(), good(now + 6)),
    ];
    rt.block_on(publish_acked(broker.port, "h1".into(), msgs, false, None));
    collector.wait_for("the good state of h1", Duration::from_secs(15), || {
        let store = wattson_tests::open_db(&env.db)?;
        (!wattson_tests::host_points(
            &store,
            "h1",
            "meter:wall",
            wattson_collectors::Metric::Power,
        )
        .is_empty())
        .then_some(())
    });
    let (_, status) = run(&config, &["status", "--db", env.db.to_str().unwrap()]);
    assert!(
        !status.contains("older than this one") && status.contains("as a fleet collector"),
        "{status}"
    );
    collector.signal(nix::sys::signal::Signal::SIGTERM);
    collector.wait_exit(Duration::from_secs(10)).unwrap();
    let log = collector.stderr();
    let summary = log
        .lines()
        .find(|l| l.contains("collector stopped"))
        .unwrap_or_else(|| panic!("{log}"));
    assert!(summary.contains("3 empty (no samples)"), "{summary}");
    assert!(summary.contains(" 2 malformed"), "{summary}");
    // The probe's states (one or more) and h1's good one; none of the empty ones.
    let stored: u64 = summary
        .split("collector stopped: ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    let store = wattson_tests::open_db(&env.db).unwrap();
    let probes = wattson_tests::host_points(
        &store,
        "probe",
        "meter:wall",
        wattson_collectors::Metric::Power,
    )
    .len();
    assert_eq!(stored, probes as u64 + 1, "{summary}");
}
