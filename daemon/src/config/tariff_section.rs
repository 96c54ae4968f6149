//! `[tariff]`: its typed values ([`TariffConfig`]) and their validation: the base prices,
//! their time-of-use periods and dated changes (`[[tariff.change]]`), and the keys for real
//! tariffs: the live price topic (`price_topic`, `price_field`, `price_unit`), the price
//! sanity limit (`max_price_per_kwh`) and the tariffs to compare against
//! (`[[tariff.alternative]]`); and the tariff they build.

use chrono::NaiveDate;
use serde::Serialize;
use toml::Spanned;

use super::file::{FilePeriod, FileTariff, FileTariffChange};
use super::validate::Validator;
use super::{ConfigError, effective};
use crate::zone::Zone;

/// `[tariff] max_price_per_kwh` unless the file sets it, currency per kWh.
pub const DEFAULT_MAX_PRICE_PER_KWH: f64 = 10.0;

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if passes a reference
fn is_default_max_price(v: &f64) -> bool {
    *v == DEFAULT_MAX_PRICE_PER_KWH
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TariffConfig {
    pub currency: String,
    pub price_per_kwh: f64,
    pub standing_charge_per_day: f64,
    /// IANA time zone for time-of-use periods, loaded when the file is read; `None` means the
    /// machine's local zone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timezone: Option<Zone>,
    #[serde(rename = "period", skip_serializing_if = "Vec::is_empty")]
    pub periods: Vec<PeriodConfig>,
    #[serde(rename = "change", skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<TariffChangeConfig>,
    /// A live price over MQTT (Home Assistant's statestream of a price sensor, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub price_topic: Option<String>,
    /// The JSON field holding the price in the topic's messages (dotted for nested
    /// objects: `attributes.current_price`); `None`: the payload is the number itself.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub price_field: Option<String>,
    /// What the topic's number is in.
    pub price_unit: PriceUnit,
    /// Prices beyond this, either sign, are refused (imports and the live price),
    /// currency per kWh. Printed in the effective config only where it is not the default:
    /// a file that does not set it holds its own prices to a far wider bound (see
    /// `tariff_section::configured_price_limit`), which printing the default would narrow.
    #[serde(skip_serializing_if = "is_default_max_price")]
    pub max_price_per_kwh: f64,
    /// Tariffs to compare against (`wattson report --tariffs`).
    #[serde(rename = "alternative", skip_serializing_if = "Vec::is_empty")]
    pub alternatives: Vec<AlternativeTariff>,
}

/// What a live price's number is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PriceUnit {
    /// Currency per kWh (Octopus in Home Assistant: GBP/kWh).
    PerKwh,
    /// Currency per MWh (day-ahead markets).
    PerMwh,
    /// Hundredths of the currency per kWh (pence, cents).
    CentsPerKwh,
}

impl PriceUnit {
    /// The factor to currency per kWh.
    pub fn to_per_kwh(self) -> f64 {
        match self {
            PriceUnit::PerKwh => 1.0,
            PriceUnit::PerMwh => 0.001,
            PriceUnit::CentsPerKwh => 0.01,
        }
    }
}

/// `[[tariff.alternative]]`: a tariff to compare against, in the same currency.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AlternativeTariff {
    pub name: String,
    pub price_per_kwh: f64,
    pub standing_charge_per_day: f64,
    #[serde(rename = "period", skip_serializing_if = "Vec::is_empty")]
    pub periods: Vec<PeriodConfig>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PeriodConfig {
    #[serde(serialize_with = "effective::time_of_day")]
    pub start: chrono::NaiveTime,
    #[serde(serialize_with = "effective::time_of_day")]
    pub end: chrono::NaiveTime,
    pub price_per_kwh: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TariffChangeConfig {
    pub effective_from: chrono::NaiveDate,
    pub price_per_kwh: f64,
    #[serde(rename = "period", skip_serializing_if = "Vec::is_empty")]
    pub periods: Vec<PeriodConfig>,
}

impl Default for TariffConfig {
    fn default() -> Self {
        TariffConfig {
            currency: "GBP".to_owned(),
            price_per_kwh: 0.09,
            standing_charge_per_day: 0.0,
            timezone: None,
            periods: Vec::new(),
            changes: Vec::new(),
            price_topic: None,
            price_field: None,
            price_unit: PriceUnit::PerKwh,
            max_price_per_kwh: DEFAULT_MAX_PRICE_PER_KWH,
            alternatives: Vec::new(),
        }
    }
}

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

impl TariffConfig {
    /// The tariff this section describes: the base prices from the start of time, then each
    /// `[[tariff.change]]` from its date, in `timezone` (else this machine's zone, else
    /// UTC). A section read from a file always builds: validation builds it once and
    /// refuses the file, with the line, where it cannot.
    pub fn build(&self) -> Result<crate::tariff::Tariff, crate::tariff::TariffError> {
        use crate::tariff::{Period, Tariff, TariffChange};
        let tz = self.timezone.unwrap_or_else(crate::zone::local);
        let periods = |ps: &[PeriodConfig]| -> Vec<Period> {
            ps.iter()
                .map(|p| Period {
                    start: p.start,
                    end: p.end,
                    price_per_kwh: p.price_per_kwh,
                })
                .collect()
        };
        let mut changes = vec![TariffChange {
            effective_from: NaiveDate::MIN,
            price_per_kwh: self.price_per_kwh,
            periods: periods(&self.periods),
        }];
        changes.extend(self.changes.iter().map(|c| TariffChange {
            effective_from: c.effective_from,
            price_per_kwh: c.price_per_kwh,
            periods: periods(&c.periods),
        }));
        Tariff::new(&self.currency, self.standing_charge_per_day, changes, tz)
    }
}

impl Validator<'_> {
    /// `[tariff]` into `out`: the keys for real tariffs first ([`Validator::tariff_extras`]),
    /// then the currency, the base prices, the time zone, the periods and the changes.
    pub(super) fn tariff(&self, t: FileTariff, out: &mut TariffConfig) -> Result<(), ConfigError> {
        self.tariff_extras(&t, out)?;
        let max = configured_price_limit(&t);
        if let Some(c) = &t.currency {
            out.currency = self.currency(c)?;
        }
        if let Some(p) = &t.price_per_kwh {
            out.price_per_kwh = self.price_per_kwh(p, "tariff.price_per_kwh", max)?;
        }
        if let Some(p) = &t.standing_charge_per_day {
            out.standing_charge_per_day = self.price(p, "tariff.standing_charge_per_day")?;
        }
        if let Some(tz) = t.timezone {
            let zone = crate::zone::Zone::named(tz.get_ref())
                .map_err(|e| self.err(tz.span(), "tariff.timezone", e.to_string()))?;
            out.timezone = Some(zone);
        }
        out.periods = self.periods(&t.period, "tariff.period", max)?;
        for c in &t.change {
            let change = self.tariff_change(c, &out.changes, max)?;
            out.changes.push(change);
        }
        out.changes.sort_by_key(|c| c.effective_from);
        // What the ledger will build from it, built once here: a section it could not make
        // a tariff of is this file's error, with its line, not a failure later.
        if let Err(e) = out.build() {
            let (span, key) = t
                .change
                .iter()
                .find(|c| {
                    matches!(&e, crate::tariff::TariffError::DuplicateChange(d)
                        if c.effective_from.get_ref() == &d.format("%Y-%m-%d").to_string())
                })
                .map_or_else(
                    || (t.currency.as_ref().map_or(0..0, Spanned::span), "tariff"),
                    |c| (c.effective_from.span(), "tariff.change.effective_from"),
                );
            return Err(self.err(span, key, e.to_string()));
        }
        Ok(())
    }

    /// `tariff.currency`: an ISO 4217 code, upper-cased.
    fn currency(&self, c: &Spanned<String>) -> Result<String, ConfigError> {
        let cur = c.get_ref().trim().to_ascii_uppercase();
        if cur.len() != 3 || !cur.chars().all(|ch| ch.is_ascii_alphabetic()) {
            return Err(self.err(
                c.span(),
                "tariff.currency",
                format!(
                    "{:?} is not an ISO 4217 currency code such as \"GBP\" or \"EUR\"",
                    c.get_ref()
                ),
            ));
        }
        Ok(cur)
    }

    /// One `[[tariff.change]]`, whose date none of the `earlier` ones has.
    fn tariff_change(
        &self,
        c: &FileTariffChange,
        earlier: &[TariffChangeConfig],
        max: f64,
    ) -> Result<TariffChangeConfig, ConfigError> {
        let date = chrono::NaiveDate::parse_from_str(c.effective_from.get_ref(), "%Y-%m-%d")
            .map_err(|_| {
                self.err(
                    c.effective_from.span(),
                    "tariff.change.effective_from",
                    format!(
                        "{:?} is not a date: write \"YYYY-MM-DD\"",
                        c.effective_from.get_ref()
                    ),
                )
            })?;
        if date == NaiveDate::MIN {
            return Err(self.err(
                c.effective_from.span(),
                "tariff.change.effective_from",
                format!(
                    "{date} is the first date there is, from which the base prices \
                     ([tariff] price_per_kwh) hold: a change takes effect after it"
                ),
            ));
        }
        if earlier.iter().any(|x| x.effective_from == date) {
            return Err(self.err(
                c.effective_from.span(),
                "tariff.change.effective_from",
                format!(
                    "two [[tariff.change]] take effect on {date}: one date has one \
                     set of prices"
                ),
            ));
        }
        Ok(TariffChangeConfig {
            effective_from: date,
            price_per_kwh: self.price_per_kwh(
                &c.price_per_kwh,
                "tariff.change.price_per_kwh",
                max,
            )?,
            periods: self.periods(&c.period, "tariff.change.period", max)?,
        })
    }

    fn tariff_extras(&self, t: &FileTariff, out: &mut TariffConfig) -> Result<(), ConfigError> {
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

    /// Time-of-use periods of one tariff: each a real span, none overlapping another.
    pub(super) fn periods(
        &self,
        periods: &[FilePeriod],
        key: &str,
        max: f64,
    ) -> Result<Vec<PeriodConfig>, ConfigError> {
        let out: Vec<PeriodConfig> = periods
            .iter()
            .map(|per| {
                let time = |s: &Spanned<String>, k: &str| {
                    chrono::NaiveTime::parse_from_str(s.get_ref(), "%H:%M").map_err(|_| {
                        self.err(
                            s.span(),
                            &format!("{key}.{k}"),
                            format!("{:?} is not a time of day: write \"HH:MM\"", s.get_ref()),
                        )
                    })
                };
                let start = time(&per.start, "start")?;
                let end = time(&per.end, "end")?;
                if start == end {
                    return Err(self.err(
                        per.start.span(),
                        key,
                        "a period must not start and end at the same time",
                    ));
                }
                Ok(PeriodConfig {
                    start,
                    end,
                    price_per_kwh: self.price_per_kwh(
                        &per.price_per_kwh,
                        &format!("{key}.price_per_kwh"),
                        max,
                    )?,
                })
            })
            .collect::<Result<_, _>>()?;
        // The tariff's own rule (Tariff::new refuses the same), said here with its line.
        let window = |p: &PeriodConfig| crate::tariff::Period {
            start: p.start,
            end: p.end,
            price_per_kwh: p.price_per_kwh,
        };
        for (j, b) in out.iter().enumerate() {
            if let Some(a) = out[..j].iter().find(|a| window(a).overlaps(&window(b))) {
                return Err(self.err(
                    periods[j].start.span(),
                    key,
                    format!(
                        "the period {} overlaps {}: a time of day has one price, so periods \
                         must not overlap",
                        window(b).label(),
                        window(a).label()
                    ),
                ));
            }
        }
        Ok(out)
    }
}
