//! One owner of the meter: `wattson sweep` and `wattson status` through a running
//! `wattson run`'s control socket (`<db>.sock`), and on their own when no daemon runs.
//!
//! The simulated PZEM-004T runs in this test process and, once a sweep starts, follows that
//! sweep process (`SimHandle::follow_process`): `40 W + 15 W x` the CPUs the sweep's loop
//! threads ask for (time on a CPU plus time waiting for one), so the other tests running
//! beside it change neither the watts nor how long a level takes. The daemon polls it every
//! 100 ms and streams the readings to the sweep, so the loops in the sweep's process show in
//! the daemon's stored power.

#![allow(clippy::unwrap_used, clippy::panic)]

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::os::unix::fs::{FileTypeExt as _, PermissionsExt as _};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use wattson::control::socket_path;
use wattson::sources::meters::SimHandle;
use wattson::sources::simulated_power::PowerModel;
use wattson::store::Store;
use wattson_collectors::meter::Protocol;
use wattson_collectors::{Metric, SysRoot};
use wattson_tests::{
    Child, HOST, TestEnv, db_points, meter_toml, open_db, wattson, workspace_root,
};

/// A simulated PZEM-004T that follows the loop threads of this test process (idle, but for
/// an in-process sweep of another module) until a sweep's process is named.
fn loop_following_meter() -> SimHandle {
    let model = PowerModel {
        idle_w: 40.0,
        per_cpu_w: 15.0,
        follow_cpu: true,
        follow_pid: Some(std::process::id()),
        follow_demand: true,
        follow_threads: Some("wattson-spin".into()),
        noise_sd_w: 0.3,
        ramp_s: 0.3,
        ..PowerModel::default()
    };
    let root = SysRoot::new("/sys", "/proc");
    wattson::sources::meters::simulate(Protocol::Pzem004t, &[1], model, &root, 11).unwrap()
}

/// A config for `env` reading `sim` every 100 ms.
fn config(env: &TestEnv, sim: &SimHandle) -> PathBuf {
    env.config(&meter_toml("wall", "pzem004t", &sim.path, "100ms", Some(1)))
}

/// `wattson run` on `config`, once its control socket is up and it has stored readings.
fn daemon(env: &TestEnv, config: &Path) -> Child {
    let daemon = Child::run_daemon(config, &[]);
    daemon.wait_for_log("control socket", Duration::from_secs(30));
    daemon.wait_for("stored meter readings", Duration::from_secs(30), || {
        (db_points(&env.db, "meter:wall", Metric::Power).len() >= 3).then_some(())
    });
    daemon
}

/// `wattson --config CONFIG sweep ARGS...` as a child whose loops `sim` follows; its exit
/// status and stdout once it exits.
fn sweep(config: &Path, sim: &SimHandle, args: &[&str]) -> (Option<i32>, String, String) {
    let mut cmd = wattson();
    cmd.arg("--config").arg(config).arg("sweep").args(args);
    run_followed(cmd, sim)
}

fn run_followed(cmd: Command, sim: &SimHandle) -> (Option<i32>, String, String) {
    // One sweep with loops at a time: on a small machine two would share its CPUs, the
    // loops' watts would wander, and each level would run to its time cap.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut child = Child::spawn(cmd);
    sim.follow_process(child.pid().as_raw() as u32);
    let status = child
        .wait_exit(Duration::from_secs(180))
        .unwrap_or_else(|| panic!("the sweep did not end; stderr:\n{}", child.stderr()));
    let mut out = String::new();
    while let Some(line) = child.stdout_line(Duration::from_millis(200)) {
        out.push_str(&line);
        out.push('\n');
    }
    (status.code(), out, child.stderr())
}

/// The quick sweep the tests run: idle and one loop, 20 readings each at least.
const QUICK: &[&str] = &[
    "--levels",
    "0,1",
    "--min-samples",
    "20",
    "--idle-wait",
    "1s",
    "--max-level-time",
    "30s",
];

fn with_name<'a>(name: &'a str, rest: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec!["--name", name];
    v.extend_from_slice(rest);
    v
}

/// `wattson --config CONFIG status`'s stdout, after checking that it exits 0.
fn status_text(config: &Path) -> String {
    let mut cmd = wattson();
    cmd.arg("--config").arg(config).arg("status");
    let out = cmd.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// `wattson --config CONFIG sweep --name NAME ARGS` run to its end: exit code and stderr.
fn failing_sweep(cmd: Command, config: &Path, name: &str, args: &[&str]) -> (Option<i32>, String) {
    let mut cmd = cmd;
    cmd.arg("--config")
        .arg(config)
        .arg("sweep")
        .args(with_name(name, args));
    wattson_tests::output_within(cmd, Duration::from_secs(60))
}

#[test]
fn a_sweep_runs_through_the_daemon_which_keeps_storing_and_stores_the_sweep() {
    let env = TestEnv::new();
    let sim = loop_following_meter();
    let config = config(&env, &sim);
    let mut daemon = daemon(&env, &config);
    let socket = socket_path(&env.db);
    let meta = std::fs::metadata(&socket).unwrap();
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.permissions().mode() & 0o777, 0o660, "socket mode");

    let (code, out, err) = sweep(&config, &sim, &with_name("through the daemon", QUICK));
    assert_eq!(code, Some(0), "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        out.contains("meter: meter:wall through the running daemon")
            && out.contains(&socket.display().to_string()),
        "{out}"
    );
    assert!(out.contains("by the daemon"), "{out}");
    assert!(
        !err.contains("in use") && !err.contains("device gone"),
        "the sweep opened the port: {err}"
    );

    // The sweep's levels and fit are in the database, stored by the daemon.
    let store = open_db(&env.db).unwrap();
    let s = wattson::sweep::persist::load(&store, "through the daemon")
        .unwrap()
        .expect("the sweep is stored");
    assert_eq!(s.status, "complete");
    assert_eq!(s.levels.len(), 2, "{s:?}");
    assert!(s.levels.iter().all(|l| l.n >= 20), "{:?}", s.levels);
    let fit = &s.fit.as_ref().expect("a fit")[0];
    let idle = fit["loops"]["intercept"].as_f64().unwrap();
    let per_loop = fit["loops"]["slope"].as_f64().unwrap();
    eprintln!("through the daemon: idle {idle:.2} W, {per_loop:.2} W per loop");
    assert!((idle - 40.0).abs() < 1.0, "idle {idle}");
    // The loops ran in the sweep's process and showed at the meter: about 15 W, less the
    // CPU the loop lost to the rest of a shared machine.
    assert!(per_loop > 5.0 && per_loop < 16.0, "{per_loop} W per loop");
    assert!(s.meter.contains("pzem004t wall on"), "{}", s.meter);

    // The daemon kept storing throughout: no gap, and the loop shows in its stored power.
    let (from, to) = (s.started_ms, s.ended_ms.unwrap());
    daemon.wait_for(
        "the sweep's readings stored",
        Duration::from_secs(10),
        || {
            let p = db_points(&env.db, "meter:wall", Metric::Power);
            (p.last().is_some_and(|l| l.0 >= to)).then_some(p)
        },
    );
    let store = open_db(&env.db).unwrap();
    let during: Vec<(i64, f64)> = wattson_tests::points(&store, "meter:wall", Metric::Power)
        .into_iter()
        .filter(|p| p.0 >= from && p.0 <= to)
        .collect();
    let longest = during
        .windows(2)
        .map(|w| w[1].0 - w[0].0)
        .max()
        .unwrap_or(i64::MAX);
    let expected = (to - from) / 100;
    eprintln!(
        "stored during the sweep: {} readings in {:.1} s (at most {expected}), longest spacing {longest} ms",
        during.len(),
        (to - from) as f64 / 1000.0
    );
    assert!(longest <= 1000, "a {longest} ms hole in the stored power");
    assert!(
        during.len() as i64 >= expected * 8 / 10,
        "{} of {expected} readings stored",
        during.len()
    );
    let gaps = store.gaps(HOST, from, to).unwrap();
    assert!(gaps.is_empty(), "gaps recorded during the sweep: {gaps:?}");
    let loop_level = s.levels.iter().find(|l| l.loops == 1).unwrap();
    let peak = during.iter().map(|p| p.1).fold(f64::MIN, f64::max);
    assert!(
        peak > 40.0 + 5.0,
        "the stored power never rose with the loop (peak {peak} W, level {} W)",
        loop_level.mean_w
    );

    // Status reads live readings from the daemon and says so.
    let text = status_text(&config);
    assert!(
        text.contains("readings: live from the daemon (pid"),
        "{text}"
    );

    daemon.signal(Signal::SIGTERM);
    let exit = daemon.wait_exit(Duration::from_secs(15)).unwrap();
    assert!(exit.success(), "{}", daemon.stderr());
    assert!(!socket.exists(), "the daemon left its socket behind");
}

#[test]
fn without_a_daemon_a_sweep_opens_the_meter_itself_and_says_so() {
    let env = TestEnv::new();
    let sim = loop_following_meter();
    let config = config(&env, &sim);
    let (code, out, err) = sweep(&config, &sim, &with_name("direct", QUICK));
    assert_eq!(code, Some(0), "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        out.contains(&format!(
            "opened directly (no daemon is running for {})",
            env.db.display()
        )),
        "{out}"
    );
    assert!(!out.contains("by the daemon"), "{out}");
    let store = open_db(&env.db).unwrap();
    let s = wattson::sweep::persist::load(&store, "direct")
        .unwrap()
        .unwrap();
    assert_eq!(s.levels.len(), 2);
}

#[test]
fn a_stale_socket_file_is_named_and_the_next_daemon_replaces_it() {
    let env = TestEnv::new();
    let sim = loop_following_meter();
    let config = config(&env, &sim);
    let socket = socket_path(&env.db);
    // A daemon that died without removing its socket: the file stays, nothing listens.
    drop(UnixListener::bind(&socket).unwrap());
    assert!(socket.exists());
    let (code, out, err) = sweep(
        &config,
        &sim,
        &with_name("stale", &["--levels", "0", "--min-samples", "10"]),
    );
    assert_eq!(code, Some(0), "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        out.contains("opened directly")
            && out.contains(&format!("its control socket {} is stale", socket.display())),
        "{out}"
    );

    let mut daemon = daemon(&env, &config);
    daemon.wait_for_log("replaced a stale one", Duration::from_secs(5));
    let text = status_text(&config);
    assert!(text.contains("readings: live from the daemon"), "{text}");
    daemon.signal(Signal::SIGTERM);
    assert!(daemon.wait_exit(Duration::from_secs(15)).unwrap().success());
}

#[test]
fn a_socket_this_user_may_not_use_is_named_with_the_reason_and_what_to_do() {
    let env = TestEnv::new();
    let sim = loop_following_meter();
    let config = config(&env, &sim);
    let _daemon = daemon(&env, &config);
    let socket = socket_path(&env.db);
    let mut cmd = wattson();
    if nix::unistd::geteuid().is_root() {
        // Root connects to anything: run the sweep as nobody, against the root daemon's
        // socket (root:root, 0660). Nobody may read the config and the fixture.
        std::fs::set_permissions(env.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::os::unix::process::CommandExt::uid(&mut cmd, 65_534);
        std::os::unix::process::CommandExt::gid(&mut cmd, 65_534);
    } else {
        std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o000)).unwrap();
    }
    let (code, err) = failing_sweep(cmd, &config, "denied", QUICK);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "cannot connect to the daemon's control socket {}: Permission denied",
            socket.display()
        )) && err.contains("run this as root"),
        "{err}"
    );
    assert_eq!(
        err.matches("Permission denied").count(),
        1,
        "the OS reason is printed once: {err}"
    );
}

#[test]
fn a_client_that_never_reads_is_dropped_while_sampling_and_storing_go_on() {
    let env = TestEnv::new();
    let sim = loop_following_meter();
    let config = config(&env, &sim);
    let daemon = daemon(&env, &config);
    let mut stuck = UnixStream::connect(socket_path(&env.db)).unwrap();
    stuck
        .write_all(b"{\"op\":\"subscribe\",\"source\":\"meter:wall\"}\n")
        .unwrap();
    let since = wattson_tests::now_ms();
    // It reads nothing from here on; the daemon drops it once it falls behind.
    daemon.wait_for_log("dropped client", Duration::from_secs(60));
    let dropped = wattson_tests::now_ms();
    eprintln!("dropped after {:.1} s", (dropped - since) as f64 / 1000.0);
    // Storing went on all the while, and goes on.
    daemon.wait_for(
        "readings stored after the drop",
        Duration::from_secs(10),
        || {
            let p = db_points(&env.db, "meter:wall", Metric::Power);
            (p.iter().filter(|x| x.0 > dropped).count() >= 10).then_some(())
        },
    );
    let points: Vec<i64> = db_points(&env.db, "meter:wall", Metric::Power)
        .into_iter()
        .map(|p| p.0)
        .filter(|&t| t >= since && t <= dropped)
        .collect();
    let longest = points
        .windows(2)
        .map(|w| w[1] - w[0])
        .max()
        .unwrap_or(i64::MAX);
    assert!(
        longest <= 1000,
        "a {longest} ms hole in the stored power while the client stalled"
    );
    // The daemon answers others meanwhile.
    let text = status_text(&config);
    assert!(text.contains("readings: live from the daemon"), "{text}");
    // The stalled client finds its connection closed once it reads.
    let mut rest = Vec::new();
    let _ = stuck.read_to_end(&mut rest);
}

/// A connection whose hello has been read.
fn connect(socket: &Path) -> (UnixStream, BufReader<UnixStream>) {
    let s = UnixStream::connect(socket).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut r = BufReader::new(s.try_clone().unwrap());
    let mut hello = String::new();
    r.read_line(&mut hello).unwrap();
    assert!(
        hello.starts_with("{\"type\":\"hello\",\"protocol\":1,"),
        "{hello}"
    );
    (s, r)
}

fn line(r: &mut BufReader<UnixStream>) -> String {
    let mut s = String::new();
    r.read_line(&mut s).unwrap();
    s
}

#[test]
fn the_socket_is_bounded_and_nothing_received_changes_a_setting() {
    let env = TestEnv::new();
    let sim = loop_following_meter();
    let config = config(&env, &sim);
    let mut daemon = daemon(&env, &config);
    let socket = socket_path(&env.db);

    // A request for something the protocol does not offer is refused; the connection goes
    // on.
    let (mut w, mut r) = connect(&socket);
    w.write_all(b"{\"op\":\"set_interval\",\"source\":\"meter:wall\",\"ms\":1}\n")
        .unwrap();
    let refused = line(&mut r);
    assert!(
        refused.contains("\"type\":\"error\"") && refused.contains("not a request"),
        "{refused}"
    );
    w.write_all(b"{\"op\":\"status\"}\n").unwrap();
    let status: serde_json::Value = serde_json::from_str(&line(&mut r)).unwrap();
    assert_eq!(status["type"], "status");
    assert_eq!(status["sources"], serde_json::json!(["cpu", "meter:wall"]));
    // A made-up sweep (readings this connection was never sent) is not stored.
    w.write_all(b"{\"op\":\"subscribe\",\"source\":\"meter:wall\"}\n")
        .unwrap();
    let subscribed = line(&mut r);
    assert!(subscribed.contains("\"interval_ms\":100"), "{subscribed}");
    let now = wattson_tests::now_ms();
    let level = serde_json::json!({
        "kind": "spin", "loops": 0, "started_ms": now, "ended_ms": now + 100, "settle_s": 0.0,
        "n": 5000, "mean_w": 1.0, "sd_w": 0.0, "ci95_w": 0.0, "ci_method": "x", "min_w": 1.0,
        "max_w": 1.0, "mean_mhz": null, "busy": null, "busy_cpus": null, "residency": {},
        "ops_per_s": 0.0, "joules_per_op": null, "components": {}, "pinned": true,
        "smt_siblings": false, "warnings": []
    });
    let record = serde_json::json!({
        "op": "store_sweep", "name": "invented", "source": "meter:wall",
        "settings": {"levels": [0], "kinds": ["spin"], "ci_watts": 0.5, "ci_percent": 1.0,
                     "min_samples": 20, "max_level_s": 90.0, "governor": null, "ci_method": "x"},
        "physical_cores": 1, "regression_check": false, "levels": [level], "complete": true,
        "started_ms": now, "ended_ms": now + 100
    });
    w.write_all(format!("{record}\n").as_bytes()).unwrap();
    let reply = loop {
        let l = line(&mut r);
        if !l.contains("\"type\":\"reading\"") {
            break l;
        }
    };
    assert!(
        reply.contains("sweep not stored") && reply.contains("5000 readings"),
        "{reply}"
    );
    drop((w, r));

    // A request longer than the limit closes the connection.
    let (mut w, mut r) = connect(&socket);
    let long = vec![b'x'; wattson::control::messages::MAX_LINE_BYTES + 1];
    let _ = w.write_all(&long);
    let said = line(&mut r);
    assert!(said.contains("longer than"), "{said}");
    assert_eq!(line(&mut r), "", "the connection stays open");

    // At most MAX_CLIENTS at once: the next one is told, and closed. (Each asks something,
    // so that none is closed for its silence meanwhile.)
    let open: Vec<_> = (0..wattson::control::messages::MAX_CLIENTS)
        .map(|_| {
            let (mut w, mut r) = connect(&socket);
            w.write_all(b"{\"op\":\"status\"}\n").unwrap();
            assert!(line(&mut r).contains("\"type\":\"status\""));
            (w, r)
        })
        .collect();
    let extra = UnixStream::connect(&socket).unwrap();
    extra
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut first = String::new();
    BufReader::new(extra).read_line(&mut first).unwrap();
    assert!(first.contains("busy"), "{first}");
    // And a client told so says it, naming the socket.
    let (code, err) = failing_sweep(wattson(), &config, "busy", QUICK);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains(&format!("the daemon on {} refused: busy", socket.display())),
        "{err}"
    );
    drop(open);

    assert!(
        open_db(&env.db)
            .map(|s| wattson::sweep::persist::load(&s, "invented").unwrap())
            .unwrap()
            .is_none()
    );
    daemon.signal(Signal::SIGTERM);
    assert!(daemon.wait_exit(Duration::from_secs(15)).unwrap().success());
}

#[test]
fn a_daemon_of_another_protocol_is_named_by_sweep_and_status() {
    let env = TestEnv::new();
    let sim = loop_following_meter();
    let config = config(&env, &sim);
    drop(Store::open(&env.db, &wattson::store::StoreOptions::default()).unwrap());
    let socket = socket_path(&env.db);
    let listener = UnixListener::bind(&socket).unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { break };
            let _ = s.write_all(
                b"{\"type\":\"hello\",\"protocol\":99,\"version\":\"9.9.9\",\"pid\":1}\n",
            );
        }
    });
    let (code, err) = failing_sweep(wattson(), &config, "newer", QUICK);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "the daemon on {} (wattson 9.9.9) speaks control protocol 99",
            socket.display()
        )) && err.contains("speaks 1"),
        "{err}"
    );
    let text = status_text(&config);
    assert!(
        text.contains("readings: the database (the daemon on")
            && text.contains("speaks control protocol 99"),
        "{text}"
    );
}

/// `systemd/wattson-sweep.service`'s ExecStart, word by word, with the installed paths
/// replaced by this test's binary and config.
fn monthly_command(config: &Path) -> Command {
    let unit =
        std::fs::read_to_string(workspace_root().join("systemd/wattson-sweep.service")).unwrap();
    let exec = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .expect("an ExecStart= line");
    let words: Vec<&str> = exec.split_whitespace().collect();
    assert_eq!(words[0], "/usr/bin/wattson", "{exec}");
    assert!(
        exec.contains("--config /etc/wattson/wattson.toml"),
        "{exec}"
    );
    let mut cmd = wattson();
    for w in &words[1..] {
        if *w == "/etc/wattson/wattson.toml" {
            cmd.arg(config);
        } else {
            cmd.arg(w);
        }
    }
    cmd
}

#[test]
fn the_monthly_units_command_line_runs_through_a_running_daemon() {
    let env = TestEnv::new();
    let sim = loop_following_meter();
    let config = config(&env, &sim);
    let _daemon = daemon(&env, &config);
    let started = Instant::now();
    // Twice: the first run is the baseline, the second is checked against it.
    for run in 1..=2 {
        let (code, out, err) = run_followed(monthly_command(&config), &sim);
        assert_eq!(code, Some(0), "run {run}: stdout:\n{out}\nstderr:\n{err}");
        assert!(
            out.contains("through the running daemon"),
            "run {run}: {out}"
        );
        assert!(out.contains("by the daemon"), "run {run}: {out}");
        if run == 2 {
            assert!(
                out.contains("idle power") && out.contains("\"monthly\""),
                "{out}"
            );
        }
    }
    eprintln!(
        "two monthly sweeps through the daemon in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let store = open_db(&env.db).unwrap();
    let checks = wattson::sweep::regression::latest(&store, Some(HOST)).unwrap();
    assert_eq!(checks.len(), 1, "{checks:?}");
    assert_eq!(checks[0].config, "monthly");
    assert!(!checks[0].verdict.detected, "{checks:?}");
}
