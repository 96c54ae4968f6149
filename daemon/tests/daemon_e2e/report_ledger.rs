//! What the ledger adds to a report, in every format: warnings next to the figures they
//! weaken (and in the JSON `notes`), the measured figure's interval, the payback range, and
//! the effective mean price in the title under time-of-use.

// Helpers outside #[test] functions unwrap too: a failure is the test failing.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use chrono::{DateTime, NaiveDate, NaiveTime, Utc};
use wattson::ledger::interval::power_interval;
use wattson::report::{
    self, ConfigInput, ConfigKind, ConfigStatus, FitInput, Format, LevelInput, MeasuredInput,
    ModeInput, ReportInput, ReportOptions,
};
use wattson::tariff::{Period, Tariff};

const FORMATS: [Format; 5] = [
    Format::Table,
    Format::Markdown,
    Format::Csv,
    Format::Json,
    Format::Html,
];

const OTHER_LOAD: &str = "other load present before idle: measured anyway";
const TIME_CAP: &str = "time cap of 90.0 s per level (settling included) reached";

fn level(loops: u32, watts: f64, warnings: &[&str]) -> LevelInput {
    LevelInput {
        kind: "spin".into(),
        loops,
        mean_w: watts,
        ci95_w: 0.5,
        residency: BTreeMap::new(),
        mean_mhz: None,
        ops_per_s: None,
        joules_per_op: None,
        warnings: warnings.iter().map(|w| (*w).to_owned()).collect(),
    }
}

/// A sweep of only two levels, idle measured with other load present and the loop at the
/// time cap.
fn swept() -> ConfigInput {
    ConfigInput {
        name: "basket".into(),
        kind: ConfigKind::Sweep,
        host: Some("basket".into()),
        fingerprint: None,
        description: None,
        modes: vec![],
        fit: Some(FitInput {
            idle_watts: 40.0,
            idle_ci95: Some(0.5),
            watts_per_loop: 15.0,
            watts_per_loop_ci95: Some(0.5),
            r2: 1.0,
            notes: vec![],
            kind: "spin".into(),
        }),
        levels: vec![level(0, 40.0, &[OTHER_LOAD]), level(1, 55.0, &[TIME_CAP])],
        upgrade_cost: None,
        status: ConfigStatus::Complete,
        paired: None,
        schedule: None,
    }
}

fn manual() -> ConfigInput {
    ConfigInput {
        name: "old box".into(),
        kind: ConfigKind::Manual,
        host: None,
        fingerprint: None,
        description: None,
        modes: vec![ModeInput {
            name: "idle".into(),
            watts: 90.0,
            ci95_watts: Some(1.0),
            warnings: vec![],
        }],
        fit: None,
        levels: vec![],
        upgrade_cost: None,
        status: ConfigStatus::Complete,
        paired: None,
        schedule: None,
    }
}

/// Two hours measured at 50 W by a 1 % meter.
fn measured(t0: i64) -> MeasuredInput {
    let h = 3_600_000;
    let acc = wattson_collectors::meter::Protocol::Pzem004t.accuracy();
    MeasuredInput {
        from_ms: t0,
        to_ms: t0 + 2 * h,
        energy: vec![(t0, t0 + h, 50.0), (t0 + h, t0 + 2 * h, 50.0)],
        covered_ms: 2 * h,
        source: Some("meter:wall".into()),
        power: Some(power_interval(
            50.0,
            2 * h,
            &[(49.5, 1_800_000), (50.5, 1_800_000), (50.0, 3_600_000)],
            "hour",
            acc,
        )),
        ..MeasuredInput::default()
    }
}

fn input(tariff: Tariff) -> ReportInput {
    let now: DateTime<Utc> = "2026-03-02T12:00:00Z".parse().unwrap();
    let mut options = ReportOptions::new(NaiveDate::from_ymd_opt(2026, 3, 1).unwrap());
    options.upgrade_cost = Some(300.0);
    ReportInput {
        generated_at: now,
        host: Some("basket".into()),
        tariff,
        configs: vec![manual(), swept()],
        measured: Some(measured(
            "2026-03-01T00:00:00Z"
                .parse::<DateTime<Utc>>()
                .unwrap()
                .timestamp_millis(),
        )),
        regression: vec![],
        gpus: vec![],
        idle: wattson::report::idle::IdleInput::default(),
        candidates: Vec::new(),
        options,
    }
}

fn flat() -> Tariff {
    Tariff::simple("GBP", 0.25, 0.0, vec![], wattson::zone::Zone::UTC).unwrap()
}

#[test]
fn warnings_travel_with_their_figures_into_every_format_and_the_notes() {
    let r = report::build(&input(flat())).unwrap();
    let idle = &r.configs[1].modes[0];
    assert_eq!(idle.warnings, [OTHER_LOAD]);
    assert_eq!(r.configs[1].modes[1].warnings, [TIME_CAP]);
    assert!(
        r.configs[1].fit.as_ref().unwrap().notes[0].contains("two levels"),
        "{:?}",
        r.configs[1].fit
    );
    let m = r.measured.as_ref().unwrap();
    assert!(m.warnings.iter().any(|w| w.contains("less than a day")));
    for needle in [OTHER_LOAD, TIME_CAP, "two levels", "less than a day"] {
        assert!(
            r.notes.iter().any(|n| n.contains(needle)),
            "{needle} not in notes {:?}",
            r.notes
        );
        for f in FORMATS {
            // CSV has a row per mode and for the measured figure, but none for a fit.
            if needle == "two levels" && f == Format::Csv {
                continue;
            }
            let text = report::render(&r, f).unwrap();
            // Markdown escapes underscores; none of these needles has one.
            assert!(text.contains(needle), "{needle} not in {f:?}:\n{text}");
        }
    }
    // In CSV the level's warning is on its own row.
    let csv = report::render(&r, Format::Csv).unwrap();
    let idle_row = csv
        .lines()
        .find(|l| l.starts_with("basket,sweep,idle,"))
        .unwrap();
    assert!(idle_row.ends_with(OTHER_LOAD), "{idle_row}");
}

#[test]
fn the_measured_figure_carries_its_interval_and_the_payback_its_range() {
    let r = report::build(&input(flat())).unwrap();
    let m = r.measured.as_ref().unwrap();
    // 1 % of 50 W from the datasheet, plus the spread of the blocks.
    assert!((m.accuracy_watts.unwrap() - 0.5).abs() < 1e-12);
    let ci = m.mean_watts_ci95.unwrap();
    assert!(ci > 0.5, "{ci}");
    assert!((m.annual_kwh_ci95.unwrap() - ci * 8.76).abs() < 1e-9);
    let table = report::render(&r, Format::Table).unwrap();
    assert!(table.contains("meter accuracy 0.5 W"), "{table}");
    let c = &r.comparisons[0];
    let (lo, p, hi) = (
        c.payback_years_low.unwrap(),
        c.payback_years.unwrap(),
        c.payback_years_high.unwrap(),
    );
    assert!(lo < p && p < hi, "{lo} {p} {hi}");
    assert!(table.contains(" years ("), "{table}");
}

#[test]
fn a_time_of_use_title_names_the_effective_mean_price() {
    let night = Period {
        start: NaiveTime::MIN,
        end: NaiveTime::from_hms_opt(6, 0, 0).unwrap(),
        price_per_kwh: 0.05,
    };
    let t = Tariff::simple("GBP", 0.25, 0.0, vec![night], wattson::zone::Zone::UTC).unwrap();
    let r = report::build(&input(t)).unwrap();
    // 6 h at 0.05 and 18 h at 0.25: 0.2 per kWh on average.
    assert!((r.mean_price_per_kwh - 0.2).abs() < 1e-9);
    for f in [Format::Table, Format::Markdown, Format::Html] {
        let text = report::render(&r, f).unwrap();
        // (HTML escapes the apostrophe.)
        assert!(
            text.contains("mean price 0.2000 GBP/kWh (the configured prices over the year"),
            "{f:?}:\n{text}"
        );
    }
    let flat = report::build(&input(flat())).unwrap();
    let text = report::render(&flat, Format::Table).unwrap();
    assert!(text.contains("modelled at 0.2500 GBP/kWh"), "{text}");
}
