//! The writer thread and its handle: one thread owns the writing connection; everyone else
//! holds a cheap, cloneable [`StoreHandle`] and sends it batches over a bounded queue.
//!
//! `insert` never waits on disk: when the queue is full the batch is dropped and counted.
//! The writer flushes (one transaction) when the oldest waiting sample is
//! `flush_interval` old or `max_batch_samples` wait, and on `flush`, `close` and when the
//! last handle is dropped. It sleeps in a blocking receive while idle, so an idle store
//! costs no wakeups.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, SyncSender, TrySendError};
use std::thread::JoinHandle;
use std::time::Instant;

use wattson_collectors::Sample;

use super::{Store, StoreError, StoreOptions, Writer};

pub use super::writer::FlushStats;

type Job = Box<dyn FnOnce(&Store) + Send>;

enum Reply<T> {
    Blocking(mpsc::SyncSender<T>),
    Async(tokio::sync::oneshot::Sender<T>),
}

impl<T> Reply<T> {
    fn send(self, value: T) {
        // The asker may have given up waiting; nothing to do then.
        match self {
            Reply::Blocking(tx) => drop(tx.send(value)),
            Reply::Async(tx) => drop(tx.send(value)),
        }
    }
}

enum Command {
    Insert(Option<String>, Vec<Sample>),
    Gap {
        host: Option<String>,
        source: String,
        start_ms: i64,
        end_ms: i64,
        reason: String,
    },
    Flush(Reply<Result<FlushStats, StoreError>>),
    Query(Job),
    Close(Reply<Result<FlushStats, StoreError>>),
}

struct Shared {
    path: PathBuf,
    dropped_batches: AtomicU64,
}

/// A cheap, cloneable handle to the writer thread.
#[derive(Clone)]
pub struct StoreHandle {
    tx: SyncSender<Command>,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for StoreHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreHandle")
            .field("path", &self.shared.path)
            .field("dropped_batches", &self.dropped_batches())
            .finish_non_exhaustive()
    }
}

impl StoreHandle {
    /// Opens (creating, migrating) the database at `path` and starts its writer thread.
    /// The thread ends after [`StoreHandle::close`] or when every handle is dropped; its
    /// result is the last flush's.
    pub fn spawn(
        path: &Path,
        options: StoreOptions,
    ) -> Result<(StoreHandle, JoinHandle<Result<(), StoreError>>), StoreError> {
        let store = Store::open(path, &options)?;
        // A service writer touches few pages (the open chunks, the latest rollups): a 1 MiB
        // page cache instead of SQLite's 2 MiB keeps a years-old daemon's memory flat.
        store
            .conn
            .pragma_update(None, "cache_size", -1024)
            .map_err(|source| StoreError::Open {
                path: path.to_owned(),
                source,
            })?;
        let (tx, rx) = mpsc::sync_channel(options.queue_batches.max(1));
        let shared = Arc::new(Shared {
            path: path.to_owned(),
            dropped_batches: AtomicU64::new(0),
        });
        let thread_path = path.to_owned();
        let join = std::thread::Builder::new()
            .name("wattson-store".to_owned())
            .spawn(move || run(Writer::new(store, options), &rx))
            .map_err(|e| StoreError::Open {
                path: thread_path,
                source: rusqlite::Error::ToSqlConversionFailure(Box::new(e)),
            })?;
        Ok((StoreHandle { tx, shared }, join))
    }

    /// Queues samples of the configured host. Never waits: when the queue is full the batch
    /// is dropped, counted, and reported as [`StoreError::QueueFull`].
    pub fn insert(&self, samples: Vec<Sample>) -> Result<(), StoreError> {
        self.send_batch(Command::Insert(None, samples))
    }

    /// Queues samples of another host (a fleet collector). Never waits, like `insert`.
    pub fn insert_for_host(&self, host: &str, samples: Vec<Sample>) -> Result<(), StoreError> {
        self.send_batch(Command::Insert(Some(host.to_owned()), samples))
    }

    /// Records that `source` (of the configured host) produced nothing in
    /// `[start_ms, end_ms]`. Waits only while the queue is full.
    pub fn record_gap(
        &self,
        source: &str,
        start_ms: i64,
        end_ms: i64,
        reason: &str,
    ) -> Result<(), StoreError> {
        self.send(Command::Gap {
            host: None,
            source: source.to_owned(),
            start_ms,
            end_ms,
            reason: reason.to_owned(),
        })
    }

    /// Writes everything queued before this call; waits for the commit.
    /// Do not call from async code: use [`StoreHandle::flush_async`].
    pub fn flush(&self) -> Result<FlushStats, StoreError> {
        let (tx, rx) = mpsc::sync_channel(1);
        self.send(Command::Flush(Reply::Blocking(tx)))?;
        rx.recv().map_err(|_| self.closed())?
    }

    /// [`StoreHandle::flush`] for async callers.
    pub async fn flush_async(&self) -> Result<FlushStats, StoreError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.send(Command::Flush(Reply::Async(tx)))?;
        rx.await.map_err(|_| self.closed())?
    }

    /// Runs `f` on the writer's connection and returns its result. It sees what has been
    /// flushed. Do not call from async code: use [`StoreHandle::query_async`].
    pub fn query<R, F>(&self, f: F) -> Result<R, StoreError>
    where
        F: FnOnce(&Store) -> R + Send + 'static,
        R: Send + 'static,
    {
        let (tx, rx) = mpsc::sync_channel(1);
        self.send(Command::Query(Box::new(move |store| {
            drop(tx.send(f(store)));
        })))?;
        rx.recv().map_err(|_| self.closed())
    }

    /// [`StoreHandle::query`] for async callers.
    pub async fn query_async<R, F>(&self, f: F) -> Result<R, StoreError>
    where
        F: FnOnce(&Store) -> R + Send + 'static,
        R: Send + 'static,
    {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.send(Command::Query(Box::new(move |store| {
            drop(tx.send(f(store)));
        })))?;
        rx.await.map_err(|_| self.closed())
    }

    /// Flushes and stops the writer thread; join its `JoinHandle` afterwards.
    pub fn close(self) -> Result<FlushStats, StoreError> {
        let (tx, rx) = mpsc::sync_channel(1);
        self.send(Command::Close(Reply::Blocking(tx)))?;
        rx.recv().map_err(|_| self.closed())?
    }

    /// [`StoreHandle::close`] for async callers.
    pub async fn close_async(self) -> Result<FlushStats, StoreError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.send(Command::Close(Reply::Async(tx)))?;
        rx.await.map_err(|_| self.closed())?
    }

    /// Batches dropped because the queue was full, since the start.
    pub fn dropped_batches(&self) -> u64 {
        self.shared.dropped_batches.load(Ordering::Relaxed)
    }

    fn send_batch(&self, command: Command) -> Result<(), StoreError> {
        match self.tx.try_send(command) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(_)) => {
                let dropped_batches =
                    self.shared.dropped_batches.fetch_add(1, Ordering::Relaxed) + 1;
                Err(StoreError::QueueFull {
                    path: self.shared.path.clone(),
                    dropped_batches,
                })
            }
            Err(TrySendError::Disconnected(_)) => Err(self.closed()),
        }
    }

    fn send(&self, command: Command) -> Result<(), StoreError> {
        self.tx.send(command).map_err(|_| self.closed())
    }

    fn closed(&self) -> StoreError {
        StoreError::Closed {
            path: self.shared.path.clone(),
        }
    }
}

fn run(mut writer: Writer, rx: &mpsc::Receiver<Command>) -> Result<(), StoreError> {
    let interval = writer_interval(&writer);
    let max_batch = writer_max_batch(&writer);
    let mut deadline: Option<Instant> = None;
    loop {
        let command = match deadline {
            Some(at) => match rx.recv_timeout(at.saturating_duration_since(Instant::now())) {
                Ok(c) => Some(c),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => break,
            },
            None => match rx.recv() {
                Ok(c) => Some(c),
                Err(_) => break,
            },
        };
        match command {
            None => {
                deadline = None;
                if let Err(e) = writer.flush() {
                    tracing::error!("store flush failed; batch lost: {}", error_chain(&e));
                }
            }
            Some(Command::Insert(host, samples)) => {
                writer.push(host, samples);
                deadline.get_or_insert_with(|| Instant::now() + interval);
            }
            Some(Command::Gap {
                host,
                source,
                start_ms,
                end_ms,
                reason,
            }) => {
                writer.record_gap(host, &source, start_ms, end_ms, &reason);
                deadline.get_or_insert_with(|| Instant::now() + interval);
            }
            Some(Command::Flush(reply)) => {
                deadline = None;
                reply.send(writer.flush());
            }
            Some(Command::Query(job)) => job(writer.store()),
            Some(Command::Close(reply)) => {
                let result = writer.flush();
                drop(writer);
                reply.send(result);
                return Ok(());
            }
        }
        if writer.pending() >= max_batch {
            deadline = None;
            if let Err(e) = writer.flush() {
                tracing::error!("store flush failed; batch lost: {}", error_chain(&e));
            }
        }
    }
    writer.flush().map(|_| ())
}

fn writer_interval(writer: &Writer) -> std::time::Duration {
    writer.options().flush_interval
}

fn writer_max_batch(writer: &Writer) -> usize {
    writer.options().max_batch_samples.max(1)
}

/// An error and its causes on one line (SQLite's own reason, such as "database or disk is
/// full", is the cause of the store's error).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let more = s.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = s.source();
    }
    text
}
