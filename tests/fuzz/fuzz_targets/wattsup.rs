//! Watts Up? records (`#d,...;` text packets) as the meter streams them, and commands as
//! the simulated meter reads them. Property: no panic; a reading is finite.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wattson_collectors::meter::StreamDecoder as _;
use wattson_collectors::meter::wattsup::{self, CommandParser, WattsUpDecoder};

fuzz_target!(|data: &[u8]| {
    let mut decoder = WattsUpDecoder::new();
    for piece in data.chunks(13) {
        decoder.push(piece);
        while let Some(r) = decoder.next_reading() {
            if let Ok(r) = r {
                for v in [r.power_w, r.voltage_v, r.current_a].into_iter().flatten() {
                    assert!(v.is_finite(), "{r:?}");
                }
            }
        }
    }
    let mut commands = CommandParser::default();
    for packet in commands.push(data) {
        let _ = wattsup::device_action(&packet);
    }
});
