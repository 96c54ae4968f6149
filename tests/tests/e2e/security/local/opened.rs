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
    let env = TestEnv::new();
    let config = env.config("[tariff]\ncurrency = \"GBP\"\nprice_per_kwh = 0.30\n");
    let prices = env.path("prices.csv");
    std::fs::write(
        &prices,
        "start,end,price_per_kwh\n2026-01-01T00:00:00Z,2026-01-01T00:30:00Z,0.2\n",
    )
    .unwrap();
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
