//! Durations in the config file and on the command line: `500ms`, `1s`, `10m`, `2h`, `30d`.

use std::time::Duration;

/// Parse a duration such as `500ms`, `1s`, `10m`, `2h`, `30d`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| format!("{s:?} has no unit: write e.g. \"1s\", \"500ms\", \"30d\""))?;
    let (num, unit) = s.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a duration: write e.g. \"1s\", \"500ms\", \"30d\""))?;
    let secs = match unit.trim() {
        "ms" => n / 1000.0,
        "s" => n,
        "m" | "min" => n * 60.0,
        "h" => n * 3600.0,
        "d" => n * 86_400.0,
        other => {
            return Err(format!(
                "unknown unit {other:?} in {s:?}: use ms, s, m, h or d"
            ));
        }
    };
    if !secs.is_finite() || secs <= 0.0 {
        return Err(format!("{s:?} must be a positive duration"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Format a duration in the largest unit that represents it exactly.
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms == 0 {
        return "0s".to_owned();
    }
    for (unit, size) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1000),
    ] {
        if ms.is_multiple_of(size) {
            return format!("{}{unit}", ms / size);
        }
    }
    format!("{ms}ms")
}
