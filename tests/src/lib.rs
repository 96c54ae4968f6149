//! Shared helpers for wattson end-to-end tests: the real `wattson` binary as a child process,
//! temp dirs with config files pointed at a fixture sysfs/procfs tree, waiting for a
//! condition with a deadline, and reading the SQLite file the daemon writes.
//!
//! Times are UTC milliseconds (as stored) or `std::time::Duration`s; power is in W.

// Test helpers: a failed expectation is a panic with a message, as in a #[test].
#![allow(clippy::unwrap_used, clippy::panic, clippy::missing_panics_doc)]
#![allow(
    clippy::disallowed_methods,
    reason = "the tests open fixture files and databases in their own process, never beside a connection of the daemon's"
)]

pub mod away;
pub mod broker;
pub mod browser;
pub mod hand_year;
pub mod http;
pub mod idle;
pub mod ledger;
pub mod scripted;
pub mod simulated_day;
pub mod sweep;

use std::fmt::Write as _;
use std::io::{BufRead as _, BufReader, Read as _};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use wattson::store::{SeriesFilter, Store};
use wattson_collectors::Metric;

/// Host name every test config uses.
pub const HOST: &str = "e2e";

/// The workspace root (the parent of this crate).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from(".."), Path::to_owned)
}

/// The KVM guest fixture tree (`sys/` and `proc/`): 2 vCPUs, no cpufreq, static counters.
pub fn kvm_fixture() -> PathBuf {
    workspace_root().join("collectors/tests/fixtures/kvm-amd-epyc-haltpoll")
}

/// The `wattson` binary: `$WATTSON_BIN` if set, else the one next to the running test
/// executable (`target/debug/wattson`, built by `cargo test --workspace`), built once with
/// `cargo build -p wattson --bin wattson` if it is not there.
///
/// `$WATTSON_BIN` matters where several checkouts share one `CARGO_TARGET_DIR`: the last
/// checkout built wins `target/debug/wattson`.
pub fn wattson_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(bin) = std::env::var_os("WATTSON_BIN").filter(|v| !v.is_empty()) {
            return PathBuf::from(bin);
        }
        let exe = std::env::current_exe().expect("test executable path");
        // target/debug/deps/<test> -> target/debug/wattson
        let debug = exe
            .parent()
            .and_then(Path::parent)
            .expect("test executable has no target dir")
            .to_owned();
        let bin = debug.join("wattson");
        if !bin.is_file() {
            let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
            let status = Command::new(cargo)
                .args(["build", "-p", "wattson", "--bin", "wattson"])
                .current_dir(workspace_root())
                .status()
                .expect("running cargo build");
            assert!(status.success(), "cargo build -p wattson failed");
        }
        assert!(bin.is_file(), "no wattson binary at {}", bin.display());
        bin
    })
}

/// A `wattson` command with a clean environment: no systemd variables, info logging.
pub fn wattson() -> Command {
    let mut cmd = Command::new(wattson_bin());
    cmd.env_remove("NOTIFY_SOCKET")
        .env_remove("WATCHDOG_USEC")
        .env_remove("WATCHDOG_PID")
        .env_remove("WATTSON_CONFIG")
        .env("RUST_LOG", "info")
        .stdin(Stdio::null());
    cmd
}

/// Runs `cmd` (a [`wattson`] command with its arguments) and returns what it printed on
/// stdout; the test fails with its stderr where it did not succeed.
pub fn stdout_of(cmd: &mut Command) -> String {
    let out = cmd.output().expect("running wattson");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("stdout is UTF-8")
}

/// Poll `f` every 20 ms until it returns `Some`, or panic naming `what` after `within`.
pub fn wait_for<T>(what: &str, within: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            start.elapsed() < within,
            "timed out after {within:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Now, UTC ms.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The tariff timezone of tests that check "today": a whole-hour offset zone (`Etc/GMT…`)
/// in which it was between noon and one o'clock when this test process first asked. A test
/// run takes minutes (a smart plug's history reaches an hour back), so its samples never
/// straddle local midnight and "today" holds all of them, whenever the suite runs.
#[derive(Debug, Clone, Copy)]
pub struct MiddayZone {
    /// Hours east of UTC, -11 to +12.
    pub offset_h: i32,
}

impl MiddayZone {
    /// The process-wide zone, fixed at its first use.
    pub fn get() -> MiddayZone {
        static ZONE: OnceLock<MiddayZone> = OnceLock::new();
        *ZONE.get_or_init(|| {
            let utc_hour = (now_ms().div_euclid(3_600_000)).rem_euclid(24) as i32;
            MiddayZone {
                offset_h: 12 - utc_hour,
            }
        })
    }

    /// Its IANA name (POSIX sign: `Etc/GMT-5` is five hours east of UTC).
    pub fn name(self) -> String {
        match self.offset_h {
            0 => "UTC".to_owned(),
            h if h > 0 => format!("Etc/GMT-{h}"),
            h => format!("Etc/GMT+{}", -h),
        }
    }

    /// Today's date there, `YYYY-MM-DD`.
    pub fn today(self) -> String {
        let local = now_ms() + i64::from(self.offset_h) * 3_600_000;
        chrono::DateTime::from_timestamp_millis(local)
            .expect("now is a valid time")
            .format("%Y-%m-%d")
            .to_string()
    }
}

/// A TOML basic string holding `s`.
pub fn q(s: impl AsRef<std::ffi::OsStr>) -> String {
    let s = s.as_ref().to_string_lossy();
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// One `[[meter]]` table. `protocol = "line"` gets the simulator's default
/// `power,voltage,current` CSV mapping.
pub fn meter_toml(
    id: &str,
    protocol: &str,
    port: &Path,
    interval: &str,
    address: Option<u8>,
) -> String {
    let mut s = format!(
        "\n[[meter]]\nid = {}\nprotocol = {}\nport = {}\ninterval = {}\n",
        q(id),
        q(protocol),
        q(port),
        q(interval)
    );
    if let Some(a) = address {
        let _ = writeln!(s, "address = {a}");
    }
    if protocol == "line" {
        s.push_str(
            "[meter.line]\nformat = \"csv\"\nfields = { power = 0, voltage = 1, current = 2 }\n",
        );
    }
    s
}

/// A temp dir holding a config file and a database path.
pub struct TestEnv {
    pub dir: tempfile::TempDir,
    /// The database the configs point at (not created until a daemon runs).
    pub db: PathBuf,
}

impl Default for TestEnv {
    fn default() -> Self {
        Self::new()
    }
}

impl TestEnv {
    pub fn new() -> TestEnv {
        let dir = tempfile::tempdir().expect("temp dir");
        let db = dir.path().join("wattson.db");
        TestEnv { dir, db }
    }

    /// A path inside the temp dir.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Write `wattson.toml`: host `e2e` on the KVM fixture, this env's database with a
    /// 200 ms flush interval, then `extra` (meters, `[cpu]`, ...). Returns its path.
    pub fn config(&self, extra: &str) -> PathBuf {
        let root = kvm_fixture();
        self.config_with_roots(&root.join("sys"), &root.join("proc"), extra)
    }

    /// As [`TestEnv::config`], with explicit sysfs and procfs roots.
    pub fn config_with_roots(&self, sys: &Path, proc: &Path, extra: &str) -> PathBuf {
        let text = format!(
            "[host]\nname = {}\nsysfs = {}\nprocfs = {}\n\n[storage]\npath = {}\nflush_interval = \"200ms\"\n{extra}",
            q(HOST),
            q(sys),
            q(proc),
            q(&self.db)
        );
        let path = self.path("wattson.toml");
        std::fs::write(&path, text).expect("writing the config");
        path
    }
}

/// A child process whose stdout lines and stderr are collected in the background.
/// Killed (SIGKILL) and reaped on drop.
pub struct Child {
    process: std::process::Child,
    stderr: Arc<Mutex<String>>,
    /// Closed when the stderr reader has read to the end of the pipe.
    stderr_done: Receiver<()>,
    stdout: Receiver<String>,
}

impl Child {
    /// Spawn `cmd` with piped stdout and stderr.
    pub fn spawn(mut cmd: Command) -> Child {
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawning wattson");
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut err_pipe = child.stderr.take().expect("stderr pipe");
        let sink = stderr.clone();
        let (done, stderr_done) = mpsc::channel::<()>();
        std::thread::spawn(move || {
            let _done = done;
            let mut buf = [0u8; 4096];
            while let Ok(n) = err_pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .expect("stderr lock")
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        let out_pipe = child.stdout.take().expect("stdout pipe");
        let (tx, stdout) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out_pipe).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Child {
            process: child,
            stderr,
            stderr_done,
            stdout,
        }
    }

    /// Start `wattson run --config CONFIG` (plus `args`).
    pub fn run_daemon(config: &Path, args: &[&str]) -> Child {
        Self::run_daemon_with(wattson(), config, args)
    }

    /// Start `wattson run --config CONFIG` from a prepared command (extra env).
    pub fn run_daemon_with(mut cmd: Command, config: &Path, args: &[&str]) -> Child {
        cmd.arg("run").arg("--config").arg(config).args(args);
        Child::spawn(cmd)
    }

    pub fn pid(&self) -> Pid {
        Pid::from_raw(self.process.id() as i32)
    }

    /// Everything written to stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().expect("stderr lock").clone()
    }

    /// The next stdout line, waiting at most `within`.
    pub fn stdout_line(&self, within: Duration) -> Option<String> {
        self.stdout.recv_timeout(within).ok()
    }

    pub fn signal(&self, sig: Signal) {
        kill(self.pid(), sig).expect("sending a signal");
    }

    /// SIGTERM, and the exit status must be 0 within 10 s; returns the stderr.
    pub fn stop_cleanly(&mut self) -> String {
        self.signal(Signal::SIGTERM);
        let status = self.wait_exit(Duration::from_secs(10));
        let stderr = self.stderr();
        assert_eq!(status.and_then(|s| s.code()), Some(0), "{stderr}");
        stderr
    }

    /// The exit status, if the child exits within `within`.
    pub fn wait_exit(&mut self, within: Duration) -> Option<ExitStatus> {
        let start = Instant::now();
        loop {
            if let Some(status) = self.process.try_wait().expect("waiting for the child") {
                // The last lines it wrote may still be in the pipe: read them before saying
                // it exited, so `stderr()` has its whole log (bounded, in case a child of
                // its own still holds the pipe).
                let _ = self.stderr_done.recv_timeout(Duration::from_secs(5));
                return Some(status);
            }
            if start.elapsed() >= within {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// [`wait_for`], panicking with this child's stderr on timeout.
    pub fn wait_for<T>(&self, what: &str, within: Duration, mut f: impl FnMut() -> Option<T>) -> T {
        let start = Instant::now();
        loop {
            if let Some(v) = f() {
                return v;
            }
            assert!(
                start.elapsed() < within,
                "timed out after {within:?} waiting for {what}; stderr:\n{}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Wait until stderr contains `needle`, or panic with the stderr so far.
    pub fn wait_for_log(&self, needle: &str, within: Duration) {
        let start = Instant::now();
        while !self.stderr().contains(needle) {
            assert!(
                start.elapsed() < within,
                "no {needle:?} in the log after {within:?}; stderr:\n{}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

/// `wattson meter simulate --protocol P --noise 0 ARGS...` as a child; returns it and the
/// pty path it printed on its first stdout line.
pub fn simulate_child(config: &Path, protocol: &str, args: &[&str]) -> (Child, PathBuf) {
    let mut cmd = wattson();
    cmd.arg("--config")
        .arg(config)
        .args(["meter", "simulate", "--protocol", protocol, "--noise", "0"])
        .args(args);
    let child = Child::spawn(cmd);
    let line = child
        .stdout_line(Duration::from_secs(10))
        .unwrap_or_else(|| panic!("simulator printed no path; stderr:\n{}", child.stderr()));
    let path = PathBuf::from(line.trim());
    assert!(
        path.exists(),
        "simulator path {} does not exist",
        path.display()
    );
    (child, path)
}

/// A constant-power in-process simulated meter (no noise, no ramp) on a new pty.
pub fn simulate(
    protocol: &str,
    addresses: &[u8],
    watts: f64,
) -> wattson::sources::meters::SimHandle {
    simulate_counted(protocol, addresses, watts, 0.0)
}

/// [`simulate`] whose energy counter starts at `counted_wh` (a meter that counted on while
/// the daemon was away).
pub fn simulate_counted(
    protocol: &str,
    addresses: &[u8],
    watts: f64,
    counted_wh: f64,
) -> wattson::sources::meters::SimHandle {
    let protocol = protocol.parse().expect("protocol name");
    let model = wattson::sources::simulated_power::PowerModel {
        idle_w: watts,
        noise_sd_w: 0.0,
        ramp_s: 0.0,
        energy_wh: counted_wh,
        ..wattson::sources::simulated_power::PowerModel::default()
    };
    let root =
        wattson_collectors::SysRoot::new(kvm_fixture().join("sys"), kvm_fixture().join("proc"));
    wattson::sources::meters::simulate(protocol, addresses, model, &root, 1)
        .expect("starting a simulator")
}

/// Stops a simulated meter while a daemon still reads its port, keeping the port's number:
/// the returned handle holds the pseudo-terminal's slave open, so the kernel does not give
/// the number (`/dev/pts/N`) to another test's simulator, which the daemon would then find
/// and read as its meter come back. Keep it until the daemon has stopped.
pub fn stop_meter_keeping_its_port(meter: wattson::sources::meters::SimHandle) -> std::fs::File {
    use std::os::unix::fs::OpenOptionsExt as _;
    let held = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOCTTY | libc::O_NONBLOCK)
        .open(&meter.path)
        .expect("opening the simulated meter's port");
    drop(meter);
    held
}

/// The deleted files process `pid` holds open whose path starts with `prefix` (a database's
/// path: its WAL or shared-memory index pulled from under the process shows as
/// `w.db-wal (deleted)` under `/proc/PID/fd`).
pub fn deleted_files_of(pid: i32, prefix: &Path) -> Vec<String> {
    let prefix = prefix.display().to_string();
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                .map(|p| p.display().to_string())
                .filter(|p| p.starts_with(&prefix) && p.ends_with("(deleted)"))
                .collect()
        })
        .unwrap_or_default()
}

/// The database opened read-only, once it exists and is migrated.
pub fn open_db(path: &Path) -> Option<Store> {
    if !path.exists() {
        return None;
    }
    Store::open_read_only(path).ok()
}

/// Stored raw samples `(ts_ms, value)` of `source`/`metric` (channel `""` unless the source
/// is `cpu`, any channel then), all time, host [`HOST`].
pub fn points(store: &Store, source: &str, metric: Metric) -> Vec<(i64, f64)> {
    host_points(store, HOST, source, metric)
}

/// [`points`] of another host (a fleet collector's database).
pub fn host_points(store: &Store, host: &str, source: &str, metric: Metric) -> Vec<(i64, f64)> {
    let filter = SeriesFilter::all()
        .host(host)
        .source(&source.into())
        .metric(metric);
    let mut out: Vec<(i64, f64)> = store
        .raw(&filter, 0, i64::MAX)
        .expect("reading raw samples")
        .into_iter()
        .flat_map(|(_, p)| p)
        .collect();
    out.sort_by_key(|p| p.0);
    out
}

/// Like [`points`], opening the database each time (`None` while it is not there yet).
pub fn db_points(db: &Path, source: &str, metric: Metric) -> Vec<(i64, f64)> {
    open_db(db).map_or_else(Vec::new, |s| points(&s, source, metric))
}

/// A stored idle-power regression check (idle 40 W -> 48 W, a regression), as the daemon
/// reads it from its database.
pub fn regression_check() -> wattson::sweep::regression::Check {
    use wattson::sweep::regression::{Check, IdleFigure, decide};
    let baseline = IdleFigure {
        watts: 40.0,
        ci95_w: 0.3,
    };
    let latest = IdleFigure {
        watts: 48.0,
        ci95_w: 0.3,
    };
    Check {
        config: "monthly".into(),
        host: Some("basket".into()),
        checked_ms: 1,
        baseline_run_id: Some(1),
        latest_run_id: Some(2),
        baseline,
        latest,
        verdict: decide(baseline, latest),
    }
}

/// `PRAGMA integrity_check` on a read-only connection.
pub fn integrity_check(db: &Path) -> String {
    let conn =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .expect("opening the database");
    conn.query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .expect("integrity_check")
}

/// Run `cmd` to completion, stdout discarded: (exit code, all of its stderr). Panics,
/// killing it, if it has not exited `within`.
pub fn output_within(mut cmd: Command, within: Duration) -> (Option<i32>, String) {
    cmd.stdout(Stdio::null()).stderr(Stdio::piped());
    let child = cmd.spawn().expect("spawning wattson");
    let pid = Pid::from_raw(child.id() as i32);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let Ok(out) = rx.recv_timeout(within) else {
        let _ = kill(pid, Signal::SIGKILL);
        panic!("{cmd:?} did not exit within {within:?}");
    };
    let out = out.expect("waiting for wattson");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
