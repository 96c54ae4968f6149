//! The price store on real SQLite files: replacing by source with counts, the live price's
//! open slot, and the ledger pricing known energy per slot to the hand-computed cost.

use wattson_collectors::{Metric, Sample, SourceId};

use super::store::{self as prices, Kind, NewSeries};
use crate::ledger::energy;
use crate::store::{HOUR_MS, Store, StoreOptions, Writer};
use crate::tariff::series::Slot;

const T0: i64 = 1_795_996_800_000; // 2026-12-01T00:00:00Z

fn slot(a: i64, b: i64, v: f64) -> Slot {
    Slot {
        start_ms: T0 + a * 1_800_000,
        end_ms: T0 + b * 1_800_000,
        value: v,
    }
}

fn series(name: &str) -> NewSeries<'_> {
    NewSeries {
        source: name,
        kind: Kind::Price,
        unit: "GBP",
        applied: true,
        format: "plain-csv",
        origin: None,
    }
}

#[test]
fn imports_replace_what_they_overlap_and_count_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("p.db"), &StoreOptions::default()).unwrap();
    let c = prices::replace(
        store.conn(),
        &series("a"),
        &[slot(0, 1, 0.1), slot(1, 2, 0.2), slot(2, 3, 0.3)],
        1,
    )
    .unwrap();
    assert_eq!((c.added, c.changed, c.unchanged, c.replaced), (3, 0, 0, 0));
    // One the same, one repriced, one hour-long slot over two half-hours, one new.
    let c = prices::replace(
        store.conn(),
        &series("a"),
        &[
            slot(0, 1, 0.1),
            slot(1, 2, 0.25),
            slot(2, 4, 0.3),
            slot(5, 6, 0.5),
        ],
        2,
    )
    .unwrap();
    assert_eq!((c.added, c.changed, c.unchanged, c.replaced), (1, 2, 1, 2));
    let s = prices::load(&store, "a", T0).unwrap();
    let got: Vec<(i64, i64, f64)> = s
        .slots()
        .iter()
        .map(|x| {
            (
                (x.start_ms - T0) / 1_800_000,
                (x.end_ms - T0) / 1_800_000,
                x.value,
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![(0, 1, 0.1), (1, 2, 0.25), (2, 4, 0.3), (5, 6, 0.5)]
    );
    // Another kind or currency under the same name is refused, and nothing changes.
    let eur = NewSeries {
        unit: "EUR",
        ..series("a")
    };
    assert!(prices::replace(store.conn(), &eur, &[slot(9, 10, 1.0)], 3).is_err());
    assert_eq!(prices::load(&store, "a", T0).unwrap().slots().len(), 4);
}

#[test]
fn the_topics_price_holds_until_the_next_one() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("p.db"), &StoreOptions::default()).unwrap();
    assert!(prices::apply_topic_price(store.conn(), "GBP", "t", 0.3, T0).unwrap());
    // The same price again changes nothing.
    assert!(!prices::apply_topic_price(store.conn(), "GBP", "t", 0.3, T0 + 10).unwrap());
    assert!(prices::apply_topic_price(store.conn(), "GBP", "t", -0.05, T0 + 60_000).unwrap());
    let s = prices::load(&store, prices::LIVE_SOURCE, T0 + 120_000).unwrap();
    assert_eq!(s.slots().len(), 2);
    assert_eq!(
        (s.slots()[0].end_ms, s.slots()[0].value),
        (T0 + 60_000, 0.3)
    );
    // Open: until an hour after the time it is loaded at.
    assert_eq!(s.slots()[1].end_ms, T0 + 120_000 + 3_600_000);
    let list = prices::list(&store).unwrap();
    assert_eq!(list[0].to_ms, None);
    assert_eq!(list[0].slots, 2);
}

/// A database in `dir` whose `meter:wall` (host `h`, spacing 1 s) read `watts(s)` at each
/// second `s` of `0..=seconds` from `t0`, written through the real writer.
fn wall_at_1_hz(
    dir: &std::path::Path,
    t0: i64,
    seconds: i64,
    watts: impl Fn(i64) -> f64,
) -> (Writer, SourceId) {
    let mut opts = StoreOptions {
        host: "h".into(),
        ..StoreOptions::default()
    };
    let wall = SourceId::meter("wall");
    opts.spacing_ms.insert(wall.clone(), 1000);
    let mut w = Writer::new(Store::open(&dir.join("p.db"), &opts).unwrap(), opts.clone());
    let samples: Vec<Sample> = (0..=seconds)
        .map(|s| Sample::new(t0 + s * 1000, wall.clone(), Metric::Power, "", watts(s)))
        .collect();
    w.push(None, samples);
    w.flush().unwrap();
    (w, wall)
}

/// Samples stored late into an hour the running total had already counted (a flush that
/// failed for over an hour) reach it within a minute, without a restart; with nothing
/// late, it never counts again.
#[test]
fn samples_stored_late_into_counted_hours_reach_the_running_total() {
    use crate::ledger::running::RunningTotal;
    let dir = tempfile::tempdir().unwrap();
    let (mut w, wall) = wall_at_1_hz(dir.path(), T0, 3 * 3600, |_| 100.0);
    let tariff = crate::ledger::costs::tariff(&crate::config::TariffConfig::default()).unwrap();
    let mut total = RunningTotal::default();
    let now = T0 + 5 * HOUR_MS;
    let kwh = |t: &mut RunningTotal, w: &Writer, at: i64| {
        t.refresh(w.store(), "h", &wall, &tariff, at).unwrap().kwh
    };
    assert!((kwh(&mut total, &w, now) - 0.3).abs() < 1e-6);
    assert!((kwh(&mut total, &w, now + 61_000) - 0.3).abs() < 1e-6);
    assert_eq!(total.recounts(), 0, "nothing late: nothing counted again");
    // The fourth hour arrives late: it closed before it was stored.
    let late: Vec<Sample> = (1..=3600)
        .map(|s| {
            Sample::new(
                T0 + 3 * HOUR_MS + s * 1000,
                wall.clone(),
                Metric::Power,
                "",
                100.0,
            )
        })
        .collect();
    w.push(None, late);
    w.flush().unwrap();
    assert!((kwh(&mut total, &w, now + 122_000) - 0.4).abs() < 1e-6);
    assert_eq!(total.recounts(), 1);
}

#[test]
fn known_energy_per_slot_gives_the_hand_computed_cost() {
    let dir = tempfile::tempdir().unwrap();
    // 0..1 h at 200 W, 1..2 h at 600 W: per half hour 0.1, 0.1, 0.3, 0.3 kWh.
    let (w, wall) = wall_at_1_hz(
        dir.path(),
        T0,
        7200,
        |s| if s < 3600 { 200.0 } else { 600.0 },
    );
    let store = w.store();
    // Half-hour prices, one negative, and no slot for the last half hour.
    prices::replace(
        store.conn(),
        &series("agile"),
        &[slot(0, 1, 0.20), slot(1, 2, -0.05), slot(2, 3, 0.40)],
        1,
    )
    .unwrap();
    let cfg = crate::config::TariffConfig {
        price_per_kwh: 0.10,
        timezone: Some(crate::zone::Zone::named("Europe/London").unwrap()),
        ..crate::config::TariffConfig::default()
    };
    let tariff = crate::ledger::costs::tariff_with_series(&cfg, store, T0).unwrap();
    let e = energy::energy(store, "h", &wall, T0, T0 + 7_200_000).unwrap();
    let c = e.cost_in(store, &tariff).unwrap();
    let want = 0.1 * 0.20 + 0.1 * -0.05 + 0.3 * 0.40 + 0.3 * 0.10;
    // The 1 s pair across the step (200 -> 600 W, a trapezoid of 400 W) adds 200 W x 1 s
    // to the second half hour.
    let step_wh = 200.0 / 3600.0;
    let want = want + step_wh / 1000.0 * -0.05;
    // Minutes are stored to the mWh (the compact minute chunk), so the split of each hour
    // by its minutes is exact to 0.5 mWh a minute: at most 30 mWh an hour moves between
    // its half hours, under 1e-5 of a currency unit at these prices.
    assert!(
        (c.energy_cost - want).abs() < 1e-5,
        "{} vs {want}",
        c.energy_cost
    );
    assert!((c.fallback_kwh - 0.3).abs() < 1e-9, "{c:?}");
    assert_eq!(c.sources[0].source, "agile");
    assert_eq!(c.sources.last().unwrap().source, "tariff");
}

/// A time-of-use tariff whose night rate starts at 00:30 (Economy 7 as configured in
/// docs/configuration.md), no price series: the hour 00:00-01:00 is priced by its minutes, so
/// a load that rises at 00:30 pays the night rate for what it used after 00:30. Before, the hour's
/// energy was split evenly across the boundary: 0.2035 where 0.0885 is right. Status, the
/// running totals and the report price it alike.
#[test]
fn a_time_of_use_boundary_inside_an_hour_prices_the_energy_used_on_each_side() {
    use crate::ledger::running::RunningTotal;
    let dir = tempfile::tempdir().unwrap();
    // A winter night in London (UTC+0): 100 W from 00:00, 2100 W from 00:30, to 01:00.
    let t0 = chrono::DateTime::parse_from_rfc3339("2025-01-15T00:00:00Z")
        .unwrap()
        .timestamp_millis();
    let (w, wall) = wall_at_1_hz(
        dir.path(),
        t0,
        3600,
        |s| if s < 1800 { 100.0 } else { 2100.0 },
    );
    let store = w.store();
    let cfg = crate::config::TariffConfig {
        price_per_kwh: 0.30,
        timezone: Some(crate::zone::Zone::named("Europe/London").unwrap()),
        periods: vec![crate::config::PeriodConfig {
            start: chrono::NaiveTime::from_hms_opt(0, 30, 0).unwrap(),
            end: chrono::NaiveTime::from_hms_opt(7, 30, 0).unwrap(),
            price_per_kwh: 0.07,
        }],
        ..crate::config::TariffConfig::default()
    };
    let tariff = crate::ledger::costs::tariff_from_config(&cfg).unwrap();
    assert!(tariff.may_change_within(t0, t0 + HOUR_MS));
    assert!(!tariff.may_change_within(t0 + 2 * HOUR_MS, t0 + 3 * HOUR_MS));
    let e = energy::energy(store, "h", &wall, t0, t0 + HOUR_MS).unwrap();
    // The pair across the step (00:29:59-00:30:00, a trapezoid at 1100 W) is the day
    // rate's last second.
    let day_wh = 100.0 * 0.5 + 1000.0 / 3600.0;
    let night_wh = 2100.0 * 0.5;
    let want = (day_wh * 0.30 + night_wh * 0.07) / 1000.0;
    let c = e.cost_in(store, &tariff).unwrap();
    // Minutes are stored to the mWh: within 1e-5 of a currency unit.
    assert!(
        (c.energy_cost - want).abs() < 1e-5,
        "{} vs {want}",
        c.energy_cost
    );
    assert!((want - 0.0885).abs() < 1e-3, "{want}");
    // The running total (MQTT, /metrics) agrees, once the hour has closed.
    let mut total = RunningTotal::since(t0);
    let figures = total
        .refresh(store, "h", &wall, &tariff, t0 + 3 * HOUR_MS)
        .unwrap();
    assert!((figures.cost - want).abs() < 1e-5, "{figures:?} vs {want}");
}

/// A machine started at 00:48:52 on a tariff whose night rate began at 00:30: read at
/// 00:51, today's energy was all used at the night rate, whether priced by `status` (from
/// midnight), by the running total the live outputs keep, or by a report of the minutes
/// it ran. Before, the open stretch's energy was spread from midnight to the moment of
/// reading and priced at that span's mean price (0.2167 where 0.10 is right).
#[test]
fn energy_in_an_open_hour_is_priced_when_it_was_used() {
    use crate::ledger::running::RunningTotal;
    let dir = tempfile::tempdir().unwrap();
    let midnight = chrono::DateTime::parse_from_rfc3339("2025-01-15T00:00:00Z")
        .unwrap()
        .timestamp_millis();
    let start = midnight + (48 * 60 + 52) * 1000;
    let now = midnight + 51 * 60 * 1000;
    let (w, wall) = wall_at_1_hz(dir.path(), start, (now - start) / 1000, |_| 100.0);
    let store = w.store();
    let cfg = crate::config::TariffConfig {
        price_per_kwh: 0.30,
        timezone: Some(crate::zone::Zone::named("Europe/London").unwrap()),
        periods: vec![crate::config::PeriodConfig {
            start: chrono::NaiveTime::from_hms_opt(0, 30, 0).unwrap(),
            end: chrono::NaiveTime::from_hms_opt(7, 30, 0).unwrap(),
            price_per_kwh: 0.10,
        }],
        ..crate::config::TariffConfig::default()
    };
    let tariff = crate::ledger::costs::tariff_from_config(&cfg).unwrap();
    let want = 100.0 * (now - start) as f64 / 3_600_000.0 / 1000.0 * 0.10;
    for from in [midnight, start, midnight + 30 * 60 * 1000] {
        let e = energy::energy(store, "h", &wall, from, now).unwrap();
        let c = e.cost_in(store, &tariff).unwrap();
        assert!(
            (c.energy_cost - want).abs() < 1e-9,
            "from {from}: {} vs {want}",
            c.energy_cost
        );
    }
    let mut total = RunningTotal::since(midnight);
    let figures = total.refresh(store, "h", &wall, &tariff, now).unwrap();
    assert!((figures.cost - want).abs() < 1e-9, "{figures:?} vs {want}");
}
