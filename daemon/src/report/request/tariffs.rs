//! The tariffs a report prices with: the configured `[tariff]`, each `[[tariff.alternative]]`
//! in its currency and zone, and those `--tariffs` names (`current`, `tariff`, an
//! alternative, an imported series).

use crate::config::Config;
use crate::report::ProduceError;

/// `[tariff]` makes no tariff ([`ProduceError::Tariff`]).
pub(super) fn from_tariff_section(source: crate::tariff::TariffError) -> ProduceError {
    ProduceError::Tariff {
        what: "building the tariff from [tariff]".to_owned(),
        source,
    }
}

/// The configured tariff and every `[[tariff.alternative]]`, without series.
pub(super) fn configured_tariffs(
    config: &Config,
) -> Result<Vec<crate::tariff::Tariff>, ProduceError> {
    let mut out = vec![
        crate::report::input::tariff_from_config(&config.tariff).map_err(from_tariff_section)?,
    ];
    for a in &config.tariff.alternatives {
        out.push(alternative(config, a)?);
    }
    Ok(out)
}

/// One `[[tariff.alternative]]`: its prices in the configured tariff's currency and zone.
fn alternative(
    config: &Config,
    a: &crate::config::AlternativeTariff,
) -> Result<crate::tariff::Tariff, ProduceError> {
    let cfg = crate::config::TariffConfig {
        price_per_kwh: a.price_per_kwh,
        standing_charge_per_day: a.standing_charge_per_day,
        periods: a.periods.clone(),
        changes: Vec::new(),
        ..config.tariff.clone()
    };
    crate::report::input::tariff_from_config(&cfg).map_err(|source| ProduceError::Tariff {
        what: format!("[[tariff.alternative]] {}", a.name),
        source,
    })
}

/// The tariffs `--tariffs` names, built from the config and the stored series.
pub(super) fn named_tariffs(
    config: &Config,
    list: &str,
    current: &crate::tariff::Tariff,
    series: &[(crate::tariff::series::SlotSeries, bool)],
) -> Result<Vec<crate::report::real_tariffs::NamedTariff>, ProduceError> {
    use crate::report::real_tariffs::NamedTariff;
    use crate::tariff::series::SeriesSet;
    let base =
        crate::report::input::tariff_from_config(&config.tariff).map_err(from_tariff_section)?;
    let mut out = Vec::new();
    for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        if out.iter().any(|t: &NamedTariff| t.name == name) {
            continue;
        }
        let t = if name == "current" {
            NamedTariff {
                name: name.to_owned(),
                origin: match current.series() {
                    Some(s) => format!("[tariff] with series {}", s.sources().join(", ")),
                    None => "the configured [tariff]".to_owned(),
                },
                tariff: current.clone(),
            }
        } else if name == "tariff" {
            NamedTariff {
                name: name.to_owned(),
                origin: "the configured [tariff] prices, no series".to_owned(),
                tariff: base.clone(),
            }
        } else if let Some(a) = config.tariff.alternatives.iter().find(|a| a.name == name) {
            NamedTariff {
                name: name.to_owned(),
                origin: format!("[[tariff.alternative]] {name}"),
                tariff: alternative(config, a)?,
            }
        } else if let Some((s, _)) = series.iter().find(|(s, _)| s.source == name) {
            NamedTariff {
                name: name.to_owned(),
                origin: format!("imported series {name}, the [tariff] price where it has no slot"),
                tariff: base.clone().with_series(SeriesSet::new(vec![s.clone()])),
            }
        } else {
            let mut known = vec!["current".to_owned(), "tariff".to_owned()];
            known.extend(config.tariff.alternatives.iter().map(|a| a.name.clone()));
            known.extend(series.iter().map(|(s, _)| s.source.clone()));
            return Err(ProduceError::UnknownTariff {
                name: name.to_owned(),
                known: known.join(", "),
            });
        };
        out.push(t);
    }
    Ok(out)
}
