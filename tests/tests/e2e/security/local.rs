//! The local attack surface (SECURITY.md): what a database, a directory, a configuration
//! or a neighbour on the machine can make root's `wattson` do, each through the real binary.

use std::fmt::Write as _;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use wattson_tests::idle::{bench, host_toml, intel_desktop, snapshot, touched};
use wattson_tests::{Child, TestEnv, q, wattson};

mod composed;
mod counted;
mod engine;
mod imported;
mod opened;
mod reported;

/// An unprivileged user for the tests that need a second one: created with `useradd` when
/// missing. `None` where that cannot be done outside CI (not root); under `CI=true` the
/// test fails instead, so a missing user never hides a test.
fn second_user() -> Option<(u32, u32)> {
    const NAME: &str = "wattson-e2e-other";
    let lookup = || nix::unistd::User::from_name(NAME).ok().flatten();
    if lookup().is_none() && nix::unistd::geteuid().is_root() {
        let _ = Command::new("useradd")
            .args([
                "--system",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                NAME,
            ])
            .status();
    }
    match lookup() {
        Some(u) => Some((u.uid.as_raw(), u.gid.as_raw())),
        None if std::env::var_os("CI").is_some_and(|v| v == "true") => {
            panic!("CI=true: cannot create the second user {NAME} (useradd as root)")
        }
        None => {
            eprintln!("skipped: no second user {NAME} (run as root, or with CI=true to fail)");
            None
        }
    }
}

/// The second user's own directory (mode 0755), as the service's state directory is the
/// service user's, holding an empty database file of that user's: root may open what is
/// in it (`store::directory`), and that user may plant anything there.
fn service_dir(env: &TestEnv, (uid, gid): (u32, u32)) -> PathBuf {
    let dir = env.path("state");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&env.dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::chown(&dir, Some(uid), Some(gid)).unwrap();
    let db = dir.join("w.db");
    std::fs::write(&db, b"").unwrap();
    std::os::unix::fs::chown(&db, Some(uid), Some(gid)).unwrap();
    dir
}

/// A wattson database with one interrupted `idle --measure` whose journal holds `rows`
/// (path, content, value), written by the user `as_user` (python3's sqlite3, as any user
/// could) when given, else by this process.
fn journal_db(db: &Path, rows: &[(PathBuf, &str, &str)], as_user: Option<(u32, u32)>) {
    drop(wattson::store::Store::open(db, &wattson::store::StoreOptions::default()).unwrap());
    let _ = std::fs::remove_file(wattson::store::lock::lock_path(db));
    let mut sql = String::from(
        "INSERT INTO idle_run (id, host, started_ms, status, meter) \
         VALUES (1, 'e2e', 1700000000000, 'running', 'x');",
    );
    for (path, content, value) in rows {
        let _ = write!(
            sql,
            "INSERT INTO idle_original (run_id, path, content, value) VALUES (1, '{}', \
             CAST('{content}' AS BLOB), '{value}');",
            path.display()
        );
    }
    if let Some((uid, gid)) = as_user {
        std::os::unix::fs::chown(db, Some(uid), Some(gid)).unwrap();
        let status = Command::new("python3")
            .args([
                "-c",
                "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.executescript(sys.argv[2]); c.commit()",
            ])
            .arg(db)
            .arg(&sql)
            .uid(uid)
            .gid(gid)
            .status()
            .expect("python3 (CI installs it)");
        assert!(
            status.success(),
            "the other user could not write {}",
            db.display()
        );
    } else {
        let c = rusqlite::Connection::open(db).unwrap();
        c.execute_batch(&sql).unwrap();
    }
}

fn unrestored(db: &Path) -> Vec<String> {
    let c = rusqlite::Connection::open(db).unwrap();
    let mut st = c
        .prepare("SELECT path FROM idle_original WHERE restored_ms IS NULL ORDER BY path")
        .unwrap();
    st.query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

fn run(config: &Path, args: &[&str]) -> (Option<i32>, String) {
    let out = wattson()
        .arg("--config")
        .arg(config)
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// A machine (the Intel desktop's tree) and a config naming it and `db`.
fn machine(env: &TestEnv, db: &Path) -> (PathBuf, PathBuf) {
    let root = env.path("machine");
    intel_desktop(&root);
    let config = env.path("wattson.toml");
    std::fs::write(&config, host_toml(&root, db)).unwrap();
    (root, config)
}

/// The policy file as found, set to powersave as a crashed measurement leaves it.
fn changed_policy(root: &Path) -> (PathBuf, String) {
    let policy = root.join("sys/module/pcie_aspm/parameters/policy");
    let found = std::fs::read_to_string(&policy).unwrap();
    std::fs::write(&policy, "powersave\n").unwrap();
    (policy, found)
}

/// Row 1: a journal row names a file outside the catalogue (here a root-owned file), and
/// a catalogue file with a value its setting does not take. Root's `status` and `report`
/// restore neither, keep both rows, and say so; the genuine row is restored.
#[test]
fn a_database_naming_any_path_makes_root_write_nothing_there() {
    let env = TestEnv::new();
    let db = env.path("w.db");
    let (root, config) = machine(&env, &db);
    let victim = env.path("victim");
    std::fs::write(&victim, "root's own bytes\n").unwrap();
    let (policy, found) = changed_policy(&root);
    let host0 = root.join("sys/class/scsi_host/host0/link_power_management_policy");
    let host0_before = std::fs::read(&host0).unwrap();
    journal_db(
        &db,
        &[
            (victim.clone(), "owned\n", "owned"),
            (host0.clone(), "evil\n", "evil"),
            (policy.clone(), found.as_str(), "performance"),
        ],
        None,
    );
    let before = snapshot(&root);
    for args in [["status", "--db"], ["report", "--db"]] {
        let (_, out) = run(&config, &[args[0], args[1], db.to_str().unwrap()]);
        assert!(
            out.contains("refusing to restore") && out.contains(&victim.display().to_string()),
            "{out}"
        );
        assert!(out.contains("\"evil\" is not among the values"), "{out}");
    }
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "root's own bytes\n"
    );
    assert_eq!(std::fs::read(&host0).unwrap(), host0_before);
    assert_eq!(std::fs::read_to_string(&policy).unwrap(), found);
    assert_eq!(touched(&before, &snapshot(&root)), vec![policy]);
    // Kept for the owner to see.
    let mut kept = vec![host0.display().to_string(), victim.display().to_string()];
    kept.sort();
    assert_eq!(unrestored(&db), kept);
}

/// Row 1, by a second user: a database that user wrote is not used for recovery by root
/// at all (not even its genuine rows) until root asks with `idle --restore`, which still
/// writes only catalogue files.
#[test]
fn a_database_another_user_wrote_is_restored_from_only_when_asked() {
    let Some(user) = second_user() else { return };
    let env = TestEnv::new();
    let dir = service_dir(&env, user);
    let db = dir.join("w.db");
    let (root, config) = machine(&env, &db);
    let victim = env.path("passwd");
    std::fs::write(&victim, "root:x:0:0::/root:/bin/sh\n").unwrap();
    let (policy, found) = changed_policy(&root);
    journal_db(
        &db,
        &[
            (
                victim.clone(),
                "mallory::0:0::/:/bin/sh\n",
                "mallory::0:0::/:/bin/sh",
            ),
            (policy.clone(), found.as_str(), "performance"),
        ],
        Some(user),
    );
    assert_eq!(std::fs::metadata(&db).unwrap().uid(), user.0);
    let (_, out) = run(&config, &["status", "--db", db.to_str().unwrap()]);
    assert!(out.contains("owned by wattson-e2e-other"), "{out}");
    assert!(out.contains("wattson idle --restore --db"), "{out}");
    assert_eq!(std::fs::read_to_string(&policy).unwrap(), "powersave\n");
    assert_eq!(unrestored(&db).len(), 2);

    let (code, out) = run(
        &config,
        &["idle", "--restore", "--db", db.to_str().unwrap()],
    );
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("restored 1 setting file(s)"), "{out}");
    assert!(out.contains("is not a setting wattson changes"), "{out}");
    assert_eq!(std::fs::read_to_string(&policy).unwrap(), found);
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "root:x:0:0::/root:/bin/sh\n"
    );
    assert_eq!(unrestored(&db), vec![victim.display().to_string()]);
}

/// Row 2: another user's `w.db.lock -> victim` in that user's directory, beside that user's
/// database: root's `run` refuses the lock and leaves the victim as it was; so does
/// `idle --measure` with `.idle-lock`.
#[test]
fn lock_files_planted_as_links_are_never_followed() {
    let Some(user) = second_user() else { return };
    let env = TestEnv::new();
    let dir = service_dir(&env, user);
    let db = dir.join("w.db");
    let victim = env.path("victim");
    std::fs::write(&victim, "keep\n").unwrap();
    let link = dir.join("w.db.lock");
    let status = Command::new("ln")
        .arg("-s")
        .arg(&victim)
        .arg(&link)
        .uid(user.0)
        .gid(user.1)
        .status()
        .unwrap();
    assert!(status.success());
    let kvm = wattson_tests::kvm_fixture();
    let config = env.path("shared.toml");
    std::fs::write(
        &config,
        format!(
            "[host]\nname = \"e2e\"\nsysfs = {}\nprocfs = {}\n[storage]\npath = {}\n",
            q(kvm.join("sys")),
            q(kvm.join("proc")),
            q(&db)
        ),
    )
    .unwrap();
    let (code, out) = run(&config, &["run", "--duration", "2s"]);
    assert_eq!(code, Some(74), "{out}");
    assert!(out.contains("symbolic link"), "{out}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep\n");

    // The measurement's own lock, beside a database of the bench.
    let b = bench("100ms", 11);
    let before = snapshot(&b.root);
    let idle_lock = PathBuf::from(format!("{}.idle-lock", b.env.db.display()));
    let _ = std::fs::remove_file(&idle_lock);
    std::os::unix::fs::symlink(&victim, &idle_lock).unwrap();
    let out = b
        .idle(&["--measure", "--phase", "1s", "--phases", "3"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{text}");
    assert!(text.contains("symbolic link"), "{text}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep\n");
    assert!(touched(&before, &snapshot(&b.root)).is_empty());
}

/// Row 3: control characters (and noncharacters) in names and topics are refused by `config
/// check` and `run` with 78 and the key.
#[test]
fn control_characters_in_names_are_refused_with_the_key() {
    let env = TestEnv::new();
    for (toml, key) in [
        ("[host]\nname = \"a\\nb\"\n", "host.name"),
        ("[host]\nname = \"a\\tb\"\n", "host.name"),
        ("[host]\nname = \"bell\\u0007\"\n", "host.name"),
        ("[host]\nname = \"nul\\u0000\"\n", "host.name"),
        // Unicode noncharacters, which an MQTT receiver may close the connection over.
        ("[host]\nname = \"non\\uFFFF\"\n", "host.name"),
        (
            "[host]\nname = \"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"\n",
            "host.name",
        ),
        (
            "[mqtt]\nurl = \"mqtt://127.0.0.1:1\"\nclient_id = \"c\\u001b[31m\"\n",
            "mqtt.client_id",
        ),
        (
            "[mqtt]\nurl = \"mqtt://127.0.0.1:1\"\n[[plug]]\nid = \"p\\u0001\"\nkind = \"tasmota\"\ntopic = \"t\"\n",
            "plug.id",
        ),
        (
            "[mqtt]\nurl = \"mqtt://127.0.0.1:1\"\n[[plug]]\nid = \"p\"\nkind = \"tasmota\"\ntopic = \"t/\\uFDD0\"\n",
            "plug.topic",
        ),
    ] {
        let config = env.path("bad.toml");
        std::fs::write(&config, toml).unwrap();
        for args in [&["config", "check"][..], &["run", "--duration", "1s"][..]] {
            let (code, out) = run(&config, args);
            assert_eq!(code, Some(78), "{toml:?} {args:?}: {out}");
            assert!(out.contains(key), "{toml:?}: {out}");
        }
    }
}

/// Row 4: a source reporting -500 W stores none of it, counts it rejected, and the cost does
/// not go down; declared bidirectional, the same readings are export, apart from
/// consumption.
#[test]
fn negative_power_is_refused_unless_the_source_exports() {
    use serialport::SerialPort as _;
    use std::io::Write as _;
    for bidirectional in [false, true] {
        let (mut master, slave) = serialport::TTYPort::pair().unwrap();
        let port = slave.name().unwrap();
        let env = TestEnv::new();
        let config = env.config(&format!(
            "[cpu]\nenabled = false\n[tariff]\ncurrency = \"GBP\"\nprice_per_kwh = 0.30\n\
             [[meter]]\nid = \"desk\"\nprotocol = \"line\"\nport = {port:?}\ninterval = \"200ms\"\n\
             bidirectional = {bidirectional}\n[meter.line]\nformat = \"kv\"\nfields = {{ power = \"P\" }}\n"
        ));
        let mut daemon = Child::run_daemon(&config, &[]);
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writer = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut i = 0u32;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    // Exporting throughout where the source exports (a streaming meter's
                    // interval mean would mix the two); alternating where it does not.
                    let line = if i.is_multiple_of(2) && !bidirectional {
                        "P=100.0\n"
                    } else {
                        "P=-500.0\n"
                    };
                    let _ = master.write_all(line.as_bytes());
                    i += 1;
                    std::thread::sleep(Duration::from_millis(100));
                }
                drop(slave);
            })
        };
        let db = env.db.clone();
        daemon.wait_for("power stored", Duration::from_secs(20), || {
            (wattson_tests::db_points(&db, "meter:desk", wattson_collectors::Metric::Power).len()
                >= 10)
                .then_some(())
        });
        let stderr = daemon.stop_cleanly();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        writer.join().unwrap();
        let store = wattson_tests::open_db(&db).unwrap();
        let channel = |c: &str| -> Vec<f64> {
            let filter = wattson::store::SeriesFilter::all()
                .host(wattson_tests::HOST)
                .source(&"meter:desk".into())
                .metric(wattson_collectors::Metric::Power)
                .channel(c);
            store
                .raw(&filter, 0, i64::MAX)
                .unwrap()
                .into_iter()
                .flat_map(|(_, p)| p)
                .map(|p| p.1)
                .collect()
        };
        let power = channel("");
        let export = channel(wattson_collectors::source::channel::EXPORT);
        assert!(power.iter().all(|w| *w >= 0.0), "{power:?}");
        if bidirectional {
            assert!(power.iter().all(|w| *w == 0.0), "{power:?}");
            assert!(
                !export.is_empty() && export.iter().all(|w| *w == 500.0),
                "{export:?}"
            );
        } else {
            assert!(power.iter().all(|w| *w == 100.0), "{power:?}");
            assert!(export.is_empty(), "{export:?}");
            assert!(!stderr.contains("panicked"), "{stderr}");
            let (_, out) = run(&config, &["status", "--json"]);
            assert!(
                !out.contains("-4.9") && !out.contains("\"energy_wh\": -"),
                "{out}"
            );
        }
    }
}

/// Watches `dir` with inotify and stats every `.wattson-sock-*` directory made in it as soon
/// as its creation is read; the modes seen (it lives only while the socket is bound, set
/// and moved, so a start may show none) come back when `stop` is set.
fn watch_staging(
    dir: &Path,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<Vec<u32>> {
    use std::os::fd::{AsFd as _, FromRawFd as _, OwnedFd};
    use std::os::unix::ffi::OsStrExt as _;
    let name = std::ffi::CString::new(dir.as_os_str().as_bytes()).unwrap();
    // SAFETY: inotify_init1 and inotify_add_watch take no pointers but the path's, which
    // outlives the call; the descriptor is owned from here on.
    #[allow(unsafe_code)]
    let fd = unsafe {
        let fd = libc::inotify_init1(libc::IN_CLOEXEC | libc::IN_NONBLOCK);
        assert!(fd >= 0, "inotify_init1");
        assert!(libc::inotify_add_watch(fd, name.as_ptr(), libc::IN_CREATE) >= 0);
        OwnedFd::from_raw_fd(fd)
    };
    let dir = dir.to_owned();
    std::thread::spawn(move || {
        use nix::poll::{PollFd, PollFlags, poll};
        let mut modes = Vec::new();
        let mut buf = [0u8; 8192];
        loop {
            let stopping = stop.load(std::sync::atomic::Ordering::SeqCst);
            let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLIN)];
            let _ = poll(&mut fds, 50u16);
            let Ok(n) = nix::unistd::read(&fd, &mut buf) else {
                if stopping {
                    return modes;
                }
                continue;
            };
            // struct inotify_event: wd, mask, cookie, len (4 bytes each), then len bytes of
            // name padded with NULs.
            let mut at = 0;
            while at + 16 <= n {
                let len = u32::from_ne_bytes(buf[at + 12..at + 16].try_into().unwrap()) as usize;
                let raw = &buf[at + 16..at + 16 + len];
                let name = String::from_utf8_lossy(raw.split(|b| *b == 0).next().unwrap());
                if name.starts_with(".wattson-sock-")
                    && let Ok(m) = std::fs::symlink_metadata(dir.join(&*name))
                {
                    modes.push(m.mode() & 0o7777);
                }
                at += 16 + len;
            }
        }
    })
}

/// Row 5: under `umask 000` the control socket is never seen at any mode but 0660, and the
/// directory it is bound in never at any but 0700 (issue 44: it was made 0777, and another
/// user unlinked the socket in it before it was moved into place).
#[test]
fn the_control_socket_is_never_world_writable_under_umask_000() {
    let mut staged = Vec::new();
    for start in 0..3 {
        let env = TestEnv::new();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let watch = watch_staging(env.dir.path(), stop.clone());
        let meter = wattson_tests::simulate("pzem004t", &[1], 50.0);
        let config = env.config(&wattson_tests::meter_toml(
            "wall",
            "pzem004t",
            &meter.path,
            "250ms",
            Some(1),
        ));
        let mut cmd = wattson();
        // SAFETY: umask is async-signal-safe and touches nothing but this process.
        #[allow(unsafe_code)]
        unsafe {
            cmd.pre_exec(|| {
                libc::umask(0);
                Ok(())
            });
        }
        let mut daemon = Child::run_daemon_with(cmd, &config, &[]);
        let socket = PathBuf::from(format!("{}.sock", env.db.display()));
        let mut modes = std::collections::BTreeSet::new();
        let started = Instant::now();
        while !daemon.stderr().contains("control socket") {
            if let Ok(m) = std::fs::symlink_metadata(&socket) {
                modes.insert(m.mode() & 0o7777);
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "{}",
                daemon.stderr()
            );
        }
        modes.insert(std::fs::symlink_metadata(&socket).unwrap().mode() & 0o7777);
        let db = env.db.clone();
        daemon.wait_for("a sample stored", Duration::from_secs(20), || {
            (!wattson_tests::db_points(&db, "meter:wall", wattson_collectors::Metric::Power)
                .is_empty())
            .then_some(())
        });
        assert_eq!(
            modes.into_iter().collect::<Vec<_>>(),
            vec![0o660],
            "start {start}"
        );
        // The staging directory is gone.
        let left: Vec<_> = std::fs::read_dir(env.dir.path())
            .unwrap()
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().starts_with(".wattson-sock"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
        daemon.stop_cleanly();
        drop(meter);
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        staged.extend(watch.join().unwrap());
    }
    let shown: Vec<String> = staged.iter().map(|m| format!("{m:o}")).collect();
    eprintln!("staging directories caught: {shown:?}");
    assert!(
        staged.iter().all(|m| *m == 0o700),
        "a staging directory was seen at {shown:?}"
    );
}

/// Row 8: a price slot from year 1 to 9999 is refused with its line and the bound.
#[test]
fn a_price_slot_spanning_millennia_is_refused() {
    let env = TestEnv::new();
    let config = env.config("[tariff]\ncurrency = \"GBP\"\nprice_per_kwh = 0.30\n");
    let csv = env.path("prices.csv");
    std::fs::write(
        &csv,
        "start,end,price_per_kwh\n2026-01-01T00:00:00Z,2026-01-01T00:30:00Z,0.2\n\
         0001-01-01T00:00:00Z,9999-12-31T00:00:00Z,0.01\n",
    )
    .unwrap();
    let (code, out) = run(
        &config,
        &[
            "tariff",
            "import",
            csv.to_str().unwrap(),
            "--db",
            env.db.to_str().unwrap(),
        ],
    );
    assert_ne!(code, Some(0), "{out}");
    assert!(
        out.contains("line 3") && out.contains("outside the years 1970 to 2100"),
        "{out}"
    );
}
