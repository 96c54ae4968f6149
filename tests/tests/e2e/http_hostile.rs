//! Hostile HTTP clients against the real binary: a 64 KiB header and a 64 KiB path (431, no
//! panic), then 500 idle connections, a slowloris client sending its request head a byte at a
//! time, and a client that pipelines requests and never reads the answers, all at once. The
//! meter goes on being sampled and stored at its interval throughout, the daemon's memory
//! stays bounded, the slowloris connection is closed by the header timeout, and once the
//! idle connections have timed out the daemon answers again.
// Test helpers fail loudly on a broken setup.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use wattson_tests::http::{HttpDaemon, get};
use wattson_tests::ledger::power_points;
use wattson_tests::{Child, TestEnv, now_ms};

const HOST: &str = "hostile";
/// The meter's polling interval, ms.
const INTERVAL_MS: i64 = 250;

/// The daemon's resident memory, KiB (its own /proc entry: the process under test).
fn rss_kib(daemon: &Child) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", daemon.pid())).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[test]
fn idle_connections_slowloris_and_huge_heads_neither_stall_sampling_nor_grow_memory() {
    let env = TestEnv::new();
    let HttpDaemon {
        meter: _meter,
        mut daemon,
        addr,
        ..
    } = HttpDaemon::start(&env, HOST, 80.0);
    daemon.wait_for("power in /metrics", Duration::from_secs(30), || {
        get(addr, "/metrics", &[])
            .filter(|r| r.body.contains("wattson_power_watts{"))
            .map(|_| ())
    });

    // Heads over the limit are refused whole, the daemon unharmed.
    let big = "a".repeat(64 * 1024);
    let r = get(addr, "/metrics", &[("X-Big", &big)]);
    assert!(r.as_ref().is_none_or(|r| r.status == 431), "{r:?}");
    let r = get(addr, &format!("/{big}"), &[]);
    assert!(
        r.as_ref()
            .is_none_or(|r| r.status == 431 || r.status == 414),
        "{r:?}"
    );
    let many: Vec<(String, String)> = (0..200).map(|i| (format!("X-{i}"), "v".into())).collect();
    let many: Vec<(&str, &str)> = many.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    let r = get(addr, "/metrics", &many);
    assert!(r.as_ref().is_none_or(|r| r.status == 431), "{r:?}");
    assert_eq!(get(addr, "/healthz", &[]).unwrap().status, 200);

    let rss_before = rss_kib(&daemon);
    let attack_from = now_ms();

    // Slowloris: a request head, one byte every 100 ms, never finished. It notes when the
    // daemon closes the connection.
    let closed = Arc::new(AtomicBool::new(false));
    let slow = {
        let closed = closed.clone();
        let mut s = TcpStream::connect(addr).unwrap();
        std::thread::spawn(move || {
            let head = b"GET /metrics HTTP/1.1\r\nHost: x\r\n";
            let trickle = head
                .iter()
                .chain(b"X-Slow: ".iter())
                .chain(std::iter::repeat(&b'a'));
            for byte in trickle.take(10_000) {
                if s.write_all(&[*byte]).is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            closed.store(true, Ordering::SeqCst);
        })
    };

    // A client that pipelines requests and never reads an answer.
    let mut deaf = TcpStream::connect(addr).unwrap();
    let _ = deaf.set_write_timeout(Some(Duration::from_secs(2)));
    for _ in 0..200 {
        if deaf
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            .is_err()
        {
            break;
        }
    }

    // Then 500 connections that never say anything.
    let idle: Vec<TcpStream> = (0..500)
        .filter_map(|_| TcpStream::connect_timeout(&addr, Duration::from_secs(5)).ok())
        .collect();
    assert!(idle.len() >= 450, "only {} connections opened", idle.len());

    // The header timeout closes the slowloris connection; the idle ones go the same way, and
    // then the daemon answers again.
    let start = Instant::now();
    daemon.wait_for(
        "the slowloris connection to be closed",
        Duration::from_secs(60),
        || closed.load(Ordering::SeqCst).then_some(()),
    );
    let closed_after = start.elapsed();
    daemon.wait_for("an answer after the flood", Duration::from_secs(60), || {
        get(addr, "/healthz", &[])
            .filter(|r| r.status == 200)
            .map(|_| ())
    });
    let rss_after = rss_kib(&daemon);
    let attack_to = now_ms();
    slow.join().unwrap();

    // Sampling and storing went on at the meter's interval throughout.
    daemon.wait_for("the last samples stored", Duration::from_secs(10), || {
        let p = power_points(&env.db, HOST, "meter:wall");
        p.last().is_some_and(|l| l.0 >= attack_to).then_some(())
    });
    let points: Vec<i64> = power_points(&env.db, HOST, "meter:wall")
        .into_iter()
        .map(|p| p.0)
        .filter(|t| (attack_from..=attack_to).contains(t))
        .collect();
    let span = attack_to - attack_from;
    let largest_gap = points.windows(2).map(|w| w[1] - w[0]).max().unwrap();
    assert!(
        points.len() as i64 >= span / INTERVAL_MS * 8 / 10 && largest_gap <= 4 * INTERVAL_MS,
        "{} samples over {span} ms under attack, largest gap {largest_gap} ms (slowloris closed after {closed_after:?})",
        points.len()
    );
    // Memory: the connections' buffers are bounded (64 connections of at most 8 KiB heads).
    assert!(
        rss_after <= rss_before + 8 * 1024,
        "RSS grew from {rss_before} KiB to {rss_after} KiB under attack"
    );
    assert!(
        daemon.stderr().contains("connection(s) closed unserved"),
        "{}",
        daemon.stderr()
    );
    drop(idle);
    let mut buf = [0u8; 1];
    let _ = deaf.set_read_timeout(Some(Duration::from_millis(10)));
    let _ = deaf.read(&mut buf);
    drop(deaf);

    let stderr = daemon.stop_cleanly();
    assert!(!stderr.contains("panicked"), "{stderr}");
}
