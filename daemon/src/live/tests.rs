use super::*;

fn power(live: &LiveState, ts: i64, w: f64) {
    // Sample times are UTC ms: never near 0.
    let ts = 1_700_000_000_000 + ts;
    let _ = live.observe(&[Sample::new(
        ts,
        SourceId::meter("plug"),
        Metric::Power,
        "",
        w,
    )]);
}

/// A plug that reports on change: ten 1000 W reports in 10 s, then 50 W 50 s later. By
/// count the interval's mean is 914 W; each reading standing for the time since the one
/// before, it is what the plug drew.
#[test]
fn means_are_weighed_by_time_not_by_how_often_a_source_reports() {
    let live = LiveState::default();
    power(&live, 0, 50.0);
    assert_eq!(live.take_means()[0].value, 50.0, "a lone first reading");
    for i in 1..=10 {
        power(&live, i * 1000, 1000.0);
    }
    power(&live, 60_000, 50.0);
    let mean = live.take_means()[0].value;
    let truth = (10.0 * 1000.0 + 50.0 * 50.0) / 60.0;
    assert!(
        (mean - truth).abs() < truth * 0.01,
        "{mean} W, truth {truth} W"
    );
    // The next interval starts where this one ended: a reading 5 s on stands for 5 s.
    power(&live, 65_000, 200.0);
    power(&live, 70_000, 100.0);
    assert_eq!(live.take_means()[0].value, 150.0);
}

/// The same plug declared `hold`: each reading stands until the next (at most max_hold),
/// so the 1000 W reported at 10 s stands until the 50 W report at 60 s; a held reading goes
/// on standing into the next interval without a new report, and not past max_hold.
#[test]
fn held_readings_stand_until_the_next_in_the_means() {
    let live = LiveState::default();
    live.hold_readings_of([(SourceId::meter("plug"), 30_000)]);
    power(&live, 0, 50.0);
    let _ = live.take_means();
    for i in 1..=10 {
        power(&live, i * 1000, 1000.0);
    }
    power(&live, 45_000, 50.0);
    // 50 W for 1 s, 1000 W from 1 s to 40 s (max_hold after the report at 10 s), then
    // nothing until the 50 W report.
    let mean = live.take_means()[0].value;
    let truth = (50.0 + 1000.0 * 39.0) / 40.0;
    assert!((mean - truth).abs() < 1e-9, "{mean} W, truth {truth} W");
    // Another source's samples end the next interval: the held 50 W stood through it.
    let _ = live.observe(&[Sample::new(
        1_700_000_000_000 + 55_000,
        SourceId::Rapl,
        Metric::Power,
        "",
        7.0,
    )]);
    let means = live.take_means();
    let plug = means
        .iter()
        .find(|r| r.source == SourceId::meter("plug"))
        .unwrap();
    assert_eq!((plug.value, plug.ts_ms), (50.0, 1_700_000_045_000));
    assert_eq!(live.held(), [(SourceId::meter("plug"), 30_000)]);
}

#[test]
fn means_cover_the_interval_not_the_last_sample() {
    let live = LiveState::default();
    // The first reading only starts the clock: each later one stands for the time
    // since the one before.
    for ts in [1, 2] {
        let _ = live.observe(&[Sample::new(
            ts,
            SourceId::meter("wall"),
            Metric::Power,
            "",
            10.0,
        )]);
    }
    let _ = live.observe(&[Sample::new(
        3,
        SourceId::meter("wall"),
        Metric::Power,
        "",
        30.0,
    )]);
    let _ = live.observe(&[Sample::new(
        2,
        SourceId::Cpu,
        Metric::CoreFrequency,
        channel::cpu(0),
        3000.0,
    )]);
    let means = live.take_means();
    assert_eq!(means.len(), 1);
    assert_eq!(means[0].value, 20.0);
    assert_eq!(live.latest()[0].value, 30.0);
    assert!(live.take_means().is_empty());
    assert!(
        live.per_core().is_empty(),
        "per-core detail only when asked"
    );
    live.keep_per_core();
    let _ = live.observe(&[
        Sample::new(
            3,
            SourceId::Cpu,
            Metric::CoreFrequency,
            channel::cpu(0),
            3100.0,
        ),
        Sample::new(
            3,
            SourceId::Cpu,
            Metric::IdleResidency,
            channel::cpu_part(0, "C6"),
            0.5,
        ),
    ]);
    let cores = live.per_core();
    assert_eq!(cores.len(), 1);
    assert_eq!(
        (cores[0].channel.as_str(), cores[0].value),
        ("cpu0", 3100.0)
    );
    assert_eq!(live.latest().len(), 1, "not in the published series");
}

/// Whether [`LiveState::publish_due`] completes at once.
fn due(live: &LiveState) -> bool {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
        .block_on(async {
            tokio::time::timeout(Duration::from_millis(1), live.publish_due())
                .await
                .is_ok()
        })
}

#[test]
fn publishing_is_due_once_per_interval_of_sample_time() {
    let live = LiveState::default();
    live.publish_every(Duration::from_secs(10));
    let pass = |ts: i64| {
        [Sample::new(
            ts,
            SourceId::meter("wall"),
            Metric::Power,
            "",
            1.0,
        )]
    };
    let asked = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let counted = asked.clone();
    live.before_publish(move || {
        counted.fetch_add(1, Ordering::Relaxed);
    });
    let observe = |ts: i64| {
        if live.observe(&pass(ts)) {
            live.publish_now();
        }
    };
    observe(1_000_003_000);
    assert!(!due(&live), "the first samples start the first interval");
    observe(1_000_009_000);
    assert!(!due(&live));
    observe(1_000_010_000);
    assert_eq!(live.publishes(), 1, "a new interval began at ...010 000");
    assert_eq!(asked.load(Ordering::Relaxed), 1, "fresh figures asked for");
    assert!(
        !due(&live),
        "the figures' arrival wakes the publisher, not the sampler"
    );
    // They do not come: the next pass a second later says so, once.
    observe(1_000_011_000);
    assert!(
        due(&live),
        "late figures: the publish goes out without them"
    );
    observe(1_000_012_000);
    assert!(!due(&live), "once per interval");
    observe(1_000_035_000);
    assert_eq!(live.publishes(), 2, "after a gap, the next pass begins one");
    // This time they come in time: nothing more from the sampler.
    live.figures_answer(2);
    observe(1_000_036_000);
    assert!(!due(&live), "answered figures are not late");
    assert_eq!(
        asked.load(Ordering::Relaxed),
        2,
        "fresh figures asked for each"
    );
}

#[test]
fn without_figures_to_wait_for_a_publish_is_due_at_once() {
    let live = LiveState::default();
    live.publish_every(Duration::from_secs(10));
    for ts in [1_000_003_000, 1_000_010_000] {
        let pass = [Sample::new(
            ts,
            SourceId::meter("wall"),
            Metric::Power,
            "",
            1.0,
        )];
        if live.observe(&pass) {
            live.publish_now();
        }
    }
    assert!(due(&live));
}
