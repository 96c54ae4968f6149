//! Each hostile input that invented energy or was stored unchecked, as a regression test
//! through the real binary: a PZEM counter stepping back by 10 Wh, one reading 4,000,000 Wh
//! three times, a power factor of 2.55 and 6553.5 Hz (crafted, CRC-valid PZEM replies on a
//! pseudo-terminal), a smart plug at 99999999 W (over a real broker), and fleet states at
//! -1e12 W, 1e300 W and in the year 9999 (into a real `wattson collect`). In none does the
//! stored energy exceed the largest plausible power times the elapsed time.
// Test helpers fail loudly on a broken setup.
#![allow(clippy::unwrap_used, clippy::panic, clippy::missing_panics_doc)]

use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use nix::sys::signal::Signal;
use wattson_collectors::Metric;
use wattson_tests::broker::{Kind, Options, TestBroker};
use wattson_tests::ledger::*;
use wattson_tests::{Child, TestEnv, now_ms, open_db};

/// A PZEM-004T at address 1 on a pseudo-terminal that answers its `n`th read request with
/// `reply(n)`: any register values, CRC-valid.
struct CraftedPzem {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for CraftedPzem {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// PZEM-004T input registers 0..10 for 230 V, `watts`, `energy_wh`, and raw frequency (0.1
/// Hz) and power factor (0.01) registers, as a reply frame.
fn pzem_frame(watts: f64, energy_wh: u32, freq_raw: u16, pf_raw: u16) -> Vec<u8> {
    let p = (watts * 10.0).round() as u32;
    let i = (watts / 230.0 * 1000.0).round() as u32;
    let regs: [u16; 10] = [
        2300,
        (i & 0xFFFF) as u16,
        (i >> 16) as u16,
        (p & 0xFFFF) as u16,
        (p >> 16) as u16,
        (energy_wh & 0xFFFF) as u16,
        (energy_wh >> 16) as u16,
        freq_raw,
        pf_raw,
        0,
    ];
    let data: Vec<u8> = regs.iter().flat_map(|r| r.to_be_bytes()).collect();
    wattson_collectors::meter::modbus::registers_reply(1, 4, &data)
}

fn crafted_pzem(mut reply: impl FnMut(u64) -> Vec<u8> + Send + 'static) -> CraftedPzem {
    use serialport::SerialPort as _;
    let (mut master, slave) = wattson::sources::meters::pty_pair().unwrap();
    master.set_timeout(Duration::from_millis(50)).unwrap();
    let path = PathBuf::from(slave.name().unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let thread = std::thread::spawn(move || {
        let _slave = slave;
        let mut pending = Vec::new();
        let mut n = 0;
        let mut buf = [0u8; 64];
        while !stop2.load(Ordering::SeqCst) {
            if let Ok(k) = master.read(&mut buf) {
                pending.extend_from_slice(&buf[..k]);
            }
            // A read request is 8 bytes.
            while pending.len() >= 8 {
                pending.drain(..8);
                let _ = master.write_all(&reply(n));
                n += 1;
            }
        }
    });
    CraftedPzem {
        path,
        stop,
        thread: Some(thread),
    }
}

/// `wattson run` on a crafted PZEM polled every 250 ms until `polls` readings were tried;
/// returns the config and the daemon's stderr.
fn run_crafted(env: &TestEnv, host: &str, pzem: &CraftedPzem, stored: usize) -> PathBuf {
    let config = config_for(
        env.dir.path(),
        host,
        &env.db,
        &meter_toml(&pzem.path, "250ms"),
    );
    let mut daemon = Child::run_daemon(&config, &[]);
    daemon.wait_for("readings stored", Duration::from_secs(30), || {
        (power_points(&env.db, host, "meter:wall").len() >= stored).then_some(())
    });
    daemon.signal(Signal::SIGTERM);
    assert_eq!(
        daemon.wait_exit(Duration::from_secs(10)).unwrap().code(),
        Some(0),
        "{}",
        daemon.stderr()
    );
    config
}

/// The monotonic counter total a daemon stored, its largest value, Wh.
fn stored_counter_total(db: &Path, host: &str) -> f64 {
    let store = open_db(db).unwrap();
    let filter = wattson::store::SeriesFilter::all()
        .host(host)
        .source(&"meter:wall".into())
        .metric(Metric::EnergyTotal);
    store
        .raw(&filter, i64::MIN, i64::MAX)
        .unwrap()
        .into_iter()
        .flat_map(|(_, p)| p)
        .map(|p| p.1)
        .fold(0.0, f64::max)
}

/// The stored energy (the ledger's and the counter's) is no more than the largest plausible
/// power over the elapsed time, and no more than the measured 50 W (plus one counter step)
/// either.
fn assert_no_energy_invented(db: &Path, host: &str) {
    let p = power_points(db, host, "meter:wall");
    let elapsed_h = (p[p.len() - 1].0 - p[0].0) as f64 / 3_600_000.0;
    let store = open_db(db).unwrap();
    let ledger = wattson::ledger::energy::total(&store, host, &"meter:wall".into())
        .unwrap()
        .wh;
    let counter = stored_counter_total(db, host);
    for (what, wh) in [("ledger", ledger), ("counter total", counter)] {
        assert!(
            wh <= wattson_collectors::plausibility::MAX_POWER_W * elapsed_h,
            "{host}: {what} {wh} Wh in {elapsed_h} h"
        );
        assert!(
            wh <= WATTS * elapsed_h * 1.5 + 1.0,
            "{host}: {what} {wh} Wh in {elapsed_h} h at 50 W"
        );
    }
}

/// Regression: a PZEM counter that stepped back by 10 Wh was taken as a reset and the
/// whole raw counter added (energy_total 0.3 -> 99,990 Wh).
#[test]
fn hostile_a_counter_stepping_back_adds_nothing() {
    let env = TestEnv::new();
    let host = "hostile-stepback";
    let pzem = crafted_pzem(|n| pzem_frame(WATTS, if n < 5 { 100_000 } else { 99_990 }, 500, 90));
    let config = run_crafted(&env, host, &pzem, 12);
    assert_no_energy_invented(&env.db, host);
    assert!(stored_counter_total(&env.db, host) < 1.0);
    assert!(
        rejected(&config, &[], "meter:wall").contains(&("energy_counter".to_owned(), 1)),
        "{:?}",
        rejected(&config, &[], "meter:wall")
    );
}

/// Regression: a counter reading 4,000,000 Wh three times became the new baseline, its
/// jump counted.
#[test]
fn hostile_a_counter_jumping_three_times_adds_nothing() {
    let env = TestEnv::new();
    let host = "hostile-jump";
    let pzem = crafted_pzem(|n| {
        pzem_frame(
            WATTS,
            if (4..7).contains(&n) { 4_000_000 } else { 1 },
            500,
            90,
        )
    });
    let config = run_crafted(&env, host, &pzem, 12);
    assert_no_energy_invented(&env.db, host);
    assert!(
        stored_counter_total(&env.db, host) <= 2.0,
        "{}",
        stored_counter_total(&env.db, host)
    );
    let r = rejected(&config, &[], "meter:wall");
    assert!(
        r.iter().any(|(why, n)| why == "energy_counter" && *n >= 1),
        "{r:?}"
    );
}

/// Regression: a power factor of 2.55 and 6553.5 Hz were stored.
#[test]
fn hostile_power_factor_and_frequency_out_of_range_are_rejected() {
    let env = TestEnv::new();
    let host = "hostile-pf";
    let pzem = crafted_pzem(|n| match n % 4 {
        1 => pzem_frame(WATTS, 10, 500, 255),
        2 => pzem_frame(WATTS, 10, 65_535, 90),
        _ => pzem_frame(WATTS, 10, 500, 90),
    });
    let config = run_crafted(&env, host, &pzem, 8);
    let store = open_db(&env.db).unwrap();
    for (metric, lo, hi) in [
        (Metric::PowerFactor, 0.0, 1.0),
        (Metric::Frequency, 40.0, 70.0),
    ] {
        let filter = wattson::store::SeriesFilter::all()
            .host(host)
            .source(&"meter:wall".into())
            .metric(metric);
        for (_, points) in store.raw(&filter, i64::MIN, i64::MAX).unwrap() {
            assert!(
                points.iter().all(|p| (lo..=hi).contains(&p.1)),
                "{metric:?}: {points:?}"
            );
        }
    }
    let r = rejected(&config, &[], "meter:wall");
    assert!(
        r.iter().any(|(why, n)| why == "power_factor" && *n >= 1),
        "{r:?}"
    );
    assert!(
        r.iter().any(|(why, n)| why == "frequency" && *n >= 1),
        "{r:?}"
    );
    assert_no_energy_invented(&env.db, host);
    let text = run(&config, &["status"]);
    assert!(
        text.contains("rejected readings") && text.contains("power factor"),
        "{text}"
    );
}

/// A daemon of `host` whose wall meter is a Tasmota plug, sent a good reading, two with
/// `bad_power` W, and a good one, each 1.1 s apart; returned (still running, with its
/// broker and runtime) once the two are counted as rejected for their power.
fn plug_sent_two_bad_readings(
    env: &TestEnv,
    host: &str,
    bad_power: f64,
) -> (PathBuf, Child, TestBroker, tokio::runtime::Runtime) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let broker = {
        let _rt = rt.enter();
        TestBroker::start(Kind::Rumqttd, &Options::default())
    };
    let extra = format!(
        "{}\n[[plug]]\nid = \"wall\"\nkind = \"tasmota\"\ntopic = {}\n",
        mqtt_toml(&broker, "1s"),
        wattson_tests::q(host)
    );
    let config = config_for(env.dir.path(), host, &env.db, &extra);
    let daemon = Child::run_daemon(&config, &[]);
    let reading = |w: f64, kwh: f64| format!(r#"{{"ENERGY":{{"Power":{w},"Total":{kwh}}}}}"#);
    daemon.wait_for_log("plugs: subscribed", Duration::from_secs(20));
    rt.block_on(publish(
        broker.port,
        host,
        &format!("tele/{host}/SENSOR"),
        vec![
            reading(WATTS, 0.1),
            reading(bad_power, 100.0),
            reading(bad_power, 100.0),
            reading(WATTS, 0.1),
        ],
        Duration::from_millis(1100),
    ));
    daemon.wait_for("the rejections counted", Duration::from_secs(20), || {
        rejected(&config, &[], "meter:wall")
            .contains(&("power".to_owned(), 2))
            .then_some(())
    });
    (config, daemon, broker, rt)
}

/// The daemon stopped: only the plug's good readings stored, no energy invented.
fn only_good_readings_stored(env: &TestEnv, host: &str, mut daemon: Child) {
    daemon.signal(Signal::SIGTERM);
    assert!(daemon.wait_exit(Duration::from_secs(10)).is_some());
    let p = power_points(&env.db, host, "meter:wall");
    assert!(p.iter().all(|x| x.1 == WATTS), "{p:?}");
    assert_no_energy_invented(&env.db, host);
}

/// Regression: `{"ENERGY":{"Power":99999999,"Total":100}}` from a smart plug was stored
/// (27.9 kWh in 20 s).
#[test]
fn hostile_plug_power_is_rejected() {
    let env = TestEnv::new();
    let (_config, daemon, _broker, _rt) = plug_sent_two_bad_readings(&env, "hostile", 99_999_999.0);
    only_good_readings_stored(&env, "hostile", daemon);
}

/// Regression: a smart plug reporting -500 W (a reversed clamp, an export) was stored and
/// netted: status showed -0.08 Wh, and the published cost total went down. Refused and
/// counted unless the plug is declared bidirectional.
#[test]
fn a_plug_reporting_negative_power_is_refused_and_costs_never_go_down() {
    let env = TestEnv::new();
    let (config, daemon, _broker, _rt) = plug_sent_two_bad_readings(&env, "negative", -500.0);
    let status = json(&run(&config, &["status", "--json"]));
    let total = &status["cost"]["total"];
    assert!(
        total["kwh"].as_f64().unwrap() >= 0.0 && total["cost"].as_f64().unwrap() >= 0.0,
        "{total}"
    );
    assert!(
        status["cost"]["mean_watts"]
            .as_f64()
            .is_none_or(|w| w >= 0.0),
        "{status}"
    );
    only_good_readings_stored(&env, "negative", daemon);
}

/// A state message of `host`'s wall meter reading `watts` at `ts`.
fn power_state(ts: i64, watts: f64) -> String {
    format!(r#"{{"ts":{ts},"interval_s":1,"series":[["meter:wall","power","",{watts}]]}}"#)
}

/// What a fleet collector made of `host`'s state messages: its directory (kept while the
/// test reads), database, config and log.
struct Collected {
    _dir: tempfile::TempDir,
    db: PathBuf,
    config: PathBuf,
    log: String,
}

/// A fleet collector on a broker of its own, `host`'s `states` published to it `pace` apart,
/// the collector stopped (SIGTERM) once the state at `last_ts` is stored.
fn collect_states(host: &str, states: Vec<String>, pace: Duration, last_ts: i64) -> Collected {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _rt = rt.enter();
    let broker = TestBroker::start(Kind::Rumqttd, &Options::default());
    let dir = tempfile::tempdir().unwrap();
    let (db, config, mut collect) = collector(dir.path(), &broker);
    rt.block_on(publish(
        broker.port,
        host,
        &format!("wattson/{host}/state"),
        states,
        pace,
    ));
    collect.wait_for("the last state", Duration::from_secs(20), || {
        (power_points(&db, host, "meter:wall").last().map(|p| p.0) == Some(last_ts)).then_some(())
    });
    collect.signal(Signal::SIGTERM);
    assert!(collect.wait_exit(Duration::from_secs(10)).is_some());
    Collected {
        _dir: dir,
        db,
        config,
        log: collect.stderr(),
    }
}

/// Regression: fleet states with -1e12 W or 1e300 W were stored (`status` showed GBP
/// 1,152,909,004), and one state in the year 9999 made every later state of its host "not
/// after the newest stored".
#[test]
fn hostile_fleet_states_are_rejected_and_do_not_shut_out_later_ones() {
    let host = "hostile-fleet";
    let now = now_ms();
    let msgs = vec![
        power_state(now - 4000, WATTS),
        power_state(now - 3000, -1e12),
        power_state(now - 2000, 1e300),
        power_state(253_402_300_799_000, WATTS),
        power_state(now - 1000, WATTS),
        power_state(now, WATTS),
    ];
    let c = collect_states(host, msgs, Duration::from_millis(50), now);
    let p = power_points(&c.db, host, "meter:wall");
    assert_eq!(
        p,
        vec![(now - 4000, WATTS), (now - 1000, WATTS), (now, WATTS)]
    );
    let db = c.db.to_str().unwrap();
    let status = json(&run(
        &c.config,
        &["status", "--json", "--db", db, "--host", host],
    ));
    let cost = status["cost"]["total"]["cost"].as_f64().unwrap();
    // 50 W for 4 s at 50 per kWh: well under a penny.
    assert!((0.0..0.01).contains(&cost), "{status}");
    let r = rejected(&c.config, &["--db", db, "--host", host], "meter:wall");
    assert!(r.contains(&("power".to_owned(), 2)), "{r:?}");
    let t = rejected(&c.config, &["--db", db, "--host", host], "state");
    assert!(t.contains(&("timestamp".to_owned(), 1)), "{t:?}");
}

/// `status` of another host on a fleet collector's database listed the power sources of the
/// machine it ran on under that host's readings (its meters, RAPL, hwmon, as if the host's):
/// they are shown for this machine's own host only.
#[test]
fn status_of_a_fleet_host_does_not_show_the_sources_of_the_machine_reading_it() {
    let host = "cupboard";
    let now = now_ms();
    let msgs = vec![power_state(now - 1000, WATTS), power_state(now, WATTS)];
    let c = collect_states(host, msgs, Duration::from_millis(50), now);
    let db = c.db.to_str().unwrap();
    let status = json(&run(
        &c.config,
        &["status", "--json", "--db", db, "--host", host],
    ));
    assert!(status.get("sources").is_none(), "{status}");
    let text = run(&c.config, &["status", "--db", db, "--host", host]);
    assert!(
        text.contains(
            "sources\n  cupboard's own: run `wattson status` there (this machine's are not its)"
        ),
        "{text}"
    );
    assert!(!text.contains("available"), "{text}");
    // The machine's own host still lists them.
    let own = json(&run(&c.config, &["status", "--json", "--db", db]));
    assert!(
        own["sources"].as_array().is_some_and(|s| !s.is_empty()),
        "{own}"
    );
}

/// A host's states delivered out of order: each series is stored in time order, so a state
/// older than one already stored cannot be; it was counted as stored all the same, and
/// the store wrote a warning line per message. Now the collector counts it apart ("after a
/// later state of their host"), says so in a few lines, and stores the rest once.
#[test]
fn fleet_states_out_of_order_are_counted_apart_not_as_stored() {
    let host = "shuffled";
    let now = now_ms();
    // 0, 10, then 1..=9 (each older than 10), then 11: 3 stored, 9 late.
    let mut order = vec![0, 10];
    order.extend(1..=9);
    order.push(11);
    let msgs: Vec<String> = order
        .iter()
        .map(|k| power_state(now - 20_000 + k * 1000, WATTS))
        .collect();
    let last = now - 20_000 + 11_000;
    let c = collect_states(host, msgs, Duration::from_millis(20), last);
    let (cdb, log) = (&c.db, &c.log);
    let p: Vec<i64> = power_points(cdb, host, "meter:wall")
        .iter()
        .map(|p| p.0)
        .collect();
    assert_eq!(p, [now - 20_000, now - 10_000, last]);
    assert!(
        log.contains("9 after a later state of their host (9 samples not stored)"),
        "{log}"
    );
    let late_lines = log
        .lines()
        .filter(|l| l.contains("came after a later one"))
        .count();
    let drop_lines = log
        .lines()
        .filter(|l| l.contains("not after the newest stored"))
        .count();
    assert!(
        late_lines <= 6 && drop_lines <= 6,
        "{late_lines} + {drop_lines} lines:\n{log}"
    );
}
