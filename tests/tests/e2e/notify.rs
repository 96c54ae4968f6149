//! sd_notify(3) as systemd sees it: a unix datagram socket named by `$NOTIFY_SOCKET`.
//! READY=1 only once the database is migrated, WATCHDOG=1 at half of `$WATCHDOG_USEC` while
//! sampling is healthy (and not once it stalls), STOPPING=1 on SIGTERM.

// Helpers outside #[test] fns are test code too.
#![allow(clippy::panic)]

use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use wattson_tests::{Child, TestEnv, kvm_fixture, open_db, wattson};

/// Listen on `dir/notify.sock`.
fn listen(env: &TestEnv) -> (UnixDatagram, std::path::PathBuf) {
    let path = env.path("notify.sock");
    let sock = UnixDatagram::bind(&path).expect("binding the notify socket");
    (sock, path)
}

/// The next datagram, waiting at most `within`.
fn recv(sock: &UnixDatagram, within: Duration) -> Option<String> {
    sock.set_read_timeout(Some(within.max(Duration::from_millis(1))))
        .expect("socket timeout");
    let mut buf = [0u8; 4096];
    let n = sock.recv(&mut buf).ok()?;
    Some(String::from_utf8_lossy(&buf[..n]).into_owned())
}

/// Messages received until `deadline`.
fn collect_until(sock: &UnixDatagram, deadline: Instant) -> Vec<(Instant, String)> {
    let mut out = Vec::new();
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        if left.is_zero() {
            break;
        }
        if let Some(m) = recv(sock, left) {
            out.push((Instant::now(), m));
        }
    }
    out
}

fn daemon_with_watchdog(config: &Path, socket: &Path) -> Child {
    let mut cmd = wattson();
    cmd.env("NOTIFY_SOCKET", socket)
        .env("WATCHDOG_USEC", "1000000");
    Child::run_daemon_with(cmd, config, &[])
}

#[test]
fn ready_after_migration_watchdog_at_half_the_interval_stopping_on_sigterm() {
    let env = TestEnv::new();
    let (sock, sock_path) = listen(&env);
    let config = env.config("\n[cpu]\ninterval = \"250ms\"\n");
    let mut daemon = daemon_with_watchdog(&config, &sock_path);

    // Everything before READY=1 is not a watchdog ping; READY=1 means the file is usable.
    let mut before_ready = Vec::new();
    let ready_at = loop {
        let m = recv(&sock, Duration::from_secs(10))
            .unwrap_or_else(|| panic!("no READY=1; stderr:\n{}", daemon.stderr()));
        if m == "READY=1" {
            break Instant::now();
        }
        before_ready.push(m);
    };
    assert!(
        open_db(&env.db).is_some(),
        "READY=1 came before {} was created and migrated",
        env.db.display()
    );
    assert!(
        !before_ready.iter().any(|m| m.starts_with("WATCHDOG")),
        "{before_ready:?}"
    );

    let window = Duration::from_secs(3);
    let msgs = collect_until(&sock, ready_at + window);
    let pings = msgs.iter().filter(|(_, m)| m == "WATCHDOG=1").count();
    // Every 0.5 s: about 6 in 3 s (7 counting one at once on start).
    assert!(
        (4..=9).contains(&pings),
        "{pings} WATCHDOG=1 in {window:?}: {msgs:?}"
    );
    assert!(
        msgs.iter().any(|(_, m)| m.starts_with("STATUS="))
            || before_ready.iter().any(|m| m.starts_with("STATUS="))
    );

    daemon.signal(Signal::SIGTERM);
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut stopping = false;
    while !stopping {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(!left.is_zero(), "no STOPPING=1 within 2 s of SIGTERM");
        stopping = recv(&sock, left).is_some_and(|m| m == "STOPPING=1");
    }
    let status = daemon
        .wait_exit(Duration::from_secs(2))
        .expect("exits after SIGTERM");
    assert_eq!(status.code(), Some(0), "stderr:\n{}", daemon.stderr());
}

/// Copy a directory tree (regular files and directories only).
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir") {
        let entry = entry.expect("dir entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

#[test]
fn a_stalled_sampling_loop_stops_the_watchdog_pings() {
    // The stall is made from outside, with no hook in the daemon: a copy of the fixture
    // whose /proc/cpuinfo becomes a FIFO nobody writes, then a CPU "hotplug" (sysfs `online`
    // rewritten) that makes the CPU collector re-resolve frequency sources, so it opens the
    // FIFO and blocks in open(2) on the sampling thread.
    let env = TestEnv::new();
    let root = env.path("root");
    copy_tree(&kvm_fixture(), &root);
    let (sys, proc) = (root.join("sys"), root.join("proc"));
    let (sock, sock_path) = listen(&env);
    let config = env.config_with_roots(&sys, &proc, "\n[cpu]\ninterval = \"250ms\"\n");
    let daemon = daemon_with_watchdog(&config, &sock_path);

    let healthy_pings = {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut n = 0;
        while n < 3 {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "no watchdog pings; stderr:\n{}",
                daemon.stderr()
            );
            if recv(&sock, left).is_some_and(|m| m == "WATCHDOG=1") {
                n += 1;
            }
        }
        n
    };

    let cpuinfo = proc.join("cpuinfo");
    std::fs::remove_file(&cpuinfo).expect("removing cpuinfo");
    nix::unistd::mkfifo(&cpuinfo, nix::sys::stat::Mode::from_bits_truncate(0o600)).expect("mkfifo");
    // Rewritten in place: the collector's kept handles see the new contents. As the
    // kernel's, /proc/stat lists the online CPUs only (the collector reads `online` again
    // when it does not list the CPUs it reads).
    std::fs::write(sys.join("devices/system/cpu/online"), "0\n").expect("hotplug");
    let stat = std::fs::read_to_string(proc.join("stat")).expect("stat");
    let online_only: String = stat
        .lines()
        .filter(|l| !l.starts_with("cpu1 "))
        .fold(String::new(), |out, l| out + l + "\n");
    std::fs::write(proc.join("stat"), online_only).expect("hotplug in /proc/stat");
    daemon.wait_for_log("cpu online set changed", Duration::from_secs(5));
    let stalled_at = Instant::now();

    // The watchdog allows 3 s without a completed pass, then withholds pings.
    daemon.wait_for_log("stalled", Duration::from_secs(8));
    let logged_after = stalled_at.elapsed();
    let _ = collect_until(&sock, Instant::now() + Duration::from_millis(100));
    let late = collect_until(&sock, Instant::now() + Duration::from_millis(1500));
    assert!(
        !late.iter().any(|(_, m)| m == "WATCHDOG=1"),
        "watchdog pings while the sampling loop is stuck: {late:?}"
    );
    assert!(healthy_pings >= 3);
    assert!(
        logged_after >= Duration::from_millis(2000),
        "stall reported {logged_after:?} after it began: too eager"
    );
    // The sampling thread is blocked in open(2) for good; SIGTERM would wait on it, so the
    // child is killed on drop (systemd's watchdog would do the same).
}
