//! Home Assistant MQTT discovery: one device per host, one `sensor` per state field, and
//! one `binary_sensor` for the idle-power regression.
//!
//! Config topics are `<discovery_prefix>/<component>/wattson_<host>/<object>/config`
//! (`component` is `sensor` or `binary_sensor`), retained, with `unique_id` and
//! `default_entity_id` (`object_id` too, for Home Assistant before 2025.10), so entity ids
//! are deterministic: `sensor.wattson_<host>_<object>` (or `binary_sensor.`), where `<host>`
//! is the host name in lower case with every other character than `a-z0-9` made `_`.
//! Semantics follow developers.home-assistant `docs/core/entity/sensor.md`: power is
//! `measurement` (W); energy is kWh with a `total_increasing` state class: it is the
//! ledger's stored total, which carries on across restarts and never goes down (the
//! publisher never sends a lower value, and the store only adds), so Home Assistant sees one
//! continuous meter. Cost sensors are `monetary` with the tariff's currency as unit;
//! `cost_total` (the cost of that energy since the first sample) has the `total` state
//! class, the only one Home Assistant allows for `monetary` (`sensor/const.py`,
//! `DEVICE_CLASS_STATE_CLASSES`), so it has long-term statistics and the Energy dashboard
//! accepts it as "an entity tracking the total costs" (`energy/validate.py`,
//! `_async_validate_cost_stat`: statistics defined, state class measurement, total or
//! total_increasing).
//! The idle-power regression (`binary_sensor.wattson_<host>_idle_regression`) is a
//! `problem` binary sensor (`ON` = idle rose), with the check's numbers as attributes
//! (see `docs/core/entity/binary-sensor.md` and the MQTT binary sensor's
//! `json_attributes_topic`).
//!
//! What was announced is remembered in a retained topic, `<topic_prefix>/<host>/discovery`
//! (a JSON array of keys: the object id for a sensor, `<component>/<object id>` for other
//! components), so a later run can remove entities that no longer exist by publishing an
//! empty retained config.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::state::StateExtras;

/// One entity announced to Home Assistant.
#[derive(Debug, Clone, PartialEq)]
pub struct Entity {
    /// The Home Assistant MQTT component: `sensor` or `binary_sensor`.
    pub component: &'static str,
    /// Unique per host: `power`, `meter_wall_crc_errors`.
    pub object_id: String,
    /// Shown in Home Assistant after the device name.
    pub name: String,
    /// Jinja template that extracts the value from the state JSON.
    pub value_template: String,
    pub device_class: Option<&'static str>,
    pub unit: Option<String>,
    pub state_class: Option<&'static str>,
    /// `diagnostic` for health counters.
    pub entity_category: Option<&'static str>,
    pub icon: Option<&'static str>,
    /// For `enum` sensors.
    pub options: Vec<String>,
    pub precision: Option<u8>,
    /// Jinja template that extracts a JSON object of attributes from the state JSON.
    pub attributes_template: Option<String>,
}

impl Entity {
    fn new(object_id: &str, name: &str, field: &str) -> Entity {
        Entity {
            component: "sensor",
            object_id: object_id.to_owned(),
            name: name.to_owned(),
            value_template: format!("{{{{ value_json.{field} | default(none) }}}}"),
            device_class: None,
            unit: None,
            state_class: None,
            entity_category: None,
            icon: None,
            options: Vec::new(),
            precision: None,
            attributes_template: None,
        }
    }
    /// The key in the announced list: the object id for a sensor, `<component>/<object>`
    /// otherwise (so lists written before other components existed still read).
    pub fn key(&self) -> String {
        if self.component == "sensor" {
            self.object_id.clone()
        } else {
            format!("{}/{}", self.component, self.object_id)
        }
    }
    /// The Home Assistant entity id, e.g. `binary_sensor.wattson_basket_idle_regression`.
    pub fn entity_id(&self, host: &str) -> String {
        format!("{}.{}_{}", self.component, node_id(host), self.object_id)
    }
    fn class(mut self, device_class: &'static str, unit: &str) -> Entity {
        self.device_class = Some(device_class);
        if !unit.is_empty() {
            self.unit = Some(unit.to_owned());
        }
        self
    }
    fn unit(mut self, unit: &str) -> Entity {
        self.unit = Some(unit.to_owned());
        self
    }
    fn state(mut self, state_class: &'static str) -> Entity {
        self.state_class = Some(state_class);
        self
    }
    fn icon(mut self, icon: &'static str) -> Entity {
        self.icon = Some(icon);
        self
    }
    fn precision(mut self, p: u8) -> Entity {
        self.precision = Some(p);
        self
    }
}

/// The host name as it appears in node and entity ids: lower case, `[a-z0-9_]`.
pub fn host_slug(host: &str) -> String {
    let s: String = host
        .to_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if s.is_empty() { "host".to_owned() } else { s }
}

/// The discovery node id and device identifier: `wattson_<host>`.
pub fn node_id(host: &str) -> String {
    format!("wattson_{}", host_slug(host))
}

/// The Home Assistant entity id an object gets: `sensor.wattson_<host>_<object>`.
pub fn entity_id(host: &str, object_id: &str) -> String {
    format!("sensor.{}_{object_id}", node_id(host))
}

/// `<discovery_prefix>/sensor/wattson_<host>/<object>/config`.
pub fn config_topic(discovery_prefix: &str, host: &str, object_id: &str) -> String {
    component_config_topic(discovery_prefix, "sensor", host, object_id)
}

/// `<discovery_prefix>/<component>/wattson_<host>/<object>/config`.
pub fn component_config_topic(
    discovery_prefix: &str,
    component: &str,
    host: &str,
    object_id: &str,
) -> String {
    format!(
        "{discovery_prefix}/{component}/{}/{object_id}/config",
        node_id(host)
    )
}

/// The config topic of an announced-list key (see [`Entity::key`]).
pub fn key_config_topic(discovery_prefix: &str, host: &str, key: &str) -> String {
    match key.split_once('/') {
        Some((component, object_id)) => {
            component_config_topic(discovery_prefix, component, host, object_id)
        }
        None => config_topic(discovery_prefix, host, key),
    }
}

/// The retained topic that lists what this host announced.
pub fn announced_topic(topic_prefix: &str, host: &str) -> String {
    format!("{topic_prefix}/{}/discovery", super::topic_segment(host))
}

/// The idle-regression binary sensor's state: `ON`/`OFF` once a check exists, else `None`
/// (Home Assistant's "unknown").
pub const IDLE_REGRESSION_TEMPLATE: &str = "{% if value_json.idle_regression is defined %}\
     {{ 'ON' if value_json.idle_regression.detected else 'OFF' }}{% else %}None{% endif %}";

/// Its attributes: the check's numbers, or none before the first check.
pub const IDLE_REGRESSION_ATTRIBUTES: &str =
    "{{ value_json.idle_regression | default({}) | tojson }}";

/// The entities a state object supports: one per field present (see [`super::state`]), and
/// four diagnostic counters per meter.
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

/// Where the config payload points and what it names.
#[derive(Debug, Clone)]
pub struct Context<'a> {
    pub host: &'a str,
    pub topic_prefix: &'a str,
    pub discovery_prefix: &'a str,
}

/// The retained discovery config for one entity.
pub fn config_payload(ctx: &Context<'_>, e: &Entity) -> Value {
    let node = node_id(ctx.host);
    let host_topic = super::topic_segment(ctx.host);
    let unique = format!("{node}_{}", e.object_id);
    let mut p = json!({
        "name": e.name,
        "unique_id": unique,
        "object_id": unique,
        "default_entity_id": format!("{}.{unique}", e.component),
        "state_topic": format!("{}/{host_topic}/state", ctx.topic_prefix),
        "availability_topic": format!("{}/{host_topic}/availability", ctx.topic_prefix),
        "payload_available": "online",
        "payload_not_available": "offline",
        "value_template": e.value_template,
        "device": {
            "identifiers": [node],
            "name": ctx.host,
            "manufacturer": "wattson",
            "model": "power and efficiency monitor",
            "sw_version": env!("CARGO_PKG_VERSION"),
        },
        "origin": {
            "name": "wattson",
            "sw_version": env!("CARGO_PKG_VERSION"),
            "support_url": "https://github.com/wattson-dev/wattson",
        },
    });
    if let Some(o) = p.as_object_mut() {
        let mut set = |k: &str, v: Value| {
            o.insert(k.to_owned(), v);
        };
        if let Some(c) = e.device_class {
            set("device_class", json!(c));
        }
        if let Some(u) = &e.unit {
            set("unit_of_measurement", json!(u));
        }
        if let Some(s) = e.state_class {
            set("state_class", json!(s));
        }
        if let Some(c) = e.entity_category {
            set("entity_category", json!(c));
        }
        if let Some(i) = e.icon {
            set("icon", json!(i));
        }
        if !e.options.is_empty() {
            set("options", json!(e.options));
        }
        if let Some(p) = e.precision {
            set("suggested_display_precision", json!(p));
        }
        if e.component == "binary_sensor" {
            set("payload_on", json!("ON"));
            set("payload_off", json!("OFF"));
        }
        if let Some(t) = &e.attributes_template {
            set(
                "json_attributes_topic",
                json!(format!("{}/{host_topic}/state", ctx.topic_prefix)),
            );
            set("json_attributes_template", json!(t));
        }
    }
    p
}

/// Reads an announced-list payload: the keys that name an entity wattson creates (an object
/// id of `a-z`, `0-9` and `_`, at most 255 characters, alone for a sensor or after
/// `binary_sensor/`), and the other entries, which are left alone. Anything but a JSON array
/// of strings reads as an empty list.
pub fn parse_announced(payload: &[u8]) -> (BTreeSet<String>, Vec<String>) {
    let entries = serde_json::from_slice::<Vec<String>>(payload).unwrap_or_default();
    let (ours, foreign): (Vec<String>, Vec<String>) =
        entries.into_iter().partition(|k| is_own_key(k));
    (ours.into_iter().collect(), foreign)
}

/// True for a key [`Entity::key`] can produce.
pub fn is_own_key(key: &str) -> bool {
    let object_id = match key.split_once('/') {
        Some(("binary_sensor", object_id)) => object_id,
        Some(_) => return false,
        None => key,
    };
    !object_id.is_empty()
        && object_id.len() <= 255
        && object_id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// True when a `<discovery_prefix>/status` payload says Home Assistant (re)started.
pub fn is_online(payload: &[u8]) -> bool {
    payload.trim_ascii() == b"online"
}

#[cfg(test)]
mod tests;
