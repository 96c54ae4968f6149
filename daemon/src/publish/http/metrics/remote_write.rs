//! `[prometheus] remote_write`'s own figures (`crate::publish::remote_write`): samples the
//! receiver took, samples it refused for good (a 400, skipped past), requests that failed,
//! the bytes it took, and the stored samples still waiting, labelled by endpoint.

use super::{Families, Snapshot};

/// The sender's counters, when remote write is configured.
pub(super) fn families(f: &mut Families<'_>, s: &Snapshot) {
    let Some(rw) = &s.remote_write else { return };
    let labels = || vec![("host", s.host.clone()), ("endpoint", rw.endpoint.clone())];
    f.counter(
        "remote_write_samples",
        "Samples the remote-write receiver stored, since this endpoint was first written to",
        None,
        vec![(labels(), rw.samples_sent as f64)],
    );
    f.counter(
        "remote_write_samples_rejected",
        "Samples the remote-write receiver refused for good (HTTP 400: out of order, duplicate, too old), skipped past",
        None,
        vec![(labels(), rw.samples_rejected as f64)],
    );
    f.counter(
        "remote_write_failed_requests",
        "Remote-write requests that failed (sent again after a backoff) or were refused",
        None,
        vec![(labels(), rw.failed_requests as f64)],
    );
    f.counter(
        "remote_write_sent_bytes",
        "Request bodies (snappy-compressed protobuf) the remote-write receiver took, since the daemon started",
        None,
        vec![(labels(), rw.bytes_sent as f64)],
    );
    f.gauge(
        "remote_write_pending_samples",
        "Stored samples not yet sent to the remote-write receiver",
        None,
        vec![(labels(), rw.pending as f64)],
    );
}
