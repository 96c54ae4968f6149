//! The config file (`wattson.toml`): any UTF-8 text through the strict parser and
//! validation. Property: no panic; an error names where (a line, or a key).
#![no_main]

use libfuzzer_sys::fuzz_target;
use wattson::config::Config;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Err(e) = Config::from_toml(text, std::path::Path::new("fuzz.toml")) {
        let msg = e.to_string();
        assert!(!msg.is_empty());
    }
});
