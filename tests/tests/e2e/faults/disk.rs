//! A full disk.

use std::io::Write;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use super::{Daemon, integrity, missing_ticks, raw_values, write_config};
use wattson_collectors::Metric;

#[test]
fn a_full_disk_is_logged_and_survived_without_corruption() {
    full_disk(14, 1);
}

#[test]
#[ignore = "soak: 5 minutes, the disk filled and freed 10 times"]
fn soak_full_disk_filled_and_freed_again_and_again() {
    full_disk(300, 10);
}

/// Runs the daemon for `seconds` with its database on an 8 MB tmpfs, which is filled and
/// freed `cycles` times; each time the error must be logged (or absorbed) and storing must
/// resume, and in the end no 1 s CPU tick may be missing: failed flushes are retried.
fn full_disk(seconds: u64, cycles: u32) {
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("small");
    std::fs::create_dir(&mnt).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=8m,mode=0755", "tmpfs"])
        .arg(&mnt)
        .output();
    let why = match mounted {
        Ok(o) if o.status.success() => None,
        Ok(o) => Some(format!(
            "mount -t tmpfs failed: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => Some(format!("cannot run mount: {e}")),
    };
    if let Some(why) = why {
        // CI runs as root: there the small file system must be there.
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true and {why}"
        );
        println!("SKIPPED disk full: {why}");
        return;
    }
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(mnt.clone());

    let db = mnt.join("wattson.db");
    let config = write_config(dir.path(), &db, "");
    let mut daemon = Daemon::start(&config, &format!("{seconds}s"));
    assert!(daemon.wait_for("collecting:", Duration::from_secs(10)));
    let started = Instant::now();
    let until = Instant::now() + Duration::from_secs(5);
    while raw_values(&db, "cpu", Metric::CpuBusy, "all").is_empty() {
        assert!(Instant::now() < until, "no samples flushed");
        std::thread::sleep(Duration::from_millis(50));
    }
    let before = raw_values(&db, "cpu", Metric::CpuBusy, "all").len();
    let (mut saw_error, mut alive_while_full, mut resumed) = (true, true, 0);
    let (mut logged, mut absorbed) = (0, 0);
    for cycle in 0..cycles {
        // Fill the rest of the file system.
        let filler_path = mnt.join("filler");
        let mut filler = std::fs::File::create(&filler_path).unwrap();
        let block = vec![0u8; 4096];
        while filler.write_all(&block).is_ok() {}
        let _ = filler.sync_all();
        // Either a flush fails and says so, or SQLite still had room in the pages it
        // already holds (a write-ahead log reused after a checkpoint) and storing goes on.
        let stored_at_fill = raw_values(&db, "cpu", Metric::CpuBusy, "all").len();
        if daemon.wait_for("flush failed", Duration::from_secs(8)) {
            logged += 1;
        } else if raw_values(&db, "cpu", Metric::CpuBusy, "all").len() > stored_at_fill {
            absorbed += 1;
        } else {
            saw_error = false;
        }
        alive_while_full &= daemon.child.try_wait().unwrap().is_none();
        // Free the space again: storing must resume.
        drop(filler);
        std::fs::remove_file(&filler_path).unwrap();
        let n = raw_values(&db, "cpu", Metric::CpuBusy, "all").len();
        let until = Instant::now() + Duration::from_secs(10);
        while raw_values(&db, "cpu", Metric::CpuBusy, "all").len() <= n && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(100));
        }
        if raw_values(&db, "cpu", Metric::CpuBusy, "all").len() > n {
            resumed += 1;
        }
        // Spread the cycles over the run.
        let next = started + Duration::from_secs(seconds * u64::from(cycle + 1)) / (cycles + 1);
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
    }
    let pid = nix::unistd::Pid::from_raw(daemon.child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let (status, log) = daemon.finish(Duration::from_secs(30));
    let error_lines: Vec<&String> = log
        .iter()
        .filter(|l| l.contains("flush failed") || l.contains("ERROR"))
        .collect();
    let cpu: Vec<i64> = raw_values(&db, "cpu", Metric::CpuBusy, "all")
        .iter()
        .map(|p| p.0)
        .collect();
    let after = cpu.len();
    let missing = missing_ticks(&cpu, 1000);
    let check = integrity(&db);
    println!(
        "disk full: {cycles} fill/free cycles, storing resumed after {resumed} of them; cpu \
         samples stored before {before}, at the end {after} (run {seconds} s), {missing} \
         1 s ticks missing; error logged in {logged} fills, absorbed without loss in \
         {absorbed}, silent loss in none: {saw_error}; alive while full: \
         {alive_while_full}; exit {status}; integrity_check: {check}; first error line: {:?}",
        error_lines.first()
    );
    // Failed flushes are kept and retried: nothing sampled is lost.
    assert_eq!(
        missing,
        0,
        "CPU samples lost to the full disk:\n{}",
        log.join("\n")
    );
    assert!(
        saw_error,
        "a fill neither logged an error nor kept storing:\n{}",
        log.join("\n")
    );
    assert!(alive_while_full, "the daemon died when the disk filled");
    assert!(status.success(), "{}", log.join("\n"));
    assert_eq!(check, "ok");
    assert!(
        after > before,
        "storing did not resume once space was freed"
    );
    assert_eq!(resumed, cycles, "storing did not resume after every cycle");
}
