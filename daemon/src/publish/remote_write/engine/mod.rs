//! `wattson report --prometheus URL`: the report of a host whose series went into a
//! Prometheus-compatible engine by remote write, built from the engine's query API.
//!
//! The host's series (the names and labels remote write sends them under,
//! [`crate::publish::remote_write::queue::FAMILIES`]) are read back sample by sample: which
//! days hold samples (`count_over_time(SERIES[1d])` over the window, one range query a
//! name), then each such day's raw samples (`SERIES[1d]` at the day's end). They go through
//! the store's own writer into a database of their own, which the report then reads as it
//! reads a fleet collector's: the same rollups, the same energy integral, the same pricing.
//! Where the engine has no samples the report has none either, and shows the time as not
//! covered. Price series imported into a database (`wattson tariff import`) are not in an
//! engine: the report prices under the configured tariffs.

mod error;
pub(crate) mod query;

use std::collections::BTreeMap;
use std::path::Path;

use chrono::{DateTime, Utc};
use wattson_collectors::{Metric, Sample, SourceId};

pub use error::{EXIT_UNAVAILABLE, EngineError};
use query::{Engine, selector};

use super::queue::{FAMILIES, GAP_FAMILY, stored_series};
use crate::config::Config;
use crate::report::{Format, ReportRequest};
use crate::store::{DAY_MS, StoreHandle};

/// How far back the whole history reaches without `--since`.
const LOOKBACK_MS: i64 = 10 * 366 * DAY_MS;
/// How far beyond the window's ends samples are read: longer than any pair of samples the
/// store integrates (twice the spacing of a smart plug's 5 minutes).
const EDGE_MS: i64 = crate::store::HOUR_MS;
/// Samples handed to the writer at once.
const BATCH: usize = 10_000;

/// What was read from the engine.
#[derive(Debug, Clone, PartialEq)]
pub struct Fetched {
    pub url: String,
    pub host: String,
    pub series: usize,
    pub samples: usize,
    /// The first and last sample read, UTC ms.
    pub span: Option<(i64, i64)>,
}

impl Fetched {
    /// One line for the terminal: what the report was made from.
    pub fn summary(&self) -> String {
        let at = |ms: i64| {
            DateTime::<Utc>::from_timestamp_millis(ms).map_or_else(
                || format!("{ms} ms"),
                |t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
            )
        };
        let span = self
            .span
            .map_or_else(String::new, |(a, b)| format!(", {} to {}", at(a), at(b)));
        format!(
            "read {} samples of {} series of host {} from {}{span}",
            self.samples, self.series, self.host, self.url
        )
    }
}

/// The report `args` asks for, of each host in `args.host` (separated by commas; default:
/// `[host] name`), from the engine at `url`; and what was read of each. The samples read
/// are stored with `options` (the configuration's retention), each series' spacing learned
/// from its samples as a fleet collector's are. Several hosts' reports follow each other
/// (in JSON, an array of them); CSV and HTML take one host.
pub fn produce(
    config: &Config,
    args: &ReportRequest,
    url: &str,
    options: &crate::store::StoreOptions,
    now: DateTime<Utc>,
) -> Result<(String, Vec<Fetched>), EngineError> {
    let (from_ms, to_ms) = crate::report::request::window(config, args, now)
        .map_err(|e| EngineError::Report(Box::new(e.into())))?;
    let to_ms = to_ms.unwrap_or_else(|| now.timestamp_millis());
    let from_ms = from_ms.unwrap_or(to_ms - LOOKBACK_MS);
    let hosts: Vec<String> = args.host.as_deref().map_or_else(
        || vec![config.host.name.clone()],
        |h| {
            h.split(',')
                .map(str::trim)
                .filter(|h| !h.is_empty())
                .map(str::to_owned)
                .collect()
        },
    );
    if hosts.is_empty() {
        return Err(EngineError::NoHost);
    }
    match args.format {
        Format::Csv if hosts.len() > 1 => return Err(EngineError::OneHostOnly("csv")),
        Format::Html if hosts.len() > 1 => return Err(EngineError::OneHostOnly("html")),
        _ => {}
    }
    let engine = engine(config, url)?;
    let mut texts = Vec::new();
    let mut read = Vec::new();
    for host in hosts {
        let dir = tempfile::tempdir().map_err(EngineError::TempDir)?;
        let db = dir.path().join("engine.db");
        // The samples just outside the window too: a pair of samples across either end
        // counts its part inside, as it does in a database.
        let margin = (from_ms - EDGE_MS, to_ms + EDGE_MS);
        read.push(fetch(options.clone(), &engine, &host, margin, &db)?);
        let request = ReportRequest {
            db: Some(db),
            host: Some(host),
            ..args.clone()
        };
        texts.push(
            crate::report::produce(config, &request, now)
                .map_err(|e| EngineError::Report(Box::new(e)))?,
        );
    }
    let text = match (args.format, texts.len()) {
        (_, 1) => texts.remove(0),
        (Format::Json, _) => format!("[\n{}\n]\n", texts.join(",\n")),
        _ => texts.join("\n"),
    };
    Ok((text, read))
}

/// The engine at `url`, with `[prometheus]`'s credentials where it is the remote-write
/// endpoint's server (the same host and port), else none.
fn engine(config: &Config, url: &str) -> Result<Engine, EngineError> {
    // The parse is remote write's, whose example is an endpoint; this wants the engine's base.
    let parsed = crate::config::parse_remote_write_url(url).map_err(|why| {
        EngineError::Url(why.replace(
            "http://prometheus.lan:9090/api/v1/write",
            "http://prometheus.lan:9090",
        ))
    })?;
    let auth = match &config.prometheus {
        Some(p) if p.remote_write.authority == parsed.authority => {
            super::auth(p).map_err(EngineError::Credential)?
        }
        _ => super::Auth::None,
    };
    Engine::new(parsed, auth)
}

/// An engine series' labels.
type Labels = BTreeMap<String, String>;

/// Samples by time, UTC ms.
type Points = BTreeMap<i64, f64>;

/// A stored series' identity.
type Key = (Metric, SourceId, String);

/// Reads `host`'s series over `[from_ms, to_ms]` into a new database at `db`.
fn fetch(
    options: crate::store::StoreOptions,
    engine: &Engine,
    host: &str,
    (from_ms, to_ms): (i64, i64),
    db: &Path,
) -> Result<Fetched, EngineError> {
    let options = crate::store::StoreOptions {
        flush_interval: std::time::Duration::from_secs(24 * 3600),
        max_batch_samples: usize::MAX,
        spacing_ms: std::collections::HashMap::new(),
        ..options
    };
    let (store, writer) = StoreHandle::spawn(db, options)?;
    let range = (from_ms, to_ms);
    let mut fetched = Fetched {
        url: engine.url().to_owned(),
        host: host.to_owned(),
        series: 0,
        samples: 0,
        span: None,
    };
    // The gaps the host recorded first: the writer judges each pair of samples by them.
    for (labels, points) in read_family(engine, GAP_FAMILY, host, range)? {
        let source = SourceId::from(labels.get("source").map_or("", String::as_str));
        let reason = labels.get("reason").map_or("", String::as_str);
        for (start_ms, end_s) in points {
            let end_ms = (end_s * 1000.0).round() as i64;
            if end_ms >= start_ms {
                store.record_gap_for_host(host, &source, (start_ms, end_ms), reason)?;
            }
        }
    }
    let mut seen: BTreeMap<Key, Labels> = BTreeMap::new();
    for (name, _, _) in FAMILIES {
        for (labels, points) in read_family(engine, name, host, range)? {
            let Some((metric, source, channel, scale)) =
                stored_series(name, |k| labels.get(k).cloned())
            else {
                continue;
            };
            let key = (metric, source.clone(), channel.clone());
            if let Some(other) = seen.insert(key, labels.clone()) {
                return Err(EngineError::TwoSeries {
                    name: name.to_owned(),
                    first: describe(&other),
                    second: describe(&labels),
                });
            }
            let (Some((&first, _)), Some((&last, _))) =
                (points.first_key_value(), points.last_key_value())
            else {
                continue;
            };
            fetched.series += 1;
            fetched.samples += points.len();
            fetched.span = Some(
                fetched
                    .span
                    .map_or((first, last), |(a, b)| (a.min(first), b.max(last))),
            );
            let samples: Vec<Sample> = points
                .into_iter()
                .map(|(ts, v)| Sample::new(ts, source.clone(), metric, channel.clone(), v / scale))
                .collect();
            for batch in samples.chunks(BATCH) {
                store.insert_for_host(host, batch.to_vec())?;
                store.flush()?;
            }
        }
    }
    store.close()?;
    writer
        .join()
        .map_err(|_| EngineError::WriterPanicked)?
        .map_err(EngineError::from)?;
    if fetched.series == 0 {
        let hosts = engine.label_values("host", "{__name__=~\"wattson_.+\"}")?;
        return Err(EngineError::NoSeries {
            url: engine.url().to_owned(),
            host: host.to_owned(),
            hosts,
        });
    }
    Ok(fetched)
}

/// The samples of each of `host`'s series named `name` in `[from_ms, to_ms]`: which days
/// hold any (`count_over_time` a day at a time, one range query), then those days' raw
/// samples, in time order, each once.
fn read_family(
    engine: &Engine,
    name: &str,
    host: &str,
    (from_ms, to_ms): (i64, i64),
) -> Result<Vec<(Labels, Points)>, EngineError> {
    let days = ((to_ms - from_ms).max(1) + DAY_MS - 1) / DAY_MS;
    let start_ms = to_ms - days * DAY_MS;
    let counted = selector(name, [("host", host)]);
    let day_counts = engine.range(
        &format!("count_over_time({counted}[1d])"),
        start_ms,
        to_ms,
        DAY_MS,
    )?;
    let mut out = Vec::new();
    for (labels, days) in day_counts {
        // `count_over_time` drops the name; the labels left pick the one series.
        let exact = selector(name, labels.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let mut points = BTreeMap::new();
        for (day_end, count) in days {
            if count > 0.0 {
                for (_, raw) in engine.instant(&format!("{exact}[1d]"), day_end)? {
                    points.extend(
                        raw.into_iter()
                            .filter(|(ts, _)| (from_ms..=to_ms).contains(ts)),
                    );
                }
            }
        }
        out.push((labels, points));
    }
    Ok(out)
}

/// `{a="x", b="y"}` for an error.
fn describe(labels: &BTreeMap<String, String>) -> String {
    selector("", labels.iter().map(|(k, v)| (k.as_str(), v.as_str())))
}
