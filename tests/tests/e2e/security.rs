//! Security properties of the real `wattson` binary: the MQTT secret never appears in logs,
//! `config check` output or error messages; a world-readable password file is warned about;
//! a text-line meter that sends megabyte lines neither grows the daemon's memory nor stops it.
//!
//! `cargo test -p wattson-tests --test e2e security:: -- --nocapture` prints the figures.

// Test helpers unwrap and the tests print their figures for RELIABILITY.md.
#![allow(
    clippy::unwrap_used,
    clippy::panic,
    clippy::print_stdout,
    clippy::items_after_statements
)]

use std::io::Write;

use serialport::SerialPort as _;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use wattson::store::{SeriesFilter, Store};
use wattson_collectors::Metric;
use wattson_tests::wattson_bin;

mod local;

const SECRET: &str = "Zebra-7fq2-Secret-Horse";

fn wattson(config: &Path, args: &[&str]) -> Output {
    Command::new(wattson_bin())
        .arg("--config")
        .arg(config)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A port on 127.0.0.1 nothing listens on: bound, then released.
fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

fn secret_setup(mode: u32) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let pw = dir.path().join("mqtt-password");
    std::fs::write(&pw, format!("{SECRET}\n")).unwrap();
    std::fs::set_permissions(&pw, std::fs::Permissions::from_mode(mode)).unwrap();
    let config = dir.path().join("wattson.toml");
    std::fs::write(
        &config,
        format!(
            "[storage]\npath = {:?}\n[mqtt]\nurl = \"mqtt://127.0.0.1:{}\"\nusername = \"wattson\"\npassword_file = {:?}\n",
            dir.path().join("w.db").display().to_string(),
            closed_port(),
            pw.display().to_string()
        ),
    )
    .unwrap();
    (dir, config)
}

#[test]
fn the_mqtt_secret_never_appears_in_output_logs_or_errors() {
    let (dir, config) = secret_setup(0o600);
    let check = wattson(&config, &["-v", "config", "check"]);
    let run = wattson(&config, &["-v", "run", "--duration", "3s"]);
    // An error path: the same config with a bad key after the secret's file.
    let bad = dir.path().join("bad.toml");
    let mut body = std::fs::read_to_string(&config).unwrap();
    body.push_str("bogus_key = 1\n");
    std::fs::write(&bad, body).unwrap();
    let bad_check = wattson(&bad, &["-v", "config", "check"]);
    // A password written into the URL is refused without echoing it.
    let inline = dir.path().join("inline.toml");
    std::fs::write(
        &inline,
        format!("[mqtt]\nurl = \"mqtt://wattson:{SECRET}@127.0.0.1:1883\"\n"),
    )
    .unwrap();
    let inline_check = wattson(&inline, &["config", "check"]);
    let inline_run = wattson(&inline, &["run", "--duration", "1s"]);

    let outputs = [
        ("config check", &check),
        ("run -v (unreachable broker)", &run),
        ("config check, bad key", &bad_check),
        ("config check, password in URL", &inline_check),
        ("run, password in URL", &inline_run),
    ];
    let mut bytes = 0;
    for (what, o) in &outputs {
        let t = text(o);
        bytes += t.len();
        assert!(!t.contains(SECRET), "{what} printed the secret:\n{t}");
    }
    println!(
        "secrets: 5 invocations, {bytes} bytes of stdout+stderr searched, secret found 0 times; \
         exits: check {:?}, run {:?}, bad key {:?}, URL password {:?}/{:?}",
        check.status.code(),
        run.status.code(),
        bad_check.status.code(),
        inline_check.status.code(),
        inline_run.status.code()
    );
    assert!(check.status.success(), "{}", text(&check));
    assert!(run.status.success(), "{}", text(&run));
    assert_eq!(bad_check.status.code(), Some(78));
    assert_eq!(inline_check.status.code(), Some(78));
    assert_eq!(inline_run.status.code(), Some(78));
    // The effective config names the file, not its content.
    assert!(text(&check).contains("password_file"), "{}", text(&check));
}

#[test]
fn a_world_readable_password_file_is_warned_about() {
    let (_dir, open) = secret_setup(0o644);
    let warned = text(&wattson(&open, &["config", "check"]));
    let (_dir2, closed) = secret_setup(0o600);
    let quiet = text(&wattson(&closed, &["config", "check"]));
    println!(
        "password file mode 0644 warned: {}; mode 0600 warned: {}",
        warned.contains("readable by every user"),
        quiet.contains("readable by every user")
    );
    assert!(warned.contains("readable by every user"), "{warned}");
    assert!(!quiet.contains("readable by every user"), "{quiet}");
}

/// VmRSS of `pid` in KiB (our own child process).
fn rss_kib(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find(|l| l.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// The length of the long lines a text meter sends, bytes.
const LONG: usize = 1 << 20;
/// How many it sends.
const LONG_LINES: u64 = 8;

/// The text meter on `master`: good lines, then [`LONG_LINES`] megabyte lines between good
/// ones (`long_started` once the first begins, `long_written` counting them), written as
/// fast as the daemon reads them, until `stop`.
fn device(
    mut master: serialport::TTYPort,
    stop: &AtomicBool,
    long_started: &AtomicBool,
    long_written: &AtomicU64,
) {
    let long = vec![b'A'; LONG];
    let mut i = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let good = if long_written.load(Ordering::Relaxed) < LONG_LINES {
            "P=50.0\n"
        } else {
            "P=51.0\n"
        };
        if master.write_all(good.as_bytes()).is_err() {
            std::thread::sleep(Duration::from_millis(20));
            continue;
        }
        i += 1;
        if i >= 3 && long_written.load(Ordering::Relaxed) < LONG_LINES {
            long_started.store(true, Ordering::Relaxed);
            let mut off = 0;
            while off < long.len() && !stop.load(Ordering::Relaxed) {
                match master.write(&long[off..]) {
                    Ok(n) => off += n,
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
            let _ = master.write_all(b"\n");
            long_written.fetch_add(1, Ordering::Relaxed);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The power samples stored for the meter `desk` in the database at `db`.
fn stored_power(db: &Path) -> Vec<f64> {
    let store = Store::open_read_only(db).unwrap();
    store
        .raw(
            &SeriesFilter::all()
                .source(&"meter:desk".into())
                .metric(Metric::Power),
            0,
            i64::MAX,
        )
        .unwrap()
        .into_iter()
        .flat_map(|(_, p)| p.into_iter().map(|x| x.1))
        .collect()
}

#[test]
fn megabyte_lines_from_a_text_meter_are_counted_and_dropped_with_bounded_memory() {
    let (master, slave) = serialport::TTYPort::pair().unwrap();
    let port = slave.name().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("line.db");
    let config = dir.path().join("wattson.toml");
    std::fs::write(
        &config,
        format!(
            "[storage]\npath = {:?}\nflush_interval = \"1s\"\n[cpu]\nenabled = false\n\
             [[meter]]\nid = \"desk\"\nprotocol = \"line\"\nport = {port:?}\ninterval = \"1s\"\n\
             [meter.line]\nformat = \"kv\"\nfields = {{ power = \"P\" }}\n",
            db.display().to_string()
        ),
    )
    .unwrap();
    let mut child = Command::new(wattson_bin())
        .arg("--config")
        .arg(&config)
        .args(["run", "--duration", "25s"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();

    // The device: good lines, then megabyte lines between good ones, written as fast as the
    // daemon reads them.
    let stop = Arc::new(AtomicBool::new(false));
    let long_written = Arc::new(AtomicU64::new(0));
    let long_started = Arc::new(AtomicBool::new(false));
    let writer = {
        let stop = stop.clone();
        let long_started = long_started.clone();
        let long_written = long_written.clone();
        std::thread::spawn(move || {
            device(master, &stop, &long_started, &long_written);
            // Held open while the device writes.
            drop(slave);
        })
    };

    let mut first_rss = None;
    let mut max_rss = 0;
    let deadline = Instant::now() + Duration::from_secs(40);
    let mut done_at = None;
    while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
        // The baseline: once the good lines before the first long one are in.
        if let Some(r) = rss_kib(pid) {
            if first_rss.is_some() {
                max_rss = max_rss.max(r);
            } else if long_started.load(Ordering::Relaxed) {
                first_rss = Some(r);
                max_rss = r;
            }
        }
        if done_at.is_none() && long_written.load(Ordering::Relaxed) >= LONG_LINES {
            done_at = Some(Instant::now());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let status = child.wait().unwrap();
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();

    let values = stored_power(&db);
    let after = values.iter().filter(|v| (**v - 51.0).abs() < 1e-6).count();
    let odd: Vec<&f64> = values
        .iter()
        .filter(|v| (**v - 50.0).abs() > 1e-6 && (**v - 51.0).abs() > 1e-6)
        .collect();
    let first = first_rss.unwrap_or(0);
    println!(
        "long lines: {} of {LONG_LINES} lines of {LONG} bytes sent; {} power samples stored ({after} \
         after the long lines, {} other values); daemon RSS first {first} KiB, max {max_rss} KiB \
         (growth {} KiB); exit {status}",
        long_written.load(Ordering::Relaxed),
        values.len(),
        odd.len(),
        max_rss.saturating_sub(first)
    );
    assert!(status.success());
    assert_eq!(
        long_written.load(Ordering::Relaxed),
        LONG_LINES,
        "the daemon stopped reading"
    );
    assert!(
        odd.is_empty(),
        "values from a long line were stored: {odd:?}"
    );
    assert!(after > 0, "the meter did not move on after the long lines");
    // Eight 1 MiB lines went through: holding them would add 8192 KiB.
    assert!(
        max_rss.saturating_sub(first) < 2048,
        "memory grew {} KiB",
        max_rss - first
    );
}
