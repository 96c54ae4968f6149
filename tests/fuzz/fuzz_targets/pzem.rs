//! PZEM-004T / PZEM-017 replies (Modbus RTU, function 0x04): any bytes through the reply
//! parser (which resynchronises on junk) and every reply it yields through the decoder.
//! Property: no panic; a decoded reading is finite.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wattson_collectors::meter::pzem::{self, PzemModel};

fuzz_target!(|data: &[u8]| {
    for model in [PzemModel::Ac, PzemModel::Dc] {
        for address in [pzem::GENERAL_ADDRESS, 1] {
            let mut parser = pzem::read_parser(model, address);
            // Fed in two pieces, as a serial read splits a frame.
            let cut = data
                .first()
                .map_or(0, |&b| usize::from(b) % (data.len() + 1));
            parser.push(&data[..cut]);
            parser.push(&data[cut..]);
            while let Some(reply) = parser.next_reply() {
                if let Ok(reply) = reply
                    && let Ok(r) = pzem::decode(model, &reply)
                {
                    for v in [r.power_w, r.voltage_v, r.current_a, r.energy_wh]
                        .into_iter()
                        .flatten()
                    {
                        assert!(v.is_finite(), "{r:?}");
                    }
                }
            }
        }
        let mut parser = pzem::read_address_parser(pzem::GENERAL_ADDRESS);
        parser.push(data);
        while let Some(reply) = parser.next_reply() {
            if let Ok(reply) = reply
                && let Some(a) = pzem::decode_address(&reply)
            {
                assert!((1..=247).contains(&a));
            }
        }
    }
});
