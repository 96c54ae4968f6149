//! The `<topic_prefix>/<host>/state` payload: one JSON object per publish interval.
//!
//! Fields (absent when unknown, never `null`):
//!
//! | field | unit | meaning |
//! |---|---|---|
//! | `ts` | UTC ms | time of the newest sample in the interval; unique per host, the fleet collector's dedupe key |
//! | `interval_s` | s | the publish interval |
//! | `power` | W | mean over the interval (not the last sample) of the primary power source |
//! | `power_source` | | that source: `meter:<id>`, else `estimate:wall`, else `rapl`, else `hwmon` |
//! | `power_estimate`, `power_error` | bool, W | present when `power` is estimated from a sweep's calibration (no wall meter): `true`, and the estimate's +/- band |
//! | `energy` | kWh | the primary meter's energy total (monotonic while the daemon runs) |
//! | `energy_today` | kWh | energy since local midnight (from the store) |
//! | `voltage`, `current`, `power_factor`, `frequency` | V, A, 0..1, Hz | interval means, primary meter |
//! | `currency`, `cost_today`, `cost_month`, `cost_annual_projection` | currency | from the store and tariff |
//! | `cpu_utilisation` | % | mean busy share of all CPUs |
//! | `cpu_frequency` | MHz | mean core frequency |
//! | `cstate_deepest`, `cstate_deepest_residency` | name, % | the deepest idle state and its share of the interval |
//! | `package_cstate_deepest`, `package_cstate_deepest_residency` | name, % | the deepest package C-state (`PC2` .. `PC10`) holding at least 0.1 % of the interval, `none` when none did, and its share (where the package counters are read) |
//! | `mode` | | the current mode (`idle`, `1 loop`, ...) |
//! | `meters` | counts | per meter id: `good`, `crc_errors`, `timeouts`, `implausible` |
//! | `idle_regression` | W, UTC | the latest idle-power regression check, once one is stored: `detected` (bool), `config`, `baseline_idle_w`, `baseline_ci95_w`, `latest_idle_w`, `latest_ci95_w`, `delta_w`, `delta_ci95_w`, `threshold_w`, `checked_at` (RFC 3339), `checked_ms` |
//! | `series` | | every live series as `[source, metric, channel, value]` in the metric's unit (means; energy totals are the latest value) |

use serde_json::{Map, Value, json};
use wattson_collectors::{Metric, Sample};

use crate::runtime::live::LiveReading;
use crate::sweep::regression::Check;

/// Largest state payload the collector accepts, bytes.
pub const MAX_STATE_BYTES: usize = 64 * 1024;

/// One meter's health counters since the daemon started.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MeterCounters {
    /// The meter's configured id (`wall`).
    pub id: String,
    pub good: u64,
    pub crc_errors: u64,
    pub timeouts: u64,
    pub implausible: u64,
}

/// Figures the daemon computes from its store and tariff, read once per publish.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StateExtras {
    /// ISO 4217 code, e.g. `GBP`: the unit of the cost sensors.
    pub currency: String,
    /// Cost so far today (local midnight), in `currency`.
    pub cost_today: Option<f64>,
    /// Cost so far this calendar month, in `currency`.
    pub cost_month: Option<f64>,
    /// Projected annual cost at the recent duty cycle, in `currency`.
    pub annual_projection: Option<f64>,
    /// Energy since local midnight, kWh.
    pub energy_today_kwh: Option<f64>,
    /// The current mode (`idle`, `1 loop`, `sweep`, ...).
    pub mode: Option<String>,
    /// Every value `mode` can take; when non-empty the mode sensor is a Home Assistant
    /// `enum` with these options, otherwise a plain text sensor.
    pub mode_options: Vec<String>,
    /// The meter id whose readings are the host's power (default: the first `meter:*`
    /// source by name).
    pub primary_meter: Option<String>,
    pub meter_counters: Vec<MeterCounters>,
    /// The idle-power regression check the host's `problem` sensor shows (see
    /// [`crate::sweep::regression::headline`]); `None` until a check is stored.
    pub idle_regression: Option<Check>,
}

/// A built state payload.
#[derive(Debug, Clone, PartialEq)]
pub struct StateSnapshot {
    /// UTC ms of the newest sample in the interval.
    pub ts_ms: i64,
    pub json: Value,
}

/// Build the state object from the interval means and the latest readings. `None` when no
/// sample arrived during the interval (nothing new to say, and `ts` would repeat).
pub fn build(
    means: &[LiveReading],
    latest: &[LiveReading],
    extras: &StateExtras,
    interval_s: f64,
) -> Option<StateSnapshot> {
    let ts_ms = means.iter().map(|r| r.ts_ms).max()?;
    let mut o = Map::new();
    o.insert("ts".into(), json!(ts_ms));
    o.insert("interval_s".into(), json!(interval_s));

    let mean = |source: &str, metric: Metric, channel: &str| {
        means
            .iter()
            .find(|r| r.source == source && r.metric == metric && r.channel == channel)
            .map(|r| r.value)
    };
    let last = |source: &str, metric: Metric| {
        latest
            .iter()
            .find(|r| r.source == source && r.metric == metric)
            .map(|r| r.value)
    };

    let primary = primary_source(means, extras);
    if let Some(src) = &primary {
        if let Some(p) = mean(src, Metric::Power, "") {
            put(&mut o, "power", p);
            o.insert("power_source".into(), json!(src));
            if src == crate::sources::estimate::SOURCE {
                o.insert("power_estimate".into(), json!(true));
                if let Some(e) = mean(src, Metric::Power, crate::sources::estimate::ERROR_CHANNEL) {
                    put(&mut o, "power_error", e);
                }
            }
        }
        if src.starts_with("meter:") {
            if let Some(wh) = last(src, Metric::EnergyTotal) {
                put(&mut o, "energy", wh / 1000.0);
            }
            for (field, metric) in [
                ("voltage", Metric::Voltage),
                ("current", Metric::Current),
                ("power_factor", Metric::PowerFactor),
                ("frequency", Metric::Frequency),
            ] {
                if let Some(v) = mean(src, metric, "") {
                    put(&mut o, field, v);
                }
            }
        }
    }
    if let Some(v) = extras.energy_today_kwh {
        put(&mut o, "energy_today", v);
    }
    if !extras.currency.is_empty() {
        o.insert("currency".into(), json!(extras.currency));
    }
    for (field, v) in [
        ("cost_today", extras.cost_today),
        ("cost_month", extras.cost_month),
        ("cost_annual_projection", extras.annual_projection),
    ] {
        if let Some(v) = v {
            put(&mut o, field, v);
        }
    }
    if let Some(b) = mean("cpu", Metric::CpuBusy, "all") {
        put(&mut o, "cpu_utilisation", b * 100.0);
    }
    if let Some(f) = mean("cpu", Metric::CoreFrequency, "mean") {
        put(&mut o, "cpu_frequency", f);
    }
    if let Some((name, share)) = deepest_cstate(means) {
        o.insert("cstate_deepest".into(), json!(name));
        put(&mut o, "cstate_deepest_residency", share * 100.0);
    }
    if let Some((name, share)) = deepest_package_state(means) {
        o.insert("package_cstate_deepest".into(), json!(name));
        put(&mut o, "package_cstate_deepest_residency", share * 100.0);
    }
    if let Some(m) = &extras.mode {
        o.insert("mode".into(), json!(m));
    }
    if !extras.meter_counters.is_empty() {
        let mut meters = Map::new();
        for c in &extras.meter_counters {
            meters.insert(
                c.id.clone(),
                json!({
                    "good": c.good,
                    "crc_errors": c.crc_errors,
                    "timeouts": c.timeouts,
                    "implausible": c.implausible,
                }),
            );
        }
        o.insert("meters".into(), Value::Object(meters));
    }
    if let Some(c) = &extras.idle_regression {
        o.insert("idle_regression".into(), regression_json(c));
    }
    let series: Vec<Value> = means
        .iter()
        .filter_map(|r| {
            let v = if matches!(r.metric, Metric::EnergyTotal | Metric::EnergyCounter) {
                latest
                    .iter()
                    .find(|l| {
                        l.source == r.source && l.metric == r.metric && l.channel == r.channel
                    })
                    .map_or(r.value, |l| l.value)
            } else {
                r.value
            };
            v.is_finite()
                .then(|| json!([r.source, r.metric.as_str(), r.channel, v]))
        })
        .collect();
    o.insert("series".into(), Value::Array(series));
    Some(StateSnapshot {
        ts_ms,
        json: Value::Object(o),
    })
}

/// The `idle_regression` object: also the binary sensor's attributes.
fn regression_json(c: &Check) -> Value {
    let mut o = Map::new();
    o.insert("detected".into(), json!(c.verdict.detected));
    o.insert("config".into(), json!(c.config));
    for (k, v) in [
        ("baseline_idle_w", c.baseline.watts),
        ("baseline_ci95_w", c.baseline.ci95_w),
        ("latest_idle_w", c.latest.watts),
        ("latest_ci95_w", c.latest.ci95_w),
        ("delta_w", c.verdict.delta_w),
        ("delta_ci95_w", c.verdict.delta_ci95_w),
        ("threshold_w", c.verdict.threshold_w),
    ] {
        put(&mut o, k, v);
    }
    if let Some(t) = chrono::DateTime::from_timestamp_millis(c.checked_ms) {
        o.insert(
            "checked_at".into(),
            json!(t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
        );
    }
    o.insert("checked_ms".into(), json!(c.checked_ms));
    Value::Object(o)
}

fn put(o: &mut Map<String, Value>, key: &str, v: f64) {
    if v.is_finite() {
        o.insert(key.to_owned(), json!(round(v)));
    }
}

/// Six significant decimals are more than any meter resolves; shorter payloads.
fn round(v: f64) -> f64 {
    (v * 1e6).round() / 1e6
}

/// The source whose power is the host's: the configured primary meter, else the first
/// meter by name, else RAPL, else hwmon.
fn primary_source(means: &[LiveReading], extras: &StateExtras) -> Option<String> {
    let has_power = |s: &str| {
        means
            .iter()
            .any(|r| r.source == s && r.metric == Metric::Power)
    };
    if let Some(id) = &extras.primary_meter {
        let s = format!("meter:{id}");
        if has_power(&s) {
            return Some(s);
        }
    }
    means
        .iter()
        .filter(|r| r.metric == Metric::Power && r.source.starts_with("meter:"))
        .map(|r| r.source.clone())
        .min()
        .or_else(|| {
            [crate::sources::estimate::SOURCE, "rapl", "hwmon"]
                .into_iter()
                .find(|s| has_power(s))
                .map(str::to_owned)
        })
}

/// Depth of an idle state from its cpuidle name: `POLL` < `C1` < `C1E` < `C3` < `C6` < `C10`.
pub fn cstate_depth(name: &str) -> (i32, usize) {
    let digits: String = name
        .trim_start_matches(|c: char| !c.is_ascii_digit())
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    (digits.parse().unwrap_or(-1), name.len())
}

/// The deepest idle state in the machine-wide residencies (`all/<state>`) and its share.
fn deepest_cstate(means: &[LiveReading]) -> Option<(String, f64)> {
    means
        .iter()
        .filter(|r| r.metric == Metric::IdleResidency && r.source == "cpu")
        .filter_map(|r| Some((r.channel.strip_prefix("all/")?.to_owned(), r.value)))
        .max_by_key(|(name, _)| cstate_depth(name))
}

/// The deepest package C-state reached in the interval (its mean share at least
/// [`crate::idle::explain::REACHED`]) and that share; `("none", 0.0)` when the package
/// counters are read but no state was reached; `None` without package counters.
pub fn deepest_package_state(means: &[LiveReading]) -> Option<(String, f64)> {
    use wattson_collectors::idle::PcState;
    let states: Vec<(PcState, f64)> = means
        .iter()
        .filter(|r| r.metric == Metric::PackageResidency && r.source == "cpu")
        .filter_map(|r| Some((PcState::parse(r.channel.strip_prefix("all/")?)?, r.value)))
        .collect();
    if states.is_empty() {
        return None;
    }
    Some(
        states
            .into_iter()
            .filter(|(_, share)| *share >= crate::idle::explain::REACHED)
            .max_by_key(|(state, _)| *state)
            .map_or(("none".to_owned(), 0.0), |(s, share)| {
                (s.name().to_owned(), share)
            }),
    )
}

/// Why a state payload was dropped by the collector.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum StateParseError {
    #[error("payload of {0} bytes exceeds {MAX_STATE_BYTES}")]
    TooLarge(usize),
    #[error("not JSON: {0}")]
    Json(String),
    #[error("missing or invalid `ts` (UTC ms)")]
    Ts,
    #[error("`series` entry {0} is not [source, metric, channel, number]")]
    Series(usize),
}

/// Turn a state payload back into samples stamped with its `ts`. Series with a metric this
/// version does not know are skipped (a newer publisher); anything malformed is an error.
pub fn parse(payload: &[u8]) -> Result<(i64, Vec<Sample>), StateParseError> {
    if payload.len() > MAX_STATE_BYTES {
        return Err(StateParseError::TooLarge(payload.len()));
    }
    let v: Value =
        serde_json::from_slice(payload).map_err(|e| StateParseError::Json(e.to_string()))?;
    let ts = v
        .get("ts")
        .and_then(Value::as_i64)
        .filter(|t| *t > 0)
        .ok_or(StateParseError::Ts)?;
    let mut samples = Vec::new();
    if let Some(series) = v.get("series") {
        let series = series.as_array().ok_or(StateParseError::Series(0))?;
        for (i, e) in series.iter().enumerate() {
            let bad = || StateParseError::Series(i);
            let a = e.as_array().filter(|a| a.len() == 4).ok_or_else(bad)?;
            let source = a[0].as_str().filter(|s| !s.is_empty()).ok_or_else(bad)?;
            let metric = a[1].as_str().ok_or_else(bad)?;
            let channel = a[2].as_str().ok_or_else(bad)?;
            let value = a[3].as_f64().filter(|v| v.is_finite()).ok_or_else(bad)?;
            if let Some(metric) = Metric::parse(metric) {
                samples.push(Sample::new(ts, source, metric, channel, value));
            }
        }
    }
    Ok((ts, samples))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(source: &str, metric: Metric, channel: &str, ts: i64, value: f64) -> LiveReading {
        LiveReading {
            source: source.into(),
            metric,
            channel: channel.into(),
            ts_ms: ts,
            value,
        }
    }

    fn extras() -> StateExtras {
        StateExtras {
            currency: "GBP".into(),
            cost_today: Some(0.5),
            cost_month: Some(7.25),
            annual_projection: Some(189.22),
            energy_today_kwh: Some(2.4),
            mode: Some("idle".into()),
            mode_options: vec![],
            primary_meter: None,
            meter_counters: vec![MeterCounters {
                id: "wall".into(),
                good: 10,
                crc_errors: 1,
                timeouts: 2,
                implausible: 0,
            }],
            idle_regression: None,
        }
    }

    #[test]
    fn state_carries_means_energy_cost_and_cpu() {
        let means = vec![
            r("meter:wall", Metric::Power, "", 1000, 240.0),
            r("meter:wall", Metric::Voltage, "", 1000, 231.5),
            r("meter:wall", Metric::EnergyTotal, "", 1000, 1000.0),
            r("rapl", Metric::Power, "package-0", 900, 15.0),
            r("cpu", Metric::CpuBusy, "all", 990, 0.25),
            r("cpu", Metric::CoreFrequency, "mean", 990, 2200.0),
            r("cpu", Metric::IdleResidency, "all/POLL", 990, 0.01),
            r("cpu", Metric::IdleResidency, "all/C1E", 990, 0.2),
            r("cpu", Metric::IdleResidency, "all/C1", 990, 0.1),
            r("cpu", Metric::IdleResidency, "all/C6", 990, 0.6),
        ];
        let latest = vec![r("meter:wall", Metric::EnergyTotal, "", 1000, 1234.5)];
        let s = build(&means, &latest, &extras(), 10.0).unwrap();
        let j = &s.json;
        assert_eq!(s.ts_ms, 1000);
        assert_eq!(j["ts"], 1000);
        assert_eq!(j["power"], 240.0);
        assert_eq!(j["power_source"], "meter:wall");
        assert_eq!(j["energy"], 1.2345);
        assert_eq!(j["voltage"], 231.5);
        assert!(j.get("current").is_none());
        assert_eq!(j["cpu_utilisation"], 25.0);
        assert_eq!(j["cstate_deepest"], "C6");
        assert_eq!(j["cstate_deepest_residency"], 60.0);
        assert_eq!(j["cost_annual_projection"], 189.22);
        assert_eq!(j["meters"]["wall"]["timeouts"], 2);
        assert_eq!(j["mode"], "idle");
        // The series round-trips through the collector's parser, energy as the latest value.
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
                "cpu",
                Metric::PackageResidency,
                &format!("all/{state}"),
                990,
                share,
            )
        };
        let means = vec![
            r("meter:wall", Metric::Power, "", 1000, 30.0),
            pkg("PC2", 0.3),
            pkg("PC6", 0.45),
            // Below the 0.1 % that counts as reached.
            pkg("PC10", 0.0005),
            r("cpu", Metric::PackageResidency, "package1/PC8", 990, 0.9),
        ];
        let j = build(&means, &[], &extras(), 10.0).unwrap().json;
        assert_eq!(j["package_cstate_deepest"], "PC6");
        assert_eq!(j["package_cstate_deepest_residency"], 45.0);
        let none = vec![
            r("meter:wall", Metric::Power, "", 1000, 30.0),
            pkg("PC2", 0.0),
        ];
        let j = build(&none, &[], &extras(), 10.0).unwrap().json;
        assert_eq!(j["package_cstate_deepest"], "none");
        assert_eq!(j["package_cstate_deepest_residency"], 0.0);
        let without = vec![r("meter:wall", Metric::Power, "", 1000, 30.0)];
        let j = build(&without, &[], &extras(), 10.0).unwrap().json;
        assert!(j.get("package_cstate_deepest").is_none());
    }

    #[test]
    fn no_samples_means_no_state() {
        assert!(build(&[], &[], &extras(), 10.0).is_none());
    }

    #[test]
    fn rapl_is_the_power_source_without_a_meter() {
        let means = vec![r("rapl", Metric::Power, "", 5, 12.0)];
        let s = build(&means, &[], &StateExtras::default(), 1.0).unwrap();
        assert_eq!(s.json["power_source"], "rapl");
        assert!(s.json.get("energy").is_none());
        assert!(s.json.get("currency").is_none());
    }

    #[test]
    fn an_estimated_wall_is_published_labelled_with_its_error() {
        let means = vec![
            r("rapl", Metric::Power, "", 5, 12.0),
            r("estimate:wall", Metric::Power, "", 5, 43.2),
            r("estimate:wall", Metric::Power, "error", 5, 1.5),
        ];
        let j = build(&means, &[], &StateExtras::default(), 1.0)
            .unwrap()
            .json;
        assert_eq!(j["power"], 43.2);
        assert_eq!(j["power_source"], "estimate:wall");
        assert_eq!(j["power_estimate"], true);
        assert_eq!(j["power_error"], 1.5);
        // A real meter wins, and its power is not marked as an estimate.
        let mut with_meter = means.clone();
        with_meter.push(r("meter:wall", Metric::Power, "", 5, 44.0));
        let j = build(&with_meter, &[], &StateExtras::default(), 1.0)
            .unwrap()
            .json;
        assert_eq!(j["power_source"], "meter:wall");
        assert!(j.get("power_estimate").is_none() && j.get("power_error").is_none());
    }

    #[test]
    fn primary_meter_is_honoured() {
        let means = vec![
            r("meter:a", Metric::Power, "", 5, 1.0),
            r("meter:b", Metric::Power, "", 5, 2.0),
        ];
        let mut x = StateExtras::default();
        assert_eq!(build(&means, &[], &x, 1.0).unwrap().json["power"], 1.0);
        x.primary_meter = Some("b".into());
        assert_eq!(build(&means, &[], &x, 1.0).unwrap().json["power"], 2.0);
    }

    #[test]
    fn cstate_depth_orders_real_names() {
        let mut names = vec!["C10", "C1E", "POLL", "C6", "C1", "C3"];
        names.sort_by_key(|n| cstate_depth(n));
        assert_eq!(names, ["POLL", "C1", "C1E", "C3", "C6", "C10"]);
    }

    #[test]
    fn malformed_payloads_are_errors_not_panics() {
        assert!(matches!(parse(b"not json"), Err(StateParseError::Json(_))));
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

    #[test]
    fn a_stored_regression_check_is_in_the_state_with_its_numbers() {
        use crate::sweep::regression::{IdleFigure, decide};
        let means = vec![r("meter:wall", Metric::Power, "", 5, 48.0)];
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
}
