//! The fleet collector (`wattson collect`): any bytes as the payload of a host's
//! `<prefix>/<host>/state` message, parsed, deduplicated, bounded and handed to a sink.
//! Property: no panic; what reaches the sink is finite and stamped with one timestamp per
//! message.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wattson::sources::MemorySink;
use wattson::sources::fleet::{FleetStats, Intake};

fuzz_target!(|data: &[u8]| {
    let mut sink = MemorySink::default();
    let mut intake = Intake::new("wattson", 10, Vec::new());
    let stats = FleetStats::default();
    intake.handle("wattson/h/state", data, &mut sink, &stats);
    if let Some(samples) = sink.by_host.get("h") {
        let ts = samples.first().map(|s| s.ts_ms);
        for s in samples {
            assert!(s.value.is_finite(), "{s:?}");
            assert_eq!(Some(s.ts_ms), ts);
        }
    }
    let _ = wattson::publish::mqtt::state::parse(data);
});
