//! `calibration export --format prometheus`: a model built from the bytes (hostile names,
//! NaN, infinities and 1e308 among its numbers) and a host name. Property: refused with a
//! reason, or a rules file that parses to exactly the keys and values meant, its `expr` the
//! expression composed (`publish::calibration::properties::prometheus_rule_holds`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use wattson::publish::calibration::properties::{model_from_bytes, prometheus_rule_holds};

fuzz_target!(|data: &[u8]| {
    let (model, host) = model_from_bytes(data);
    if let Err(e) = prometheus_rule_holds(&model, &host) {
        panic!("{e}");
    }
});
