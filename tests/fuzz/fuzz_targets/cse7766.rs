//! CSE7766 / HLW8032 24-byte frames as the chip streams them (4800 baud, every 50 ms).
//! Property: no panic; a reading is finite.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wattson_collectors::meter::StreamDecoder as _;
use wattson_collectors::meter::cse7766::{Chip, CseDecoder, Hlw8032Constants};

fuzz_target!(|data: &[u8]| {
    for chip in [Chip::Cse7766, Chip::Hlw8032(Hlw8032Constants::default())] {
        let mut decoder = CseDecoder::new(chip);
        for piece in data.chunks(11) {
            decoder.push(piece);
            while let Some(r) = decoder.next_reading() {
                if let Ok(r) = r {
                    for v in [r.power_w, r.voltage_v, r.current_a, r.energy_wh]
                        .into_iter()
                        .flatten()
                    {
                        assert!(v.is_finite(), "{r:?}");
                    }
                }
            }
        }
    }
});
