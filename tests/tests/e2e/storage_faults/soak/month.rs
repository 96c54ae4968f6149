//! The soak itself: its steps at moments of simulated time, each episode's stored energy
//! against the truth, and the month.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use wattson::store::{SeriesFilter, Store};
use wattson_collectors::Metric;

use super::super::SmallFs;
use super::{DAY_S, Events, HOST, Writer, days, plug_watts, wall_watts};

/// What the soak does at a moment of simulated time.
enum Step {
    Restart,
    Crash,
    /// The disk is full while this many simulated seconds are sampled.
    DiskFull(i64),
}

fn newest_stored_s(db: &Path) -> i64 {
    let store = Store::open_read_only(db).unwrap();
    store
        .latest(HOST)
        .unwrap()
        .iter()
        .filter(|l| l.series.source == "meter:wall" && l.series.metric == Metric::Power)
        .map(|l| l.ts_ms / 1000)
        .max()
        .unwrap_or(0)
}

/// Stored timestamps (s) of a power series and the energy the truth gives over the same
/// pairs of samples (the trapezoid of the true watts between stored neighbours at most 3 s
/// apart, as the store integrates), Wh.
fn truth_over_stored(db: &Path, source: &str, watts: impl Fn(i64) -> f64) -> (Vec<i64>, f64) {
    let store = Store::open_read_only(db).unwrap();
    let filter = SeriesFilter::all()
        .host(HOST)
        .source(&source.into())
        .metric(Metric::Power);
    let ts: Vec<i64> = store
        .raw(&filter, 0, i64::MAX)
        .unwrap()
        .into_iter()
        .flat_map(|(_, p)| p)
        .map(|(t, _)| t / 1000)
        .collect();
    let wh = ts
        .windows(2)
        .filter(|w| w[1] - w[0] <= 3)
        .map(|w| f64::midpoint(watts(w[0]), watts(w[1])) * (w[1] - w[0]) as f64 / 3600.0)
        .sum();
    (ts, wh)
}

impl Step {
    /// The events' restarts, crashes and disk-full episodes, in time order.
    fn of(events: &Events) -> Vec<(i64, Step)> {
        let mut steps: Vec<(i64, Step)> = events
            .restarts
            .iter()
            .map(|&t| (t, Step::Restart))
            .chain(events.crashes.iter().map(|&t| (t, Step::Crash)))
            .chain(
                events
                    .disk_full
                    .iter()
                    .map(|&(t, d)| (t, Step::DiskFull(d))),
            )
            .collect();
        steps.sort_by_key(|s| s.0);
        steps
    }
}

/// One disk-full episode from `t`, `seconds` long: SQLite first fills the space it already
/// holds (the log, free pages), so sampling goes on, five minutes at a time, until a flush
/// fails (12 h at most, before the next event); the episode starts there. Returns (minutes
/// absorbed before a flush failed, minutes failing, writable at the end, samples held,
/// samples dropped in it), and the samples dropped so far (`dropped_before` before it).
fn disk_full(
    writer: &mut Writer,
    fs: &SmallFs,
    t: i64,
    seconds: i64,
    dropped_before: u64,
) -> ((i64, i64, bool, u64, u64), u64) {
    let filler = fs.fill();
    let mut failed_at = t;
    loop {
        failed_at += 300;
        let (_, _, _, writable) = writer.run(failed_at);
        if !writable || failed_at - t >= 12 * 3600 {
            break;
        }
    }
    let (held, dropped, _, writable) = writer.run(failed_at + seconds);
    drop(filler);
    writer.send("flush");
    let w = writer.expect("flushed ");
    let mut ok = w[0] == "true";
    while !ok {
        std::thread::sleep(Duration::from_millis(100));
        writer.send("flush");
        ok = writer.expect("flushed ")[0] == "true";
    }
    (
        (
            (failed_at - t) / 60,
            seconds / 60,
            writable,
            held,
            dropped - dropped_before,
        ),
        dropped,
    )
}

/// The ledger's energy of `source` over `start..end` (seconds), Wh.
fn ledger_wh(store: &Store, source: &str, start: i64, end: i64) -> f64 {
    wattson::ledger::energy::energy(store, HOST, &source.into(), start * 1000, end * 1000)
        .unwrap()
        .wh
}

/// A crash at `t` (of a soak from `start`): an hour more is sampled and handed to the
/// writer, and the process is killed (SIGKILL) at once, with whatever is not committed yet;
/// a new writer resumes sampling at the time it died. Returns the plugged seconds lost
/// (sampled but not committed) and the killed writer's RSS maximum, KiB.
fn crash(writer: &mut Writer, db: &Path, (start, t): (i64, i64), events: &Events) -> (i64, u64) {
    let died = t + 3600;
    writer.send(&format!("crash {died}"));
    writer.expect(&format!("at {died}"));
    writer.child.kill().unwrap();
    writer.child.wait().unwrap();
    let rss = writer.rss_max_kib;
    let lost_s = (newest_stored_s(db) + 1..died)
        .filter(|&s| !events.unplugged(s))
        .count() as i64;
    *writer = Writer::start(db, start, died);
    (lost_s, rss)
}

/// The disk-full episodes (see [`disk_full`]): most failed, the short ones dropped
/// nothing, the long one failed and dropped; and, over a month, a gap for each unplugged
/// span and broker outage (`gaps` recorded).
fn check_episodes<G: std::fmt::Debug>(
    full_report: &[(i64, i64, bool, u64, u64)],
    days: i64,
    gaps: &[G],
    events: &Events,
) {
    // An episode whose writes SQLite absorbed for 12 h (in its log and free pages) lost
    // nothing and tested nothing: most must fail.
    let failed: Vec<_> = full_report.iter().filter(|r| !r.2).collect();
    assert!(
        failed.len() >= 2,
        "the full disk rarely failed: {full_report:?}"
    );
    assert!(
        full_report[..3].iter().all(|r| r.4 == 0),
        "samples dropped in an episode the memory bound holds: {full_report:?}"
    );
    // A shorter soak squeezes the events together: a crash can fall into an unplugged span
    // (and take its gap record with it), and no episode outlasts the memory bound.
    if days >= 30 {
        let long = &full_report[3];
        assert!(
            long.2 || long.4 > 0,
            "the long episode failed and dropped nothing: {full_report:?}"
        );
        assert_eq!(
            gaps.len(),
            events.unplugged.len() + events.broker_down.len(),
            "{gaps:?}"
        );
    }
}

#[test]
#[ignore = "soak: a month of 1 Hz samples in compressed time (about 25 s)"]
fn soak_a_month_of_1hz_samples_with_unplugs_outages_restarts_and_full_disks() {
    let Some(fs) = SmallFs::mount("64m") else {
        return;
    };
    let db: PathBuf = fs.path.join("wattson.db");
    let days = days();
    let now_s = wattson_tests::now_ms() / 1000;
    let start = (now_s - (days + 1) * DAY_S).div_euclid(DAY_S) * DAY_S;
    let end = start + days * DAY_S;
    let events = Events::new(start, days);
    let began = Instant::now();

    let steps = Step::of(&events);

    let mut writer = Writer::start(&db, start, start);
    let mut rss_max = Vec::new();
    let mut crash_lost_s = 0;
    let mut full_report = Vec::new();
    let mut dropped_total = 0;
    let mut dropped_batches_total = 0;
    for (t, step) in steps {
        let (_, _, dropped_batches, writable) = writer.run(t);
        assert!(
            writable,
            "the store failed outside a disk-full episode at {t}"
        );
        dropped_batches_total += dropped_batches;
        match step {
            Step::Restart => {
                let (result, rss) = writer.stop();
                assert!(result.starts_with("Ok"), "{result}");
                rss_max.push(rss);
                writer = Writer::start(&db, start, t);
            }
            Step::Crash => {
                let (lost_s, rss) = crash(&mut writer, &db, (start, t), &events);
                crash_lost_s += lost_s;
                rss_max.push(rss);
            }
            Step::DiskFull(seconds) => {
                let (report, dropped) = disk_full(&mut writer, &fs, t, seconds, dropped_total);
                full_report.push(report);
                dropped_total = dropped;
            }
        }
    }
    writer.run(end);
    let (result, rss) = writer.stop();
    rss_max.push(rss);
    assert!(result.starts_with("Ok"), "{result}");

    // What the month should hold, and what it holds.
    let total_s = end - start;
    let unplugged_s: i64 = events.unplugged.iter().map(|(a, b)| b - a).sum();
    let broker_s: i64 = events.broker_down.iter().map(|(a, b)| b - a).sum();
    let (wall_ts, wall_truth_stored) = truth_over_stored(&db, "meter:wall", wall_watts);
    let (plug_ts, plug_truth_stored) = truth_over_stored(&db, "meter:plug", plug_watts);
    let store = Store::open_read_only(&db).unwrap();
    let wall_wh = ledger_wh(&store, "meter:wall", start, end);
    let plug_wh = ledger_wh(&store, "meter:plug", start, end);
    let wall_truth_all: f64 = (start..end).map(|t| wall_watts(t) / 3600.0).sum();
    let gaps = store.gaps(HOST, start * 1000, end * 1000).unwrap();
    let integrity = store.integrity_check().unwrap();
    let db_bytes = std::fs::metadata(&db).unwrap().len();
    let wal_bytes = std::fs::metadata(fs.path.join("wattson.db-wal")).map_or(0, |m| m.len());
    // Seconds missing from the wall series beyond the unplugged ones: crash windows and
    // the samples the memory bound dropped (four series share the count).
    let wall_missing = total_s - unplugged_s - wall_ts.len() as i64;
    let dropped_s = (dropped_total / 4) as i64;
    let wall_err = (wall_wh - wall_truth_stored) / wall_truth_stored * 100.0;
    let plug_err = (plug_wh - plug_truth_stored) / plug_truth_stored * 100.0;
    println!(
        "month soak: {days} days of 1 Hz samples in {:.0} s; {} restarts, {} crashes \
         ({crash_lost_s} s of samples lost with them), disk full (minutes absorbed before a \
         flush failed, minutes failing, writable at the end, samples held, dropped): \
         {full_report:?}; {} batches dropped by a full queue; meter unplugged \
         {unplugged_s} s in {} spans, broker down {broker_s} s in {} spans, {} gaps recorded",
        began.elapsed().as_secs_f64(),
        events.restarts.len(),
        events.crashes.len(),
        dropped_batches_total,
        events.unplugged.len(),
        events.broker_down.len(),
        gaps.len()
    );
    println!(
        "month soak: wall {} samples stored of {} plugged seconds ({wall_missing} missing: \
         crashes {crash_lost_s} s, memory bound {dropped_s} s); stored energy {wall_wh:.1} Wh, \
         truth over the stored samples {wall_truth_stored:.1} Wh ({wall_err:+.3} %), truth \
         of the whole month {wall_truth_all:.1} Wh (the rest fell in the unplugged spans and \
         the losses above); plug {} samples, {plug_wh:.1} Wh vs {plug_truth_stored:.1} Wh \
         ({plug_err:+.3} %)",
        wall_ts.len(),
        total_s - unplugged_s,
        plug_ts.len()
    );
    println!(
        "month soak: database {:.2} MB + log {:.2} MB on a 64 MB tmpfs; writer RSS max per \
         run {rss_max:?} KiB; integrity {integrity}",
        db_bytes as f64 / 1e6,
        wal_bytes as f64 / 1e6
    );
    assert_eq!(integrity, "ok");
    assert!(
        wall_err.abs() < 0.5 && plug_err.abs() < 0.5,
        "{wall_err} {plug_err}"
    );
    assert_eq!(dropped_batches_total, 0, "batches dropped by a full queue");
    // Nothing lost beyond the crashes and the one episode longer than the memory bound.
    assert!(
        (wall_missing - crash_lost_s - dropped_s).abs() <= 10,
        "{wall_missing} s missing, {crash_lost_s} s lost to crashes, {dropped_s} s dropped"
    );
    check_episodes(&full_report, days, &gaps, &events);
}
