//! The state's `sleep` figure: what sleeping when idle would save, read hourly from the last
//! 28 days of the store as the report reads it ([`crate::report::sleep`]).

use std::time::{Duration, Instant};

use crate::publish::mqtt::state::SleepPayload;

/// How often it is read: it rests on four weeks of hours.
const SLEEP_EVERY: Duration = Duration::from_secs(3600);
/// How often while there is none yet (no history, or too little).
const SLEEP_RETRY: Duration = Duration::from_secs(60);

impl super::Feed {
    /// Reads the figure when due, priced at the tariff with the store's price series.
    pub(super) fn sleep(&mut self, s: &crate::store::Store) {
        let every = if self.sleep.2.is_some() {
            SLEEP_EVERY
        } else {
            SLEEP_RETRY
        };
        if self.sleep.0.is_some_and(|at| at.elapsed() < every) {
            return;
        }
        let Some(base) = &self.tariff else {
            return;
        };
        let t = super::figures::with_series(
            s,
            base,
            &mut self.priced,
            &mut self.running,
            &mut self.projection,
        );
        let asked = crate::report::sleep::gather::Asked {
            host: &self.host,
            wall: self.wall.as_ref(),
            since: None,
            until: None,
            now_ms: chrono::Utc::now().timestamp_millis(),
            settings: &self.sleep.1,
        };
        let figure = crate::report::sleep::gather::section(s, t, &asked)
            .map_err(|e| {
                tracing::debug!(
                    "what sleeping would save: {}",
                    wattson_collectors::ErrorChain(&e)
                );
            })
            .ok()
            .flatten();
        self.sleep.0 = Some(Instant::now());
        self.sleep.2 = figure.as_ref().map(SleepPayload::of);
    }
}
