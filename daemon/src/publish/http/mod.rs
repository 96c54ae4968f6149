//! `[http]`: HTTP/1.1 over TCP (hyper) on the daemon's async runtime, read-only, one request
//! per connection, serving
//!
//! | path | what |
//! |---|---|
//! | `/metrics` | Prometheus text format 0.0.4, or OpenMetrics 1.0 when the `Accept` header asks for `application/openmetrics-text` ([`metrics`]) |
//! | `/` | the live page for people ([`page`]); it refreshes itself from `/live.json` |
//! | `/live.json` | the live page's figures: current watts, today's energy and cost, the projection, idle states, health |
//! | `/history.json` | the live page's charts ([`history`]): power over the last 24 h by minute and the last hour by 5 s (the wall meter and the calibration's estimate, gaps as breaks), the modes' power levels, and the wall meter's energy and cost on each of the last 30 days, priced by the ledger |
//! | `/report.html`, `/report.json` | `wattson report` of the database as it stands, with the CLI's options as query parameters (`?since=30d`) |
//! | `/healthz` | 200 while the sampler and the store are healthy, 503 otherwise, with the reason |
//!
//! Serving never delays sampling or storing: the sampler and the store's writer run on
//! threads of their own, the ledger's figures come through the feed's watch channel
//! (`runtime::ledger_feed`, which [`Refresher`] asks for fresher ones), and a report runs
//! on a blocking thread over a read-only connection of its own, one at a time, and so does
//! `/history.json` (made only when asked: no browser, no work). A hostile client is bounded: at most
//! [`MAX_CONNECTIONS`] at once (more are closed at once), a request head within
//! [`HEADER_READ_TIMEOUT`] and [`MAX_HEAD_BYTES`] (hyper answers 431 past it), and a
//! connection lives at most [`CONNECTION_LIFETIME`], so a client that never reads its
//! response cannot hold its place.

pub mod history;
pub mod metrics;
pub mod page;
pub mod process;
mod routes;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::live::LiveState;
use crate::live::health::Health;
use crate::publish::mqtt::StateExtras;
use crate::store::{RoutineId, StoreHandle};

/// Connections served at once; further ones are closed as they arrive.
pub const MAX_CONNECTIONS: usize = 64;
/// How long a client has to send a request's head (on a new or a kept-alive connection).
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest request head (request line and headers), bytes: hyper's smallest buffer.
pub const MAX_HEAD_BYTES: usize = 8192;
/// Headers per request.
pub const MAX_HEADERS: usize = 32;
/// How long one connection may stay open, whatever it does.
pub const CONNECTION_LIFETIME: Duration = Duration::from_secs(60);

/// Why `[http]` could not be served.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("http.listen {addr}: cannot listen: {reason}{hint}")]
    Bind {
        addr: SocketAddr,
        reason: String,
        hint: &'static str,
    },
}

/// `http://127.0.0.1:9877`, `http://[::1]:9877`.
pub fn url_of(addr: SocketAddr) -> String {
    format!("http://{addr}")
}

/// Bind `addr` (before the daemon says it is ready, so that a unit ordered after it finds
/// the port open, and a port in use stops the start with the reason).
pub fn bind(addr: SocketAddr) -> Result<std::net::TcpListener, HttpError> {
    let listener = std::net::TcpListener::bind(addr)
        .and_then(|l| l.set_nonblocking(true).map(|()| l))
        .map_err(|e| HttpError::Bind {
            addr,
            hint: match e.kind() {
                std::io::ErrorKind::AddrInUse => {
                    " (another program, or another wattson, listens there: stop it or choose \
                     another port in [http] listen)"
                }
                std::io::ErrorKind::PermissionDenied => {
                    " (ports below 1024 need CAP_NET_BIND_SERVICE: choose a port above 1023)"
                }
                std::io::ErrorKind::AddrNotAvailable => {
                    " (no interface of this machine has that address: use 127.0.0.1, 0.0.0.0, \
                     [::] or one of its own addresses)"
                }
                _ => "",
            },
            reason: crate::store::error_chain(&e),
        })?;
    Ok(listener)
}

/// What the endpoints serve from.
pub struct HttpContext {
    /// The daemon's configuration at start (host, database, tariff, meters).
    pub config: Config,
    pub live: Arc<LiveState>,
    pub health: Health,
    /// The ledger's newest figures, and how to ask for fresher ones.
    pub extras: watch::Receiver<StateExtras>,
    pub refresher: Refresher,
    /// When the daemon started, UTC ms.
    pub started_ms: i64,
    /// A reading older than this is left out (a meter that stopped answering).
    pub stale_after: Duration,
    /// What `[prometheus] remote_write` has sent (empty without it).
    pub remote_write: crate::publish::remote_write::Stats,
}

/// Asks the ledger feed (`runtime::ledger_feed`, which makes one: a routine on the store's
/// writer thread) for fresh figures; the watch channel [`HttpContext::extras`] then changes
/// (with the same figures when the last read is younger than its `MIN_REFRESH`).
#[derive(Debug, Clone)]
pub struct Refresher {
    store: StoreHandle,
    routine: RoutineId,
}

impl Refresher {
    /// A refresher that asks the store's writer to run `routine`.
    pub fn new(store: StoreHandle, routine: RoutineId) -> Refresher {
        Refresher { store, routine }
    }

    /// Never blocks.
    pub fn refresh(&self) {
        self.store.run_routine(self.routine);
    }
}

/// Shared by the connections.
struct Shared {
    ctx: HttpContext,
    /// The wall source (`meter:wall`) whose energy and cost the ledger counts.
    wall: Option<wattson_collectors::SourceId>,
    /// One report at a time.
    reports: Semaphore,
    /// One `/history.json` at a time.
    history: Semaphore,
}

/// The running server; [`HttpHandle::stop`] ends it.
pub struct HttpHandle {
    task: tokio::task::JoinHandle<()>,
    /// The bound address (the port chosen when `listen` said 0).
    pub addr: SocketAddr,
}

impl HttpHandle {
    /// Wait (at most a second) for the server to end after the cancellation.
    pub async fn stop(self) {
        if tokio::time::timeout(Duration::from_secs(1), self.task)
            .await
            .is_err()
        {
            tracing::warn!("the HTTP server did not stop within 1 s");
        }
    }
}

/// Serve `listener` until `cancel`. Call from within the daemon's runtime.
pub fn start(
    ctx: HttpContext,
    listener: std::net::TcpListener,
    cancel: CancellationToken,
) -> std::io::Result<HttpHandle> {
    let listener = tokio::net::TcpListener::from_std(listener)?;
    let addr = listener.local_addr()?;
    ctx.live.keep_per_core();
    let shared = Arc::new(Shared {
        wall: crate::ledger::costs::wall_source(&ctx.config),
        ctx,
        reports: Semaphore::new(1),
        history: Semaphore::new(1),
    });
    tracing::info!(
        "http: serving /metrics, the live page / (/live.json, /history.json), /report.html, \
         /report.json and /healthz on {}",
        url_of(addr)
    );
    let task = tokio::spawn(accept(listener, shared, cancel));
    Ok(HttpHandle { task, addr })
}

async fn accept(listener: tokio::net::TcpListener, shared: Arc<Shared>, cancel: CancellationToken) {
    let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let mut connections = tokio::task::JoinSet::new();
    let mut last_error: Option<String> = None;
    let mut refused = Refusals::default();
    loop {
        tokio::select! {
            () = cancel.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => {
                    last_error = None;
                    match permits.clone().try_acquire_owned() {
                        Ok(permit) => {
                            refused.flush(false);
                            connections.spawn(serve(stream, shared.clone(), permit));
                        }
                        // Closed at once: a flood of connections costs a descriptor for
                        // an instant, not memory.
                        Err(_) => refused.count(),
                    }
                }
                Err(e) => {
                    // Out of descriptors, say: logged once, retried after a pause rather
                    // than in a tight loop.
                    let text = crate::store::error_chain(&e);
                    if last_error.as_deref() != Some(text.as_str()) {
                        tracing::warn!("http: accepting a connection: {text}");
                    }
                    last_error = Some(text);
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    refused.flush(true);
    connections.shutdown().await;
}

/// Connections closed because [`MAX_CONNECTIONS`] were open: the first logged at once, the
/// rest counted and logged at most once a minute, when a connection is served again (the
/// flood is over), and at shutdown, so every refusal is in the log's counts.
#[derive(Default)]
struct Refusals {
    since_log: u64,
    total: u64,
    logged_at: Option<Instant>,
}

impl Refusals {
    fn count(&mut self) {
        self.since_log += 1;
        self.total += 1;
        if self
            .logged_at
            .is_none_or(|t| t.elapsed() >= Duration::from_secs(60))
        {
            self.log();
        }
    }

    /// Log what was refused since the last line, if anything: at shutdown (`last`), or
    /// when a connection is served again and the last line is over 5 s old (a flood's
    /// connections end and begin again many times a second).
    fn flush(&mut self, last: bool) {
        let due = last
            || self
                .logged_at
                .is_none_or(|t| t.elapsed() >= Duration::from_secs(5));
        if self.since_log > 0 && due {
            self.log();
        }
    }

    fn log(&mut self) {
        tracing::warn!(
            "http: {} connection(s) closed unserved: {MAX_CONNECTIONS} were open already \
             ({} since the server started)",
            self.since_log,
            self.total
        );
        self.since_log = 0;
        self.logged_at = Some(Instant::now());
    }
}

/// One connection: one HTTP/1.1 request, within the limits above. The connection closes
/// after its response: a kept-alive connection waits for the next request on a timer of
/// its own, and that timer woke the daemon three times between two Prometheus scrapes
/// (tokio's timer wheel cascades towards a deadline) before it closed the connection anyway
/// (scrapes are further apart than [`HEADER_READ_TIMEOUT`]). A new connection per request
/// costs the client a TCP handshake, on a LAN nothing.
async fn serve(stream: tokio::net::TcpStream, shared: Arc<Shared>, _permit: OwnedSemaphorePermit) {
    let service = hyper::service::service_fn(move |req| {
        let shared = shared.clone();
        async move { Ok::<_, std::convert::Infallible>(routes::route(&req, &shared).await) }
    });
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .keep_alive(false)
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .max_buf_size(MAX_HEAD_BYTES)
        .max_headers(MAX_HEADERS);
    let connection = builder.serve_connection(TokioIo::new(stream), service);
    match tokio::time::timeout(CONNECTION_LIFETIME, connection).await {
        Ok(Ok(())) | Err(_) => {}
        // A client that went away or sent garbage: its business, not the daemon's.
        Ok(Err(e)) => tracing::debug!("http: connection ended: {e}"),
    }
}
