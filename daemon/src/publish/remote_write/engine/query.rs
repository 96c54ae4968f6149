//! The query API of a Prometheus-compatible engine (Prometheus, VictoriaMetrics, Mimir,
//! Thanos): `GET /api/v1/query`, `/api/v1/query_range` and `/api/v1/label/NAME/values`
//! over HTTP/1.1 (hyper's client), one connection a request, each answer's `data` as JSON.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use http_body_util::{BodyExt as _, Empty};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use serde::de::{DeserializeOwned, IgnoredAny};
use serde::{Deserialize, Deserializer};

use super::EngineError;
use crate::config::RemoteWriteUrl;
use crate::publish::remote_write::Auth;

/// How long one request may take, connection included.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);
/// How long all of a report's queries may take together: a year of a dozen series is a
/// few thousand queries, each a few milliseconds on an engine that answers.
pub(crate) const DEADLINE: Duration = Duration::from_secs(300);
/// Seconds that replace [`DEADLINE`] where set (tests of an engine that never finishes).
const DEADLINE_ENV: &str = "WATTSON_PROMETHEUS_DEADLINE_S";
/// The largest answer read: a day of one series at 1 Hz is about 3 MB of JSON, ten years
/// of a day's counts of a hundred series about 30 MB.
pub(crate) const MAX_ANSWER: usize = 32 * 1024 * 1024;
/// The most series one answer may hold: one a source, core or GPU of one host, of one
/// name. More is not one host's series.
pub(crate) const MAX_SERIES: usize = 4096;

/// A series' labels (without `__name__` where a function dropped it) and its points,
/// `(ts_ms, value)` in time order, every value as the engine gave it.
pub(crate) type Series = (BTreeMap<String, String>, Vec<(i64, f64)>);

/// An engine's query API at a base URL (`http://HOST:PORT[/PREFIX]`).
pub(crate) struct Engine {
    url: RemoteWriteUrl,
    auth: Auth,
    runtime: tokio::runtime::Runtime,
    /// When every query must have been answered ([`DEADLINE`] after the engine was made).
    deadline: Instant,
    /// The time allowed, for the error.
    allowed: Duration,
}

impl Engine {
    /// The engine at `url`, authenticating with `auth`.
    pub(crate) fn new(url: RemoteWriteUrl, auth: Auth) -> Result<Engine, EngineError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(EngineError::Runtime)?;
        let allowed = std::env::var(DEADLINE_ENV)
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
            .map_or(DEADLINE, Duration::from_secs);
        Ok(Engine {
            url,
            auth,
            runtime,
            deadline: Instant::now() + allowed,
            allowed,
        })
    }

    /// The URL as given.
    pub(crate) fn url(&self) -> &str {
        &self.url.text
    }

    /// `query` evaluated at `at_ms`: a range selector's raw samples, per series.
    pub(crate) fn instant(&self, query: &str, at_ms: i64) -> Result<Vec<Series>, EngineError> {
        let data: Matrix = self.get(
            "/api/v1/query",
            &[("query", query), ("time", &seconds(at_ms))],
        )?;
        data.series(self.url(), query)
    }

    /// `query` evaluated from `start_ms` to `end_ms` every `step_ms`, per series.
    pub(crate) fn range(
        &self,
        query: &str,
        start_ms: i64,
        end_ms: i64,
        step_ms: i64,
    ) -> Result<Vec<Series>, EngineError> {
        let data: Matrix = self.get(
            "/api/v1/query_range",
            &[
                ("query", query),
                ("start", &seconds(start_ms)),
                ("end", &seconds(end_ms)),
                ("step", &seconds(step_ms)),
            ],
        )?;
        data.series(self.url(), query)
    }

    /// The values label `name` takes on the series `matcher` picks.
    pub(crate) fn label_values(
        &self,
        name: &str,
        matcher: &str,
    ) -> Result<Vec<String>, EngineError> {
        let data: Bounded<Option<String>> = self.get(
            &format!("/api/v1/label/{name}/values"),
            &[("match[]", matcher)],
        )?;
        Ok(data.kept.into_iter().flatten().collect())
    }

    /// GETs `path` with `params` under the base URL; the answer's `data`, or the engine's
    /// error. The whole exchange ends by the engine's deadline.
    fn get<T: DeserializeOwned>(
        &self,
        path: &str,
        params: &[(&str, &str)],
    ) -> Result<T, EngineError> {
        let query: String = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(params)
            .finish();
        let target = format!("{}{path}?{query}", self.url.path.trim_end_matches('/'));
        let what = params.first().map_or(path, |(_, v)| *v);
        let left = self.deadline.saturating_duration_since(Instant::now());
        let limit = left.min(REQUEST_TIMEOUT);
        let exchange = self.exchange(&target, what);
        let (status, body) = self
            .runtime
            .block_on(async { tokio::time::timeout(limit, exchange).await })
            .map_err(|_| {
                if limit < REQUEST_TIMEOUT {
                    EngineError::Deadline {
                        url: self.url.text.clone(),
                        seconds: self.allowed.as_secs(),
                    }
                } else {
                    EngineError::Timeout {
                        url: self.url.text.clone(),
                        seconds: REQUEST_TIMEOUT.as_secs(),
                    }
                }
            })??;
        match serde_json::from_slice::<Answer<T>>(&body) {
            Ok(a) if a.status == "success" => a.data.ok_or_else(|| EngineError::Malformed {
                query: what.to_owned(),
            }),
            Ok(a) => Err(self.refused(status, a.error_type, a.error)),
            // Read again without the data: the API's answer of another shape, or not the API.
            Err(_) => match serde_json::from_slice::<Answer<IgnoredAny>>(&body) {
                Ok(a) if a.status == "success" => Err(EngineError::Malformed {
                    query: what.to_owned(),
                }),
                Ok(a) => Err(self.refused(status, a.error_type, a.error)),
                Err(_) => Err(EngineError::NotTheApi {
                    url: self.url.text.clone(),
                    status,
                    text: String::from_utf8_lossy(&body[..body.len().min(800)])
                        .chars()
                        .take(200)
                        .collect(),
                }),
            },
        }
    }

    fn refused(&self, status: u16, kind: String, error: String) -> EngineError {
        EngineError::Refused {
            url: self.url.text.clone(),
            status,
            kind,
            error,
        }
    }

    /// The status and body of a GET of `target` (asking `what`), the body read frame by
    /// frame into one buffer of at most [`MAX_ANSWER`] bytes.
    async fn exchange(&self, target: &str, what: &str) -> Result<(u16, Vec<u8>), EngineError> {
        let connect = |source| EngineError::Connect {
            url: self.url.text.clone(),
            source,
        };
        let stream = tokio::net::TcpStream::connect((self.url.host.as_str(), self.url.port))
            .await
            .map_err(connect)?;
        let http = |e: &dyn std::fmt::Display| EngineError::Http {
            url: self.url.text.clone(),
            what: e.to_string(),
        };
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| http(&e))?;
        let driver = tokio::spawn(connection);
        let mut request = hyper::Request::get(target)
            .header(hyper::header::HOST, &self.url.authority)
            .header(
                hyper::header::USER_AGENT,
                concat!("wattson/", env!("CARGO_PKG_VERSION")),
            );
        if let Some(value) = self.auth.header_value() {
            request = request.header(hyper::header::AUTHORIZATION, value);
        }
        let request = request.body(Empty::<Bytes>::new()).map_err(|e| http(&e))?;
        let response = sender.send_request(request).await.map_err(|e| http(&e))?;
        let status = response.status().as_u16();
        let too_large = || EngineError::TooLarge {
            url: self.url.text.clone(),
            query: what.to_owned(),
            mib: MAX_ANSWER / (1024 * 1024),
        };
        let declared = response
            .headers()
            .get(hyper::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
        if declared.is_some_and(|n| n > MAX_ANSWER) {
            return Err(too_large());
        }
        let mut body = Vec::with_capacity(declared.unwrap_or(0));
        let mut stream = response.into_body();
        while let Some(frame) = stream.frame().await {
            if let Ok(data) = frame.map_err(|e| http(&e))?.into_data() {
                if body.len() + data.len() > MAX_ANSWER {
                    return Err(too_large());
                }
                body.extend_from_slice(&data);
            }
        }
        driver.abort();
        Ok((status, body))
    }
}

/// Seconds since the epoch with milliseconds, as the API takes times.
fn seconds(ms: i64) -> String {
    format!("{}.{:03}", ms.div_euclid(1000), ms.rem_euclid(1000))
}

/// The API's answer: `data` where `status` is `success`, else the engine's error.
#[derive(Deserialize)]
struct Answer<T> {
    status: String,
    data: Option<T>,
    #[serde(default, rename = "errorType")]
    error_type: String,
    #[serde(default)]
    error: String,
}

/// A `matrix` answer's series, the first [`MAX_SERIES`] of them kept.
#[derive(Deserialize)]
struct Matrix {
    #[serde(rename = "resultType")]
    result_type: String,
    result: Bounded<RawSeries>,
}

#[derive(Deserialize)]
struct RawSeries {
    metric: BTreeMap<String, Option<String>>,
    /// Absent where the series holds only histograms, which wattson never sends.
    #[serde(default)]
    values: Vec<Point>,
}

/// `[ts_s, "value"]`.
struct Point(i64, f64);

impl<'de> Deserialize<'de> for Point {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let (ts, value): (f64, std::borrow::Cow<'de, str>) = Deserialize::deserialize(d)?;
        let value = value.parse::<f64>().map_err(serde::de::Error::custom)?;
        Ok(Point((ts * 1000.0).round() as i64, value))
    }
}

/// The first [`MAX_SERIES`] elements of a list and how many it held: the rest are read
/// past, never kept.
struct Bounded<T> {
    kept: Vec<T>,
    total: usize,
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Bounded<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for Visit<T> {
            type Value = Bounded<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a list")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Bounded<T>, A::Error> {
                let mut out = Bounded {
                    kept: Vec::new(),
                    total: 0,
                };
                while out.total < MAX_SERIES {
                    let Some(t) = seq.next_element()? else {
                        return Ok(out);
                    };
                    out.kept.push(t);
                    out.total += 1;
                }
                while seq.next_element::<IgnoredAny>()?.is_some() {
                    out.total += 1;
                }
                Ok(out)
            }
        }
        d.deserialize_seq(Visit(std::marker::PhantomData))
    }
}

impl Matrix {
    /// The series, or why they are not a report's: another shape, or more than a host has.
    fn series(self, url: &str, query: &str) -> Result<Vec<Series>, EngineError> {
        if self.result_type != "matrix" {
            return Err(EngineError::Malformed {
                query: query.to_owned(),
            });
        }
        if self.result.total > MAX_SERIES {
            return Err(EngineError::TooManySeries {
                url: url.to_owned(),
                query: query.to_owned(),
                count: self.result.total,
                max: MAX_SERIES,
            });
        }
        Ok(self
            .result
            .kept
            .into_iter()
            .map(|s| {
                let labels = s
                    .metric
                    .into_iter()
                    .filter_map(|(k, v)| Some((k, v?)))
                    .collect();
                (labels, s.values.into_iter().map(|p| (p.0, p.1)).collect())
            })
            .collect())
    }
}

/// `name{label="value",...}`: a selector of exactly those labels, values escaped
/// ([`string`]).
pub(crate) fn selector<'a>(
    name: &str,
    labels: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> String {
    let matchers: Vec<String> = labels
        .into_iter()
        .map(|(k, v)| format!("{k}=\"{}\"", string(v)))
        .collect();
    format!("{name}{{{}}}", matchers.join(","))
}

/// `value` as the inside of a PromQL double-quoted string (Go's escapes): backslash and
/// quote escaped, and every control character and line separator written as an escape, so
/// that the string is one line wherever it goes (a query, a rules file's YAML block).
pub(crate) fn string(value: &str) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}') => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_seconds_with_milliseconds() {
        assert_eq!(seconds(1_700_000_000_123), "1700000000.123");
        assert_eq!(seconds(-1), "-1.999");
        assert_eq!(seconds(5), "0.005");
    }

    #[test]
    fn a_selector_escapes_its_values() {
        assert_eq!(
            selector("m", [("host", "a\"b\\c"), ("channel", "x")]),
            r#"m{host="a\"b\\c",channel="x"}"#
        );
        assert_eq!(
            string("a\nb\r\u{85}\u{2028}\u{1b}[0m"),
            r"a\nb\r\u0085\u2028\u001b[0m"
        );
    }

    #[test]
    fn a_matrix_gives_its_series_every_value_as_given_and_counts_past_its_bound() {
        let m: Matrix = serde_json::from_str(
            r#"{"resultType":"matrix","result":[{"metric":{"host":"a"},
                "values":[[1700000000.5,"40.25"],[1700000001,"NaN"],[1700000002,"-5"],
                [1700000003,"+Inf"]]}]}"#,
        )
        .unwrap();
        let m = m.series("u", "q").unwrap();
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].0["host"], "a");
        assert_eq!(m[0].1[0], (1_700_000_000_500, 40.25));
        assert!(m[0].1[1].1.is_nan());
        assert_eq!(m[0].1[2], (1_700_000_002_000, -5.0));
        assert_eq!(m[0].1[3], (1_700_000_003_000, f64::INFINITY));
        let vector: Matrix =
            serde_json::from_str(r#"{"resultType":"vector","result":[]}"#).unwrap();
        assert!(matches!(
            vector.series("u", "q"),
            Err(EngineError::Malformed { .. })
        ));
        let many = format!(
            r#"{{"resultType":"matrix","result":[{}]}}"#,
            vec![r#"{"metric":{},"values":[]}"#; MAX_SERIES + 3].join(",")
        );
        let m: Matrix = serde_json::from_str(&many).unwrap();
        assert_eq!(
            (m.result.kept.len(), m.result.total),
            (MAX_SERIES, MAX_SERIES + 3)
        );
        assert!(matches!(
            m.series("u", "q"),
            Err(EngineError::TooManySeries { count, .. }) if count == MAX_SERIES + 3
        ));
    }
}
