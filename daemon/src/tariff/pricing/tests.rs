use super::*;
use crate::zone::Zone;

fn london() -> Zone {
    Zone::named("Europe/London").expect("Europe/London loads")
}

fn hm(h: u32, m: u32) -> NaiveTime {
    NaiveTime::from_hms_opt(h, m, 0).unwrap()
}

fn utc(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

fn night_day() -> Tariff {
    let night = Period {
        start: hm(0, 30),
        end: hm(7, 30),
        price_per_kwh: 0.07,
    };
    Tariff::simple("GBP", 0.30, 0.0, vec![night], london()).unwrap()
}

#[test]
fn prices_by_local_time_across_bst() {
    let t = night_day();
    // Winter: local = UTC.
    assert_eq!(t.price_at(utc("2026-01-10T00:45:00Z")), 0.07);
    assert_eq!(t.price_at(utc("2026-01-10T07:29:59Z")), 0.07);
    assert_eq!(t.price_at(utc("2026-01-10T07:30:00Z")), 0.30);
    assert_eq!(t.price_at(utc("2026-01-10T00:29:59Z")), 0.30);
    // Summer: 06:45 UTC is 07:45 BST, already day rate; 23:45 UTC is 00:45 BST, night.
    assert_eq!(t.price_at(utc("2026-07-10T06:45:00Z")), 0.30);
    assert_eq!(t.price_at(utc("2026-07-09T23:45:00Z")), 0.07);
}

#[test]
fn a_period_that_wraps_midnight() {
    let p = Period {
        start: hm(23, 0),
        end: hm(7, 0),
        price_per_kwh: 0.10,
    };
    assert!(p.contains(hm(23, 30)) && p.contains(hm(0, 0)) && p.contains(hm(6, 59)));
    assert!(!p.contains(hm(7, 0)) && !p.contains(hm(22, 59)));
    let t = Tariff::simple("GBP", 0.20, 0.0, vec![p], crate::zone::Zone::UTC).unwrap();
    assert_eq!(t.price_at(utc("2026-02-01T23:30:00Z")), 0.10);
    assert_eq!(t.price_at(utc("2026-02-01T12:00:00Z")), 0.20);
    // 8 h at 0.10 and 16 h at 0.20 average 0.4 / 24 * ... = (0.8 + 3.2) / 24.
    let day = utc("2026-02-01T00:00:00Z").timestamp_millis();
    let mean = t.mean_price(day, day + 86_400_000).unwrap();
    assert!((mean - 4.0 / 24.0).abs() < 1e-12);
}

#[test]
fn changes_apply_from_local_midnight_of_their_date() {
    let change = |d: u32, p: f64| TariffChange {
        effective_from: NaiveDate::from_ymd_opt(2026, 6, d).unwrap(),
        price_per_kwh: p,
        periods: vec![],
    };
    // Given out of order on purpose.
    let t = Tariff::new(
        "GBP",
        0.5,
        vec![change(10, 0.30), change(1, 0.20)],
        london(),
    )
    .unwrap();
    // 23:30 UTC on 9 June is 00:30 BST on 10 June: the new price.
    assert_eq!(t.price_at(utc("2026-06-09T22:59:59Z")), 0.20);
    assert_eq!(t.price_at(utc("2026-06-09T23:00:00Z")), 0.30);
    // Before the first change, the first change's price.
    assert_eq!(t.price_at(utc("2020-01-01T12:00:00Z")), 0.20);
    let (price, end) = t
        .segment(utc("2026-06-09T12:00:00Z").timestamp_millis())
        .unwrap();
    assert_eq!(price, 0.20);
    assert_eq!(end, utc("2026-06-09T23:00:00Z").timestamp_millis());
}

#[test]
fn segments_split_at_the_clock_change() {
    // 29 March 2026: 01:00 GMT becomes 02:00 BST. A period 01:15-01:45 never happens.
    let p = Period {
        start: hm(1, 15),
        end: hm(1, 45),
        price_per_kwh: 1.0,
    };
    let t = Tariff::simple("GBP", 0.1, 0.0, vec![p], london()).unwrap();
    let start = utc("2026-03-29T00:00:00Z").timestamp_millis();
    let end = utc("2026-03-29T23:00:00Z").timestamp_millis(); // 23 local hours
    assert!((t.mean_price(start, end).unwrap() - 0.1).abs() < 1e-12);
    // 25 October: 02:00 BST becomes 01:00 GMT; the period happens twice.
    let start = utc("2026-10-24T23:00:00Z").timestamp_millis();
    let end = utc("2026-10-26T00:00:00Z").timestamp_millis(); // 25 local hours
    let mean = t.mean_price(start, end).unwrap();
    assert!(
        (mean - (1.0 * 1.0 + 0.1 * 24.0) / 25.0).abs() < 1e-12,
        "{mean}"
    );
}

#[test]
fn invalid_tariffs_are_refused_with_the_reason() {
    let p = |s: u32, e: u32| Period {
        start: hm(s, 0),
        end: hm(e, 0),
        price_per_kwh: 0.1,
    };
    let tz = crate::zone::Zone::UTC;
    assert!(matches!(
        Tariff::simple("gbp", 0.1, 0.0, vec![], tz),
        Err(TariffError::BadCurrency(_))
    ));
    assert!(matches!(
        Tariff::simple("GBP", -0.1, 0.0, vec![], tz),
        Err(TariffError::BadPrice { .. })
    ));
    assert!(matches!(
        Tariff::simple("GBP", 0.1, f64::NAN, vec![], tz),
        Err(TariffError::BadPrice { .. })
    ));
    assert!(matches!(
        Tariff::simple("GBP", 0.1, 0.0, vec![p(3, 3)], tz),
        Err(TariffError::EmptyPeriod { .. })
    ));
    let e = Tariff::simple("GBP", 0.1, 0.0, vec![p(22, 6), p(5, 8)], tz).unwrap_err();
    assert!(e.to_string().contains("22:00-06:00 and 05:00-08:00"), "{e}");
    assert!(Tariff::simple("GBP", 0.1, 0.0, vec![p(22, 6), p(6, 8)], tz).is_ok());
    assert!(matches!(
        Tariff::new("GBP", 0.0, vec![], tz),
        Err(TariffError::NoPrices)
    ));
    let c = TariffChange {
        effective_from: NaiveDate::from_ymd_opt(2026, 1, 1).unwrap(),
        price_per_kwh: 0.1,
        periods: vec![],
    };
    assert!(matches!(
        Tariff::new("GBP", 0.0, vec![c.clone(), c], tz),
        Err(TariffError::DuplicateChange(_))
    ));
    assert!(matches!(
        night_day().segment(i64::MAX),
        Err(TariffError::Timestamp(_))
    ));
}

/// The hours a price or the local date can change inside: the 00:30 and 07:30 hours
/// of a night rate, and local midnight's hour in a zone half an hour off UTC; none for
/// a flat price in UTC.
#[test]
fn the_hours_a_price_or_date_may_change_inside() {
    let hour = |s: &str| {
        let t = utc(s).timestamp_millis();
        (t, t + 3_600_000)
    };
    let e7 = night_day();
    for (at, want) in [
        ("2025-01-15T00:00:00Z", true),
        ("2025-01-15T07:00:00Z", true),
        ("2025-01-15T03:00:00Z", false),
        // Midnight is the hour's start, not inside it.
        ("2025-01-15T23:00:00Z", false),
        // Summer time: 00:30 BST is 23:30 UTC.
        ("2025-07-15T23:00:00Z", true),
    ] {
        let (a, b) = hour(at);
        assert_eq!(e7.may_change_within(a, b), want, "{at}");
    }
    let flat = |zone: &str| {
        Tariff::simple("GBP", 0.2, 0.0, Vec::new(), Zone::named(zone).unwrap()).unwrap()
    };
    let (a, b) = hour("2025-01-15T18:00:00Z");
    assert!(flat("Asia/Kolkata").may_change_within(a, b));
    assert!(!flat("UTC").may_change_within(a, b));
    let (a, b) = hour("2025-01-15T17:00:00Z");
    assert!(!flat("Asia/Kolkata").may_change_within(a, b));
}
