//! The writer thread and its handle: one thread owns the writing connection; everyone else
//! holds a cheap, cloneable [`StoreHandle`] and sends it batches over a bounded queue.
//!
//! `insert` never waits on disk: when the queue is full the batch is dropped and counted.
//! The writer flushes (one transaction) when the oldest waiting sample is
//! `flush_interval` old or `max_batch_samples` wait, and on `flush`, `close` and when the
//! last handle is dropped. It sleeps in a blocking receive while idle, so an idle store
//! costs no wakeups. After a failed flush it tries again every `retry_interval` (new
//! batches wait for that attempt, so a stream of small batches cannot make it retry
//! everything it holds at each one; an explicit `flush` still tries at once) until one
//! commits; [`StoreHandle::health`] says how it stands.
//!
//! [`StoreHandle::spawn`] takes the database's writer lock ([`super::lock`]) before it
//! opens the file, so a second writer is refused with the first one named.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{self, RecvTimeoutError, SyncSender, TrySendError};
use std::thread::JoinHandle;
use std::time::Instant;
use wattson_collectors::SourceId;

use wattson_collectors::Sample;

use super::health::HealthBoard;
use super::lock::WriterLock;
use super::pending::Pending;
use super::routine::{Routine, RoutineId, Routines};
use super::{Store, StoreError, StoreHealth, StoreOptions, Writer, error_chain, wal};

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
    /// Samples or a gap, for the next flush.
    Queue(Pending),
    Flush(Reply<Result<FlushStats, StoreError>>),
    Query(Job),
    Close(Reply<Result<FlushStats, StoreError>>),
    AddRoutine(RoutineId, Box<dyn Routine>, std::time::Duration),
    RunRoutine(RoutineId),
    RemoveRoutine(RoutineId),
}

struct Shared {
    path: PathBuf,
    board: Arc<HealthBoard>,
    next_routine: std::sync::atomic::AtomicU64,
}

/// A cheap, cloneable handle to the writer thread.
#[derive(Clone)]
pub struct StoreHandle {
    /// Boxed commands: the bounded channel allocates and writes every one of its
    /// `queue_batches` slots (1,024 by default) when it is made, so a slot the size of the
    /// largest command (about 100 bytes) would keep 104 KiB resident for the daemon's life to
    /// hold what is nearly always one batch at a time; a pointer keeps 16 KiB. The box costs
    /// one small allocation per batch.
    tx: SyncSender<Box<Command>>,
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
    /// Takes the writer lock of the database at `path` (refused, naming the holder, when
    /// another writer has it), opens it (creating, migrating; refused when the file is
    /// read-only), sets aside undecodable open chunks, and starts its writer thread.
    /// The thread ends after [`StoreHandle::close`] or when every handle is dropped; its
    /// result is the last flush's.
    pub fn spawn(
        path: &Path,
        options: StoreOptions,
    ) -> Result<(StoreHandle, JoinHandle<Result<(), StoreError>>), StoreError> {
        let lock = WriterLock::acquire(path)?;
        let store = Store::open(path, &options)?;
        let sql = |source| StoreError::Open {
            path: path.to_owned(),
            source,
        };
        // A service writer touches few pages (the open chunks, the latest rollups): a 256 KiB
        // page cache (sixteen 16 KiB pages) instead of SQLite's 2 MiB keeps the daemon's
        // memory flat; the pages it drops come back from the OS page cache. Against 1 MiB,
        // side by side (BENCHMARKS.md at d5da645, run 11): RssAnon 2.9 against 3.3 MB after
        // nine minutes, the store thread's CPU the same, the ingest benchmark ~13 % slower.
        store
            .conn
            .pragma_update(None, "cache_size", -256)
            .map_err(sql)?;
        // The migrations ran on this connection before that limit, and creating the tables
        // left their pages in its cache, which the limit does not free: about 0.5 MB of
        // anonymous memory kept for the daemon's life (BENCHMARKS.md at d5da645, run 14).
        // Hand it back.
        store
            .conn
            .execute_batch("PRAGMA shrink_memory")
            .map_err(sql)?;
        // Room for every statement the daemon runs on a schedule (the batch's, the figures',
        // the services' and prices'), about 50: at rusqlite's default of 16 they pushed each
        // other out and were compiled again at every batch.
        store.conn.set_prepared_statement_cache_capacity(64);
        // A log left by a crash or by an older, bigger limit goes back to the file system.
        if let Err(e) = wal::truncate(&store.conn) {
            tracing::warn!(
                "database {}: could not truncate the write-ahead log: {e}",
                path.display()
            );
        }
        let mut writer = Writer::new(store, options).with_lock(lock);
        writer.quarantine_undecodable()?;
        let (tx, rx) = mpsc::sync_channel(writer.options().queue_batches.max(1));
        let shared = Arc::new(Shared {
            path: path.to_owned(),
            board: writer.board(),
            next_routine: std::sync::atomic::AtomicU64::new(0),
        });
        let thread_path = path.to_owned();
        let join = std::thread::Builder::new()
            .name("wattson-store".to_owned())
            .spawn(move || run(writer, &rx))
            .map_err(|source| StoreError::Thread {
                path: thread_path,
                source,
            })?;
        Ok((StoreHandle { tx, shared }, join))
    }

    /// Queues samples of the configured host. Never waits: when the queue is full the batch
    /// is dropped, counted, and reported as [`StoreError::QueueFull`].
    pub fn insert(&self, samples: Vec<Sample>) -> Result<(), StoreError> {
        self.send_batch(Command::Queue(Pending::Samples(None, samples)))
    }

    /// Queues samples of another host (a fleet collector). Never waits, like `insert`.
    pub fn insert_for_host(&self, host: &str, samples: Vec<Sample>) -> Result<(), StoreError> {
        self.send_batch(Command::Queue(Pending::Samples(
            Some(host.to_owned()),
            samples,
        )))
    }

    /// Records that `host`'s `source` produced nothing in `[start_ms, end_ms]` (a fleet
    /// host's gap, as its own store recorded it). Waits only while the queue is full.
    pub fn record_gap_for_host(
        &self,
        host: &str,
        source: &SourceId,
        (start_ms, end_ms): (i64, i64),
        reason: &str,
    ) -> Result<(), StoreError> {
        self.send(Command::Queue(Pending::Gap {
            host: Some(host.to_owned()),
            source: source.clone(),
            start_ms,
            end_ms,
            reason: reason.to_owned(),
            away: None,
        }))
    }

    /// Declares how `host`'s `source` power readings stand and for how long at most, ms
    /// (a fleet host's state says so): stored with its power series, which the writer
    /// integrates by that rule from then on. Waits only while the queue is full.
    pub fn declare_readings_for_host(
        &self,
        host: &str,
        source: &SourceId,
        readings: super::integrate::Readings,
        max_hold_ms: Option<i64>,
    ) -> Result<(), StoreError> {
        self.send(Command::Queue(Pending::Readings {
            host: Some(host.to_owned()),
            source: source.clone(),
            readings,
            max_hold_ms,
        }))
    }

    /// Records that `source` (of the configured host) produced nothing in
    /// `[start_ms, end_ms]`. Waits only while the queue is full.
    pub fn record_gap(
        &self,
        source: &SourceId,
        start_ms: i64,
        end_ms: i64,
        reason: &str,
    ) -> Result<(), StoreError> {
        self.queue_gap(source, (start_ms, end_ms), None, reason)
    }

    /// Records that the host was `away` (asleep, or off, as the kernel told it) over
    /// `[start_ms, end_ms]` of `source` (of the configured host): a gap whose counted energy
    /// is the host's standby or off energy. Waits only while the queue is full.
    pub fn record_away(
        &self,
        source: &SourceId,
        (start_ms, end_ms): (i64, i64),
        away: super::Away,
        reason: &str,
    ) -> Result<(), StoreError> {
        self.queue_gap(source, (start_ms, end_ms), Some(away), reason)
    }

    fn queue_gap(
        &self,
        source: &SourceId,
        (start_ms, end_ms): (i64, i64),
        away: Option<super::Away>,
        reason: &str,
    ) -> Result<(), StoreError> {
        self.send(Command::Queue(Pending::Gap {
            host: None,
            source: source.clone(),
            start_ms,
            end_ms,
            reason: reason.to_owned(),
            away,
        }))
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

    /// Runs `f` on the writer's connection after what is queued, without waiting for it.
    /// Never waits: when the queue is full the job is dropped, counted like a batch, and
    /// reported as [`StoreError::QueueFull`].
    pub fn submit<F>(&self, f: F) -> Result<(), StoreError>
    where
        F: FnOnce(&Store) + Send + 'static,
    {
        self.send_batch(Command::Query(Box::new(f)))
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

    /// Has the writer thread run `routine` every `period` ([`super::routine`]), the first
    /// time at once.
    pub fn add_routine(
        &self,
        routine: Box<dyn Routine>,
        period: std::time::Duration,
    ) -> Result<RoutineId, StoreError> {
        let id = RoutineId(
            self.shared
                .next_routine
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        );
        self.send(Command::AddRoutine(id, routine, period))?;
        Ok(id)
    }

    /// Asks for a run of `id` now. Never waits: when the queue is full the request is
    /// dropped (the routine runs on its schedule).
    pub fn run_routine(&self, id: RoutineId) {
        let _ = self.tx.try_send(Box::new(Command::RunRoutine(id)));
    }

    /// Removes `id`; it does not run again.
    pub fn remove_routine(&self, id: RoutineId) {
        let _ = self.tx.try_send(Box::new(Command::RemoveRoutine(id)));
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
        self.shared.board.dropped_batches()
    }

    /// The writer's health now: whether it can write, what it holds for a retry, what it
    /// dropped or set aside.
    pub fn health(&self) -> StoreHealth {
        self.shared.board.snapshot()
    }

    /// The health board itself: also how long the writer has been in its current write and
    /// when it last committed.
    pub fn board(&self) -> &HealthBoard {
        &self.shared.board
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    fn send_batch(&self, command: Command) -> Result<(), StoreError> {
        match self.tx.try_send(Box::new(command)) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(_)) => {
                let dropped_batches = self.shared.board.dropped_batch();
                Err(StoreError::QueueFull {
                    path: self.shared.path.clone(),
                    dropped_batches,
                })
            }
            Err(TrySendError::Disconnected(_)) => Err(self.closed()),
        }
    }

    fn send(&self, command: Command) -> Result<(), StoreError> {
        self.tx.send(Box::new(command)).map_err(|_| self.closed())
    }

    fn closed(&self) -> StoreError {
        StoreError::Closed {
            path: self.shared.path.clone(),
        }
    }
}

fn run(mut writer: Writer, rx: &mpsc::Receiver<Box<Command>>) -> Result<(), StoreError> {
    let interval = writer.options().flush_interval;
    let retry = writer
        .options()
        .retry_interval
        .max(std::time::Duration::from_millis(10));
    let max_batch = writer.options().max_batch_samples.max(1);
    // While failing, the next attempt is the retry.
    let next = |w: &Writer| if w.failing() { retry } else { interval };
    let mut deadline: Option<Instant> = None;
    let mut routines = Routines::default();
    loop {
        let wake = match (deadline, routines.latest_wake()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let command = match wake {
            Some(at) => match rx.recv_timeout(at.saturating_duration_since(Instant::now())) {
                Ok(c) => Some(*c),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => break,
            },
            None => match rx.recv() {
                Ok(c) => Some(*c),
                Err(_) => break,
            },
        };
        // A failed flush is logged and counted by the writer; its samples stay queued.
        match command {
            // Woken for a routine (below) while the flush can wait.
            None if deadline.is_none_or(|at| Instant::now() < at) => {}
            None => {
                deadline = None;
                let _ = writer.flush();
            }
            Some(Command::Queue(item)) => {
                writer.queue(item);
                deadline.get_or_insert_with(|| Instant::now() + next(&writer));
            }
            Some(Command::Flush(reply)) => {
                deadline = None;
                reply.send(writer.flush());
            }
            Some(Command::Query(job)) => job(writer.store()),
            Some(Command::AddRoutine(id, routine, period)) => routines.add(id, routine, period),
            Some(Command::RunRoutine(id)) => {
                // The asker wants figures that count what was sent before it asked.
                if writer.pending() > 0 && !writer.failing() {
                    deadline = None;
                    let _ = writer.flush();
                }
                routines.ask(id);
            }
            Some(Command::RemoveRoutine(id)) => routines.remove(id),
            Some(Command::Close(reply)) => {
                let result = last_flush(&mut writer);
                drop(writer);
                reply.send(result);
                return Ok(());
            }
        }
        if writer.pending() >= max_batch && !writer.failing() {
            deadline = None;
            let _ = writer.flush();
        }
        if writer.failing() && deadline.is_none() {
            deadline = Some(Instant::now() + retry);
        }
        // Routines share the wake-up of a batch, after its flush; half a period late they
        // run anyway (a failing store's retries do not hold them up either).
        let flush_waiting = deadline.is_some() && !writer.failing();
        if !flush_waiting || routines.latest_wake().is_some_and(|w| Instant::now() >= w) {
            routines.run_due(writer.store());
        }
    }
    last_flush(&mut writer).map(|_| ())
}

/// The flush before the writer stops: what it cannot store now is lost, and the error
/// says how much.
fn last_flush(writer: &mut Writer) -> Result<FlushStats, StoreError> {
    writer.flush().map_err(|e| {
        let held = writer.pending();
        if held == 0 {
            return e;
        }
        StoreError::Lost {
            path: writer.store().path().to_owned(),
            detail: format!(
                "{held} samples could not be stored before the writer stopped and are lost: {}",
                error_chain(&e)
            ),
        }
    })
}
