//! The MQTT driver's framing filter: any bytes as what a broker sends. The first two bytes
//! choose the client's payload limit and the size of the reads the stream arrives in.
//! Property: no panic, and the output (or the error) does not depend on how the stream was
//! split into reads; no PUBLISH larger than the limit plus its header comes out.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wattson::publish::mqtt::driver::frames::Filter;

const NONCE: [u8; 16] = *b"wattson-fuzzing!";

fuzz_target!(|data: &[u8]| {
    let [limit, chunk, stream @ ..] = data else {
        return;
    };
    let limit = usize::from(*limit) * 4;
    let chunk = usize::from(*chunk).max(1);
    let mut whole = Vec::new();
    let whole_result = Filter::new(limit, NONCE).feed(stream, &mut whole);
    let mut split = Vec::new();
    let mut filter = Filter::new(limit, NONCE);
    let mut split_result = Ok(());
    for c in stream.chunks(chunk) {
        split_result = filter.feed(c, &mut split);
        if split_result.is_err() {
            break;
        }
    }
    assert_eq!(whole_result, split_result);
    if whole_result.is_ok() {
        assert_eq!(whole, split);
    }
    // Every packet that came out is within what the client accepts.
    let max = Filter::max_client_packet(limit);
    let mut rest = &whole[..];
    while let Some((len, header)) = remaining_length(rest) {
        assert!(len <= max, "a {len}-byte packet for a client taking {max}");
        if header + len > rest.len() {
            break;
        }
        rest = &rest[header + len..];
    }
});

/// The remaining length of the packet at the start of `b` and its fixed header's size.
fn remaining_length(b: &[u8]) -> Option<(usize, usize)> {
    let mut len = 0usize;
    for i in 1..=4 {
        let byte = *b.get(i)?;
        len |= usize::from(byte & 0x7f) << (7 * (i - 1));
        if byte & 0x80 == 0 {
            return Some((len, i + 1));
        }
    }
    None
}
