//! Storage faults through the real `wattson` binary: a second writer, a database read-only
//! for the daemon's user, a 2 MB file system, a full disk (with `status` and the systemd
//! watchdog), the database's directory deleted while running, and a corrupt chunk.
//!
//! Each test prints its figures for RELIABILITY.md:
//! `cargo test -p wattson-tests --test e2e storage_faults:: -- --nocapture`. The month soak:
//! `cargo test -p wattson-tests --test e2e storage_faults:: -- --ignored --nocapture`.
//!
//! Small file systems are tmpfs mounts (`mount -t tmpfs -o size=2m`), which need root: CI
//! runs as root. Where a mount (or running as another user) is not possible the test says
//! SKIPPED and passes, except under `CI=true`, where it fails.

// Helpers outside #[test] fns are test code too; the tests print their figures.
#![allow(clippy::panic, clippy::unwrap_used, clippy::print_stdout)]

use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use wattson_collectors::Metric;
use wattson_tests::{Child, TestEnv, db_points, integrity_check, meter_toml, q, simulate, wattson};

mod refused;
mod soak;

/// Fails under `CI=true`, else prints SKIPPED: for a test that cannot get what it needs.
fn cannot(what: &str) {
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "CI=true and {what}: this test must run in CI"
    );
    println!("SKIPPED: {what}");
}

/// A tmpfs of `size` (`2m`, `8m`) mounted on a new directory; unmounted on drop.
pub(crate) struct SmallFs {
    pub path: PathBuf,
    _dir: tempfile::TempDir,
}

impl SmallFs {
    pub(crate) fn mount(size: &str) -> Option<SmallFs> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("small");
        std::fs::create_dir(&path).unwrap();
        match Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0755"),
                "tmpfs",
            ])
            .arg(&path)
            .output()
        {
            Ok(o) if o.status.success() => Some(SmallFs { path, _dir: dir }),
            Ok(o) => {
                cannot(&format!(
                    "mount -t tmpfs failed: {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                ));
                None
            }
            Err(e) => {
                cannot(&format!("cannot run mount: {e}"));
                None
            }
        }
    }

    /// Fills the file system and keeps it full (space the daemon frees is taken again)
    /// until the returned filler is dropped, which removes it.
    pub(crate) fn fill(&self) -> Filler {
        let path = self.path.join("filler");
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (tx, full) = std::sync::mpsc::channel();
        let thread = {
            let (path, stop) = (path.clone(), stop.clone());
            std::thread::spawn(move || {
                use std::io::Write as _;
                let mut f = std::fs::File::create(&path).unwrap();
                let block = vec![0u8; 4096];
                let mut first = true;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    while f.write_all(&block).is_ok() {}
                    if std::mem::take(&mut first) {
                        let _ = tx.send(());
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
                drop(f);
                std::fs::remove_file(&path).unwrap();
            })
        };
        full.recv().unwrap();
        Filler {
            stop,
            thread: Some(thread),
        }
    }
}

/// Keeps a file system full while it lives.
pub(crate) struct Filler {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Filler {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.path).status();
    }
}

/// A simulated PZEM-004T at 80 W polled every 250 ms, and the CPU every 250 ms.
fn meter_config(env: &TestEnv, sim: &wattson::sources::meters::SimHandle) -> PathBuf {
    env.config(&format!(
        "\n[cpu]\ninterval = \"250ms\"\n{}",
        meter_toml("wall", "pzem004t", &sim.path, "250ms", None)
    ))
}

/// [`meter_config`] with the database at `db` instead of the env's.
fn config_for(env: &TestEnv, sim: &wattson::sources::meters::SimHandle, db: &Path) -> PathBuf {
    let config = meter_config(env, sim);
    let text = std::fs::read_to_string(&config)
        .unwrap()
        .replace(&q(&env.db), &q(db));
    std::fs::write(&config, text).unwrap();
    config
}

/// The longest step between consecutive stored meter samples, ms.
fn longest_step(points: &[(i64, f64)]) -> i64 {
    points
        .windows(2)
        .map(|w| w[1].0 - w[0].0)
        .max()
        .unwrap_or(0)
}

fn power(db: &Path) -> Vec<(i64, f64)> {
    db_points(db, "meter:wall", Metric::Power)
}

/// Waits for meter samples stamped after `ms` in `db`.
fn wait_stored_after(daemon: &Child, db: &Path, ms: i64, what: &str) {
    daemon.wait_for(what, Duration::from_secs(15), || {
        power(db).iter().any(|&(t, _)| t > ms).then_some(())
    });
}

fn stop(mut daemon: Child) -> (Option<i32>, String) {
    daemon.signal(Signal::SIGTERM);
    let status = daemon
        .wait_exit(Duration::from_secs(15))
        .unwrap_or_else(|| panic!("no exit after SIGTERM; stderr:\n{}", daemon.stderr()));
    (status.code(), daemon.stderr())
}

/// `wattson status` of `config` (and `args`): exit code and stdout.
fn status(config: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let out = wattson()
        .arg("--config")
        .arg(config)
        .arg("status")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

// ---------------------------------------------------------------------------------------
// A 2 MB file system.
// ---------------------------------------------------------------------------------------

/// Writes samples of one power series into `db` until the file is about `bytes` long
/// (an old history: ending a day ago).
fn seed_history(db: &Path, bytes: u64) {
    use wattson::store::{StoreHandle, StoreOptions};
    let (handle, join) = StoreHandle::spawn(
        db,
        StoreOptions {
            host: wattson_tests::HOST.to_owned(),
            ..StoreOptions::default()
        },
    )
    .unwrap();
    let mut ts = wattson_tests::now_ms() - 8 * 86_400_000;
    let mut k = 0u64;
    while std::fs::metadata(db).map_or(0, |m| m.len()) < bytes {
        let batch: Vec<_> = (0..3600)
            .map(|i| {
                k += 1;
                wattson_collectors::Sample::new(
                    ts + i * 1000,
                    "meter:old",
                    Metric::Power,
                    "",
                    90.0 + (k * 7919 % 1000) as f64 / 100.0,
                )
            })
            .collect();
        ts += 3_600_000;
        handle.insert(batch).unwrap();
        handle.flush().unwrap();
        handle
            .query(|s| {
                s.conn()
                    .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
                    .unwrap();
            })
            .unwrap();
    }
    handle.close().unwrap();
    join.join().unwrap().unwrap();
}

fn file_len(p: &Path) -> u64 {
    std::fs::metadata(p).map_or(0, |m| m.len())
}

/// Regression: on a 2 MB file system the write-ahead log (allowed 4 MiB) filled the disk
/// although the data was 400 KB, and every flush failed, also after a restart. The log is
/// now sized to the file system (a sixteenth: 128 KiB here).
#[test]
fn a_2mb_file_system_keeps_its_400kb_database_writing() {
    let Some(fs) = SmallFs::mount("2m") else {
        return;
    };
    let env = TestEnv::new();
    let db = fs.path.join("wattson.db");
    seed_history(&db, 400 * 1024);
    let seeded = file_len(&db);
    let sim = simulate("pzem004t", &[1], 80.0);
    let config = config_for(&env, &sim, &db);
    let wal = fs.path.join("wattson.db-wal");
    let mut runs = Vec::new();
    for run in 0..2 {
        let daemon = Child::run_daemon(&config, &[]);
        let started = Instant::now();
        let mut wal_max = 0;
        while started.elapsed() < Duration::from_secs(12) {
            wal_max = wal_max.max(file_len(&wal));
            std::thread::sleep(Duration::from_millis(50));
        }
        let (code, log) = stop(daemon);
        let failed = log.lines().filter(|l| l.contains("flush failed")).count();
        runs.push((run, code, failed, wal_max));
        assert_eq!(code, Some(0), "run {run}:\n{log}");
        assert_eq!(failed, 0, "run {run}: flushes failed:\n{log}");
    }
    let points = power(&db);
    let free = nix::sys::statvfs::statvfs(&fs.path).unwrap();
    println!(
        "2 MB file system: seeded {seeded} bytes; runs (run, exit, failed flushes, largest \
         log): {runs:?}; {} meter samples, longest step {} ms; database {} bytes, log {} \
         bytes, {} KiB free at the end; integrity {}",
        points.len(),
        longest_step(&points),
        file_len(&db),
        file_len(&wal),
        free.blocks_available() * free.fragment_size() / 1024,
        integrity_check(&db)
    );
    assert!(runs.iter().all(|r| r.3 <= 512 * 1024), "log grew: {runs:?}");
    assert_eq!(integrity_check(&db), "ok");
}

// ---------------------------------------------------------------------------------------
// A full disk: kept in memory and retried; `status` and the watchdog say so.
// ---------------------------------------------------------------------------------------

/// A systemd notification socket.
struct Notify {
    sock: UnixDatagram,
    path: PathBuf,
}

impl Notify {
    fn new(env: &TestEnv) -> Notify {
        let path = env.path("notify.sock");
        let sock = UnixDatagram::bind(&path).unwrap();
        Notify { sock, path }
    }

    /// `wattson run` with `$NOTIFY_SOCKET` and a 1 s watchdog (a ping every 0.5 s).
    fn daemon(&self, config: &Path) -> Child {
        let mut cmd = wattson();
        cmd.env("NOTIFY_SOCKET", &self.path)
            .env("WATCHDOG_USEC", "1000000");
        Child::run_daemon_with(cmd, config, &[])
    }

    /// `WATCHDOG=1` pings received within `window`, from now (older ones are dropped).
    fn pings(&self, window: Duration) -> usize {
        self.sock.set_nonblocking(true).unwrap();
        let mut buf = [0u8; 4096];
        while self.sock.recv(&mut buf).is_ok() {}
        self.sock.set_nonblocking(false).unwrap();
        let deadline = Instant::now() + window;
        let mut n = 0;
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            if left.is_zero() {
                break;
            }
            self.sock.set_read_timeout(Some(left)).unwrap();
            if let Ok(len) = self.sock.recv(&mut buf)
                && &buf[..len] == b"WATCHDOG=1"
            {
                n += 1;
            }
        }
        n
    }
}

/// Regression: a failed flush dropped its batch ("batch lost") and the watchdog watched
/// the sampler only. Now a full disk is logged at once, the samples wait in memory, `status`
/// says the store is not writing, the watchdog pings stop, and once space is freed every
/// sample is stored.
#[test]
fn a_full_disk_stops_the_watchdog_shows_in_status_and_loses_nothing() {
    let Some(fs) = SmallFs::mount("8m") else {
        return;
    };
    let env = TestEnv::new();
    let db = fs.path.join("wattson.db");
    let sim = simulate("pzem004t", &[1], 80.0);
    let config = config_for(&env, &sim, &db);
    let notify = Notify::new(&env);
    let daemon = notify.daemon(&config);
    wait_stored_after(&daemon, &db, 0, "samples before the fill");
    let healthy = notify.pings(Duration::from_secs(2));
    // Filled and kept full: SQLite may absorb a few flushes in the log it holds, and the
    // writer gives the log's space back after a failure.
    let filled_at = Instant::now();
    let filler = fs.fill();
    daemon.wait_for_log("store flush failed", Duration::from_secs(30));
    let detected = filled_at.elapsed();
    daemon.wait_for_log("withholding watchdog pings", Duration::from_secs(5));
    let while_full = notify.pings(Duration::from_secs(3));
    let (status_code, status_out, status_err) = status(&config, &[]);
    drop(filler);
    daemon.wait_for_log("store writing again", Duration::from_secs(10));
    daemon.wait_for_log("watchdog pings resumed", Duration::from_secs(5));
    let after = notify.pings(Duration::from_secs(2));
    let mark = wattson_tests::now_ms();
    wait_stored_after(&daemon, &db, mark, "samples after the space came back");
    let (code, log) = stop(daemon);
    let points = power(&db);
    let not_writing = status_out
        .lines()
        .find(|l| l.contains("NOT WRITING"))
        .unwrap_or_default()
        .trim()
        .to_owned();
    println!(
        "full disk: flush failure logged {:.1} s after the fill; watchdog pings in 2 s healthy \
         {healthy}, in 3 s full {while_full}, in 2 s after {after}; status exit \
         {status_code:?}: {not_writing:?}; {} meter samples, longest step {} ms; exit \
         {code:?}; integrity {}; {:?}",
        detected.as_secs_f64(),
        points.len(),
        longest_step(&points),
        integrity_check(&db),
        log.lines().find(|l| l.contains("store writing again"))
    );
    assert!(healthy >= 3 && after >= 2, "{healthy} {after}");
    assert_eq!(while_full, 0, "watchdog pings while the store cannot write");
    assert_eq!(status_code, Some(0), "{status_err}");
    assert!(
        not_writing.contains("database or disk is full"),
        "{status_out}"
    );
    assert!(
        longest_step(&points) <= 600,
        "samples lost while the disk was full"
    );
    assert_eq!(code, Some(0), "nothing was lost: {log}");
    assert_eq!(integrity_check(&db), "ok");
}

// ---------------------------------------------------------------------------------------
// The database's directory deleted while running.
// ---------------------------------------------------------------------------------------

/// Regression: with its directory deleted, the daemon went on writing into the deleted
/// files, logged nothing and exited 0: everything was lost. Now it notices before the next
/// flush, keeps the samples in memory while the directory cannot be created (a file is in
/// its way: the store is unhealthy and the watchdog pings stop), creates it again once it
/// can, stores every sample since the deletion, and exits 74 naming what happened.
#[test]
fn the_database_directory_deleted_while_running_is_created_again_and_nothing_after_is_lost() {
    let env = TestEnv::new();
    let state = env.path("state");
    std::fs::create_dir(&state).unwrap();
    let db = state.join("wattson.db");
    let sim = simulate("pzem004t", &[1], 80.0);
    let config = config_for(&env, &sim, &db);
    let notify = Notify::new(&env);
    let daemon = notify.daemon(&config);
    wait_stored_after(&daemon, &db, 0, "samples before the deletion");
    let healthy = notify.pings(Duration::from_secs(1));
    let last_before = power(&db).last().map_or(0, |p| p.0);
    let deleted_at = Instant::now();
    std::fs::remove_dir_all(&state).unwrap();
    // A file where the directory was: it cannot be created again for now.
    std::fs::write(&state, "in the way").unwrap();
    daemon.wait_for_log("was deleted while in use", Duration::from_secs(5));
    let noticed = deleted_at.elapsed();
    daemon.wait_for_log("cannot be created again", Duration::from_secs(5));
    daemon.wait_for_log("withholding watchdog pings", Duration::from_secs(5));
    let while_gone = notify.pings(Duration::from_secs(2));
    std::fs::remove_file(&state).unwrap();
    daemon.wait_for_log("opened anew", Duration::from_secs(10));
    let mark = wattson_tests::now_ms();
    wait_stored_after(&daemon, &db, mark, "samples in the new file");
    let (code, log) = stop(daemon);
    let points = power(&db);
    let first_after = points.first().map_or(0, |p| p.0);
    println!(
        "deleted directory: noticed {:.2} s after the deletion; watchdog pings healthy {healthy} \
         in 1 s, {while_gone} in 2 s while it could not be created; new file: {} meter samples \
         from {} ms after the last stored before, longest step {} ms; exit {code:?}: {:?}",
        noticed.as_secs_f64(),
        points.len(),
        first_after - last_before,
        longest_step(&points),
        log.lines().last()
    );
    assert!(healthy >= 1);
    assert_eq!(while_gone, 0, "watchdog pings while the store cannot write");
    // Every sample after the last one in the deleted file is in the new one (the batch in
    // flight at the deletion, if any, went into the deleted file).
    assert!(
        first_after - last_before <= 1500,
        "{} ms of samples missing after the deletion",
        first_after - last_before
    );
    assert!(longest_step(&points) <= 600, "samples lost: {points:?}");
    assert_eq!(code, Some(74), "{log}");
    assert!(
        log.contains("stopped after storage faults: the database file was deleted"),
        "{log}"
    );
    assert_eq!(integrity_check(&db), "ok");
}

// ---------------------------------------------------------------------------------------
// A corrupt chunk.
// ---------------------------------------------------------------------------------------

/// Regression: one corrupt blob in `raw_open` (`integrity_check` ok) made every flush fail
/// for every series, and `status` exit 1. It is now set aside into `quarantine` when the
/// daemon starts, logged and counted; every series goes on; `status` exits 0 and says so.
#[test]
fn a_corrupt_open_chunk_is_set_aside_and_status_reports_it() {
    let env = TestEnv::new();
    let sim = simulate("pzem004t", &[1], 80.0);
    let config = meter_config(&env, &sim);
    let first = Child::run_daemon(&config, &[]);
    wait_stored_after(&first, &env.db, 0, "samples");
    let (code, log) = stop(first);
    assert_eq!(code, Some(0), "{log}");
    let before = power(&env.db).len();
    let conn = rusqlite::Connection::open(&env.db).unwrap();
    let corrupted = conn
        .execute(
            "UPDATE raw_open SET data = x'ffffffffffffffffff' WHERE series_id =
               (SELECT id FROM series WHERE source = 'meter:wall' AND metric = 'power')",
            [],
        )
        .unwrap();
    let check: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    drop(conn);
    assert_eq!((corrupted, check.as_str()), (1, "ok"));
    // Before the daemon sets it aside, readers leave the chunk out.
    let (code_before, _, err_before) = status(&config, &[]);

    let second = Child::run_daemon(&config, &[]);
    second.wait_for_log("set aside a corrupt raw_open row", Duration::from_secs(10));
    let mark = wattson_tests::now_ms();
    wait_stored_after(
        &second,
        &env.db,
        mark + 1000,
        "samples of the corrupted series",
    );
    let (code, log) = stop(second);
    let (code_after, out, _) = status(&config, &[]);
    let (_, json, _) = status(&config, &["--json"]);
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    let quarantined = json["store"]["quarantined"].as_array().map_or(0, Vec::len);
    let points = power(&env.db);
    let line = out
        .lines()
        .find(|l| l.contains("quarantine"))
        .unwrap_or_default()
        .trim()
        .to_owned();
    println!(
        "corrupt chunk: {before} meter samples before; status before the restart exit \
         {code_before:?}; after: {} meter samples, flush failures {}, exit {code:?}; status \
         exit {code_after:?}: {line:?}; {quarantined} in --json",
        points.len(),
        log.matches("flush failed").count()
    );
    // It leaves the chunk out (and says so when it reads it: today's energy comes from the
    // hour's rollup, so it may not need to).
    assert_eq!(code_before, Some(0), "{err_before}");
    assert!(
        err_before.is_empty() || err_before.contains("is corrupt"),
        "{err_before}"
    );
    assert_eq!(code, Some(0), "{log}");
    assert!(!log.contains("flush failed"), "{log}");
    assert!(points.len() > 4, "the corrupted series stores again");
    assert_eq!(code_after, Some(0));
    assert!(line.contains("1 undecodable rows set aside"), "{out}");
    assert_eq!(quarantined, 1);
    assert_eq!(integrity_check(&env.db), "ok");
}
