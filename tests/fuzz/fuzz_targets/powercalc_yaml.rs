//! `calibration export --format powercalc`: a model built from the bytes (hostile names,
//! NaN, infinities and 1e308 among its numbers) and a host name. Property: refused with a
//! reason, or YAML that parses to exactly the keys and values meant
//! (`publish::calibration::properties::powercalc_holds`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use wattson::publish::calibration::properties::{model_from_bytes, powercalc_holds};

fuzz_target!(|data: &[u8]| {
    let (model, host) = model_from_bytes(data);
    if let Err(e) = powercalc_holds(&model, &host) {
        panic!("{e}");
    }
});
