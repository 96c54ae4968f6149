//! Eastron SDM replies (Modbus RTU, function 0x04, one IEEE-754 float): any bytes through the
//! reply parser and the float decoder. Property: no panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wattson_collectors::meter::sdm;

fuzz_target!(|data: &[u8]| {
    for address in [1, 2, 247] {
        let mut parser = sdm::read_parser(address);
        parser.push(data);
        while let Some(reply) = parser.next_reply() {
            if let Ok(reply) = reply {
                let _ = sdm::decode_float(&reply);
            }
        }
    }
});
