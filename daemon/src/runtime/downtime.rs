//! The time since the last run, recorded at start as a gap of every source, and what the
//! host was doing in it, as the kernel tells it: asleep (the same boot, and the kernel's
//! clocks say it slept that long), off (another boot followed), or neither known (wattson
//! was not running). The meter's counter settles each gap's energy later
//! (`store::writer::counted`); over a gap the host was away, that is its standby or off
//! energy, measured at the wall.

use std::collections::BTreeMap;

use wattson_collectors::SourceId;
use wattson_collectors::kernel_clock::BootClock;

use crate::ledger::interval::hours_text;
use crate::store::{Away, KernelClockRow, StoreHandle};

/// The share of a gap the host must have been away for the gap to be its time away: the
/// rest (stopping, waking, booting, starting wattson) is spent at the awake draw, so the
/// gap's energy over its length is the standby (or off) watts within a tenth of the gap
/// at the awake draw.
const AWAY_SHARE: f64 = 0.9;

/// What the host did over a gap `[start_ms, end_ms]` since the last run: where it was away
/// (if it was, for at least [`AWAY_SHARE`] of it), and the gap's reason in words. `then` is
/// the kernel's clocks as last stored, `now` as they read at `end_ms`.
pub fn classify(
    (start_ms, end_ms): (i64, i64),
    then: Option<&KernelClockRow>,
    now: Option<&BootClock>,
) -> (Option<Away>, String) {
    let gap_ms = (end_ms - start_ms).max(1);
    let not_running = "wattson was not running".to_owned();
    let (Some(then), Some(now)) = (then, now) else {
        return (None, not_running);
    };
    if then.boot_id == now.boot_id {
        let slept = now.slept_ms - then.slept_ms;
        if slept <= 0 {
            return (None, not_running);
        }
        let words = hours_text(slept as f64 / 3_600_000.0);
        if slept as f64 >= AWAY_SHARE * gap_ms as f64 {
            return (
                Some(Away::Asleep),
                format!("the host was asleep for {words} (the kernel's clocks)"),
            );
        }
        return (
            None,
            format!("wattson was not running (the host slept {words} of it)"),
        );
    }
    // Another boot: off from (about) the last sample to the boot.
    let booted_ms = end_ms - now.since_boot_ms;
    let off = booted_ms - start_ms;
    if off > 0 && off as f64 >= AWAY_SHARE * gap_ms as f64 {
        let words = hours_text(off as f64 / 3_600_000.0);
        return (
            Some(Away::Off),
            format!("the host was off for {words} (another boot followed)"),
        );
    }
    (None, format!("{not_running} (the host restarted)"))
}

/// Records, for each source of `host` with stored samples, the time since its newest one as
/// a gap: nothing was sampled in it (and no energy is integrated across it, however short);
/// where the kernel says the host was asleep or off, the gap says so. Then stores how the
/// kernel's clocks stand now, for the next start (and the next sleep) to compare with.
pub fn record(store: &StoreHandle, host: &str, clock: Option<&BootClock>) {
    let (h, now) = (host.to_owned(), crate::runtime::sampler::now_ms());
    let stored = store.query(move |s| {
        let latest = s.latest(&h)?;
        let mut by_source: BTreeMap<SourceId, i64> = BTreeMap::new();
        for l in latest {
            let t = by_source.entry(l.series.source.clone()).or_insert(l.ts_ms);
            *t = (*t).max(l.ts_ms);
        }
        Ok::<_, crate::store::StoreError>((by_source, s.kernel_clock(&h, now)?))
    });
    let (sources, then) = match stored {
        Ok(Ok(found)) => found,
        Ok(Err(e)) => {
            tracing::warn!("reading the newest samples to record the downtime: {e}");
            return;
        }
        Err(e) => {
            tracing::warn!("reading the newest samples to record the downtime: {e}");
            return;
        }
    };
    for (source, since) in sources.into_iter().filter(|(_, t)| *t < now) {
        let (away, reason) = classify((since, now), then.as_ref(), clock);
        let recorded = match away {
            Some(away) => store.record_away(&source, (since, now), away, &reason),
            None => store.record_gap(&source, since, now, &reason),
        };
        if let Err(e) = recorded {
            tracing::warn!("recording the downtime of {source}: {e}");
        }
    }
    if let Some(c) = clock {
        record_clock(store, host, now, c);
    }
}

/// Stores how the kernel's clocks stand at `at_ms`.
pub fn record_clock(store: &StoreHandle, host: &str, at_ms: i64, clock: &BootClock) {
    let (host, row) = (
        host.to_owned(),
        KernelClockRow {
            since_ms: at_ms,
            boot_id: clock.boot_id.clone(),
            slept_ms: clock.slept_ms,
        },
    );
    match store.query(move |s| s.record_kernel_clock(&host, &row)) {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!("storing the kernel's clocks: {e}"),
        Err(e) => tracing::warn!("storing the kernel's clocks: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOOT: &str = "3f1c0e9a-7d4b-4e2f-9a51-0c6f2b8d1e77";
    const OTHER: &str = "9a51d0c6-7d4b-4e2f-3f1c-0e9a2b8d1e77";
    const HOUR: i64 = 3_600_000;

    fn then(slept_ms: i64) -> KernelClockRow {
        KernelClockRow {
            since_ms: 0,
            boot_id: BOOT.to_owned(),
            slept_ms,
        }
    }

    fn now(boot: &str, slept_ms: i64, since_boot_ms: i64) -> BootClock {
        BootClock {
            boot_id: boot.to_owned(),
            slept_ms,
            since_boot_ms,
        }
    }

    #[test]
    fn a_gap_is_asleep_only_where_the_kernel_slept_through_most_of_it() {
        let gap = (10 * HOUR, 17 * HOUR);
        // Slept 7 h of a 7 h gap.
        let (away, why) = classify(
            gap,
            Some(&then(5_000)),
            Some(&now(BOOT, 5_000 + 7 * HOUR, 0)),
        );
        assert_eq!(away, Some(Away::Asleep));
        assert_eq!(why, "the host was asleep for 7 h (the kernel's clocks)");
        // Slept 1 h of it: wattson was stopped the rest, at a draw not known.
        let (away, why) = classify(gap, Some(&then(0)), Some(&now(BOOT, HOUR, 0)));
        assert_eq!(away, None);
        assert!(why.contains("slept 1 h of it"), "{why}");
        // No sleep, or nothing stored to compare with.
        assert_eq!(
            classify(gap, Some(&then(9)), Some(&now(BOOT, 9, 0))).0,
            None
        );
        assert_eq!(classify(gap, None, Some(&now(BOOT, 9, 0))).0, None);
        assert_eq!(classify(gap, Some(&then(9)), None).0, None);
    }

    #[test]
    fn a_gap_is_off_where_another_boot_came_at_its_end() {
        let gap = (10 * HOUR, 17 * HOUR);
        // Booted 2 min before the start: off for 6 h 58 min of 7 h.
        let (away, why) = classify(gap, Some(&then(0)), Some(&now(OTHER, 0, 120_000)));
        assert_eq!(away, Some(Away::Off));
        assert!(why.starts_with("the host was off for 6 h 58 min"), "{why}");
        // Booted 5 h ago: a restart, and wattson not running for hours of the new boot.
        let (away, why) = classify(gap, Some(&then(0)), Some(&now(OTHER, 0, 5 * HOUR)));
        assert_eq!(away, None);
        assert!(why.contains("restarted"), "{why}");
    }
}
