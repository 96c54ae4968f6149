//! Modbus RTU requests as a simulated device parses them (`wattson meter simulate` reads
//! whatever a client writes). Property: no panic; every request re-encodes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wattson_collectors::meter::modbus::RequestParser;
use wattson_collectors::meter::pzem::RESET_ENERGY;

fuzz_target!(|data: &[u8]| {
    for bare in [&[][..], &[RESET_ENERGY][..]] {
        let mut parser = RequestParser::new(bare);
        for piece in data.chunks(7) {
            parser.push(piece);
            while let Some(request) = parser.next_request() {
                let _ = request.encode();
            }
        }
    }
});
