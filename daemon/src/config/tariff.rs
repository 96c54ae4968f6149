//! `[tariff]`'s keys for real tariffs: the live price topic (`price_topic`, `price_field`,
//! `price_unit`), the price sanity limit (`max_price_per_kwh`) and the tariffs to compare
//! against (`[[tariff.alternative]]`). The base prices are validated in [`super::validate`].

use super::file::FileTariff;
use super::validate::Validator;
use super::{AlternativeTariff, ConfigError, PriceUnit, TariffConfig};

/// The most a configured price per kWh may be: `max_price_per_kwh` where the file sets it,
/// else a bound no currency's real price comes near (the default `max_price_per_kwh` of 10,
/// which imports and live prices are held to, is below a yen or forint price).
pub(super) fn configured_price_limit(t: &FileTariff) -> f64 {
    t.max_price_per_kwh
        .as_ref()
        .map_or(CONFIGURED_PRICE_LIMIT, |m| *m.get_ref())
}

/// See [`configured_price_limit`].
const CONFIGURED_PRICE_LIMIT: f64 = 1e6;

impl Validator<'_> {
    pub(super) fn tariff_extras(
        &self,
        t: &FileTariff,
        out: &mut TariffConfig,
    ) -> Result<(), ConfigError> {
        if let Some(topic) = &t.price_topic {
            let v = topic.get_ref().trim();
            if v.is_empty() || v.contains(['+', '#', '\0']) || v.len() > 1024 {
                return Err(self.err(
                    topic.span(),
                    "tariff.price_topic",
                    format!(
                        "{v:?} must be one topic (no '+' or '#' wildcards: one price at a time), \
                         e.g. \"homeassistant/sensor/octopus_current_rate/state\""
                    ),
                ));
            }
            out.price_topic = Some(v.to_owned());
        }
        if let Some(field) = &t.price_field {
            let v = field.get_ref().trim();
            if v.is_empty() || v.split('.').any(str::is_empty) {
                return Err(self.err(
                    field.span(),
                    "tariff.price_field",
                    format!(
                        "{v:?} is not a field name: write e.g. \"state\" or \"attributes.price\""
                    ),
                ));
            }
            if t.price_topic.is_none() {
                return Err(self.err(
                    field.span(),
                    "tariff.price_field",
                    "price_field names the field of price_topic's messages: set price_topic too",
                ));
            }
            out.price_field = Some(v.to_owned());
        }
        if let Some(unit) = &t.price_unit {
            out.price_unit = match unit.get_ref().trim() {
                "per_kwh" => PriceUnit::PerKwh,
                "per_mwh" => PriceUnit::PerMwh,
                "cents_per_kwh" => PriceUnit::CentsPerKwh,
                other => {
                    return Err(self.err(
                        unit.span(),
                        "tariff.price_unit",
                        format!(
                            "{other:?} is not one of \"per_kwh\", \"per_mwh\", \"cents_per_kwh\""
                        ),
                    ));
                }
            };
        }
        if let Some(m) = &t.max_price_per_kwh {
            let v = *m.get_ref();
            if !v.is_finite() || v <= 0.0 {
                return Err(self.err(
                    m.span(),
                    "tariff.max_price_per_kwh",
                    format!("{v} must be a price above 0"),
                ));
            }
            out.max_price_per_kwh = v;
        }
        for a in &t.alternative {
            let name = self.identifier(&a.name, "tariff.alternative.name")?;
            if out.alternatives.iter().any(|x| x.name == name) || name == "current" {
                return Err(self.err(
                    a.name.span(),
                    "tariff.alternative.name",
                    format!(
                        "{name:?} is taken (\"current\" is the tariff itself; names are unique)"
                    ),
                ));
            }
            out.alternatives.push(AlternativeTariff {
                name,
                price_per_kwh: self.price_per_kwh(
                    &a.price_per_kwh,
                    "tariff.alternative.price_per_kwh",
                    configured_price_limit(t),
                )?,
                standing_charge_per_day: match &a.standing_charge_per_day {
                    Some(p) => self.price(p, "tariff.alternative.standing_charge_per_day")?,
                    None => 0.0,
                },
                periods: self.periods(
                    &a.period,
                    "tariff.alternative.period",
                    configured_price_limit(t),
                )?,
            });
        }
        Ok(())
    }
}
