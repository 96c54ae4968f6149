use super::*;

fn fixture(name: &str) -> String {
    std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/candidates")
            .join(name),
    )
    .unwrap()
}

#[test]
fn the_full_curve_form_gives_eleven_points_and_the_rows_fields() {
    let c = parse(&fixture("specpower.csv"), "specpower.csv").unwrap();
    assert_eq!(c.len(), 3);
    let a = &c[0];
    assert_eq!(a.name, "Acme Microserver M10");
    assert_eq!(a.origin, "specpower.csv line 2");
    assert_eq!(a.curve.kind(), CurveKind::Spec);
    assert_eq!(a.curve.points().len(), 11);
    assert_eq!(a.curve.idle_watts(), 18.2);
    assert_eq!(a.curve.watts_at(0.5), 38.9);
    assert_eq!(a.curve.max_ssj_ops(), Some(420_000.0));
    assert_eq!(
        (a.cores, a.threads, a.memory_gb),
        (Some(4), Some(4), Some(16.0))
    );
    assert_eq!(a.published.as_deref(), Some("Mar-2024"));
    assert_eq!(a.overall_ssj_ops_per_watt, Some(5205.0));
    assert!(!a.curve.interpolated());
    // A quoted vendor with a comma stays one field.
    assert_eq!(c[1].vendor.as_deref(), Some("Bolt Systems, Inc."));
}

#[test]
fn the_two_point_form_is_interpolated_and_says_so() {
    let c = parse(&fixture("specpower-two-point.csv"), "two.csv").unwrap();
    assert_eq!(c.len(), 2);
    assert_eq!(c[0].curve.kind(), CurveKind::SpecTwoPoint);
    assert!(c[0].curve.interpolated());
    assert!((c[0].curve.watts_at(0.5) - 58.0).abs() < 1e-12);
    assert!(c[0].curve.describe().contains("interpolated"));
}

#[test]
fn hostile_files_are_refused_whole_with_line_and_reason() {
    let two = "System,avg. watts @ 100%,avg. watts @ active idle\n";
    let cases: Vec<(String, usize, &str)> = vec![
        (String::new(), 1, "empty"),
        ("Name,Watts\nx,1\n".into(), 1, "no \"System\" column"),
        (
            "System,avg. watts @ 100%,avg. watts @ 50%,avg. watts @ active idle\nx,1,2,3\n".into(),
            1,
            "at active idle and 100 % only",
        ),
        (format!("{two}a,100,50\nb,NaN,50\n"), 3, "not watts"),
        (format!("{two}a,100,50\nb,-5,50\n"), 3, "not a power"),
        (format!("{two}a,100,50\nb,1e9,50\n"), 3, "not a power"),
        (format!("{two}a,100,50\nb,0,0\n"), 3, "above 0 W"),
        (format!("{two}a,100\n"), 2, "2 fields, the header has 3"),
        (format!("{two}a,100,\n"), 2, "no watts"),
        (format!("{two}\"a,100,50\n"), 2, "never closed"),
        (format!("{two},100,50\n"), 2, "no system name"),
        (format!("{two}a\u{7},100,50\n"), 2, "control character"),
        (two.to_owned(), 1, "no rows"),
        (
            "System,avg. watts @ 100%,Average watts @ 100% of target load,avg. watts @ active idle\n"
                .into(),
            1,
            "the same figure",
        ),
    ];
    for (text, line, why) in cases {
        let e = parse(&text, "f.csv").unwrap_err();
        assert_eq!(e.line, line, "{text:?}: {e}");
        assert!(e.to_string().contains(why), "{text:?}: {e}");
    }
    // The column is named where one is at fault.
    let e = parse(&format!("{two}b,lots,50\n"), "f.csv").unwrap_err();
    assert_eq!(e.column.as_deref(), Some("avg. watts @ 100%"));
    assert!(
        e.to_string()
            .starts_with("line 2, column \"avg. watts @ 100%\""),
        "{e}"
    );
}

#[test]
fn a_system_named_twice_keeps_both_by_line() {
    let c = parse(
        "System,avg. watts @ 100%,avg. watts @ active idle\nbox,100,50\nbox,120,55\n",
        "f.csv",
    )
    .unwrap();
    assert_eq!(c[0].name, "box");
    assert_eq!(c[1].name, "box #3");
}
