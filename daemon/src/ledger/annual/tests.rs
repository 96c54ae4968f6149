//! A year on the tariff (`on_tariff`): each hour of the week at its own prices, and the
//! unit year that prices it, against the year priced hour by hour.

use super::*;
use crate::config::{PeriodConfig, TariffConfig};
use chrono::NaiveTime;

fn economy(standing: f64) -> Tariff {
    let at = |h, m| NaiveTime::from_hms_opt(h, m, 0).unwrap();
    TariffConfig {
        currency: "GBP".into(),
        price_per_kwh: 0.30,
        standing_charge_per_day: standing,
        timezone: Some(crate::zone::Zone::named("Europe/London").unwrap()),
        periods: vec![
            PeriodConfig {
                start: at(0, 30),
                end: at(7, 30),
                price_per_kwh: 0.10,
            },
            PeriodConfig {
                start: at(16, 0),
                end: at(19, 0),
                price_per_kwh: 0.40,
            },
        ],
        ..TariffConfig::default()
    }
    .build()
    .unwrap()
}

/// The box: a steady 100 W measured for 13 minutes of a cheap night is a year
/// of 100 W at every hour's price, GBP 222.65, not a year of night prices (GBP 87.60);
/// and it says that under a day was measured.
#[test]
fn minutes_at_night_price_a_whole_year_of_the_tariff() {
    let tariff = economy(0.5);
    let t0 = chrono::DateTime::parse_from_rfc3339("2026-12-07T00:48:52Z")
        .unwrap()
        .timestamp_millis();
    let ms = 12 * 60_000;
    let shape = LoadShape::new([(t0, t0 + ms, 100.0 * ms as f64 / 3.6e6, ms)], tariff.tz());
    let a = on_tariff(&shape, &tariff, t0, Some(0.01), "the last 7 days")
        .unwrap()
        .unwrap();
    assert!((a.kwh - 876.0).abs() < 1e-6, "{a:?}");
    assert_eq!((a.cost * 100.0).round(), 22265.0, "{a:?}");
    assert!(
        a.basis
            .starts_with("under a day measured: a year on your tariff"),
        "{}",
        a.basis
    );
    assert!(a.basis.contains("1 of the week's 168 hours"), "{}", a.basis);
    // Measured in one hour only: no spread to add, the power's interval alone.
    assert!((a.cost_ci95.unwrap() - a.cost * 0.01).abs() < 1e-9);
}

/// A load that runs at night only pays night prices; the unmeasured hours take its
/// mean, and the interval grows with the share of the week not measured.
#[test]
fn each_hour_of_the_week_is_priced_at_its_own_prices() {
    let tariff = economy(0.0);
    let hour = HOUR_MS;
    // Monday 2025-01-13 (London = UTC): 02:00-05:00 at 1000 W, 12:00-15:00 at 0 W.
    let mon = 1_736_726_400_000;
    let mut buckets = Vec::new();
    for week in 0..2 {
        for h in 0..24 {
            let t = mon + week * 7 * 24 * hour + h * hour;
            let w = if (2..5).contains(&h) { 1000.0 } else { 100.0 };
            buckets.push((t, t + hour, w, hour));
        }
    }
    let shape = LoadShape::new(buckets, tariff.tz());
    assert_eq!(shape.measured_hours(), 24);
    let a = on_tariff(&shape, &tariff, mon, Some(0.01), "two Mondays")
        .unwrap()
        .unwrap();
    // The other six days at the mean (212.5 W); Mondays at their own hours.
    let monday = 3.0 * 1.0 * 0.10 + 4.0 * 0.1 * 0.10 + 3.0 * 0.1 * 0.40 + 14.0 * 0.1 * 0.30;
    let mean = (3.0 * 1000.0 + 21.0 * 100.0) / 24.0 / 1000.0;
    let other = mean * (7.0 * 0.10 + 3.0 * 0.40 + 14.0 * 0.30);
    // 365 days from a Monday: 53 Mondays, 312 other days.
    let want = 53.0 * monday + 312.0 * other;
    assert!((a.cost - want).abs() < 1e-6, "{} vs {want}", a.cost);
    assert!(!a.basis.starts_with("under a day"), "{}", a.basis);
    // The power's interval and the spread of the measured hours over the share of the
    // week not measured.
    let r = 0.01_f64.hypot(shape.spread_ratio().unwrap() * (1.0 - 24.0 / 168.0));
    assert!((a.cost_ci95.unwrap() - a.cost * r).abs() < 1e-9);
    let none = on_tariff(&shape, &tariff, mon, None, "").unwrap().unwrap();
    assert_eq!(none.cost_ci95, None);
}

/// A year priced as 168 unit hours of the week is the year priced hour by hour: under
/// time-of-use periods across both clock changes, and under a half-hourly price series
/// that ends in March (each hour after it at its hour of the day's mean), or that holds
/// under a day (the configured prices after it); the memo gives the same again, and
/// another tariff or day is priced anew.
#[test]
fn a_year_by_unit_hours_of_the_week_is_the_year_hour_by_hour() {
    use crate::tariff::series::{SeriesSet, Slot, SlotSeries};
    let t0 = chrono::DateTime::parse_from_rfc3339("2026-01-05T00:00:00Z")
        .unwrap()
        .timestamp_millis();
    let with_series = |half_hours: i64| {
        let slots = (0..half_hours)
            .map(|i| Slot {
                start_ms: t0 + i * HOUR_MS / 2,
                end_ms: t0 + (i + 1) * HOUR_MS / 2,
                value: 0.05 + 0.01 * (i % 37) as f64,
            })
            .collect();
        economy(0.0).with_series(SeriesSet::new(vec![
            SlotSeries::new("agile", "GBP", slots).unwrap(),
        ]))
    };
    // Each hour of the week its own load, 40 to 207 W; a week measured.
    let buckets: Vec<_> = (0..WEEK_HOURS as i64)
        .map(|h| {
            let t = t0 + h * HOUR_MS;
            (t, t + HOUR_MS, 40.0 + h as f64, HOUR_MS)
        })
        .collect();
    for tariff in [economy(0.0), with_series(24 * 2 * 70), with_series(20)] {
        let shape = LoadShape::new(buckets.clone(), tariff.tz());
        let mean = shape.mean_watts().unwrap();
        let year: Vec<_> = (0..YEAR_DAYS * 24)
            .map(|i| {
                let t = t0 + i * HOUR_MS;
                let h = hour_of_week(t, tariff.tz()).unwrap_or(0);
                (t, t + HOUR_MS, shape.assumed_watts(h).unwrap_or(mean))
            })
            .collect();
        let (kwh, cost, assumption) = price_year(&tariff, &year).unwrap();
        let a = on_tariff(&shape, &tariff, t0, None, "a week")
            .unwrap()
            .unwrap();
        assert!((a.kwh - kwh).abs() < 1e-9 * kwh, "{} vs {kwh}", a.kwh);
        assert!((a.cost - cost).abs() < 1e-9 * cost, "{} vs {cost}", a.cost);
        let said = assumption.unwrap_or_default();
        assert!(a.basis.contains(&said), "{} lacks {said:?}", a.basis);
        assert_eq!(
            on_tariff(&shape, &tariff, t0, None, "a week")
                .unwrap()
                .unwrap(),
            a
        );
    }
    // A day later the year ends on another weekday: priced anew, not the memo's.
    let shape = LoadShape::new(buckets, economy(0.0).tz());
    let year = |day_ms| {
        on_tariff(&shape, &economy(0.0), day_ms, None, "")
            .unwrap()
            .unwrap()
    };
    let (monday, tuesday) = (year(t0), year(t0 + 24 * HOUR_MS));
    assert!(
        tuesday.basis.contains("from 2026-01-06"),
        "{}",
        tuesday.basis
    );
    assert!(
        (tuesday.cost - monday.cost).abs() > 0.01,
        "{monday:?} {tuesday:?}"
    );
    assert_eq!(year(t0), monday);
}
