//! The reconnect policy every MQTT client shares: exponential backoff with jitter, back to
//! the first step only after a connection that stayed up.

use std::time::Duration;

/// A connection that stayed up this long resets the backoff to its first step.
pub const STABLE_CONNECTION: Duration = Duration::from_secs(10);

/// Exponential backoff with jitter for reconnecting: each step doubles up to `max`, and the
/// delay actually slept is drawn uniformly from the upper half of the step, so a fleet of
/// daemons that lost the same broker does not reconnect in lockstep.
#[derive(Debug, Clone)]
pub struct Backoff {
    min: Duration,
    max: Duration,
    step: Duration,
}

impl Backoff {
    /// Steps from `min` doubling to `max`.
    pub fn new(min: Duration, max: Duration) -> Backoff {
        Backoff {
            min,
            max: max.max(min),
            step: min,
        }
    }

    /// Every client's policy: 0.5 s doubling to 60 s.
    pub fn reconnect() -> Backoff {
        Backoff::new(Duration::from_millis(500), Duration::from_secs(60))
    }

    /// The delay before the next attempt.
    pub fn next_delay(&mut self) -> Duration {
        let step = self.step;
        self.step = (self.step * 2).min(self.max);
        let half = step / 2;
        let jitter = rand::random_range(0.0..=1.0_f64);
        half + half.mul_f64(jitter)
    }

    /// Back to the shortest step (after a connection that stayed up).
    pub fn reset(&mut self) {
        self.step = self.min;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_with_jitter_and_caps() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_millis(800));
        let d: Vec<Duration> = (0..6).map(|_| b.next_delay()).collect();
        for (i, cap) in [100, 200, 400, 800, 800, 800].iter().enumerate() {
            let cap = Duration::from_millis(*cap);
            assert!(d[i] >= cap / 2 && d[i] <= cap, "{i}: {:?}", d[i]);
        }
        b.reset();
        assert!(b.next_delay() <= Duration::from_millis(100));
    }
}
