//! What the publisher receives: any bytes as Home Assistant's `<discovery_prefix>/status`
//! and as the host's retained announced-entities list. Property: no panic; every key acted
//! on gives a valid MQTT topic under this host's own discovery node, in a component
//! wattson creates.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wattson::publish::mqtt::discovery;

fuzz_target!(|data: &[u8]| {
    let _ = discovery::is_online(data);
    let (ours, _foreign) = discovery::parse_announced(data);
    for key in &ours {
        assert!(discovery::is_own_key(key), "{key:?}");
        let topic = discovery::key_config_topic("homeassistant", "basket", key);
        assert!(rumqttc::valid_topic(&topic), "{topic:?}");
        assert!(
            topic.starts_with("homeassistant/sensor/wattson_basket/")
                || topic.starts_with("homeassistant/binary_sensor/wattson_basket/"),
            "{topic:?}"
        );
        assert_eq!(topic.matches('/').count(), 4, "{topic:?}");
    }
});
