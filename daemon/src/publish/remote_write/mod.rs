//! `[prometheus] remote_write`: wattson's stored series pushed to a Prometheus remote-write
//! receiver (remote write 1.0: a protobuf `WriteRequest`, snappy-compressed, POSTed), under
//! the names and labels of `/metrics` ([`families::family`]).
//!
//! The local store is the queue: each series is sent from its cursor on (a table per
//! endpoint, `schema/0014-remote-write.sql`), at most [`MAX_SAMPLES`] samples a request, so
//! memory holds one batch whatever the backlog. A cursor moves only once the receiver
//! answered: 2xx (stored) or 400 (refused for good: out of order, a duplicate with another
//! value, too old; logged, counted and skipped past). Anything else (no connection, 5xx,
//! 429, 401) keeps the batch and tries it again after the MQTT clients' backoff (0.5 s
//! doubling to 60 s); nothing is dropped while the store holds the raw samples. A restart
//! continues from the cursors; a batch sent but not yet recorded when the daemon stopped is
//! sent again, which a receiver takes as the duplicate it is.

mod client;
pub mod engine;
pub mod families;
mod gaps;
mod proto;
pub mod queue;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use wattson_collectors::SourceId;

pub use client::Auth;
use client::Outcome;
use queue::Answered;

use crate::config::PrometheusConfig;
use crate::publish::mqtt::Backoff;
use crate::store::StoreHandle;

/// The most samples one request carries: the batch held in memory (about 0.5 MB of samples
/// before encoding) and a request size every receiver takes.
pub const MAX_SAMPLES: usize = 10_000;

/// What the sender has done since the endpoint was first written to (the store keeps the
/// totals across restarts), for `/metrics`.
#[derive(Debug, Clone, Default)]
pub struct Stats(Arc<Counters>);

#[derive(Debug, Default)]
struct Counters {
    endpoint: std::sync::OnceLock<String>,
    sent: AtomicU64,
    rejected: AtomicU64,
    failed: AtomicU64,
    pending: AtomicU64,
    bytes: AtomicU64,
}

/// A reading of [`Stats`].
#[derive(Debug, Clone, PartialEq)]
pub struct StatsSnapshot {
    /// The endpoint's URL.
    pub endpoint: String,
    pub samples_sent: u64,
    /// Refused by the receiver with a 400, skipped past.
    pub samples_rejected: u64,
    /// Requests that failed (sent again) or were refused.
    pub failed_requests: u64,
    /// Stored samples not yet sent.
    pub pending: u64,
    /// Request bodies (compressed) the receiver took since the daemon started, bytes.
    pub bytes_sent: u64,
}

impl Stats {
    /// The counters now; `None` before the sender started.
    pub fn snapshot(&self) -> Option<StatsSnapshot> {
        let c = &self.0;
        Some(StatsSnapshot {
            endpoint: c.endpoint.get()?.clone(),
            samples_sent: c.sent.load(Ordering::Relaxed),
            samples_rejected: c.rejected.load(Ordering::Relaxed),
            failed_requests: c.failed.load(Ordering::Relaxed),
            pending: c.pending.load(Ordering::Relaxed),
            bytes_sent: c.bytes.load(Ordering::Relaxed),
        })
    }
}

/// A `[prometheus]` credential file (`key`: `password_file`) that cannot be read.
#[derive(Debug, thiserror::Error)]
#[error("prometheus.{key} {}: {error}", path.display())]
pub struct CredentialError {
    pub key: &'static str,
    pub path: std::path::PathBuf,
    pub error: std::io::Error,
}

/// The credentials of `cfg`, read from their files (a trailing newline dropped).
pub fn auth(cfg: &PrometheusConfig) -> Result<Auth, CredentialError> {
    let read = |path: &std::path::Path, key: &'static str| {
        std::fs::read_to_string(path)
            .map(|s| s.trim_end_matches(['\r', '\n']).to_owned())
            .map_err(|error| CredentialError {
                key,
                path: path.to_owned(),
                error,
            })
    };
    if let Some(path) = &cfg.bearer_token_file {
        return Ok(Auth::Bearer(read(path, "bearer_token_file")?));
    }
    match (&cfg.basic_auth_username, &cfg.password_file) {
        (Some(user), Some(path)) => Ok(Auth::Basic {
            user: user.clone(),
            password: read(path, "password_file")?,
        }),
        _ => Ok(Auth::None),
    }
}

/// Sends `store`'s series to `cfg`'s endpoint until `cancel`; `wall` is the source whose
/// power gives the energy counter.
pub fn spawn(
    cfg: &PrometheusConfig,
    store: StoreHandle,
    wall: Option<SourceId>,
    stats: Stats,
    cancel: CancellationToken,
) -> Result<tokio::task::JoinHandle<()>, CredentialError> {
    let auth = auth(cfg)?;
    let sender = Sender {
        url: cfg.remote_write.clone(),
        interval: cfg.remote_write_interval,
        auth,
        store,
        wall,
        stats,
    };
    tracing::info!(
        "prometheus: remote write to {} every {}",
        sender.url.text,
        crate::config::format_duration(sender.interval)
    );
    Ok(tokio::spawn(sender.run(cancel)))
}

struct Sender {
    url: crate::config::RemoteWriteUrl,
    interval: Duration,
    auth: Auth,
    store: StoreHandle,
    wall: Option<SourceId>,
    stats: Stats,
}

/// A batch encoded and waiting for its answer.
struct Request {
    body: Vec<u8>,
    cursors: queue::Cursors,
    samples: usize,
    more: bool,
}

impl Sender {
    async fn run(self, cancel: CancellationToken) {
        let endpoint = self.url.text.clone();
        let totals = {
            let e = endpoint.clone();
            self.store.query_async(move |s| queue::totals(s, &e)).await
        };
        if let Ok(Ok(t)) = totals {
            let c = &self.stats.0;
            c.sent.store(t.samples_sent, Ordering::Relaxed);
            c.rejected.store(t.samples_rejected, Ordering::Relaxed);
            c.failed.store(t.failed_requests, Ordering::Relaxed);
        }
        let _ = self.stats.0.endpoint.set(endpoint);
        let mut backoff = Backoff::reconnect();
        let mut held: Option<Request> = None;
        let mut failing = false;
        loop {
            let request = if let Some(r) = held.take() {
                r
            } else if let Some(r) = self.next_request().await {
                r
            } else {
                if wait(&cancel, self.interval).await {
                    break;
                }
                continue;
            };
            let outcome = tokio::select! {
                () = cancel.cancelled() => break,
                o = client::post(&self.url, &self.auth, &request.body) => o,
            };
            let pause = match outcome {
                Outcome::Accepted => {
                    if failing {
                        tracing::info!("prometheus: {} takes samples again", self.url.text);
                        failing = false;
                    }
                    backoff.reset();
                    self.stats
                        .0
                        .bytes
                        .fetch_add(request.body.len() as u64, Ordering::Relaxed);
                    self.answered(&request, Answered::Accepted, None).await;
                    (!request.more).then_some(self.interval)
                }
                Outcome::Refused(why) => {
                    tracing::warn!(
                        "prometheus: {} refused {} samples for good, skipped past: {why}",
                        self.url.text,
                        request.samples
                    );
                    self.answered(&request, Answered::Refused, Some(why)).await;
                    None
                }
                Outcome::Failed(why) => {
                    tracing::warn!(
                        "prometheus: remote write to {} failed ({why}); {} samples kept, sent again",
                        self.url.text,
                        request.samples
                    );
                    failing = true;
                    self.stats.0.failed.fetch_add(1, Ordering::Relaxed);
                    let e = self.url.text.clone();
                    let _ = self
                        .store
                        .query_async(move |s| queue::record_failure(s, &e, &why))
                        .await;
                    held = Some(request);
                    Some(backoff.next_delay())
                }
            };
            if let Some(d) = pause
                && wait(&cancel, d).await
            {
                break;
            }
        }
    }

    /// The next batch from the store, encoded; `None` when nothing is waiting (or the store
    /// cannot be read, which is logged).
    async fn next_request(&self) -> Option<Request> {
        let endpoint = self.url.text.clone();
        let wall = self.wall.clone();
        let read = self
            .store
            .query_async(move |s| queue::next_batch(s, &endpoint, wall.as_ref(), MAX_SAMPLES))
            .await
            .and_then(|r| r);
        let batch = match read {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!(
                    "prometheus: reading the next batch: {}",
                    crate::store::error_chain(&e)
                );
                return None;
            }
        };
        self.stats.0.pending.store(batch.pending, Ordering::Relaxed);
        if batch.rollups > 0 {
            tracing::warn!(
                "prometheus: {} hours older than the raw retention go to {} as their hourly \
                 means (the raw samples are no longer stored)",
                batch.rollups,
                self.url.text
            );
        }
        if batch.samples == 0 {
            return None;
        }
        let request = proto::WriteRequest {
            timeseries: batch.timeseries,
        };
        match proto::body(&request) {
            Ok(body) => Some(Request {
                body,
                cursors: batch.cursors,
                samples: batch.samples,
                more: batch.more,
            }),
            Err(e) => {
                tracing::warn!("prometheus: compressing a batch: {e}");
                None
            }
        }
    }

    /// Records the receiver's answer: the cursors move on, the counters count.
    async fn answered(&self, request: &Request, answered: Answered, error: Option<String>) {
        let c = &self.stats.0;
        let n = request.samples as u64;
        match answered {
            Answered::Accepted => c.sent.fetch_add(n, Ordering::Relaxed),
            Answered::Refused => {
                c.failed.fetch_add(1, Ordering::Relaxed);
                c.rejected.fetch_add(n, Ordering::Relaxed)
            }
        };
        c.pending
            .fetch_sub(n.min(c.pending.load(Ordering::Relaxed)), Ordering::Relaxed);
        let endpoint = self.url.text.clone();
        let cursors = request.cursors.clone();
        let samples = request.samples;
        let now = wattson_collectors::now_ms();
        let done = self
            .store
            .query_async(move |s| {
                queue::commit(
                    s,
                    &endpoint,
                    &cursors,
                    samples,
                    answered,
                    now,
                    error.as_deref(),
                )
            })
            .await
            .and_then(|r| r);
        if let Err(e) = done {
            tracing::warn!(
                "prometheus: recording what was sent: {}",
                crate::store::error_chain(&e)
            );
        }
    }
}

/// Sleeps `d`; `true` when cancelled first.
async fn wait(cancel: &CancellationToken, d: Duration) -> bool {
    tokio::select! {
        () = cancel.cancelled() => true,
        () = tokio::time::sleep(d) => false,
    }
}

#[cfg(test)]
mod tests;
