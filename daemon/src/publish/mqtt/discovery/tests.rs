use super::*;
use crate::publish::mqtt::state::StateExtras;

#[test]
fn only_keys_of_entities_wattson_creates_are_read_from_the_announced_list() {
    let (ours, foreign) = parse_announced(
        br#"["power","binary_sensor/idle_regression","sensor/zz#","light/kitchen","","POWER","a/b/c"]"#,
    );
    assert_eq!(
        ours.into_iter().collect::<Vec<_>>(),
        ["binary_sensor/idle_regression", "power"]
    );
    assert_eq!(
        foreign,
        ["sensor/zz#", "light/kitchen", "", "POWER", "a/b/c"]
    );
    assert!(is_online(b"online\n") && !is_online(b"offline"));
}

proptest::proptest! {
    // 2,000 cases; more: PROPTEST_CASES=20000 cargo test -p wattson --lib discovery::tests::fuzz
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(2000)
    ))]

    /// Any announced list: every key acted on gives a valid topic under this host's own
    /// discovery node, in a component wattson creates.
    #[test]
    fn fuzz_announced_lists_act_only_on_own_topics(
        keys in proptest::collection::vec("[a-z_/#+]{0,12}|sensor/[ -~]{0,8}|binary_sensor/[a-z0-9_#]{0,8}", 0..8),
        raw in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64),
    ) {
        let list = serde_json::to_vec(&keys).unwrap();
        for payload in [list, raw] {
            let (ours, foreign) = parse_announced(&payload);
            for key in &ours {
                let topic = key_config_topic("homeassistant", "Basket", key);
                proptest::prop_assert!(rumqttc::valid_topic(&topic), "{topic}");
                proptest::prop_assert!(
                    topic.starts_with("homeassistant/sensor/wattson_basket/")
                        || topic.starts_with("homeassistant/binary_sensor/wattson_basket/"),
                    "{topic}"
                );
                proptest::prop_assert_eq!(topic.matches('/').count(), 4);
            }
            proptest::prop_assert!(ours.len() + foreign.len() <= keys.len().max(payload.len()));
        }
    }
}

/// A state with every field the catalogue announces.
pub(super) fn full_state() -> Value {
    json!({
        "ts": 1, "power": 240.0, "energy": 1.0, "energy_today": 0.2, "voltage": 230.0,
        "current": 1.0, "power_factor": 0.9, "frequency": 50.0, "currency": "GBP",
        "cost_today": 0.1, "cost_month": 1.0, "cost_annual_projection": 189.22, "cost_total": 2.5,
        "cpu_utilisation": 3.0, "cpu_frequency": 2200.0, "cstate_deepest": "C6",
        "cstate_deepest_residency": 90.0, "package_cstate_deepest": "PC6",
        "package_cstate_deepest_residency": 45.0, "mode": "idle",
        "meters": {"wall": {"good": 1, "crc_errors": 0, "timeouts": 0, "implausible": 0}},
    })
}

#[test]
fn payloads_carry_home_assistant_semantics() {
    let es = entities(&full_state(), &StateExtras::default());
    let ctx = Context {
        host: "basket",
        topic_prefix: "wattson",
        discovery_prefix: "homeassistant",
    };
    let get = |id: &str| config_payload(&ctx, es.iter().find(|e| e.object_id == id).unwrap());
    let power = get("power");
    assert_eq!(power["device_class"], "power");
    assert_eq!(power["unit_of_measurement"], "W");
    assert_eq!(power["state_class"], "measurement");
    assert_eq!(power["state_topic"], "wattson/basket/state");
    assert_eq!(power["availability_topic"], "wattson/basket/availability");
    assert_eq!(power["default_entity_id"], "sensor.wattson_basket_power");
    assert_eq!(power["device"]["identifiers"][0], "wattson_basket");
    assert_eq!(power["origin"]["name"], "wattson");
    let energy = get("energy");
    assert_eq!(energy["unit_of_measurement"], "kWh");
    assert_eq!(energy["device_class"], "energy");
    let cost = get("cost_annual_projection");
    assert_eq!(cost["device_class"], "monetary");
    let package = get("package_cstate_deepest");
    assert_eq!(package["device_class"], "enum");
    assert_eq!(package["options"][0], "none");
    assert_eq!(package["options"][7], "PC10");
    assert!(
        package.get("state_class").is_none(),
        "an enum has no state class"
    );
    let residency = get("package_cstate_deepest_residency");
    assert_eq!(residency["unit_of_measurement"], "%");
    assert_eq!(residency["state_class"], "measurement");
    assert_eq!(cost["unit_of_measurement"], "GBP");
    // The Energy dashboard's cost entity: monetary allows only `total`.
    let total = get("cost_total");
    assert_eq!(total["device_class"], "monetary");
    assert_eq!(total["state_class"], "total");
    assert_eq!(total["unit_of_measurement"], "GBP");
    let diag = get("meter_wall_timeouts");
    assert_eq!(diag["entity_category"], "diagnostic");
    assert_eq!(
        diag["value_template"],
        "{{ value_json.meters['wall'].timeouts | default(none) }}"
    );
    assert_eq!(
        config_topic("homeassistant", "basket", "power"),
        "homeassistant/sensor/wattson_basket/power/config"
    );
}

#[test]
fn a_regression_check_is_a_problem_binary_sensor_with_attributes() {
    let mut state = full_state();
    // Announced before any check exists, so dashboards have the entity from the start.
    let before = entities(&state, &StateExtras::default());
    let binary: Vec<_> = before
        .iter()
        .filter(|e| e.component == "binary_sensor")
        .collect();
    assert_eq!(binary.len(), 1);
    assert!(binary[0].value_template.contains("None"));
    state["idle_regression"] = json!({"detected": true, "delta_w": 8.0});
    let es = entities(&state, &StateExtras::default());
    let e = es
        .iter()
        .find(|e| e.object_id == "idle_regression")
        .unwrap();
    assert_eq!(e.key(), "binary_sensor/idle_regression");
    assert_eq!(
        e.entity_id("Basket"),
        "binary_sensor.wattson_basket_idle_regression"
    );
    let ctx = Context {
        host: "basket",
        topic_prefix: "wattson",
        discovery_prefix: "homeassistant",
    };
    let p = config_payload(&ctx, e);
    assert_eq!(p["device_class"], "problem");
    assert_eq!(
        p["default_entity_id"],
        "binary_sensor.wattson_basket_idle_regression"
    );
    assert_eq!(p["json_attributes_topic"], "wattson/basket/state");
    assert_eq!(p["payload_on"], "ON");
    assert!(p.get("unit_of_measurement").is_none());
    assert!(p.get("state_class").is_none());
    assert_eq!(
        key_config_topic("homeassistant", "basket", &e.key()),
        "homeassistant/binary_sensor/wattson_basket/idle_regression/config"
    );
    assert_eq!(
        key_config_topic("homeassistant", "basket", "power"),
        "homeassistant/sensor/wattson_basket/power/config"
    );
}

#[test]
fn host_names_become_safe_slugs() {
    assert_eq!(host_slug("Basket-01.lan"), "basket_01_lan");
    assert_eq!(parse_announced(br#"["power","energy"]"#).0.len(), 2);
    assert!(parse_announced(b"garbage").0.is_empty());
}
