//! The parsers against files written from the published formats (`daemon/tests/fixtures/
//! tariff/`), and against what a hostile or broken file holds.

use super::*;

const AGILE: &str = include_str!("../../../tests/fixtures/tariff/agile-2026-11-29.json");
const AGILE_DST: &str = include_str!("../../../tests/fixtures/tariff/agile-2026-10-25-dst.json");
const PAGE_1: &str = include_str!("../../../tests/fixtures/tariff/agile-page-1.json");
const PAGE_2: &str = include_str!("../../../tests/fixtures/tariff/agile-page-2.json");
const ENTSOE: &str = include_str!("../../../tests/fixtures/tariff/entsoe-de-lu-2026-10-25.csv");
const NORDPOOL: &str = include_str!("../../../tests/fixtures/tariff/nordpool-se3-2026-11-30.csv");
const CARBON: &str = include_str!("../../../tests/fixtures/tariff/carbon-2026-11-29.json");

fn opts() -> Options {
    Options {
        format: Format::Auto,
        exc_vat: false,
        currency: "GBP".to_owned(),
        timezone: None,
        column: None,
        max_price: 10.0,
    }
}

fn ms(s: &str) -> i64 {
    DateTime::parse_from_rfc3339(s).unwrap().timestamp_millis()
}

#[test]
fn an_agile_day_newest_first_with_negative_slots() {
    let p = parse(AGILE, &opts()).unwrap();
    assert_eq!(p.format, Format::Octopus);
    assert_eq!(p.unit, "GBP");
    assert_eq!(p.slots.len(), 48);
    // Sorted oldest first, although the API gives newest first.
    assert_eq!(p.slots[0].start_ms, ms("2026-11-29T00:00:00Z"));
    assert_eq!(p.slots[47].end_ms, ms("2026-11-30T00:00:00Z"));
    // 18.4 p/kWh inc VAT is GBP 0.184.
    assert!((p.slots[0].value - 0.184).abs() < 1e-12);
    assert_eq!(p.slots.iter().filter(|s| s.value < 0.0).count(), 4);
    assert!((p.slots[8].value + 0.0399).abs() < 1e-12);
    let exc = parse(
        AGILE,
        &Options {
            exc_vat: true,
            ..opts()
        },
    )
    .unwrap();
    assert!((exc.slots[0].value - 0.184 / 1.05).abs() < 1e-6);
    assert!(exc.notes[0].contains("without VAT"));
}

#[test]
fn the_uk_clock_change_day_has_fifty_half_hours() {
    let p = parse(AGILE_DST, &opts()).unwrap();
    assert_eq!(p.slots.len(), 50);
    // Local midnight to midnight in Europe/London: BST 00:00 is 23:00 UTC the day before.
    assert_eq!(p.slots[0].start_ms, ms("2026-10-24T23:00:00Z"));
    assert_eq!(p.slots[49].end_ms, ms("2026-10-26T00:00:00Z"));
    assert!(p.slots.windows(2).all(|w| w[0].end_ms == w[1].start_ms));
}

#[test]
fn pages_name_the_next_one() {
    let a = parse(PAGE_1, &opts()).unwrap();
    let b = parse(PAGE_2, &opts()).unwrap();
    assert_eq!(a.slots.len() + b.slots.len(), 48);
    assert!(
        a.notes.iter().any(|n| n.contains("page=2")),
        "{:?}",
        a.notes
    );
    assert!(!b.notes.iter().any(|n| n.contains("next page")));
    // Newest first: page 1 holds the afternoon.
    assert_eq!(a.slots[0].start_ms, ms("2026-11-29T12:00:00Z"));
    assert_eq!(b.slots[23].end_ms, ms("2026-11-29T12:00:00Z"));
}

#[test]
fn entsoe_day_ahead_on_the_cet_clock_change() {
    let p = parse(ENTSOE, &opts()).unwrap();
    assert_eq!(p.format, Format::Entsoe);
    assert_eq!(p.unit, "EUR");
    // 25 MTUs on the day the clock goes back, one not published (n/e).
    assert_eq!(p.slots.len(), 24);
    // 00:00 CEST is 22:00 UTC the day before.
    assert_eq!(p.slots[0].start_ms, ms("2026-10-24T22:00:00Z"));
    // The two 02:00-03:00 MTUs are 00:00 and 01:00 UTC, an hour each.
    assert_eq!(p.slots[2].start_ms, ms("2026-10-25T00:00:00Z"));
    assert_eq!(p.slots[2].end_ms, ms("2026-10-25T01:00:00Z"));
    assert_eq!(p.slots[3].start_ms, ms("2026-10-25T01:00:00Z"));
    assert_eq!(p.slots[3].end_ms, ms("2026-10-25T02:00:00Z"));
    assert!((p.slots[0].value - 0.092_14).abs() < 1e-12);
    assert!(p.slots.iter().any(|s| s.value < 0.0));
    assert_eq!(p.slots.last().unwrap().end_ms, ms("2026-10-25T23:00:00Z"));
    assert!(
        p.notes.iter().any(|n| n.contains("EUR/MWh")),
        "{:?}",
        p.notes
    );
    assert!(
        p.notes.iter().any(|n| n.contains("no price")),
        "{:?}",
        p.notes
    );
}

#[test]
fn nord_pool_with_semicolons_and_decimal_commas() {
    let p = parse(NORDPOOL, &opts()).unwrap();
    assert_eq!(p.format, Format::Nordpool);
    assert_eq!(p.unit, "EUR");
    assert_eq!(p.slots.len(), 24);
    // 00:00 CET in winter is 23:00 UTC.
    assert_eq!(p.slots[0].start_ms, ms("2026-11-29T23:00:00Z"));
    assert!((p.slots[1].value - 0.0415).abs() < 1e-12);
}

#[test]
fn gb_carbon_intensity_prefers_the_actual_figure() {
    let p = parse(CARBON, &opts()).unwrap();
    assert_eq!(p.format, Format::CarbonJson);
    assert_eq!(p.unit, "gCO2/kWh");
    assert_eq!(p.slots.len(), 48);
    assert_eq!(p.slots[0].start_ms, ms("2026-11-29T00:00:00Z"));
    let forecast_0 = 120.0 + (60 * (((0 - 30_i64).rem_euclid(48) - 24).abs()) / 24) as f64;
    assert_eq!(p.slots[0].value, forecast_0 - 3.0);
    let forecast_45 = 120.0 + (60 * (((45 - 30_i64).rem_euclid(48) - 24).abs()) / 24) as f64;
    assert_eq!(p.slots[45].value, forecast_45);
}

#[test]
fn a_plain_csv_and_its_errors_name_line_and_field() {
    let good = "start,end,price_per_kwh\n2026-11-29T00:00:00Z,2026-11-29T12:00:00Z,0.10\n\
                2026-11-29T13:00:00+01:00,2026-11-30T00:00:00Z,0.30\n";
    let p = parse(good, &opts()).unwrap();
    assert_eq!(p.slots.len(), 2);
    assert_eq!(p.slots[1].start_ms, ms("2026-11-29T12:00:00Z"));
    let case = |text: &str| parse(text, &opts()).unwrap_err();
    let e = case(
        "start,end,price_per_kwh\n2026-11-29T00:00:00Z,2026-11-29T01:00:00Z,0.1\n2026-11-29T01:00:00Z,2026-11-29T02:00:00Z,cheap\n",
    );
    assert_eq!((e.line, e.field.as_str()), (3, "price_per_kwh"), "{e}");
    assert!(e.to_string().starts_with("line 3: price_per_kwh: "), "{e}");
    let e = case("2026-11-29T00:00:00Z,2026-11-29T01:00:00Z,NaN\n");
    assert_eq!((e.line, e.field.as_str()), (1, "price"), "{e}");
    let e = case("2026-11-29T00:00:00Z,2026-11-29T01:00:00Z,inf\n");
    assert_eq!(e.field, "price", "{e}");
    let e = case("2026-11-29T00:00:00Z,2026-11-29T01:00:00Z,92.5\n");
    assert!(e.to_string().contains("not a believable price"), "{e}");
    let e = case("2026-11-29T01:00:00Z,2026-11-29T01:00:00Z,0.1\n");
    assert_eq!((e.line, e.field.as_str()), (1, "end"), "{e}");
    let e = case(
        "2026-11-29T00:00:00Z,2026-11-29T02:00:00Z,0.1\n2026-11-29T01:00:00Z,2026-11-29T03:00:00Z,0.2\n",
    );
    assert_eq!((e.line, e.field.as_str()), (2, "start"), "{e}");
    assert!(e.to_string().contains("overlaps the one on line 1"), "{e}");
    let e = case("2026-11-29 00:00,2026-11-29T01:00:00Z,0.1\n");
    assert_eq!((e.line, e.field.as_str()), (1, "start"), "{e}");
    let e = case("start,end,price_per_kwh\n");
    assert!(e.to_string().contains("no slots"), "{e}");
    // A header naming another unit is refused, not read as currency per kWh (5 per MWh
    // was imported as 5 per kWh, a 1000x error).
    let slot = "2026-11-29T00:00:00Z,2026-11-29T01:00:00Z,5\n";
    let e = case(&format!("start,end,price_per_mwh\n{slot}"));
    assert_eq!((e.line, e.field.as_str()), (1, "header"), "{e}");
    assert!(e.to_string().contains("divide each value by 1000"), "{e}");
    let e = case(&format!("start,end,g_co2_per_kwh\n{slot}"));
    assert!(e.to_string().contains("--format carbon-csv"), "{e}");
    let e = case(&format!("start,end,price\n{slot}"));
    assert!(
        e.to_string()
            .contains("this format's is \"start,end,price_per_kwh\""),
        "{e}"
    );
    // Any case of the right names is the header.
    assert_eq!(
        parse(&format!("Start,End,Price_per_kWh\n{slot}"), &opts())
            .unwrap()
            .slots
            .len(),
        1
    );
}

#[test]
fn broken_octopus_and_day_ahead_files() {
    let bad_time = AGILE.replacen("\"2026-11-29T23:00:00Z\"", "\"yesterday\"", 1);
    let e = parse(&bad_time, &opts()).unwrap_err();
    assert_eq!(e.field, "valid_from", "{e}");
    assert!(e.line > 1, "{e}");
    let bad_value = AGILE.replacen("\"value_inc_vat\": 18.06", "\"value_inc_vat\": \"x\"", 1);
    let e = parse(&bad_value, &opts()).unwrap_err();
    assert_eq!((e.field.as_str(), e.line), ("value_inc_vat", 8), "{e}");
    let e = parse("{\"results\": [", &opts()).unwrap_err();
    assert_eq!(e.field, "json");
    let open = r#"{"results":[{"value_inc_vat":24.5,"value_exc_vat":23.3,"valid_from":"2026-11-29T00:00:00Z","valid_to":null}]}"#;
    assert_eq!(parse(open, &opts()).unwrap_err().field, "valid_to");
    let mixed = ENTSOE.replacen("\"85.60\",\"EUR\"", "\"85.60\",\"PLN\"", 1);
    let e = parse(&mixed, &opts()).unwrap_err();
    assert_eq!((e.line, e.field.as_str()), (3, "Currency"), "{e}");
    let absurd = ENTSOE.replacen("\"92.14\"", "\"92140000\"", 1);
    let e = parse(&absurd, &opts()).unwrap_err();
    assert_eq!(e.line, 2, "{e}");
    let no_zone = ENTSOE.replacen("MTU (CET/CEST)", "MTU", 1);
    assert!(
        parse(&no_zone, &opts())
            .unwrap_err()
            .to_string()
            .contains("--timezone")
    );
    let with_zone = parse(
        &no_zone,
        &Options {
            timezone: Some(crate::zone::Zone::named("Europe/Berlin").unwrap()),
            ..opts()
        },
    )
    .unwrap();
    assert_eq!(with_zone.slots.len(), 24);
}
