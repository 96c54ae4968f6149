//! `wattson report --prometheus URL`: the report of a host whose series went into a
//! Prometheus-compatible engine by remote write, built from the engine's query API.
//!
//! The host's series (the names and labels remote write sends them under,
//! [`crate::publish::remote_write::families::FAMILIES`]) are read back sample by sample: which
//! days hold samples (`count_over_time(SERIES[1d])` over the window, one range query a
//! name), then each such day's raw samples (`SERIES[1d]` at the day's end). They go through
//! the store's own writer into a database of their own, which the report then reads as it
//! reads a fleet collector's: the same rollups, the same energy integral, the same pricing.
//! Where the engine has no samples the report has none either, and shows the time as not
//! covered. Price series imported into a database (`wattson tariff import`) are not in an
//! engine: the report prices under the configured tariffs.
//!
//! An engine is read as a meter is: each sample passes the plausibility rules of a meter's
//! reading ([`wattson_collectors::plausibility::Limits`]; wattson sends a bidirectional
//! source's export as a positive series of its own, so no power it sends is negative), and
//! what is set aside is counted and said in the report's notes. Answers are bounded (
//! [`query::MAX_ANSWER`], [`query::MAX_SERIES`], [`MAX_DAY_SAMPLES`]), read a series-day at a
//! time into the store, and all the report's queries end by one deadline
//! ([`query::DEADLINE`]).

mod error;
pub(crate) mod query;

use std::collections::BTreeMap;
use std::path::Path;

use chrono::{DateTime, Utc};
use wattson_collectors::plausibility::{Limits, Reason, Rejection};
use wattson_collectors::{Metric, Sample, SourceId};

pub use error::{EXIT_UNAVAILABLE, EngineError};
use query::{Engine, selector};

use super::families::{FAMILIES, stored_series};
use super::queue::GAP_FAMILY;
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
/// The most samples a series may hold in a day: ten a second, where wattson samples at
/// most once a second.
pub const MAX_DAY_SAMPLES: u64 = 864_000;

/// What was read from the engine.
#[derive(Debug, Clone, PartialEq)]
pub struct Fetched {
    pub url: String,
    pub host: String,
    pub series: usize,
    pub samples: usize,
    /// The first and last sample read, UTC ms.
    pub span: Option<(i64, i64)>,
    /// What was set aside, one line a reason, for the report's notes.
    pub set_aside: Vec<String>,
}

impl Fetched {
    /// One line for the terminal: what the report was made from.
    pub fn summary(&self) -> String {
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
        let noted = read.last().map_or_else(Vec::new, |f| f.set_aside.clone());
        texts.push(
            crate::report::produce_noting(config, &request, now, noted)
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
    let parsed = crate::config::parse_http_url(url, "http://prometheus.lan:9090")
        .map_err(EngineError::Url)?;
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

/// A stored series' identity.
type Key = (Metric, SourceId, String);

/// Reads `host`'s series over `[from_ms, to_ms]` into a new database at `db`. The writer
/// is stopped before an error is returned too (the database's directory goes with it).
fn fetch(
    options: crate::store::StoreOptions,
    engine: &Engine,
    host: &str,
    range: (i64, i64),
    db: &Path,
) -> Result<Fetched, EngineError> {
    let options = crate::store::StoreOptions {
        flush_interval: std::time::Duration::from_secs(24 * 3600),
        max_batch_samples: usize::MAX,
        spacing_ms: std::collections::HashMap::new(),
        ..options
    };
    let (store, writer) = StoreHandle::spawn(db, options)?;
    let filled = fill(&store, engine, host, range);
    let closed = store.close();
    let written = writer.join().map_err(|_| EngineError::WriterPanicked)?;
    let (fetched, aside) = filled?;
    closed?;
    written?;
    let set_aside = notes(&aside);
    if fetched.series == 0 {
        let hosts = engine.label_values("host", "{__name__=~\"wattson_.+\"}")?;
        return Err(EngineError::NoSeries {
            url: engine.url().to_owned(),
            host: host.to_owned(),
            hosts,
            set_aside,
        });
    }
    Ok(Fetched {
        set_aside,
        ..fetched
    })
}

/// What was set aside, by series and reason.
type SetAside = BTreeMap<(String, Reason), Aside>;

/// What was read of `host`'s series into `store`, and what was set aside.
fn fill(
    store: &StoreHandle,
    engine: &Engine,
    host: &str,
    range: (i64, i64),
) -> Result<(Fetched, SetAside), EngineError> {
    let mut sink = Sink {
        store,
        host,
        pending: Vec::new(),
        fetched: Fetched {
            url: engine.url().to_owned(),
            host: host.to_owned(),
            series: 0,
            samples: 0,
            span: None,
            set_aside: Vec::new(),
        },
        aside: BTreeMap::new(),
    };
    // The gaps the host recorded first: the writer judges each pair of samples by them.
    for (labels, days) in listing(engine, GAP_FAMILY, host, range)? {
        let source = SourceId::from(labels.get("source").map_or("", String::as_str));
        let reason = labels.get("reason").map_or("", String::as_str);
        for day in days {
            for (start_ms, end_s) in day_samples(engine, GAP_FAMILY, &labels, day, range)? {
                let end_ms = (end_s * 1000.0).round() as i64;
                if end_s.is_finite() && end_ms >= start_ms {
                    store.record_gap_for_host(host, &source, (start_ms, end_ms), reason)?;
                }
            }
        }
    }
    let mut seen: BTreeMap<Key, Labels> = BTreeMap::new();
    for (name, _, _) in FAMILIES {
        for (labels, days) in listing(engine, name, host, range)? {
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
            let mut kept = 0;
            let mut last = i64::MIN;
            for day in days {
                for (ts, v) in day_samples(engine, name, &labels, day, range)? {
                    // A sample on a day's boundary is in both days' answers.
                    if ts > last {
                        last = ts;
                        let sample =
                            Sample::new(ts, source.clone(), metric, channel.clone(), v / scale);
                        kept += usize::from(sink.take(sample, name, &labels)?);
                    }
                }
            }
            sink.fetched.series += usize::from(kept > 0);
            sink.fetched.samples += kept;
        }
    }
    sink.flush()?;
    Ok((sink.fetched, sink.aside))
}

/// Where the samples read go: vetted, then to the store a batch at a time.
struct Sink<'a> {
    store: &'a StoreHandle,
    host: &'a str,
    pending: Vec<Sample>,
    fetched: Fetched,
    aside: SetAside,
}

/// Samples of one series set aside for one reason.
struct Aside {
    count: u64,
    /// The least and greatest value (NaN where one was).
    range: (f64, f64),
    /// The first, in words.
    first: String,
}

impl Sink<'_> {
    /// Keeps `sample` of the engine's series `name{labels}` where a meter's reading of it
    /// would be kept (true), else counts it set aside.
    fn take(&mut self, sample: Sample, name: &str, labels: &Labels) -> Result<bool, EngineError> {
        let (ts, v) = (sample.ts_ms, sample.value);
        if let Err(Rejection { reason, detail }) = Limits::default().check(sample.metric, v) {
            let series = format!("{name}{}", describe(labels));
            let new = || Aside {
                count: 0,
                range: (v, v),
                first: format!("at {}: {detail}", at(ts)),
            };
            let a = self.aside.entry((series, reason)).or_insert_with(new);
            a.count += 1;
            let (lo, hi) = a.range;
            a.range = if v.is_nan() || lo.is_nan() {
                (f64::NAN, f64::NAN)
            } else {
                (lo.min(v), hi.max(v))
            };
            return Ok(false);
        }
        self.fetched.span = Some(
            self.fetched
                .span
                .map_or((ts, ts), |(a, b)| (a.min(ts), b.max(ts))),
        );
        self.pending.push(sample);
        if self.pending.len() >= BATCH {
            self.flush()?;
        }
        Ok(true)
    }

    fn flush(&mut self) -> Result<(), EngineError> {
        if !self.pending.is_empty() {
            self.store
                .insert_for_host(self.host, std::mem::take(&mut self.pending))?;
            self.store.flush()?;
        }
        Ok(())
    }
}

/// The report's notes on what was set aside, one a series and reason.
fn notes(aside: &SetAside) -> Vec<String> {
    // A value as the engine might have written it: 1e308, not 309 digits.
    let shown = |v: f64| {
        if v.is_finite() && v.abs() >= 1e6 {
            format!("{v:e}")
        } else {
            format!("{v}")
        }
    };
    aside
        .iter()
        .map(|((series, reason), a)| {
            let values = if a.range.0 == a.range.1 || a.range.0.is_nan() {
                shown(a.range.0)
            } else {
                format!("{} to {}", shown(a.range.0), shown(a.range.1))
            };
            format!(
                "{} sample{} of {series} from the engine set aside, as a meter's readings would \
                 be ({}: {values}); the first {}",
                a.count,
                if a.count == 1 { "" } else { "s" },
                reason.as_str().replace('_', " "),
                a.first
            )
        })
        .collect()
}

/// `ms` as a UTC time for a note or a line.
fn at(ms: i64) -> String {
    DateTime::<Utc>::from_timestamp_millis(ms).map_or_else(
        || format!("{ms} ms"),
        |t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
    )
}

/// Each of `host`'s series named `name` with samples in `[from_ms, to_ms]`, and the ends of
/// the days that hold any (`count_over_time` a day at a time, one range query); a day of
/// more than [`MAX_DAY_SAMPLES`] is refused.
fn listing(
    engine: &Engine,
    name: &str,
    host: &str,
    (from_ms, to_ms): (i64, i64),
) -> Result<Vec<(Labels, Vec<i64>)>, EngineError> {
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
        let mut ends = Vec::new();
        for (day_end, count) in days {
            if count > MAX_DAY_SAMPLES as f64 {
                return Err(EngineError::TooManySamples {
                    url: engine.url().to_owned(),
                    series: format!("{name}{}", describe(&labels)),
                    count: count.min(u64::MAX as f64) as u64,
                    max: MAX_DAY_SAMPLES,
                });
            }
            if count > 0.0 {
                ends.push(day_end);
            }
        }
        out.push((labels, ends));
    }
    Ok(out)
}

/// The raw samples of the series `name{labels}` in the day ending at `day_end`, within
/// `[from_ms, to_ms]`, in time order.
fn day_samples(
    engine: &Engine,
    name: &str,
    labels: &Labels,
    day_end: i64,
    (from_ms, to_ms): (i64, i64),
) -> Result<Vec<(i64, f64)>, EngineError> {
    // `count_over_time` drops the name; the labels left pick the one series.
    let exact = selector(name, labels.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    let mut out = Vec::new();
    for (_, raw) in engine.instant(&format!("{exact}[1d]"), day_end)? {
        out.extend(
            raw.into_iter()
                .filter(|(ts, _)| (from_ms..=to_ms).contains(ts)),
        );
    }
    Ok(out)
}

/// `{a="x", b="y"}` for an error.
fn describe(labels: &BTreeMap<String, String>) -> String {
    selector("", labels.iter().map(|(k, v)| (k.as_str(), v.as_str())))
}
