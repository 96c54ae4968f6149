//! The config file (`wattson.toml`): any UTF-8 text through the strict parser and
//! validation. Properties: no panic; an error names where (a line, or a key); a config that
//! is accepted prints an effective config that parses back into the same config.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wattson::config::Config;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let path = std::path::Path::new("fuzz.toml");
    match Config::from_toml(text, path) {
        Err(e) => {
            let msg = e.to_string();
            assert!(!msg.is_empty());
        }
        Ok(config) => {
            let effective = config.to_effective_toml().expect("printing the effective config");
            let again = Config::from_toml(&effective, path)
                .unwrap_or_else(|e| panic!("{e}\n--- effective:\n{effective}"));
            assert_eq!(again, config, "--- effective:\n{effective}");
        }
    }
});
