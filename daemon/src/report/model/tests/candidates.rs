//! Candidate machines in the report: keeping this machine against each candidate, their
//! CO2, ranking, and the performance ratio.

use super::*;

pub(super) fn candidate(
    name: &str,
    points: &[(f64, f64)],
    price: Option<f64>,
) -> crate::candidate::Candidate {
    use crate::analysis::candidate::{Curve, CurveKind, CurvePoint};
    let curve = Curve::new(
        points
            .iter()
            .map(|&(load, watts)| CurvePoint {
                load,
                watts,
                ssj_ops: None,
            })
            .collect(),
        if points.len() == 2 {
            CurveKind::SpecTwoPoint
        } else {
            CurveKind::Spec
        },
    )
    .unwrap();
    let mut c = crate::candidate::Candidate::new(name.into(), curve, "test".into());
    c.price = price;
    c
}

#[test]
fn the_seeds_old_box_against_a_60_w_candidate_saves_141_91_and_pays_back_in_2_8_years() {
    let mut i = input(
        flat(0.09),
        vec![manual("old box", &[("idle", 240.0)])],
        None,
    );
    i.candidates = vec![candidate(
        "new box",
        &[(0.0, 60.0), (1.0, 60.0)],
        Some(400.0),
    )];
    let r = build(&i).unwrap();
    let c = r.candidates.unwrap();
    let keep = c.keep.unwrap();
    assert_eq!(keep.name, "old box");
    assert_eq!(round_money(keep.annual_cost), 189.22);
    let x = &c.candidates[0];
    assert_eq!(round_money(x.annual_saving.unwrap()), 141.91);
    assert_eq!(format!("{:.1}", x.payback_years.unwrap()), "2.8");
    assert!(x.interpolated);
}

#[test]
fn a_candidates_co2_is_set_beside_what_it_saves_against_keeping_this_machine() {
    let mut i = input(
        flat(0.09),
        vec![manual("old box", &[("idle", 240.0)])],
        None,
    );
    i.options.co2_g_per_kwh = Some(200.0);
    i.candidates = vec![candidate(
        "new box",
        &[(0.0, 60.0), (1.0, 60.0)],
        Some(400.0),
    )];
    let c = build(&i).unwrap().candidates.unwrap();
    // 2102.4 kWh and 525.6 kWh a year at 200 g/kWh.
    assert!(close(
        c.keep.as_ref().unwrap().annual_co2_kg.unwrap(),
        420.48
    ));
    let x = &c.candidates[0];
    assert!(close(x.annual_co2_kg.unwrap(), 105.12));
    assert!(close(x.annual_co2_saved_kg.unwrap(), 315.36));
    let text = crate::report::render::candidate_lines(&c, "GBP").join("\n");
    assert!(
        text.contains("2102.400 kWh, GBP 189.22 a year, 420.5 kg CO2"),
        "{text}"
    );
    assert!(
        text.contains("105.1 kg CO2 a year, 315.4 kg CO2 less than keeping this machine"),
        "{text}"
    );
}

#[test]
fn a_candidate_that_cannot_carry_the_load_is_not_ranked_as_cheaper() {
    let h = 3_600_000;
    let t0 = ms("2026-03-01T00:00:00Z");
    // 4 CPUs, 3 busy for 24 h: 75 % of this machine's maximum.
    let measured = MeasuredInput {
        from_ms: t0,
        to_ms: t0 + 24 * h,
        energy: (0..24)
            .map(|k| (t0 + k * h, t0 + (k + 1) * h, 100.0))
            .collect(),
        covered_ms: 24 * h,
        utilisation: (0..24)
            .map(|k| (t0 + k * h, t0 + (k + 1) * h, 3.0))
            .collect(),
        cpus: 4,
        ..MeasuredInput::default()
    };
    let mut i = input(flat(0.1), vec![], Some(measured));
    let mut small = candidate("small", &[(0.0, 5.0), (1.0, 20.0)], Some(100.0));
    small.perf_ratio = Some(0.5);
    let big = candidate("big", &[(0.0, 30.0), (0.5, 50.0), (1.0, 90.0)], Some(100.0));
    i.candidates = vec![small, big];
    let c = build(&i).unwrap().candidates.unwrap();
    // Keeping this machine: 100 W measured, 876 kWh a year.
    assert!(close(c.keep.as_ref().unwrap().annual_kwh, 876.0));
    let (first, second) = (&c.candidates[0], &c.candidates[1]);
    assert_eq!((first.name.as_str(), first.rank), ("big", Some(1)));
    // big at 75 %: 70 W; 613.2 kWh; GBP 61.32.
    assert!(close(first.annual_kwh, 613.2));
    assert_eq!(round_money(first.annual_cost), 61.32);
    assert_eq!(round_money(first.annual_saving.unwrap()), 26.28);
    // small would need 150 %: cheaper on paper, but not ranked and said so.
    assert_eq!((second.name.as_str(), second.rank), ("small", None));
    assert!(!second.carries);
    assert!(second.annual_cost < first.annual_cost);
    assert!(second.warnings.iter().any(|w| w.contains("cannot carry")));
    assert!(close(second.peak_load, 1.5));
}

#[test]
fn a_candidates_perf_ratio_comes_from_ssj_ops_against_this_machines_own_and_says_so() {
    use crate::analysis::candidate::{Curve, CurveKind, CurvePoint};
    let h = 3_600_000;
    let t0 = ms("2026-03-01T00:00:00Z");
    // 4 CPUs, 2 busy for 24 h: 50 % of this machine's maximum.
    let measured = MeasuredInput {
        from_ms: t0,
        to_ms: t0 + 24 * h,
        energy: (0..24)
            .map(|k| (t0 + k * h, t0 + (k + 1) * h, 100.0))
            .collect(),
        covered_ms: 24 * h,
        utilisation: (0..24)
            .map(|k| (t0 + k * h, t0 + (k + 1) * h, 2.0))
            .collect(),
        cpus: 4,
        ..MeasuredInput::default()
    };
    let point = |load: f64, watts: f64, ops: Option<f64>| CurvePoint {
        load,
        watts,
        ssj_ops: ops,
    };
    let curve = Curve::new(
        vec![
            point(0.0, 30.0, Some(0.0)),
            point(0.5, 50.0, Some(1_000_000.0)),
            point(1.0, 90.0, Some(2_000_000.0)),
        ],
        CurveKind::Spec,
    )
    .unwrap();
    let spec = crate::candidate::Candidate::new("spec".into(), curve.clone(), "test".into());
    let mut given = crate::candidate::Candidate::new("given".into(), curve, "test".into());
    given.perf_ratio = Some(1.0);
    let mut i = input(flat(0.1), vec![], Some(measured));
    i.candidates = vec![spec, given];
    i.options.this_ssj_ops = Some(1_000_000.0);
    let c = build(&i).unwrap().candidates.unwrap();
    let by = |n: &str| c.candidates.iter().find(|x| x.name == n).unwrap();
    // 2,000,000 ssj_ops over this machine's 1,000,000: ratio 2, so 25 % of its maximum.
    let s = by("spec");
    assert_eq!(
        (s.perf_ratio, s.perf_ratio_from.as_str()),
        (2.0, "from ssj_ops")
    );
    assert!(close(s.mean_load, 0.25));
    // 40 W all year: 350.4 kWh.
    assert!(close(s.annual_kwh, 350.4));
    assert!(
        s.warnings
            .iter()
            .any(|w| w.contains("from ssj_ops") && w.contains("not measured here")),
        "{:?}",
        s.warnings
    );
    // A ratio the user gave wins, and what ssj_ops would give is said.
    let g = by("given");
    assert_eq!((g.perf_ratio, g.perf_ratio_from.as_str()), (1.0, "given"));
    assert!(g.warnings.iter().any(|w| w.contains("would give 2.00")));
    // Without this machine's own figure: assumed, and the way to give it is named.
    i.options.this_ssj_ops = None;
    let c = build(&i).unwrap().candidates.unwrap();
    let s = c.candidates.iter().find(|x| x.name == "spec").unwrap();
    assert_eq!((s.perf_ratio, s.perf_ratio_from.as_str()), (1.0, "assumed"));
    assert!(s.warnings.iter().any(|w| w.contains("--this-ssj-ops")));
}
