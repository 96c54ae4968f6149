//! Work the writer thread does on a schedule of its own, on its own connection: the figures
//! the daemon publishes (today's energy and cost, the projection) are read from the store
//! every few seconds, and reading them on the thread that just committed a batch costs no
//! wake-up of its own and no hand-over between threads.
//!
//! A routine runs once its period has passed, as soon as the writer is awake with nothing
//! left to flush (after the next batch, in a daemon whose sampler hands one over every few
//! seconds), and at the latest half a period later on a quiet store. A caller may ask for a
//! run now ([`super::StoreHandle::run_routine`]); the routine decides whether its last
//! figures are fresh enough.

use std::time::{Duration, Instant};

use super::Store;

/// Periodic work on the writer's connection.
pub trait Routine: Send {
    /// Read and publish; `asked`: a caller asked for this run. Returns whether it read (a
    /// run that only answered from its last read does not move the schedule).
    fn run(&mut self, store: &Store, asked: bool) -> bool;
}

/// A routine's handle, to ask for a run or to remove it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoutineId(pub(super) u64);

struct Entry {
    id: RoutineId,
    routine: Box<dyn Routine>,
    period: Duration,
    due: Instant,
    /// A caller asked for a run, to come after what was queued before the request.
    asked: bool,
}

/// The writer thread's routines and when each is due.
#[derive(Default)]
pub(super) struct Routines {
    entries: Vec<Entry>,
}

impl Routines {
    /// Adds `routine`, due at once.
    pub(super) fn add(&mut self, id: RoutineId, routine: Box<dyn Routine>, period: Duration) {
        self.entries.push(Entry {
            id,
            routine,
            period: period.clamp(Duration::from_millis(100), Duration::from_secs(86_400)),
            due: Instant::now(),
            asked: false,
        });
    }

    pub(super) fn remove(&mut self, id: RoutineId) {
        self.entries.retain(|e| e.id != id);
    }

    /// Runs every routine that is due or was asked for.
    pub(super) fn run_due(&mut self, store: &Store) {
        let now = Instant::now();
        for e in &mut self.entries {
            if std::mem::take(&mut e.asked) {
                if e.routine.run(store, true) {
                    e.due = Instant::now() + e.period;
                }
            } else if now >= e.due {
                e.routine.run(store, false);
                e.due = Instant::now() + e.period;
            }
        }
    }

    /// Asks for a run of `id`, after what the writer holds now is flushed.
    pub(super) fn ask(&mut self, id: RoutineId) {
        if let Some(e) = self.entries.iter_mut().find(|e| e.id == id) {
            e.asked = true;
        }
    }

    /// When the writer must wake for a routine although nothing else happens: half a
    /// period after the earliest is due. (One asked for runs in the iteration that asked,
    /// after the writer flushed what it held, so it needs no wake of its own.)
    pub(super) fn latest_wake(&self) -> Option<Instant> {
        self.entries.iter().map(|e| e.due + e.period / 2).min()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use super::*;
    use crate::store::{StoreHandle, StoreOptions};

    /// Tells the test of each run and whether it was asked for.
    struct Tell(mpsc::Sender<bool>);

    impl Routine for Tell {
        fn run(&mut self, _store: &Store, asked: bool) -> bool {
            let _ = self.0.send(asked);
            true
        }
    }

    const WITHIN: Duration = Duration::from_secs(20);

    #[test]
    fn a_routine_runs_at_once_when_asked_on_its_schedule_and_not_after_removal() {
        let dir = tempfile::tempdir().unwrap();
        let (store, join) =
            StoreHandle::spawn(&dir.path().join("r.db"), StoreOptions::default()).unwrap();
        let (tx, rx) = mpsc::channel();
        let hourly = store
            .add_routine(Box::new(Tell(tx.clone())), Duration::from_secs(3600))
            .unwrap();
        assert_eq!(rx.recv_timeout(WITHIN), Ok(false), "runs when added");
        store.run_routine(hourly);
        assert_eq!(rx.recv_timeout(WITHIN), Ok(true), "runs when asked");
        store.remove_routine(hourly);
        store.run_routine(hourly);
        // Commands are handled in order: once this query is answered, a run would have
        // been sent.
        store.query(|_| ()).unwrap();
        assert_eq!(rx.try_recv(), Err(mpsc::TryRecvError::Empty));

        // On a quiet store a routine still runs, at most half a period late.
        let fast = store
            .add_routine(Box::new(Tell(tx)), Duration::from_millis(100))
            .unwrap();
        for _ in 0..3 {
            assert_eq!(rx.recv_timeout(WITHIN), Ok(false));
        }
        store.remove_routine(fast);
        store.close().unwrap();
        join.join().unwrap().unwrap();
    }
}
