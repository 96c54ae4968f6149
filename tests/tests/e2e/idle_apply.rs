//! `wattson idle --apply` and `--revert` through the real binary, on the Intel desktop
//! fixture with measured effects in its database (ASPM -3 W, SATA ALPM -1.5 W, writeback
//! -0.2 W and USB autosuspend -0.4 W saved; the NMI watchdog's change within the meter's
//! noise): the settings that saved go into one tmpfiles.d file and are applied now; the
//! NIC's receive errors rise after applying and the settings that answer for them (ASPM)
//! are put back and leave the file; the USB keyboard (HID) is never touched; a simulated
//! reboot (every file back as found, then the file's `w` lines written as systemd-tmpfiles
//! would) brings the kept settings back; `--revert` leaves every file as it was found.

#![allow(clippy::unwrap_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::sys::signal::Signal;
use wattson::idle::store::{Effect, begin_run, end_run, save_effect};
use wattson::store::{Store, StoreOptions};
use wattson_tests::idle::{
    Snapshot, changed_content, host_toml, intel_desktop, run, snapshot, touched,
};
use wattson_tests::{Child, TestEnv, wait_for, wattson};

/// (setting, value measured, W change, effect).
const EFFECTS: [(&str, &str, f64, bool); 5] = [
    ("pcie_aspm", "powersave", -3.0, true),
    ("sata_alpm", "med_power_with_dipm", -1.5, true),
    ("nmi_watchdog", "0", -0.05, false),
    ("dirty_writeback", "1500", -0.2, true),
    ("runtime_pm_usb", "auto", -0.4, true),
];

pub(crate) fn measured(db: &Path) {
    let store = Store::open(
        db,
        &StoreOptions {
            host: "e2e".into(),
            ..StoreOptions::default()
        },
    )
    .unwrap();
    let run_id = begin_run(&store, "e2e", 1, "pzem004t", &serde_json::json!({})).unwrap();
    for (i, (id, changed, delta, effect)) in EFFECTS.into_iter().enumerate() {
        save_effect(
            &store,
            &Effect {
                run_id,
                host: "e2e".into(),
                trial: id.into(),
                name: format!("{id} {changed}"),
                original: "as found".into(),
                changed: changed.into(),
                started_ms: 10 + i as i64,
                ended_ms: 11 + i as i64,
                baseline_w: 40.0,
                changed_w: 40.0 + delta,
                delta_w: delta,
                delta_ci95_w: 0.1,
                n: 140,
                effect,
                phases: serde_json::Value::Null,
            },
        )
        .unwrap();
    }
    end_run(&store, run_id, 20, "complete").unwrap();
}

/// Writes each `w PATH - - - - VALUE` line of a tmpfiles.d file into the fixture tree,
/// as systemd-tmpfiles does at boot; returns the paths written.
fn boot(root: &Path, file: &Path) -> Vec<PathBuf> {
    let text = std::fs::read_to_string(file).unwrap();
    let mut written = Vec::new();
    for line in text.lines().filter(|l| l.starts_with("w ")) {
        let f: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(f.len(), 7, "{line}");
        let path = root.join(f[1].trim_start_matches('/'));
        assert!(path.exists(), "{line}: no {}", path.display());
        std::fs::write(&path, f[6]).unwrap();
        written.push(path);
    }
    written
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap().trim().to_owned()
}

#[test]
fn apply_keeps_what_saved_puts_back_what_raises_errors_and_revert_leaves_every_file() {
    let env = TestEnv::new();
    let root = env.path("machine");
    intel_desktop(&root);
    let config = env.path("wattson.toml");
    std::fs::write(&config, host_toml(&root, &env.db)).unwrap();
    let tmpfiles = env.path("tmpfiles.d");
    std::fs::create_dir(&tmpfiles).unwrap();
    let file = tmpfiles.join("wattson-idle.conf");

    // Nothing measured yet: refused, nothing written.
    measured_nothing_is_refused(&config, &tmpfiles, &env);
    measured(&env.db);

    let before = snapshot(&root);
    let policy = root.join("sys/module/pcie_aspm/parameters/policy");
    let hosts: Vec<PathBuf> = (0..4)
        .map(|h| {
            root.join(format!(
                "sys/class/scsi_host/host{h}/link_power_management_policy"
            ))
        })
        .collect();
    let keyboard = root.join("sys/bus/usb/devices/1-1/power/control");
    let rx_errors = root.join("sys/class/net/enp3s0/statistics/rx_errors");

    let mut cmd = wattson();
    cmd.arg("--config")
        .arg(&config)
        .args(["idle", "--apply", "--watch", "5min"]);
    cmd.arg("--tmpfiles-dir").arg(&tmpfiles);
    let mut apply = Child::spawn(cmd);
    wait_for("ASPM applied", Duration::from_secs(30), || {
        (read(&policy) == "powersave").then_some(())
    });
    let mut out = Vec::new();
    wait_for("the watch to start", Duration::from_secs(30), || {
        let line = apply.stdout_line(Duration::from_millis(200))?;
        out.push(line.clone());
        line.starts_with("watching").then_some(())
    });
    // The NIC starts dropping packets once its link may sleep.
    std::fs::write(&rx_errors, "12\n").unwrap();
    wait_for("ASPM put back", Duration::from_secs(30), || {
        let line = apply.stdout_line(Duration::from_millis(200))?;
        out.push(line.clone());
        line.starts_with("put back").then_some(())
    });
    apply.signal(Signal::SIGINT);
    let status = apply.wait_exit(Duration::from_secs(10));
    while let Some(line) = apply.stdout_line(Duration::from_millis(100)) {
        out.push(line);
    }
    let out = out.join("\n");
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(0),
        "{out}\n{}",
        apply.stderr()
    );
    assert!(
        out.contains(
            "w /sys/class/scsi_host/host0/link_power_management_policy - - - - med_power_with_dipm"
        ),
        "{out}"
    );
    assert!(
        out.contains("put back pcie_aspm powersave: network enp3s0 rx_errors rose from 0 to 12"),
        "{out}"
    );
    assert!(
        out.contains("stopped watching; what was applied stays"),
        "{out}"
    );
    assert!(
        !out.contains("1-1/power/control"),
        "the keyboard was offered: {out}"
    );

    // ASPM is back as found; the rest stays applied; the file holds only what stays.
    assert_eq!(
        std::fs::read(&policy).unwrap(),
        before[&policy].0,
        "ASPM not put back"
    );
    for h in &hosts {
        assert_eq!(read(h), "med_power_with_dipm");
    }
    let kept = std::fs::read_to_string(&file).unwrap();
    assert!(!kept.contains("pcie_aspm"), "{kept}");
    assert!(
        kept.contains("- - - - 1500") && !kept.contains("nmi_watchdog"),
        "{kept}"
    );
    assert!(
        kept.contains("usb1/power/control") && !kept.contains("1-1/"),
        "{kept}"
    );
    assert!(!touched(&before, &snapshot(&root)).contains(&keyboard));

    reboot_brings_back_what_stays(&root, &before, &file);
    revert_leaves_every_file_as_found(&root, &before, &config, &tmpfiles);
}

/// A reboot: every file as found, then the tmpfiles.d lines written as at boot.
fn reboot_brings_back_what_stays(root: &Path, before: &Snapshot, file: &Path) {
    let policy = root.join("sys/module/pcie_aspm/parameters/policy");
    let keyboard = root.join("sys/bus/usb/devices/1-1/power/control");
    for path in changed_content(before, &snapshot(root)) {
        std::fs::write(&path, &before[&path].0).unwrap();
    }
    let written = boot(root, file);
    assert!(!written.contains(&policy) && !written.contains(&keyboard));
    for h in 0..4 {
        let host = root.join(format!(
            "sys/class/scsi_host/host{h}/link_power_management_policy"
        ));
        assert_eq!(
            read(&host),
            "med_power_with_dipm",
            "not kept across the reboot"
        );
    }
    assert_eq!(
        read(&root.join("proc/sys/vm/dirty_writeback_centisecs")),
        "1500"
    );
}

/// `--revert`: the file goes, every setting file as found (the counter is the test's own);
/// a file of the same name that wattson did not write is left alone.
fn revert_leaves_every_file_as_found(
    root: &Path,
    before: &Snapshot,
    config: &Path,
    tmpfiles: &Path,
) {
    let file = tmpfiles.join("wattson-idle.conf");
    let keyboard = root.join("sys/bus/usb/devices/1-1/power/control");
    std::fs::write(
        root.join("sys/class/net/enp3s0/statistics/rx_errors"),
        "0\n",
    )
    .unwrap();
    let dir = tmpfiles.to_str().unwrap();
    let (status, stdout, stderr) = run(config, &["idle", "--revert", "--tmpfiles-dir", dir]);
    assert!(status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("removed"), "{stdout}");
    assert!(!file.exists());
    assert_eq!(
        changed_content(before, &snapshot(root)),
        Vec::<PathBuf>::new()
    );
    assert!(!touched(before, &snapshot(root)).contains(&keyboard));
    std::fs::write(&file, "w /sys/x - - - - 1\n").unwrap();
    let (status, _, stderr) = run(config, &["idle", "--revert", "--tmpfiles-dir", dir]);
    assert!(
        !status.success() && stderr.contains("was not written by"),
        "{stderr}"
    );
    assert!(file.exists());
    // A link in its place, even to a file that starts as wattson's do, is left with the
    // reason that it is a link.
    let elsewhere = tmpfiles.join("elsewhere.conf");
    std::fs::write(&elsewhere, "# Written by `wattson idle --apply`.\n").unwrap();
    std::fs::remove_file(&file).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &file).unwrap();
    let (status, _, stderr) = run(config, &["idle", "--revert", "--tmpfiles-dir", dir]);
    assert!(
        !status.success() && stderr.contains("is not a regular file (a symbolic link"),
        "{stderr}"
    );
    assert!(file.symlink_metadata().unwrap().file_type().is_symlink() && elsewhere.exists());
}

fn measured_nothing_is_refused(config: &Path, tmpfiles: &Path, env: &TestEnv) {
    std::fs::create_dir_all(env.db.parent().unwrap()).unwrap();
    drop(Store::open(&env.db, &StoreOptions::default()).unwrap());
    let (status, _, stderr) = run(
        config,
        &[
            "idle",
            "--apply",
            "--tmpfiles-dir",
            tmpfiles.to_str().unwrap(),
        ],
    );
    assert!(!status.success(), "{stderr}");
    assert!(
        stderr.contains("run `wattson idle --measure` first"),
        "{stderr}"
    );
    assert!(std::fs::read_dir(tmpfiles).unwrap().next().is_none());
}
