//! The sampling thread as the daemon runs it: started with the store as its sink (the
//! services collector's samples into their own tables, a wake from sleep stored with this
//! boot's id), and stopped within [`DRAIN_TIMEOUT`], a collector stuck in a read named and
//! left behind. What the thread does each pass is [`crate::runtime::sampler`]'s.

use std::sync::Arc;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;
use wattson_collectors::SourceId;

use crate::config::Config;
use crate::live::LiveState;
use crate::runtime::RuntimeError;
use crate::runtime::sampler::{self, Control, Heartbeat, InPoll, SampleSink, Scheduled};
use crate::store::StoreHandle;

/// The store as the sampler's sink; the services collector's samples go to their own
/// tables instead.
struct StoreSink {
    store: StoreHandle,
    services: crate::runtime::services_sink::ServicesSink,
    host: String,
    /// This boot's id, where the kernel tells it: stored with the time asleep on waking.
    boot_id: Option<String>,
}

impl SampleSink for StoreSink {
    fn samples(&mut self, mut batch: Vec<wattson_collectors::Sample>) {
        self.services.take(&mut batch);
        if let Err(e) = self.store.insert(batch) {
            tracing::warn!("samples not stored: {}", wattson_collectors::ErrorChain(&e));
        }
    }

    fn gap(&mut self, source: &SourceId, start_ms: i64, end_ms: i64, reason: &str) {
        if let Err(e) = self.store.record_gap(source, start_ms, end_ms, reason) {
            tracing::warn!("gap not recorded: {}", wattson_collectors::ErrorChain(&e));
        }
    }

    fn asleep(&mut self, source: &SourceId, start_ms: i64, end_ms: i64, reason: &str) {
        let away = crate::store::Away::Asleep;
        if let Err(e) = self
            .store
            .record_away(source, (start_ms, end_ms), away, reason)
        {
            tracing::warn!("gap not recorded: {}", wattson_collectors::ErrorChain(&e));
        }
    }

    fn woke(&mut self, at_ms: i64, slept_ms: i64) {
        if let Some(boot_id) = &self.boot_id {
            let clock = wattson_collectors::kernel_clock::BootClock {
                boot_id: boot_id.clone(),
                slept_ms,
                since_boot_ms: 0,
            };
            crate::runtime::downtime::record_clock(&self.store, &self.host, at_ms, &clock);
        }
    }
}

/// How long a stop waits for the sampling thread to finish its poll and hand over its
/// buffer: longer than any collector's own I/O timeout (IPMI's command gets 5 s).
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(6);

/// The sampling thread, and what stopping it needs: its done signal and what it is polling.
pub(super) struct SamplerThread {
    thread: JoinHandle<()>,
    /// The sampler says it is done here; a thread that panics drops it instead.
    done: mpsc::Receiver<()>,
    in_poll: Arc<InPoll>,
}

impl SamplerThread {
    /// Starts sampling `collectors` into the store and `live`, taking orders on `control`.
    pub(super) fn spawn(
        config: &Config,
        collectors: Vec<Scheduled>,
        control: mpsc::Receiver<Control>,
        live: &Arc<LiveState>,
        heartbeat: &Heartbeat,
        store: &StoreHandle,
    ) -> Result<Self, RuntimeError> {
        let in_poll = Arc::new(InPoll::default());
        let (done_tx, done) = mpsc::channel::<()>();
        let live = live.clone();
        let heartbeat = heartbeat.clone();
        let polling = in_poll.clone();
        let root = wattson_collectors::SysRoot::new(&config.host.sysfs, &config.host.procfs);
        let sink = Box::new(StoreSink {
            store: store.clone(),
            services: crate::runtime::services_sink::ServicesSink::new(config, store.clone()),
            host: config.host.name.clone(),
            boot_id: wattson_collectors::kernel_clock::boot_id(&root).ok(),
        });
        let flush = config.storage.flush_interval;
        let thread = std::thread::Builder::new()
            .name("wattson-sampler".to_owned())
            .spawn(move || {
                sampler::run(
                    collectors, sink, &control, flush, &live, &heartbeat, &polling,
                );
                let _ = done_tx.send(());
            })
            .map_err(RuntimeError::SamplerThread)?;
        Ok(SamplerThread {
            thread,
            done,
            in_poll,
        })
    }

    /// Tells the sampler to stop (it flushes its buffer) and waits for it. A collector stuck
    /// in a read (a driver that never returns) must not keep the daemon from stopping: after
    /// [`DRAIN_TIMEOUT`] it is named and left behind, and the exit status says so. Returns
    /// what is stuck.
    pub(super) fn stop(self, control: &mpsc::Sender<Control>) -> Option<String> {
        let _ = control.send(Control::Stop);
        match self.done.recv_timeout(DRAIN_TIMEOUT) {
            Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                if self.thread.join().is_err() {
                    tracing::error!("the sampling thread panicked");
                }
                None
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let what = match self.in_poll.current() {
                    Some((name, for_)) => {
                        format!(
                            "collector {name} has been in one poll for {:.1} s",
                            for_.as_secs_f64()
                        )
                    }
                    None => "no collector is in a poll".to_owned(),
                };
                tracing::error!(
                    "the sampling thread did not stop within {} s ({what}); stopping without \
                     it: the samples it held are lost",
                    DRAIN_TIMEOUT.as_secs()
                );
                Some(what)
            }
        }
    }
}
