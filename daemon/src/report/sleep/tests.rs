use std::path::Path;

use super::*;
use crate::analysis::sleep::{HourOfWeek, Thresholds, WEEK_HOURS};
use crate::config::{Config, TariffConfig};

/// Idle at 30 W from 01:00 to 07:00, 80 W and busy otherwise.
fn nights() -> Vec<HourOfWeek> {
    (0..WEEK_HOURS)
        .map(|h| {
            let night = (1..7).contains(&(h % 24));
            HourOfWeek {
                watts: Some(if night { 30.0 } else { 80.0 }),
                cpu_busy: Some(if night { 0.0 } else { 0.5 }),
                ..HourOfWeek::default()
            }
        })
        .collect()
}

fn input(standby: Option<f64>, wake_wh: Option<f64>) -> SleepInput {
    SleepInput {
        hours: nights(),
        history: "a test week".into(),
        covered_hours: 4.0 * WEEK_HOURS as f64,
        thresholds: Thresholds::default(),
        standby: standby.map(|w| (w, Some(0.2), "measured".to_owned())),
        wake: wake_wh.map(|wh| (wh, "entered by hand: [sleep] wake_wh".to_owned())),
    }
}

fn flat(price: f64) -> Tariff {
    TariffConfig {
        currency: "GBP".into(),
        price_per_kwh: price,
        timezone: Some(crate::zone::Zone::UTC),
        ..TariffConfig::default()
    }
    .build()
    .unwrap()
}

/// Monday 2025-01-13 00:00 UTC.
const MONDAY: i64 = 1_736_726_400_000;

#[test]
fn the_saving_is_idle_less_standby_over_the_slept_hours_at_their_price() {
    let r = build(&input(Some(4.0), Some(3.0)), &flat(0.2), MONDAY).unwrap();
    assert_eq!(r.windows, ["01:00-07:00 every night"]);
    assert_eq!(r.schedule.as_deref(), Some("standby 01:00-07:00; idle"));
    assert_eq!((r.hours_a_week, r.hours_a_year), (42.0, 2190.0));
    let kwh = 26.0 * 6.0 * 365.0 / 1000.0;
    assert!((r.annual_kwh_saved.unwrap() - kwh).abs() < 1e-9, "{r:?}");
    assert!((r.annual_saving.unwrap() - kwh * 0.2).abs() < 1e-9, "{r:?}");
    // 365 resumes of 3 Wh at 0.2.
    let wake = 365.0 * 3.0 / 1000.0 * 0.2;
    assert!((r.annual_wake_cost.unwrap() - wake).abs() < 1e-9, "{r:?}");
    assert!((r.annual_net_saving.unwrap() - (kwh * 0.2 - wake)).abs() < 1e-9);
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    let text = lines(&r, "GBP").join("\n");
    assert!(
        text.contains("idle 30.0 W less standby 4.0 W +/- 0.2 (measured)"),
        "{text}"
    );
    assert!(text.contains("net saving GBP"), "{text}");
}

#[test]
fn without_standby_or_above_idle_it_says_so_and_invents_nothing() {
    let r = build(&input(None, None), &flat(0.2), MONDAY).unwrap();
    assert_eq!(r.windows, ["01:00-07:00 every night"]);
    assert_eq!(r.annual_saving, None);
    assert_eq!(r.standby_from, standby::HOW_TO_GET_ONE);
    assert!(r.wake_from.starts_with("not measured"), "{}", r.wake_from);
    let text = lines(&r, "GBP").join("\n");
    assert!(
        text.contains("no saving priced: no standby figure"),
        "{text}"
    );
    let r = build(&input(Some(35.0), None), &flat(0.2), MONDAY).unwrap();
    assert_eq!(r.annual_saving, Some(0.0));
    assert!(
        r.warnings[0].contains("would save nothing"),
        "{:?}",
        r.warnings
    );
    let mut short = input(Some(4.0), None);
    short.hours.iter_mut().skip(20).for_each(|h| h.watts = None);
    let r = build(&short, &flat(0.2), MONDAY).unwrap();
    assert!(
        r.unavailable
            .unwrap()
            .contains("no power for 4 of the day's 24 hours")
    );
}

#[test]
fn the_standby_figure_comes_from_the_flag_then_sleep_then_this_hosts_config() {
    let config = |text: &str| Config::from_toml(text, Path::new("t.toml")).unwrap();
    let c = config(
        "[host]\nname = \"nas\"\n[sleep]\nstandby_watts = 3.0\n\
         [[config]]\nname = \"nas\"\nmodes = { standby = 5.0, idle = 30.0 }\n\
         [[config]]\nname = \"old\"\nmodes = { standby = 40.0, idle = 240.0 }\n",
    );
    let from = |c: &Config, flag| standby::standby_watts(c, flag).map(|s| (s.0, s.2));
    assert_eq!(
        from(&c, Some(2.0)),
        Some((2.0, "given with --standby-watts".into()))
    );
    assert_eq!(
        from(&c, None),
        Some((3.0, "given in [sleep] standby_watts".into()))
    );
    let c = config(
        "[host]\nname = \"nas\"\n[[config]]\nname = \"nas\"\nmodes = { standby = 5.0 }\n\
         [[config]]\nname = \"old\"\nmodes = { standby = 40.0 }\n",
    );
    assert_eq!(from(&c, None).unwrap().0, 5.0);
    let c = config(
        "[host]\nname = \"nas\"\n[sleep]\nconfig = \"old\"\n[[config]]\nname = \"nas\"\n\
         modes = { standby = 5.0 }\n[[config]]\nname = \"old\"\nmodes = { standby = 40.0 }\n",
    );
    assert_eq!(from(&c, None).unwrap().0, 40.0);
    // Two configurations with a standby mode and neither this host's: none is guessed.
    let c = config(
        "[host]\nname = \"nas\"\n[[config]]\nname = \"a\"\nmodes = { standby = 5.0 }\n\
         [[config]]\nname = \"b\"\nmodes = { standby = 40.0 }\n",
    );
    assert_eq!(from(&c, None), None);
}
