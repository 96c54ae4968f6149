//! The query API of a Prometheus-compatible engine (Prometheus, VictoriaMetrics, Mimir,
//! Thanos): `GET /api/v1/query`, `/api/v1/query_range` and `/api/v1/label/NAME/values`
//! over HTTP/1.1 (hyper's client), one connection a request, each answer's `data` as JSON.

use std::collections::BTreeMap;
use std::time::Duration;

use http_body_util::{BodyExt as _, Empty, Limited};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use serde_json::Value;

use super::EngineError;
use crate::config::RemoteWriteUrl;
use crate::publish::remote_write::Auth;

/// How long one request may take, connection included.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);
/// The largest answer read: a day of one series at 1 Hz is about 3 MB of JSON.
const MAX_ANSWER: usize = 256 * 1024 * 1024;

/// A series' labels (without `__name__` where a function dropped it) and its points,
/// `(ts_ms, value)` in time order.
pub type Series = (BTreeMap<String, String>, Vec<(i64, f64)>);

/// An engine's query API at a base URL (`http://HOST:PORT[/PREFIX]`).
pub struct Engine {
    url: RemoteWriteUrl,
    auth: Auth,
    runtime: tokio::runtime::Runtime,
}

impl Engine {
    /// The engine at `url`, authenticating with `auth`.
    pub fn new(url: RemoteWriteUrl, auth: Auth) -> Result<Engine, EngineError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(EngineError::Runtime)?;
        Ok(Engine { url, auth, runtime })
    }

    /// The URL as given.
    pub fn url(&self) -> &str {
        &self.url.text
    }

    /// `query` evaluated at `at_ms`: a range selector's raw samples, per series.
    pub fn instant(&self, query: &str, at_ms: i64) -> Result<Vec<Series>, EngineError> {
        let data = self.get(
            "/api/v1/query",
            &[("query", query), ("time", &seconds(at_ms))],
        )?;
        matrix(&data, query)
    }

    /// `query` evaluated from `start_ms` to `end_ms` every `step_ms`, per series.
    pub fn range(
        &self,
        query: &str,
        start_ms: i64,
        end_ms: i64,
        step_ms: i64,
    ) -> Result<Vec<Series>, EngineError> {
        let data = self.get(
            "/api/v1/query_range",
            &[
                ("query", query),
                ("start", &seconds(start_ms)),
                ("end", &seconds(end_ms)),
                ("step", &seconds(step_ms)),
            ],
        )?;
        matrix(&data, query)
    }

    /// The values label `name` takes on the series `matcher` picks.
    pub fn label_values(&self, name: &str, matcher: &str) -> Result<Vec<String>, EngineError> {
        let data = self.get(
            &format!("/api/v1/label/{name}/values"),
            &[("match[]", matcher)],
        )?;
        Ok(data
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default())
    }

    /// GETs `path` with `params` under the base URL; the answer's `data`, or the engine's
    /// error.
    fn get(&self, path: &str, params: &[(&str, &str)]) -> Result<Value, EngineError> {
        let query: String = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(params)
            .finish();
        let target = format!("{}{path}?{query}", self.url.path.trim_end_matches('/'));
        let exchange = self.exchange(&target);
        let (status, body) = self
            .runtime
            .block_on(async { tokio::time::timeout(REQUEST_TIMEOUT, exchange).await })
            .map_err(|_| EngineError::Timeout {
                url: self.url.text.clone(),
                seconds: REQUEST_TIMEOUT.as_secs(),
            })??;
        let answer: Value = serde_json::from_slice(&body).map_err(|_| EngineError::NotTheApi {
            url: self.url.text.clone(),
            status,
            text: String::from_utf8_lossy(&body).chars().take(200).collect(),
        })?;
        if answer["status"] != "success" {
            return Err(EngineError::Refused {
                url: self.url.text.clone(),
                status,
                kind: answer["errorType"].as_str().unwrap_or("").to_owned(),
                error: answer["error"].as_str().unwrap_or("").to_owned(),
            });
        }
        Ok(answer["data"].clone())
    }

    async fn exchange(&self, target: &str) -> Result<(u16, Bytes), EngineError> {
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
        let body = Limited::new(response.into_body(), MAX_ANSWER)
            .collect()
            .await
            .map_err(|e| http(&*e))?
            .to_bytes();
        driver.abort();
        Ok((status, body))
    }
}

/// Seconds since the epoch with milliseconds, as the API takes times.
fn seconds(ms: i64) -> String {
    format!("{}.{:03}", ms.div_euclid(1000), ms.rem_euclid(1000))
}

/// A `matrix` answer's series; non-finite values are left out (wattson never sends them).
fn matrix(data: &Value, query: &str) -> Result<Vec<Series>, EngineError> {
    let malformed = || EngineError::Malformed {
        query: query.to_owned(),
    };
    if data["resultType"] != "matrix" {
        return Err(malformed());
    }
    let mut out = Vec::new();
    for s in data["result"].as_array().ok_or_else(malformed)? {
        let labels = s["metric"]
            .as_object()
            .ok_or_else(malformed)?
            .iter()
            .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
            .collect();
        let mut points = Vec::new();
        for p in s["values"].as_array().ok_or_else(malformed)? {
            let ts = p[0].as_f64().ok_or_else(malformed)?;
            let value = p[1]
                .as_str()
                .and_then(|v| v.parse::<f64>().ok())
                .ok_or_else(malformed)?;
            if value.is_finite() {
                points.push(((ts * 1000.0).round() as i64, value));
            }
        }
        out.push((labels, points));
    }
    Ok(out)
}

/// `name{label="value",...}`: a selector of exactly those labels, values escaped
/// ([`string`]).
pub fn selector<'a>(name: &str, labels: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let matchers: Vec<String> = labels
        .into_iter()
        .map(|(k, v)| format!("{k}=\"{}\"", string(v)))
        .collect();
    format!("{name}{{{}}}", matchers.join(","))
}

/// `value` as the inside of a PromQL double-quoted string (Go's escapes): backslash and
/// quote escaped, and every control character and line separator written as an escape, so
/// that the string is one line wherever it goes (a query, a rules file's YAML block).
pub fn string(value: &str) -> String {
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
    fn a_matrix_gives_its_series_and_leaves_out_what_is_not_a_number() {
        let data: Value = serde_json::from_str(
            r#"{"resultType":"matrix","result":[{"metric":{"host":"a"},
                "values":[[1700000000.5,"40.25"],[1700000001,"NaN"],[1700000002,"41"]]}]}"#,
        )
        .unwrap();
        let m = matrix(&data, "q").unwrap();
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].0["host"], "a");
        assert_eq!(
            m[0].1,
            vec![(1_700_000_000_500, 40.25), (1_700_000_002_000, 41.0)]
        );
        let vector: Value = serde_json::from_str(r#"{"resultType":"vector","result":[]}"#).unwrap();
        assert!(matches!(
            matrix(&vector, "q"),
            Err(EngineError::Malformed { .. })
        ));
    }
}
