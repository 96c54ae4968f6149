use super::*;
use crate::tariff::{Period, TariffChange};
use crate::zone::Zone;
use chrono::{NaiveTime, TimeZone as _, Utc};

fn london() -> Zone {
    Zone::named("Europe/London").expect("Europe/London loads")
}

fn hm(h: u32, m: u32) -> NaiveTime {
    NaiveTime::from_hms_opt(h, m, 0).unwrap()
}

fn ms(s: &str) -> i64 {
    DateTime::parse_from_rfc3339(s).unwrap().timestamp_millis()
}

fn date(y: i32, m: u32, d: u32) -> NaiveDate {
    NaiveDate::from_ymd_opt(y, m, d).unwrap()
}

fn night_day() -> Tariff {
    let night = Period {
        start: hm(0, 30),
        end: hm(7, 30),
        price_per_kwh: 0.07,
    };
    Tariff::simple("GBP", 0.30, 0.0, vec![night], london()).unwrap()
}

/// Hourly buckets of a constant 1 kW load over `start..end`.
fn one_kw(start: i64, end: i64) -> Vec<(i64, i64, f64)> {
    (start..end)
        .step_by(3_600_000)
        .map(|t| {
            let e = (t + 3_600_000).min(end);
            (t, e, (e - t) as f64 / 3600.0)
        })
        .collect()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn the_design_reference_figure() {
    assert!(close(annual_kwh(240.0), 2102.4));
    let flat = Tariff::simple("GBP", 0.09, 0.0, vec![], london()).unwrap();
    let a = annual_cost(240.0, Some(2.0), &flat, date(2026, 1, 1)).unwrap();
    assert!(close(a.kwh, 2102.4) && close(a.cost, 189.216), "{a:?}");
    assert_eq!(format_money(a.cost, "GBP"), "GBP 189.22");
    assert_eq!(round_money(a.cost), 189.22);
    // The interval scales with the watts: 2 W is 17.52 kWh, GBP 1.5768.
    assert!(close(a.kwh_ci95.unwrap(), 17.52) && close(a.cost_ci95.unwrap(), 1.5768));
    assert!(close(annual_kwh_for_year(240.0, 2028), 2108.16));
    assert!(close(annual_kwh_for_year(240.0, 2026), 2102.4));
    assert!(close(annual_kwh_for_year(240.0, 2100), 2102.4)); // not a leap year
}

#[test]
fn time_of_use_on_a_constant_load() {
    // One winter day, 1 kW: night 7 h at 0.07 = 0.49, day 17 h at 0.30 = 5.10.
    let t = night_day();
    let b = cost_of_energy(
        &t,
        &one_kw(ms("2026-01-10T00:00:00Z"), ms("2026-01-11T00:00:00Z")),
    )
    .unwrap();
    assert!(close(b.kwh, 24.0) && close(b.energy_cost, 5.59), "{b:?}");
    assert_eq!(b.bands.len(), 2);
    assert!(close(b.bands[0].kwh, 7.0) && close(b.bands[1].kwh, 17.0));
    assert_eq!(b.days, 1);
    // A year of it: 365 nights of 7 local hours (6 on the March change day, 8 on the
    // October one) = 2555 h at 0.07, the other 6205 h at 0.30.
    let a = annual_cost(1000.0, None, &t, date(2026, 1, 1)).unwrap();
    assert!(close(a.cost, 2555.0 * 0.07 + 6205.0 * 0.30), "{a:?}");
    assert_eq!(a.cost_ci95, None);
}

#[test]
fn a_bucket_straddling_a_boundary_is_split_pro_rata() {
    // 00:00-01:00 with the night rate from 00:30: half at each price.
    let t = night_day();
    let s = ms("2026-01-10T00:00:00Z");
    let b = cost_of_energy(&t, &[(s, s + 3_600_000, 1000.0)]).unwrap();
    assert!(close(b.energy_cost, 0.5 * 0.30 + 0.5 * 0.07));
    // A zero-length bucket is priced at its instant.
    let b = cost_of_energy(&t, &[(s + 3_600_000, s + 3_600_000, 1000.0)]).unwrap();
    assert!(close(b.energy_cost, 0.07));
}

#[test]
fn a_wrapping_period_prices_across_midnight() {
    let p = Period {
        start: hm(23, 0),
        end: hm(7, 0),
        price_per_kwh: 0.10,
    };
    let t = Tariff::simple("EUR", 0.20, 0.0, vec![p], crate::zone::Zone::UTC).unwrap();
    // 22:00 to 08:00: 1 h day, 8 h night, 1 h day, as one 10 kWh bucket.
    let b = cost_of_energy(
        &t,
        &[(
            ms("2026-02-01T22:00:00Z"),
            ms("2026-02-02T08:00:00Z"),
            10_000.0,
        )],
    )
    .unwrap();
    assert!(close(b.energy_cost, 2.0 * 0.20 + 8.0 * 0.10), "{b:?}");
    assert_eq!(b.days, 2);
}

#[test]
fn a_tariff_change_mid_window_prices_each_day_at_its_price() {
    let c = |d: u32, p: f64| TariffChange {
        effective_from: date(2026, 1, d),
        price_per_kwh: p,
        periods: vec![],
    };
    let t = Tariff::new("GBP", 0.50, vec![c(1, 0.20), c(2, 0.30)], london()).unwrap();
    let b = cost_of_energy(
        &t,
        &one_kw(ms("2026-01-01T00:00:00Z"), ms("2026-01-03T00:00:00Z")),
    )
    .unwrap();
    assert!(close(b.energy_cost, 24.0 * 0.20 + 24.0 * 0.30), "{b:?}");
    // Standing charge: two days at 0.50, reported separately.
    assert_eq!(b.days, 2);
    assert!(close(b.standing_charge, 1.0));
    // A two-hour bucket over the change is split at midnight.
    let b = cost_of_energy(
        &t,
        &[(
            ms("2026-01-01T23:00:00Z"),
            ms("2026-01-02T01:00:00Z"),
            2000.0,
        )],
    )
    .unwrap();
    assert!(close(b.energy_cost, 0.20 + 0.30));
}

#[test]
fn standing_charge_is_never_in_the_energy_cost() {
    let t = Tariff::simple("GBP", 0.10, 0.60, vec![], london()).unwrap();
    let b = cost_of_energy(
        &t,
        &one_kw(ms("2026-05-01T00:00:00Z"), ms("2026-05-01T10:00:00Z")),
    )
    .unwrap();
    assert!(close(b.energy_cost, 1.0));
    // 00:00 UTC is 01:00 BST: one local day touched.
    assert_eq!(b.days, 1);
    assert!(close(b.standing_charge, 0.60));
    let a = annual_cost(100.0, None, &t, date(2026, 1, 1)).unwrap();
    assert!(close(a.cost, 87.6));
    let empty = cost_of_energy(&t, &[]).unwrap();
    assert_eq!(
        (empty.days, empty.kwh, empty.standing_charge),
        (0, 0.0, 0.0)
    );
}

#[test]
fn uk_clock_change_days_at_1_kw() {
    let t = night_day();
    // 29 March 2026, local midnight to midnight: 23 h. Night 00:30-01:00 GMT then
    // 02:00-07:30 BST = 6 h; day 17 h.
    let b = cost_of_energy(
        &t,
        &one_kw(ms("2026-03-29T00:00:00Z"), ms("2026-03-29T23:00:00Z")),
    )
    .unwrap();
    assert!(
        close(b.kwh, 23.0) && close(b.energy_cost, 6.0 * 0.07 + 17.0 * 0.30),
        "{b:?}"
    );
    assert_eq!(b.days, 1);
    // 25 October 2026: 25 h. Night 00:30-02:00 BST then 01:00-07:30 GMT = 8 h; day 17 h.
    let b = cost_of_energy(
        &t,
        &one_kw(ms("2026-10-24T23:00:00Z"), ms("2026-10-26T00:00:00Z")),
    )
    .unwrap();
    assert!(
        close(b.kwh, 25.0) && close(b.energy_cost, 8.0 * 0.07 + 17.0 * 0.30),
        "{b:?}"
    );
    assert_eq!(b.days, 1);
}

#[test]
fn bad_buckets_are_named() {
    let t = night_day();
    assert!(matches!(
        cost_of_energy(&t, &[(0, 10, 1.0), (10, 5, 1.0)]),
        Err(CostError::BadBucket { index: 1, .. })
    ));
    assert!(matches!(
        cost_of_energy(&t, &[(0, 10, f64::NAN)]),
        Err(CostError::BadBucket { index: 0, .. })
    ));
    assert!(matches!(
        annual_cost(f64::INFINITY, None, &t, date(2026, 1, 1)),
        Err(CostError::BadWatts { .. })
    ));
}

#[test]
fn savings_and_payback() {
    // The DESIGN's two boxes at idle: 240 W against 78 W at 0.09 per kWh.
    let flat = Tariff::simple("GBP", 0.09, 0.0, vec![], london()).unwrap();
    let old = annual_cost(240.0, Some(3.0), &flat, date(2026, 1, 1)).unwrap();
    let new = annual_cost(78.0, Some(4.0), &flat, date(2026, 1, 1)).unwrap();
    let c = compare(
        "2x Opteron",
        &old,
        "Athlon 64",
        &new,
        Some(300.0),
        Some(200.0),
    );
    // 162 W saved: 1419.12 kWh, GBP 127.7208 a year; 300 / 127.7208 years.
    assert!(close(c.annual_kwh_saved, 1419.12));
    assert!(close(c.annual_saving, 127.7208));
    assert!(close(c.payback_years.unwrap(), 300.0 / 127.7208));
    assert!(close(c.co2_kg_saved.unwrap(), 283.824));
    // Independent intervals add in quadrature: 5 W is 43.8 kWh, GBP 3.942.
    assert!(close(c.annual_saving_ci95.unwrap(), 3.942));
    assert_eq!(format_money(c.annual_saving, &c.currency), "GBP 127.72");
    // The other way round saves nothing, so never pays back.
    let back = compare("Athlon 64", &new, "2x Opteron", &old, Some(300.0), None);
    assert!(back.annual_saving < 0.0);
    assert_eq!(back.payback_years, None);
    assert_eq!(back.co2_kg_saved, None);
    let same = compare("a", &old, "b", &old, Some(10.0), None);
    assert_eq!(same.payback_years, None);
    assert_eq!(
        compare("a", &old, "b", &new, None, None).payback_years,
        None
    );
}

#[test]
fn money_rounds_half_away_from_zero() {
    assert_eq!(format_money(189.216, "GBP"), "GBP 189.22");
    assert_eq!(format_money(1.005, "GBP"), "GBP 1.01");
    assert_eq!(format_money(2.675, "GBP"), "GBP 2.68");
    assert_eq!(format_money(-2.675, "GBP"), "GBP -2.68");
    assert_eq!(format_money(0.125, "EUR"), "EUR 0.13");
    assert_eq!(format_money(1.004_999, "GBP"), "GBP 1.00");
    assert_eq!(format_money(9.995, "GBP"), "GBP 10.00");
    assert_eq!(format_money(99.999, "GBP"), "GBP 100.00");
    assert_eq!(format_money(-0.004, "GBP"), "GBP 0.00");
    assert_eq!(format_money(3.0, "GBP"), "GBP 3.00");
    assert_eq!(format_money(1234.5, "GBP"), "GBP 1234.50");
    assert_eq!(format_money(f64::NAN, "GBP"), "GBP n/a");
    assert_eq!(round_money(1.005), 1.01);
    assert_eq!(round_money(-1.005), -1.01);
    assert_eq!(format_money_symbol(189.216, "GBP"), "£189.22");
    assert_eq!(format_money_symbol(-3.5, "EUR"), "-€3.50");
    assert_eq!(format_money_symbol(3.5, "CHF"), "CHF 3.50");
}

/// One imported hour at 10 per kWh priced the whole year at 10 (a 100x annual cost) and
/// was called the mean over the year. A series of under a day prices no year: the
/// configured prices do, and a note says so; a day's series does.
#[test]
fn a_price_series_of_under_a_day_does_not_price_the_year() {
    use crate::tariff::series::{SeriesSet, Slot, SlotSeries};
    let t0 = Utc
        .with_ymd_and_hms(2026, 1, 1, 0, 0, 0)
        .unwrap()
        .timestamp_millis();
    let h = 3_600_000;
    let with = |hours: i64, price: f64| {
        let slots = (0..hours)
            .map(|i| Slot {
                start_ms: t0 + i * h,
                end_ms: t0 + (i + 1) * h,
                value: price,
            })
            .collect();
        Tariff::simple("GBP", 0.10, 0.0, Vec::new(), Zone::UTC)
            .unwrap()
            .with_series(SeriesSet::new(vec![
                SlotSeries::new("import", "GBP", slots).unwrap(),
            ]))
    };
    let hour = with(1, 10.0);
    let a = annual_cost(100.0, None, &hour, date(2026, 1, 1)).unwrap();
    assert!(a.price_basis.is_none());
    assert!(a.mean_price_per_kwh < 0.11, "{}", a.mean_price_per_kwh);
    let note = series_too_short(&hour).unwrap();
    assert!(note.contains("span 1 h, less than a day"), "{note}");
    let day = with(24, 0.20);
    let a = annual_cost(100.0, None, &day, date(2026, 1, 1)).unwrap();
    assert!(a.price_basis.is_some());
    assert!((a.mean_price_per_kwh - 0.20).abs() < 1e-12);
    assert_eq!(series_too_short(&day), None);
}
