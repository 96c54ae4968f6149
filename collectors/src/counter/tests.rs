use super::*;

const S: i64 = 1000;

#[test]
fn counts_within_the_power_and_survives_a_reset() {
    let mut t = EnergyTracker::new(None, 1.0);
    assert_eq!(t.update(0, 500.0, Some(50.0)), EnergyStep::First);
    // 50 W for 72 s is 1 Wh.
    assert_eq!(
        t.update(72 * S, 501.0, Some(50.0)),
        EnergyStep::Counted(1.0)
    );
    // Reset (0x42 or power loss): back at zero, and it has counted 1 Wh since.
    assert_eq!(t.update(144 * S, 1.0, Some(50.0)), EnergyStep::Reset(1.0));
    assert_eq!(t.total_wh(), 2.0);
}

#[test]
fn a_wrap_counts_across_the_top() {
    let mut t = EnergyTracker::new(Some(10_000_000.0), 1.0);
    t.update(0, 9_999_999.0, Some(100.0));
    // 100 W for 36 s is 1 Wh, plus the resolution.
    assert_eq!(t.update(36 * S, 0.0, Some(100.0)), EnergyStep::Wrapped(1.0));
}

/// Regression: a PZEM counter that stepped back by 10 Wh was taken as a reset and the
/// whole raw counter added (energy_total 0.3 -> 99,990 Wh).
#[test]
fn a_step_back_is_not_a_reset() {
    let mut t = EnergyTracker::new(Some(10_000_000.0), 1.0);
    t.update(0, 100_000.0, Some(50.0));
    assert!(matches!(
        t.update(S, 99_990.0, Some(50.0)),
        EnergyStep::Rejected(r) if r.reason == Reason::EnergyCounter
    ));
    assert_eq!(t.total_wh(), 0.0);
    // Followed from its new value.
    assert_eq!(
        t.update(73 * S, 99_991.0, Some(50.0)),
        EnergyStep::Counted(1.0)
    );
    assert_eq!(t.total_wh(), 1.0);
}

/// Regression: a counter reading 4,000,000 Wh three times became the new baseline with
/// its jump counted.
#[test]
fn a_jump_adds_nothing_however_often_it_repeats() {
    let mut t = EnergyTracker::new(Some(10_000_000.0), 1.0);
    t.update(0, 0.3, Some(50.0));
    for k in 1..=3 {
        let step = t.update(k * S, 4_000_000.0, Some(50.0));
        assert!(t.total_wh() <= 50.0 * 3.0 / 3600.0 * 1.5 + 3.0, "{step:?}");
    }
    // And back to the real counter: a small value, so a reset bounded by the power.
    t.update(4 * S, 0.4, Some(50.0));
    assert!(t.total_wh() < 2.0, "{}", t.total_wh());
}

#[test]
fn no_sequence_adds_more_than_the_plausible_power_allows() {
    let mut t = EnergyTracker::new(Some(10_000_000.0), 1.0);
    let mut rng = 12_345_u64;
    let mut next = || {
        rng = rng
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (rng >> 33) as f64 / f64::from(u32::MAX >> 1)
    };
    let n = 10_000;
    for k in 0..n {
        let raw = next() * 10_000_000.0;
        let p = next() * 20_000.0;
        t.update(k * S, raw, Some(p));
    }
    let bound = MAX_POWER_W * (n - 1) as f64 / 3600.0 + n as f64;
    assert!(t.total_wh() <= bound, "{} > {bound}", t.total_wh());
}

#[test]
fn negative_and_non_finite_counters_are_rejected_without_moving_the_baseline() {
    let mut t = EnergyTracker::new(None, 1.0);
    t.update(0, 10.0, Some(50.0));
    assert!(matches!(t.update(S, -1.0, None), EnergyStep::Rejected(_)));
    assert!(matches!(
        t.update(S, f64::NAN, None),
        EnergyStep::Rejected(_)
    ));
    assert_eq!(t.update(72 * S, 11.0, Some(50.0)), EnergyStep::Counted(1.0));
}

#[test]
fn counter_knows_first_diff_wrap_and_reset() {
    let mut c = WrappingCounter::new(1000);
    assert_eq!(c.update(900), CounterStep::First);
    assert_eq!(c.update(950), CounterStep::Diff(50));
    assert_eq!(c.update(30), CounterStep::Wrapped(80));
    assert_eq!(CounterStep::Wrapped(80).delta(), Some(80));
    let mut unknown = WrappingCounter::new(0);
    unknown.update(10);
    assert_eq!(unknown.update(5), CounterStep::Reset);
    assert_eq!(CounterStep::Reset.delta(), None);
}

#[test]
fn an_integer_counter_at_the_top_of_its_range_wraps_without_overflow() {
    let mut c = WrappingCounter::new(u64::MAX);
    c.update(u64::MAX);
    assert_eq!(c.update(u64::MAX - 1), CounterStep::Wrapped(u64::MAX - 1));
}

/// A decrease from a reading above the counter's documented range is no wrap: the range is
/// not what the device counts in, so it is a reset bounded by the power, or rejected.
#[test]
fn a_decrease_from_above_the_range_is_not_a_wrap() {
    assert_eq!(movement(1_005.0, 10.0, Some(1_000.0)), Movement::Down);
    assert_eq!(
        movement(1_000.0, 10.0, Some(1_000.0)),
        Movement::Wrapped(10.0)
    );
    assert_eq!(movement(5_u64, 3, None), Movement::Down);
    assert_eq!(movement(3_u64, 5, None), Movement::Up(2));
}

/// A run's total read back from the store: increases count, a drop is a new run that has
/// counted its value since it started, and the first value counts whole.
#[test]
fn a_run_total_counts_its_increases_and_restarts_from_zero() {
    let values = [2.0, 5.0, 5.0, 1.0, 4.0];
    let mut previous = None;
    let mut sum = 0.0;
    for v in values {
        sum += run_increase(previous, v);
        previous = Some(v);
    }
    // 2, +3, +0, a new run at 1, +3.
    assert_eq!(sum, 9.0);
}

#[test]
fn a_microjoule_step_over_the_time_between_polls_is_watts() {
    use std::time::Duration;
    let mut last = None;
    assert_eq!(since_last_poll(&mut last, Duration::from_secs(10)), None);
    let elapsed = since_last_poll(&mut last, Duration::from_millis(10_500));
    assert_eq!(elapsed, Some(Duration::from_millis(500)));
    // 12.5 J in 0.5 s.
    assert_eq!(
        microjoule_watts(CounterStep::Diff(12_500_000), elapsed),
        Some(25.0)
    );
    assert_eq!(
        microjoule_watts(CounterStep::Wrapped(500_000), elapsed),
        Some(1.0)
    );
    assert_eq!(microjoule_watts(CounterStep::First, elapsed), None);
    assert_eq!(microjoule_watts(CounterStep::Reset, elapsed), None);
    assert_eq!(
        microjoule_watts(CounterStep::Diff(1), Some(Duration::ZERO)),
        None
    );
    // A clock read earlier than the last poll gives no interval.
    assert_eq!(since_last_poll(&mut last, Duration::from_secs(9)), None);
}
