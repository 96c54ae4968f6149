//! A disk's spin state over time, from readings alone (pure: readings in, spans and
//! transitions out).
//!
//! Two kinds of reading:
//!
//! - [`Observed::Suspended`]: the kernel's runtime PM status of the disk's device
//!   (`suspended` or not), where the kernel manages the disk's power;
//! - [`Observed::Ios`]: reads plus writes completed since boot (`<sysfs>/block/<disk>/stat`
//!   fields 1 and 5). The drive spins itself down `standby_after` after its last command
//!   (its own timer, `hdparm -S`): a count unchanged that long means spun down, and the
//!   first I/O after that is a spin-up.
//!
//! A transition is stamped at the reading that sees it. Spinning down is inferred at the
//! last I/O seen plus `standby_after` (the drive's own timer runs from its last command),
//! so the time between two readings is split there. Before the state is known (the first
//! reading, and I/O seen before any quiet spell) nothing is covered. Units: UTC ms.

/// What the tracker knows of the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Unknown,
    Up,
    Down,
}

/// One reading of a disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Observed {
    /// The runtime PM status: `true` when `suspended`.
    Suspended(bool),
    /// Reads and writes completed since boot.
    Ios(u64),
}

/// A stretch of time in one known state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub from_ms: i64,
    pub to_ms: i64,
    pub up: bool,
}

/// What one reading changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Step {
    /// The time since the previous reading, in known states.
    pub spans: Vec<Span>,
    /// The disk spun up since the previous reading (it was known to be down).
    pub spun_up: bool,
    /// The disk is now known to be down and was not before (spun down, or first known).
    pub went_down: bool,
}

impl Step {
    /// The share of the time since the previous reading the disk was spun up, 0..1; `None`
    /// while none of it is in a known state.
    pub fn up_share(&self) -> Option<f64> {
        let known: i64 = self.spans.iter().map(|s| s.to_ms - s.from_ms).sum();
        let up: i64 = self
            .spans
            .iter()
            .filter(|s| s.up)
            .map(|s| s.to_ms - s.from_ms)
            .sum();
        (known > 0).then(|| up as f64 / known as f64)
    }
}

/// Follows one disk's spin state.
#[derive(Debug, Clone)]
pub struct Tracker {
    standby_after_ms: i64,
    state: State,
    /// The previous reading's time.
    last_ms: Option<i64>,
    /// The previous I/O count.
    last_ios: Option<u64>,
    /// When I/O was last seen (or the first reading, while the state is unknown).
    last_io_ms: i64,
}

impl Tracker {
    /// A tracker for a drive that spins itself down `standby_after_ms` after its last I/O.
    pub fn new(standby_after_ms: i64) -> Tracker {
        Tracker {
            standby_after_ms: standby_after_ms.max(0),
            state: State::Unknown,
            last_ms: None,
            last_ios: None,
            last_io_ms: 0,
        }
    }

    pub fn state(&self) -> State {
        self.state
    }

    /// Takes the reading made at `at_ms`. A reading older than the previous one is ignored.
    pub fn observe(&mut self, at_ms: i64, seen: Observed) -> Step {
        let Some(prev_ms) = self.last_ms else {
            self.last_ms = Some(at_ms);
            self.last_io_ms = at_ms;
            return self.first(seen);
        };
        if at_ms < prev_ms {
            return Step::default();
        }
        self.last_ms = Some(at_ms);
        match seen {
            Observed::Suspended(down) => self.by_status(prev_ms, at_ms, down),
            Observed::Ios(n) => self.by_ios(prev_ms, at_ms, n),
        }
    }

    fn first(&mut self, seen: Observed) -> Step {
        match seen {
            Observed::Suspended(down) => {
                self.state = if down { State::Down } else { State::Up };
                Step {
                    went_down: down,
                    ..Step::default()
                }
            }
            Observed::Ios(n) => {
                self.last_ios = Some(n);
                Step::default()
            }
        }
    }

    fn by_status(&mut self, prev_ms: i64, at_ms: i64, down: bool) -> Step {
        let was = self.state;
        let mut step = Step::default();
        if was != State::Unknown {
            step.spans.push(span(prev_ms, at_ms, was == State::Up));
        }
        self.state = if down { State::Down } else { State::Up };
        step.spun_up = was == State::Down && !down;
        step.went_down = was != State::Down && down;
        step
    }

    fn by_ios(&mut self, prev_ms: i64, at_ms: i64, n: u64) -> Step {
        let moved = self.last_ios.is_none_or(|last| n != last);
        self.last_ios = Some(n);
        let mut step = Step::default();
        match (self.state, moved) {
            (State::Unknown, true) => {
                self.state = State::Up;
                self.last_io_ms = at_ms;
            }
            (State::Unknown, false) => {
                let down_at = self.last_io_ms + self.standby_after_ms;
                if at_ms >= down_at {
                    self.state = State::Down;
                    step.went_down = true;
                    step.spans.push(span(down_at.max(prev_ms), at_ms, false));
                }
            }
            (State::Up, true) => {
                self.last_io_ms = at_ms;
                step.spans.push(span(prev_ms, at_ms, true));
            }
            (State::Up, false) => {
                let down_at = self.last_io_ms + self.standby_after_ms;
                if at_ms >= down_at {
                    let split = down_at.max(prev_ms);
                    step.spans.push(span(prev_ms, split, true));
                    step.spans.push(span(split, at_ms, false));
                    self.state = State::Down;
                    step.went_down = true;
                } else {
                    step.spans.push(span(prev_ms, at_ms, true));
                }
            }
            (State::Down, true) => {
                step.spans.push(span(prev_ms, at_ms, false));
                self.state = State::Up;
                self.last_io_ms = at_ms;
                step.spun_up = true;
            }
            (State::Down, false) => step.spans.push(span(prev_ms, at_ms, false)),
        }
        step.spans.retain(|s| s.to_ms > s.from_ms);
        step
    }
}

fn span(from_ms: i64, to_ms: i64, up: bool) -> Span {
    Span { from_ms, to_ms, up }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn up_ms(steps: &[Step]) -> i64 {
        steps
            .iter()
            .flat_map(|s| &s.spans)
            .filter(|s| s.up)
            .map(|s| s.to_ms - s.from_ms)
            .sum()
    }

    fn covered_ms(steps: &[Step]) -> i64 {
        steps
            .iter()
            .flat_map(|s| &s.spans)
            .map(|s| s.to_ms - s.from_ms)
            .sum()
    }

    /// Readings every 100 ms of a count that `io` says moves at which instants.
    fn play(t: &mut Tracker, until_ms: i64, io: impl Fn(i64) -> u64) -> Vec<Step> {
        (0..=until_ms / 100)
            .map(|i| t.observe(i * 100, Observed::Ios(io(i * 100))))
            .collect()
    }

    #[test]
    fn quiet_from_the_start_is_down_after_standby_and_nothing_before_is_covered() {
        let mut t = Tracker::new(2000);
        let steps = play(&mut t, 3000, |_| 7);
        assert_eq!(t.state(), State::Down);
        assert_eq!(steps.iter().filter(|s| s.went_down).count(), 1);
        assert_eq!(covered_ms(&steps), 1000);
        assert_eq!(up_ms(&steps), 0);
        assert!(steps.iter().all(|s| !s.spun_up));
    }

    #[test]
    fn a_burst_after_a_quiet_spell_is_one_spin_up_and_up_until_standby_after_its_last_io() {
        let mut t = Tracker::new(2000);
        // Quiet until 3 s, I/O every 100 ms from 3.0 s to 4.0 s, then quiet until 9 s.
        let io = |ms: i64| (ms.clamp(2900, 4000) - 2900) as u64 / 100;
        let steps = play(&mut t, 9000, io);
        assert_eq!(steps.iter().filter(|s| s.spun_up).count(), 1);
        assert_eq!(steps.iter().filter(|s| s.went_down).count(), 2);
        // Up from the reading that saw the first I/O (3.0 s) to 4.0 s + 2 s.
        assert_eq!(up_ms(&steps), 3000);
        // Covered from 2 s (first known down) to 9 s.
        assert_eq!(covered_ms(&steps), 7000);
        assert_eq!(t.state(), State::Down);
    }

    #[test]
    fn io_before_the_state_is_known_is_no_spin_up() {
        let mut t = Tracker::new(2000);
        let steps = play(&mut t, 5000, |ms| u64::from(ms >= 500));
        assert!(steps.iter().all(|s| !s.spun_up));
        // Up from 0.5 s (not covered before) to 2.5 s, down after.
        assert_eq!(up_ms(&steps), 2000);
        assert_eq!(covered_ms(&steps), 4500);
    }

    #[test]
    fn a_reading_late_after_standby_splits_at_the_inferred_spin_down() {
        let mut t = Tracker::new(2000);
        t.observe(0, Observed::Ios(1));
        t.observe(100, Observed::Ios(2));
        let s = t.observe(5000, Observed::Ios(2));
        assert!(s.went_down);
        assert_eq!(
            s.spans,
            vec![span(100, 2100, true), span(2100, 5000, false)]
        );
    }

    #[test]
    fn a_counter_that_goes_back_is_io() {
        let mut t = Tracker::new(1000);
        let _ = play(&mut t, 2000, |_| 50);
        let s = t.observe(2100, Observed::Ios(3));
        assert!(s.spun_up);
    }

    #[test]
    fn runtime_status_transitions_are_stamped_at_the_reading_that_sees_them() {
        let mut t = Tracker::new(0);
        let s = t.observe(0, Observed::Suspended(true));
        assert!(s.went_down && s.spans.is_empty());
        let s = t.observe(1000, Observed::Suspended(true));
        assert_eq!(s.spans, vec![span(0, 1000, false)]);
        let s = t.observe(2000, Observed::Suspended(false));
        assert!(s.spun_up && !s.went_down);
        assert_eq!(s.spans, vec![span(1000, 2000, false)]);
        let s = t.observe(5000, Observed::Suspended(true));
        assert!(s.went_down && !s.spun_up);
        assert_eq!(s.spans, vec![span(2000, 5000, true)]);
        assert!(t.observe(4000, Observed::Suspended(false)).spans.is_empty());
    }
}
