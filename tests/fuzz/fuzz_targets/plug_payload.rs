//! Smart plugs: any bytes as a Tasmota `tele/<topic>/SENSOR` or a Shelly
//! `<id>/status/switch:0` payload. Property: no panic; a parsed reading has a finite power
//! and only finite optional values.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wattson::sources::plug::{parse_shelly_switch, parse_tasmota_sensor};

fuzz_target!(|data: &[u8]| {
    if let Ok(r) = parse_tasmota_sensor(data) {
        assert!(r.is_finite(), "{r:?}");
    }
    if let Ok(r) = parse_shelly_switch(data) {
        assert!(r.is_finite(), "{r:?}");
    }
});
