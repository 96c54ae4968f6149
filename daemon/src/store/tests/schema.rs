//! The database file: its schema, its migrations, and files that are not wattson's.

use super::*;

#[test]
fn migrations_are_valid() {
    MIGRATIONS.validate().unwrap();
}

#[test]
fn candidates_stored_before_measured_curves_survive_the_table_rebuild() {
    let dir = tempfile::tempdir().unwrap();
    let mut conn = rusqlite::Connection::open(dir.path().join("v10.db")).unwrap();
    // Version 10: the candidate table as `wattson candidate add` first wrote it.
    MIGRATIONS.to_version(&mut conn, 10).unwrap();
    conn.execute(
        "INSERT INTO candidate (name, curve_kind, curve, origin, price, perf_ratio, added_ms) \
         VALUES ('box', 'hand', '[{\"load\":0.0,\"watts\":60.0},{\"load\":1.0,\"watts\":90.0}]', \
         'hand', 400.0, 1.5, 7)",
        [],
    )
    .unwrap();
    MIGRATIONS.to_latest(&mut conn).unwrap();
    let c = crate::candidate::store::get(&conn, "box").unwrap().unwrap();
    assert_eq!(
        (
            c.price,
            c.perf_ratio,
            c.perf_ratio_basis,
            c.curve.full_watts()
        ),
        (Some(400.0), Some(1.5), None, 90.0)
    );
    conn.execute(
        "UPDATE candidate SET curve_kind = 'measured', perf_ratio_basis = 'loops' WHERE name = 'box'",
        [],
    )
    .unwrap();
    // A basis without a ratio is refused by the table itself.
    assert!(
        conn.execute("UPDATE candidate SET perf_ratio = NULL", [])
            .is_err()
    );
}

#[test]
fn a_database_of_another_application_is_refused_by_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("other.db");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.pragma_update(None, "application_id", 1234).unwrap();
    conn.execute_batch("CREATE TABLE t (x)").unwrap();
    drop(conn);
    for err in [
        Store::open(&path, &options()).unwrap_err(),
        Store::open_read_only(&path).unwrap_err(),
    ] {
        assert!(matches!(
            err,
            StoreError::NotWattson {
                application_id: 1234,
                ..
            }
        ));
        assert!(err.to_string().contains("other.db"), "{err}");
    }
    // A database with tables but no application_id is someone else's too.
    let plain = dir.path().join("plain.db");
    rusqlite::Connection::open(&plain)
        .unwrap()
        .execute_batch("CREATE TABLE t (x)")
        .unwrap();
    assert!(matches!(
        Store::open(&plain, &options()),
        Err(StoreError::NotWattson {
            application_id: 0,
            ..
        })
    ));
}

#[test]
fn a_new_database_is_marked_versioned_and_in_wal_mode() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.db");
    let store = Store::open(&path, &options()).unwrap();
    let conn = store.conn();
    let id: i32 = conn
        .query_row("PRAGMA application_id", [], |r| r.get(0))
        .unwrap();
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    let fk: i64 = conn
        .query_row("PRAGMA foreign_keys", [], |r| r.get(0))
        .unwrap();
    let page: i64 = conn
        .query_row("PRAGMA page_size", [], |r| r.get(0))
        .unwrap();
    assert_eq!(
        (id, version, mode.as_str(), fk),
        (APPLICATION_ID, MIGRATION_LIST.len() as i64, "wal", 1)
    );
    assert_eq!(page, PAGE_SIZE);
    drop(store);
    // Reopening is a no-op.
    Store::open(&path, &options()).unwrap();
}

/// Two processes opening a new database at once (the daemon, and a command run beside it):
/// both open it, whichever migrates it. Each round starts both at a barrier on a new file.
#[test]
fn two_opening_a_new_database_at_once_both_open_it() {
    let dir = tempfile::tempdir().unwrap();
    for round in 0..20 {
        let path = dir.path().join(format!("new-{round}.db"));
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(2));
        let opened: Vec<_> = (0..2)
            .map(|_| {
                let (path, barrier) = (path.clone(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    Store::open(&path, &StoreOptions::default()).map(drop)
                })
            })
            .collect();
        for t in opened {
            t.join().unwrap().unwrap_or_else(|e| {
                panic!("round {round}: {}", wattson_collectors::ErrorChain(&e))
            });
        }
    }
}

/// A migration that fails says SQLite's reason, not the migration's whole SQL.
#[test]
fn a_failed_migration_says_why_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("half.db");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "PRAGMA application_id = 0x57617453; CREATE TABLE series (x INTEGER) STRICT;",
    )
    .unwrap();
    drop(conn);
    let e = Store::open(&path, &StoreOptions::default()).unwrap_err();
    let text = wattson_collectors::ErrorChain(&e).to_string();
    assert!(
        text.contains("migrating database")
            && text.contains("a step of the schema failed")
            && text.contains("table series already exists"),
        "{text}"
    );
    assert!(!text.contains("CREATE TABLE"), "{text}");
}
