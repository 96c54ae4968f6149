use super::*;
use crate::publish::mqtt::state::MAX_STATE_BYTES;
use crate::sources::fleet::{Committed, MAX_HOST_NAME, MemorySink};

/// A state of one CPU series stamped now (the collector refuses times far from their
/// receipt).
fn now_state() -> String {
    format!(
        r#"{{"ts":{},"series":[["cpu","cpu_busy","all",0.5]]}}"#,
        crate::runtime::sampler::now_ms()
    )
}

/// A valid payload stamped now (the collector refuses times far from their receipt).
fn valid() -> String {
    format!(
        r#"{{"ts":{},"interval_s":1,"power_w":61.5,"series":[["meter:wall","power","",61.5],["cpu","cpu_busy","all",0.25],["cpu","core_frequency","cpu0",2200.0]]}}"#,
        crate::runtime::sampler::now_ms()
    )
}

/// Handles one payload and checks what reached the sink: finite values, one `ts`,
/// every message counted once.
fn check(payload: &[u8]) {
    let mut sink = MemorySink::default();
    let stats = FleetStats::default();
    let mut intake = Intake::new("w", 10, Vec::new());
    intake.handle("w/h/state", payload, &mut sink, &stats);
    let stored = stats.stored.load(Ordering::Relaxed);
    let malformed = stats.malformed.load(Ordering::Relaxed);
    let rejected = stats.rejected.load(Ordering::Relaxed);
    let empty = stats.empty.load(Ordering::Relaxed);
    assert_eq!(stored + malformed + rejected + empty, 1);
    if let Some(samples) = sink.by_host.get("h") {
        let ts = samples.first().map(|s| s.ts_ms);
        for s in samples {
            assert!(
                s.value.is_finite() && Some(s.ts_ms) == ts && s.ts_ms > 0,
                "{s:?}"
            );
        }
    }
}

proptest::proptest! {
    // 2,000 cases; rerun with more: PROPTEST_CASES=20000 cargo test -p wattson --lib fleet::intake::tests::fuzz
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(2000)
    ))]

    /// The fleet payload parser on arbitrary bytes: never panics, counts it once.
    #[test]
    fn fuzz_arbitrary_state_payloads_never_panic(
        bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..600)
    ) {
        check(&bytes);
    }

    /// A valid payload with a range replaced by arbitrary text (numbers, brackets,
    /// quotes, huge exponents): never panics, counts it once.
    #[test]
    fn fuzz_mutated_state_payloads_never_panic(
        at in 0usize..120,
        len in 0usize..20,
        insert in "[-0-9eE.,\\[\\]\"{}:a-z ]{0,24}|1e400|-1e400|NaN|9223372036854775808",
    ) {
        let mut text = valid();
        let at = at.min(text.len());
        let end = (at + len).min(text.len());
        text.replace_range(at..end, &insert);
        check(text.as_bytes());
    }
}

#[test]
fn topics_name_their_host() {
    assert_eq!(host_of("wattson", "wattson/basket/state"), Some("basket"));
    assert_eq!(host_of("wattson", "wattson/basket/availability"), None);
    assert_eq!(host_of("wattson", "wattson//state"), None);
    assert_eq!(host_of("wattson", "other/basket/state"), None);
}

#[test]
fn duplicates_and_garbage_are_counted_not_stored() {
    let mut sink = MemorySink::default();
    let stats = FleetStats::default();
    let mut intake = Intake::new("w", 10, Vec::new());
    let msg = format!(
        r#"{{"ts":{},"series":[["cpu","cpu_busy","all",0.5]]}}"#,
        crate::runtime::sampler::now_ms()
    );
    let msg = msg.as_bytes();
    for _ in 0..3 {
        intake.handle("w/h1/state", msg, &mut sink, &stats);
    }
    intake.handle("w/h2/state", msg, &mut sink, &stats);
    intake.handle("w/h1/state", b"{oops", &mut sink, &stats);
    assert_eq!(sink.by_host["h1"].len(), 1);
    assert_eq!(sink.by_host["h2"].len(), 1);
    assert_eq!(stats.duplicates.load(Ordering::Relaxed), 2);
    assert_eq!(stats.malformed.load(Ordering::Relaxed), 1);
    assert_eq!(stats.stored.load(Ordering::Relaxed), 2);
}

/// Regression: states with -1e12 W or 1e300 W were stored (status then showed GBP
/// 1,152,909,004), and one state in the year 9999 shut out every later state of its host.
#[test]
fn implausible_states_are_counted_and_do_not_shut_out_later_ones() {
    let mut sink = MemorySink::default();
    let stats = FleetStats::default();
    let mut intake = Intake::new("w", 10, Vec::new());
    let now = crate::runtime::sampler::now_ms();
    let msg =
        |ts: i64, w: f64| format!(r#"{{"ts":{ts},"series":[["meter:wall","power","",{w}]]}}"#);
    for (ts, w) in [
        (now - 2000, -1e12),
        (now - 1000, 1e300),
        (253_402_300_799_000, 50.0),
        (now, 50.0),
    ] {
        intake.handle("w/h/state", msg(ts, w).as_bytes(), &mut sink, &stats);
    }
    let power: Vec<&Sample> = sink.by_host["h"]
        .iter()
        .filter(|s| s.metric == Metric::Power)
        .collect();
    assert_eq!(power.len(), 1);
    assert_eq!((power[0].ts_ms, power[0].value), (now, 50.0));
    assert_eq!(stats.rejected.load(Ordering::Relaxed), 1);
    assert_eq!(stats.rejected_samples.load(Ordering::Relaxed), 2);
    let counted: Vec<(String, f64)> = sink.by_host["h"]
        .iter()
        .filter(|s| s.metric == Metric::Rejected)
        .map(|s| (s.channel.clone(), s.value))
        .collect();
    assert!(counted.contains(&("power".to_owned(), 2.0)), "{counted:?}");
    assert!(
        counted.contains(&("timestamp".to_owned(), 1.0)),
        "{counted:?}"
    );
}

/// A sink whose commits fail while `full` is set.
#[derive(Default)]
struct FullDisk {
    full: bool,
    stored: MemorySink,
}

impl FleetSink for FullDisk {
    fn store(&mut self, host: &str, batch: Vec<Sample>) -> Result<Committed, SinkError> {
        if self.full {
            return Err(SinkError("database or disk is full".to_owned()));
        }
        self.stored.store(host, batch)
    }
}

#[test]
fn a_failed_commit_is_not_counted_and_the_redelivery_is_stored() {
    let mut sink = FullDisk {
        full: true,
        ..FullDisk::default()
    };
    let stats = FleetStats::default();
    let mut intake = Intake::new("w", 10, Vec::new());
    let msg = now_state();
    let msg = msg.as_bytes();
    assert!(matches!(
        intake.handle("w/h/state", msg, &mut sink, &stats),
        Outcome::NotStored(_)
    ));
    assert_eq!(stats.stored.load(Ordering::Relaxed), 0);
    assert_eq!(stats.not_stored.load(Ordering::Relaxed), 1);
    sink.full = false;
    // The redelivery is not taken for a duplicate.
    assert_eq!(
        intake.handle("w/h/state", msg, &mut sink, &stats),
        Outcome::Stored
    );
    assert_eq!(sink.stored.by_host["h"].len(), 1);
    assert_eq!(
        intake.handle("w/h/state", msg, &mut sink, &stats),
        Outcome::Duplicate
    );
}

#[test]
fn hosts_beyond_the_limit_are_refused_known_ones_first() {
    let mut sink = MemorySink::default();
    let stats = FleetStats::default();
    let mut intake = Intake::new("w", 2, vec!["old".to_owned()]);
    let msg = now_state();
    let msg = msg.as_bytes();
    for host in ["a", "b", "c", "old"] {
        intake.handle(&format!("w/{host}/state"), msg, &mut sink, &stats);
    }
    assert_eq!(
        sink.by_host.keys().collect::<Vec<_>>(),
        ["a", "old"],
        "the known host and one new one"
    );
    assert_eq!(stats.refused_hosts.load(Ordering::Relaxed), 2);
    assert_eq!(intake.hosts(), 2);
    let long = format!("w/{}/state", "x".repeat(MAX_HOST_NAME + 1));
    assert_eq!(
        intake.handle(&long, msg, &mut sink, &stats),
        Outcome::Malformed
    );
}

#[test]
fn series_beyond_the_limit_are_dropped_and_counted() {
    let mut sink = MemorySink::default();
    let stats = FleetStats::default();
    let mut intake = Intake::new("w", 2, Vec::new());
    let series: Vec<String> = (0..MAX_SERIES_PER_HOST + 10)
        .map(|i| format!(r#"["s{i}","power","",1.0]"#))
        .collect();
    let msg = format!(
        r#"{{"ts":{},"series":[{}]}}"#,
        crate::runtime::sampler::now_ms(),
        series.join(",")
    );
    assert!(msg.len() <= MAX_STATE_BYTES);
    intake.handle("w/h/state", msg.as_bytes(), &mut sink, &stats);
    assert_eq!(sink.by_host["h"].len(), MAX_SERIES_PER_HOST);
    assert_eq!(stats.refused_series.load(Ordering::Relaxed), 10);
}

#[test]
fn dedupe_window_forgets_the_oldest_but_refuses_older_still() {
    let mut d = Dedupe::default();
    for ts in 0..Dedupe::WINDOW as i64 {
        assert!(d.is_new("h", ts));
        d.record("h", ts);
    }
    d.record("h", 1_000_000);
    assert!(!d.is_new("h", 0), "older than the window counts as stored");
    assert!(!d.is_new("h", 1_000_000));
    assert!(d.is_new("h", 1_000_001));
}

#[test]
fn a_state_without_samples_is_counted_empty_not_stored() {
    let mut sink = MemorySink::default();
    let stats = FleetStats::default();
    let mut intake = Intake::new("w", 10, Vec::new());
    let now = crate::runtime::sampler::now_ms();
    for (i, payload) in [
        format!(r#"{{"ts":{now}}}"#),
        format!(r#"{{"ts":{},"series":[]}}"#, now + 1),
    ]
    .iter()
    .enumerate()
    {
        assert_eq!(
            intake.handle("w/h/state", payload.as_bytes(), &mut sink, &stats),
            Outcome::Empty,
            "{payload}"
        );
        assert_eq!(stats.empty.load(Ordering::Relaxed), i as u64 + 1);
    }
    assert_eq!(stats.stored.load(Ordering::Relaxed), 0);
    assert!(sink.by_host.get("h").is_none_or(Vec::is_empty));
    for bad in ["a\nb", "tab\there", "bell\u{7}"] {
        assert_eq!(
            intake.handle(
                &format!("w/{bad}/state"),
                now_state().as_bytes(),
                &mut sink,
                &stats
            ),
            Outcome::Malformed,
            "{bad:?}"
        );
    }
}
