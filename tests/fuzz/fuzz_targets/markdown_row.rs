//! `report --format markdown`'s table rows: any candidate and configuration names as cells.
//! Property: the row stays one row of exactly as many cells, each reading as its name
//! (`report::render::markdown::row_holds`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use wattson::report::render::markdown::row_holds;

fuzz_target!(|cells: Vec<String>| {
    if cells.is_empty() {
        return;
    }
    if let Err(e) = row_holds(&cells) {
        panic!("{e}");
    }
});
