//! What waits for the next flush: batches of samples and gaps, in arrival order, with their
//! size in memory. A failed flush leaves them here to be tried again; past the memory bound
//! the oldest are dropped first (and counted by the caller).

use std::collections::VecDeque;
use wattson_collectors::SourceId;

use wattson_collectors::Sample;

/// One queued item.
pub(super) enum Pending {
    Samples(Option<String>, Vec<Sample>),
    Gap {
        host: Option<String>,
        source: SourceId,
        start_ms: i64,
        end_ms: i64,
        reason: String,
        /// Where the host was away over it (asleep, off), as the kernel told it.
        away: Option<super::Away>,
    },
    /// How `host`'s (the configured host's if `None`) `source` says its power readings
    /// stand, and for how long at most, ms (a fleet host's state declares it).
    Readings {
        host: Option<String>,
        source: SourceId,
        readings: super::integrate::Readings,
        max_hold_ms: Option<i64>,
    },
}

impl Pending {
    /// Samples it holds (a gap counts as one).
    fn count(&self) -> usize {
        match self {
            Pending::Samples(_, samples) => samples.len(),
            Pending::Gap { .. } | Pending::Readings { .. } => 1,
        }
    }

    /// About how many bytes of memory it takes.
    fn bytes(&self) -> usize {
        let text = |s: &Option<String>| s.as_ref().map_or(0, String::capacity);
        match self {
            Pending::Samples(host, samples) => {
                std::mem::size_of::<Self>()
                    + text(host)
                    + samples
                        .iter()
                        .map(|s| {
                            std::mem::size_of::<Sample>()
                                + s.source.heap_bytes()
                                + s.channel.capacity()
                        })
                        .sum::<usize>()
                    + (samples.capacity() - samples.len()) * std::mem::size_of::<Sample>()
            }
            Pending::Gap {
                host,
                source,
                reason,
                ..
            } => std::mem::size_of::<Self>() + text(host) + source.heap_bytes() + reason.capacity(),
            Pending::Readings { host, source, .. } => {
                std::mem::size_of::<Self>() + text(host) + source.heap_bytes()
            }
        }
    }

    /// The earliest timestamp in it.
    fn first_ms(&self) -> Option<i64> {
        match self {
            Pending::Samples(_, samples) => samples.iter().map(|s| s.ts_ms).min(),
            Pending::Gap { start_ms, .. } => Some(*start_ms),
            Pending::Readings { .. } => None,
        }
    }
}

/// Queued items in arrival order.
#[derive(Default)]
pub(super) struct PendingQueue {
    items: VecDeque<(Pending, usize)>,
    samples: usize,
    bytes: usize,
}

/// What [`PendingQueue::drop_oldest`] dropped.
pub(super) struct Dropped {
    pub samples: usize,
    pub oldest_ms: Option<i64>,
}

impl PendingQueue {
    pub(super) fn push(&mut self, item: Pending) {
        let bytes = item.bytes();
        self.samples += item.count();
        self.bytes += bytes;
        self.items.push_back((item, bytes));
    }

    /// Samples (and gaps) queued.
    pub(super) fn samples(&self) -> usize {
        self.samples
    }

    /// Bytes of memory they take, about.
    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }

    pub(super) fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = &Pending> {
        self.items.iter().map(|(p, _)| p)
    }

    /// Drops the oldest items until at most `max_bytes` remain; the newest item is always
    /// kept, however large.
    pub(super) fn drop_oldest(&mut self, max_bytes: usize) -> Dropped {
        let mut dropped = Dropped {
            samples: 0,
            oldest_ms: None,
        };
        while self.bytes > max_bytes && self.items.len() > 1 {
            let Some((item, bytes)) = self.items.pop_front() else {
                break;
            };
            let n = item.count();
            self.samples -= n;
            self.bytes -= bytes;
            dropped.samples += n;
            dropped.oldest_ms = match (dropped.oldest_ms, item.first_ms()) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        dropped
    }
}
