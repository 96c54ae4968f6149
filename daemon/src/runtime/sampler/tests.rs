use super::*;
use std::sync::Mutex;
use std::sync::mpsc;
use wattson_collectors::Metric;

static TEST: std::sync::LazyLock<SourceId> = std::sync::LazyLock::new(|| SourceId::meter("test"));

/// The test source's one power sample at `now_ms`.
fn reading(now_ms: i64) -> Sample {
    Sample::new(now_ms, TEST.clone(), Metric::Power, "", 42.0)
}

/// The test source unplugged.
fn unplugged() -> CollectError {
    CollectError::Gone {
        source_name: TEST.to_string(),
        detail: "unplugged".into(),
    }
}

/// The test source's reply did not come in time (the device is still there).
fn timed_out() -> CollectError {
    CollectError::Timeout {
        source_name: TEST.to_string(),
        timeout_ms: 500,
    }
}

/// Fails while the shared flag says so; otherwise returns one power sample.
struct Flaky {
    fail: Arc<Mutex<bool>>,
    polls: Arc<AtomicI64>,
}

impl Collector for Flaky {
    fn source(&self) -> &SourceId {
        &TEST
    }
    fn poll(&mut self, now_ms: i64) -> Result<Vec<Sample>, CollectError> {
        self.polls.fetch_add(1, Ordering::SeqCst);
        if *self.fail.lock().unwrap() {
            Err(unplugged())
        } else {
            Ok(vec![reading(now_ms)])
        }
    }
}

#[derive(Default, Clone)]
struct Recorder {
    samples: Arc<Mutex<Vec<Sample>>>,
    gaps: Arc<Mutex<Vec<(SourceId, i64, i64)>>>,
}

impl SampleSink for Recorder {
    fn samples(&mut self, batch: Vec<Sample>) {
        self.samples.lock().unwrap().extend(batch);
    }
    fn gap(&mut self, source: &SourceId, start_ms: i64, end_ms: i64, _reason: &str) {
        self.gaps
            .lock()
            .unwrap()
            .push((source.clone(), start_ms, end_ms));
    }
}

fn wait_for_polls(polls: &AtomicI64, n: i64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while polls.load(Ordering::SeqCst) < n {
        assert!(Instant::now() < deadline, "sampler stalled");
        std::thread::yield_now();
    }
}

#[test]
fn timestamps_snap_to_the_interval_grid() {
    let s = Duration::from_secs(1);
    assert_eq!(grid_ms(10_003, s), 10_000);
    assert_eq!(grid_ms(9_998, s), 10_000);
    // Far from a tick (a late poll): the real time is kept.
    assert_eq!(grid_ms(10_400, s), 10_400);
    assert_eq!(grid_ms(10_004, Duration::from_millis(5)), 10_005);
}

#[test]
fn failure_then_recovery_records_one_gap_and_no_invented_samples() {
    let fail = Arc::new(Mutex::new(false));
    let polls = Arc::new(AtomicI64::new(0));
    let rec = Recorder::default();
    let (tx, rx) = mpsc::channel();
    let collectors = vec![Scheduled::new(
        Box::new(Flaky {
            fail: fail.clone(),
            polls: polls.clone(),
        }),
        Duration::from_millis(5),
    )];
    let sink = Box::new(rec.clone());
    let handle = std::thread::spawn(move || {
        let live = LiveState::default();
        run(
            collectors,
            sink,
            &rx,
            Duration::from_millis(20),
            &live,
            &Arc::new(AtomicI64::new(0)),
            &InPoll::default(),
        );
    });
    wait_for_polls(&polls, 3);
    *fail.lock().unwrap() = true;
    let failed_from = polls.load(Ordering::SeqCst);
    // The device is gone (unplugged): a gap however short.
    wait_for_polls(&polls, failed_from + 3);
    *fail.lock().unwrap() = false;
    let ok_from = polls.load(Ordering::SeqCst);
    wait_for_polls(&polls, ok_from + 3);
    tx.send(Control::Stop).unwrap();
    handle.join().unwrap();

    let gaps = rec.gaps.lock().unwrap();
    assert_eq!(gaps.len(), 1, "{gaps:?}");
    let samples = rec.samples.lock().unwrap();
    let (_, start, end) = gaps[0];
    assert!(start < end);
    assert!(
        samples.iter().all(|s| s.ts_ms <= start || s.ts_ms >= end),
        "a sample was stored inside the gap"
    );
    assert!(samples.len() >= 6);
}

/// Simulated time: a wait for a due poll moves the clock to it at once, unless a control
/// message is waiting.
struct ManualClock {
    base: Instant,
    offset: Duration,
    wall0_ms: i64,
    /// How long the host has slept, ms: the wall clock runs on over it, the monotonic one
    /// does not (as `CLOCK_MONOTONIC` does not count a suspend).
    slept: Arc<AtomicI64>,
}

impl Clock for ManualClock {
    fn now(&self) -> Instant {
        self.base + self.offset
    }
    fn now_ms(&self) -> i64 {
        self.wall0_ms + self.offset.as_millis() as i64 + self.slept.load(Ordering::SeqCst)
    }
    fn slept_ms(&self) -> Option<i64> {
        Some(self.slept.load(Ordering::SeqCst))
    }
    fn wait(
        &mut self,
        control: &Receiver<Control>,
        deadline: Instant,
    ) -> Result<Control, RecvTimeoutError> {
        match control.try_recv() {
            Ok(c) => Ok(c),
            Err(mpsc::TryRecvError::Disconnected) => Err(RecvTimeoutError::Disconnected),
            Err(mpsc::TryRecvError::Empty) => {
                self.offset = self
                    .offset
                    .max(deadline.saturating_duration_since(self.base));
                Err(RecvTimeoutError::Timeout)
            }
        }
    }
}

/// Fails the polls numbered in `failing` (from 0) with `error` and stops the sampler after
/// `stop_after`.
struct Scripted {
    polls: usize,
    failing: std::ops::Range<usize>,
    error: fn() -> CollectError,
    stop_after: usize,
    stop: mpsc::Sender<Control>,
}

impl Collector for Scripted {
    fn source(&self) -> &SourceId {
        &TEST
    }
    fn poll(&mut self, now_ms: i64) -> Result<Vec<Sample>, CollectError> {
        let n = self.polls;
        self.polls += 1;
        if self.polls == self.stop_after {
            let _ = self.stop.send(Control::Stop);
        }
        if self.failing.contains(&n) {
            return Err((self.error)());
        }
        Ok(vec![reading(now_ms)])
    }
}

const T0: i64 = 1_700_000_000_000;

/// Runs a 1 s collector whose polls numbered in `failing` fail, for `polls` polls on an
/// injected clock; the timestamps stored, the gaps recorded and the last heartbeat.
fn scripted_run(
    failing: std::ops::Range<usize>,
    error: fn() -> CollectError,
    polls: usize,
) -> (Vec<i64>, Vec<(i64, i64)>, i64) {
    let mut clock = ManualClock {
        base: Instant::now(),
        offset: Duration::ZERO,
        wall0_ms: T0,
        slept: Arc::new(AtomicI64::new(0)),
    };
    let (tx, rx) = mpsc::channel();
    let mut scheduled = Scheduled::new(
        Box::new(Scripted {
            polls: 0,
            failing,
            error,
            stop_after: polls,
            stop: tx,
        }),
        Duration::from_secs(1),
    );
    scheduled.next_due = clock.now();
    let rec = Recorder::default();
    let live = LiveState::default();
    let outputs = Outputs {
        live: &live,
        heartbeat: &Arc::new(AtomicI64::new(0)),
        in_poll: &InPoll::default(),
    };
    run_with_clock(
        vec![scheduled],
        Box::new(rec.clone()),
        &rx,
        Duration::from_secs(2),
        &outputs,
        &mut clock,
    );
    let ts = rec
        .samples
        .lock()
        .unwrap()
        .iter()
        .map(|s| s.ts_ms)
        .collect();
    let gaps = rec
        .gaps
        .lock()
        .unwrap()
        .iter()
        .map(|g| (g.1, g.2))
        .collect();
    (ts, gaps, outputs.heartbeat.load(Ordering::Relaxed))
}

/// The schedule on an injected clock: one poll per interval on the wall-clock grid, and an
/// outage longer than the store bridges (three lost polls at 1 s: 4 s between good ones)
/// recorded as one gap from the last good poll to the first good one after, to the
/// millisecond (no sleeping, no real time).
#[test]
fn on_a_manual_clock_polls_keep_the_grid_and_an_outage_is_one_exact_gap() {
    let (ts, gaps, heartbeat) = scripted_run(2..5, timed_out, 7);
    assert_eq!(ts, [T0, T0 + 1000, T0 + 5000, T0 + 6000]);
    assert_eq!(gaps, [(T0 + 1000, T0 + 5000)]);
    assert_eq!(heartbeat, T0 + 6000);
}

/// One or two polls lost to timeouts at 1 s leave good readings 2 or 3 s apart, which the
/// store integrates as it does a late poll: no gap is recorded, so the energy on both sides
/// of the lost poll is kept (a gap threw away two intervals' energy per lost poll). A
/// device that went away is a gap however short.
#[test]
fn a_lost_poll_or_two_is_bridged_not_a_gap() {
    for (failing, want) in [
        (2..3, vec![T0, T0 + 1000, T0 + 3000, T0 + 4000]),
        (2..4, vec![T0, T0 + 1000, T0 + 4000]),
    ] {
        let polls = want.len() + failing.len();
        let (ts, gaps, _) = scripted_run(failing.clone(), timed_out, polls);
        assert_eq!(ts, want, "{failing:?}");
        assert_eq!(gaps, [], "{failing:?}");
        let (ts, gaps, _) = scripted_run(failing.clone(), unplugged, polls);
        assert_eq!(ts, want, "{failing:?}");
        assert_eq!(gaps, [(want[1], want[2])], "{failing:?}");
        assert!(
            ts.windows(2)
                .all(|w| w[1] - w[0] <= crate::store::integrate::max_pair_ms(1000))
        );
    }
}

/// Sleeps the host for `slept_ms` after poll `at` (the kernel's clocks move on, the
/// monotonic one does not).
struct Sleeper {
    polls: usize,
    at: usize,
    slept_ms: i64,
    slept: Arc<AtomicI64>,
    stop_after: usize,
    stop: mpsc::Sender<Control>,
    fail_from: usize,
}

impl Collector for Sleeper {
    fn source(&self) -> &SourceId {
        &TEST
    }
    fn poll(&mut self, now_ms: i64) -> Result<Vec<Sample>, CollectError> {
        let n = self.polls;
        self.polls += 1;
        if n == self.at {
            self.slept.fetch_add(self.slept_ms, Ordering::SeqCst);
        }
        if self.polls == self.stop_after {
            let _ = self.stop.send(Control::Stop);
        }
        if n >= self.fail_from && n <= self.at {
            return Err(timed_out());
        }
        Ok(vec![reading(now_ms)])
    }
}

#[derive(Default, Clone)]
struct AwayRecorder {
    inner: Recorder,
    asleep: Arc<Mutex<Vec<(i64, i64, String)>>>,
    woke: Arc<Mutex<Vec<(i64, i64)>>>,
}

impl SampleSink for AwayRecorder {
    fn samples(&mut self, batch: Vec<Sample>) {
        self.inner.samples(batch);
    }
    fn gap(&mut self, source: &SourceId, start_ms: i64, end_ms: i64, reason: &str) {
        self.inner.gap(source, start_ms, end_ms, reason);
    }
    fn asleep(&mut self, _source: &SourceId, start_ms: i64, end_ms: i64, reason: &str) {
        self.asleep
            .lock()
            .unwrap()
            .push((start_ms, end_ms, reason.to_owned()));
    }
    fn woke(&mut self, at_ms: i64, slept_ms: i64) {
        self.woke.lock().unwrap().push((at_ms, slept_ms));
    }
}

/// A suspend between two polls: the kernel's clocks say the host slept 7 h; the time from
/// the last poll before it to the first after is one gap the host was asleep in, to the
/// millisecond, and no other gap, even where polls were failing when it went to sleep.
#[test]
fn a_suspend_between_polls_is_one_gap_the_host_slept_in() {
    const SLEPT: i64 = 7 * 3_600_000;
    for fail_from in [usize::MAX, 1] {
        let slept = Arc::new(AtomicI64::new(0));
        let mut clock = ManualClock {
            base: Instant::now(),
            offset: Duration::ZERO,
            wall0_ms: T0,
            slept: slept.clone(),
        };
        let (tx, rx) = mpsc::channel();
        let mut scheduled = Scheduled::new(
            Box::new(Sleeper {
                polls: 0,
                at: 2,
                slept_ms: SLEPT,
                slept,
                stop_after: 6,
                stop: tx,
                fail_from,
            }),
            Duration::from_secs(1),
        );
        scheduled.next_due = clock.now();
        let rec = AwayRecorder::default();
        let live = LiveState::default();
        let outputs = Outputs {
            live: &live,
            heartbeat: &Arc::new(AtomicI64::new(0)),
            in_poll: &InPoll::default(),
        };
        run_with_clock(
            vec![scheduled],
            Box::new(rec.clone()),
            &rx,
            Duration::from_secs(2),
            &outputs,
            &mut clock,
        );
        let last_good = if fail_from == 1 { T0 } else { T0 + 2000 };
        let asleep = rec.asleep.lock().unwrap().clone();
        assert_eq!(
            asleep,
            [(
                last_good,
                T0 + 3000 + SLEPT,
                "the host was asleep for 7 h (the kernel's clocks)".to_owned()
            )],
            "fail_from {fail_from}"
        );
        assert_eq!(*rec.woke.lock().unwrap(), [(T0 + 3000 + SLEPT, SLEPT)]);
        assert_eq!(*rec.inner.gaps.lock().unwrap(), [], "fail_from {fail_from}");
        let ts: Vec<i64> = rec
            .inner
            .samples
            .lock()
            .unwrap()
            .iter()
            .map(|s| s.ts_ms)
            .collect();
        assert_eq!(ts.last(), Some(&(T0 + 5000 + SLEPT)), "{ts:?}");
    }
}
