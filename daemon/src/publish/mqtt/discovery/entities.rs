//! Which entities a state announces: one `sensor` per field it carries (power, energy,
//! cost, the estimates, sleep, electrical, CPU, the mode), the idle-regression
//! `binary_sensor`, and the diagnostic counters per meter, each with the Home Assistant
//! semantics of its kind. How they are named and announced is [`super`]'s.

use serde_json::Value;

use super::Entity;
use super::host_slug;
use crate::publish::mqtt::state::StateExtras;

/// The idle-regression binary sensor's state: `ON`/`OFF` once a check exists, else `None`
/// (Home Assistant's "unknown").
pub const IDLE_REGRESSION_TEMPLATE: &str = "{% if value_json.idle_regression is defined %}\
     {{ 'ON' if value_json.idle_regression.detected else 'OFF' }}{% else %}None{% endif %}";

/// Its attributes: the check's numbers, or none before the first check.
pub const IDLE_REGRESSION_ATTRIBUTES: &str =
    "{{ value_json.idle_regression | default({}) | tojson }}";

/// The entities a state object supports: one per field present (see
/// [`crate::publish::mqtt::state`]), and four diagnostic counters per meter.
pub fn entities(state: &Value, extras: &StateExtras) -> Vec<Entity> {
    let mut out = Vec::new();
    energy_entities(state, &mut out);
    cost_entities(state, extras, &mut out);
    estimated_entities(state, extras, &mut out);
    sleep_entity(state, extras, &mut out);
    electrical_entities(state, &mut out);
    cpu_entities(state, &mut out);
    if state.get("mode").is_some() {
        out.push(mode_entity(extras));
    }
    out.push(idle_regression_entity());
    meter_counter_entities(state, &mut out);
    out
}

/// Power, the energy total and today's energy.
fn energy_entities(state: &Value, out: &mut Vec<Entity>) {
    let has = |k: &str| state.get(k).is_some();
    if has("power") {
        out.push(
            Entity::new("power", "Power", "power")
                .class("power", "W")
                .state("measurement")
                .precision(1),
        );
    }
    if has("standby_power") {
        out.push(
            Entity::new("standby_power", "Standby power (measured)", "standby_power")
                .class("power", "W")
                .state("measurement")
                .precision(2),
        );
    }
    if has("energy") {
        out.push(
            Entity::new("energy", "Energy", "energy")
                .class("energy", "kWh")
                .state("total_increasing")
                .precision(3),
        );
    }
    if has("energy_today") {
        out.push(
            Entity::new("energy_today", "Energy today", "energy_today")
                .class("energy", "kWh")
                .state("total_increasing")
                .precision(3),
        );
    }
}

/// The cost total and today's, this month's and the projected year's cost, in the state's
/// currency (else the tariff's); none without a currency.
fn cost_entities(state: &Value, extras: &StateExtras, out: &mut Vec<Entity>) {
    let has = |k: &str| state.get(k).is_some();
    let currency = state
        .get("currency")
        .and_then(Value::as_str)
        .unwrap_or(&extras.currency)
        .to_owned();
    if has("cost_total") && !currency.is_empty() {
        out.push(
            Entity::new("cost_total", "Cost total", "cost_total")
                .class("monetary", &currency)
                .state("total")
                .precision(2),
        );
    }
    for (field, object, name) in [
        ("cost_today", "cost_today", "Cost today"),
        ("cost_month", "cost_month", "Cost this month"),
        (
            "cost_annual_projection",
            "cost_annual_projection",
            "Annual cost projection",
        ),
        (
            "cost_annual_standing_charge",
            "cost_annual_standing_charge",
            "Annual standing charge",
        ),
        (
            "cost_annual_all_in",
            "cost_annual_all_in",
            "Annual cost with standing charge",
        ),
    ] {
        if has(field) && !currency.is_empty() {
            // Monetary sensors allow only the `total` state class, which would book the
            // daily and monthly resets as refunds: no state class, so no statistics.
            out.push(
                Entity::new(object, name, field)
                    .class("monetary", &currency)
                    .precision(2),
            );
        }
    }
}

/// What every estimated figure carries as attributes: the whole `estimated` object, its
/// `basis` saying what it rests on.
const ESTIMATED_ATTRIBUTES: &str = "{{ value_json.estimated | default({}) | tojson }}";

/// With no wall meter: today's energy and the year's cost estimated from the calibration,
/// named as estimates, each with the calibration and its interval as attributes.
fn estimated_entities(state: &Value, extras: &StateExtras, out: &mut Vec<Entity>) {
    let Some(estimated) = state.get("estimated") else {
        return;
    };
    let mut energy = Entity::new(
        "estimated_energy_today",
        "Estimated energy today",
        "estimated.energy_today",
    )
    .class("energy", "kWh")
    .state("total_increasing")
    .precision(3);
    energy.attributes_template = Some(ESTIMATED_ATTRIBUTES.to_owned());
    out.push(energy);
    let currency = state
        .get("currency")
        .and_then(Value::as_str)
        .unwrap_or(&extras.currency)
        .to_owned();
    if estimated.get("cost_annual").is_some() && !currency.is_empty() {
        let mut cost = Entity::new(
            "estimated_cost_annual",
            "Estimated annual cost",
            "estimated.cost_annual",
        )
        .class("monetary", &currency)
        .precision(2);
        cost.attributes_template = Some(ESTIMATED_ATTRIBUTES.to_owned());
        out.push(cost);
    }
}

/// What sleeping when idle would save a year, with the whole `sleep` object (the windows,
/// the standby figure and where it came from, what it would interrupt, the basis) as
/// attributes; once the state carries a saving.
fn sleep_entity(state: &Value, extras: &StateExtras, out: &mut Vec<Entity>) {
    let currency = state
        .get("currency")
        .and_then(Value::as_str)
        .unwrap_or(&extras.currency)
        .to_owned();
    if state.pointer("/sleep/annual_saving").is_some() && !currency.is_empty() {
        let mut e = Entity::new(
            "sleep_saving_annual",
            "Annual saving from sleeping when idle",
            "sleep.annual_saving",
        )
        .class("monetary", &currency)
        .precision(2);
        e.attributes_template = Some("{{ value_json.sleep | default({}) | tojson }}".to_owned());
        out.push(e);
    }
}

/// What a meter reads beside power: voltage, current, power factor, mains frequency.
fn electrical_entities(state: &Value, out: &mut Vec<Entity>) {
    let has = |k: &str| state.get(k).is_some();
    for (field, name, class, unit, p) in [
        ("voltage", "Voltage", "voltage", "V", 1),
        ("current", "Current", "current", "A", 3),
        ("power_factor", "Power factor", "power_factor", "", 2),
        ("frequency", "Mains frequency", "frequency", "Hz", 2),
    ] {
        if has(field) {
            out.push(
                Entity::new(field, name, field)
                    .class(class, unit)
                    .state("measurement")
                    .precision(p),
            );
        }
    }
}

/// CPU utilisation and frequency, and the deepest core and package C-states.
fn cpu_entities(state: &Value, out: &mut Vec<Entity>) {
    let has = |k: &str| state.get(k).is_some();
    if has("cpu_utilisation") {
        out.push(
            Entity::new("cpu_utilisation", "CPU utilisation", "cpu_utilisation")
                .unit("%")
                .state("measurement")
                .icon("mdi:cpu-64-bit")
                .precision(1),
        );
    }
    if has("cpu_frequency") {
        out.push(
            Entity::new("cpu_frequency", "CPU frequency", "cpu_frequency")
                .class("frequency", "MHz")
                .state("measurement")
                .precision(0),
        );
    }
    if has("cstate_deepest_residency") {
        let mut e = Entity::new(
            "cstate_deepest_residency",
            "Deepest C-state residency",
            "cstate_deepest_residency",
        )
        .unit("%")
        .state("measurement")
        .icon("mdi:sleep")
        .precision(1);
        if let Some(name) = state.get("cstate_deepest").and_then(Value::as_str) {
            e.name = format!("{name} residency");
        }
        out.push(e);
    }
    if has("package_cstate_deepest") {
        let mut e = Entity::new(
            "package_cstate_deepest",
            "Deepest package C-state",
            "package_cstate_deepest",
        )
        .icon("mdi:sleep");
        e.device_class = Some("enum");
        e.options = std::iter::once("none")
            .chain(
                wattson_collectors::idle::PcState::ALL.map(wattson_collectors::idle::PcState::name),
            )
            .map(str::to_owned)
            .collect();
        out.push(e);
    }
    if has("package_cstate_deepest_residency") {
        out.push(
            Entity::new(
                "package_cstate_deepest_residency",
                "Deepest package C-state residency",
                "package_cstate_deepest_residency",
            )
            .unit("%")
            .state("measurement")
            .icon("mdi:sleep")
            .precision(1),
        );
    }
}

/// The configuration mode, an enum of the configured modes where there are any.
fn mode_entity(extras: &StateExtras) -> Entity {
    let mut e = Entity::new("mode", "Mode", "mode").icon("mdi:state-machine");
    if !extras.mode_options.is_empty() {
        e.device_class = Some("enum");
        e.options.clone_from(&extras.mode_options);
    }
    e
}

/// The idle-regression binary sensor. Announced from the first state on, so a dashboard has
/// no dead rows on a new install: until a check is stored the state has no
/// `idle_regression`, and the template renders `None`, which Home Assistant shows as
/// `unknown` (an MQTT binary sensor's third payload).
fn idle_regression_entity() -> Entity {
    let mut e = Entity::new("idle_regression", "Idle power regression", "");
    e.component = "binary_sensor";
    e.device_class = Some("problem");
    e.icon = Some("mdi:trending-up");
    IDLE_REGRESSION_TEMPLATE.clone_into(&mut e.value_template);
    e.attributes_template = Some(IDLE_REGRESSION_ATTRIBUTES.to_owned());
    e
}

/// Four diagnostic counters per meter: good readings, CRC errors, timeouts, implausible
/// readings.
fn meter_counter_entities(state: &Value, out: &mut Vec<Entity>) {
    if let Some(meters) = state.get("meters").and_then(Value::as_object) {
        for id in meters.keys() {
            let slug = host_slug(id);
            let quoted = serde_json::to_string(id)
                .unwrap_or_default()
                .replace('"', "'");
            for (counter, label) in [
                ("good", "good readings"),
                ("crc_errors", "CRC errors"),
                ("timeouts", "timeouts"),
                ("implausible", "implausible readings"),
                ("exceptions", "Modbus exceptions"),
            ] {
                let mut e = Entity::new(
                    &format!("meter_{slug}_{counter}"),
                    &format!("Meter {id} {label}"),
                    "",
                )
                .state("total_increasing")
                .icon("mdi:counter");
                e.value_template =
                    format!("{{{{ value_json.meters[{quoted}].{counter} | default(none) }}}}");
                e.entity_category = Some("diagnostic");
                out.push(e);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::publish::mqtt::discovery::entity_id;
    use crate::publish::mqtt::discovery::tests::full_state;
    use crate::publish::mqtt::state::MeterCounters;

    #[test]
    fn every_field_becomes_one_sensor_with_a_deterministic_id() {
        let extras = StateExtras {
            meter_counters: vec![MeterCounters {
                id: "wall".into(),
                ..MeterCounters::default()
            }],
            ..StateExtras::default()
        };
        let es = entities(&full_state(), &extras);
        let ids: Vec<String> = es
            .iter()
            .map(|e| entity_id("Basket", &e.object_id))
            .collect();
        assert!(ids.contains(&"sensor.wattson_basket_power".to_owned()));
        assert!(ids.contains(&"sensor.wattson_basket_meter_wall_crc_errors".to_owned()));
        assert!(ids.contains(&"sensor.wattson_basket_meter_wall_exceptions".to_owned()));
        // 17 sensors (cost_total and the two package C-state ones among them), the
        // idle-regression binary sensor, 5 meter counters.
        assert_eq!(es.len(), 17 + 1 + 5);
        let unique: BTreeSet<&String> = ids.iter().collect();
        assert_eq!(unique.len(), ids.len());
    }

    #[test]
    fn mode_is_an_enum_only_with_options() {
        let plain = entities(&full_state(), &StateExtras::default());
        let m = plain.iter().find(|e| e.object_id == "mode").unwrap();
        assert_eq!(m.device_class, None);
        let x = StateExtras {
            mode_options: vec!["idle".into(), "1 loop".into()],
            ..StateExtras::default()
        };
        let es = entities(&full_state(), &x);
        let m = es.iter().find(|e| e.object_id == "mode").unwrap();
        assert_eq!(m.device_class, Some("enum"));
        assert_eq!(m.options, ["idle", "1 loop"]);
    }
}
