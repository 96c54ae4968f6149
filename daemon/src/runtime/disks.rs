//! Each configured disk's spin state, followed by the daemon (`[[disk]]`): every `interval`
//! its sysfs files are read (off the runtime: file I/O), the tracker
//! ([`wattson_collectors::idle::disks::tracker`]) turns them into spun-up and spun-down time,
//! and at each spin-up the control groups' I/O on the disk since it was last known down
//! names who woke it. What a disk's readings added is stored on the store's thread
//! ([`crate::idle::disk_hours::record`]) at each transition and at least every minute,
//! without waiting for it. Each reading also stores the share of the time since the one
//! before that the disk was spun up, as the series `disk/disk_spun_up/<disk>`: a signal a
//! calibration may read ([`crate::calibration`]).
//!
//! Self-cost: two or three small sysfs reads a disk a reading; the cgroup walk and each
//! group's `io.stat` (without cgroup v2, every process's `io`) only when the disk goes down
//! and when it spins up (the walk bounded as [`wattson_collectors::cgroup::tree`] bounds it).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use wattson_collectors::cgroup::ContainerNames;
use wattson_collectors::idle::disks::{self, Culprit, SpinSource};
use wattson_collectors::{Metric, Sample, SourceId, SysRoot};

use crate::config::{Config, DiskConfig};
use crate::idle::disk_hours::{self, DiskKey, Pending};
use crate::store::StoreHandle;

/// What is kept between flushes at most, ms.
const FLUSH_MS: i64 = 60_000;

/// One disk being followed.
struct Watch {
    root: SysRoot,
    name: String,
    tracker: disks::tracker::Tracker,
    names: ContainerNames,
    /// Who had done how much I/O when the disk was last known to go down; `None` before.
    baseline: Option<BTreeMap<String, u64>>,
    pending: Pending,
    /// A transition not stored yet.
    due: bool,
    source: SpinSource,
    last_flush_ms: i64,
}

impl Watch {
    /// Each control group's I/O on the disk so far (its `MAJ:MIN` in `io.stat`); without
    /// cgroup v2 (or a `dev` to look for), each process's block I/O on every device.
    fn who_did_io(&mut self, dev: Option<&str>) -> BTreeMap<String, u64> {
        dev.and_then(|d| disks::group_ios(&self.root, &mut self.names, d))
            .unwrap_or_else(|| disks::processes::process_ios(&self.root))
    }

    /// One reading at `now_ms`: what to store, when it is time, and the share of the time
    /// since the previous reading the disk was spun up (`None` while its state is unknown).
    fn poll(&mut self, now_ms: i64) -> Result<(Option<Pending>, Option<f64>), disks::DiskError> {
        let reading = disks::read_disk(&self.root, &self.name)?;
        self.source = reading.source;
        let step = self.tracker.observe(now_ms, reading.observed);
        let share = step.up_share();
        let mut spinup = None;
        if step.spun_up {
            let who = match self.baseline.take() {
                Some(before) => disks::culprit(&before, &self.who_did_io(reading.dev.as_deref())),
                None => Culprit::None,
            };
            spinup = Some((now_ms, who.label(), who.ios()));
        }
        if step.went_down {
            self.baseline = Some(self.who_did_io(reading.dev.as_deref()));
        }
        // A transition is stored with the first time after it (the reading that sees a
        // spin-down exactly `standby_after` after the last I/O adds none).
        self.due |= step.spun_up || step.went_down;
        self.pending.add(&step, spinup);
        if (self.due && !self.pending.is_empty()) || now_ms - self.last_flush_ms >= FLUSH_MS {
            self.due = false;
            self.last_flush_ms = now_ms;
            return Ok((Some(std::mem::take(&mut self.pending)), share));
        }
        Ok((None, share))
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
        let (w, sink) = (watch.clone(), store.clone());
        let polled = tokio::task::spawn_blocking(move || {
            // A poll that panicked ended this loop (`Err(_) => break` below), so the lock is
            // never found poisoned here.
            let mut w = w.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if last {
                w.last_flush_ms = wattson_collectors::now_ms();
                return Ok((Some(std::mem::take(&mut w.pending)), w.source));
            }
            let now = wattson_collectors::now_ms();
            let (got, share) = w.poll(now)?;
            if let Some(share) = share {
                // The spin state as a series (a signal a calibration may read).
                let sample = Sample::new(now, SourceId::Disk, Metric::DiskSpunUp, &w.name, share);
                if let Err(e) = sink.insert(vec![sample]) {
                    tracing::debug!("disk {}: spin share not stored: {e}", w.name);
                }
            }
            Ok::<_, disks::DiskError>((got, w.source))
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

#[cfg(test)]
mod tests {
    use std::path::Path;

    use wattson_collectors::cgroup::fixture::FixtureTree;

    use super::*;

    fn watch(dir: &Path) -> Watch {
        Watch {
            root: SysRoot::new(dir.join("sys"), dir.join("proc")),
            name: "sda".to_owned(),
            tracker: disks::tracker::Tracker::new(1000),
            names: ContainerNames::new(None),
            baseline: None,
            pending: Pending::default(),
            due: false,
            source: SpinSource::Inferred,
            last_flush_ms: 0,
        }
    }

    fn disk(dir: &Path, ios: u64) {
        let sda = dir.join("sys/block/sda");
        std::fs::create_dir_all(&sda).unwrap();
        std::fs::write(sda.join("dev"), "8:0\n").unwrap();
        std::fs::write(sda.join("stat"), format!("{ios} 0 0 0 0 0 0 0 0 0 0\n")).unwrap();
    }

    fn process(dir: &Path, pid: u32, comm: &str, bytes: u64) {
        let p = dir.join(format!("proc/{pid}"));
        std::fs::create_dir_all(&p).unwrap();
        std::fs::write(p.join("comm"), format!("{comm}\n")).unwrap();
        let io = format!("read_bytes: 0\nwrite_bytes: {bytes}\n");
        std::fs::write(p.join("io"), io).unwrap();
    }

    /// Quiet past the standby timer, then `wake` and I/O on the disk: the spin-up stored.
    fn spin_up(w: &mut Watch, dir: &Path, wake: impl FnOnce()) -> Pending {
        for t in 0..=12 {
            let _ = w.poll(t * 100).unwrap();
        }
        wake();
        disk(dir, 11);
        w.poll(1300)
            .unwrap()
            .0
            .expect("a spin-up is stored at once")
    }

    #[test]
    fn a_spin_up_names_the_group_whose_io_on_the_disk_rose_most() {
        let dir = tempfile::tempdir().unwrap();
        disk(dir.path(), 10);
        let tree = FixtureTree::v2(&dir.path().join("sys")).unwrap();
        for g in ["system.slice/backup.service", "system.slice/media.service"] {
            tree.add(g).unwrap();
            tree.set_io_stat(g, &[("8:0", 5, 5)]).unwrap();
        }
        process(dir.path(), 7, "rsync", 1 << 20);
        let mut w = watch(dir.path());
        let p = spin_up(&mut w, dir.path(), || {
            let g = "system.slice/backup.service";
            tree.set_io_stat(g, &[("8:0", 5, 9), ("8:16", 100, 0)])
                .unwrap();
            let g = "system.slice/media.service";
            tree.set_io_stat(g, &[("8:0", 6, 5), ("8:16", 900, 0)])
                .unwrap();
            process(dir.path(), 7, "rsync", 1 << 30);
        });
        assert_eq!(
            p.spinups,
            vec![(1300, "service:backup.service".to_owned(), 4)]
        );
    }

    #[test]
    fn without_cgroup_v2_the_process_whose_block_io_rose_most_is_named() {
        let dir = tempfile::tempdir().unwrap();
        disk(dir.path(), 10);
        process(dir.path(), 7, "rsync", 4096);
        process(dir.path(), 8, "smbd", 4096);
        let mut w = watch(dir.path());
        let p = spin_up(&mut w, dir.path(), || {
            process(dir.path(), 7, "rsync", 5 * 4096);
            process(dir.path(), 8, "smbd", 2 * 4096);
        });
        assert_eq!(p.spinups, vec![(1300, "process:rsync".to_owned(), 4)]);
        assert_eq!(p.hours[&0].2, 1);
    }
}
