//! The report's input: the config file's `[[config]]` entries and `[tariff]` (with any
//! `--tariffs` named), what the store returned, and the command line's options.

use anyhow::Context as _;
use chrono::{DateTime, Utc};

use super::{ReportArgs, StoreData, resolve_when};
use crate::config::Config;
use crate::report::{self, ConfigInput, ReportInput, ReportOptions, model::resolve_config_list};

/// The tariffs `--tariffs` names, built from the config and the stored series.
fn named_tariffs(
    config: &Config,
    list: &str,
    current: &crate::analysis::tariff::Tariff,
    series: &[(crate::analysis::price_series::SlotSeries, bool)],
) -> anyhow::Result<Vec<crate::report::tariffs::NamedTariff>> {
    use crate::analysis::price_series::SeriesSet;
    use crate::report::tariffs::NamedTariff;
    let base = report::input::tariff_from_config(&config.tariff)
        .context("building the tariff from [tariff]")?;
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
            let cfg = crate::config::TariffConfig {
                price_per_kwh: a.price_per_kwh,
                standing_charge_per_day: a.standing_charge_per_day,
                periods: a.periods.clone(),
                changes: Vec::new(),
                ..config.tariff.clone()
            };
            NamedTariff {
                name: name.to_owned(),
                origin: format!("[[tariff.alternative]] {name}"),
                tariff: report::input::tariff_from_config(&cfg)
                    .with_context(|| format!("[[tariff.alternative]] {name}"))?,
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
            anyhow::bail!(
                "--tariffs: no tariff {name:?}; known: {} (add [[tariff.alternative]] to the \
                 config, or import a series with wattson tariff import)",
                known.join(", ")
            );
        };
        out.push(t);
    }
    Ok(out)
}

/// Builds the report input from the configuration (and whatever the store returned).
pub fn input_from_config(
    config: &Config,
    store: StoreData,
    args: &ReportArgs,
    now: DateTime<Utc>,
) -> anyhow::Result<ReportInput> {
    let tariff = report::input::tariff_from_config(&config.tariff)
        .context("building the tariff from [tariff]")?
        .with_series(crate::analysis::price_series::SeriesSet::new(
            store
                .price_series
                .iter()
                .filter(|(_, applied)| *applied)
                .map(|(s, _)| s.clone())
                .collect(),
        ));
    let compare = match &args.tariffs {
        Some(list) => named_tariffs(config, list, &tariff, &store.price_series)?,
        None => Vec::new(),
    };
    let tz = tariff.tz();
    let mut configs: Vec<ConfigInput> =
        config.manual.iter().map(ConfigInput::from_manual).collect();
    for c in store.configs {
        if configs.iter().any(|x| x.name == c.name) {
            tracing::warn!(
                "configuration {:?} is both in the config file and in the database; showing the config file's",
                c.name
            );
        } else {
            configs.push(c);
        }
    }
    let names: Vec<String> = configs.iter().map(|c| c.name.clone()).collect();
    let selected = match &args.configs {
        Some(list) => resolve_config_list(list, &names)?,
        None => Vec::new(),
    };
    let mut options = ReportOptions::new(now.with_timezone(&tz).date_naive());
    options.configs = selected;
    options.mode.clone_from(&args.mode);
    options.upgrade_cost = args.upgrade_cost;
    options.co2_g_per_kwh = args.co2;
    options.from_ms = args.since.map(|w| resolve_when(w, now, tz, false));
    options.to_ms = args.until.map(|w| resolve_when(w, now, tz, true));
    options.tariffs = compare;
    options.carbon = store.carbon;
    Ok(ReportInput {
        generated_at: now,
        host: Some(
            args.host
                .clone()
                .unwrap_or_else(|| config.host.name.clone()),
        ),
        tariff,
        configs,
        measured: store.measured,
        regression: store.regression,
        gpus: store.gpus,
        idle: store.idle,
        options,
    })
}
