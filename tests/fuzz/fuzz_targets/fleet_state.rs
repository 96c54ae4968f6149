//! The fleet collector (`wattson collect`): any bytes as the payload of a host's
//! `<prefix>/<host>/state` message, parsed, deduplicated and handed to a sink. Property: no
//! panic; what reaches the sink is finite and stamped with one timestamp per message.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wattson::sources::MemorySink;
use wattson::sources::fleet::{self, Dedupe, FleetStats};

fuzz_target!(|data: &[u8]| {
    let mut sink = MemorySink::default();
    let mut dedupe = Dedupe::default();
    let stats = FleetStats::default();
    fleet::handle(
        "wattson",
        "wattson/h/state",
        data,
        &mut dedupe,
        &mut sink,
        &stats,
    );
    if let Some(samples) = sink.by_host.get("h") {
        let ts = samples.first().map(|s| s.ts_ms);
        for s in samples {
            assert!(s.value.is_finite(), "{s:?}");
            assert_eq!(Some(s.ts_ms), ts);
        }
    }
    let _ = wattson::publish::mqtt::state::parse(data);
});
