//! A report's window as asked for: `--since`/`--until` (or the HTTP report's `since`/`until`)
//! parsed as a date, a moment or a duration back from now, resolved to UTC ms in the tariff's
//! zone, and refused when it holds no time.

use chrono::{DateTime, Duration, NaiveDate, Utc};

use super::ReportRequest;
use crate::config::Config;
use crate::zone::Zone;

/// A window bound as typed: a local date, a moment (RFC 3339), or a duration back from now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    Date(NaiveDate),
    At(DateTime<Utc>),
    Ago(std::time::Duration),
}

/// The parser of `--since`/`--until` (as clap's value parser) and of the HTTP report's
/// `since`/`until`.
pub fn parse_when(s: &str) -> Result<When, String> {
    if let Ok(d) = NaiveDate::parse_from_str(s, "%Y-%m-%d") {
        return Ok(When::Date(d));
    }
    if s.len() > 10 && s.as_bytes()[10] == b'T' {
        return DateTime::parse_from_rfc3339(s)
            .map(|t| When::At(t.with_timezone(&Utc)))
            .map_err(|e| {
                format!("{s:?} is not a moment (RFC 3339, e.g. 2026-12-04T18:30:00Z): {e}")
            });
    }
    let b = s.as_bytes();
    if b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && b.iter()
            .enumerate()
            .all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit())
    {
        return Err(format!("{s:?} is not a day of the calendar (YYYY-MM-DD)"));
    }
    crate::config::parse_duration(s)
        .map(When::Ago)
        .map_err(|e| {
            format!(
                "{s:?} is neither a date (YYYY-MM-DD), a moment (2026-12-04T18:30:00Z) nor a \
                 duration ({e})"
            )
        })
}

/// Resolves a bound to UTC ms. A date starts the window at its local midnight (`since`)
/// or ends it at the next one (`until`).
pub fn resolve_when(w: When, now: DateTime<Utc>, tz: Zone, end: bool) -> i64 {
    match w {
        When::Date(d) => tz
            .start_of_day(if end { d + Duration::days(1) } else { d })
            .timestamp_millis(),
        When::At(t) => t.timestamp_millis(),
        When::Ago(ago) => {
            now.timestamp_millis() - i64::try_from(ago.as_millis()).unwrap_or(i64::MAX / 2)
        }
    }
}

/// A report window that holds no time: asked for by the user (`--since`/`--until`, or the
/// HTTP report's `since`/`until`), so a bad request, not a failure.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct EmptyWindow(String);

/// Refuses a window that ends before it starts or starts in the future: either would be a
/// report with no measured section and no word why.
fn check_window(
    from_ms: Option<i64>,
    to_ms: Option<i64>,
    now: DateTime<Utc>,
) -> Result<(), EmptyWindow> {
    let at = |ms: i64| {
        DateTime::<Utc>::from_timestamp_millis(ms).map_or_else(
            || format!("{ms} ms"),
            |t| t.format("%Y-%m-%d %H:%M UTC").to_string(),
        )
    };
    if let (Some(f), Some(t)) = (from_ms, to_ms)
        && f >= t
    {
        return Err(EmptyWindow(format!(
            "the window from {} (--since) to {} (--until) holds no time: --until must come \
             after --since (a date in --until counts to the end of that day)",
            at(f),
            at(t)
        )));
    }
    if let Some(f) = from_ms.filter(|f| *f > now.timestamp_millis()) {
        return Err(EmptyWindow(format!(
            "--since {} is in the future: nothing is measured after now",
            at(f)
        )));
    }
    Ok(())
}

/// The window `args` asks for, UTC ms (dates in the tariff's time zone), or why it holds no
/// time.
pub fn window(
    config: &Config,
    args: &ReportRequest,
    now: DateTime<Utc>,
) -> Result<(Option<i64>, Option<i64>), EmptyWindow> {
    let tz = crate::report::input::tariff_from_config(&config.tariff).map_or(Zone::UTC, |t| t.tz());
    let from_ms = args.since.map(|w| resolve_when(w, now, tz, false));
    let to_ms = args.until.map(|w| resolve_when(w, now, tz, true));
    check_window(from_ms, to_ms, now)?;
    Ok((from_ms, to_ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn when_parses_dates_and_durations() {
        assert_eq!(
            parse_when("2026-03-01").unwrap(),
            When::Date(NaiveDate::from_ymd_opt(2026, 3, 1).unwrap())
        );
        assert_eq!(
            parse_when("30d").unwrap(),
            When::Ago(std::time::Duration::from_secs(30 * 86_400))
        );
        assert!(
            parse_when("last tuesday")
                .unwrap_err()
                .contains("YYYY-MM-DD")
        );
        let at = parse_when("2026-12-04T19:30:00+01:00").unwrap();
        assert_eq!(
            at,
            When::At("2026-12-04T18:30:00Z".parse::<DateTime<Utc>>().unwrap())
        );
        assert_eq!(
            resolve_when(at, Utc::now(), Zone::UTC, true),
            "2026-12-04T18:30:00Z"
                .parse::<DateTime<Utc>>()
                .unwrap()
                .timestamp_millis()
        );
        assert!(
            parse_when("2026-12-04T25:00:00Z")
                .unwrap_err()
                .contains("RFC 3339")
        );
        // A date-shaped day that is not in the calendar says so, not "unknown unit".
        assert_eq!(
            parse_when("2026-02-30").unwrap_err(),
            "\"2026-02-30\" is not a day of the calendar (YYYY-MM-DD)"
        );
        let now: DateTime<Utc> = "2026-03-31T12:00:00Z".parse().unwrap();
        let tz = Zone::named("Europe/London").unwrap();
        // 31 March is BST: local midnight is 23:00 UTC the day before.
        let d = When::Date(NaiveDate::from_ymd_opt(2026, 3, 31).unwrap());
        assert_eq!(
            resolve_when(d, now, tz, false),
            "2026-03-30T23:00:00Z"
                .parse::<DateTime<Utc>>()
                .unwrap()
                .timestamp_millis()
        );
        assert_eq!(
            resolve_when(d, now, tz, true),
            "2026-03-31T23:00:00Z"
                .parse::<DateTime<Utc>>()
                .unwrap()
                .timestamp_millis()
        );
        let ago = When::Ago(std::time::Duration::from_secs(86_400));
        assert_eq!(
            resolve_when(ago, now, tz, false),
            now.timestamp_millis() - 86_400_000
        );
    }
}
