//! The names and labels remote write sends each stored series under: those of `/metrics`
//! ([`family`]), and back from a sent name and its labels to the stored series
//! ([`stored_series`], for reading an engine's copy back).

use wattson_collectors::{Metric, SourceId};

use super::proto::Label;
use crate::store::Series;

/// Label names and values.
pub type LabelPairs = Vec<(&'static str, String)>;

/// The `/metrics` name of a stored series, its labels (the metric's name and `host`
/// included) and the factor from the stored unit to the exposed one; `None` for series
/// `/metrics` does not expose per sample.
pub fn family(series: &Series) -> Option<(&'static str, LabelPairs, f64)> {
    let mut labels = vec![("host", series.host.clone())];
    let &(name, _, scale) = FAMILIES.iter().find(|(_, m, _)| *m == series.metric)?;
    match series.metric {
        Metric::Power
        | Metric::Voltage
        | Metric::Current
        | Metric::PowerFactor
        | Metric::Frequency => labels.push(("source", series.source.to_string())),
        // As `/metrics`: by channel, per-state channels (`all/C6`) left out.
        _ if series.channel.contains('/') => return None,
        _ => {}
    }
    labels.push(("channel", series.channel.clone()));
    Some((name, labels, scale))
}

/// The names [`family`] sends under, with the metric each stands for and its factor from
/// the stored unit.
pub const FAMILIES: [(&str, Metric, f64); 9] = [
    ("wattson_power_watts", Metric::Power, 1.0),
    ("wattson_voltage_volts", Metric::Voltage, 1.0),
    ("wattson_current_amperes", Metric::Current, 1.0),
    ("wattson_power_factor_ratio", Metric::PowerFactor, 1.0),
    ("wattson_mains_frequency_hertz", Metric::Frequency, 1.0),
    ("wattson_cpu_utilisation_ratio", Metric::CpuBusy, 1.0),
    ("wattson_cpu_frequency_hertz", Metric::CoreFrequency, 1e6),
    ("wattson_gpu_utilisation_ratio", Metric::GpuUtilisation, 1.0),
    ("wattson_gpu_clock_hertz", Metric::GpuClock, 1e6),
];

/// The stored series a sent one came from, [`family`] backwards: its metric, source and
/// channel from the name and the labels (`source`, `channel`; an absent label is an empty
/// value), and the factor its values were sent at. `None` for a name [`family`] never sends.
pub fn stored_series(
    name: &str,
    label: impl Fn(&str) -> Option<String>,
) -> Option<(Metric, SourceId, String, f64)> {
    let &(_, metric, scale) = FAMILIES.iter().find(|(n, _, _)| *n == name)?;
    let source = match metric {
        Metric::CpuBusy | Metric::CoreFrequency => SourceId::Cpu,
        Metric::GpuUtilisation | Metric::GpuClock => SourceId::Gpu,
        _ => SourceId::from(label("source")?.as_str()),
    };
    Some((metric, source, label("channel").unwrap_or_default(), scale))
}

/// Remote write's labels: `__name__` first, the rest sorted by name, empty values left out
/// (Prometheus reads an empty label as an absent one).
pub(super) fn labels(name: &str, labels: &[(&'static str, String)]) -> Vec<Label> {
    let mut out: Vec<Label> = labels
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(n, v)| Label {
            name: (*n).to_owned(),
            value: v.clone(),
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out.insert(
        0,
        Label {
            name: "__name__".to_owned(),
            value: name.to_owned(),
        },
    );
    out
}

#[cfg(test)]
mod tests {
    use wattson_collectors::{Metric, SourceId};

    use super::*;

    #[test]
    fn every_family_sent_reads_back_as_the_series_it_came_from() {
        use crate::store::Series;
        for (name, metric, scale) in FAMILIES {
            let source = match metric {
                Metric::CpuBusy | Metric::CoreFrequency => SourceId::Cpu,
                Metric::GpuUtilisation | Metric::GpuClock => SourceId::Gpu,
                _ => SourceId::meter("wall"),
            };
            for channel in ["", "cpu3"] {
                let series = Series {
                    id: 1,
                    host: "basket".to_owned(),
                    source: source.clone(),
                    metric,
                    channel: channel.to_owned(),
                    unit: metric.unit(),
                    spacing_ms: None,
                    readings: crate::store::integrate::Readings::Sampled,
                    max_hold_ms: None,
                };
                let (sent_as, labels, sent_scale) = family(&series).unwrap();
                assert_eq!((sent_as, sent_scale), (name, scale));
                let label = |k: &str| {
                    labels
                        .iter()
                        .find(|(n, v)| *n == k && !v.is_empty())
                        .map(|(_, v)| v.clone())
                };
                assert_eq!(
                    stored_series(name, label),
                    Some((metric, source.clone(), channel.to_owned(), scale)),
                    "{name} {channel:?}"
                );
            }
        }
        assert_eq!(stored_series("wattson_energy_joules_total", |_| None), None);
    }
}
