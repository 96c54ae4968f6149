//! Fixture trees for `wattson idle`: a base machine with an idle overlay copied over it
//! into a temp dir (`collectors/tests/fixtures/idle-*`, see their READMEs), residency MSRs
//! written by the test, and a snapshot of a whole tree to prove what was (not) written.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use crate::{Child, TestEnv, q, wattson, workspace_root};

/// `collectors/tests/fixtures/<name>`.
pub fn fixture(name: &str) -> PathBuf {
    workspace_root()
        .join("collectors/tests/fixtures")
        .join(name)
}

fn copy(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type().unwrap();
        if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&src).unwrap(), &dst).unwrap();
        } else if kind.is_dir() {
            copy(&src, &dst);
        } else {
            std::fs::copy(&src, &dst).unwrap();
        }
    }
}

/// The Intel desktop (`intel-adl-desktop` with the `idle-intel-desktop` overlay) in `dir`:
/// `dir/sys`, `dir/proc`, `dir/dev` (with `cpu/0/msr` holding a TSC and zeroed residency
/// counters).
pub fn intel_desktop(dir: &Path) {
    copy(&fixture("intel-adl-desktop"), dir);
    copy(&fixture("idle-intel-desktop"), dir);
    write_msr(
        dir,
        0,
        &[
            (0x10, 1_000_000),
            (0x60D, 0),
            (0x3F8, 0),
            (0x3F9, 0),
            (0x630, 0),
            (0x632, 0),
            (0xE2, 0x8008),
        ],
    );
}

/// The AMD server (`amd-epyc-2s-server` with the `idle-amd-server` overlay) in `dir`.
pub fn amd_server(dir: &Path) {
    copy(&fixture("amd-epyc-2s-server"), dir);
    copy(&fixture("idle-amd-server"), dir);
}

/// Write MSR values into `dir/dev/cpu/N/msr`, the regular file that stands in for the msr
/// device: little-endian u64s at offset 8 x MSR number (see `wattson_collectors::idle::package`).
pub fn write_msr(dir: &Path, cpu: usize, values: &[(u64, u64)]) {
    use std::os::unix::fs::FileExt as _;
    let d = dir.join(format!("dev/cpu/{cpu}"));
    std::fs::create_dir_all(&d).unwrap();
    let f = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(false)
        .open(d.join("msr"))
        .unwrap();
    for &(msr, v) in values {
        f.write_all_at(&v.to_le_bytes(), msr * 8).unwrap();
    }
}

/// Every regular file under `root`: its bytes and modification time.
pub type Snapshot = BTreeMap<PathBuf, (Vec<u8>, SystemTime)>;

/// Snapshot every regular file under `root` (symlinks are not followed).
pub fn snapshot(root: &Path) -> Snapshot {
    fn walk(dir: &Path, out: &mut Snapshot) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                walk(&entry.path(), out);
            } else if kind.is_file() {
                let meta = entry.metadata().unwrap();
                out.insert(
                    entry.path(),
                    (
                        std::fs::read(entry.path()).unwrap(),
                        meta.modified().unwrap(),
                    ),
                );
            }
        }
    }
    let mut out = Snapshot::new();
    walk(root, &mut out);
    out
}

/// The files whose bytes differ between two snapshots (or that appeared or went).
pub fn changed_content(before: &Snapshot, after: &Snapshot) -> Vec<PathBuf> {
    let keys: std::collections::BTreeSet<&PathBuf> = before.keys().chain(after.keys()).collect();
    keys.into_iter()
        .filter(|k| before.get(*k).map(|v| &v.0) != after.get(*k).map(|v| &v.0))
        .cloned()
        .collect()
}

/// The files that were written at all (modification time moved) between two snapshots.
pub fn touched(before: &Snapshot, after: &Snapshot) -> Vec<PathBuf> {
    before
        .iter()
        .filter(|(k, v)| after.get(*k).is_none_or(|a| a.1 != v.1))
        .map(|(k, _)| k.clone())
        .collect()
}

/// The names of the files opened in one directory while the watch is on (inotify's
/// `IN_OPEN`): proof that a command never opened a device node, which for a disk's block
/// device can be enough to spin it up.
#[derive(Debug)]
pub struct OpenWatch {
    events: std::fs::File,
}

impl OpenWatch {
    /// Watch `dir` (not its subdirectories) for opens.
    #[allow(unsafe_code)]
    pub fn new(dir: &Path) -> Self {
        use std::os::fd::FromRawFd as _;
        use std::os::unix::ffi::OsStrExt as _;
        // SAFETY: inotify_init1 takes no pointers; a negative result is an error.
        let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        assert!(
            fd >= 0,
            "inotify_init1: {}",
            std::io::Error::last_os_error()
        );
        // SAFETY: fd is a fresh descriptor that nothing else owns.
        let events = unsafe { std::fs::File::from_raw_fd(fd) };
        let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).unwrap();
        // SAFETY: path is a NUL-terminated string that outlives the call.
        let wd = unsafe { libc::inotify_add_watch(fd, path.as_ptr(), libc::IN_OPEN) };
        assert!(
            wd >= 0,
            "inotify_add_watch {}: {}",
            dir.display(),
            std::io::Error::last_os_error()
        );
        Self { events }
    }

    /// The names opened since the watch began (or since the last call), in order; the
    /// directory's own opens (listing it) are left out.
    pub fn opened(&mut self) -> Vec<String> {
        use std::io::Read as _;
        let mut names = Vec::new();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match self.events.read(&mut buf) {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("reading inotify events: {e}"),
            };
            // struct inotify_event: wd, mask, cookie, len (u32 each), then len bytes of name.
            let mut at = 0;
            while at + 16 <= n {
                let word = |i: usize| {
                    u32::from_ne_bytes(buf[at + i..at + i + 4].try_into().unwrap()) as usize
                };
                let (mask, len) = (word(4) as u32, word(12));
                let name = &buf[at + 16..at + 16 + len];
                if mask & libc::IN_ISDIR == 0 && len > 0 {
                    let end = name.iter().position(|&b| b == 0).unwrap_or(len);
                    names.push(String::from_utf8_lossy(&name[..end]).into_owned());
                }
                at += 16 + len;
            }
        }
        names
    }
}

/// The Intel desktop, its simulated meter and a config naming both.
pub struct Bench {
    pub env: TestEnv,
    /// The machine's tree: `sys`, `proc`, `dev`.
    pub root: PathBuf,
    pub config: PathBuf,
    _meter: Child,
}

impl Bench {
    pub fn policy(&self) -> PathBuf {
        self.root.join("sys/module/pcie_aspm/parameters/policy")
    }

    pub fn hosts(&self) -> Vec<PathBuf> {
        (0..4)
            .map(|h| {
                self.root.join(format!(
                    "sys/class/scsi_host/host{h}/link_power_management_policy"
                ))
            })
            .collect()
    }

    /// `wattson --config CONFIG idle ARGS`.
    pub fn idle(&self, args: &[&str]) -> std::process::Command {
        let mut cmd = wattson();
        cmd.arg("--config").arg(&self.config).arg("idle").args(args);
        cmd
    }
}

pub fn host_toml(root: &Path, db: &Path) -> String {
    format!(
        "[host]\nname = \"e2e\"\nsysfs = {}\nprocfs = {}\ndevfs = {}\n\n[storage]\npath = {}\n",
        q(root.join("sys")),
        q(root.join("proc")),
        q(root.join("dev")),
        q(db)
    )
}

/// A simulated PZEM-004T drawing 40 W with noise of standard deviation `noise` W, whose
/// watts change by each effect's watts while its file reads its value; and the
/// pseudo-terminal it answers on.
pub fn simulated_meter(
    env: &TestEnv,
    root: &Path,
    noise: f64,
    seed: u64,
    effects: &[(PathBuf, &str, f64)],
) -> (Child, String) {
    let sim_config = env.path("sim.toml");
    std::fs::write(&sim_config, host_toml(root, &env.db)).unwrap();
    let mut cmd = wattson();
    cmd.arg("--config")
        .arg(&sim_config)
        .args([
            "meter",
            "simulate",
            "--protocol",
            "pzem004t",
            "--watts",
            "40",
        ])
        .args(["--noise", &noise.to_string(), "--ramp", "0.2"])
        .args(["--seed", &seed.to_string()]);
    for (file, value, watts) in effects {
        cmd.arg("--effect")
            .arg(format!("{}={value}:{watts}", file.display()));
    }
    let meter = Child::spawn(cmd);
    let port = meter
        .stdout_line(Duration::from_secs(10))
        .unwrap_or_else(|| panic!("simulator printed no path; stderr:\n{}", meter.stderr()));
    (meter, port.trim().to_owned())
}

/// A fresh Intel desktop tree and a meter simulating it, read every `interval`.
pub fn bench(interval: &str, seed: u64) -> Bench {
    let env = TestEnv::new();
    let root = env.path("machine");
    intel_desktop(&root);
    let mut effects = vec![(
        root.join("sys/module/pcie_aspm/parameters/policy"),
        "powersave",
        -3.0,
    )];
    for h in 0..4 {
        effects.push((
            root.join(format!(
                "sys/class/scsi_host/host{h}/link_power_management_policy"
            )),
            "med_power_with_dipm",
            -0.375,
        ));
    }
    let (meter, port) = simulated_meter(&env, &root, 1.0, seed, &effects);
    let config = env.path("wattson.toml");
    std::fs::write(
        &config,
        format!(
            "{}\n[[meter]]\nid = \"wall\"\nprotocol = \"pzem004t\"\nport = {}\ninterval = {}\n\n\
             [tariff]\ncurrency = \"GBP\"\nprice_per_kwh = 0.30\n",
            host_toml(&root, &env.db),
            q(&port),
            q(interval)
        ),
    )
    .unwrap();
    Bench {
        env,
        root,
        config,
        _meter: meter,
    }
}

/// Run `wattson --config CONFIG ARGS` to its end; its stdout and stderr.
pub fn run(config: &Path, args: &[&str]) -> (std::process::ExitStatus, String, String) {
    let out = wattson()
        .arg("--config")
        .arg(config)
        .args(args)
        .output()
        .unwrap();
    (
        out.status,
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// As [`run`], asserting success; its stdout.
pub fn run_ok(config: &Path, args: &[&str]) -> String {
    let (status, stdout, stderr) = run(config, args);
    assert!(status.success(), "wattson {args:?}: {stdout}\n{stderr}");
    stdout
}

/// `(candidate, delta_w, ci95_w, effect)` of every stored effect, in measuring order.
pub fn effects(db: &Path) -> Vec<(String, f64, f64, bool)> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut stmt = conn
        .prepare("SELECT candidate, delta_w, delta_ci95_w, effect FROM idle_effect ORDER BY id")
        .unwrap();
    stmt.query_map([], |r| {
        Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get::<_, i64>(3)? != 0))
    })
    .unwrap()
    .collect::<Result<_, _>>()
    .unwrap()
}

/// Rows of `idle_original` not yet restored.
pub fn unrestored(db: &Path) -> i64 {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.query_row(
        "SELECT count(*) FROM idle_original WHERE restored_ms IS NULL",
        [],
        |r| r.get(0),
    )
    .unwrap()
}

/// Nothing but the allowlist's files was written (their modification time moved) anywhere
/// in the fixture tree, and every file holds its original bytes.
pub fn only_allowlist_written(b: &Bench, before: &Snapshot, allowed: &[PathBuf]) {
    let after = snapshot(&b.root);
    assert_eq!(changed_content(before, &after), Vec::<PathBuf>::new());
    let stray: Vec<PathBuf> = touched(before, &after)
        .into_iter()
        .filter(|p| !allowed.contains(p))
        .collect();
    assert_eq!(
        stray,
        Vec::<PathBuf>::new(),
        "written outside the allowlist"
    );
}

/// Advance the package and core counters of the Intel desktop as a machine idling with its
/// cores 78 % in C6 and its package 30 % in PC2 and 70 % in PC3 (never PC6 or deeper),
/// until `stop`: the TSC at 3.3 GHz of wall time, cpuidle `time` in microseconds.
pub fn advance_counters(root: &Path, stop: &std::sync::atomic::AtomicBool) {
    use std::sync::atomic::Ordering;
    let t0 = Instant::now();
    while !stop.load(Ordering::SeqCst) {
        let us = t0.elapsed().as_micros() as u64;
        let tsc = us * 3_300;
        write_msr(
            root,
            0,
            &[
                (0x10, 1_000_000 + tsc),
                (0x60D, tsc * 3 / 10),
                (0x3F8, tsc * 7 / 10),
            ],
        );
        for cpu in 0..8 {
            // state3 is C6 on this intel_idle machine.
            let time = root.join(format!(
                "sys/devices/system/cpu/cpu{cpu}/cpuidle/state3/time"
            ));
            std::fs::write(time, format!("{}\n", us * 78 / 100)).unwrap();
        }
        // The simulated machine's clock: the reader takes the TSC and a residency counter
        // in two reads, which may fall on either side of a step, so a step is kept short
        // against the 100 ms between its samples (5 %, averaged out over a state's mean).
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The home server's counters ([`FixtureProc::add_home_server`]) moved at set rates until
/// `stop`, in 10 ms steps (the simulated machine's clock): `jellyfin.service` 800 task
/// wake-ups/s (jellyfin's threads 500 and 100, ffmpeg 200), `sshd.service` 200/s; the local
/// timer 1000 interrupts/s, `nvme0q1` 300/s, `enp3s0-rx-0` none.
pub fn advance_home_server(
    proc: wattson_collectors::idle::wakeups::fixture::FixtureProc,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let t0 = std::time::Instant::now();
        while !stop.load(std::sync::atomic::Ordering::SeqCst) {
            let at = |per_s: f64| (t0.elapsed().as_secs_f64() * per_s) as u64;
            proc.set_count(100, 100, at(500.0)).unwrap();
            proc.set_count(100, 101, at(100.0)).unwrap();
            proc.set_count(120, 120, at(200.0)).unwrap();
            proc.set_count(200, 200, at(200.0)).unwrap();
            proc.set_interrupts(
                &[("LOC", at(1000.0)), ("RES", 0)],
                &[(122, "nvme0q1", at(300.0)), (130, "enp3s0-rx-0", 0)],
            )
            .unwrap();
            std::thread::sleep(Duration::from_millis(10));
        }
    })
}
