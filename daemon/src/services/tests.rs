//! The services tables and the attribution over them: shares that sum to the wall above the
//! idle floor, the floor apart, no watts without a sweep, and a bounded database however many
//! groups come and go.

use super::account::{GroupKey, Interval};
use super::attribution::{FitBasis, NEEDS_SWEEP};
use super::store::{self as services_store, max_groups_per_hour};
use crate::store::{DAY_MS, HOUR_MS, Store, StoreOptions};
use crate::tariff::Tariff;

fn store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(&dir.path().join("t.db"), &StoreOptions::default()).unwrap();
    (dir, s)
}

fn interval(ts_ms: i64, wall_w: Option<f64>, groups: &[(&str, &str, f64)]) -> Interval {
    Interval {
        ts_ms,
        elapsed_s: 10.0,
        busy_cpu_s: groups
            .iter()
            .filter(|(k, _, _)| *k != "self")
            .map(|(_, _, s)| s)
            .sum(),
        wall_w,
        groups: groups
            .iter()
            .map(|(k, n, s)| (GroupKey::new(k, n), *s))
            .collect(),
        groups_found: groups.len(),
    }
}

fn fit() -> FitBasis {
    FitBasis {
        configuration: "basket".into(),
        swept_ms: 0,
        kind: "spin".into(),
        idle_watts: 40.0,
        idle_ci95: Some(0.4),
        watts_per_cpu: 15.0,
        watts_per_cpu_ci95: Some(0.3),
        other_kinds: vec![("memory".into(), 19.0)],
    }
}

const T0: i64 = 1_780_000_000_000 / HOUR_MS * HOUR_MS;

#[test]
fn half_a_cpu_of_fifteen_watts_above_a_forty_watt_floor_is_seven_and_a_half_watts() {
    let (_d, s) = store();
    // 10 s intervals: jellyfin half a CPU, a container a quarter, the rest a quarter; the
    // wall at 55 W (40 W floor + 15 W for one busy CPU).
    for i in 1..=360 {
        let iv = interval(
            T0 + i * 10_000 - 1,
            Some(55.0),
            &[
                ("service", "jellyfin.service", 5.0),
                ("container", "backup", 2.5),
                ("rest", "", 2.5),
                ("self", "wattson", 0.002),
            ],
        );
        services_store::record(&s, "basket", &iv, 10, 30 * DAY_MS).unwrap();
    }
    let tariff = Tariff::simple("GBP", 0.30, 0.0, vec![], crate::zone::Zone::UTC).unwrap();
    let (sums, groups) = services_store::window(&s, "basket", T0, T0 + HOUR_MS).unwrap();
    let latest = services_store::latest(&s, "basket").unwrap();
    let e = super::attribution::compute(
        "basket",
        &tariff,
        Some(fit()),
        &sums,
        &groups,
        latest.as_ref(),
        T0,
        T0 + HOUR_MS,
    )
    .unwrap();
    let j = e
        .groups
        .iter()
        .find(|g| g.name == "jellyfin.service")
        .unwrap();
    let c = j.cost.as_ref().unwrap();
    assert!((c.watts - 7.5).abs() < 1e-9, "{}", c.watts);
    assert!(
        (c.watts_ci95.unwrap() - 0.2).abs() < 1e-9,
        "half the floor's interval"
    );
    // 7.5 W x 8760 h = 65.7 kWh; at GBP 0.30 = GBP 19.71.
    assert!((c.kwh_per_year - 65.7).abs() < 1e-9);
    assert!((c.cost_per_year - 19.71).abs() < 1e-9);
    assert!((j.watts_now.unwrap() - 7.5).abs() < 1e-9);
    assert!((j.cpu_share - 0.5).abs() < 1e-9);
    let sum: f64 = e
        .groups
        .iter()
        .map(|g| g.cost.as_ref().unwrap().watts)
        .sum();
    let dynamic = e.dynamic.as_ref().unwrap();
    assert!(
        (sum - dynamic.watts).abs() < 1e-9,
        "shares sum to the dynamic power"
    );
    assert!((dynamic.watts - 15.0).abs() < 1e-9);
    let floor = e.idle_floor.as_ref().unwrap();
    assert!((floor.watts - 40.0).abs() < 1e-9, "the floor apart");
    assert!(
        e.groups.iter().all(|g| g.kind != "self"),
        "wattson shown apart"
    );
    let own = e.wattson.as_ref().unwrap();
    assert!((own.cost.as_ref().unwrap().watts - 0.003).abs() < 1e-9);
    assert!(
        e.warnings.iter().any(|w| w.contains("memory 19.0 W")),
        "{:?}",
        e.warnings
    );
    let text = super::render::text(&e, None);
    assert!(text.contains("The box being on"), "{text}");
    assert!(text.contains("~7.50 +/- 0.20 W"), "{text}");
    assert!(
        super::render::wattson_line(&e)
            .unwrap()
            .starts_with("wattson itself: 0.020 % of a CPU")
    );
}

#[test]
fn without_a_sweep_there_is_cpu_time_and_why_there_are_no_watts() {
    let (_d, s) = store();
    let iv = interval(T0 + 10_000, Some(55.0), &[("service", "a.service", 5.0)]);
    services_store::record(&s, "basket", &iv, 10, 30 * DAY_MS).unwrap();
    let tariff = Tariff::simple("GBP", 0.30, 0.0, vec![], crate::zone::Zone::UTC).unwrap();
    let e = super::estimate(&s, "basket", &tariff, T0, T0 + HOUR_MS).unwrap();
    assert!(e.fit.is_none());
    assert!(e.warnings.iter().any(|w| w == NEEDS_SWEEP));
    let g = &e.groups[0];
    assert!((g.cpu_hours - 5.0 / 3600.0).abs() < 1e-12);
    assert!(g.cost.is_none() && g.watts_now.is_none());
    assert!(e.idle_floor.is_none() && e.dynamic.is_none());
}

#[test]
fn ten_thousand_short_lived_groups_keep_the_tables_bounded() {
    let (_d, s) = store();
    let retention = DAY_MS;
    // 10,000 groups, each alive for one 10 s interval, over 3 days of 1 s steps... at 100
    // intervals an hour, 4 hours of retention exceeded many times over.
    let mut ts = T0;
    for i in 0..10_000 {
        ts += 36_000; // 100 intervals an hour: 100 hours in all
        let name = format!("job-{i}.service");
        let iv = interval(
            ts,
            Some(50.0),
            &[("service", &name, 1.0), ("rest", "", 1.0)],
        );
        services_store::record(&s, "basket", &iv, 10, retention).unwrap();
    }
    let (groups, hours) = services_store::row_counts(&s).unwrap();
    let hours_kept = (retention / HOUR_MS + 1) as usize;
    let bound = hours_kept * max_groups_per_hour(10);
    assert!(hours as usize <= bound, "{hours} hour rows, bound {bound}");
    assert!(groups as usize <= bound, "{groups} groups, bound {bound}");
    assert!(hours > 0);
    // Every hour holds at most the cap; past it new groups went to `other`.
    let (_, g) = services_store::window(&s, "basket", ts - HOUR_MS, ts + HOUR_MS).unwrap();
    assert!(g.len() <= 2 * max_groups_per_hour(10));
    assert!(g.contains_key(&GroupKey::new("other", "")));
}
