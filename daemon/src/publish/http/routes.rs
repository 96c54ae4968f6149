//! Which path answers what; every answer is built here, none waits on the store's writer.

use std::time::Duration;

use hyper::body::{Bytes, Incoming};
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};

use super::Shared;
use crate::report::ReportRequest;

type Body = http_body_util::Full<Bytes>;

/// How long a request waits for the ledger feed's fresh figures before it answers with the
/// last ones.
const FRESH_WITHIN: Duration = Duration::from_secs(1);

/// The live page may run its own script and frame the report; nothing leaves this origin.
const PAGE_POLICY: &str = "default-src 'none'; script-src 'unsafe-inline'; \
     style-src 'unsafe-inline'; connect-src 'self'; frame-src 'self'; img-src 'self' data:; \
     frame-ancestors 'self'";
/// The report: inline styles and SVG, no script runs.
const REPORT_POLICY: &str =
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; frame-ancestors 'self'";

pub(super) async fn route(req: &Request<Incoming>, shared: &Shared) -> Response<Body> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = text(
            StatusCode::METHOD_NOT_ALLOWED,
            "read-only: only GET and HEAD\n".to_owned(),
        );
        r.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    let query = req.uri().query().unwrap_or("");
    match req.uri().path() {
        "/metrics" => {
            let open_metrics = req
                .headers()
                .get_all(header::ACCEPT)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .any(|v| v.contains("application/openmetrics-text"));
            let extras = fresh_extras(shared).await;
            let snapshot = super::metrics::Snapshot::gather(shared, extras);
            match super::metrics::encode(&snapshot, open_metrics) {
                Ok((body, content_type)) => with_type(StatusCode::OK, body, content_type),
                Err(e) => text(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("encoding the metrics: {e}\n"),
                ),
            }
        }
        "/" | "/index.html" => {
            let mut r = with_type(
                StatusCode::OK,
                super::page::page(),
                "text/html; charset=utf-8",
            );
            policy(&mut r, PAGE_POLICY);
            r
        }
        "/live.json" => {
            let extras = fresh_extras(shared).await;
            let live = super::page::Live::gather(shared, &extras);
            match serde_json::to_string(&live) {
                Ok(body) => with_type(StatusCode::OK, body, "application/json"),
                Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")),
            }
        }
        "/history.json" => history(shared, query).await,
        "/healthz" => {
            let report = shared.ctx.health.report();
            let status = StatusCode::from_u16(report.http_status())
                .unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
            text(status, format!("{}\n", report.reason()))
        }
        "/report.html" => report(shared, query, crate::report::Format::Html).await,
        "/report.json" => report(shared, query, crate::report::Format::Json).await,
        path => text(
            StatusCode::NOT_FOUND,
            format!(
                "no page at {}: try /, /metrics, /live.json, /history.json, /report.html, \
                 /report.json or /healthz\n",
                path.chars().take(200).collect::<String>()
            ),
        ),
    }
}

/// The ledger's figures, refreshed for this request where the feed manages within
/// [`FRESH_WITHIN`].
async fn fresh_extras(shared: &Shared) -> crate::publish::mqtt::StateExtras {
    let mut rx = shared.ctx.extras.clone();
    rx.borrow_and_update();
    shared.ctx.refresher.refresh();
    let _ = tokio::time::timeout(FRESH_WITHIN, rx.changed()).await;
    crate::publish::mqtt::state::with_live_energy(&rx.borrow(), &shared.ctx.live)
}

/// `/history.json`: the charts' history of the database as it stands, on a blocking thread,
/// one at a time; it takes no parameters.
async fn history(shared: &Shared, query: &str) -> Response<Body> {
    if !query.is_empty() {
        return text(
            StatusCode::BAD_REQUEST,
            "/history.json takes no parameters: it is always the last 24 hours, the last hour \
             and the last 30 days\n"
                .to_owned(),
        );
    }
    let Ok(_one_at_a_time) = shared.history.acquire().await else {
        return text(StatusCode::SERVICE_UNAVAILABLE, "stopping\n".to_owned());
    };
    let config = shared.ctx.config.clone();
    let wall = shared.wall.clone();
    let made = tokio::task::spawn_blocking(move || {
        let history = super::history::gather(&config, wall.as_ref(), wattson_collectors::now_ms())
            .map_err(|e| wattson_collectors::ErrorChain(&e).to_string())?;
        serde_json::to_string(&history).map_err(|e| e.to_string())
    })
    .await;
    match made {
        Ok(Ok(body)) => with_type(StatusCode::OK, body, "application/json"),
        Ok(Err(e)) => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("the history could not be made: {e}\n"),
        ),
        Err(e) => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("the history could not be made: {e}\n"),
        ),
    }
}

/// `wattson report` of the database as it stands, on a blocking thread, one at a time.
async fn report(shared: &Shared, query: &str, format: crate::report::Format) -> Response<Body> {
    let args = match super::page::report_args(query, format) {
        Ok(a) => a,
        Err(e) => return text(StatusCode::BAD_REQUEST, format!("{e}\n")),
    };
    let Ok(_one_at_a_time) = shared.reports.acquire().await else {
        return text(StatusCode::SERVICE_UNAVAILABLE, "stopping\n".to_owned());
    };
    let config = shared.ctx.config.clone();
    let made = tokio::task::spawn_blocking(move || produce(&config, &args)).await;
    match made {
        Ok(Ok(body)) => {
            let mut r = match format {
                crate::report::Format::Html => {
                    with_type(StatusCode::OK, body, "text/html; charset=utf-8")
                }
                _ => with_type(StatusCode::OK, body, "application/json"),
            };
            policy(&mut r, REPORT_POLICY);
            r
        }
        // What the query asked for is not there: the client's mistake, 400 with the reason.
        Ok(Err(e)) if e.asked_for_what_is_not_there() => text(
            StatusCode::BAD_REQUEST,
            format!("{}\n", wattson_collectors::ErrorChain(&e)),
        ),
        Ok(Err(e)) => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!(
                "the report could not be made: {}\n",
                wattson_collectors::ErrorChain(&e)
            ),
        ),
        Err(e) => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("the report could not be made: {e}\n"),
        ),
    }
}

fn produce(
    config: &crate::config::Config,
    args: &ReportRequest,
) -> Result<String, crate::report::ProduceError> {
    crate::report::produce(config, args, chrono::Utc::now())
}

fn text(status: StatusCode, body: String) -> Response<Body> {
    with_type(status, body, "text/plain; charset=utf-8")
}

fn with_type(status: StatusCode, body: String, content_type: &'static str) -> Response<Body> {
    let mut r = Response::new(Body::from(body));
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    r
}

fn policy(r: &mut Response<Body>, policy: &'static str) {
    r.headers_mut().insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(policy),
    );
}
