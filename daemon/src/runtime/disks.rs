//! Each configured disk's spin state, followed by the daemon (`[[disk]]`): every `interval`
//! its sysfs files are read (off the runtime: file I/O), the tracker
//! ([`wattson_collectors::idle::disks::tracker`]) turns them into spun-up and spun-down time,
//! and at each spin-up the control groups' I/O on the disk since it was last known down
//! names who woke it. What a disk's readings added is stored on the store's thread
//! ([`crate::idle::disk_hours::record`]) at each transition and at least every minute,
//! without waiting for it.
//!
//! Self-cost: two or three small sysfs reads a disk a reading; the cgroup walk and each
//! group's `io.stat` only when the disk goes down and when it spins up (the walk bounded as
//! [`wattson_collectors::cgroup::tree`] bounds it).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use wattson_collectors::SysRoot;
use wattson_collectors::cgroup::ContainerNames;
use wattson_collectors::idle::disks::{self, Culprit, SpinSource};

use crate::config::{Config, DiskConfig};
use crate::idle::disk_hours::{self, DiskKey, NO_CGROUP_V2, Pending};
use crate::store::StoreHandle;

/// What is kept between flushes at most, ms.
const FLUSH_MS: i64 = 60_000;

/// One disk being followed.
struct Watch {
    root: SysRoot,
    name: String,
    tracker: disks::tracker::Tracker,
    names: ContainerNames,
    /// Each group's I/O on the disk when it was last known to go down; `None` before that,
    /// and with no cgroup v2 (or no `dev` to look for).
    baseline: Option<BTreeMap<String, u64>>,
    pending: Pending,
    /// A transition not stored yet.
    due: bool,
    source: SpinSource,
    last_flush_ms: i64,
}

impl Watch {
    fn groups(&mut self, dev: Option<&str>) -> Option<BTreeMap<String, u64>> {
        disks::group_ios(&self.root, &mut self.names, dev?)
    }

    /// One reading at `now_ms`; what to store, when it is time.
    fn poll(&mut self, now_ms: i64) -> Result<Option<Pending>, String> {
        let reading = disks::read_disk(&self.root, &self.name)?;
        self.source = reading.source;
        let step = self.tracker.observe(now_ms, reading.observed);
        let mut spinup = None;
        if step.spun_up {
            let dev = reading.dev.as_deref();
            let who = match (self.baseline.take(), self.groups(dev)) {
                (_, None) if dev.is_some() => (NO_CGROUP_V2.to_owned(), 0),
                (Some(before), Some(after)) => {
                    let c = disks::culprit(&before, &after);
                    (c.label(), c.ios())
                }
                _ => (Culprit::None.label(), 0),
            };
            spinup = Some((now_ms, who.0, who.1));
        }
        if step.went_down {
            self.baseline = self.groups(reading.dev.as_deref());
        }
        // A transition is stored with the first time after it (the reading that sees a
        // spin-down exactly `standby_after` after the last I/O adds none).
        self.due |= step.spun_up || step.went_down;
        self.pending.add(&step, spinup);
        if (self.due && !self.pending.is_empty()) || now_ms - self.last_flush_ms >= FLUSH_MS {
            self.due = false;
            self.last_flush_ms = now_ms;
            return Ok(Some(std::mem::take(&mut self.pending)));
        }
        Ok(None)
    }
}

/// Starts following the configured disks, a task each; `None` without any. Ends with
/// `cancel`.
pub fn spawn(
    config: &Config,
    store: &StoreHandle,
    cancel: &CancellationToken,
) -> Option<JoinHandle<()>> {
    if config.disks.is_empty() {
        return None;
    }
    let mut set = tokio::task::JoinSet::new();
    let retention_ms = i64::try_from(config.storage.raw_retention.as_millis()).unwrap_or(i64::MAX);
    for d in &config.disks {
        let root = SysRoot::new(&config.host.sysfs, &config.host.procfs);
        let names = ContainerNames::new(Some(config.services.docker_root.clone()));
        set.spawn(follow(
            d.clone(),
            Watch {
                root,
                name: d.name.clone(),
                tracker: disks::tracker::Tracker::new(
                    i64::try_from(d.standby_after.as_millis()).unwrap_or(i64::MAX),
                ),
                names,
                baseline: None,
                pending: Pending::default(),
                due: false,
                source: SpinSource::Inferred,
                last_flush_ms: wattson_collectors::now_ms(),
            },
            (config.host.name.clone(), retention_ms),
            store.clone(),
            cancel.clone(),
        ));
    }
    Some(tokio::spawn(async move {
        while set.join_next().await.is_some() {}
    }))
}

/// Reads one disk every `interval` until `cancel`, then stores what is left.
async fn follow(
    disk: DiskConfig,
    watch: Watch,
    (host, retention_ms): (String, i64),
    store: StoreHandle,
    cancel: CancellationToken,
) {
    let watch = Arc::new(Mutex::new(watch));
    let mut tick = tokio::time::interval(disk.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut warned = false;
    loop {
        let last = tokio::select! {
            () = cancel.cancelled() => true,
            _ = tick.tick() => false,
        };
        let w = watch.clone();
        let polled = tokio::task::spawn_blocking(move || {
            let mut w = w.lock().map_err(|_| "the disk's lock".to_owned())?;
            if last {
                w.last_flush_ms = wattson_collectors::now_ms();
                return Ok((Some(std::mem::take(&mut w.pending)), w.source));
            }
            let got = w.poll(wattson_collectors::now_ms())?;
            Ok::<_, String>((got, w.source))
        })
        .await;
        let (pending, source) = match polled {
            Ok(Ok((Some(p), source))) if !p.is_empty() => (p, source),
            Ok(Ok(_)) => {
                if last {
                    break;
                }
                continue;
            }
            Ok(Err(why)) => {
                if !warned {
                    tracing::warn!("disk {}: spin state not read: {why}", disk.name);
                    warned = true;
                }
                continue;
            }
            Err(_) => break,
        };
        let (host, name, watts) = (host.clone(), disk.name.clone(), disk.spun_up_watts);
        let queued = store.submit(move |s| {
            let key = DiskKey {
                host: &host,
                disk: &name,
                source,
                spun_up_watts: watts,
            };
            let now = wattson_collectors::now_ms();
            if let Err(e) = disk_hours::record(s, key, &pending, now, retention_ms) {
                tracing::warn!(
                    "disk {name}: spin state not stored: {}",
                    wattson_collectors::ErrorChain(&e)
                );
            }
        });
        if let Err(e) = queued {
            tracing::warn!("disk {}: spin state not stored: {e}", disk.name);
        }
        if last {
            break;
        }
    }
}
