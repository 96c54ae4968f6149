//! Home Assistant's Energy dashboard validation, restated from its sources, applied to the
//! entities `wattson run` announces over a real broker.
// Test helpers fail loudly on a broken setup.
#![allow(clippy::unwrap_used, clippy::panic, clippy::missing_panics_doc)]

use std::time::Duration;

use nix::sys::signal::Signal;
use serde_json::Value;
use wattson_tests::broker::{Kind, Options, TestBroker, Watcher};
use wattson_tests::ledger::*;
use wattson_tests::{Child, TestEnv};

/// Home Assistant's verdict on an entity, restated from its sources (home-assistant/core):
/// - `homeassistant/components/sensor/const.py`, `DEVICE_CLASS_STATE_CLASSES`: `energy`
///   allows `total` and `total_increasing`, `monetary` only `total`, `power` only
///   `measurement` (a sensor breaking this is logged as impossible on every state write);
/// - the recorder compiles long-term statistics only for sensors with a state class, so an
///   entity without one has none (`statistics_not_defined`);
/// - `homeassistant/components/energy/validate.py`, `_async_validate_usage_stat` (the grid
///   consumption, `stat_energy_from`): statistics defined, a numeric state that is not
///   negative (`entity_negative_state`), device class `energy`
///   (`entity_unexpected_device_class`), a unit of `UnitOfEnergy`
///   (`entity_unexpected_unit_energy`), state class `measurement`, `total` or
///   `total_increasing` (`entity_unexpected_state_class`), and `measurement` only with
///   `last_reset`; `_async_validate_cost_stat` (the "entity tracking the total costs",
///   `stat_cost`): statistics defined, and the same state classes.
mod verdict {
    use serde_json::Value;

    const STATE_CLASSES: [&str; 3] = ["measurement", "total", "total_increasing"];
    /// `UnitOfEnergy` (homeassistant/const.py).
    const ENERGY_UNITS: [&str; 13] = [
        "J", "kJ", "MJ", "GJ", "mWh", "Wh", "kWh", "MWh", "GWh", "TWh", "cal", "kcal", "Mcal",
    ];

    /// `DEVICE_CLASS_STATE_CLASSES` for the classes wattson uses.
    pub(super) fn impossible(config: &Value) -> Option<String> {
        let dc = config["device_class"].as_str()?;
        let sc = config["state_class"].as_str()?;
        let allowed: &[&str] = match dc {
            "energy" => &["total", "total_increasing"],
            "monetary" => &["total"],
            "power" | "voltage" | "current" | "power_factor" | "frequency" => &["measurement"],
            _ => return None,
        };
        (!allowed.contains(&sc)).then(|| format!("state class {sc} with device class {dc}"))
    }

    fn common(config: &Value, issues: &mut Vec<&'static str>) {
        match config["state_class"].as_str() {
            None => {
                issues.push("statistics_not_defined");
                issues.push("entity_unexpected_state_class");
            }
            Some(sc) if !STATE_CLASSES.contains(&sc) => {
                issues.push("entity_unexpected_state_class");
            }
            Some("measurement") if config.get("last_reset").is_none() => {
                issues.push("entity_state_class_measurement_no_last_reset");
            }
            Some(_) => {}
        }
    }

    /// `_async_validate_usage_stat` on an energy entity with its current state.
    pub(super) fn usage_issues(config: &Value, state: Option<f64>) -> Vec<&'static str> {
        let mut issues = Vec::new();
        match state {
            None => issues.push("entity_unavailable"),
            Some(v) if v < 0.0 => issues.push("entity_negative_state"),
            Some(_) => {}
        }
        if config["device_class"].as_str() == Some("energy") {
            let unit = config["unit_of_measurement"].as_str().unwrap_or_default();
            if !ENERGY_UNITS.contains(&unit) {
                issues.push("entity_unexpected_unit_energy");
            }
        } else {
            issues.push("entity_unexpected_device_class");
        }
        common(config, &mut issues);
        issues
    }

    /// `_async_validate_cost_stat` on a cost entity.
    pub(super) fn cost_issues(config: &Value) -> Vec<&'static str> {
        let mut issues = Vec::new();
        common(config, &mut issues);
        issues
    }

    /// The state field a wattson entity's value template reads
    /// (`{{ value_json.FIELD | default(none) }}`).
    pub(super) fn value(config: &Value, state: &Value) -> Option<f64> {
        let t = config["value_template"].as_str()?;
        let field = t
            .split("value_json.")
            .nth(1)?
            .split([' ', '|', '}'])
            .next()?;
        state.get(field)?.as_f64()
    }
}

/// Home Assistant's Energy dashboard validation reports no error for wattson's energy and
/// cost entities as `wattson run` announces them (and reproduces the refusal of the
/// `cost_today`/`cost_month` entities that led to `cost_total`).
#[test]
fn home_assistant_energy_validation_accepts_the_energy_and_cost_entities() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _rt = rt.enter();
    let broker = TestBroker::start(Kind::Rumqttd, &Options::default());
    let watcher = Watcher::start(broker.port, "ha", &["homeassistant/#", "wattson/+/state"]);
    let env = TestEnv::new();
    let host = "e2e-ha";
    let sim = wattson_tests::simulate("pzem004t", &[1], WATTS);
    let extra = meter_toml(&sim.path, "1s") + &mqtt_toml(&broker, "1s");
    let config = config_for(env.dir.path(), host, &env.db, &extra);
    let mut daemon = Child::run_daemon(&config, &[]);
    let topic = |object: &str| format!("homeassistant/sensor/wattson_e2e_ha/{object}/config");
    let state = daemon.wait_for(
        "the energy and cost entities",
        Duration::from_secs(30),
        || {
            let s = states(&watcher, host)
                .into_iter()
                .rev()
                .find(|s| s.get("energy").is_some() && s.get("cost_total").is_some())?;
            (watcher.last(&topic("energy")).is_some()
                && watcher.last(&topic("cost_total")).is_some())
            .then_some(s)
        },
    );
    daemon.signal(Signal::SIGTERM);
    assert!(daemon.wait_exit(Duration::from_secs(10)).is_some());
    let config_of = |object: &str| -> Value {
        serde_json::from_slice(&watcher.last(&topic(object)).unwrap().payload).unwrap()
    };
    let energy = config_of("energy");
    assert_eq!(
        verdict::usage_issues(&energy, verdict::value(&energy, &state)),
        Vec::<&str>::new(),
        "{energy}"
    );
    let cost = config_of("cost_total");
    assert_eq!(verdict::cost_issues(&cost), Vec::<&str>::new(), "{cost}");
    for object in [
        "energy",
        "cost_total",
        "power",
        "energy_today",
        "cost_today",
    ] {
        let c = config_of(object);
        assert_eq!(verdict::impossible(&c), None, "{object}: {c}");
    }
    // What Home Assistant said of the daily cost sensors, which have no state class (and
    // keep none: their daily reset would be booked as a refund).
    let today = config_of("cost_today");
    assert_eq!(
        verdict::cost_issues(&today),
        ["statistics_not_defined", "entity_unexpected_state_class"]
    );
}
