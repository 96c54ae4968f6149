//! Wiring of the serial meter collectors into the daemon.

/// Protocol names accepted in `[[meter]] protocol = ...`.
pub const PROTOCOL_NAMES: &[&str] = &[
    "pzem004t", "pzem017", "sdm120", "sdm230", "sdm630", "wattsup", "cse7766", "hlw8032", "line",
];
