//! A running set of workload loop threads: one per CPU asked for, each pinned to it where the
//! kernel allows (else run unpinned, logged and reported), each counting its operations on its
//! own cache lines.
//!
//! Stopping: every thread checks one shared flag between chunks of well under 1 ms of work,
//! so [`LoopSet::stop`] (and dropping a [`LoopSet`]) returns within about a chunk plus the
//! scheduler's wake-up time, and no loop thread outlives its set.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::{ChaseBuffer, DEFAULT_CHASE_BYTES, LoopKind, Workload, WorkloadError, cpus, kernels};

/// One thread's operation counter, alone on its cache lines so threads do not slow each
/// other down by sharing one (128 bytes covers adjacent-line prefetch).
#[repr(align(128))]
#[derive(Default)]
struct Counter(AtomicU64);

/// What the loop threads share with their [`LoopSet`].
struct Shared {
    stop: AtomicBool,
    counters: Box<[Counter]>,
    /// Loop threads that have not yet exited; decremented by each thread's exit guard.
    live: AtomicUsize,
}

/// Decrements [`Shared::live`] when a loop thread exits, however it exits.
struct ExitGuard(Arc<Shared>);

impl Drop for ExitGuard {
    fn drop(&mut self) {
        self.0.live.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A running set of loop threads, one per requested CPU. Stop it with [`LoopSet::stop`];
/// dropping it also stops and joins every thread.
pub struct LoopSet {
    kind: LoopKind,
    cpus: Vec<usize>,
    unpinned: Vec<usize>,
    shared: Arc<Shared>,
    handles: Vec<JoinHandle<()>>,
    started: Instant,
}

impl fmt::Debug for LoopSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoopSet")
            .field("kind", &self.kind)
            .field("cpus", &self.cpus)
            .field("unpinned", &self.unpinned)
            .field("ops", &self.ops())
            .finish_non_exhaustive()
    }
}

/// What a stopped [`LoopSet`] did.
#[derive(Clone, Debug, PartialEq)]
pub struct LoopStats {
    /// The loop kind.
    pub kind: LoopKind,
    /// Number of loop threads.
    pub threads: usize,
    /// Operations done by all threads together.
    pub ops: u64,
    /// Operations per thread, in the order of the CPUs given to [`LoopSet::start`].
    pub per_thread_ops: Vec<u64>,
    /// From just before the first thread started until the last one was joined.
    pub elapsed: Duration,
    /// `ops / elapsed`, all threads together, in operations per second.
    pub ops_per_s: f64,
    /// Whether every thread was pinned to its CPU.
    pub pinned: bool,
    /// From raising the stop flag until the last thread was joined.
    pub stop_latency: Duration,
}

impl LoopStats {
    /// Operations per second per thread (0 with no threads).
    pub fn ops_per_s_per_thread(&self) -> f64 {
        if self.threads == 0 {
            0.0
        } else {
            self.ops_per_s / self.threads as f64
        }
    }
}

impl LoopSet {
    /// Starts one `kind` loop thread per entry of `cpus`, each pinned to that CPU. A memory
    /// loop gets a [`DEFAULT_CHASE_BYTES`] buffer built here; a sweep should prepare a
    /// [`Workload`] once and use [`LoopSet::start_workload`] instead. See there for details.
    pub fn start(kind: LoopKind, cpus: &[usize]) -> Result<LoopSet, WorkloadError> {
        let workload = Workload::with_chase_bytes(kind, DEFAULT_CHASE_BYTES)?;
        LoopSet::start_workload(&workload, cpus)
    }

    /// Starts one loop thread per entry of `cpus` (an empty slice runs nothing, the idle
    /// level), pinned to that CPU. A CPU the thread cannot be pinned to (offline, outside a
    /// cpuset, past the kernel's limit) is not an error: that thread runs unpinned, it is
    /// logged, and [`LoopSet::pinned`] says false. Returns once every thread has tried to pin.
    pub fn start_workload(workload: &Workload, cpus: &[usize]) -> Result<LoopSet, WorkloadError> {
        let kind = workload.kind;
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            counters: cpus.iter().map(|_| Counter::default()).collect(),
            live: AtomicUsize::new(0),
        });
        let mut set = LoopSet {
            kind,
            cpus: cpus.to_vec(),
            unpinned: Vec::new(),
            shared,
            handles: Vec::with_capacity(cpus.len()),
            started: Instant::now(),
        };
        let (ready_tx, ready_rx) = mpsc::channel::<(usize, bool)>();
        for (index, &cpu) in cpus.iter().enumerate() {
            let ready = ready_tx.clone();
            let chase = workload.chase.clone();
            let threads = cpus.len();
            set.shared.live.fetch_add(1, Ordering::AcqRel);
            let guard = ExitGuard(Arc::clone(&set.shared));
            let spawned = std::thread::Builder::new()
                .name(format!("wattson-{kind}-{cpu}"))
                .spawn(move || {
                    let pinned = match cpus::pin_current_thread(cpu) {
                        Ok(()) => true,
                        Err(errno) => {
                            tracing::warn!(cpu, %errno, "cannot pin {kind} loop; running it unpinned");
                            false
                        }
                    };
                    // The receiver only goes away if start() is unwinding; the loop still stops.
                    let _ = ready.send((index, pinned));
                    drop(ready);
                    run_loop(kind, chase.as_ref(), index, threads, &guard.0);
                });
            match spawned {
                Ok(handle) => set.handles.push(handle),
                Err(source) => {
                    // The closure (and its guard) was dropped, so `live` is already right;
                    // dropping `set` stops and joins the threads started so far.
                    return Err(WorkloadError::Spawn { kind, cpu, source });
                }
            }
        }
        drop(ready_tx);
        let mut pinned = vec![true; cpus.len()];
        for (index, ok) in &ready_rx {
            pinned[index] = ok;
        }
        set.unpinned = cpus
            .iter()
            .zip(&pinned)
            .filter(|&(_, &ok)| !ok)
            .map(|(&cpu, _)| cpu)
            .collect();
        Ok(set)
    }

    /// The loop kind.
    pub fn kind(&self) -> LoopKind {
        self.kind
    }

    /// The CPUs asked for, one thread each, in order.
    pub fn cpus(&self) -> &[usize] {
        &self.cpus
    }

    /// Whether every thread is pinned to its CPU.
    pub fn pinned(&self) -> bool {
        self.unpinned.is_empty()
    }

    /// The CPUs whose thread could not be pinned and runs wherever the scheduler puts it.
    pub fn unpinned_cpus(&self) -> &[usize] {
        &self.unpinned
    }

    /// Operations done so far by all threads (counters advance a chunk at a time).
    pub fn ops(&self) -> u64 {
        self.shared
            .counters
            .iter()
            .map(|c| c.0.load(Ordering::Relaxed))
            .sum()
    }

    /// Operations done so far by each thread, in the order of [`LoopSet::cpus`].
    pub fn per_thread_ops(&self) -> Vec<u64> {
        self.shared
            .counters
            .iter()
            .map(|c| c.0.load(Ordering::Relaxed))
            .collect()
    }

    /// Time since the set started.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Stops every thread, waits for all of them to exit and says what they did.
    pub fn stop(mut self) -> LoopStats {
        let stop_latency = self.halt();
        let elapsed = self.started.elapsed();
        let per_thread_ops = self.per_thread_ops();
        let ops = per_thread_ops.iter().sum();
        let secs = elapsed.as_secs_f64();
        LoopStats {
            kind: self.kind,
            threads: self.cpus.len(),
            ops,
            per_thread_ops,
            elapsed,
            ops_per_s: if secs > 0.0 { ops as f64 / secs } else { 0.0 },
            pinned: self.pinned(),
            stop_latency,
        }
    }

    /// Raises the stop flag and joins every thread; returns how long that took.
    fn halt(&mut self) -> Duration {
        let asked = Instant::now();
        self.shared.stop.store(true, Ordering::Relaxed);
        for handle in self.handles.drain(..) {
            if handle.join().is_err() {
                tracing::error!(kind = %self.kind, "a workload loop thread panicked");
            }
        }
        asked.elapsed()
    }
}

impl Drop for LoopSet {
    fn drop(&mut self) {
        if !self.handles.is_empty() {
            self.halt();
        }
    }
}

/// A loop thread's body: chunks of work until the stop flag is up, each chunk added to this
/// thread's counter.
fn run_loop(
    kind: LoopKind,
    chase: Option<&ChaseBuffer>,
    index: usize,
    threads: usize,
    shared: &Shared,
) {
    let Some(counter) = shared.counters.get(index) else {
        return;
    };
    let counter = &counter.0;
    let running = || !shared.stop.load(Ordering::Relaxed);
    match (kind, chase) {
        (LoopKind::Memory, Some(chase)) => {
            let next = chase.entries();
            // Spread the threads around the cycle so they do not walk in each other's wake.
            let mut at = index * next.len() / threads.max(1);
            while running() {
                counter.fetch_add(kernels::memory_chunk(next, &mut at), Ordering::Relaxed);
            }
        }
        (LoopKind::Pause, _) => {
            while running() {
                counter.fetch_add(kernels::pause_chunk(), Ordering::Relaxed);
            }
        }
        // A memory workload always has its buffer; without one, spin rather than do nothing.
        (LoopKind::Spin | LoopKind::Memory, _) => {
            let mut state = kernels::SpinState::new(0x9e37_79b9 ^ index as u64);
            while running() {
                counter.fetch_add(kernels::spin_chunk(&mut state), Ordering::Relaxed);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sweep::workload::cpu_order;

    /// Polls `cond` until it holds or `limit` passes; returns whether it held. A bound, not
    /// a sleep: it returns as soon as the condition is met.
    fn wait_for(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if cond() {
                return true;
            }
            std::thread::yield_now();
        }
        cond()
    }

    /// Generous because tests share two busy cores with other builds.
    const PATIENCE: Duration = Duration::from_secs(20);

    fn small(kind: LoopKind) -> Workload {
        Workload::with_chase_bytes(kind, 1 << 20).unwrap()
    }

    fn first_cpu() -> Vec<usize> {
        cpu_order(None).into_iter().take(1).collect()
    }

    #[test]
    fn every_kind_makes_progress() {
        for kind in LoopKind::ALL {
            let set = LoopSet::start_workload(&small(kind), &first_cpu()).unwrap();
            assert!(wait_for(PATIENCE, || set.ops() > 0), "{kind} never counted");
            let first = set.ops();
            assert!(wait_for(PATIENCE, || set.ops() > first), "{kind} stalled");
            let stats = set.stop();
            assert!(stats.ops > first, "{kind}: {stats:?}");
            assert_eq!(stats.kind, kind);
            assert!(stats.ops_per_s > 0.0);
        }
    }

    #[test]
    fn stop_returns_promptly_with_every_threads_count() {
        // The design budget is 100 ms; the bound here is 1 s because the test machine is
        // shared and noisy. The real figure comes from the workload bench.
        let cpus = cpu_order(None);
        let cpus: Vec<usize> = cpus.iter().chain(&cpus).copied().take(3).collect();
        let set = LoopSet::start_workload(&small(LoopKind::Memory), &cpus).unwrap();
        assert!(wait_for(PATIENCE, || set
            .per_thread_ops()
            .iter()
            .all(|&n| n > 0)));
        let seen = set.ops();
        let asked = Instant::now();
        let stats = set.stop();
        let took = asked.elapsed();
        assert!(took < Duration::from_secs(1), "stop took {took:?}");
        assert!(stats.stop_latency <= took);
        assert_eq!(stats.threads, 3);
        assert_eq!(stats.per_thread_ops.len(), 3);
        assert!(stats.per_thread_ops.iter().all(|&n| n > 0));
        assert_eq!(stats.per_thread_ops.iter().sum::<u64>(), stats.ops);
        assert!(stats.ops >= seen);
        let rate = stats.ops as f64 / stats.elapsed.as_secs_f64();
        assert!((stats.ops_per_s - rate).abs() <= rate * 1e-9);
    }

    #[test]
    fn dropping_the_set_joins_every_thread() {
        let cpus = cpu_order(None);
        let set = LoopSet::start_workload(&small(LoopKind::Pause), &[cpus[0], cpus[0]]).unwrap();
        let shared = Arc::clone(&set.shared);
        assert!(wait_for(PATIENCE, || set.ops() > 0));
        assert_eq!(shared.live.load(Ordering::Acquire), 2);
        // Each thread holds a clone of `shared` until it exits.
        assert_eq!(Arc::strong_count(&shared), 4);
        drop(set);
        assert_eq!(shared.live.load(Ordering::Acquire), 0);
        assert_eq!(Arc::strong_count(&shared), 1);
        let frozen = shared.counters.iter().map(|c| c.0.load(Ordering::Relaxed));
        let frozen: u64 = frozen.sum();
        assert!(frozen > 0);
    }

    #[test]
    fn unpinnable_cpus_run_unpinned_instead_of_failing() {
        // usize::MAX is past nix's CpuSet; 1023 fits the set but no test machine has it, so
        // the kernel refuses it (EINVAL).
        let set = LoopSet::start_workload(&small(LoopKind::Spin), &[usize::MAX, 1023]).unwrap();
        assert!(!set.pinned());
        assert_eq!(set.unpinned_cpus(), &[usize::MAX, 1023]);
        assert!(wait_for(PATIENCE, || set
            .per_thread_ops()
            .iter()
            .all(|&n| n > 0)));
        let stats = set.stop();
        assert!(!stats.pinned);
        assert!(stats.ops > 0);
    }

    #[test]
    fn pinning_to_an_allowed_cpu_is_reported_as_pinned() {
        let set = LoopSet::start_workload(&small(LoopKind::Pause), &first_cpu()).unwrap();
        assert!(set.pinned(), "unpinned: {:?}", set.unpinned_cpus());
        assert!(set.stop().pinned);
    }

    #[test]
    fn no_cpus_is_the_idle_level() {
        let set = LoopSet::start(LoopKind::Spin, &[]).unwrap();
        let stats = set.stop();
        assert_eq!((stats.threads, stats.ops), (0, 0));
        assert!(stats.pinned);
        assert_eq!(stats.ops_per_s_per_thread(), 0.0);
    }
}
