//! MQTT 3.1.1 framing of what a broker sends (OASIS mqtt-v3.1.1 §2.2, the fixed header and
//! its remaining length; §3.3, PUBLISH), filtered so that a client never receives a message
//! larger than it accepts.
//!
//! rumqttc 0.25 reads a packet whose remaining length exceeds its `max_packet_size` as an
//! error and drops the connection (`mqttbytes::check`: `PayloadSizeLimitExceeded`), and the
//! broker sends a retained or unacknowledged QoS 1 message again on the next connection: one
//! oversized message would stop a client for good. [`Filter`] sits between the broker's bytes
//! and rumqttc. Packets within the limit pass through unchanged; a PUBLISH whose payload is
//! larger is read up to its packet id, the payload is discarded as it streams in, and the
//! client receives the same PUBLISH (flags, topic, packet id) with a [`MARKER_LEN`]-byte
//! payload instead: this filter's nonce and the original payload size. The client
//! acknowledges it as usual (so it does not come back), and the driver, which knows the
//! nonce, counts and logs it ([`marker_size`]). Memory is bounded by the PUBLISH variable
//! header (at most 65,539 bytes) whatever the broker sends.

/// Bytes of a replaced payload: the 16-byte nonce, then the original size (u64, big endian).
pub const MARKER_LEN: usize = 16 + 8;

/// Largest remaining length accepted for any packet but PUBLISH (a broker sends CONNACK,
/// SUBACK, acknowledgements and PINGRESP, all a few bytes).
pub const MAX_CONTROL_PACKET: usize = 64 * 1024;

/// Largest PUBLISH variable header: topic length, a topic of up to 65,535 bytes, packet id.
pub const MAX_PUBLISH_HEADER: usize = 2 + 65_535 + 2;

/// Why the broker's byte stream cannot be read as MQTT: the connection has to go.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("the broker sent a packet with a malformed remaining length")]
    RemainingLength,
    #[error(
        "the broker sent a {size}-byte packet of type {kind} (at most {MAX_CONTROL_PACKET} accepted)"
    )]
    ControlTooLarge { kind: u8, size: usize },
    #[error("the broker sent a malformed PUBLISH ({0})")]
    Publish(&'static str),
}

/// Where the filter is in the stream.
#[derive(Debug)]
enum State {
    /// Reading a fixed header: the first byte and up to four remaining-length bytes.
    Header { buf: [u8; 5], len: usize },
    /// Passing `left` more bytes of the current packet through.
    Pass { left: usize },
    /// An oversized PUBLISH: collecting its variable header (topic, packet id).
    PublishHeader {
        first: u8,
        remaining: usize,
        buf: Vec<u8>,
    },
    /// Discarding `left` more payload bytes of an oversized PUBLISH.
    Skip { left: usize },
}

impl State {
    fn header() -> State {
        State::Header {
            buf: [0; 5],
            len: 0,
        }
    }
}

/// The broker-to-client filter; see the module documentation.
#[derive(Debug)]
pub struct Filter {
    max_payload: usize,
    nonce: [u8; 16],
    state: State,
}

impl Filter {
    /// Passes PUBLISH payloads of up to `max_payload` bytes; `nonce` marks replaced ones.
    pub fn new(max_payload: usize, nonce: [u8; 16]) -> Filter {
        Filter {
            max_payload,
            nonce,
            state: State::header(),
        }
    }

    /// The largest packet (remaining length) the client can then receive: a PUBLISH with
    /// the longest topic and a payload within the limit (or a marker), or a control packet.
    pub fn max_client_packet(max_payload: usize) -> usize {
        (max_payload.max(MARKER_LEN) + MAX_PUBLISH_HEADER).max(MAX_CONTROL_PACKET)
    }

    /// Feeds bytes read from the broker; appends what the client should read to `out`.
    /// Any split of the same stream into calls gives the same output.
    pub fn feed(&mut self, mut input: &[u8], out: &mut Vec<u8>) -> Result<(), FrameError> {
        while !input.is_empty() {
            match &mut self.state {
                State::Header { buf, len } => {
                    buf[*len] = input[0];
                    input = &input[1..];
                    *len += 1;
                    if *len == 1 || buf[*len - 1] & 0x80 != 0 {
                        if *len == buf.len() {
                            return Err(FrameError::RemainingLength);
                        }
                        continue;
                    }
                    let remaining = buf[1..*len]
                        .iter()
                        .rev()
                        .fold(0usize, |acc, b| (acc << 7) | usize::from(b & 0x7f));
                    let first = buf[0];
                    let kind = first >> 4;
                    if kind == 3 && remaining > self.max_payload {
                        self.state = State::PublishHeader {
                            first,
                            remaining,
                            buf: Vec::new(),
                        };
                    } else if kind != 3 && remaining > MAX_CONTROL_PACKET {
                        return Err(FrameError::ControlTooLarge {
                            kind,
                            size: remaining,
                        });
                    } else {
                        out.extend_from_slice(&buf[..*len]);
                        self.state = if remaining == 0 {
                            State::header()
                        } else {
                            State::Pass { left: remaining }
                        };
                    }
                }
                State::Pass { left } => {
                    let n = (*left).min(input.len());
                    out.extend_from_slice(&input[..n]);
                    input = &input[n..];
                    *left -= n;
                    if *left == 0 {
                        self.state = State::header();
                    }
                }
                State::Skip { left } => {
                    let n = (*left).min(input.len());
                    input = &input[n..];
                    *left -= n;
                    if *left == 0 {
                        self.state = State::header();
                    }
                }
                State::PublishHeader {
                    first,
                    remaining,
                    buf,
                } => {
                    let qos = (*first >> 1) & 3;
                    if qos == 3 {
                        return Err(FrameError::Publish("QoS 3"));
                    }
                    if buf.len() < 2 {
                        let n = (2 - buf.len()).min(input.len());
                        buf.extend_from_slice(&input[..n]);
                        input = &input[n..];
                        if buf.len() < 2 {
                            continue;
                        }
                    }
                    let need = 2
                        + usize::from(u16::from_be_bytes([buf[0], buf[1]]))
                        + if qos > 0 { 2 } else { 0 };
                    if need > *remaining {
                        return Err(FrameError::Publish("topic longer than the packet"));
                    }
                    let n = (need - buf.len()).min(input.len());
                    buf.extend_from_slice(&input[..n]);
                    input = &input[n..];
                    if buf.len() < need {
                        continue;
                    }
                    let payload = *remaining - need;
                    let (first, remaining) = (*first, *remaining);
                    let header = std::mem::take(buf);
                    if payload <= self.max_payload {
                        // A long topic made the packet large; the payload is within the limit.
                        out.push(first);
                        push_remaining_length(out, remaining);
                        out.extend_from_slice(&header);
                        self.state = if payload == 0 {
                            State::header()
                        } else {
                            State::Pass { left: payload }
                        };
                    } else {
                        out.push(first);
                        push_remaining_length(out, header.len() + MARKER_LEN);
                        out.extend_from_slice(&header);
                        out.extend_from_slice(&self.nonce);
                        out.extend_from_slice(&(payload as u64).to_be_bytes());
                        self.state = State::Skip { left: payload };
                    }
                }
            }
        }
        Ok(())
    }
}

/// The original size of a payload this filter replaced (see [`Filter`]), or `None` for a
/// payload that came from the broker.
pub fn marker_size(payload: &[u8], nonce: &[u8; 16]) -> Option<u64> {
    if payload.len() != MARKER_LEN || payload[..16] != nonce[..] {
        return None;
    }
    let mut size = [0u8; 8];
    size.copy_from_slice(&payload[16..]);
    Some(u64::from_be_bytes(size))
}

fn push_remaining_length(out: &mut Vec<u8>, mut len: usize) {
    loop {
        let mut byte = (len & 0x7f) as u8;
        len >>= 7;
        if len > 0 {
            byte |= 0x80;
        }
        out.push(byte);
        if len == 0 {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NONCE: [u8; 16] = *b"0123456789abcdef";

    fn publish(qos: u8, retain: bool, topic: &str, pkid: u16, payload: &[u8]) -> Vec<u8> {
        let mut body = (topic.len() as u16).to_be_bytes().to_vec();
        body.extend_from_slice(topic.as_bytes());
        if qos > 0 {
            body.extend_from_slice(&pkid.to_be_bytes());
        }
        body.extend_from_slice(payload);
        let mut out = vec![0x30 | (qos << 1) | u8::from(retain)];
        push_remaining_length(&mut out, body.len());
        out.extend_from_slice(&body);
        out
    }

    fn run(filter: &mut Filter, input: &[u8], chunk: usize) -> Result<Vec<u8>, FrameError> {
        let mut out = Vec::new();
        for c in input.chunks(chunk.max(1)) {
            filter.feed(c, &mut out)?;
        }
        Ok(out)
    }

    #[test]
    fn packets_within_the_limit_pass_unchanged() {
        let mut stream = vec![0x20, 2, 0, 0]; // CONNACK
        stream.extend(publish(1, true, "homeassistant/status", 7, b"online"));
        stream.extend([0x90, 3, 0, 1, 1]); // SUBACK
        stream.extend([0xd0, 0]); // PINGRESP
        stream.extend(publish(0, false, "t", 0, &[b'x'; 100]));
        for chunk in [1, 2, 3, 7, 1000] {
            let out = run(&mut Filter::new(100, NONCE), &stream, chunk).unwrap();
            assert_eq!(out, stream, "chunk {chunk}");
        }
    }

    #[test]
    fn an_oversized_publish_becomes_a_marker_with_its_topic_flags_and_packet_id() {
        let big = vec![b'x'; 20_000];
        let mut stream = publish(1, true, "homeassistant/status", 9, &big);
        stream.extend(publish(0, false, "after", 0, b"ok"));
        for chunk in [1, 5, 4096, 100_000] {
            let out = run(&mut Filter::new(16 * 1024, NONCE), &stream, chunk).unwrap();
            let mut marker = NONCE.to_vec();
            marker.extend_from_slice(&20_000u64.to_be_bytes());
            let mut want = publish(1, true, "homeassistant/status", 9, &marker);
            want.extend(publish(0, false, "after", 0, b"ok"));
            assert_eq!(out, want, "chunk {chunk}");
            assert_eq!(marker_size(&marker, &NONCE), Some(20_000));
        }
        assert_eq!(marker_size(b"online", &NONCE), None);
        assert_eq!(marker_size(&[0; MARKER_LEN], &NONCE), None);
    }

    #[test]
    fn a_long_topic_with_a_small_payload_passes_whole() {
        let topic = "t".repeat(300);
        let stream = publish(1, false, &topic, 3, b"small");
        let out = run(&mut Filter::new(100, NONCE), &stream, 13).unwrap();
        assert_eq!(out, stream);
    }

    #[test]
    fn a_ten_megabyte_qos1_message_costs_no_more_memory_than_its_header() {
        let payload = vec![0u8; 10 << 20];
        let stream = publish(1, false, "wattson/h/state", 1, &payload);
        let mut f = Filter::new(64 * 1024, NONCE);
        let out = run(&mut f, &stream, 64 * 1024).unwrap();
        assert_eq!(out.len(), 2 + 2 + 15 + 2 + MARKER_LEN);
    }

    #[test]
    fn a_marker_with_the_longest_topic_still_fits_the_client() {
        let topic = "t".repeat(65_535);
        let stream = publish(1, false, &topic, 1, &[0; 100]);
        let out = run(&mut Filter::new(0, NONCE), &stream, 4096).unwrap();
        assert_eq!(out.len(), 1 + 3 + MAX_PUBLISH_HEADER + MARKER_LEN);
        assert!(MAX_PUBLISH_HEADER + MARKER_LEN <= Filter::max_client_packet(0));
    }

    #[test]
    fn protocol_violations_are_errors() {
        let mut f = Filter::new(10, NONCE);
        assert_eq!(
            f.feed(&[0x30, 0xff, 0xff, 0xff, 0xff, 0x01], &mut Vec::new()),
            Err(FrameError::RemainingLength)
        );
        let mut f = Filter::new(10, NONCE);
        assert!(matches!(
            f.feed(&[0x90, 0xff, 0xff, 0x7f], &mut Vec::new()),
            Err(FrameError::ControlTooLarge { kind: 9, .. })
        ));
        // A topic length beyond the packet.
        let mut f = Filter::new(1, NONCE);
        assert!(matches!(
            f.feed(&[0x30, 4, 0xff, 0xff, 0, 0], &mut Vec::new()),
            Err(FrameError::Publish(_))
        ));
        let mut f = Filter::new(1, NONCE);
        assert!(matches!(
            f.feed(
                &[0x36, 10, 0, 1, b't', 0, 1, 1, 2, 3, 4, 5],
                &mut Vec::new()
            ),
            Err(FrameError::Publish("QoS 3"))
        ));
    }

    proptest::proptest! {
        // 2,000 cases; more: PROPTEST_CASES=20000 cargo test -p wattson --lib frames::tests::fuzz
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(
            std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(2000)
        ))]

        /// Arbitrary broker bytes: no panic, and the output (or the error) does not depend on
        /// how the stream was split into reads.
        #[test]
        fn fuzz_any_split_of_any_stream_gives_the_same_output(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..400),
            limit in 0usize..64,
            chunk in 1usize..40,
        ) {
            let whole = run(&mut Filter::new(limit, NONCE), &bytes, bytes.len());
            let split = run(&mut Filter::new(limit, NONCE), &bytes, chunk);
            proptest::prop_assert_eq!(whole, split);
        }

        /// Well-formed PUBLISH packets of any size: each comes out either unchanged or as a
        /// marker naming its size, and never larger than the client accepts.
        #[test]
        fn fuzz_publishes_come_out_whole_or_as_markers(
            sizes in proptest::collection::vec(0usize..300, 1..8),
            limit in 0usize..200,
            chunk in 1usize..50,
        ) {
            let mut stream = Vec::new();
            let mut want = Vec::new();
            for (i, size) in sizes.iter().enumerate() {
                let p = publish(1, i % 2 == 0, "a/b", i as u16 + 1, &vec![7; *size]);
                stream.extend(&p);
                if *size <= limit {
                    want.extend(p);
                } else {
                    let mut m = NONCE.to_vec();
                    m.extend_from_slice(&(*size as u64).to_be_bytes());
                    want.extend(publish(1, i % 2 == 0, "a/b", i as u16 + 1, &m));
                }
            }
            let out = run(&mut Filter::new(limit, NONCE), &stream, chunk).unwrap();
            proptest::prop_assert_eq!(out, want);
        }
    }
}
