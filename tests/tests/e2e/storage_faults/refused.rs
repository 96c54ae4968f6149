//! Refused at start: a second writer on the database, and a database read-only for the
//! daemon's user.

use std::path::Path;
use std::time::{Duration, Instant};

use super::{cannot, longest_step, meter_config, power, stop, wait_stored_after};
use wattson_tests::{Child, TestEnv, simulate, wattson};

/// Regression: two `wattson run` on one database both ran, and 66 of ~93 samples were kept.
/// The second is refused at once, naming the first, and the first loses nothing.
#[test]
fn a_second_wattson_run_on_the_same_database_is_refused_naming_the_first() {
    let env = TestEnv::new();
    let sim = simulate("pzem004t", &[1], 80.0);
    let config = meter_config(&env, &sim);
    let first = Child::run_daemon(&config, &[]);
    wait_stored_after(&first, &env.db, 0, "the first daemon's samples");
    let started = Instant::now();
    let mut second = Child::run_daemon(&config, &[]);
    let refused = second
        .wait_exit(Duration::from_secs(10))
        .unwrap_or_else(|| panic!("the second daemon runs; stderr:\n{}", second.stderr()));
    let took = started.elapsed();
    let err = second.stderr();
    let pid = first.pid().as_raw();
    // `wattson collect` shares [storage] path by default: refused the same way.
    let broker = env.path("collect.toml");
    std::fs::write(
        &broker,
        format!(
            "{}\n[mqtt]\nurl = \"mqtt://127.0.0.1:1\"\n",
            std::fs::read_to_string(&config).unwrap()
        ),
    )
    .unwrap();
    let collect = wattson()
        .arg("--config")
        .arg(&broker)
        .arg("collect")
        .output()
        .unwrap();
    let collect_err = String::from_utf8_lossy(&collect.stderr).into_owned();
    // The first keeps every sample: a 250 ms grid with no hole.
    let mark = wattson_tests::now_ms();
    wait_stored_after(&first, &env.db, mark + 1000, "the first daemon going on");
    let (code, log) = stop(first);
    let points = power(&env.db);
    println!(
        "second writer: refused in {:.2} s with exit {:?}: {:?}; collect exit {:?}; the first \
         stored {} meter samples, longest step {} ms, exit {code:?}",
        took.as_secs_f64(),
        refused.code(),
        err.lines().last(),
        collect.status.code(),
        points.len(),
        longest_step(&points)
    );
    assert_eq!(refused.code(), Some(74), "{err}");
    assert!(
        err.contains("already being written by")
            && err.contains(&format!("pid {pid} "))
            && err.contains("run --config"),
        "{err}"
    );
    assert_eq!(collect.status.code(), Some(74), "{collect_err}");
    assert!(
        collect_err.contains(&format!("pid {pid} ")),
        "{collect_err}"
    );
    assert_eq!(code, Some(0), "{log}");
    assert!(longest_step(&points) <= 600, "samples lost: {points:?}");
}

// ---------------------------------------------------------------------------------------
// Read-only at start.
// ---------------------------------------------------------------------------------------

/// Runs `wattson run` as uid/gid 65534 (`nobody`).
fn run_as_nobody(config: &Path) -> std::process::Output {
    use std::os::unix::process::CommandExt as _;
    let mut cmd = wattson();
    cmd.uid(65534)
        .gid(65534)
        .arg("--config")
        .arg(config)
        .args(["run", "--duration", "5s"]);
    cmd.output().unwrap()
}

/// Regression: a database the daemon's user could not write started, ran and exited 0,
/// every flush failed. It is refused at start with exit 74, naming the file, the user and
/// what to do.
#[test]
fn a_database_read_only_for_the_daemons_user_is_refused_at_start() {
    use std::os::unix::fs::PermissionsExt as _;
    if !nix::unistd::geteuid().is_root() {
        cannot("running as another user needs root");
        return;
    }
    let env = TestEnv::new();
    let config = env.config("\n[cpu]\ninterval = \"250ms\"\n");
    let mut made = Child::run_daemon(&config, &["--duration", "1s"]);
    assert_eq!(
        made.wait_exit(Duration::from_secs(15)).unwrap().code(),
        Some(0),
        "{}",
        made.stderr()
    );
    std::fs::set_permissions(env.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    // The files are root's, 0644: the lock file is the first thing the daemon cannot open.
    let locked_out = run_as_nobody(&config);
    let lock_err = String::from_utf8_lossy(&locked_out.stderr).into_owned();
    // A directory it may write (its own: one any user may write is refused before the
    // database is looked at), but the database file still root's and 0644.
    std::os::unix::fs::chown(env.dir.path(), Some(65_534), Some(65_534)).unwrap();
    std::fs::remove_file(env.path("wattson.db.lock")).unwrap();
    let read_only = run_as_nobody(&config);
    let ro_err = String::from_utf8_lossy(&read_only.stderr).into_owned();
    println!(
        "read-only for uid 65534: lock file root's: exit {:?} {:?}; database file root's: exit \
         {:?} {:?}",
        locked_out.status.code(),
        lock_err.lines().last(),
        read_only.status.code(),
        ro_err.lines().last()
    );
    assert_eq!(locked_out.status.code(), Some(74), "{lock_err}");
    assert!(
        lock_err.contains("wattson.db.lock")
            && lock_err.contains("uid 65534")
            && lock_err.contains("Permission denied"),
        "{lock_err}"
    );
    assert_eq!(read_only.status.code(), Some(74), "{ro_err}");
    assert!(
        ro_err.contains("wattson.db is read-only for wattson")
            && ro_err.contains("runs as uid 65534")
            && ro_err.contains("owned by uid 0 with mode 644"),
        "{ro_err}"
    );
    assert!(!ro_err.contains("READY"), "{ro_err}");
}
