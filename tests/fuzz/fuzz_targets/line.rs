//! The text-line meter (`protocol = "line"`): any bytes through the line decoder, in the
//! default CSV layout and a key=value layout. Property: no panic; a reading is finite.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wattson_collectors::meter::StreamDecoder as _;
use wattson_collectors::meter::line::{Field, FieldMap, Layout, LineDecoder, LineFormat};

fuzz_target!(|data: &[u8]| {
    let key = |field, key: &str, scale| FieldMap {
        field,
        column: None,
        key: Some(key.to_owned()),
        scale,
    };
    let kv = LineFormat {
        layout: Layout::KeyValue {
            pair_separator: ' ',
            assign: '=',
        },
        fields: vec![
            key(Field::Power, "P", 1.0),
            key(Field::Voltage, "V", 1.0),
            key(Field::Current, "I", 0.001),
            key(Field::Energy, "E", 1.0),
        ],
        max_line_len: 256,
    };
    for format in [LineFormat::default(), kv] {
        if let Ok(text) = std::str::from_utf8(data) {
            let _ = format.parse_line(text);
        }
        let mut decoder = LineDecoder::new(format);
        for piece in data.chunks(17) {
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
