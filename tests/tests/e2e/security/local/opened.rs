//! A database is opened by its own name, never through a link planted in its directory
//! (issue 44): the service user can replace `wattson.db` in its state directory, and root
//! runs commands on that path.

use std::path::{Path, PathBuf};

use super::run;
use wattson_tests::TestEnv;

/// The database and the files SQLite keeps beside it, for the database at `db`.
fn with_companions(db: &Path) -> [PathBuf; 4] {
    ["", "-wal", "-shm", "-journal"].map(|s| PathBuf::from(format!("{}{s}", db.display())))
}

/// The writing and reading commands a root shell runs on the service's database.
fn commands(db: &Path, prices: &Path) -> Vec<Vec<String>> {
    let db = db.display().to_string();
    let prices = prices.display().to_string();
    [
        vec!["tariff", "import", &prices, "--db", &db],
        vec![
            "candidate",
            "add",
            "mini",
            "--idle",
            "8",
            "--at",
            "100%=30",
            "--db",
            &db,
        ],
        vec!["status", "--db", &db],
    ]
    .into_iter()
    .map(|a| a.into_iter().map(str::to_owned).collect())
    .collect()
}

/// A test environment, its config with a tariff, and a price file for `tariff import`.
fn with_a_tariff() -> (TestEnv, PathBuf, PathBuf) {
    let env = TestEnv::new();
    let config = env.config("[tariff]\ncurrency = \"GBP\"\nprice_per_kwh = 0.30\n");
    let prices = env.path("prices.csv");
    std::fs::write(
        &prices,
        "start,end,price_per_kwh\n2026-01-01T00:00:00Z,2026-01-01T00:30:00Z,0.2\n",
    )
    .unwrap();
    (env, config, prices)
}

/// Every command refused naming the link and where it leads, and saying what to do.
fn refused_everywhere(config: &Path, db: &Path, prices: &Path, target: &Path) {
    for args in commands(db, prices) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, out) = run(config, &args);
        assert_ne!(code, Some(0), "{args:?}: {out}");
        assert!(
            out.contains(&format!(
                "{} is a symbolic link (to {})",
                db.display(),
                target.display()
            )) && out.contains("never through a link")
                && out.contains("point [storage] path or --db at the database itself"),
            "{args:?}: {out}"
        );
    }
}

/// Row 2: `wattson.db` a link to a file that does not exist: `tariff import`, `candidate add`
/// and `status` refuse it, and nothing is created where it leads (SQLite followed the link
/// and created a root-owned database there, `-wal` and `-shm` beside it). A link to an
/// existing database is refused the same way and the database is left as it was.
#[test]
fn a_database_reached_through_a_link_is_refused_and_nothing_is_created_where_it_leads() {
    let (env, config, prices) = with_a_tariff();
    let target = env.path("target.db");
    std::os::unix::fs::symlink(&target, &env.db).unwrap();

    refused_everywhere(&config, &env.db, &prices, &target);
    for p in with_companions(&target) {
        assert!(!p.exists(), "{} was created through the link", p.display());
    }

    // An existing database at the end of the link: refused too, and not written.
    let (code, out) = run(
        &config,
        &[
            "tariff",
            "import",
            prices.to_str().unwrap(),
            "--db",
            target.to_str().unwrap(),
        ],
    );
    assert_eq!(code, Some(0), "{out}");
    let before = std::fs::read(&target).unwrap();
    let (wal, shm) = (
        with_companions(&target)[1].exists(),
        with_companions(&target)[2].exists(),
    );
    refused_everywhere(&config, &env.db, &prices, &target);
    assert_eq!(
        std::fs::read(&target).unwrap(),
        before,
        "the database changed"
    );
    assert_eq!(
        (
            with_companions(&target)[1].exists(),
            with_companions(&target)[2].exists()
        ),
        (wal, shm)
    );
    assert!(
        std::fs::symlink_metadata(&env.db)
            .unwrap()
            .file_type()
            .is_symlink()
    );

    // By its own name, through a directory that is a link (systemd's /var/lib/<service> for
    // a DynamicUser service), the same database opens.
    let dir_link = env.path("state");
    std::os::unix::fs::symlink(env.dir.path(), &dir_link).unwrap();
    let by_dir = dir_link.join("target.db");
    for args in commands(&by_dir, &prices) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, out) = run(&config, &args);
        assert_eq!(code, Some(0), "{args:?}: {out}");
    }
}

/// Every command of [`commands`] refused with `says` and what to do, said once, and
/// nothing created in `dir`.
fn refused_for_the_directory(config: &Path, dir: &Path, prices: &Path, says: &str) {
    let before: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    for args in commands(&dir.join("wattson.db"), prices) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, out) = run(config, &args);
        assert_eq!(code, Some(74), "{args:?}: {out}");
        assert!(
            out.contains(&format!("the database's directory {}", dir.display()))
                && out.contains(says)
                && out.contains("StrictModes")
                && out.contains("give [storage] path or --db a directory of its own"),
            "{args:?}: {says:?} in {out}"
        );
        assert_eq!(out.matches("StrictModes").count(), 1, "said once: {out}");
    }
    let after: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(after, before, "something was created in {}", dir.display());
}

/// As ssh's StrictModes: a database whose directory its group or every user may write, or
/// which belongs to another user (neither root, nor the user running wattson, nor the
/// database's owner), is refused by root's `tariff import`, `candidate add` and `status`,
/// with the reason and what to do, said once, and nothing is created there; so is a
/// directory that is a link another user made. A directory of root's, or of the service
/// user whose database it is, opens.
#[test]
fn a_database_directory_another_user_may_write_or_has_linked_is_refused() {
    use std::os::unix::fs::PermissionsExt as _;
    use std::os::unix::process::CommandExt as _;
    let (env, config, prices) = with_a_tariff();
    let mode = |dir: &Path, mode: u32| {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    let opens = |dir: &Path| {
        for args in commands(&dir.join("wattson.db"), &prices) {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let (code, out) = run(&config, &args);
            assert_eq!(code, Some(0), "{args:?}: {out}");
        }
    };
    // A directory of its own, written by its owner alone: opens.
    let state = env.path("state");
    std::fs::create_dir(&state).unwrap();
    mode(&state, 0o750);
    opens(&state);

    let shared = env.path("shared");
    std::fs::create_dir(&shared).unwrap();
    for (m, says) in [
        (0o775, "may be written by the members of its group"),
        (0o1777, "may be written by every user (mode 1777)"),
    ] {
        mode(&shared, m);
        refused_for_the_directory(&config, &shared, &prices, says);
    }

    let Some((uid, gid)) = super::second_user() else {
        return;
    };
    mode(env.dir.path(), 0o755);
    // Another user's directory: refused, until the database in it is that user's (the
    // service user's, which root may work on).
    let theirs = env.path("theirs");
    std::fs::create_dir(&theirs).unwrap();
    mode(&theirs, 0o755);
    std::os::unix::fs::chown(&theirs, Some(uid), Some(gid)).unwrap();
    refused_for_the_directory(&config, &theirs, &prices, "belongs to uid ");
    let db = theirs.join("wattson.db");
    std::fs::copy(state.join("wattson.db"), &db).unwrap();
    std::os::unix::fs::chown(&db, Some(uid), Some(gid)).unwrap();
    let (code, out) = run(&config, &["status", "--db", db.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{out}");

    // A link that user made, to root's own directory: refused, naming the link.
    let link = theirs.join("state");
    let linked = std::process::Command::new("ln")
        .arg("-s")
        .arg(&state)
        .arg(&link)
        .uid(uid)
        .gid(gid)
        .status()
        .unwrap();
    assert!(linked.success());
    let by_link = link.join("wattson.db");
    for args in commands(&by_link, &prices) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, out) = run(&config, &args);
        assert_eq!(code, Some(74), "{args:?}: {out}");
        assert!(
            out.contains(&format!(
                "the database's directory {} is a symbolic link (to {}) made by uid {uid} \
                 (wattson-e2e-other)",
                link.display(),
                state.display()
            )) && out.contains("or have root make the link"),
            "{args:?}: {out}"
        );
    }
}
