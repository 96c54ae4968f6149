//! The summary that leads the report: every figure restated from the report's own, where
//! it comes from, how sure it is, the change that saves the most, and what to check.

use super::candidates::candidate;
use super::*;
use crate::report::model::summary::{ChangeKind, MAX_CHECKS, Origin, short, summary};

/// DESIGN's two machines, by hand, at 9p.
fn design() -> Vec<ConfigInput> {
    let mut athlon = manual(
        "Athlon 64 1.8 GHz, 3 disks",
        &[
            ("standby", 4.0),
            ("idle", 78.0),
            ("1 loop", 111.0),
            ("2 loops", 111.0),
        ],
    );
    athlon.upgrade_cost = Some(300.0);
    vec![
        manual(
            "2x Opteron 2.2 GHz, 6 disks",
            &[
                ("standby", 40.0),
                ("idle", 240.0),
                ("1 loop", 260.0),
                ("2 loops", 280.0),
            ],
        ),
        athlon,
    ]
}

#[test]
fn the_seeds_two_machines_summarise_as_their_costs_and_the_move_to_the_athlon() {
    let r = build(&input(flat(0.09), design(), None)).unwrap();
    let s = summary(&r);
    // No history: no year of this machine; no standing charge in this tariff.
    assert!(s.year.is_none() && s.standing_charge.is_none());
    assert_eq!(s.configs.len(), 2);
    let opteron = &s.configs[0];
    assert_eq!(opteron.origin, Origin::EnteredByHand);
    // The headline (idle) first, then the others in the report's order, each the report's
    // own figure.
    let modes: Vec<&str> = opteron.modes.iter().map(|m| m.mode.as_str()).collect();
    assert_eq!(modes, ["idle", "standby", "1 loop", "2 loops"]);
    assert!(opteron.modes[0].headline && !opteron.modes[1].headline);
    for m in &opteron.modes {
        let reported = r.configs[0]
            .modes
            .iter()
            .find(|x| x.name == m.mode)
            .unwrap();
        assert_eq!(m.annual_cost.to_bits(), reported.annual_cost.to_bits());
        assert_eq!(m.annual_cost_ci95, None);
    }
    assert_eq!(round_money(opteron.modes[0].annual_cost), 189.22);

    let ch = s.cheapest_change.unwrap();
    assert_eq!(ch.kind, ChangeKind::Configuration);
    assert_eq!(
        ch.change,
        "2x Opteron 2.2 GHz, 6 disks -> Athlon 64 1.8 GHz, 3 disks at idle"
    );
    assert_eq!(
        ch.annual_saving.to_bits(),
        r.comparisons[0].annual_saving.to_bits()
    );
    assert_eq!(round_money(ch.annual_saving), 127.72);
    assert_eq!(ch.price, Some(300.0));
    assert_eq!(ch.payback_years, r.comparisons[0].payback_years);
    assert_eq!(ch.origin, Origin::EnteredByHand);
    assert_eq!(ch.from, "both entered by hand ([[config]])");
    assert!(s.no_change.is_none() && s.checks.is_empty());

    // The same in the rows every text format prints.
    let rows = crate::report::render::summary::rows(&summary(&r), "GBP");
    let change = rows.iter().find(|r| r[0] == "Cheapest change").unwrap();
    assert!(
        change[1]
            == "saves GBP 127.72/yr: 2x Opteron 2.2 GHz, 6 disks -> Athlon 64 1.8 GHz, 3 disks \
                at idle; GBP 300.00 to make, paid back in 2.35 years",
        "{change:?}"
    );
    let athlon = rows
        .iter()
        .find(|r| r[0] == "Athlon 64 1.8 GHz, 3 disks, a year")
        .unwrap();
    assert_eq!(
        athlon[1],
        "idle GBP 61.50/yr; standby GBP 3.15/yr; 1 loop GBP 87.51/yr; 2 loops GBP 87.51/yr"
    );
    assert_eq!(athlon[3], "as entered: no interval");
}

/// Ten minutes at 100 W on a tariff with a standing charge: the year is the measured one,
/// its interval and its standing charge restated, said to rest on under a day.
#[test]
fn a_short_measured_history_is_the_year_with_its_interval_and_under_a_day_said() {
    let t0 = ms("2026-03-01T00:00:00Z");
    let minute = 60_000;
    let m = MeasuredInput {
        from_ms: t0,
        to_ms: t0 + 10 * minute,
        energy: (0..10)
            .map(|k| {
                (
                    t0 + k * minute,
                    t0 + (k + 1) * minute,
                    100.0 + f64::from(i32::from(k % 2 == 1)),
                )
            })
            .collect(),
        covered_ms: 10 * minute,
        cpus: 4,
        power: Some(crate::ledger::interval::power_interval(
            100.5,
            10 * minute,
            &(0..10)
                .map(|k| (100.0 + f64::from(i32::from(k % 2 == 1)), minute))
                .collect::<Vec<_>>(),
            "minute",
            Some(wattson_collectors::meter::Accuracy {
                percent: 1.0,
                plus_w: 0.0,
                source: "datasheet",
            }),
        )),
        ..MeasuredInput::default()
    };
    let tariff = Tariff::simple("GBP", 0.10, 0.50, vec![], crate::zone::Zone::UTC).unwrap();
    let r = build(&input(tariff, vec![], Some(m))).unwrap();
    let measured = r.measured.as_ref().unwrap();
    let s = summary(&r);
    let y = s.year.as_ref().unwrap();
    assert_eq!(y.origin, Origin::MeasuredAtTheWall);
    assert_eq!(y.annual_cost.to_bits(), measured.annual_cost.to_bits());
    assert_eq!(y.annual_cost_ci95, measured.annual_cost_ci95);
    assert_eq!(y.annual_kwh.to_bits(), measured.annual_kwh.to_bits());
    assert!(y.under_a_day);
    assert!(y.from.contains("10 min covered"), "{}", y.from);
    // 0.50 a day: 182.50 a year, beside the energy, and the two together.
    assert!(close(y.standing_charge.unwrap(), 182.5));
    assert!(close(
        y.annual_cost_all_in.unwrap(),
        measured.annual_cost + 182.5
    ));
    // What the year rests on, each the first clause of its warning.
    assert!(!s.checks.is_empty());
    for c in &s.checks {
        assert_eq!(c.about, "the year");
        assert!(
            measured.warnings.iter().any(|w| w.starts_with(&c.text)),
            "{c:?} in {:?}",
            measured.warnings
        );
    }
    assert!(
        s.checks
            .iter()
            .any(|c| c.text == "a year is projected from 10 min"),
        "{:?}",
        s.checks
    );
    let rows = crate::report::render::summary::rows(&s, "GBP");
    assert_eq!(rows[0][0], "A year on your tariff");
    assert!(rows[0][1].contains("with the standing charge (GBP 182.50/yr)"));
    assert!(
        rows[0][3].ends_with("under a day measured"),
        "{:?}",
        rows[0]
    );
    // The standing charge has no row of its own beside the year.
    assert!(!rows.iter().any(|r| r[0] == "Standing charge"));
}

#[test]
fn a_candidate_that_saves_more_than_any_configuration_is_the_cheapest_change() {
    let mut i = input(flat(0.09), design(), None);
    // Against keeping the baseline (the Opteron at idle, 240 W): 60 W saves 180 W, more
    // than the Athlon's 162 W.
    i.candidates = vec![candidate(
        "new box",
        &[(0.0, 60.0), (1.0, 60.0)],
        Some(400.0),
    )];
    let r = build(&i).unwrap();
    let s = summary(&r);
    let ch = s.cheapest_change.unwrap();
    assert_eq!(ch.kind, ChangeKind::Candidate, "{ch:?}");
    assert!(
        ch.change.starts_with("buy new box instead of keeping"),
        "{ch:?}"
    );
    let x = &r.candidates.as_ref().unwrap().candidates;
    let new_box = x.iter().find(|c| c.name == "new box").unwrap();
    assert_eq!(Some(ch.annual_saving), new_box.annual_saving);
    assert_eq!(ch.price, Some(400.0));
    assert_eq!(ch.origin, Origin::Estimated);
    // The comparison and the candidate both save.
    assert_eq!(ch.saving_changes, 2);
}

#[test]
fn no_change_is_named_where_nothing_priced_saves() {
    let r = build(&input(
        flat(0.09),
        vec![manual("only", &[("idle", 50.0)])],
        None,
    ))
    .unwrap();
    let s = summary(&r);
    assert!(s.cheapest_change.is_none());
    assert!(s.no_change.unwrap().starts_with("none found"));
}

#[test]
fn a_warning_on_several_modes_is_one_check_and_the_rest_are_counted() {
    let mut c = manual(
        "box",
        &[("idle", 50.0), ("1 loop", 60.0), ("2 loops", 70.0)],
    );
    for m in &mut c.modes {
        m.warnings = vec![
            "other load present before idle (2.00 CPUs busy): idle may read high".into(),
            format!("{} own warning", m.name),
        ];
    }
    c.modes[0].warnings.extend(
        (0..MAX_CHECKS)
            .map(|k| format!("extra {k}"))
            .collect::<Vec<_>>(),
    );
    let r = build(&input(flat(0.09), vec![c], None)).unwrap();
    let s = summary(&r);
    assert_eq!(s.checks.len(), MAX_CHECKS);
    assert_eq!(s.checks[0].about, "box idle, 1 loop, 2 loops");
    assert_eq!(
        s.checks[0].text,
        "other load present before idle (2.00 CPUs busy)"
    );
    // 1 shared + 3 own + MAX_CHECKS extra, MAX_CHECKS shown.
    assert_eq!(s.more_checks, 4);
}

#[test]
fn a_check_is_its_warnings_first_clause_cut_at_a_word() {
    assert_eq!(
        short("a year is projected from 14 min: less than a day, so a day's pattern"),
        "a year is projected from 14 min"
    );
    // A colon too early leaves the whole.
    assert_eq!(short("note: it is so"), "note: it is so");
    let long = "word ".repeat(40);
    let cut = short(&long);
    assert!(cut.ends_with("word…") && cut.chars().count() <= 90, "{cut}");
}
