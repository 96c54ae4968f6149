//! Durations in the config file and on the command line: `500ms`, `1s`, `10m`, `2h`, `30d`,
//! with an optional decimal fraction (`1.5s`). Parsed in whole nanoseconds with checked
//! arithmetic, so no spelling can overflow, wrap or panic; each config key then has its own
//! sane range ([`Range`]).

use std::fmt;
use std::time::Duration;

/// The longest duration anything accepts: 1000 years (365,000 days). Far beyond any key's
/// range, and small enough that adding it to an `Instant` or turning it into i64
/// milliseconds can never overflow.
pub const MAX_DURATION: Duration = Duration::from_secs(365_000 * 86_400);

const HINT: &str = "write e.g. \"1s\", \"500ms\", \"30d\"";

/// Why a text is not a duration, or a duration is outside a key's [`Range`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("{text:?} is negative: a duration is more than 0; {HINT}")]
    Negative { text: String },
    #[error("{text:?} has no unit: {HINT}")]
    NoUnit { text: String },
    #[error("unknown unit {unit:?} in {text:?}: use ms, s, m, h or d")]
    UnknownUnit { unit: String, text: String },
    #[error("{text:?} is not a duration: {HINT}")]
    NotADuration { text: String },
    /// Longer than [`MAX_DURATION`].
    #[error("{text:?} is too long: at most {}", format_duration(MAX_DURATION))]
    TooLong { text: String },
    #[error("{text:?} is 0: a duration is more than 0; {HINT}")]
    Zero { text: String },
    #[error("{} is too short: use {range}", format_duration(*duration))]
    BelowRange { duration: Duration, range: Range },
    #[error("{} is too long: use {range}", format_duration(*duration))]
    AboveRange { duration: Duration, range: Range },
}

/// Parse a duration such as `500ms`, `1s`, `10m`, `2h`, `30d` (also `1.5s`).
pub fn parse_duration(s: &str) -> Result<Duration, DurationError> {
    let s = s.trim();
    let text = || s.to_owned();
    if s.starts_with('-') {
        return Err(DurationError::Negative { text: text() });
    }
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| DurationError::NoUnit { text: text() })?;
    let (num, unit) = s.split_at(split);
    let unit_ns: u128 = match unit.trim() {
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" | "min" => 60 * 1_000_000_000,
        "h" => 3600 * 1_000_000_000,
        "d" => 86_400 * 1_000_000_000,
        other => {
            return Err(DurationError::UnknownUnit {
                unit: other.to_owned(),
                text: text(),
            });
        }
    };
    let (whole, fraction) = num.split_once('.').unwrap_or((num, ""));
    if (whole.is_empty() && fraction.is_empty())
        || fraction.contains('.')
        || !whole
            .bytes()
            .chain(fraction.bytes())
            .all(|b| b.is_ascii_digit())
    {
        return Err(DurationError::NotADuration { text: text() });
    }
    let too_long = || DurationError::TooLong { text: text() };
    // Leading zeros cannot overflow; more than 30 significant digits always would.
    let whole = whole.trim_start_matches('0');
    if whole.len() > 30 {
        return Err(too_long());
    }
    let whole: u128 = if whole.is_empty() {
        0
    } else {
        whole.parse().map_err(|_| too_long())?
    };
    let mut ns = whole.checked_mul(unit_ns).ok_or_else(too_long)?;
    // The fraction, digit by digit: anything finer than a nanosecond is dropped.
    let mut scale = unit_ns;
    for digit in fraction.bytes() {
        scale /= 10;
        if scale == 0 {
            break;
        }
        ns = ns.saturating_add(u128::from(digit - b'0') * scale);
    }
    if ns == 0 {
        return Err(DurationError::Zero { text: text() });
    }
    if ns > MAX_DURATION.as_nanos() {
        return Err(too_long());
    }
    let secs = (ns / 1_000_000_000) as u64;
    let nanos = (ns % 1_000_000_000) as u32;
    Ok(Duration::new(secs, nanos))
}

/// Format a duration in the largest unit that represents it exactly (`90s`, `2h`); below a
/// millisecond's precision as decimal milliseconds (`0.5ms`), so it parses back unchanged.
pub fn format_duration(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns == 0 {
        return "0s".to_owned();
    }
    for (unit, size) in [
        ("d", 86_400_000_000_000u128),
        ("h", 3_600_000_000_000),
        ("m", 60_000_000_000),
        ("s", 1_000_000_000),
        ("ms", 1_000_000),
    ] {
        if ns.is_multiple_of(size) {
            return format!("{}{unit}", ns / size);
        }
    }
    let fraction = format!("{:06}", ns % 1_000_000);
    format!("{}.{}ms", ns / 1_000_000, fraction.trim_end_matches('0'))
}

/// The range a config key accepts, inclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    pub min: Duration,
    pub max: Duration,
}

impl Range {
    pub const fn new(min: Duration, max: Duration) -> Range {
        Range { min, max }
    }

    /// `Ok(d)` inside the range, else why not (naming the limits).
    pub fn check(self, d: Duration) -> Result<Duration, DurationError> {
        if d < self.min {
            Err(DurationError::BelowRange {
                duration: d,
                range: self,
            })
        } else if d > self.max {
            Err(DurationError::AboveRange {
                duration: d,
                range: self,
            })
        } else {
            Ok(d)
        }
    }
}

impl fmt::Display for Range {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} to {}",
            format_duration(self.min),
            format_duration(self.max)
        )
    }
}

/// A duration as written in the file (`"1s"`), parsed while the file is read so that a bad
/// one is reported with its key and line like any other bad value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Written(pub Duration);

impl<'de> serde::Deserialize<'de> for Written {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        parse_duration(&text)
            .map(Written)
            .map_err(serde::de::Error::custom)
    }
}

/// Serialize a duration as the file writes it (`"1s"`).
pub(super) fn serialize<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format_duration(*d))
}

/// [`serialize`] for an optional duration (skip `None` with `skip_serializing_if`).
#[allow(clippy::ref_option)] // serde's `serialize_with` passes a reference to the field
pub(super) fn serialize_opt<S: serde::Serializer>(
    d: &Option<Duration>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => serialize(d, s),
        None => s.serialize_none(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_and_format() {
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration(".5s").unwrap(), Duration::from_millis(500));
        assert_eq!(
            parse_duration("30d").unwrap(),
            Duration::from_secs(30 * 86_400)
        );
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("10").is_err());
        assert!(parse_duration("1..5s").is_err());
        assert!(parse_duration(".s").is_err());
        assert!(parse_duration("-1s").is_err());
        assert_eq!(format_duration(Duration::from_secs(90)), "90s");
        assert_eq!(format_duration(Duration::from_secs(7200)), "2h");
        assert_eq!(format_duration(Duration::from_micros(500)), "0.5ms");
        assert_eq!(
            format_duration(Duration::from_nanos(1_000_001)),
            "1.000001ms"
        );
    }

    /// Regression: `interval = "18446744073709551616s"` panicked in `Duration::from_secs_f64`
    /// (exit 134 on every command) and `raw_retention = "18446744073709552s"` wrapped to
    /// 384 ms once turned into i64 milliseconds.
    #[test]
    fn a_negative_duration_says_it_is_negative() {
        let e = parse_duration("-1s").unwrap_err().to_string();
        assert!(e.starts_with("\"-1s\" is negative"), "{e}");
        // 0 and below are refused for the one reason, said the one way.
        let zero = parse_duration("0d").unwrap_err().to_string();
        assert!(
            zero.starts_with("\"0d\" is 0: a duration is more than 0"),
            "{zero}"
        );
        assert!(e.contains("a duration is more than 0"), "{e}");
    }

    #[test]
    fn huge_durations_are_refused_not_wrapped_or_panicking() {
        for s in [
            "18446744073709551616s",
            "18446744073709552s",
            "60000000000000d",
            "365001d",
            "99999999999999999999999999999999999999999999d",
            "340282366920938463463374607431768211456ms",
        ] {
            let e = parse_duration(s).unwrap_err().to_string();
            assert!(e.contains("too long"), "{s}: {e}");
        }
        assert_eq!(parse_duration("365000d").unwrap(), MAX_DURATION);
        assert_eq!(
            parse_duration("0000000000000000000000000000000000001s").unwrap(),
            Duration::from_secs(1)
        );
    }

    #[test]
    fn sub_nanosecond_fractions_are_dropped_and_zero_refused() {
        assert_eq!(
            parse_duration("0.0001ms").unwrap(),
            Duration::from_nanos(100)
        );
        assert!(parse_duration("0.0000000001s").is_err());
        assert_eq!(
            parse_duration("1.0000000009s").unwrap(),
            Duration::from_secs(1)
        );
    }

    proptest::proptest! {
        #[test]
        fn any_text_parses_or_errs_without_panicking(s in "\\PC{0,40}") {
            let _ = parse_duration(&s);
        }

        #[test]
        fn formatted_durations_parse_back(ns in 1u64..=u64::MAX) {
            let d = Duration::from_nanos(ns);
            proptest::prop_assert_eq!(parse_duration(&format_duration(d)), Ok(d));
        }

        #[test]
        fn decimal_spellings_never_panic(whole in "[0-9]{0,45}", frac in "[0-9]{0,20}", unit in "(ms|s|m|h|d)") {
            let _ = parse_duration(&format!("{whole}.{frac}{unit}"));
            let _ = parse_duration(&format!("{whole}{unit}"));
        }
    }

    #[test]
    fn range_names_its_limits() {
        let r = Range::new(Duration::from_millis(100), Duration::from_secs(3600));
        assert_eq!(
            r.check(Duration::from_nanos(100)).unwrap_err().to_string(),
            "0.0001ms is too short: use 100ms to 1h"
        );
        assert!(r.check(Duration::from_secs(3601)).is_err());
        assert!(r.check(Duration::from_secs(1)).is_ok());
    }
}
