//! Kernel settings written beneath the configured sysfs root only, never through a
//! directory linked out of it (SECURITY.md).

use super::{journal_db, machine, run};
use crate::idle_apply::measured;
use wattson_tests::TestEnv;

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
