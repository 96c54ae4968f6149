//! Store faults on real SQLite files: a second writer, failed flushes kept and retried
//! (the writer's connection set `query_only` fails its flushes as a read-only file system
//! would), the memory bound, files deleted or replaced while in use, and undecodable rows
//! set aside. A full disk is done through the real binary on a small file system
//! (`tests/tests/e2e/faults.rs`).

use std::path::Path;
use std::time::Duration;
use wattson_collectors::SourceId;

use wattson_collectors::{Metric, Sample};

use super::*;

/// 2023-11-14T22:00:00Z, an hour boundary.
const T0: i64 = 1_700_000_000_000 - 1_700_000_000_000 % HOUR_MS;

fn options() -> StoreOptions {
    StoreOptions {
        host: "basket".to_owned(),
        // Flushes and retries only when a test asks for them.
        flush_interval: Duration::from_secs(3600),
        retry_interval: Duration::from_secs(3600),
        ..StoreOptions::default()
    }
}

/// `n` seconds of 1 Hz samples of `series` power series from `from_s`.
fn batch(series: usize, from_s: i64, n: i64) -> Vec<Sample> {
    let mut out = Vec::new();
    for t in from_s..from_s + n {
        for s in 0..series {
            out.push(Sample::new(
                T0 + t * 1000,
                SourceId::meter(format!("m{s}")),
                Metric::Power,
                "",
                100.0 + s as f64,
            ));
        }
    }
    out
}

/// Makes the writer's connection refuse writes: every flush fails with SQLite's "attempt
/// to write a readonly database", as on a file system remounted read-only.
fn freeze(handle: &StoreHandle) {
    handle
        .query(|s| s.conn().pragma_update(None, "query_only", true).unwrap())
        .unwrap();
}

fn unfreeze(handle: &StoreHandle) {
    handle
        .query(|s| s.conn().pragma_update(None, "query_only", false).unwrap())
        .unwrap();
}

#[test]
fn a_second_writer_is_refused_and_names_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.db");
    let (first, join) = StoreHandle::spawn(&path, options()).unwrap();
    let err = StoreHandle::spawn(&path, options()).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, StoreError::Locked { .. }), "{err:?}");
    assert!(
        text.contains(&format!("pid {}", std::process::id())) && text.contains("w.db"),
        "{text}"
    );
    first.close().unwrap();
    join.join().unwrap().unwrap();
    // Once the first has stopped, the lock is free again.
    let (again, join) = StoreHandle::spawn(&path, options()).unwrap();
    again.close().unwrap();
    join.join().unwrap().unwrap();
}

#[test]
fn the_lock_file_says_who_writes_and_how_it_is_doing() {
    use super::lock::{WriterState, writer_state};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.db");
    assert_eq!(writer_state(&path), WriterState::Never);
    let (handle, join) = StoreHandle::spawn(&path, options()).unwrap();
    let WriterState::Live(Some(holder)) = writer_state(&path) else {
        panic!("no live writer: {:?}", writer_state(&path));
    };
    assert_eq!(holder.pid, std::process::id());
    assert!(holder.store.writable());
    freeze(&handle);
    handle.insert(batch(50, 0, 60)).unwrap();
    handle.flush().unwrap_err();
    let WriterState::Live(Some(holder)) = writer_state(&path) else {
        panic!("no live writer");
    };
    assert!(
        holder
            .store
            .problem()
            .is_some_and(|p| p.contains("readonly database")),
        "{holder:?}"
    );
    unfreeze(&handle);
    handle.close().unwrap();
    join.join().unwrap().unwrap();
    assert!(matches!(writer_state(&path), WriterState::Stopped(Some(_))));
}

/// A fleet collector's store (`hold_failed` off) keeps nothing of a failed flush: the broker
/// delivers that message again, and a copy written by a later retry would run ahead of it.
#[test]
fn without_hold_failed_a_failed_flush_keeps_nothing_for_a_later_retry() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.db");
    let opts = crate::store::StoreOptions {
        hold_failed: false,
        ..options()
    };
    let (handle, join) = StoreHandle::spawn(&path, opts).unwrap();
    handle.insert(batch(2, 0, 10)).unwrap();
    assert_eq!(handle.flush().unwrap().samples, 20);
    freeze(&handle);
    handle.insert(batch(50, 10, 60)).unwrap();
    handle.flush().unwrap_err();
    let health = handle.health();
    assert!(!health.writable());
    assert_eq!(health.held_samples, 0);
    assert_eq!(health.dropped_samples, 0);
    unfreeze(&handle);
    // What comes next is stored; the failed batch is not, by a retry or otherwise.
    handle.insert(batch(2, 100, 10)).unwrap();
    assert_eq!(handle.flush().unwrap().samples, 20);
    assert!(handle.health().writable());
    handle.close().unwrap();
    join.join().unwrap().unwrap();
    assert_eq!(super::tests::stored_samples(&path), 40);
}

/// Regression: a failed flush dropped its batch ("batch lost"). Now its samples stay queued
/// and go into the next flush that commits.
#[test]
fn a_failed_flush_keeps_its_samples_and_the_next_one_stores_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.db");
    let (handle, join) = StoreHandle::spawn(&path, options()).unwrap();
    handle.insert(batch(2, 0, 10)).unwrap();
    assert_eq!(handle.flush().unwrap().samples, 20);
    freeze(&handle);
    handle.insert(batch(50, 10, 60)).unwrap();
    let err = handle.flush().unwrap_err();
    assert!(error_chain(&err).contains("readonly database"), "{err}");
    let health = handle.health();
    assert!(!health.writable());
    assert_eq!(health.held_samples, 3000);
    assert_eq!(health.dropped_samples, 0);
    // Still failing: the held samples and the new ones wait together.
    handle.insert(batch(50, 70, 10)).unwrap();
    handle.flush().unwrap_err();
    assert_eq!(handle.health().held_samples, 3500);
    assert_eq!(handle.health().failing.unwrap().attempts, 2);
    unfreeze(&handle);
    assert_eq!(handle.flush().unwrap().samples, 3500);
    let health = handle.health();
    assert!(health.writable() && health.held_samples == 0);
    assert!(health.losses().is_empty(), "{health:?}");
    handle.close().unwrap();
    join.join().unwrap().unwrap();
    assert_eq!(super::tests::stored_samples(&path), 3520);
}

#[test]
fn the_writer_retries_a_failed_flush_on_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.db");
    let opts = StoreOptions {
        retry_interval: Duration::from_millis(50),
        ..options()
    };
    let (handle, join) = StoreHandle::spawn(&path, opts).unwrap();
    handle.insert(batch(1, 0, 1)).unwrap();
    handle.flush().unwrap();
    freeze(&handle);
    handle.insert(batch(50, 1, 60)).unwrap();
    handle.flush().unwrap_err();
    let attempts = |h: &StoreHandle| h.health().failing.map_or(0, |f| f.attempts);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while attempts(&handle) < 3 {
        assert!(std::time::Instant::now() < deadline, "no retries");
        std::thread::sleep(Duration::from_millis(10));
    }
    unfreeze(&handle);
    while !handle.health().writable() {
        assert!(std::time::Instant::now() < deadline, "never recovered");
        std::thread::sleep(Duration::from_millis(10));
    }
    handle.close().unwrap();
    join.join().unwrap().unwrap();
    assert_eq!(super::tests::stored_samples(&path), 3001);
}

#[test]
fn held_samples_beyond_the_memory_bound_are_dropped_oldest_first_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.db");
    let opts = StoreOptions {
        // About three batches of 500 samples.
        max_held_bytes: 3 * 500 * 110,
        ..options()
    };
    let (handle, join) = StoreHandle::spawn(&path, opts).unwrap();
    handle.insert(batch(1, 0, 1)).unwrap();
    handle.flush().unwrap();
    freeze(&handle);
    for k in 0..10 {
        handle.insert(batch(50, 1 + k * 10, 10)).unwrap();
        handle.flush().unwrap_err();
    }
    let health = handle.health();
    assert!(health.dropped_samples > 0, "{health:?}");
    assert_eq!(health.held_samples + health.dropped_samples, 5000);
    assert!(
        health.losses()[0].contains(&format!("{} samples dropped", health.dropped_samples)),
        "{:?}",
        health.losses()
    );
    unfreeze(&handle);
    let stats = handle.flush().unwrap();
    assert_eq!(stats.samples as u64, health.held_samples);
    handle.close().unwrap();
    join.join().unwrap().unwrap();
    // The newest were kept: the last batch's final second is there, the first batch's not.
    let store = Store::open_read_only(&path).unwrap();
    let m0 = store
        .raw(
            &SeriesFilter::all().source(&SourceId::meter("m0")),
            0,
            i64::MAX,
        )
        .unwrap();
    let ts: Vec<i64> = m0[0].1.iter().map(|p| p.0).collect();
    assert!(ts.contains(&(T0 + 100_000)), "{ts:?}");
    assert!(!ts.contains(&(T0 + 1000)), "{ts:?}");
    assert_eq!(
        super::tests::stored_samples(&path) as u64,
        1 + health.held_samples
    );
}

#[test]
fn a_last_flush_that_fails_says_how_many_samples_are_lost() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.db");
    let (handle, join) = StoreHandle::spawn(&path, options()).unwrap();
    handle.insert(batch(1, 0, 1)).unwrap();
    handle.flush().unwrap();
    freeze(&handle);
    handle.insert(batch(50, 1, 60)).unwrap();
    let err = handle.close().unwrap_err();
    assert!(matches!(err, StoreError::Lost { .. }), "{err:?}");
    assert!(
        err.to_string().contains("3000 samples could not be stored"),
        "{err}"
    );
    join.join().unwrap().unwrap();
}

#[test]
fn a_database_deleted_with_its_directory_while_in_use_is_created_again() {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("state");
    let path = sub.join("w.db");
    std::fs::create_dir(&sub).unwrap();
    let (handle, join) = StoreHandle::spawn(&path, options()).unwrap();
    handle.insert(batch(2, 0, 10)).unwrap();
    handle.flush().unwrap();
    std::fs::remove_dir_all(&sub).unwrap();
    handle.insert(batch(2, 10, 10)).unwrap();
    assert_eq!(handle.flush().unwrap().samples, 20);
    let health = handle.health();
    assert_eq!(
        health.reopened.as_ref().map(|r| r.what.as_str()),
        Some("deleted")
    );
    assert!(super::lock::lock_path(&path).exists());
    // A second writer is still refused on the new file.
    assert!(matches!(
        StoreHandle::spawn(&path, options()),
        Err(StoreError::Locked { .. })
    ));
    handle.close().unwrap();
    join.join().unwrap().unwrap();
    assert_eq!(
        super::tests::stored_samples(&path),
        20,
        "the samples after the deletion are in the new file"
    );
}

#[test]
fn a_database_replaced_while_in_use_is_written_at_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.db");
    let other = dir.path().join("other.db");
    let (handle, join) = StoreHandle::spawn(&path, options()).unwrap();
    handle.insert(batch(1, 0, 5)).unwrap();
    handle.flush().unwrap();
    drop(Store::open(&other, &options()).unwrap());
    std::fs::rename(&other, &path).unwrap();
    handle.insert(batch(1, 5, 5)).unwrap();
    handle.flush().unwrap();
    assert_eq!(
        handle.health().reopened.map(|r| r.what),
        Some("replaced by another file".to_owned())
    );
    handle.close().unwrap();
    join.join().unwrap().unwrap();
    assert_eq!(
        super::tests::stored_samples(&path),
        5,
        "the old file's samples came into the new one"
    );
    assert_eq!(
        Store::open_read_only(&path)
            .unwrap()
            .integrity_check()
            .unwrap(),
        "ok"
    );
}

#[test]
fn a_directory_that_cannot_be_created_again_keeps_the_samples_until_it_can() {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("state");
    let path = sub.join("w.db");
    std::fs::create_dir(&sub).unwrap();
    let (handle, join) = StoreHandle::spawn(&path, options()).unwrap();
    handle.insert(batch(1, 0, 5)).unwrap();
    handle.flush().unwrap();
    std::fs::remove_dir_all(&sub).unwrap();
    // A file where the directory was: it cannot be created again.
    std::fs::write(&sub, "not a directory").unwrap();
    handle.insert(batch(1, 5, 5)).unwrap();
    let err = handle.flush().unwrap_err();
    assert!(matches!(err, StoreError::Reopen { .. }), "{err:?}");
    assert_eq!(handle.health().held_samples, 5);
    std::fs::remove_file(&sub).unwrap();
    handle.insert(batch(1, 10, 5)).unwrap();
    assert_eq!(handle.flush().unwrap().samples, 10);
    handle.close().unwrap();
    join.join().unwrap().unwrap();
    assert_eq!(super::tests::stored_samples(&path), 10);
}

/// Corrupts the stored open chunk of `source`.
fn corrupt_open_chunk(path: &Path, source: &SourceId) {
    let conn = rusqlite::Connection::open(path).unwrap();
    let n = conn
        .execute(
            "UPDATE raw_open SET data = x'ffffffffffffffff' WHERE series_id =
               (SELECT id FROM series WHERE source = ?1)",
            [source.to_string()],
        )
        .unwrap();
    assert_eq!(n, 1);
}

/// Regression: one undecodable open chunk made every flush fail, for every series. It is
/// now set aside into `quarantine` when the writer starts, and every series goes on.
#[test]
fn an_undecodable_open_chunk_is_set_aside_and_every_series_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.db");
    let (handle, join) = StoreHandle::spawn(&path, options()).unwrap();
    handle.insert(batch(3, 0, 10)).unwrap();
    handle.flush().unwrap();
    handle.close().unwrap();
    join.join().unwrap().unwrap();
    corrupt_open_chunk(&path, &SourceId::meter("m1"));
    // Readers leave it out instead of failing.
    assert_eq!(super::tests::stored_samples(&path), 20);

    let (handle, join) = StoreHandle::spawn(&path, options()).unwrap();
    assert_eq!(handle.health().quarantined, 1);
    handle.insert(batch(3, 10, 10)).unwrap();
    assert_eq!(handle.flush().unwrap().samples, 30);
    handle.close().unwrap();
    join.join().unwrap().unwrap();
    let store = Store::open_read_only(&path).unwrap();
    let q = store.quarantined().unwrap();
    assert_eq!(q.len(), 1);
    assert_eq!(q[0].kind, "raw_open");
    assert!(
        q[0].series.contains(&SourceId::meter("m1").to_string()),
        "{:?}",
        q[0]
    );
    assert_eq!(q[0].n, Some(10));
    assert_eq!(
        super::tests::stored_samples(&path),
        50,
        "20 + 30: only the corrupt chunk's 10 are gone"
    );
    assert_eq!(store.integrity_check().unwrap(), "ok");
}

#[test]
fn an_undecodable_closed_chunk_met_by_the_writer_is_set_aside() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.db");
    let mut w = Writer::new(Store::open(&path, &options()).unwrap(), options());
    // Ten seconds in the first 15-minute chunk, then one in the next closes it.
    w.push(None, batch(1, 0, 10));
    w.push(None, batch(1, 900, 1));
    w.flush().unwrap();
    drop(w);
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute("UPDATE raw_chunk SET data = x'ff00ff00'", [])
        .unwrap();
    conn.execute("DELETE FROM raw_open", []).unwrap();
    drop(conn);
    // A sample later than the closed chunk's last but in its period opens a chunk there;
    // the next period makes the writer merge it into the corrupt one.
    let mut w = Writer::new(Store::open(&path, &options()).unwrap(), options());
    w.push(None, batch(1, 20, 1));
    w.push(None, batch(1, 960, 1));
    assert_eq!(w.flush().unwrap().samples, 2);
    let q = w.store().quarantined().unwrap();
    assert_eq!(q.len(), 1, "{q:?}");
    assert_eq!((q[0].kind.as_str(), q[0].n), ("raw_chunk", Some(10)));
    drop(w);
    assert_eq!(super::tests::stored_samples(&path), 2);
}

/// While flushes fail, new batches wait for the next retry (no attempt per batch, each of
/// which would write everything held again) and are held within the memory bound.
#[test]
fn while_failing_new_batches_wait_for_the_retry_within_the_bound() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.db");
    let opts = StoreOptions {
        flush_interval: Duration::ZERO,
        max_held_bytes: 3 * 500 * 110,
        ..options()
    };
    let (handle, join) = StoreHandle::spawn(&path, opts).unwrap();
    freeze(&handle);
    handle.insert(batch(50, 0, 10)).unwrap();
    handle.flush().unwrap_err();
    // With no flush interval, the first insert may have been attempted on its own before the
    // explicit flush arrived: count from here.
    let failed = handle.health().failing.unwrap().attempts;
    for k in 1..10 {
        handle.insert(batch(50, k * 10, 10)).unwrap();
    }
    // A query is answered after the inserts before it.
    handle.query(|_| ()).unwrap();
    let health = handle.health();
    assert_eq!(
        health.failing.as_ref().unwrap().attempts,
        failed,
        "no attempt per batch: {health:?}"
    );
    assert!(health.dropped_samples > 0, "{health:?}");
    unfreeze(&handle);
    let stats = handle.flush().unwrap();
    let health = handle.health();
    assert_eq!(stats.samples as u64 + health.dropped_samples, 5000);
    handle.close().unwrap();
    join.join().unwrap().unwrap();
}
