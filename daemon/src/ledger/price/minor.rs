//! Small amounts in the currency's minor unit ("4.2 p", "4.2 ¢"), so that a day's or an
//! hour's cost reads as what it is, not as "GBP 0.04" or "0.0045" of a pound.

use serde::Serialize;

use super::format_money;

/// A currency's minor unit as amounts below one unit are written: its symbol and how many
/// make one unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct MinorUnit {
    /// `p`, `¢`, `öre`.
    pub symbol: &'static str,
    /// 100.
    pub per_unit: u32,
}

/// Currencies whose ISO 4217 minor unit is none (no subdivision in use): their small
/// amounts are written in the unit itself.
const WHOLE_UNITS: [&str; 14] = [
    "BIF", "CLP", "DJF", "GNF", "ISK", "JPY", "KMF", "KRW", "PYG", "RWF", "UGX", "VND", "VUV",
    "XAF",
];

/// The minor unit of `currency` (an ISO 4217 code): pence for GBP, cents (`¢`) for the
/// dollars and the euro, öre/øre, grosze, paise, kopecks, rappen (`ct`) by name; a
/// hundredth written `c` (cent, centavo, centime, sen: most currencies' hundredth) for any
/// other code, and `None` for those with no minor unit in use (JPY, KRW, ...).
pub fn minor_unit(currency: &str) -> Option<MinorUnit> {
    let symbol = match currency {
        "GBP" => "p",
        "USD" | "EUR" | "CAD" | "AUD" | "NZD" | "HKD" | "SGD" | "MXN" | "BRL" => "¢",
        "SEK" => "öre",
        "NOK" | "DKK" => "øre",
        "PLN" => "gr",
        "INR" => "paise",
        "RUB" | "UAH" => "kop",
        "CHF" => "ct",
        c if WHOLE_UNITS.contains(&c) => return None,
        _ => "c",
    };
    Some(MinorUnit {
        symbol,
        per_unit: 100,
    })
}

/// Money as a person reads it: from one unit of the currency up as [`format_money`]
/// ("GBP 1.23"); below it in the minor unit, to a tenth of one ("4.2 p", "36.4 ¢") or two
/// significant figures below one ("0.42 p"). A currency without a minor unit, or an amount
/// that is not finite, as [`format_money`].
pub fn format_money_readable(amount: f64, currency: &str) -> String {
    let Some(minor) = minor_unit(currency).filter(|_| amount.is_finite()) else {
        return format_money(amount, currency);
    };
    let m = amount * f64::from(minor.per_unit);
    if (m * 10.0).round().abs() >= f64::from(minor.per_unit) * 10.0 {
        return format_money(amount, currency);
    }
    let text = if m == 0.0 {
        "0".to_owned()
    } else if (m * 10.0).round().abs() >= 10.0 {
        format!("{m:.1}")
    } else {
        let places = usize::try_from((1 - m.abs().log10().floor() as i64).clamp(1, 6)).unwrap_or(2);
        format!("{m:.places$}")
    };
    format!("{text} {}", minor.symbol)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_amounts_are_written_in_the_minor_unit() {
        assert_eq!(format_money_readable(0.042, "GBP"), "4.2 p");
        assert_eq!(format_money_readable(0.042, "USD"), "4.2 ¢");
        assert_eq!(format_money_readable(0.3641, "EUR"), "36.4 ¢");
        assert_eq!(format_money_readable(0.0042, "GBP"), "0.42 p");
        assert_eq!(format_money_readable(0.000_045, "GBP"), "0.0045 p");
        assert_eq!(format_money_readable(0.0, "GBP"), "0 p");
        assert_eq!(format_money_readable(0.042, "XTS"), "4.2 c");
        assert_eq!(format_money_readable(0.5, "SEK"), "50.0 öre");
    }

    #[test]
    fn a_unit_and_more_and_currencies_without_a_minor_unit_are_plain_money() {
        assert_eq!(format_money_readable(1.234, "GBP"), "GBP 1.23");
        // 99.96 p rounds to a whole pound.
        assert_eq!(format_money_readable(0.9996, "GBP"), "GBP 1.00");
        assert_eq!(format_money_readable(0.42, "JPY"), "JPY 0.42");
        assert_eq!(minor_unit("JPY"), None);
        assert_eq!(format_money_readable(f64::NAN, "GBP"), "GBP n/a");
    }
}
