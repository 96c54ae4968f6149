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
