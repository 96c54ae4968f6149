//! Each disk's spin state, followed by the daemon (`[[disk]]`) and read back by
//! `wattson idle`, the report and `/metrics`, through the real binary on the Intel desktop
//! fixture: `sda` (whose power the kernel does not manage, so its state is inferred from its
//! `stat` and `standby_after = "2s"`), read every 100 ms, and a cgroup v2 tree whose
//! `io.stat` the script moves with the disk's counters: `backup.service` writes to sda in
//! three bursts of a second, `media.service` reads it once (and reads sdb throughout, which
//! is not sda's I/O). Each burst starts from a disk spun down, so the truth is four spin-ups,
//! three by the backup, and spun-up seconds of each burst's length plus `standby_after`.

#![allow(clippy::unwrap_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use wattson_collectors::cgroup::fixture::FixtureTree;
use wattson_collectors::idle::wakeups::fixture::FixtureProc;
use wattson_tests::http::{HTTP_TOML, bound_addr, get};
use wattson_tests::idle::{
    advance_home_server, changed_content, effects, host_toml, intel_desktop, run_ok,
    simulated_meter, snapshot, touched,
};
use wattson_tests::{Child, TestEnv, q, wait_for};

const STANDBY: Duration = Duration::from_secs(2);
const WATTS: f64 = 6.0;
const BACKUP: &str = "system.slice/backup.service";
const MEDIA: &str = "system.slice/media.service";

/// The simulated drive: its `stat` counters and each group's `io.stat`, moved together.
struct Drive {
    stat: PathBuf,
    tree: FixtureTree,
    reads: u64,
    writes: u64,
    groups: BTreeMap<&'static str, (u64, u64)>,
    /// `media.service`'s reads of sdb.
    other: u64,
}

impl Drive {
    /// sda of the machine under `root`, with the backup and media services' control groups,
    /// each at no I/O yet.
    fn new(root: &Path) -> Drive {
        let tree = FixtureTree::v2(&root.join("sys")).unwrap();
        tree.add(BACKUP).unwrap();
        tree.add(MEDIA).unwrap();
        let mut drive = Drive {
            stat: root.join("sys/block/sda/stat"),
            tree,
            reads: 100,
            writes: 50,
            groups: BTreeMap::new(),
            other: 0,
        };
        drive.io(BACKUP, 0, 0);
        drive.io(MEDIA, 0, 0);
        drive
    }

    /// `group` does `reads` and `writes` on sda: its `io.stat` first, then the disk's `stat`
    /// (whoever sees the disk's count move finds the group's already moved).
    fn io(&mut self, group: &'static str, reads: u64, writes: u64) {
        let e = self.groups.entry(group).or_default();
        e.0 += reads;
        e.1 += writes;
        let (r, w) = *e;
        let sdb = if group == MEDIA { self.other } else { 0 };
        self.tree
            .set_io_stat(group, &[("8:16", sdb, 0), ("8:0", r, w)])
            .unwrap();
        self.reads += reads;
        self.writes += writes;
        let tmp = self.stat.with_extension("tmp");
        std::fs::write(
            &tmp,
            format!(
                "{} 0 {} 0 {} 0 {} 0 0 0 0 0 0 0 0 0 0\n",
                self.reads,
                self.reads * 8,
                self.writes,
                self.writes * 8
            ),
        )
        .unwrap();
        std::fs::rename(tmp, &self.stat).unwrap();
    }

    /// `media.service` reads sdb (its `io.stat` moves; sda's counters do not).
    fn read_sdb(&mut self) {
        self.other += 3;
        let (r, w) = self.groups.get(MEDIA).copied().unwrap_or_default();
        self.tree
            .set_io_stat(MEDIA, &[("8:16", self.other, 0), ("8:0", r, w)])
            .unwrap();
    }
}

/// The stored seconds sda was followed and spun up.
fn stored(db: &Path) -> (f64, f64) {
    let Ok(conn) = rusqlite::Connection::open(db) else {
        return (0.0, 0.0);
    };
    conn.query_row(
        "SELECT coalesce(sum(covered_s), 0), coalesce(sum(up_s), 0) FROM disk_hour
         WHERE disk = 'sda'",
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .unwrap_or((0.0, 0.0))
}

/// The script's spin-ups, each by `who` from a disk spun down, the next only once the
/// daemon has stored the spin-down (the drive's own clock sleeps): the backup writes for a
/// second, the media service reads once. Returns the seconds the drive was spun up.
fn play(drive: &mut Drive, db: &Path, script: &[&'static str]) -> f64 {
    let mut truth_up_s = 0.0;
    for &who in script {
        let before = stored(db).1;
        let first = Instant::now();
        let mut last = first;
        if who == MEDIA {
            drive.io(MEDIA, 1, 0);
        } else {
            for i in 0..10 {
                if i > 0 {
                    std::thread::sleep(Duration::from_millis(100));
                }
                drive.io(BACKUP, 0, 8);
                drive.read_sdb();
                last = Instant::now();
            }
        }
        truth_up_s += (last - first + STANDBY).as_secs_f64();
        wait_for("the spin-down stored", Duration::from_secs(30), || {
            (stored(db).1 > before).then_some(())
        });
    }
    truth_up_s
}

/// sda's spun-up share as the daemon stored it, a reading each: `(ts, share)`.
fn spun_up_series(db: &Path) -> Vec<(i64, f64)> {
    let store = wattson_tests::open_db(db).unwrap();
    let filter = wattson::store::SeriesFilter::all()
        .source(&"disk".into())
        .metric(wattson_collectors::Metric::DiskSpunUp)
        .channel("sda");
    store
        .raw(&filter, 0, i64::MAX)
        .unwrap()
        .into_iter()
        .flat_map(|(_, p)| p)
        .collect()
}

/// The value of the first `/metrics` line starting with `prefix`.
fn metric(exposition: &str, prefix: &str) -> Option<f64> {
    exposition
        .lines()
        .find(|l| l.starts_with(prefix))?
        .rsplit_once(' ')?
        .1
        .parse()
        .ok()
}

#[test]
fn the_daemon_follows_a_disks_spin_ups_names_who_woke_it_and_prices_its_spun_up_time() {
    let env = TestEnv::new();
    let root = env.path("machine");
    intel_desktop(&root);
    let mut drive = Drive::new(&root);
    let config = env.path("wattson.toml");
    std::fs::write(
        &config,
        format!(
            "{}\n[[disk]]\nname = \"sda\"\nstandby_after = \"2s\"\nspun_up_watts = {WATTS}\n\
             interval = \"100ms\"\n\n[tariff]\ncurrency = \"GBP\"\nprice_per_kwh = 0.30\n\
             {HTTP_TOML}",
            host_toml(&root, &env.db)
        ),
    )
    .unwrap();
    let mut daemon = Child::run_daemon(&config, &[]);
    let addr = bound_addr(&daemon);
    // Quiet from the start: known to be down `standby_after` after the first reading.
    daemon.wait_for("sda known spun down", Duration::from_secs(30), || {
        (stored(&env.db).0 > 0.0).then_some(())
    });
    let truth_up_s = play(&mut drive, &env.db, &[BACKUP, BACKUP, MEDIA, BACKUP]);
    let exposition = daemon.wait_for("sda on /metrics", Duration::from_secs(30), || {
        let body = get(addr, "/metrics", &[])?.body;
        let per_day = metric(&body, "wattson_disk_spinups_per_day{")?;
        (per_day > 0.0).then_some(body)
    });
    daemon.stop_cleanly();
    assert!(
        exposition.contains("disk=\"sda\"") && exposition.contains("source=\"inferred\""),
        "{exposition}"
    );
    assert!(
        metric(&exposition, "wattson_disk_spun_up_ratio{").unwrap() > 0.0,
        "{exposition}"
    );
    assert!(
        metric(&exposition, "wattson_disk_spun_up_annual_cost{").unwrap() > 0.0,
        "{exposition}"
    );

    let json: serde_json::Value =
        serde_json::from_str(&run_ok(&config, &["idle", "--json", "--sample", "0"])).unwrap();
    let disks = json["disks"].as_array().unwrap_or_else(|| panic!("{json}"));
    assert_eq!(disks.len(), 1, "{json}");
    let d = &disks[0];
    assert_eq!(d["disk"], "sda", "{d}");
    assert_eq!(d["source"], "inferred", "{d}");
    assert_eq!(d["spinups"], 4, "{d}");
    let woke = d["woke_by"].as_array().unwrap();
    assert_eq!(woke[0]["name"], "service:backup.service", "{d}");
    assert_eq!(woke[0]["spinups"], 3, "{d}");
    assert!(
        (woke[0]["share"].as_f64().unwrap() - 0.75).abs() < 1e-9,
        "{d}"
    );
    assert_eq!(woke[1]["name"], "service:media.service", "{d}");
    assert!(
        (woke[1]["share"].as_f64().unwrap() - 0.25).abs() < 1e-9,
        "{d}"
    );
    let up_s = d["up_s"].as_f64().unwrap();
    assert!(
        (up_s - truth_up_s).abs() <= 0.1 * truth_up_s,
        "spun up {up_s:.2} s stored against {truth_up_s:.2} s simulated: {d}"
    );
    // The spin state as a series a calibration reads: each reading's share of the time
    // since the one before, adding up to the time spun up.
    let series = spun_up_series(&env.db);
    assert!(
        series.iter().all(|(_, v)| (0.0..=1.0).contains(v))
            && series.iter().any(|(_, v)| *v == 1.0)
            && series.iter().any(|(_, v)| *v == 0.0),
        "{series:?}"
    );
    let series_up_s: f64 = series
        .windows(2)
        .map(|p| p[1].1 * (p[1].0 - p[0].0) as f64 / 1000.0)
        .sum();
    assert!(
        (series_up_s - up_s).abs() <= 0.05 * up_s + 0.5,
        "the series says {series_up_s:.2} s spun up, the disk's hours {up_s:.2} s"
    );
    let share = d["up_share"].as_f64().unwrap();
    assert!((share - up_s / d["covered_s"].as_f64().unwrap()).abs() < 1e-9);
    let cost = d["annual_cost"].as_f64().unwrap();
    let expected = WATTS * share * 8.76 * 0.30;
    assert!(
        (cost - expected).abs() <= 1e-6 * expected.max(1.0),
        "{cost} against {expected}: {d}"
    );
    eprintln!(
        "sda: {} spin-ups, spun up {up_s:.2} s against {truth_up_s:.2} s simulated, share \
         {share:.4}, GBP {cost:.4} a year",
        d["spinups"]
    );

    text_and_report(&config, cost);
}

/// `wattson idle`'s text and the report (JSON and text) show the same disk.
fn text_and_report(config: &Path, cost: f64) {
    let text = run_ok(config, &["idle", "--sample", "0"]);
    assert!(
        text.contains("Disks (")
            && text.contains("sda: ")
            && text.contains("inferred from I/O and standby_after")
            && text.contains(
                "woke it: service:backup.service 3 (75.0 %), service:media.service 1 (25.0 %)"
            )
            && text.contains("the datasheet figure in [[disk]] spun_up_watts"),
        "{text}"
    );
    let report: serde_json::Value =
        serde_json::from_str(&run_ok(config, &["report", "--format", "json"])).unwrap();
    let r = &report["idle"]["disks"][0];
    assert_eq!(r["spinups"], 4, "{report}");
    assert!(
        (r["annual_cost"].as_f64().unwrap() - cost).abs() < 1e-6,
        "{r}"
    );
    let text = run_ok(config, &["report"]);
    assert!(
        text.contains("sda: ") && text.contains("woke it: service:backup.service 3"),
        "{text}"
    );
}

/// sda as the kernel can stop it, on a meter that knows: the simulated meter draws [`WATTS`]
/// less while sda's `power/control` reads `auto`; the drive and its control groups; and a
/// configuration with the meter, `[[disk]]` sda (no datasheet watts) and `extra`.
struct Rig {
    env: TestEnv,
    root: PathBuf,
    config: PathBuf,
    drive: Drive,
    _meter: Child,
}

fn measurable_sda(extra: &str) -> Rig {
    let env = TestEnv::new();
    let root = env.path("machine");
    intel_desktop(&root);
    let power = root.join("sys/block/sda/device/power");
    std::fs::write(power.join("autosuspend_delay_ms"), "600000\n").unwrap();
    let (meter, port) = simulated_meter(
        &env,
        &root,
        0.3,
        7,
        &[(power.join("control"), "auto", -WATTS)],
    );
    let drive = Drive::new(&root);
    let config = env.path("wattson.toml");
    std::fs::write(
        &config,
        format!(
            "{}\n[[meter]]\nid = \"wall\"\nprotocol = \"pzem004t\"\nport = {}\ninterval = \"100ms\"\n\n\
             [[disk]]\nname = \"sda\"\nstandby_after = \"2s\"\ninterval = \"100ms\"\n\n\
             [tariff]\ncurrency = \"GBP\"\nprice_per_kwh = 0.30\n{extra}",
            host_toml(&root, &env.db),
            q(&port)
        ),
    )
    .unwrap();
    Rig {
        env,
        root,
        config,
        drive,
        _meter: meter,
    }
}

/// Runs the daemon while the drive plays `script`; the seconds it was spun up.
fn follow(rig: &mut Rig, script: &[&'static str]) -> f64 {
    let mut daemon = Child::run_daemon(&rig.config, &[]);
    daemon.wait_for("sda known spun down", Duration::from_secs(30), || {
        (stored(&rig.env.db).0 > 0.0).then_some(())
    });
    let truth_up_s = play(&mut rig.drive, &rig.env.db, script);
    daemon.stop_cleanly();
    truth_up_s
}

/// What a spinning disk costs, measured at the wall and used to price its spun-up hours:
/// `wattson idle --measure --only disk_standby:sda` finds the watts and leaves both files it
/// wrote as found; the daemon then follows the drive through the script's spin-ups, and
/// `wattson idle` and the report price them at the measured watts, within 10 % of the
/// simulator's truth, with no datasheet figure configured.
#[test]
fn a_disks_watts_measured_at_the_wall_price_its_spun_up_hours() {
    let mut rig = measurable_sda("");
    let text = run_ok(&rig.config, &["idle", "--sample", "0"]);
    assert!(
        text.contains(
            "`sudo wattson idle --measure --only disk_standby:sda` finds what the disk costs spun up"
        ),
        "{text}"
    );
    let measured = measure_sda(&rig.config, &rig.root, &rig.env.db);
    let truth_up_s = follow(&mut rig, &[BACKUP, BACKUP, MEDIA, BACKUP]);
    priced_at_measured(&rig.config, measured, truth_up_s);
}

/// Who keeps it awake, the fixture whole: one service causes 80 % of the task
/// wake-ups (`jellyfin.service` at 800/s against `sshd.service`'s 200/s, moved by a thread
/// as in the wake-ups tests) and another's I/O spins sda up twice (`backup.service`, each
/// time from a disk spun down). `wattson idle` ranks the services by wake-ups with their
/// shares within 10 %, names the backup for both spin-ups, and prices the spun-up time at
/// the watts it measured at the wall, within 10 % of the simulator's truth.
#[test]
fn who_keeps_it_awake_the_wakeups_by_service_and_the_disk_by_who_spun_it_up() {
    let mut rig = measurable_sda("");
    let proc = FixtureProc::new(&rig.root.join("proc")).unwrap();
    proc.add_home_server().unwrap();
    proc.set_interrupts(
        &[("LOC", 0), ("RES", 0)],
        &[(122, "nvme0q1", 0), (130, "enp3s0-rx-0", 0)],
    )
    .unwrap();
    let measured = measure_sda(&rig.config, &rig.root, &rig.env.db);
    let truth_up_s = follow(&mut rig, &[BACKUP, BACKUP]);

    let stop = Arc::new(AtomicBool::new(false));
    let advancer = advance_home_server(proc, stop.clone());
    let json = run_ok(&rig.config, &["idle", "--json", "--sample", "1s"]);
    stop.store(true, Ordering::SeqCst);
    advancer.join().unwrap();

    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let share = |e: &serde_json::Value| e["share"].as_f64().unwrap();
    let services = v["wakeups"]["by_service"]
        .as_array()
        .unwrap_or_else(|| panic!("{v}"));
    assert_eq!(services[0]["group"], "service:jellyfin.service", "{v}");
    assert!((share(&services[0]) - 0.8).abs() <= 0.1, "{v}");
    assert_eq!(services[1]["group"], "service:sshd.service", "{v}");
    assert!((share(&services[1]) - 0.2).abs() <= 0.1, "{v}");
    let d = &v["disks"][0];
    assert_eq!(d["spinups"], 2, "{d}");
    assert_eq!(d["woke_by"][0]["name"], "service:backup.service", "{d}");
    assert!((share(&d["woke_by"][0]) - 1.0).abs() < 1e-9, "{d}");
    priced_at_measured(&rig.config, measured, truth_up_s);
}

/// `wattson idle --measure --only disk_standby:sda`: the measured change and its interval,
/// after checking that only the disk's two files were written and both are as found.
fn measure_sda(config: &Path, root: &Path, db: &Path) -> (f64, f64) {
    let power = root.join("sys/block/sda/device/power");
    let before = snapshot(root);
    let stdout = run_ok(
        config,
        &[
            "idle",
            "--measure",
            "--only",
            "disk_standby:sda",
            "--phase",
            "2s",
        ],
    );
    let after = snapshot(root);
    assert_eq!(changed_content(&before, &after), Vec::<PathBuf>::new());
    let mut written = touched(&before, &after);
    written.sort();
    assert_eq!(
        written,
        [power.join("autosuspend_delay_ms"), power.join("control")],
        "only the disk's two files"
    );
    let found = effects(db);
    assert_eq!(found.len(), 1, "{found:?}");
    let (id, delta, ci, effect) = found[0].clone();
    assert_eq!(id, "disk_standby:sda");
    assert!(effect && (delta + WATTS).abs() <= 0.1 * WATTS, "{found:?}");
    assert!(
        stdout.contains("sda in standby: -")
            && stdout.contains("prices each spun-up hour of the disk at these watts"),
        "{stdout}"
    );
    assert!(
        !stdout.contains("--apply"),
        "a disk's standby is not kept: {stdout}"
    );
    (delta, ci)
}

/// `wattson idle` and the report price sda's stored spun-up time at the measured watts,
/// within 10 % of the simulator's truth (`truth_up_s` at [`WATTS`]).
fn priced_at_measured(config: &Path, (delta, ci): (f64, f64), truth_up_s: f64) {
    let json: serde_json::Value =
        serde_json::from_str(&run_ok(config, &["idle", "--json", "--sample", "0"])).unwrap();
    let d = &json["disks"][0];
    assert_eq!(d["watts_source"], "measured", "{d}");
    let watts = d["spun_up_watts"].as_f64().unwrap_or_else(|| panic!("{d}"));
    assert!((watts + delta).abs() < 1e-9, "the measured watts: {d}");
    assert!(
        (d["spun_up_watts_ci95"].as_f64().unwrap() - ci).abs() < 1e-9,
        "{d}"
    );
    let truth_share = truth_up_s / d["covered_s"].as_f64().unwrap();
    let truth = WATTS * truth_share * 8.76 * 0.30;
    let cost = d["annual_cost"].as_f64().unwrap();
    assert!(
        (cost - truth).abs() <= 0.1 * truth,
        "GBP {cost:.4} a year against the simulator's {truth:.4}: {d}"
    );
    eprintln!(
        "sda: measured {watts:.2} +/- {ci:.2} W against {WATTS} W; spun up {:.2} s against \
         {truth_up_s:.2} s; GBP {cost:.4} a year against {truth:.4}",
        d["up_s"].as_f64().unwrap_or(f64::NAN)
    );
    let text = run_ok(config, &["idle", "--sample", "0"]);
    eprintln!("{text}");
    assert!(
        text.contains("measured at the wall by `wattson idle --measure` on")
            && text.contains("sda in standby against spinning, priced by its spun-up hours"),
        "{text}"
    );
    let report: serde_json::Value =
        serde_json::from_str(&run_ok(config, &["report", "--format", "json"])).unwrap();
    let idle = &report["idle"];
    assert_eq!(idle["disks"][0]["watts_source"], "measured", "{idle}");
    assert!(
        (idle["disks"][0]["annual_cost"].as_f64().unwrap() - cost).abs() < 1e-6,
        "{idle}"
    );
    assert!(
        idle["settings"]
            .as_array()
            .is_none_or(|s| s.iter().all(|s| s["setting"] != "disk_standby:sda")),
        "the disk's measurement is not a setting's saving: {idle}"
    );
}

/// `config check` refuses a bad `[[disk]]` with exit 78, naming the key and its line.
#[test]
fn config_check_refuses_a_bad_disk_naming_the_key_and_line() {
    let env = TestEnv::new();
    // Each table, the key refused and the line it is on (the last of its table).
    let cases = [
        ("standby_after = \"20min\"\nname = \"../sda\"", "disk.name"),
        (
            "name = \"sda\"\nstandby_after = \"20min\"\n\n[[disk]]\nstandby_after = \"1h\"\n\
             name = \"sda\"",
            "disk.name",
        ),
        (
            "name = \"sda\"\nstandby_after = \"0.5s\"",
            "disk.standby_after",
        ),
        (
            "name = \"sda\"\nstandby_after = \"20min\"\nspun_up_watts = -1.0",
            "disk.spun_up_watts",
        ),
        (
            "name = \"sda\"\nstandby_after = \"20min\"\ninterval = \"1ms\"",
            "disk.interval",
        ),
    ];
    for (i, (table, key)) in cases.into_iter().enumerate() {
        let body = format!("[storage]\npath = {:?}\n\n[[disk]]\n{table}\n", env.db);
        let config = env.path(&format!("disk{i}.toml"));
        std::fs::write(&config, &body).unwrap();
        let bad = table.lines().last().unwrap();
        let lines: Vec<&str> = body.lines().collect();
        let line = lines.iter().rposition(|l| *l == bad).unwrap() + 1;
        let (status, _, stderr) = wattson_tests::idle::run(&config, &["config", "check"]);
        assert_eq!(status.code(), Some(78), "{body}: {stderr}");
        assert!(
            stderr.contains(&format!(":{line}: {key}:")),
            "{key} at line {line} not named: {body}\n{stderr}"
        );
    }
}
