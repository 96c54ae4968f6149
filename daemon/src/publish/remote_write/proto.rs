//! The remote-write 1.0 body: a protobuf `prometheus.WriteRequest` (only the fields remote
//! write 1.0 sends: time series of labels and samples) compressed with raw (block) snappy.
//! The messages are derived by hand from `prompb/remote.proto` and `prompb/types.proto`;
//! their field numbers are the protocol's.

/// `prometheus.WriteRequest`: field 1, the time series (2, metadata, is not sent).
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct WriteRequest {
    #[prost(message, repeated, tag = "1")]
    pub timeseries: Vec<TimeSeries>,
}

/// `prometheus.TimeSeries`: its labels (sorted by name, `__name__` among them) and samples
/// (in time order).
#[derive(Clone, PartialEq, prost::Message)]
pub struct TimeSeries {
    #[prost(message, repeated, tag = "1")]
    pub labels: Vec<Label>,
    #[prost(message, repeated, tag = "2")]
    pub samples: Vec<Sample>,
}

/// `prometheus.Label`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Label {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub value: String,
}

/// `prometheus.Sample`: a value at a UTC ms timestamp.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Sample {
    #[prost(double, tag = "1")]
    pub value: f64,
    #[prost(int64, tag = "2")]
    pub timestamp: i64,
}

/// The request body: the encoded message, snappy-compressed in the block format (not the
/// framed one) as remote write requires.
pub(super) fn body(request: &WriteRequest) -> Result<Vec<u8>, snap::Error> {
    let bytes = prost::Message::encode_to_vec(request);
    snap::raw::Encoder::new().compress_vec(&bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_round_trips_through_snappy_and_protobuf() {
        let request = WriteRequest {
            timeseries: vec![TimeSeries {
                labels: vec![
                    Label {
                        name: "__name__".into(),
                        value: "wattson_power_watts".into(),
                    },
                    Label {
                        name: "host".into(),
                        value: "basket".into(),
                    },
                ],
                samples: vec![Sample {
                    value: 41.5,
                    timestamp: 1_700_000_000_000,
                }],
            }],
        };
        let compressed = body(&request).unwrap();
        let raw = snap::raw::Decoder::new()
            .decompress_vec(&compressed)
            .unwrap();
        let back: WriteRequest = prost::Message::decode(raw.as_slice()).unwrap();
        assert_eq!(back, request);
        // Field 1 (time series), length-delimited: the wire starts 0x0a.
        assert_eq!(raw[0], 0x0a);
    }
}
