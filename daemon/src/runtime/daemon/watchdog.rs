//! The systemd watchdog while the daemon serves: `WATCHDOG=1` at half the unit's
//! `WatchdogSec` while the sampler and the store are healthy; while not, no ping, so that
//! systemd restarts the service, and the reason logged once and shown as the unit's status.

use tokio_util::sync::CancellationToken;

use crate::live::health::Health;
use crate::runtime::notify::Notifier;

/// Pings the watchdog until `cancel`, where systemd asked for one (`WATCHDOG_USEC`).
pub(super) fn spawn(
    health: &Health,
    cancel: &CancellationToken,
) -> Option<tokio::task::JoinHandle<()>> {
    let watchdog = crate::runtime::notify::watchdog_interval();
    watchdog.map(|interval| {
        let health = health.clone();
        let cancel = cancel.clone();
        let notifier = Notifier::from_env();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(interval / 2);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut withheld: Option<String> = None;
            loop {
                tokio::select! {
                    () = cancel.cancelled() => break,
                    _ = tick.tick() => watchdog_tick(&health, &notifier, &mut withheld),
                }
            }
        })
    })
}

/// One watchdog tick: `WATCHDOG=1` while healthy; while not, no ping (systemd restarts the
/// service after `WatchdogSec`), the reason logged once and shown as the unit's status.
fn watchdog_tick(health: &Health, notifier: &Notifier, withheld: &mut Option<String>) {
    let report = health.report();
    if report.healthy {
        notifier.watchdog();
        if withheld.take().is_some() {
            tracing::warn!("healthy again: watchdog pings resumed");
            notifier.status("healthy again");
        }
        return;
    }
    // Logged when the set of unhealthy parts changes, not at every tick of a growing count.
    let parts = format!("{}{}", report.sampler.healthy, report.store.healthy);
    if withheld.as_deref() != Some(parts.as_str()) {
        let reason = report.reason();
        tracing::error!("{reason}: withholding watchdog pings");
        notifier.status(&format!("unhealthy: {reason}"));
    }
    *withheld = Some(parts);
}
