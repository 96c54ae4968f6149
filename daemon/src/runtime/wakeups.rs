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
    let collector = Arc::new(Mutex::new(WakeupCollector::new(
        &root,
        Some(config.services.docker_root.clone()),
    )));
    let (sources, host, top, interval) = (
        collector.lock().map(|c| c.sources()).unwrap_or_default(),
        config.host.name.clone(),
        config.wakeups.top,
        config.wakeups.interval,
    );
    let retention_ms = i64::try_from(config.storage.raw_retention.as_millis()).unwrap_or(i64::MAX);
    Some(tokio::spawn(async move {
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
    }))
}
