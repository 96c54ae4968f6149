use super::*;
use crate::tariff::Period;
use std::collections::BTreeMap;

use crate::ledger::price::round_money;
use crate::report::input::{FitInput, LevelInput, MeasuredInput, ModeInput, ReportOptions};
use chrono::NaiveTime;

mod candidates;
mod summary;

fn date(y: i32, m: u32, d: u32) -> NaiveDate {
    NaiveDate::from_ymd_opt(y, m, d).unwrap()
}

fn ms(s: &str) -> i64 {
    s.parse::<DateTime<Utc>>().unwrap().timestamp_millis()
}

fn manual(name: &str, modes: &[(&str, f64)]) -> ConfigInput {
    ConfigInput {
        name: name.into(),
        kind: ConfigKind::Manual,
        host: None,
        fingerprint: None,
        description: None,
        modes: modes
            .iter()
            .map(|(n, w)| ModeInput {
                name: (*n).into(),
                watts: *w,
                ci95_watts: None,
                warnings: vec![],
            })
            .collect(),
        fit: None,
        levels: vec![],
        upgrade_cost: None,
        status: ConfigStatus::Complete,
        paired: None,
        schedule: None,
    }
}

fn swept(name: &str, idle: f64, slope: f64) -> ConfigInput {
    ConfigInput {
        kind: ConfigKind::Sweep,
        host: Some("basket".into()),
        fit: Some(FitInput {
            idle_watts: idle,
            idle_ci95: Some(0.5),
            watts_per_loop: slope,
            watts_per_loop_ci95: Some(0.3),
            r2: 0.999,
            notes: vec![],
            kind: "spin".into(),
        }),
        levels: (0..3)
            .map(|n| LevelInput {
                kind: "spin".into(),
                loops: n,
                mean_w: idle + slope * f64::from(n),
                ci95_w: 0.5,
                residency: BTreeMap::new(),
                mean_mhz: None,
                ops_per_s: None,
                joules_per_op: None,
                warnings: vec![],
            })
            .collect(),
        ..manual(name, &[])
    }
}

fn input(
    tariff: Tariff,
    configs: Vec<ConfigInput>,
    measured: Option<MeasuredInput>,
) -> ReportInput {
    ReportInput {
        generated_at: DateTime::from_timestamp_millis(ms("2026-01-02T00:00:00Z")).unwrap(),
        host: Some("basket".into()),
        tariff,
        configs,
        measured,
        regression: Vec::new(),
        gpus: vec![],
        idle: crate::report::idle::IdleInput::default(),
        candidates: Vec::new(),
        options: ReportOptions::new(date(2026, 1, 1)),
    }
}

fn flat(price: f64) -> Tariff {
    Tariff::simple("GBP", price, 0.0, vec![], crate::zone::Zone::UTC).unwrap()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6
}

#[test]
fn measured_and_modelled_by_hand() {
    let h = 3_600_000;
    let t0 = ms("2026-03-01T00:00:00Z");
    // 10 h window; the meter covered hours 0-3 and 5-10 (8 h at 100 W); hours 3-5 are
    // a gap, and must not be filled in.
    let energy: Vec<(i64, i64, f64)> = (0..10)
        .filter(|i| !(3..5).contains(i))
        .map(|i| (t0 + i * h, t0 + (i + 1) * h, 100.0))
        .collect();
    // Half a CPU busy all along: the fit says 80 + 30 x 0.5 = 95 W.
    let utilisation = (0..10)
        .map(|i| (t0 + i * h, t0 + (i + 1) * h, 0.5))
        .collect();
    let m = MeasuredInput {
        from_ms: t0,
        to_ms: t0 + 10 * h,
        energy,
        covered_ms: 8 * h,
        gaps: vec![(t0 + 3 * h, t0 + 5 * h, "meter unplugged".into())],
        utilisation,
        cpus: 4,
        config: None,
        ..MeasuredInput::default()
    };
    let r = build(&input(
        flat(0.10),
        vec![swept("this box", 80.0, 30.0)],
        Some(m),
    ))
    .unwrap();
    let mr = r.measured.unwrap();
    assert!(close(mr.kwh, 0.8) && close(mr.energy_cost, 0.08));
    assert!(close(mr.covered_hours, 8.0) && close(mr.window_hours, 10.0));
    assert!(close(mr.coverage_percent, 80.0));
    assert!(close(mr.mean_watts, 100.0));
    // Annualised by the 8 covered hours, not the 10-hour window: 100 W all year.
    assert!(close(mr.annual_kwh, 876.0), "{}", mr.annual_kwh);
    assert!(close(mr.annual_cost, 87.6));
    assert!(close(mr.gap_hours, 2.0));
    assert_eq!(mr.gaps[0].reason, "meter unplugged");
    let md = mr.modelled.unwrap();
    assert_eq!(md.config, "this box");
    assert!(close(md.mean_busy_cpus, 0.5) && close(md.mean_watts, 95.0));
    assert!(close(md.kwh, 0.95) && close(md.hours, 10.0));
    assert!(close(md.annual_kwh, 832.2) && close(md.annual_cost, 83.22));
    // (832.2 - 876) / 876 = -5 %.
    assert!(close(mr.difference_kwh_percent.unwrap(), -5.0));
    assert!(close(mr.difference_cost_percent.unwrap(), -5.0));
    assert!(r.notes.iter().any(|n| n.contains("gap")), "{:?}", r.notes);
    assert_eq!(mr.daily.len(), 1);
    assert!(close(mr.daily[0].kwh, 0.8));
}

#[test]
fn measured_energy_is_priced_by_time_of_day() {
    // Night 00:00-06:00 at 0.05, else 0.20: one kWh in each, over 2 covered hours.
    let night = Period {
        start: NaiveTime::MIN,
        end: NaiveTime::from_hms_opt(6, 0, 0).unwrap(),
        price_per_kwh: 0.05,
    };
    let t = Tariff::simple("GBP", 0.20, 0.0, vec![night], crate::zone::Zone::UTC).unwrap();
    let h = 3_600_000;
    let d = ms("2026-03-01T00:00:00Z");
    let m = MeasuredInput {
        from_ms: d,
        to_ms: d + 24 * h,
        energy: vec![(d + h, d + 2 * h, 1000.0), (d + 12 * h, d + 13 * h, 1000.0)],
        covered_ms: 2 * h,
        ..MeasuredInput::default()
    };
    let r = build(&input(t, vec![], Some(m))).unwrap();
    let mr = r.measured.unwrap();
    assert!(close(mr.energy_cost, 0.25));
    assert_eq!(mr.bands.len(), 2);
    // A year on the tariff: the two measured hours at their own prices each week, the
    // others at the measured mean (1 kW), so in effect 1 kW all year at the tariff's mean
    // price (6 h at 0.05, 18 h at 0.20), not the two hours' prices scaled up.
    assert!(
        close(mr.annual_cost, 8760.0 * (6.0 * 0.05 + 18.0 * 0.20) / 24.0),
        "{}",
        mr.annual_cost
    );
    assert!(mr.modelled.is_none());
}

#[test]
fn duty_cycle_decides_the_headline_when_measured() {
    // A machine 1 CPU busy on average: the manual box interpolates 78 + 33 = 111 W,
    // the swept one 40 + 15 = 55 W.
    let h = 3_600_000;
    let m = MeasuredInput {
        utilisation: vec![(0, h, 0.0), (h, 2 * h, 2.0)],
        cpus: 2,
        ..MeasuredInput::default()
    };
    let a = manual(
        "athlon",
        &[("idle", 78.0), ("1 loop", 111.0), ("2 loops", 111.0)],
    );
    let r = build(&input(
        flat(0.09),
        vec![a, swept("new", 40.0, 15.0)],
        Some(m),
    ))
    .unwrap();
    assert_eq!(r.headline_mode, DUTY_CYCLE);
    // athlon: (78 + 111) / 2 = 94.5 W; new: (40 + 70) / 2 = 55 W.
    assert!(close(r.configs[0].duty_cycle.as_ref().unwrap().watts, 94.5));
    let c = &r.comparisons[0];
    assert!(close(c.from_watts, 94.5) && close(c.to_watts, 55.0));
    assert!(close(c.annual_kwh_saved, 39.5 * 8.76));
}

#[test]
fn mode_option_overrides_and_unknown_modes_are_named() {
    let a = manual("a", &[("idle", 100.0), ("1 loop", 150.0)]);
    let b = manual("b", &[("idle", 50.0), ("1 loop", 60.0)]);
    let mut i = input(flat(0.10), vec![a, b], None);
    i.options.mode = Some("1 loop".into());
    let r = build(&i).unwrap();
    assert_eq!(r.comparisons[0].mode, "1 loop");
    assert!(close(r.comparisons[0].annual_kwh_saved, 90.0 * 8.76));
    i.options.mode = Some("turbo".into());
    let e = build(&i).unwrap_err().to_string();
    assert!(e.contains("turbo") && e.contains("idle, 1 loop"), "{e}");
}

#[test]
fn sweep_modes_come_from_levels_with_their_intervals() {
    let r = build(&input(flat(0.09), vec![swept("s", 40.0, 15.0)], None)).unwrap();
    let names: Vec<&str> = r.configs[0].modes.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["idle", "1 loop", "2 loops"]);
    assert_eq!(r.configs[0].modes[1].ci95_watts, Some(0.5));
    assert!(close(
        r.configs[0].modes[1].annual_cost_ci95.unwrap(),
        0.5 * 8.76 * 0.09
    ));
    let fit = r.configs[0].fit.as_ref().unwrap();
    assert!(close(fit.per_loop_annual_cost, 15.0 * 8.76 * 0.09));
}

#[test]
fn a_setting_measured_in_alternating_phases_is_compared_with_idle_as_found() {
    let idle = |name: &str, w: f64| ConfigInput {
        kind: ConfigKind::IdleMeasure,
        modes: vec![ModeInput {
            name: "idle".into(),
            watts: w,
            ci95_watts: Some(0.5),
            warnings: vec![],
        }],
        ..manual(name, &[])
    };
    let aspm = ConfigInput {
        paired: Some(Paired {
            against: "idle as found".into(),
            against_watts: 40.2,
            delta_watts: -3.0,
            delta_ci95_watts: 0.4,
        }),
        ..idle("idle with ASPM powersave", 37.1)
    };
    let r = build(&input(
        flat(0.30),
        vec![
            idle("idle as found", 40.0),
            aspm,
            manual("old box", &[("idle", 240.0)]),
        ],
        None,
    ))
    .unwrap();
    let names: Vec<(&str, &str)> = r
        .comparisons
        .iter()
        .map(|c| (c.from.as_str(), c.to.as_str()))
        .collect();
    assert_eq!(
        names,
        [
            ("old box", "idle as found"),
            ("idle as found", "idle with ASPM powersave")
        ]
    );
    let c = &r.comparisons[1];
    // The difference measured, not the difference of the two configurations' means.
    assert!(
        close(c.from_watts, 40.2) && close(c.to_watts, 37.2),
        "{c:?}"
    );
    assert!(close(c.annual_kwh_saved, 26.28), "{c:?}");
    assert!(close(c.annual_saving, 7.884), "{c:?}");
    assert!(
        close(c.annual_saving_ci95.unwrap(), 0.4 * 8.76 * 0.30),
        "{c:?}"
    );
    assert_eq!(c.delta_ci95_watts, Some(0.4));
    assert_eq!(r.comparisons[0].delta_ci95_watts, None);
    let text = crate::report::render(&r, crate::report::Format::Table).unwrap();
    assert!(
        text.contains(
            "idle as found -> idle with ASPM powersave at idle: 40.2 W -> 37.2 W (-3.0 +/- \
             0.4 W, measured in alternating phases) saves 26.28 kWh, GBP 7.88 ± 1.05/yr"
        ),
        "{text}"
    );

    // With a duty cycle measured, the swept configurations are compared at it; the idle
    // measurements have no watts there, and their own comparison stays at idle.
    let h = 3_600_000;
    let m = MeasuredInput {
        utilisation: vec![(0, h, 0.0), (h, 2 * h, 2.0)],
        cpus: 2,
        ..MeasuredInput::default()
    };
    let aspm = r.configs.iter().find(|c| c.paired.is_some()).unwrap();
    let paired = ConfigInput {
        paired: aspm.paired.clone(),
        ..idle("idle with ASPM powersave", 37.1)
    };
    let r = build(&input(
        flat(0.30),
        vec![
            swept("old", 80.0, 30.0),
            swept("new", 40.0, 15.0),
            idle("idle as found", 40.0),
            paired,
        ],
        Some(m),
    ))
    .unwrap();
    assert_eq!(r.headline_mode, DUTY_CYCLE);
    let found = r
        .configs
        .iter()
        .find(|c| c.name == "idle as found")
        .unwrap();
    assert!(found.duty_cycle.is_none(), "{found:?}");
    let modes: Vec<(&str, &str, &str)> = r
        .comparisons
        .iter()
        .map(|c| (c.from.as_str(), c.to.as_str(), c.mode.as_str()))
        .collect();
    assert_eq!(
        modes,
        [
            ("old", "new", DUTY_CYCLE),
            ("idle as found", "idle with ASPM powersave", "idle")
        ]
    );
    assert!(
        r.notes
            .iter()
            .any(|n| n.contains("\"idle as found\": not compared at duty cycle")),
        "{:?}",
        r.notes
    );
}

#[test]
fn config_lists_with_commas_in_names_resolve() {
    let names = vec![
        "2x Opteron 2.2 GHz, 6 disks".to_string(),
        "Athlon 64 1.8 GHz, 3 disks".to_string(),
    ];
    let got = resolve_config_list("athlon,2x Opteron 2.2 GHz, 6 disks", &names).unwrap();
    assert_eq!(got, [names[1].clone(), names[0].clone()]);
    let e = resolve_config_list("pentium", &names)
        .unwrap_err()
        .to_string();
    assert!(e.contains("pentium") && e.contains("Athlon"), "{e}");
}

/// The measured window and its gaps are written with the offset of the tariff's zone (the
/// zone "today" and the daily figures are in), not in UTC.
#[test]
fn the_measured_window_and_its_gaps_are_written_in_the_tariffs_zone() {
    let london = crate::zone::Zone::named("Europe/London").unwrap();
    let h = 3_600_000;
    // 2026-07-01 in London is BST, UTC+1.
    let t0 = ms("2026-06-30T23:00:00Z");
    let m = MeasuredInput {
        from_ms: t0,
        to_ms: t0 + 2 * h,
        energy: vec![(t0, t0 + h, 100.0)],
        covered_ms: h,
        gaps: vec![(t0 + h, t0 + 2 * h, "meter unplugged".into())],
        ..MeasuredInput::default()
    };
    let t = Tariff::simple("GBP", 0.20, 0.0, vec![], london).unwrap();
    let mr = build(&input(t, vec![], Some(m))).unwrap().measured.unwrap();
    assert_eq!(mr.from, "2026-07-01T00:00:00+01:00");
    assert_eq!(mr.to, "2026-07-01T02:00:00+01:00");
    assert_eq!(mr.gaps[0].from, "2026-07-01T01:00:00+01:00");
    // The same instants: a reader that parses them gets what the store holds.
    assert_eq!(
        chrono::DateTime::parse_from_rfc3339(&mr.from)
            .unwrap()
            .timestamp_millis(),
        t0
    );
    // In a UTC tariff, as before.
    let utc = build(&input(
        flat(0.2),
        vec![],
        Some(MeasuredInput {
            from_ms: t0,
            to_ms: t0 + h,
            ..MeasuredInput::default()
        }),
    ))
    .unwrap()
    .measured
    .unwrap();
    assert_eq!(utc.from, "2026-06-30T23:00:00+00:00");
}

/// Without a modelled cost the report says which of the two it needs is missing.
#[test]
fn a_measured_history_without_a_model_says_what_is_missing() {
    let h = 3_600_000;
    let t0 = ms("2026-03-01T00:00:00Z");
    let measured = |utilisation: Vec<(i64, i64, f64)>| MeasuredInput {
        from_ms: t0,
        to_ms: t0 + 2 * h,
        energy: vec![(t0, t0 + h, 100.0)],
        covered_ms: h,
        utilisation,
        cpus: 4,
        ..MeasuredInput::default()
    };
    let note_of = |configs: Vec<ConfigInput>, m: MeasuredInput| {
        let r = build(&input(flat(0.1), configs, Some(m))).unwrap();
        assert!(r.measured.as_ref().unwrap().modelled.is_none());
        r.notes
            .into_iter()
            .find(|n| n.starts_with("no modelled cost"))
            .expect("a note on the missing model")
    };
    let history = vec![(t0, t0 + h, 0.5)];
    // A fleet database: the utilisation is there, the fit is not.
    let n = note_of(vec![], measured(history.clone()));
    assert!(
        n.contains("no sweep fit to model the recorded utilisation"),
        "{n}"
    );
    let n = note_of(vec![], measured(vec![]));
    assert!(n.contains("no sweep fit and no utilisation history"), "{n}");
    let n = note_of(vec![swept("this box", 80.0, 30.0)], measured(vec![]));
    assert!(
        n.contains("no utilisation history to apply the sweep fit to"),
        "{n}"
    );
    let mut named = measured(history);
    named.config = Some("elsewhere".into());
    let n = note_of(vec![swept("this box", 80.0, 30.0)], named);
    assert!(n.contains("(elsewhere) has no sweep fit"), "{n}");
}
