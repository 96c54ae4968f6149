use super::*;
use wattson_collectors::plausibility::Limits;

fn r(source: &SourceId, metric: Metric, channel: &str, ts: i64, value: f64) -> LiveReading {
    LiveReading {
        source: source.clone(),
        metric,
        channel: channel.into(),
        ts_ms: ts,
        value,
    }
}

fn wall() -> SourceId {
    SourceId::meter("wall")
}

fn extras() -> StateExtras {
    StateExtras {
        currency: "GBP".into(),
        cost_today: Some(0.5),
        cost_month: Some(7.25),
        cost_total: Some(12.5),
        annual_projection: Some(189.22),
        annual_basis: Some(
            "a year on your tariff: this machine's load in each hour of the week, from \
             168.0 h measured in the last 7 days"
                .into(),
        ),
        standing_charge_annual: Some(182.5),
        price_now: Some((0.2451, "mqtt".into())),
        standby_watts: Some((4.02, Some(0.29))),
        energy_today_kwh: Some(2.4),
        energy_total_kwh: Some(1.2345),
        energy_ts_ms: Some(1000),
        publishes: 0,
        mode: Some("idle".into()),
        mode_options: vec![],
        primary: PrimaryPower::default(),
        meter_counters: vec![MeterCounters {
            id: "wall".into(),
            good: 10,
            crc_errors: 1,
            timeouts: 2,
            implausible: 0,
            exceptions: 0,
        }],
        idle_regression: None,
        services: Vec::new(),
        wattson_itself: None,
        wakeups: None,
        disks: Vec::new(),
        estimated: None,
        sleep: None,
    }
}

#[test]
fn state_carries_the_costliest_services_as_estimates_and_parses_back() {
    let mut x = extras();
    x.services = vec![ServiceState {
        kind: "service".into(),
        name: "jellyfin.service".into(),
        cpu_share: 50.0,
        watts: Some(7.5),
        watts_ci95: Some(0.2),
        cost_per_year: Some(19.71),
    }];
    let s = build(
        &[r(&SourceId::meter("wall"), Metric::Power, "", 1000, 55.0)],
        &[],
        &x,
        10.0,
    )
    .unwrap();
    assert_eq!(s.json["services"][0]["name"], "jellyfin.service");
    assert_eq!(s.json["services"][0]["watts_ci95"], 0.2);
    assert!(s.json.get("wattson_itself").is_none());
    assert_eq!(
        parse_payload(s.json.to_string().as_bytes()).unwrap(),
        s.payload
    );
}

#[test]
fn state_carries_means_energy_cost_and_cpu() {
    let means = vec![
        r(&wall(), Metric::Power, "", 1000, 240.0),
        r(&wall(), Metric::Voltage, "", 1000, 231.5),
        r(&wall(), Metric::EnergyTotal, "", 1000, 1000.0),
        r(&SourceId::Rapl, Metric::Power, "package-0", 900, 15.0),
        r(&SourceId::Cpu, Metric::CpuBusy, channel::ALL, 990, 0.25),
        r(
            &SourceId::Cpu,
            Metric::CoreFrequency,
            channel::MEAN,
            990,
            2200.0,
        ),
        r(
            &SourceId::Cpu,
            Metric::IdleResidency,
            &channel::all("POLL"),
            990,
            0.01,
        ),
        r(
            &SourceId::Cpu,
            Metric::IdleResidency,
            &channel::all("C1E"),
            990,
            0.2,
        ),
        r(
            &SourceId::Cpu,
            Metric::IdleResidency,
            &channel::all("C1"),
            990,
            0.1,
        ),
        r(
            &SourceId::Cpu,
            Metric::IdleResidency,
            &channel::all("C6"),
            990,
            0.6,
        ),
    ];
    let latest = vec![r(&wall(), Metric::EnergyTotal, "", 1000, 1234.5)];
    let s = build(&means, &latest, &extras(), 10.0).unwrap();
    let j = &s.json;
    assert_eq!(s.ts_ms, 1000);
    assert_eq!(j["ts"], 1000);
    assert_eq!(j["power"], 240.0);
    assert_eq!(j["power_source"], wall().to_string());
    assert_eq!(j["energy"], 1.2345);
    assert_eq!(j["energy_ts"], 1000);
    assert_eq!(j["cost_total"], 12.5);
    assert_eq!(j["voltage"], 231.5);
    assert!(j.get("current").is_none());
    assert_eq!(j["cpu_utilisation"], 25.0);
    assert_eq!(j["cstate_deepest"], "C6");
    assert_eq!(j["cstate_deepest_residency"], 60.0);
    assert_eq!(j["cost_annual_projection"], 189.22);
    assert_eq!(j["cost_annual_standing_charge"], 182.5);
    assert_eq!(j["cost_annual_all_in"], 371.72);
    assert_eq!(j["price"], 0.2451);
    assert_eq!(j["price_source"], "mqtt");
    assert_eq!(j["meters"]["wall"]["timeouts"], 2);
    assert_eq!(j["mode"], "idle");
    // The payload round-trips through the collector's parser, energy as the latest value.
    assert_eq!(parse_payload(j.to_string().as_bytes()).unwrap(), s.payload);
    let (ts, samples) = parse(j.to_string().as_bytes()).unwrap();
    assert_eq!(ts, 1000);
    assert_eq!(samples.len(), means.len());
    assert!(samples.iter().all(|s| s.ts_ms == 1000));
    let e = samples
        .iter()
        .find(|s| s.metric == Metric::EnergyTotal)
        .unwrap();
    assert_eq!(e.value, 1234.5);
}

#[test]
fn the_deepest_package_state_reached_and_its_share() {
    let pkg = |state: &str, share: f64| {
        r(
            &SourceId::Cpu,
            Metric::PackageResidency,
            &channel::all(state),
            990,
            share,
        )
    };
    let means = vec![
        r(&SourceId::meter("wall"), Metric::Power, "", 1000, 30.0),
        pkg("PC2", 0.3),
        pkg("PC6", 0.45),
        // Below the 0.1 % that counts as reached.
        pkg("PC10", 0.0005),
        r(
            &SourceId::Cpu,
            Metric::PackageResidency,
            "package1/PC8",
            990,
            0.9,
        ),
    ];
    let j = build(&means, &[], &extras(), 10.0).unwrap().json;
    assert_eq!(j["package_cstate_deepest"], "PC6");
    assert_eq!(j["package_cstate_deepest_residency"], 45.0);
    let none = vec![
        r(&SourceId::meter("wall"), Metric::Power, "", 1000, 30.0),
        pkg("PC2", 0.0),
    ];
    let j = build(&none, &[], &extras(), 10.0).unwrap().json;
    assert_eq!(j["package_cstate_deepest"], "none");
    assert_eq!(j["package_cstate_deepest_residency"], 0.0);
    let without = vec![r(&SourceId::meter("wall"), Metric::Power, "", 1000, 30.0)];
    let j = build(&without, &[], &extras(), 10.0).unwrap().json;
    assert!(j.get("package_cstate_deepest").is_none());
}

#[test]
fn no_samples_means_no_state() {
    assert!(build(&[], &[], &extras(), 10.0).is_none());
}

#[test]
fn rapl_is_the_power_source_without_a_meter() {
    let means = vec![r(&SourceId::Rapl, Metric::Power, "", 5, 12.0)];
    let s = build(&means, &[], &StateExtras::default(), 1.0).unwrap();
    assert_eq!(s.json["power_source"], SourceId::Rapl.to_string());
    assert!(s.json.get("energy").is_none());
    assert!(s.json.get("currency").is_none());
}

#[test]
fn an_estimated_wall_is_published_labelled_with_its_error() {
    let means = vec![
        r(&SourceId::Rapl, Metric::Power, "", 5, 12.0),
        r(&SourceId::Estimate, Metric::Power, "", 5, 43.2),
        r(&SourceId::Estimate, Metric::Power, "error", 5, 1.5),
    ];
    let j = build(&means, &[], &StateExtras::default(), 1.0)
        .unwrap()
        .json;
    assert_eq!(j["power"], 43.2);
    assert_eq!(j["power_source"], SourceId::Estimate.to_string());
    assert_eq!(j["power_estimate"], true);
    assert_eq!(j["power_error"], 1.5);
    // A real meter wins, and its power is not marked as an estimate.
    let mut with_meter = means.clone();
    with_meter.push(r(&wall(), Metric::Power, "", 5, 44.0));
    let j = build(&with_meter, &[], &StateExtras::default(), 1.0)
        .unwrap()
        .json;
    assert_eq!(j["power_source"], wall().to_string());
    assert!(j.get("power_estimate").is_none() && j.get("power_error").is_none());
}

#[test]
fn primary_meter_is_honoured() {
    let means = vec![
        r(&SourceId::meter("a"), Metric::Power, "", 5, 1.0),
        r(&SourceId::meter("b"), Metric::Power, "", 5, 2.0),
    ];
    let mut x = StateExtras::default();
    assert_eq!(build(&means, &[], &x, 1.0).unwrap().json["power"], 1.0);
    x.primary = PrimaryPower::new(Some(SourceId::meter("b")));
    assert_eq!(build(&means, &[], &x, 1.0).unwrap().json["power"], 2.0);
}

#[test]
fn malformed_payloads_are_errors_not_panics() {
    assert!(matches!(parse(b"not json"), Err(StateParseError::Json(_))));
    assert!(matches!(
        parse(br#"{"ts":5,"power":"lots"}"#),
        Err(StateParseError::Json(_))
    ));
    assert_eq!(parse(br#"{"power":1}"#), Err(StateParseError::Ts));
    assert_eq!(parse(br#"{"ts":"x"}"#), Err(StateParseError::Ts));
    assert_eq!(
        parse(br#"{"ts":5,"series":[["cpu","cpu_busy","all","x"]]}"#),
        Err(StateParseError::Series(0))
    );
    assert_eq!(
        parse(br#"{"ts":5,"series":{}}"#),
        Err(StateParseError::Series(0))
    );
    let big = vec![b' '; MAX_STATE_BYTES + 1];
    assert!(matches!(parse(&big), Err(StateParseError::TooLarge(_))));
    // Unknown metrics from a newer publisher are skipped, not fatal.
    let (_, s) =
        parse(br#"{"ts":5,"series":[["x","warp_drive","",1],["cpu","cpu_busy","all",0.5]]}"#)
            .unwrap();
    assert_eq!(s.len(), 1);
}

/// Regression: fleet states with -1e12 W or 1e300 W were stored, and one state in the
/// year 9999 made every later state of its host "not after the newest stored".
#[test]
fn implausible_fleet_values_and_timestamps_are_rejected() {
    let now = 1_767_225_600_000;
    let limits = Limits::default();
    let payload = |ts: i64, w: f64| {
        format!(
            r#"{{"ts":{ts},"series":[["meter:wall","power","",{w}],["meter:wall","voltage","",231.0]]}}"#
        )
    };
    for w in [-1e12, 1e300] {
        let p = parse_payload(payload(now, w).as_bytes()).unwrap();
        let (kept, rejected) = p.checked_samples(now, &limits).unwrap();
        assert_eq!(kept.len(), 1, "{kept:?}");
        assert_eq!(kept[0].metric, Metric::Voltage);
        assert_eq!(
            rejected[0].1.reason,
            wattson_collectors::plausibility::Reason::Power
        );
    }
    let future = parse_payload(payload(253_402_300_799_000, 50.0).as_bytes()).unwrap();
    assert!(future.checked_samples(now, &limits).is_err());
}

#[test]
fn a_stored_regression_check_is_in_the_state_with_its_numbers() {
    use crate::sweep::regression::{IdleFigure, decide};
    let means = vec![r(&wall(), Metric::Power, "", 5, 48.0)];
    let base = IdleFigure {
        watts: 40.0,
        ci95_w: 0.3,
    };
    let latest = IdleFigure {
        watts: 48.0,
        ci95_w: 0.4,
    };
    let mut x = extras();
    assert!(
        build(&means, &[], &x, 1.0)
            .unwrap()
            .json
            .get("idle_regression")
            .is_none()
    );
    x.idle_regression = Some(Check {
        config: "monthly".into(),
        host: Some("basket".into()),
        checked_ms: 1_767_225_600_000,
        baseline_run_id: Some(1),
        latest_run_id: Some(2),
        baseline: base,
        latest,
        verdict: decide(base, latest),
    });
    let j = build(&means, &[], &x, 1.0).unwrap().json;
    let g = &j["idle_regression"];
    assert_eq!(g["detected"], true);
    assert_eq!(g["baseline_idle_w"], 40.0);
    assert_eq!(g["latest_idle_w"], 48.0);
    assert_eq!(g["delta_w"], 8.0);
    assert_eq!(g["delta_ci95_w"], 0.5);
    assert_eq!(g["checked_at"], "2026-01-01T00:00:00Z");
}
