use super::*;

/// A week idle at 40 W from 01:00 to 07:00 and busy at 100 W otherwise, sshd waking the
/// CPUs twice a second all night; `sunday_3am` changes Sunday's 03:00.
fn week(sunday_3am: impl Fn(&mut HourOfWeek)) -> Vec<HourOfWeek> {
    (0..WEEK_HOURS)
        .map(|h| {
            let night = (1..7).contains(&(h % 24));
            let mut x = HourOfWeek {
                watts: Some(if night { 40.0 } else { 100.0 }),
                cpu_busy: Some(if night { 0.01 } else { 0.3 }),
                wakeups: vec![
                    ("service:sshd.service".into(), 2.0),
                    ("(other)".into(), 50.0),
                ],
                disk_spinups: Vec::new(),
            };
            if h == 6 * 24 + 3 {
                sunday_3am(&mut x);
            }
            x
        })
        .collect()
}

#[test]
fn idle_nights_propose_their_window_and_name_the_sunday_service() {
    let hours = week(|x| {
        x.watts = Some(70.0);
        x.cpu_busy = Some(0.2);
        x.wakeups.push(("service:backup.service".into(), 200.0));
    });
    let p = plan(&hours, &Thresholds::default()).unwrap();
    assert_eq!(p.windows, [Window { start: 1, hours: 6 }]);
    assert_eq!(p.windows_text(), "01:00-07:00 every night");
    assert_eq!(p.hours_a_week(), 42);
    assert_eq!(p.floor_watts, 40.0);
    // Sunday 03:00 is slept at the idle power of 03:00 on the other days: the backup runs
    // anyway, at another time.
    assert_eq!(p.idle_watts[6 * 24 + 3], Some(40.0));
    assert_eq!(p.idle_watts_mean(), Some(40.0));
    assert_eq!(p.idle_watts[12], None);
    assert_eq!((p.nights, p.nights_interrupted), (7, 1));
    assert_eq!(p.interrupted.len(), 1, "{:?}", p.interrupted);
    assert_eq!(
        p.interrupted[0].text(),
        "backup.service at 03:00 on Sundays (200 wake-ups/s)"
    );
    assert_eq!(p.unmeasured_hours, 0);
}

#[test]
fn a_disk_spun_up_or_an_unnamed_load_interrupts_too_and_thresholds_move_the_window() {
    let hours = week(|x| {
        x.disk_spinups
            .push(("sda".into(), "service:scrub.service".into()));
    });
    let p = plan(&hours, &Thresholds::default()).unwrap();
    assert_eq!(
        p.interrupted[0].text(),
        "sda spun up by scrub.service at 03:00 on Sundays"
    );
    let hours = week(|x| x.cpu_busy = Some(0.5));
    let p = plan(&hours, &Thresholds::default()).unwrap();
    assert_eq!(
        p.interrupted[0].text(),
        "CPU 50 % busy (no service named) at 03:00 on Sundays"
    );
    // Asked for every night idle, 03:00 is out and two windows remain.
    let strict = Thresholds {
        min_idle_days_percent: 100.0,
        ..Thresholds::default()
    };
    let p = plan(&hours, &strict).unwrap();
    assert_eq!(
        p.windows,
        [Window { start: 1, hours: 2 }, Window { start: 4, hours: 3 }]
    );
    assert!(p.interrupted.is_empty());
    // sshd's 2/s is under the threshold; at 1/s it keeps every hour awake.
    let touchy = Thresholds {
        max_service_wakeups_per_s: 1.0,
        ..Thresholds::default()
    };
    let e = plan(&hours, &touchy).unwrap_err();
    assert!(matches!(e, NoPlan::NeverIdle(_)), "{e}");
    assert!(e.to_string().contains("idle on 0 %"), "{e}");
}

#[test]
fn a_window_over_midnight_is_one_window_and_too_little_history_says_so() {
    let hours: Vec<HourOfWeek> = (0..WEEK_HOURS)
        .map(|h| {
            let night = h % 24 >= 23 || h % 24 < 5;
            HourOfWeek {
                watts: Some(if night { 30.0 } else { 90.0 }),
                cpu_busy: Some(if night { 0.0 } else { 0.4 }),
                ..HourOfWeek::default()
            }
        })
        .collect();
    let p = plan(&hours, &Thresholds::default()).unwrap();
    assert_eq!(
        p.windows,
        [Window {
            start: 23,
            hours: 6
        }]
    );
    assert_eq!(p.windows_text(), "23:00-05:00 every night");
    // Sunday 23:00 runs into Monday 00:00-05:00.
    assert_eq!(p.idle_watts[0], Some(30.0));
    assert_eq!(p.hours_a_week(), 42);

    let mut short = hours.clone();
    for h in short.iter_mut().filter(|_| true).skip(10).take(WEEK_HOURS) {
        h.watts = None;
    }
    let e = plan(&short, &Thresholds::default()).unwrap_err();
    assert!(matches!(e, NoPlan::TooLittleHistory(_)), "{e}");
    assert!(
        e.to_string()
            .contains("14 of the day's 24 hours (first 10:00)"),
        "{e}"
    );
}
