//! Scripted meter faults through the real binaries: `wattson meter simulate --fault` plays a
//! script of faults on a pseudo-terminal while `wattson run` reads it. After every fault the
//! daemon reads the meter again within three intervals, records the outage as a gap, and
//! stores nothing the device did not measure.

use std::time::Duration;

use super::{Daemon, raw_values, write_config};
use wattson::store::Store;
use wattson_collectors::Metric;
use wattson_tests::{now_ms, simulate_child};

const WATTS: f64 = 100.0;
/// Each fault lasts this long, plus twice the protocol's reply or record timeout: longer
/// than the store bridges at 1 s, so it is a gap, with time to spare for a streamed
/// reading's stamp (below).
const FAULT_MS: i64 = 4_000;
/// A fault's end to the next good reading, at most: three 1 s intervals and the slack of
/// knowing the simulator's start to within a few hundred ms.
const RECOVERY_MS: i64 = 3_000 + 700;

/// Plays `faults` (KINDs, 4 s each and twice the record timeout, 3 s apart from 3 s after
/// the start) on a simulated `protocol` meter read by the daemon, and checks the promises
/// after each.
fn scripted(protocol: &str, faults: &[&str]) {
    // A poll that waited out its record timeout reads the first record after it and is
    // stamped when it was due: a streamed reading can be stamped up to two timeouts before
    // it was read.
    let waits = 2 * i64::try_from(
        protocol
            .parse::<wattson_collectors::meter::Protocol>()
            .unwrap()
            .response_timeout_ms(),
    )
    .unwrap();
    let length = FAULT_MS + waits;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("scripted.db");
    let sim_config = write_config(dir.path(), &db, "");
    let windows: Vec<(i64, i64, String)> = faults
        .iter()
        .enumerate()
        .map(|(i, kind)| {
            let start = 3_000 + i as i64 * (length + 3_000);
            (start, start + length, (*kind).to_owned())
        })
        .collect();
    let mut args = vec!["--watts".to_owned(), WATTS.to_string()];
    for (start, _, kind) in &windows {
        args.push("--fault".into());
        args.push(format!("{kind}@{start}ms+{length}ms"));
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    // The simulator's clock starts before it prints its path: its start lies in
    // [spawned, printed].
    let spawned = now_ms();
    let (sim, port) = simulate_child(&sim_config, protocol, &args);
    let printed = now_ms();
    let last_end = windows.last().map_or(0, |w| w.1);
    let seconds = (last_end + 6_000) / 1000 + 1;
    let mut meter = format!(
        "[[meter]]\nid = \"wall\"\nprotocol = \"{protocol}\"\nport = {:?}\ninterval = \"1s\"\n",
        port.display().to_string()
    );
    if protocol == "line" {
        meter.push_str(
            "[meter.line]\nformat = \"csv\"\nfields = { power = 0, voltage = 1, current = 2 }\n",
        );
    }
    let config = dir.path().join("daemon.toml");
    std::fs::write(
        &config,
        std::fs::read_to_string(&sim_config).unwrap().replace(
            "[cpu]\ninterval = \"1s\"\n",
            &format!("[cpu]\ninterval = \"1s\"\n{meter}"),
        ),
    )
    .unwrap();
    let daemon = Daemon::start(&config, &format!("{seconds}s"));
    let (status, log) = daemon.finish(Duration::from_secs(seconds as u64 + 20));
    drop(sim);
    let log = log.join("\n");
    assert!(status.success(), "daemon failed: {status}\n{log}");

    let power = raw_values(&db, "meter:wall", Metric::Power, "");
    assert!(!power.is_empty(), "nothing stored\n{log}");
    let bad: Vec<_> = power
        .iter()
        .filter(|(_, w)| (w - WATTS).abs() > 1.0)
        .collect();
    assert!(
        bad.is_empty(),
        "readings the device did not measure: {bad:?}\n{log}"
    );
    let store = Store::open_read_only(&db).unwrap();
    let gaps = store.gaps("faults", 0, i64::MAX).unwrap();
    let mut figures = Vec::new();
    for (start, end, kind) in &windows {
        // The window in UTC, as early and as late as it can lie.
        let (early_start, late_end) = (spawned + start, printed + end);
        let resumed = power
            .iter()
            .map(|p| p.0)
            .find(|&t| t >= spawned + end)
            .unwrap_or_else(|| panic!("{kind}: the meter was never read again\n{log}"));
        assert!(
            resumed <= late_end + RECOVERY_MS,
            "{kind}: read again {} ms after the fault's end (at most {RECOVERY_MS})\n{log}",
            resumed - late_end
        );
        // A record sent just before the fault reaches the daemon at its next poll, and a
        // streamed reading is stamped then: up to an interval later; one read after the
        // fault may be stamped up to `waits` earlier.
        let during: Vec<_> = power
            .iter()
            .filter(|p| p.0 > printed + start + 1_500 && p.0 < spawned + end - 500 - waits)
            .collect();
        if *kind == "overlong" {
            // The reply itself is whole; the junk after it is skipped.
            figures.push(format!("{kind}: read throughout"));
            continue;
        }
        assert!(
            during.is_empty(),
            "{kind}: readings stored during the fault: {during:?}\n{log}"
        );
        assert!(
            gaps.iter()
                .any(|g| g.start_ms <= early_start + 1_500
                    && g.end_ms >= spawned + end - 500 - waits),
            "{kind}: no gap recorded over the fault ({early_start}..{late_end}); gaps: {gaps:?}\n{log}"
        );
        figures.push(format!(
            "{kind}: read again {} ms after",
            resumed - (spawned + end)
        ));
    }
    println!("{protocol}: {}", figures.join("; "));
    assert!(log.contains("back after"), "no recovery logged:\n{log}");
}

/// The case: an Eastron SDM630 that answers exception 0x02 to every request for a
/// while, then normally again.
#[test]
fn an_sdm630_answering_exceptions_for_seconds_is_read_again_within_three_intervals() {
    scripted("sdm630", &["exception:2"]);
}

#[test]
fn an_eastron_meter_is_read_again_after_every_kind_of_fault() {
    scripted(
        "sdm120",
        &[
            "exception:6",
            "wrong-address",
            "corrupt",
            "truncated",
            "overlong",
            "garbage",
            "silence",
        ],
    );
}

/// A PZEM's reading is read ahead (its request sent at the end of the previous poll).
#[test]
fn a_pzem_read_ahead_is_read_again_after_exceptions_and_garbage() {
    scripted("pzem004t", &["exception:2", "garbage"]);
}

#[test]
fn a_streaming_meter_is_read_again_after_corrupt_frames_and_garbage() {
    scripted("cse7766", &["corrupt", "garbage"]);
}

#[test]
fn a_text_line_meter_is_read_again_after_corrupt_lines_and_silence() {
    scripted("line", &["corrupt", "silence"]);
}

/// A meter that stops answering for good is stale everywhere as soon as its newest reading
/// is older than three intervals: `status` says so, and `/healthz` answers 503 with why.
#[test]
fn a_meter_that_stops_answering_is_stale_in_status_and_healthz() {
    use wattson_tests::http::{bound_addr, get};
    use wattson_tests::{Child, TestEnv, meter_toml, wait_for, wattson};
    let env = TestEnv::new();
    let sim_config = env.config("");
    let (_sim, port) = simulate_child(&sim_config, "sdm630", &["--fault", "silence@4s+600s"]);
    let config = env.config(&format!(
        "{}\n[http]\nlisten = \"127.0.0.1:0\"\n",
        meter_toml("wall", "sdm630", &port, "1s", None)
    ));
    let mut daemon = Child::run_daemon(&config, &[]);
    let addr = bound_addr(&daemon);
    let healthz = wait_for(
        "/healthz to say the meter is stale",
        Duration::from_secs(30),
        || get(addr, "/healthz", &[]).filter(|r| r.status == 503),
    );
    assert!(
        healthz
            .body
            .starts_with("wall meter: meter:wall: stale: the newest reading is "),
        "{}",
        healthz.body
    );
    let out = wattson()
        .arg("--config")
        .arg(&config)
        .arg("status")
        .output()
        .unwrap();
    let status = String::from_utf8_lossy(&out.stdout);
    assert!(
        status.contains("meter:wall (measured at the wall; updated ")
            && status.contains("; STALE: read every 1 s: the meter is not answering"),
        "{status}"
    );
    daemon.stop_cleanly();
}
