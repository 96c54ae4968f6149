//! Who wakes the CPUs, sampled by the daemon (`[wakeups]`): every `interval` the task and
//! interrupt counters are read once more (off the runtime: a scan of every task's
//! `schedstat` is file I/O), the window since the last read is ranked
//! ([`crate::idle::wakeups::rank`]) and added to its hours on the store's thread
//! ([`crate::idle::wakeup_hours::record`]), without waiting for it.

use std::sync::{Arc, Mutex};

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use wattson_collectors::SysRoot;
use wattson_collectors::idle::wakeups::WakeupCollector;

use crate::config::Config;
use crate::store::StoreHandle;

/// Starts sampling where `[wakeups]` asks for it; `None` otherwise. Ends with `cancel`.
pub fn spawn(
    config: &Config,
    store: StoreHandle,
    cancel: CancellationToken,
) -> Option<JoinHandle<()>> {
    if !config.wakeups.enabled {
        return None;
    }
    let root = SysRoot::new(&config.host.sysfs, &config.host.procfs);
    let collector = WakeupCollector::new(&root, Some(config.services.docker_root.clone()));
    Some(spawn_with(config, collector, store, cancel))
}

/// As [`spawn`], reading `collector` (its clock times each window).
fn spawn_with(
    config: &Config,
    collector: WakeupCollector,
    store: StoreHandle,
    cancel: CancellationToken,
) -> JoinHandle<()> {
    let collector = Arc::new(Mutex::new(collector));
    let (sources, host, top, interval) = (
        collector.lock().map(|c| c.sources()).unwrap_or_default(),
        config.host.name.clone(),
        config.wakeups.top,
        config.wakeups.interval,
    );
    let retention_ms = i64::try_from(config.storage.raw_retention.as_millis()).unwrap_or(i64::MAX);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut warned = false;
        loop {
            tokio::select! {
                () = cancel.cancelled() => break,
                _ = tick.tick() => {}
            }
            let c = collector.clone();
            let polled = tokio::task::spawn_blocking(move || {
                c.lock()
                    .map_err(|_| "the collector's lock".to_owned())
                    .and_then(|mut c| {
                        c.poll()
                            .map_err(|e| wattson_collectors::ErrorChain(&e).to_string())
                    })
            })
            .await;
            let window = match polled {
                Ok(Ok(Some(w))) => w,
                Ok(Ok(None)) => continue,
                Ok(Err(why)) => {
                    if !warned {
                        tracing::warn!("wake-ups: not sampled: {why}");
                        warned = true;
                    }
                    continue;
                }
                Err(_) => break,
            };
            let view =
                crate::idle::wakeups::rank(&window, top, sources.0.clone(), sources.1.clone());
            let (host, end_ms) = (host.clone(), wattson_collectors::now_ms());
            let queued = store.submit(move |s| {
                if let Err(e) =
                    crate::idle::wakeup_hours::record(s, &host, end_ms, &view, retention_ms)
                {
                    tracing::warn!(
                        "wake-ups: window not stored: {}",
                        wattson_collectors::ErrorChain(&e)
                    );
                }
            });
            if let Err(e) = queued {
                tracing::warn!("wake-ups: window not stored: {e}");
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use wattson_collectors::idle::wakeups::fixture::FixtureProc;

    use super::*;

    /// A window is stored at every interval: three windows of the default five minutes, in
    /// paused time (the wait is not what is tested), each timed by the runtime's own clock.
    #[tokio::test(start_paused = true)]
    async fn a_window_is_stored_at_every_interval() {
        let dir = tempfile::tempdir().unwrap();
        let proc = FixtureProc::new(&dir.path().join("proc")).unwrap();
        proc.add_home_server().unwrap();
        let mut config = Config::defaults();
        config.host.name = "h".into();
        config.host.procfs = dir.path().join("proc");
        config.host.sysfs = dir.path().join("sys");
        let (store, thread) = StoreHandle::spawn(
            &dir.path().join("w.db"),
            crate::store::StoreOptions::default(),
        )
        .unwrap();
        let start = tokio::time::Instant::now();
        let clock: wattson_collectors::MonotonicClock =
            Box::new(move || tokio::time::Instant::now() - start);
        let collector = WakeupCollector::with_clock(
            &SysRoot::new(&config.host.sysfs, &config.host.procfs),
            None,
            clock,
        );
        let cancel = CancellationToken::new();
        let task = spawn_with(&config, collector, store.clone(), cancel.clone());
        // The first read at 0 s, then one window at each of 300, 600 and 900 s.
        tokio::time::sleep(config.wakeups.interval * 3 + Duration::from_secs(1)).await;
        cancel.cancel();
        task.await.unwrap();
        let seconds: f64 = store
            .query_async(|s| {
                s.conn()
                    .query_row(
                        "SELECT coalesce(sum(seconds), 0) FROM wakeup_host_hour WHERE host = 'h'",
                        [],
                        |r| r.get(0),
                    )
                    .unwrap_or(-1.0)
            })
            .await
            .unwrap();
        // Three windows of 300 s each, summed in floating point.
        assert!((seconds - 900.0).abs() < 1e-6, "{seconds}");
        drop(store);
        drop(thread);
    }
}
