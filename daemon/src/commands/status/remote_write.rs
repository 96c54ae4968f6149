//! `wattson status`'s remote-write line: what `[prometheus] remote_write` has sent, what
//! the receiver refused, the failed requests and the stored samples still waiting, read
//! from the cursor tables of the database (the same whether the daemon runs or not).

use std::fmt::Write as _;

use serde::Serialize;

use crate::config::Config;
use crate::publish::remote_write::queue;
use crate::store::Store;

#[derive(Debug, Serialize)]
pub(super) struct RemoteWriteStatus {
    endpoint: String,
    samples_sent: u64,
    samples_rejected: u64,
    failed_requests: u64,
    /// Stored samples not yet sent.
    pending_samples: u64,
    /// The oldest of them, UTC ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    oldest_pending_ms: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_success_ms: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_error: Option<String>,
}

/// The endpoint's figures, when `[prometheus] remote_write` is configured; a database
/// without the cursor tables yet (written by an older wattson) has sent nothing.
pub(super) fn status(config: &Config, store: &Store) -> Option<RemoteWriteStatus> {
    let endpoint = config.prometheus.as_ref()?.remote_write.text.clone();
    let totals = queue::totals(store, &endpoint).unwrap_or_default();
    let (pending_samples, oldest_pending_ms) = queue::backlog(store, &endpoint).unwrap_or_default();
    Some(RemoteWriteStatus {
        endpoint,
        samples_sent: totals.samples_sent,
        samples_rejected: totals.samples_rejected,
        failed_requests: totals.failed_requests,
        pending_samples,
        oldest_pending_ms,
        last_success_ms: totals.last_success_ms,
        last_error: totals.last_error,
    })
}

/// One line, and the last error when there is one.
pub(super) fn render(rw: &RemoteWriteStatus, now_ms: i64, out: &mut String) {
    let _ = write!(
        out,
        "remote write: {} ({} samples sent, {} refused, {} failed requests, {} pending",
        rw.endpoint, rw.samples_sent, rw.samples_rejected, rw.failed_requests, rw.pending_samples
    );
    if let Some(oldest) = rw.oldest_pending_ms {
        let _ = write!(out, ", oldest {} s old", (now_ms - oldest).max(0) / 1000);
    }
    out.push_str(")\n");
    if let Some(e) = &rw.last_error {
        let _ = writeln!(out, "  last error: {e}");
    }
}
