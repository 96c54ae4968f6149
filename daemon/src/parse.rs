//! Parsers of the numbers and durations a person types: the command line's options (as clap
//! value parsers) and the HTTP report's query parameters share them, so both refuse the
//! same values with the same words. Each error says what to give instead.

/// clap value parser for durations such as `90s` or `2m`.
pub fn parse_duration_arg(s: &str) -> Result<std::time::Duration, String> {
    if s.trim_start().starts_with('-') {
        return Err(format!(
            "{s} is negative: give a positive duration such as 5s"
        ));
    }
    crate::config::parse_duration(s).map_err(|e| e.to_string())
}

/// clap value parser for a duration that may be 0 (`0`, `0s`: "not at all"), such as
/// `wattson idle --sample` and `--watch`.
pub fn parse_duration_or_zero(s: &str) -> Result<std::time::Duration, String> {
    let t = s.trim();
    let digits = t.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    if !digits.is_empty() && digits.bytes().all(|b| b == b'0' || b == b'.') {
        return Ok(std::time::Duration::ZERO);
    }
    parse_duration_arg(s)
}

/// clap value parser for a quantity that is 0 or more (watts, seconds, money, g CO2/kWh).
/// Options that take one also take values starting with `-`, so `-5` reaches this check
/// instead of being mistaken for an option.
pub fn parse_non_negative(s: &str) -> Result<f64, String> {
    let v = parse_number(s)?;
    if v < 0.0 {
        return Err(format!("{s} is negative: give 0 or more"));
    }
    Ok(v)
}

/// clap value parser for a quantity that is more than 0.
pub fn parse_positive(s: &str) -> Result<f64, String> {
    let v = parse_number(s)?;
    if v <= 0.0 {
        return Err(format!("{s} is not more than 0: give a positive number"));
    }
    Ok(v)
}

/// clap value parser for any finite number (negative allowed).
pub fn parse_number(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        _ => Err(format!("{s:?} is not a number")),
    }
}

/// clap value parser for a count (loops, samples, a seed): a whole number, 0 or more.
pub fn parse_count(s: &str) -> Result<usize, String> {
    let t = s.trim();
    if t.starts_with('-') {
        return Err(format!("{s} is negative: give a whole number, 0 or more"));
    }
    t.parse()
        .map_err(|_| format!("{s:?} is not a whole number"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_checked_with_their_sign() {
        assert_eq!(parse_non_negative("0").unwrap(), 0.0);
        assert!(parse_non_negative("-5").unwrap_err().contains("negative"));
        assert!(parse_positive("0").is_err());
        assert!(parse_count("-5").unwrap_err().contains("negative"));
        assert!(parse_count("two").unwrap_err().contains("whole number"));
        assert!(parse_duration_arg("-5s").unwrap_err().contains("negative"));
        assert!(parse_number("nan").is_err());
        for zero in ["0", "0s", "0.0min"] {
            assert_eq!(
                parse_duration_or_zero(zero).unwrap(),
                std::time::Duration::ZERO
            );
        }
        assert_eq!(
            parse_duration_or_zero("2s").unwrap(),
            std::time::Duration::from_secs(2)
        );
        assert!(parse_duration_or_zero("-1s").is_err());
        assert!(parse_duration_or_zero("s").is_err());
    }
}
