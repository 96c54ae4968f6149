//! What root writes into a file another program interprets is composed by wattson, never
//! copied from a database (SECURITY.md): the tmpfiles.d file of `idle --apply` and
//! `--revert`, which systemd-tmpfiles runs as root at every boot; `--revert` keeping an
//! administrator's lines and leaving no empty file; and kernel settings written beneath the
//! configured sysfs root only, never through a directory linked out of it.

use std::path::{Path, PathBuf};

use super::{journal_db, machine, run};
use crate::idle_apply::measured;
use wattson_tests::TestEnv;

/// The setting name the service user stored: a comment line, then a tmpfiles.d line that
/// makes systemd-tmpfiles create a sudoers file at boot.
const INJECTED: &str = "ASPM powersave\nf+ /etc/sudoers.d/zz-wattson-pwned 0440 root root - \
                        rtuser ALL=(ALL) NOPASSWD: ALL\n# tail";

/// The files of the Intel desktop's catalogue that `--apply` keeps for its measured
/// effects, as the running system names them.
const CATALOGUE_FILES: [&str; 7] = [
    "/sys/module/pcie_aspm/parameters/policy",
    "/sys/class/scsi_host/host0/link_power_management_policy",
    "/sys/class/scsi_host/host1/link_power_management_policy",
    "/sys/class/scsi_host/host2/link_power_management_policy",
    "/sys/class/scsi_host/host3/link_power_management_policy",
    "/proc/sys/vm/dirty_writeback_centisecs",
    "/sys/bus/usb/devices/usb1/power/control",
];

/// The catalogue's names of those settings, as the file's comments give them.
const CATALOGUE_NAMES: [&str; 4] = [
    "ASPM powersave",
    "SATA ALPM med_power_with_dipm",
    "USB autosuspend (1 device)",
    "writeback every 1500 cs",
];

/// Parses the tmpfiles.d file line by line: every line is wattson's mark or end line, a
/// header comment, a comment naming a catalogue setting, blank, or a `w` line for a
/// catalogue file with a plain value, or (below the end line) one of `admin`. Returns the
/// `w` lines' paths.
fn only_composed_lines(file: &Path, admin: &[&str]) -> Vec<String> {
    let text = std::fs::read_to_string(file).unwrap();
    assert!(!text.contains("f+") && !text.contains("sudoers"), "{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "# Written by `wattson idle --apply`.", "{text}");
    let mut paths = Vec::new();
    let mut below_end = false;
    for line in &lines[1..] {
        if below_end {
            assert!(
                admin.contains(line),
                "not the administrator's: {line:?}\n{text}"
            );
        } else if line.starts_with("# End of wattson's lines.") {
            below_end = true;
        } else if let Some(comment) = line.strip_prefix("# ") {
            let header = [
                "The power settings `wattson idle --measure` found to save at the wall on e2e,",
                "kept ",
                "`wattson idle --revert` takes these lines out",
            ];
            let named = CATALOGUE_NAMES.iter().any(|n| {
                comment.starts_with(&format!("{n}: ")) && comment.ends_with(" W at the wall")
            });
            assert!(
                named || header.iter().any(|h| comment.starts_with(h)),
                "a comment wattson does not compose: {line:?}\n{text}"
            );
        } else if let Some(rest) = line.strip_prefix("w ") {
            let fields: Vec<&str> = rest.split(' ').collect();
            assert_eq!(fields.len(), 6, "{line:?}");
            assert_eq!(&fields[1..5], ["-", "-", "-", "-"], "{line:?}");
            assert!(
                CATALOGUE_FILES.contains(&fields[0]),
                "not a catalogue file: {line:?}"
            );
            assert!(
                fields[5]
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_'),
                "{line:?}"
            );
            paths.push(fields[0].to_owned());
        } else {
            assert!(
                line.is_empty(),
                "a line wattson does not write: {line:?}\n{text}"
            );
        }
    }
    assert!(below_end, "no end line: {text}");
    paths
}

fn sql(db: &Path, statements: &str) {
    rusqlite::Connection::open(db)
        .unwrap()
        .execute_batch(statements)
        .unwrap();
}

/// A machine with measured effects whose stored names are the injection, and an empty
/// tmpfiles.d directory.
fn planted(env: &TestEnv) -> (PathBuf, PathBuf, PathBuf) {
    let (root, config) = machine(env, &env.db);
    std::fs::create_dir_all(env.db.parent().unwrap()).unwrap();
    measured(&env.db);
    let c = rusqlite::Connection::open(&env.db).unwrap();
    let n = c
        .execute("UPDATE idle_effect SET name = ?1", [INJECTED])
        .unwrap();
    assert_eq!(n, 5);
    let tmpfiles = env.path("tmpfiles.d");
    std::fs::create_dir(&tmpfiles).unwrap();
    (root, config, tmpfiles)
}

fn apply(config: &Path, tmpfiles: &Path) -> (Option<i32>, String) {
    run(
        config,
        &[
            "idle",
            "--apply",
            "--watch",
            "0",
            "--tmpfiles-dir",
            tmpfiles.to_str().unwrap(),
        ],
    )
}

fn revert(config: &Path, tmpfiles: &Path) -> (Option<i32>, String) {
    run(
        config,
        &[
            "idle",
            "--revert",
            "--tmpfiles-dir",
            tmpfiles.to_str().unwrap(),
        ],
    )
}

/// Row 1 (Critical): the service user stored a setting's name holding a newline and an
/// `f+` line; root's `idle --apply`, then `--revert` of a database whose rows fail vetting
/// (a row naming /etc/shadow, one whose recorded original the setting does not take), wrote
/// it into the tmpfiles.d file. The file holds only wattson's mark and end lines, its
/// header, the catalogue's names and `w` lines for catalogue files.
#[test]
fn a_stored_setting_name_never_reaches_the_tmpfiles_file() {
    let env = TestEnv::new();
    let (_root, config, tmpfiles) = planted(&env);
    let file = tmpfiles.join("wattson-idle.conf");
    let (code, out) = apply(&config, &tmpfiles);
    assert_eq!(code, Some(0), "{out}");
    let mut paths = only_composed_lines(&file, &[]);
    paths.sort();
    let mut all = CATALOGUE_FILES.to_vec();
    all.sort_unstable();
    assert_eq!(paths, all, "every setting that saved is kept");

    sql(
        &env.db,
        &format!(
            "UPDATE idle_applied SET name = '{0}';
             UPDATE idle_applied SET original = 'max_performance; reboot'
                 WHERE path LIKE '%host0%';
             INSERT INTO idle_applied (path, setting, name, content, original, value, saving_w,
                                       saving_ci95_w, applied_ms)
             VALUES ('/etc/shadow', 'pcie_aspm', '{0}', CAST('x' AS BLOB), 'x', 'x', -1, 0.1, 1);",
            INJECTED.replace('\'', "''")
        ),
    );
    let (code, out) = revert(&config, &tmpfiles);
    assert_ne!(code, Some(0), "two rows refused: {out}");
    assert!(
        out.contains("refusing to restore") && out.contains("/etc/shadow"),
        "{out}"
    );
    let paths = only_composed_lines(&file, &[]);
    assert_eq!(
        paths,
        ["/sys/class/scsi_host/host0/link_power_management_policy"],
        "what was not put back stays kept, and only that"
    );
}

/// Row 2: `--revert` deleted a tmpfiles.d file an administrator had added lines to below
/// wattson's, and wrote a file of comments alone when it refused every row. It keeps the
/// lines it did not write, and leaves no file when it has nothing to keep.
#[test]
fn revert_keeps_the_administrators_lines_and_writes_no_empty_file() {
    let env = TestEnv::new();
    let (_root, config, tmpfiles) = planted(&env);
    let file = tmpfiles.join("wattson-idle.conf");
    let (code, out) = apply(&config, &tmpfiles);
    assert_eq!(code, Some(0), "{out}");
    let admin = [
        "# kept by hand",
        "d /run/fan-curve 0755 root root -",
        "w /sys/class/hwmon/hwmon2/pwm1_enable - - - - 1",
    ];
    let mut text = std::fs::read_to_string(&file).unwrap();
    for line in admin {
        text.push_str(line);
        text.push('\n');
    }
    std::fs::write(&file, &text).unwrap();
    // Written again by --apply: the administrator's lines stay below wattson's.
    let (code, out) = apply(&config, &tmpfiles);
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(
        only_composed_lines(&file, &admin).len(),
        CATALOGUE_FILES.len()
    );
    assert!(
        std::fs::read_to_string(&file)
            .unwrap()
            .ends_with(&format!("{}\n", admin.join("\n")))
    );

    let (code, out) = revert(&config, &tmpfiles);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("keeping the lines below them"), "{out}");
    assert!(only_composed_lines(&file, &admin).is_empty());
    let kept = std::fs::read_to_string(&file).unwrap();
    assert!(kept.ends_with(&format!("{}\n", admin.join("\n"))), "{kept}");
    assert!(!kept.contains("The power settings"), "{kept}");

    // Every row refused (rows of files this machine does not have), no administrator's
    // line: no file, where a header alone was written.
    std::fs::remove_file(&file).unwrap();
    let (code, out) = apply(&config, &tmpfiles);
    assert_eq!(code, Some(0), "{out}");
    sql(
        &env.db,
        "UPDATE idle_applied SET path = '/nowhere' || path;",
    );
    let (code, out) = revert(&config, &tmpfiles);
    assert_ne!(code, Some(0), "every row refused: {out}");
    assert!(out.contains("refusing to restore"), "{out}");
    assert!(
        !file.exists(),
        "{}",
        std::fs::read_to_string(&file).unwrap_or_default()
    );
    let (code, out) = revert(&config, &tmpfiles);
    assert_ne!(code, Some(0), "{out}");
    assert!(std::fs::read_dir(&tmpfiles).unwrap().next().is_none());
}

/// Row 3: under a configured sysfs root, a directory replaced by a link to one outside
/// it. Root's restore at `status` and `idle --apply` wrote through `parameters ->
/// elsewhere`; both refuse, naming the link out of the root, and the file outside is as it
/// was.
#[test]
fn a_directory_linked_out_of_the_sysfs_root_is_never_written_through() {
    let env = TestEnv::new();
    let db = env.db.clone();
    let (root, config) = machine(&env, &db);
    let parameters = root.join("sys/module/pcie_aspm/parameters");
    let elsewhere = env.path("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let outside = elsewhere.join("policy");
    std::fs::write(&outside, "default performance [powersave] powersupersave\n").unwrap();
    std::fs::remove_dir_all(&parameters).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &parameters).unwrap();
    let policy = parameters.join("policy");

    // An interrupted measurement's journal asks to put the policy back.
    std::fs::create_dir_all(db.parent().unwrap()).unwrap();
    journal_db(
        &db,
        &[(
            policy.clone(),
            "default [performance] powersave powersupersave\n",
            "performance",
        )],
        None,
    );
    let (_, out) = run(&config, &["status", "--db", db.to_str().unwrap()]);
    assert!(out.contains("outside the configured root"), "{out}");
    assert_eq!(
        std::fs::read_to_string(&outside).unwrap(),
        "default performance [powersave] powersupersave\n"
    );

    // --apply of a measured saving on the same file.
    let db2 = env.path("applied.db");
    std::fs::write(&config, wattson_tests::idle::host_toml(&root, &db2)).unwrap();
    measured(&db2);
    let tmpfiles = env.path("tmpfiles.d");
    std::fs::create_dir(&tmpfiles).unwrap();
    let (code, out) = run(
        &config,
        &[
            "idle",
            "--apply",
            "--only",
            "pcie_aspm",
            "--watch",
            "0",
            "--tmpfiles-dir",
            tmpfiles.to_str().unwrap(),
        ],
    );
    assert_ne!(code, Some(0), "{out}");
    assert!(
        out.contains(&policy.display().to_string())
            && out.contains("outside the configured root")
            && out.contains("nothing was changed"),
        "{out}"
    );
    assert_eq!(
        out.matches("outside the configured root").count(),
        1,
        "{out}"
    );
    assert_eq!(
        std::fs::read_to_string(&outside).unwrap(),
        "default performance [powersave] powersupersave\n"
    );
    assert!(std::fs::read_dir(&tmpfiles).unwrap().next().is_none());
}
