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
//!
//! Which entities a state gets, field by field, is the `entities` module's; naming,
//! topics, the config payload and the announced list are here.

use std::collections::BTreeSet;

use serde_json::{Value, json};

mod entities;

pub use entities::{IDLE_REGRESSION_ATTRIBUTES, IDLE_REGRESSION_TEMPLATE, entities};

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
